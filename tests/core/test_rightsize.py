"""Right-sizing (core/sizing): the smallest ask that holds a workload's measured peak with headroom,
never below it, never on a model it was not measured on, and always an ask the map can read."""

from fractions import Fraction

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.helpers import context
from webhook.core.asks.demand import read_demand
from webhook.core.budget.equivalents import pod_use
from webhook.core.sizing.fleet import size_fleet
from webhook.core.sizing.history import PodUsage
from webhook.core.sizing.owners import workload_of
from webhook.core.sizing.recommend import SLICE_COMPUTE, USABLE_SHARE, Options
from webhook.core.vocabulary.inventory import parse_inventory

DAY = 86400
WEEK = 7 * DAY
MAPS = ("generic", "gke", "eks", "aks", "hami", "ack", "oke", "kai", "volcano")
PRODUCTS = {
    "H100-80GB": "NVIDIA-H100-80GB-HBM3",
    "A100-80GB": "NVIDIA-A100-SXM4-80GB",
    "A100-40GB": "NVIDIA-A100-SXM4-40GB",
    "L4": "NVIDIA-L4",
    "T4": "Tesla-T4",
}


def node(name, model):
    labels = {"nvidia.com/gpu.product": PRODUCTS[model], "nvidia.com/gpu.count": "8"}
    return {"kind": "Node", "metadata": {"name": name, "labels": labels}, "status": {"allocatable": {}}}


def pod(name, uid, on, limits, owner=("ReplicaSet", "web-7d4f"), annotations=None, selector=None):
    return {
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "team",
            "uid": uid,
            "labels": {"pod-template-hash": "7d4f"},
            "annotations": annotations or {},
            "ownerReferences": [{"kind": owner[0], "name": owner[1], "controller": True}],
        },
        "spec": {
            "nodeName": on,
            "nodeSelector": selector or {},
            "containers": [{"name": "server", "resources": {"limits": limits}}],
        },
        "status": {"phase": "Running"},
    }


def usage(uid, memory, compute, covered=WEEK):
    return PodUsage(uid, memory, None if compute is None else Fraction(compute), covered, covered)


def sized(items, measured, cloud="generic", **options):
    inventory = parse_inventory([{"kind": "List", "items": items}])
    fleet = size_fleet(inventory, {u.uid: u for u in measured}, context(cloud), Options(WEEK, **options))
    return fleet


def test_an_h100_at_a_tenth_becomes_the_smallest_slice_and_frees_six_sevenths_per_pod():
    fleet = sized(
        [
            node("n1", "H100-80GB"),
            pod("web-7d4f-a", "u1", "n1", {"nvidia.com/gpu": "1"}),
            pod("web-7d4f-b", "u2", "n1", {"nvidia.com/gpu": "1"}),
        ],
        [usage("u1", 7000, Fraction(9, 100)), usage("u2", 6000, Fraction(5, 100))],
    )
    (s,) = fleet.sizings
    assert (s.workload, s.pods, s.model, s.today, s.today_gpus) == (
        "Deployment/team/web",
        2,
        "H100-80GB",
        "nvidia.com/gpu: 1",
        1,
    )
    # The larger pod decides: 7000 MiB × 1.2 = 8400 ≤ 10 GB × 0.88; 0.09 × 1.2 = 0.108 ≤ 1/7 × 0.84.
    assert s.proposal is not None
    assert (s.proposal.form, dict(s.proposal.resources), s.proposal.gpus) == (
        "MIG 1g.10gb",
        {"nvidia.com/mig-1g.10gb": "1"},
        Fraction(1, 7),
    )
    assert s.saved == fleet.freed == Fraction(12, 7)


def test_sixty_percent_of_an_h100_never_fits_a_small_slice():
    fleet = sized(
        [node("n1", "H100-80GB"), pod("p", "u1", "n1", {"nvidia.com/gpu": "1"}, owner=("Job", "train"))],
        [usage("u1", 2000, Fraction(60, 100))],
    )
    (s,) = fleet.sizings
    assert s.proposal is None
    assert s.reason.startswith("compute-bound")


def test_on_gke_a_slice_is_the_partition_label_and_on_hami_a_share_capped_in_memory():
    items = [node("n1", "H100-80GB"), pod("p", "u1", "n1", {"nvidia.com/gpu": "1"})]
    measured = [usage("u1", 8000, Fraction(30, 100))]
    gke = sized(items, measured, "gke").sizings[0].proposal
    assert gke is not None
    assert dict(gke.resources) == {"nvidia.com/gpu": "1"}
    assert dict(gke.node_selector) == {"cloud.google.com/gke-gpu-partition-size": "3g.40gb"}
    hami = sized(items, measured, "hami").sizings[0].proposal
    assert hami is not None
    # 8000 × 1.2 = 9600 MiB → 10 GiB; 0.36 of the cores: charged max(10240 / 81559, 0.36) = 0.36.
    assert dict(hami.resources) == {
        "nvidia.com/gpu": "1",
        "nvidia.com/gpumem": "10240",
        "nvidia.com/gpucores": "36",
    }
    assert hami.gpus == Fraction(36, 100)


def test_nothing_is_proposed_without_the_history_the_model_or_a_compute_figure_and_each_says_why():
    cases = [
        ([usage("u1", 1000, Fraction(5, 100), covered=DAY)], {}, "too little history: memory measured"),
        ([usage("u1", 1000, None)], {}, "compute not measured"),
        ([], {}, "not measured: no samples"),
        ([usage("u1", 1000, Fraction(5, 100))], {"gpuport.io/topology": "nvlink"}, "asked for GPU topology"),
    ]
    for measured, annotations, reason in cases:
        items = [
            node("n1", "H100-80GB"),
            pod("p", "u1", "n1", {"nvidia.com/gpu": "1"}, annotations=annotations),
        ]
        (s,) = sized(items, measured).sizings
        assert s.proposal is None and s.reason.startswith(reason), s.reason


def test_a_workload_that_may_land_on_a_model_it_was_not_measured_on_is_not_resized_until_pinned():
    items = [
        node("n1", "H100-80GB"),
        node("n2", "A100-80GB"),
        pod("p", "u1", "n1", {"nvidia.com/gpu": "1"}),
    ]
    (s,) = sized(items, [usage("u1", 1000, Fraction(5, 100))]).sizings
    assert s.proposal is None
    assert s.reason.startswith("may also run on A100-80GB, measured on H100-80GB only")
    pinned = [
        *items[:2],
        pod(
            "p",
            "u1",
            "n1",
            {"nvidia.com/gpu": "1"},
            selector={"nvidia.com/gpu.product": PRODUCTS["H100-80GB"]},
        ),
    ]
    (s,) = sized(pinned, [usage("u1", 1000, Fraction(5, 100))]).sizings
    assert s.proposal is not None and s.proposal.form == "MIG 1g.10gb"


def test_workloads_are_found_through_owner_references():
    def owned(kind, name, labels=None):
        return {
            "metadata": {
                "namespace": "ns",
                "name": "x",
                "labels": labels or {},
                "ownerReferences": [{"kind": kind, "name": name, "controller": True}],
            }
        }

    assert workload_of(owned("ReplicaSet", "api-5b9c", {"pod-template-hash": "5b9c"})) == "Deployment/ns/api"
    assert workload_of(owned("ReplicaSet", "rs-manual")) == "ReplicaSet/ns/rs-manual"
    lws = owned("StatefulSet", "llm-0", {"leaderworkerset.sigs.k8s.io/name": "llm"})
    assert workload_of(lws) == "LeaderWorkerSet/ns/llm"
    assert workload_of(owned("Job", "train")) == "Job/ns/train"
    assert workload_of({"metadata": {"namespace": "ns", "name": "solo"}}) == "Pod/ns/solo"


ASKS = [
    {"nvidia.com/gpu": "1"},
    {"nvidia.com/gpu": "2"},
    {"nvidia.com/gpu": "4"},
    {"nvidia.com/mig-3g.40gb": "1"},
    {"nvidia.com/mig-7g.80gb": "1"},
]


@settings(max_examples=300, deadline=None)
@given(
    cloud=st.sampled_from(MAPS),
    model=st.sampled_from(sorted(PRODUCTS)),
    limits=st.sampled_from(ASKS),
    memory=st.integers(min_value=0, max_value=200_000),
    compute=st.fractions(min_value=0, max_value=4, max_denominator=100),
    headroom=st.fractions(min_value=0, max_value=1, max_denominator=20),
)
@example(
    cloud="generic",
    model="H100-80GB",
    limits={"nvidia.com/gpu": "1"},
    memory=7000,
    compute=Fraction(60, 100),
    headroom=Fraction(1, 5),
)
def test_no_proposal_is_below_the_peak_with_headroom_or_outside_the_model_or_unreadable_by_the_map(
    cloud, model, limits, memory, compute, headroom
):
    items = [node("n1", model), pod("p", "u1", "n1", limits)]
    fleet = sized(items, [usage("u1", memory, compute)], cloud, headroom=headroom)
    for s in fleet.sizings:
        if s.proposal is None:
            continue
        p = s.proposal
        assert s.model == model
        assert p.memory_mib >= memory * (1 + headroom)
        assert p.compute >= compute * (1 + headroom)
        assert p.gpus < s.today_gpus
        # The judge's own reading of a slice, from its name: never above what NVIDIA's tables give.
        if p.form.startswith("MIG "):
            profile = p.form.removeprefix("MIG ")
            slices, gb = profile.split("g.")
            assert p.memory_mib <= int(gb.removesuffix("gb")) * 1024 * USABLE_SHARE
            assert p.compute <= Fraction(int(slices), 7) * SLICE_COMPUTE
            assert profile in context(cloud).dialects.catalogue.models[model].profiles
        # The ask reads back on the map, with no problem, at the charge said.
        ctx = context(cloud)
        asked = {
            "spec": {
                "nodeSelector": dict(p.node_selector),
                "containers": [{"name": "c", "resources": {"limits": dict(p.resources)}}],
            }
        }
        demand = read_demand(asked, ctx.dialects)
        assert demand.problems == () and demand.asks
        assert all(
            n in ctx.target.resource_names() or ctx.target.mig.profile_of(n) is not None for n in p.resources
        )
        only = frozenset({model})
        pinned = demand._replace(selection=demand.selection._replace(models=only), charged_models=only)
        assert pod_use(pinned, ctx.target, ctx.dialects.catalogue).equivalents == p.gpus


# What nvidia-smi mig -lgip prints for these slices (shared/reference/gpus.md, "Usable memory is below
# the name"): MiB usable, SMs of the slice, SMs of the whole GPU. The judge of the two read-low constants,
# written apart from them.
PUBLISHED_SLICES = [
    ("A100-40GB", "1g.5gb", 4864, 14, 108),
    ("A100-40GB", "7g.40gb", 40448, 98, 108),
    ("H100-80GB", "7g.80gb", 81152, 132, 132),
    ("H200", "1g.18gb", 16384, 16, 132),
    ("H200", "7g.141gb", 143360, 132, 132),
]


@pytest.mark.parametrize(("model", "profile", "usable_mib", "sms", "all_sms"), PUBLISHED_SLICES)
def test_a_slice_is_never_credited_more_memory_or_compute_than_nvidia_smi_shows(
    model, profile, usable_mib, sms, all_sms
):
    from webhook.core.sizing.recommend import _slice
    from webhook.core.vocabulary.catalogue import MigProfile

    ctx = context("generic")
    proposal = _slice(MigProfile.parse(profile), ctx.dialects.catalogue.models[model], ctx)
    assert proposal.memory_mib <= usable_mib
    assert proposal.compute <= Fraction(sms, all_sms)
