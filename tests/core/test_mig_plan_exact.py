"""The MIG plan judged against the best plan (issue 47): fewest GPUs over every model a slice may use,
then fewest repartitioned, idle nodes before busy ones, running pods left where they run, and the GPU
Operator's named configurations and gpuport's own read back, so planning again after applying
changes nothing."""

from dataclasses import replace

from webhook.config.cloudmap import default_directory, load_directory
from webhook.config.mig_geometry import load_geometry
from webhook.core.planning.mig_plan import plan_mig
from webhook.core.planning.planner import Gpu
from webhook.core.planning.rendering import node_changes
from webhook.core.planning.slice_demand import SliceAsk, SliceDemand
from webhook.core.planning.target_gpus import target_gpus
from webhook.core.vocabulary.inventory import parse_inventory

LOADED = load_directory(default_directory())
CATALOGUE = LOADED.catalogue
GEOMETRY = load_geometry(CATALOGUE)
EKS = LOADED.maps["eks"]
DIALECTS = None  # set below: the dialects every map speaks, as the command reads an inventory


def _dialects():
    from webhook.config.loading import build_context

    return build_context(default_directory(), "eks").dialects


DIALECTS = _dialects()


def _gpus(node, model, count=8, current=None):
    return [Gpu(node, i, model, current) for i in range(count)]


def _ask(profile, pods, models=None, name="Deployment/ml/d", running_on=""):
    return SliceAsk(name, profile, 1, pods, frozenset(models) if models else None, running_on=running_on)


def _plan(asks, gpus):
    return plan_mig(SliceDemand(tuple(asks), ()), gpus, GEOMETRY, EKS)


def _used(plan):
    return sum(m.used_gpus for m in plan.models)


def _changed(plan):
    return sum(1 for m in plan.models for p in m.gpus if p.serves and not p.kept)


def test_one_workload_spreads_over_two_models_when_neither_holds_it_alone():
    # 40 × 3g.40gb, two a GPU: 20 GPUs; 16 H100 hold 32, the A100 80GBs the other 8.
    gpus = _gpus("a100", "A100-80GB") + _gpus("h100-a", "H100-80GB") + _gpus("h100-b", "H100-80GB")
    plan = _plan([_ask("3g.40gb", 40)], gpus)
    assert plan.fits and _used(plan) == 20 == plan.fewest_gpus


def test_a_profile_goes_to_the_model_where_it_takes_the_least_of_a_gpu():
    # 1g.10gb takes two memory slots of an A100 40GB (4 a GPU) and one of an H100 (7 a GPU): 35 on 5 H100s.
    gpus = _gpus("a100", "A100-40GB") + _gpus("h100", "H100-80GB")
    plan = _plan([_ask("1g.10gb", 35)], gpus)
    by_model = {m.model: m.used_gpus for m in plan.models}
    assert plan.fits and by_model == {"A100-40GB": 0, "H100-80GB": 5}


def test_media_slices_share_gpus_at_the_floor():
    # Each '+me' instance takes a GPU's one media engine: 3 GPUs, each 1g.10gb+me and six 1g.10gb.
    plan = _plan(
        [_ask("1g.10gb+me", 3), _ask("1g.10gb", 18, name="Deployment/ml/e")], _gpus("h", "H100-80GB")
    )
    assert plan.fits and _used(plan) == 3 == plan.fewest_gpus and plan.proven


def test_gpus_whose_layouts_serve_are_kept_and_only_what_must_change_changes():
    # Today: one all-1g.5gb GPU, two all-3g.20gb, five unknown. Asked: 7 × 1g.5gb, 4 × 3g.20gb, 3 × 2g.10gb,
    # 1 × 4g.20gb: keeping the three that serve, two more GPUs are cut (3 × 2g.10gb; 4g.20gb).
    gpus = [
        Gpu("n", 0, "A100-40GB", {"1g.5gb": 7}),
        Gpu("n", 1, "A100-40GB", {"3g.20gb": 2}),
        Gpu("n", 2, "A100-40GB", {"3g.20gb": 2}),
        *(Gpu("n", i, "A100-40GB") for i in range(3, 8)),
    ]
    asks = [
        _ask("1g.5gb", 7),
        _ask("3g.20gb", 4, name="Job/ml/a"),
        _ask("2g.10gb", 3, name="Job/ml/b"),
        _ask("4g.20gb", 1, name="Job/ml/c"),
    ]
    plan = _plan(asks, gpus)
    assert plan.fits and _used(plan) == 5 and _changed(plan) == 2


def test_a_node_full_of_idle_slices_keeps_the_gpu_that_serves():
    # all-1g.10gb: 56 idle slices. Asked: seven 1g.10gb and four 3g.40gb: three GPUs, one kept as it is
    # and two cut into 2 × 3g.40gb (the plan before changed all three).
    gpus = _gpus("h", "H100-80GB", current={"1g.10gb": 7})
    plan = _plan([_ask("1g.10gb", 7), _ask("3g.40gb", 4, name="Deployment/ml/e")], gpus)
    assert plan.fits and _used(plan) == 3 and _changed(plan) == 2 == plan.models[0].repartitioned


P5 = """
- kind: Node
  metadata:
    name: {name}
    labels: {{node.kubernetes.io/instance-type: p5.48xlarge}}
  status:
    allocatable: {{nvidia.com/gpu: '8'}}
"""
TRAINING = {
    "kind": "Pod",
    "metadata": {"name": "train-0", "namespace": "ml"},
    "spec": {
        "nodeName": "p5-a",
        "containers": [{"name": "t", "resources": {"limits": {"nvidia.com/gpu": 8}}}],
    },
    "status": {"phase": "Running"},
}


def _inventory(nodes, pods=()):
    import yaml

    items = [*(yaml.safe_load(P5.format(name=n))[0] for n in nodes), *pods]
    return parse_inventory([{"apiVersion": "v1", "kind": "List", "items": items}])


def test_an_idle_node_is_changed_before_one_running_a_training_pod():
    inventory = _inventory(["p5-a", "p5-b"], [TRAINING])
    gpus = target_gpus(inventory, DIALECTS, GEOMETRY)
    assert {g.node for g in gpus if getattr(g, "busy", False)} == {"p5-a"}
    plan = _plan([_ask("3g.40gb", 8)], gpus)
    _, changes = node_changes(plan, CATALOGUE)
    assert plan.fits and [c.node for c in changes] == ["p5-b"]


def test_running_slice_pods_stay_where_they_run_and_no_other_gpu_is_cut_for_them():
    # all-balanced holds 2 × 1g.10gb, 2g.20gb, 3g.40gb per GPU: the running pods are served where they are.
    gpus = _gpus("h-a", "H100-80GB", current=dict(GEOMETRY["H100-80GB"].balanced)) + _gpus("h-b", "H100-80GB")
    running = [_ask("1g.10gb", 1, name=f"Pod/ml/p{i}", running_on="h-a") for i in range(3)]
    plan = _plan([*running, _ask("3g.40gb", 1, name="Pod/ml/q", running_on="h-a")], gpus)
    _, changes = node_changes(plan, CATALOGUE)
    assert plan.fits and changes == []
    # New pods take what the GPUs serving running ones leave spare first (no GPU more is used).
    plan = _plan([*running, _ask("2g.20gb", 2, name="Deployment/ml/new")], gpus)
    _, changes = node_changes(plan, CATALOGUE)
    assert plan.fits and changes == []


def test_the_gpu_operators_named_configurations_read_as_their_layouts():
    from webhook.core.planning.target_gpus import gpu_layout

    h100, gb200 = GEOMETRY["H100-80GB"], GEOMETRY["GB200"]
    assert gpu_layout("all-balanced", 3, h100) == {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
    assert gpu_layout("all-1g.10gb.me", 0, h100) == {"1g.10gb+me": 1}
    assert gpu_layout("all-enabled", 0, h100) == {} == gpu_layout("all-disabled", 0, h100)
    assert gpu_layout("all-1g.24gb", 0, gb200) == {"1g.23gb": 7}  # GB200's name under older drivers
    assert gpu_layout("gpuport-h100-80gb-0123abcd", 0, h100) is None  # its ConfigMap not given


def test_a_node_already_all_balanced_is_kept_for_what_all_balanced_serves():
    inventory = _inventory(["p5-a"])
    node = replace(
        inventory.nodes[0], labels={**inventory.nodes[0].labels, "nvidia.com/mig.config": "all-balanced"}
    )
    gpus = target_gpus(replace(inventory, nodes=(node,)), DIALECTS, GEOMETRY)
    asks = [_ask("1g.10gb", 16), _ask("2g.20gb", 8, name="Job/ml/b"), _ask("3g.40gb", 8, name="Job/ml/c")]
    plan = _plan(asks, gpus)
    _, changes = node_changes(plan, CATALOGUE)
    assert plan.fits and changes == []


def _applied(inventory, plan):
    """The inventory once the plan is applied: each changed node labelled with its configuration, and
    the configurations in the ConfigMap the GPU Operator reads."""
    configs, changes = node_changes(plan, CATALOGUE)
    labels = {c.node: c.config for c in changes}
    nodes = tuple(
        replace(n, labels={**n.labels, "nvidia.com/mig.config": labels[n.name]}) if n.name in labels else n
        for n in inventory.nodes
    )
    return replace(inventory, nodes=nodes, mig_configs={**inventory.mig_configs, **configs})


def test_planning_again_after_applying_the_plan_changes_nothing():
    inventory = _inventory(["p5-a", "p5-b", "p5-c"])
    asks = [
        _ask("1g.10gb", 9),
        _ask("3g.40gb", 3, name="Job/ml/b"),
        _ask("2g.20gb", 4, name="Job/ml/c"),
        _ask("1g.10gb+me", 2, name="Job/ml/d"),
    ]
    first = _plan(asks, target_gpus(inventory, DIALECTS, GEOMETRY))
    _, changes = node_changes(first, CATALOGUE)
    assert first.fits and changes
    applied = _applied(inventory, first)
    again = _plan(asks, target_gpus(applied, DIALECTS, GEOMETRY))
    assert again.fits and node_changes(again, CATALOGUE) == ({}, [])


def test_a_fleet_without_node_selectors_is_planned_within_a_gpu_of_the_floor():
    # bench/plan_bench.py's cluster, its Deployments free to run on either model (A100 40GB or H100),
    # no pod running yet: every 4g.20gb must find its 3g.20gb (the plan before left 365 of 840 alone).
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from plan_bench import cluster

    from webhook.config.loading import build_context
    from webhook.core.planning.slice_demand import slice_demand

    manifests, documents = cluster(1000, 10000)
    for manifest in manifests:
        manifest["spec"]["template"]["spec"].pop("nodeSelector")
    context = build_context(default_directory(), "generic", read_as="generic")
    inventory = parse_inventory([d for d in documents if d["kind"] != "Pod"])
    demand = slice_demand(manifests, context, inventory)
    plan = plan_mig(demand, target_gpus(inventory, context.dialects, GEOMETRY), GEOMETRY, context.target)
    assert plan.fits and _used(plan) <= sum(m.fewest_possible for m in plan.models) + 1
    # Within 2% of the bound no plan beats (the plan before: 2,713 GPUs, 7% over a bound of 2,538).
    assert plan.fewest_gpus <= _used(plan) <= 1.02 * plan.fewest_gpus


def test_a_workloads_running_pods_are_not_counted_again_as_its_replicas():
    from webhook.config.loading import build_context
    from webhook.core.planning.slice_demand import slice_demand

    def pod(name, node=None):
        pod = {
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": "ml",
                "labels": {"app": "web", "pod-template-hash": "7d9"},
            },
            "spec": {"containers": [{"name": "m", "resources": {"limits": {"nvidia.com/mig-1g.10gb": 1}}}]},
        }
        if node:
            pod["spec"]["nodeName"], pod["status"] = node, {"phase": "Running"}
        return pod

    web = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "ml"},
        "spec": {
            "replicas": 4,
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [{"name": "m", "resources": {"limits": {"nvidia.com/mig-1g.10gb": 1}}}]
                },
            },
        },
    }
    inventory = _inventory(["p5-a"], [pod("web-a", "p5-a"), pod("web-b", "p5-a")])
    context = build_context(default_directory(), "eks")
    # Two running, one pending (as --kubeconfig lists it), one still to come: four in all, not seven.
    demand = slice_demand([web, pod("web-c")], context, inventory)
    assert sum(a.instances for a in demand.asks) == 4
    assert sorted((a.workload, a.pods, bool(a.running_on)) for a in demand.asks) == [
        ("Deployment/ml/web", 1, False),
        ("Pod/ml/web-a", 1, True),
        ("Pod/ml/web-b", 1, True),
        ("Pod/ml/web-c", 1, False),
    ]
