"""Which model a slice is charged to, before the planner lays it out."""

from webhook.config.cloudmap import default_directory, load_directory
from webhook.config.mig_geometry import load_geometry
from webhook.core.planning.mig_plan import plan_mig
from webhook.core.planning.planner import Gpu
from webhook.core.planning.slice_demand import SliceAsk, SliceDemand

LOADED = load_directory(default_directory())
GEOMETRY = load_geometry(LOADED.catalogue)
EKS = LOADED.maps["eks"]


def _gpus(node, model, count=8):
    return [Gpu(node, i, model) for i in range(count)]


def test_a_running_pods_slice_is_of_its_nodes_model_though_another_model_has_the_profile():
    # 1g.10gb is a profile of the A100 40GB and of the H100 80GB alike.
    gpus = _gpus("a100", "A100-40GB") + _gpus("h100", "H100-80GB")
    running = SliceAsk("Pod/ml/p", "1g.10gb", 1, 1, None, running_on="h100")
    plan = plan_mig(SliceDemand((running,), ()), gpus, GEOMETRY, EKS)
    assert {m.model: dict(m.demand) for m in plan.models} == {"A100-40GB": {}, "H100-80GB": {"1g.10gb": 1}}


def test_a_new_pods_slice_goes_to_the_model_it_accepts_with_the_most_gpus():
    gpus = _gpus("a100", "A100-40GB", 4) + _gpus("h100", "H100-80GB", 8)
    ask = SliceAsk("Deployment/ml/d", "1g.10gb", 1, 3, None)
    plan = plan_mig(SliceDemand((ask,), ()), gpus, GEOMETRY, EKS)
    assert {m.model: dict(m.demand) for m in plan.models} == {"A100-40GB": {}, "H100-80GB": {"1g.10gb": 3}}


def test_a_slice_of_a_model_the_target_lacks_is_said_short_in_gpus_of_that_model():
    ask = SliceAsk("Deployment/ml/d", "3g.71gb", 1, 5, frozenset({"H200"}))
    plan = plan_mig(SliceDemand((ask,), ()), _gpus("a100", "A100-40GB"), GEOMETRY, EKS)
    h200 = next(m for m in plan.models if m.model == "H200")
    assert (dict(h200.short), h200.more_gpus, plan.fits) == ({"3g.71gb": 5}, 3, False)


def test_each_wave_asks_for_what_has_moved_so_far_and_what_runs_already():
    from webhook.core.planning.slice_demand import by_wave

    first = SliceAsk("Deployment/ml/a", "1g.10gb", 1, 2, None)
    second = SliceAsk("Job/ml/b", "3g.40gb", 1, 1, None)
    unwaved = SliceAsk("Deployment/ml/c", "2g.20gb", 1, 1, None)
    running = SliceAsk("Pod/ml/p", "1g.10gb", 1, 1, None, running_on="h100")
    waves = by_wave(SliceDemand((first, second, unwaved, running), ()), [["Deployment/ml/a"], ["Job/ml/b"]])
    assert [w.asks for w in waves] == [(first, running), (first, second, unwaved, running)]


def test_targets_that_cut_instances_on_demand_get_no_layout():
    ask = SliceAsk("Deployment/ml/d", "1g.5gb", 1, 3, None)
    for name, how in (("dra-nvidia", "DRA devices"), ("hami", "HAMi-style dynamic MIG")):
        plan = plan_mig(SliceDemand((ask,), ()), _gpus("a100", "A100-40GB"), GEOMETRY, LOADED.maps[name])
        assert (plan.kind, plan.models, plan.fits) == ("dynamic", (), True)
        assert f"({how})" in plan.note


def test_a_single_strategy_target_gets_one_profile_per_group_of_gpus():
    asks = (
        SliceAsk("Deployment/ml/a", "3g.20gb", 1, 5, None),
        SliceAsk("Deployment/ml/b", "1g.5gb", 2, 4, None),
    )
    plan = plan_mig(
        SliceDemand(asks, ()), _gpus("a100", "A100-40GB"), GEOMETRY, LOADED.maps["generic-mig-single"]
    )
    assert plan.kind == "pools"
    assert [(p.profile, p.instances, p.gpus) for p in plan.pools] == [("1g.5gb", 8, 2), ("3g.20gb", 5, 3)]


def test_a_map_partitioned_per_node_pool_gets_pools_with_how_to_create_each():
    # AKS fixes a pool's profile at its creation (--gpu-instance-profile): pools, not layouts per GPU.
    asks = (
        SliceAsk("Deployment/ml/a", "3g.20gb", 1, 5, None),
        SliceAsk("Deployment/ml/b", "4g.20gb", 1, 2, None),
    )
    plan = plan_mig(SliceDemand(asks, ()), _gpus("a100", "A100-40GB"), GEOMETRY, LOADED.maps["aks"])
    assert (plan.kind, plan.models, plan.fits) == ("pools", (), True)
    assert [(p.profile, p.instances, p.gpus, p.create) for p in plan.pools] == [
        ("3g.20gb", 5, 3, "a node pool created with --gpu-instance-profile MIG3g"),  # two to a GPU
        ("4g.20gb", 2, 2, "a node pool created with --gpu-instance-profile MIG4g"),  # one to a GPU
    ]


def test_a_profile_the_target_does_not_sell_for_the_model_fits_nowhere():
    # An A100 40GB has a 1g.10gb profile, but an AKS MIG1g pool cuts it into 1g.5gb only.
    ask = SliceAsk("Deployment/ml/d", "1g.10gb", 1, 3, None)
    plan = plan_mig(SliceDemand((ask,), ()), _gpus("a100", "A100-40GB"), GEOMETRY, LOADED.maps["aks"])
    assert (plan.pools, plan.fits) == ((), False)
    assert plan.unplaced == {"1g.10gb": (3, "aks sells it for no model it may run on (models: A100-40GB)")}
