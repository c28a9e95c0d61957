"""Each sharing layer read as it reads itself (issue 45): KAI's annotations as its source parses them, HAMi's
and Volcano's defaults where a pod leaves memory out, and HAMi's model annotations only where HAMi
schedules. Sources: NVIDIA/KAI-Scheduler (pkg/common/resources/gpu_sharing.go, pkg/scheduler/api/pod_info,
pkg/binder/common/gpu_access.go GetFractionContainerRef, docs/gpu-sharing's NvFractions annotations);
Project-HAMi/HAMi pkg/device/nvidia/device.go GenerateResourceRequests; volcano-sh/volcano
pkg/scheduler/api/devices/nvidia/vgpu/utils.go resourcereqs."""

from decimal import Decimal
from fractions import Fraction

import pytest

from tests.helpers import context, parsed, review_of
from tests.quota_fakes import FakeView, admit, request_for
from tests.translation_cases import kai_pod, pod
from webhook.adapters.kube.ledger import MemoryLedger
from webhook.adapters.kube.quota_gate import QuotaGate
from webhook.core.asks.demand import read_demand
from webhook.core.budget.equivalents import pod_use
from webhook.core.budget.quota import Quota
from webhook.core.deciding import pipeline

ONE_GPU = Quota("gpus", {"requests.nvidia.com/gpu": Decimal(1)})
MIB_80G = 80 * 1024


def mutate(ctx, obj):
    return pipeline.mutate(parsed(review_of(obj)), ctx)


def use(obj, cloud):
    ctx = context(cloud)
    return pod_use(read_demand(obj, ctx.dialects), ctx.target, ctx.dialects.catalogue)


def largest_mib(cloud):
    ctx = context(cloud)
    catalogue = ctx.dialects.catalogue
    offered = [catalogue.models[m] for m in ctx.dialects.models_offered(ctx.target)]
    return max(m.memory_bytes >> 20 for m in offered if m.vendor == "nvidia")


def two_containers(annotations, first="busybox", second="cuda"):
    obj = kai_pod(annotations)
    obj["spec"]["containers"] = [
        {"name": first, "image": "busybox"},
        {"name": second, "image": "nvidia/cuda:12.4.0-base-ubuntu22.04"},
    ]
    return obj


# KAI: the per-container memory keys (its NvFractions mode).


def test_kai_per_container_memory_is_charged_on_each_device():
    """5 pods × 8 × 80Gi passed a 1-GPU quota: the keys were never read."""
    asked = kai_pod({"nvidia.com/container.main.gpu-memory.request": "80Gi", "gpu-fraction-num-devices": "8"})
    charged = use(asked, "kai")
    assert charged.equivalents == 8 and charged.memory_mib == 8 * MIB_80G
    denied = admit(QuotaGate(FakeView([ONE_GPU]), MemoryLedger()), request_for(asked, "a"), context("kai"))
    assert denied is not None and denied.reason == "quota-exceeded"


def test_kai_per_container_memory_is_charged_at_its_limit_when_larger():
    """A request alone is the limit too; the runtime lets the container use up to the limit."""
    key = "nvidia.com/container.main.gpu-memory."
    assert use(kai_pod({key + "request": "4Gi", key + "limit": "40Gi"}), "kai").memory_mib == 40 * 1024
    assert use(kai_pod({key + "limit": "8Gi"}), "kai").memory_mib == 8 * 1024
    assert use(kai_pod({key + "request": "1G"}), "kai").memory_mib == 954  # 953.67 MiB, rounded up


# KAI: gpu-fraction as Go's ParseFloat reads it, rounded up.


@pytest.mark.parametrize(
    ("written", "charged"),
    [
        ("0x1.ccp-1", Fraction(90, 100)),  # 0.8984375
        ("1e-1", Fraction(10, 100)),
        ("+.5", Fraction(50, 100)),
        ("0.0199", Fraction(2, 100)),  # int(f × 100) read it as 1 %
        ("0.333", Fraction(34, 100)),
        ("0.1", Fraction(10, 100)),
    ],
)
def test_kai_fractions_are_read_as_go_reads_them_and_charged_never_below(written, charged):
    assert use(kai_pod({"gpu-fraction": written}), "kai").equivalents == charged


@pytest.mark.parametrize("written", ["0.5 ", "NaN", "1", "1.5", "0", "-0.5", "Inf", "half", "1e400"])
def test_a_kai_share_gpuport_cannot_read_as_kai_does_is_refused_in_a_budget_namespace(written):
    asked = kai_pod({"gpu-fraction": written})
    demand = read_demand(asked, context("kai").dialects)
    assert demand.unreadable and not demand.asks
    denied = admit(QuotaGate(FakeView([ONE_GPU]), MemoryLedger()), request_for(asked, "a"), context("kai"))
    assert denied is not None and denied.reason == "quota-share-unreadable"
    assert "gpu-fraction" in denied.message
    # Outside a budget it is KAI's business.
    assert admit(QuotaGate(FakeView([]), MemoryLedger()), request_for(asked, "b"), context("kai")) is None


def test_other_kai_values_go_refuses_are_unreadable_too():
    dialects = context("kai").dialects
    for annotations in (
        {"gpu-memory": "1_000"},
        {"gpu-memory": "0"},
        {"gpu-fraction": "0.5", "gpu-fraction-num-devices": "0x2"},
        {"nvidia.com/container.main.gpu-memory.request": "lots"},
    ):
        assert read_demand(kai_pod(annotations), dialects).unreadable, annotations


# KAI: the container given the share.


def test_the_kai_share_goes_to_the_container_the_pod_names():
    dialects = context("kai").dialects
    named = two_containers({"gpu-fraction": "0.5", "gpu-fraction-container-name": "cuda"})
    (ask,) = read_demand(named, dialects).asks
    assert (ask.list_name, ask.index, ask.name) == ("containers", 1, "cuda")
    keyed = two_containers({"nvidia.com/container.cuda.gpu-memory.request": "4Gi"})
    (ask,) = read_demand(keyed, dialects).asks
    assert ask.name == "cuda" and ask.share.memory_mib == 4096
    # The binder looks among the init containers first.
    init = two_containers({"gpu-fraction": "0.5", "gpu-fraction-container-name": "prep"})
    init["spec"]["initContainers"] = [{"name": "prep", "image": "nvidia/cuda:12.4.0-base-ubuntu22.04"}]
    (ask,) = read_demand(init, dialects).asks
    assert (ask.list_name, ask.name) == ("initContainers", "prep")
    # Without a name, the first app container.
    (ask,) = read_demand(two_containers({"gpu-fraction": "0.5"}), dialects).asks
    assert ask.name == "busybox"


def test_a_kai_share_for_a_container_that_is_not_there_or_two_containers_is_unreadable():
    dialects = context("kai").dialects
    for annotations in (
        {"gpu-fraction": "0.5", "gpu-fraction-container-name": "nope"},
        {"nvidia.com/container.nope.gpu-memory.request": "4Gi"},
        {"nvidia.com/container.cuda.gpu-memory.request": "4Gi", "gpu-fraction-container-name": "busybox"},
        {
            "nvidia.com/container.cuda.gpu-memory.request": "4Gi",
            "nvidia.com/container.busybox.gpu-memory.request": "4Gi",
        },
    ):
        assert read_demand(two_containers(annotations), dialects).unreadable, annotations


def _gpu_paths(patch):
    return sorted(
        op["path"] for op in patch if "nvidia.com~1gpu" in op["path"] or op["path"].endswith("/resources")
    )


def test_a_kai_share_is_translated_onto_the_container_kai_gives_it():
    """Issue 46: the share went to the first container (a busybox sidecar) on every target."""
    named = two_containers({"gpu-fraction": "0.5", "gpu-fraction-container-name": "cuda"})
    named["metadata"]["name"] = "p"
    for target in ("generic", "hami", "gke"):
        decision = mutate(context(target), named)
        assert decision.allowed, (target, decision.message)
        touched = [op["path"] for op in decision.patch if op["path"].startswith("/spec/containers/")]
        assert touched and all(p.startswith("/spec/containers/1/") for p in touched), (target, touched)


def test_a_share_on_a_later_container_is_named_for_kai_on_the_way_there():
    obj = pod({})
    obj["spec"]["containers"] = [
        {"name": "busybox", "image": "busybox"},
        {
            "name": "cuda",
            "image": "cuda",
            "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "8000"}},
        },
    ]
    obj["spec"]["schedulerName"] = "hami-scheduler"
    decision = mutate(context("kai"), obj)
    assert decision.allowed, decision.message
    added = {op["path"]: op.get("value") for op in decision.patch}
    annotations = next((v for p, v in added.items() if p == "/metadata/annotations"), None) or {
        p.rsplit("/", 1)[1]: v for p, v in added.items() if p.startswith("/metadata/annotations/")
    }
    assert annotations.get("gpu-fraction-container-name") == "cuda", decision.patch


# HAMi and Volcano: memory left out is all of each card's.


def test_a_hami_share_of_cores_alone_is_charged_all_of_a_card_s_memory():
    charged = use(pod({"nvidia.com/gpu": "2", "nvidia.com/gpucores": "1"}), "hami")
    assert charged.equivalents == 2 and charged.memory_mib == 2 * largest_mib("hami")
    # gpumem: 0 is HAMi's "unset" too.
    zero = use(pod({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "0", "nvidia.com/gpucores": "5"}), "hami")
    assert zero.equivalents == 1


def test_volcano_vgpus_asking_cores_alone_count_whole_cards():
    """96 cards passed a quota of 1: the built-in quota does not count volcano.sh/vgpu-number, and gpuport
    charged the 1 % of cores."""
    asked = pod({"volcano.sh/vgpu-number": "96", "volcano.sh/vgpu-cores": "1"})
    assert use(asked, "volcano").equivalents == 96
    assert use(pod({"volcano.sh/vgpu-number": "3"}), "volcano").equivalents == 3
    denied = admit(
        QuotaGate(FakeView([ONE_GPU]), MemoryLedger()), request_for(asked, "a"), context("volcano")
    )
    assert denied is not None and denied.reason == "quota-exceeded"


# HAMi's model annotations: read only where HAMi schedules.


def test_a_model_annotation_nothing_schedules_by_lowers_no_charge():
    """16 × 80 GB passed a 400 Gi GPU-memory budget by claiming a T4."""
    asked = pod({"nvidia.com/gpu": "16"})
    asked["metadata"]["annotations"] = {"nvidia.com/use-gputype": "T4"}
    for cloud in ("generic", "hami"):
        assert use(asked, cloud).memory_mib == 16 * largest_mib(cloud), cloud
    asked["spec"]["schedulerName"] = "hami-scheduler"  # HAMi schedules it: HAMi gives only T4s
    assert use(asked, "hami").memory_mib == 16 * 15360
    budget = Quota("memory", {"requests.gpuport.io/gpu-memory": Decimal(400 * 2**30)})
    plain = pod({"nvidia.com/gpu": "16"})
    plain["metadata"]["annotations"] = {"nvidia.com/use-gputype": "T4"}
    denied = admit(QuotaGate(FakeView([budget]), MemoryLedger()), request_for(plain, "a"), context("generic"))
    assert denied is not None and denied.reason == "quota-exceeded"


def test_pods_that_differ_only_in_a_per_container_share_are_never_one_memoized_decision():
    """The memo keeps each decision's demand, which the quota gate charges: a key that left KAI's
    per-container keys out would charge an 80Gi share as the 1Gi one decided before it."""
    from webhook.core.deciding.decision_key import decision_key

    ctx = context("kai")
    key = "nvidia.com/container.main.gpu-memory.request"
    small, large = kai_pod({key: "1Gi"}), kai_pod({key: "80Gi"})
    for obj in (small, large):
        obj["metadata"].pop("name", None)
        obj["metadata"]["generateName"] = "work-"
    keys = ctx.metadata_keys
    assert decision_key(parsed(review_of(small)), keys) != decision_key(parsed(review_of(large)), keys)
