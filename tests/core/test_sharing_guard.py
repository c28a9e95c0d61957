"""The overcommit guard for shared GPUs (policy.sharing): a share that needs more than κ of any GPU it
may get is refused naming what fits; other shared-GPU pods are kept off the nodes the node agent reports
past κ; whole GPUs and MIG slices are never touched."""

from dataclasses import replace

import jsonpatch

from tests.helpers import context, parsed, pod_with_resources, review_of
from webhook.config.cloudmap import default_directory
from webhook.config.loading import build_context
from webhook.core.deciding import pipeline
from webhook.core.vocabulary.inventory import parse_inventory
from webhook.core.vocabulary.topology import SHARED_MEMORY_FULL

H100_MIB = 81559  # NVML's total for an H100 80GB (gpus.yaml)
KEEP_OFF = {"key": SHARED_MEMORY_FULL, "operator": "NotIn", "values": ["true"]}


def node(name, full, labels=None, allocatable=None):
    said = {} if full is None else {SHARED_MEMORY_FULL: "true" if full else "false"}
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": {**said, **(labels or {})}},
        "status": {"allocatable": allocatable or {"nvidia.com/gpu": "8", "nvidia.com/gpumem": "652472"}},
    }


def with_nodes(cloud, *nodes):
    inventory = parse_inventory([{"kind": "List", "items": list(nodes)}])
    return build_context(default_directory(), cloud, inventory=inventory)


def mutate(ctx, pod):
    return pipeline.mutate(parsed(review_of(pod)), ctx)


def hami_share(mib, product=None):
    pod = pod_with_resources({"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": str(mib)}})
    if product:
        pod["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": product}
    return pod


def required(pod):
    terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    return [e for term in terms["nodeSelectorTerms"] for e in term["matchExpressions"]]


def test_a_share_needing_more_than_the_fill_limit_of_its_gpu_is_refused_naming_what_fits():
    room = int(H100_MIB * 0.9)  # 73403 MiB: what one client of a shared H100 may fill
    decision = mutate(context("hami"), hami_share(room + 1, "NVIDIA-H100-80GB-HBM3"))
    assert not decision.allowed
    assert (
        f"asks for a shared GPU with {room + 1} MiB; a client of a shared H100-80GB may fill at most "
        f"{room} MiB (0.9 of {H100_MIB} MiB, policy.sharing.memory_fill): ask for a whole H100-80GB "
        "(nvidia.com/gpu: 1)"
    ) in decision.message
    assert mutate(context("hami"), hami_share(room, "NVIDIA-H100-80GB-HBM3")).allowed


def test_the_fill_limit_is_the_maps_and_unpinned_shares_are_measured_against_the_largest_gpu():
    ctx = context("hami")
    largest = max(
        ctx.dialects.catalogue.models[m].memory_bytes >> 20
        for m in ctx.target.models_offered(ctx.dialects.catalogue)
    )
    strict = replace(ctx, target=replace(ctx.target, sharing_memory_fill=0.5))
    assert mutate(ctx, hami_share(int(largest * 0.9))).allowed
    refused = mutate(strict, hami_share(int(largest * 0.5) + 1))
    assert (
        not refused.allowed and f"at most {int(largest * 0.5)} MiB (0.5 of {largest} MiB" in refused.message
    )


def test_a_map_that_requires_memory_refuses_a_share_that_does_not_say_it():
    ctx = context("eks")
    strict = replace(ctx, target=replace(ctx.target, sharing_memory_required=True))
    pod = pod_with_resources({"limits": {"nvidia.com/gpu.shared": "1"}})
    assert mutate(ctx, pod).allowed
    decision = mutate(strict, pod)
    assert not decision.allowed
    assert "without saying how much memory it needs, which eks requires (policy.sharing.memory_required)" in (
        decision.message
    )
    assert "this cluster's shares cannot say memory: ask for a MIG slice or a whole GPU" in decision.message
    koordinator = context("koordinator")
    koordinator = replace(koordinator, target=replace(koordinator.target, sharing_memory_required=True))
    said = mutate(koordinator, pod_with_resources({"limits": {"koordinator.sh/gpu-core": "30"}}))
    assert "add koordinator.sh/gpu-memory" in said.message


def test_a_hami_share_of_cores_alone_is_guarded_at_all_of_a_cards_memory():
    """HAMi gives a share that asks neither gpumem nor gpumem-percentage the whole of each card's memory
    (pkg/device/nvidia/device.go, GenerateResourceRequests): the guard sees that memory (issue 45: it
    saw none, and the share passed as 30 %)."""
    hami = context("hami")
    said = mutate(hami, pod_with_resources({"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "30"}}))
    assert not said.allowed
    assert "asks for 100% of a GPU's memory as a share" in said.message


def test_whole_gpus_and_mig_slices_are_never_guarded():
    ctx = context("eks")
    strict = replace(ctx, target=replace(ctx.target, sharing_memory_required=True, sharing_memory_fill=0.01))
    for resources in ({"nvidia.com/gpu": "8"}, {"nvidia.com/mig-1g.10gb": "1"}):
        decision = mutate(strict, pod_with_resources({"limits": resources}))
        assert decision.allowed and not decision.patch, resources
    # A share asked as a MIG instance (HAMi's dynamic MIG) becomes a slice on eks: isolated, not guarded.
    dynamic = hami_share(8000)
    dynamic["metadata"]["annotations"] = {"nvidia.com/vgpu-mode": "mig"}
    assert mutate(strict, dynamic).allowed


def test_shared_pods_are_kept_off_nodes_the_agent_reports_full_and_told_why():
    ctx = with_nodes("hami", node("a", full=True), node("b", full=False))
    decision = mutate(ctx, hami_share(20000))
    pod = jsonpatch.apply_patch(hami_share(20000), list(decision.patch))
    assert KEEP_OFF in required(pod)
    assert (
        f"gpuport: shared GPU: kept off nodes with {SHARED_MEMORY_FULL}=true (past 90% of memory)"
        in decision.warnings
    )
    assert not any("the pod waits" in w for w in decision.warnings)
    # A whole-GPU pod on the same nodes is left as it was.
    whole = mutate(ctx, pod_with_resources({"limits": {"nvidia.com/gpu": "2"}}))
    assert not any(SHARED_MEMORY_FULL in str(op) for op in whole.patch)


def test_when_every_labelled_node_is_full_the_pod_is_told_it_waits():
    ctx = with_nodes("hami", node("a", full=True), node("b", full=True), node("cpu", full=None))
    decision = mutate(ctx, hami_share(20000))
    assert "gpuport: every node's shared GPUs are past 90% of memory now: the pod waits" in decision.warnings


def test_without_the_agents_label_on_any_node_no_term_is_added():
    ctx = with_nodes("hami", node("a", full=None))
    decision = mutate(ctx, hami_share(20000))
    assert not any(SHARED_MEMORY_FULL in str(op) for op in decision.patch)


SHARING = "cloud.google.com/gke-gpu-sharing-strategy"
L4 = {"cloud.google.com/gke-accelerator": "nvidia-l4"}


def gke_pod(affinity=None):
    pod = pod_with_resources({"limits": {"nvidia.com/gpu": "1"}})
    pod["spec"]["nodeSelector"] = dict(L4)
    if affinity:
        term = {"matchExpressions": [affinity]}
        pod["spec"]["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
        }
    return pod


def test_a_whole_gpu_ask_that_can_only_land_on_shared_gpus_is_guarded():
    shared = node(
        "l4-shared", full=False, labels={**L4, SHARING: "time-sharing"}, allocatable={"nvidia.com/gpu": "4"}
    )
    whole = node("l4", full=False, labels=L4, allocatable={"nvidia.com/gpu": "1"})
    # The pod requires the sharing label (any value): it gets a share, so it is kept off full ones.
    ctx = with_nodes("gke", shared, whole)
    body = gke_pod({"key": SHARING, "operator": "Exists"})
    pod = jsonpatch.apply_patch(body, list(mutate(ctx, body).patch))
    assert KEEP_OFF in required(pod)
    # Every node offering nvidia.com/gpu shares it: a plain ask gets a share too.
    ctx = with_nodes("gke", shared)
    pod = jsonpatch.apply_patch(gke_pod(), list(mutate(ctx, gke_pod()).patch))
    assert KEEP_OFF in required(pod)
    # Beside whole-GPU nodes a plain ask is kept on them instead (whole GPUs only), and not guarded.
    ctx = with_nodes("gke", shared, whole)
    pod = jsonpatch.apply_patch(gke_pod(), list(mutate(ctx, gke_pod()).patch))
    assert KEEP_OFF not in required(pod) and {"key": SHARING, "operator": "DoesNotExist"} in required(pod)


def test_a_share_asked_as_a_part_of_a_gpu_past_the_fill_limit_is_refused():
    percent = pod_with_resources({"limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem-percentage": "95"}})
    decision = mutate(context("hami"), percent)
    assert not decision.allowed
    assert "asks for 95% of a GPU's memory as a share; a client of a shared GPU may fill at most 90%" in (
        decision.message
    )
    percent["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpumem-percentage"] = "90"
    assert mutate(context("hami"), percent).allowed


def test_a_fraction_the_map_turns_into_a_share_is_guarded():
    ctx = context("hami")
    shares_fractions = replace(ctx, target=replace(ctx.target, fractional_policy="shared"))

    def fraction(amount):
        pod = pod_with_resources({"limits": {"nvidia.com/gpu": amount}})
        pod["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}  # sizes the share
        return pod

    refused = mutate(shares_fractions, fraction("0.95"))
    assert not refused.allowed and "asks for 95% of a GPU's memory as a share" in refused.message
    assert mutate(shares_fractions, fraction("0.5")).allowed


def test_only_nodes_offering_shares_count_toward_every_shared_node_being_full():
    # A node of whole GPUs offers no shares, whatever its agent says of its memory.
    for whole_is_full in (True, False):
        whole = node("trainer", full=whole_is_full, allocatable={"nvidia.com/gpu": "8"})
        empty = with_nodes("hami", node("a", full=False), whole)
        assert not any("the pod waits" in w for w in mutate(empty, hami_share(20000)).warnings)
        full = with_nodes("hami", node("a", full=True), whole)
        assert any("the pod waits" in w for w in mutate(full, hami_share(20000)).warnings)
