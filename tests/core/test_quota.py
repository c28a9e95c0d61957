"""The budget's arithmetic (pure): GPU-equivalents of every form, a pod's total, quota messages and scopes."""

from decimal import Decimal
from fractions import Fraction

import pytest

from tests.helpers import context
from tests.quota_fakes import QUOTA
from tests.translation_cases import pod
from webhook.core.asks.demand import read_demand
from webhook.core.budget.equivalents import pod_use
from webhook.core.budget.quota import PodFacts, Quota, applies, exceeded, pod_facts
from webhook.core.vocabulary.gpu_use import GPU_MEMORY, GpuUse, show


def use(obj, cloud="generic"):
    ctx = context(cloud)
    return pod_use(read_demand(obj, ctx.dialects), ctx.target, ctx.dialects.catalogue)


@pytest.mark.parametrize(
    ("resources", "selector", "expected"),
    [
        ({"nvidia.com/gpu": "1"}, None, Fraction(1)),
        ({"amd.com/gpu": "2"}, None, Fraction(2)),
        (
            {"nvidia.com/mig-1g.10gb": "1"},
            {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            Fraction(1, 7),
        ),
        # A 3g.40gb takes 3 of 7 compute slices but 4 of 8 memory slices: two fill a GPU (was 6/7).
        ({"nvidia.com/mig-3g.40gb": "2"}, None, Fraction(1)),
        # A 1g.20gb on an H100 takes 2 of 8 memory slices: 4 fit, so each is 1/4, not its compute's 1/7.
        (
            {"nvidia.com/mig-1g.20gb": "1"},
            {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            Fraction(1, 4),
        ),
        ({"nvidia.com/mig-1g.6gb": "1"}, None, Fraction(1, 4)),  # an A30 slice: 4 slices per GPU
        ({"nvidia.com/mig-2g.48gb": "1"}, None, Fraction(1, 2)),  # RTX PRO 6000: 4 slices
        (
            {"aliyun.com/gpu-mem": "20"},
            {"aliyun.accelerator/nvidia_name": "NVIDIA-A100-SXM4-40GB"},
            Fraction(1, 2),
        ),
        ({"tke.cloud.tencent.com/qgpu-core": "25"}, None, Fraction(1, 4)),
        (
            {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "8192", "nvidia.com/gpucores": "50"},
            {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"},
            Fraction(1, 2),
        ),  # max(8/40, 50%)
        ({"nvidia.com/gpu.shared": "1"}, None, Fraction(1)),  # replicas unknown: a whole GPU
    ],
)
def test_gpu_equivalents_of_every_form(resources, selector, expected):
    assert use(pod(resources, selector)).equivalents == expected


def test_shared_slot_counts_one_over_the_maps_replicas():
    from dataclasses import replace

    ctx = context("generic")
    target = replace(ctx.target, shared=replace(ctx.target.shared, replicas_per_gpu=4))
    obj = pod({"nvidia.com/gpu.shared": "1"})
    assert pod_use(read_demand(obj, ctx.dialects), target, ctx.dialects.catalogue).equivalents == Fraction(
        1, 4
    )


def test_seven_slices_make_exactly_one_gpu():
    h100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    total = sum((use(pod({"nvidia.com/mig-1g.10gb": "1"}, h100)).equivalents for _ in range(7)), Fraction(0))
    assert total == 1


def test_a_slice_no_model_is_pinned_for_is_charged_where_it_holds_the_most():
    # nvidia.com/mig-1g.10gb is also the A100 40GB's double-memory 1g: 2 of its 8 memory slices, 4 per GPU.
    assert use(pod({"nvidia.com/mig-1g.10gb": "1"})).equivalents == Fraction(1, 4)


def test_pod_total_follows_the_effective_request_rule():
    obj = pod({"nvidia.com/gpu": "1"})
    obj["spec"]["containers"].append({"name": "b", "resources": {"limits": {"nvidia.com/gpu": "2"}}})
    obj["spec"]["initContainers"] = [
        {"name": "setup", "resources": {"limits": {"nvidia.com/gpu": "4"}}},  # runs alone: max with the rest
        {"name": "sidecar", "restartPolicy": "Always", "resources": {"limits": {"nvidia.com/gpu": "1"}}},
    ]
    assert use(obj).equivalents == 4  # max(4, 1 + 2 + 1)
    obj["spec"]["initContainers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "3"
    assert use(obj).equivalents == 4  # max(3, 1 + 2 + 1 sidecar)


def test_an_init_container_after_a_sidecar_runs_beside_it():
    # KEP-753: a plain init container starting after a sidecar holds its GPUs while the sidecar's run.
    obj = pod({"nvidia.com/gpu": "1"})
    obj["spec"]["initContainers"] = [
        {"name": "proxy", "restartPolicy": "Always", "resources": {"limits": {"nvidia.com/gpu": "1"}}},
        {"name": "warmup", "resources": {"limits": {"nvidia.com/gpu": "3"}}},
    ]
    assert use(obj).equivalents == 4  # max(1 sidecar + 3, 1 app + 1 sidecar)
    obj["spec"]["initContainers"].reverse()  # the warm-up now runs before the sidecar starts
    assert use(obj).equivalents == 3  # max(3, 1 + 1)


def test_a_pods_compute_peak_and_memory_peak_are_each_kept():
    # Init and app containers asking the same names: the pod's peak is the init's compute and the
    # app's memory, neither undercounted.
    hami_share = {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "100", "nvidia.com/gpumem": "1000"}
    obj = pod({**hami_share, "nvidia.com/gpucores": "10", "nvidia.com/gpumem": "8000"})
    obj["spec"]["initContainers"] = [{"name": "setup", "resources": {"limits": hami_share}}]
    assert use(obj) == GpuUse(Fraction(1), 8000)


def test_an_init_container_s_gpus_of_a_name_no_later_container_asks_are_added():
    # The device manager keeps an init container's devices for the pod, reusing them only for later
    # containers asking the same name: the share the init took and the app's 1g.10gb are both held.
    obj = pod({"nvidia.com/mig-1g.10gb": "1"})
    hami_share = {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "100", "nvidia.com/gpumem": "1000"}
    obj["spec"]["initContainers"] = [{"name": "setup", "resources": {"limits": hami_share}}]
    # The 1g.10gb pins no model: as an A100 40GB's (1/4, 10 GiB); the share: a whole GPU's compute.
    assert use(obj) == GpuUse(1 + Fraction(1, 4), 1000 + 10240)


H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}


def split_names_pod():
    """Issue 45's pod: init containers asking 1 whole GPU, 2 × 3g.40gb, 3 × 2g.20gb and 7 × 1g.10gb
    beside an app asking 1 × 7g.80gb, on H100s. The scheduler reserves, and the kubelet's device
    manager gives, each name's peak: every one of them."""
    obj = pod({"nvidia.com/mig-7g.80gb": "1"}, H100)
    asks = [("nvidia.com/gpu", "1"), ("nvidia.com/mig-3g.40gb", "2"), ("nvidia.com/mig-2g.20gb", "3")]
    asks.append(("nvidia.com/mig-1g.10gb", "7"))
    obj["spec"]["initContainers"] = [
        {"name": f"init-{n}", "resources": {"limits": {name: count}}} for n, (name, count) in enumerate(asks)
    ]
    return obj


def test_gpu_names_split_across_init_and_app_containers_add_up_per_name():
    # 1 + 2 × 1/2 (4 of 8 memory slices) + 3 × 2/7 + 7 × 1/7 + 1: it was the larger total, 1.
    assert use(split_names_pod()).equivalents == 4 + Fraction(6, 7)


def test_two_kinds_in_one_init_container_are_both_counted():
    obj = pod({"nvidia.com/gpu": "1"})
    both = {"nvidia.com/mig-7g.80gb": "4", "nvidia.com/mig-1g.10gb": "1"}
    obj["spec"]["initContainers"] = [{"name": "setup", "resources": {"limits": both}}]
    # Per name: gpu 1 (app), 7g.80gb 4 and 1g.10gb 1 (as an A100 40GB's, 1/4) held from the init.
    assert use(obj).equivalents == 1 + 4 + Fraction(1, 4)


def test_show_prints_whole_numbers_plainly():
    assert show(Fraction(3)) == "3" and show(Fraction(3, 7)) == "0.429" and show(Fraction(1, 2)) == "0.5"


def test_quota_message_mirrors_the_builtin_format():
    asked = use(pod({"nvidia.com/gpu": "3"}))
    assert exceeded(QUOTA, asked, GpuUse(Fraction(5)), "nvidia.com/gpu") is None  # exactly at the limit
    message = exceeded(QUOTA, asked, GpuUse(Fraction(6)), "nvidia.com/gpu")
    assert message.startswith(
        "exceeded quota: gpus, requested: requests.nvidia.com/gpu=3, "
        "used: requests.nvidia.com/gpu=6, limited: requests.nvidia.com/gpu=8 "
    )
    assert "MIG slices the larger of their share of the GPU's compute and memory" in message


def test_gpu_memory_budget():
    quota = Quota("mem", {GPU_MEMORY: Decimal(80 * 1024**3)})
    asked = use(pod({"nvidia.com/mig-3g.40gb": "1"}))
    assert exceeded(quota, asked, GpuUse(Fraction(0), 40 * 1024), "nvidia.com/gpu") is None
    message = exceeded(quota, asked, GpuUse(Fraction(0), 41 * 1024), "nvidia.com/gpu")
    assert (
        "requested: requests.gpuport.io/gpu-memory=40960Mi, used: requests.gpuport.io/gpu-memory=41984Mi"
        in message
    )


@pytest.mark.parametrize(
    ("scopes", "selector", "facts", "expected"),
    [
        (("Terminating",), (), PodFacts(True, False, ""), True),
        (("Terminating",), (), PodFacts(False, False, ""), False),
        (("NotTerminating",), (), PodFacts(False, False, ""), True),
        (("BestEffort",), (), PodFacts(False, True, ""), True),
        (("NotBestEffort",), (), PodFacts(False, True, ""), False),
        (
            (),
            ({"scopeName": "PriorityClass", "operator": "In", "values": ["high"]},),
            PodFacts(False, False, "high"),
            True,
        ),
        (
            (),
            ({"scopeName": "PriorityClass", "operator": "In", "values": ["high"]},),
            PodFacts(False, False, "low"),
            False,
        ),
        ((), ({"scopeName": "PriorityClass", "operator": "Exists"},), PodFacts(False, False, ""), False),
    ],
)
def test_quota_scopes(scopes, selector, facts, expected):
    assert applies(Quota("q", {}, scopes, selector), facts) is expected


def test_pod_facts():
    obj = pod({"nvidia.com/gpu": "1"})
    assert pod_facts(obj) == PodFacts(False, True, "")  # GPUs alone do not change the QoS class
    obj["spec"]["activeDeadlineSeconds"] = 60
    obj["spec"]["priorityClassName"] = "high"
    obj["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "1"
    assert pod_facts(obj) == PodFacts(True, False, "high")


def test_two_kinds_of_gpu_in_one_container_are_both_counted():
    # The device plugin serves both names to one container: 4 whole 7g slices and a 1g beside them.
    obj = pod({"nvidia.com/mig-7g.80gb": "4", "nvidia.com/mig-1g.10gb": "1"})
    demand = read_demand(obj, context().dialects)
    assert "2 kinds of GPU at once" in demand.problems[0]  # translation still refuses it
    # No model pinned: the 1g.10gb is charged as on an A100 40GB, where it takes 2 of 8 memory slices.
    assert use(obj).equivalents == 4 + Fraction(1, 4)


def test_two_kinds_in_a_sidecar_are_counted_beside_the_app_containers():
    obj = pod({"nvidia.com/gpu": "1"})
    obj["spec"]["initContainers"] = [
        {
            "name": "sidecar",
            "restartPolicy": "Always",
            "resources": {"limits": {"nvidia.com/mig-7g.80gb": "4", "nvidia.com/mig-1g.10gb": "1"}},
        }
    ]
    assert use(obj).equivalents == 1 + 4 + Fraction(1, 4)  # the 1g.10gb as on an A100 40GB (1/4)


def test_gpu_names_beside_a_memory_share_are_not_dropped_with_it():
    # HAMi reads nvidia.com/gpumem as a share of the count nvidia.com/gpu; a MIG name beside it is an
    # ask of its own, which the device plugin serves whatever HAMi makes of the share.
    obj = pod({"nvidia.com/mig-7g.80gb": "4", "nvidia.com/gpumem": "1024"})
    assert use(obj).equivalents >= 4


def test_a_time_sliced_mig_replica_is_counted_as_its_slice():
    # renameByDefault appends .shared to every name the device plugin advertises, MIG ones included.
    # A 3g.40gb holds half its GPU's memory slices (4 of 8): 1/2, not its compute's 3/7.
    assert use(pod({"nvidia.com/mig-3g.40gb.shared": "8"})).equivalents == 8 * Fraction(1, 2)


def _required(obj, *terms):
    obj["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": list(t)} for t in terms]
            }
        }
    }
    return obj


PARTITION = "cloud.google.com/gke-gpu-partition-size"


def test_a_list_of_partitions_is_charged_at_its_largest():
    # The scheduler may give this pod seven 7g partitions: charged as such, never as seven 1g ones.
    obj = _required(
        pod({"nvidia.com/gpu": "7"}),
        [{"key": PARTITION, "operator": "In", "values": ["1g.10gb", "7g.80gb"]}],
    )
    assert use(obj, "gke").equivalents == 7
    obj = _required(
        pod({"nvidia.com/gpu": "7"}),
        [{"key": PARTITION, "operator": "In", "values": ["7g.80gb", "1g.10gb"]}],
    )
    assert use(obj, "gke").equivalents == 7


def test_ored_node_selector_terms_are_read_at_their_widest():
    one_g = [{"key": PARTITION, "operator": "In", "values": ["1g.10gb"]}]
    seven_g = [{"key": PARTITION, "operator": "In", "values": ["7g.80gb"]}]
    assert use(_required(pod({"nvidia.com/gpu": "7"}), one_g, seven_g), "gke").equivalents == 7
    # A term that asks for no slice at all lets the pod have whole GPUs.
    whole = [{"key": "cloud.google.com/gke-accelerator", "operator": "In", "values": ["nvidia-h100-80gb"]}]
    assert use(_required(pod({"nvidia.com/gpu": "7"}), one_g, whole), "gke").equivalents == 7
    # Both terms ask for 1g slices: the pod holds 1g slices whichever admits it, each charged where it
    # holds the most (an A100 40GB's 1g.10gb takes 2 of 8 memory slices: 1/4).
    assert use(_required(pod({"nvidia.com/gpu": "7"}), one_g, one_g), "gke").equivalents == Fraction(7, 4)


def test_a_kai_share_on_several_devices_is_counted_on_each():
    from tests.translation_cases import kai_pod

    obj = kai_pod({"gpu-fraction": "0.9", "gpu-fraction-num-devices": "8"})
    assert use(obj, "kai").equivalents == 8 * Fraction(9, 10)
    assert use(kai_pod({"gpu-fraction": "0.9"}), "kai").equivalents == Fraction(9, 10)
    # A device count with no share beside it asks for nothing.
    assert use(kai_pod({"gpu-fraction-num-devices": "8"}), "kai").equivalents == 0


# The rules below mirror the built-in pod quota evaluator, kubernetes pkg/quota/v1/evaluator/core/pods.go
# (podMatchesScopeFunc, isTerminating, isBestEffort, podMatchesSelector, usesCrossNamespacePodAffinity),
# its QoS helper pkg/apis/core/helper/qos (GetPodQOS, ComputePodQOS) and the way
# staging/src/k8s.io/apiserver/pkg/quota/v1/generic/evaluator.go (Matches, getScopeSelectorsFromQuota)
# joins a quota's scopes and scope selector.

NOT_BEST_EFFORT = Quota("gpus", {"requests.nvidia.com/gpu": Decimal(1)}, ("NotBestEffort",))


def gpu_pod_with(**spec):
    obj = pod({"nvidia.com/gpu": "1"})
    obj["spec"].update(spec)
    return obj


def test_pod_level_resources_alone_make_a_pod_burstable():
    """ComputePodQOS: with pod-level resources set, they decide the class, and a pod-level cpu request
    makes the pod Burstable, so a NotBestEffort GPU quota applies to it (issue 35: it was read as
    BestEffort and its GPUs passed that quota uncounted)."""
    obj = gpu_pod_with(resources={"requests": {"cpu": "500m", "memory": "1Gi"}})
    assert pod_facts(obj).best_effort is False
    assert applies(NOT_BEST_EFFORT, pod_facts(obj))


def test_pod_level_resources_decide_alone():
    """ComputePodQOS: where pod-level resources name cpu, memory (or hugepages, IsPodLevelResourcesSet),
    the containers' are not read; where they name neither, the containers decide."""
    obj = gpu_pod_with(resources={"limits": {"hugepages-2Mi": "2Mi"}})
    obj["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1"
    assert pod_facts(obj).best_effort is True
    obj["spec"]["resources"] = {"requests": {"example.com/other": "1"}}
    assert pod_facts(obj).best_effort is False


def test_the_class_the_api_server_wrote_is_the_one_read():
    """GetPodQOS: status.qosClass, written by the API server at create (before validating admission)
    and never changed after, is what the evaluator reads; it also says whether that server honours
    pod-level resources, which gpuport cannot know."""
    obj = gpu_pod_with(resources={"requests": {"cpu": "1"}})
    obj["status"] = {"qosClass": "BestEffort"}  # a server without PodLevelResources
    assert pod_facts(obj).best_effort is True
    obj = pod({"nvidia.com/gpu": "1"})
    obj["status"] = {"qosClass": "Burstable"}
    assert pod_facts(obj).best_effort is False


@pytest.mark.parametrize(
    ("section", "amounts", "best_effort"),
    [
        ("requests", {"cpu": "0"}, True),  # ComputePodQOS counts only amounts above zero
        ("limits", {"memory": "0Mi", "cpu": "0m"}, True),
        ("limits", {"memory": "1Mi"}, False),  # a limit alone is enough
        ("requests", {"hugepages-2Mi": "2Mi", "ephemeral-storage": "1Gi"}, True),  # not QoS resources
    ],
)
def test_only_cpu_and_memory_above_zero_make_a_pod_not_best_effort(section, amounts, best_effort):
    """ComputePodQOS: isSupportedQoSComputeResource (cpu, memory) and quantity.Cmp(zero) == 1."""
    obj = pod({"nvidia.com/gpu": "1"})
    obj["spec"]["containers"][0]["resources"][section].update(amounts)
    assert pod_facts(obj).best_effort is best_effort


def test_init_containers_count_and_ephemeral_containers_do_not():
    """ComputePodQOS reads spec.containers and spec.initContainers; ephemeral containers cannot ask
    for resources and are not read."""
    obj = gpu_pod_with(ephemeralContainers=[{"name": "debug", "resources": {"requests": {"cpu": "1"}}}])
    assert pod_facts(obj).best_effort is True
    obj["spec"]["initContainers"] = [{"name": "setup", "resources": {"limits": {"cpu": "1"}}}]
    assert pod_facts(obj).best_effort is False


@pytest.mark.parametrize(("deadline", "terminating"), [(None, False), (0, True), (600, True)])
def test_terminating_is_a_deadline_of_zero_or_more(deadline, terminating):
    """isTerminating: spec.activeDeadlineSeconds set and >= 0."""
    assert pod_facts(gpu_pod_with(activeDeadlineSeconds=deadline)).terminating is terminating


def _affinity(kind, term):
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


@pytest.mark.parametrize(
    ("affinity", "cross"),
    [
        (_affinity("podAffinity", {"topologyKey": "k", "namespaces": ["other"]}), True),
        (_affinity("podAntiAffinity", {"topologyKey": "k", "namespaceSelector": {}}), True),
        (
            {
                "podAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 1, "podAffinityTerm": {"topologyKey": "k", "namespaces": ["x"]}}
                    ]
                }
            },
            True,
        ),
        (_affinity("podAffinity", {"topologyKey": "k", "namespaces": []}), False),
        (_affinity("podAffinity", {"topologyKey": "k", "labelSelector": {}}), False),
        (
            {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}},
            False,
        ),
    ],
)
def test_cross_namespace_pod_affinity_scope(affinity, cross):
    """usesCrossNamespacePodAffinity: a required or preferred (anti-)affinity term with namespaces
    listed or any namespaceSelector (crossNamespacePodAffinityTerm); only such pods fall under a
    CrossNamespacePodAffinity quota."""
    quota = Quota("q", {}, ("CrossNamespacePodAffinity",))
    assert applies(quota, pod_facts(gpu_pod_with(affinity=affinity))) is cross


@pytest.mark.parametrize(
    ("expression", "priority_class", "expected"),
    [
        ({"scopeName": "PriorityClass", "operator": "NotIn", "values": ["high"]}, "", True),
        ({"scopeName": "PriorityClass", "operator": "NotIn", "values": ["high"]}, "high", False),
        ({"scopeName": "PriorityClass", "operator": "DoesNotExist"}, "", True),
        ({"scopeName": "PriorityClass", "operator": "DoesNotExist"}, "low", False),
        ({"scopeName": "PriorityClass", "operator": "Exists"}, "low", True),
        ({"scopeName": "Terminating", "operator": "Exists"}, "", False),  # a scope in the selector
        ({"scopeName": "NotBestEffort", "operator": "Exists"}, "", False),
        ({"scopeName": "CrossNamespacePodAffinity", "operator": "Exists"}, "", False),
        ({"scopeName": "SomeFutureScope", "operator": "Exists"}, "", False),
    ],
)
def test_scope_selector_expressions(expression, priority_class, expected):
    """getScopeSelectorsFromQuota + podMatchesScopeFunc: every scopeSelector expression is matched,
    whatever its scope, and a scope the evaluator does not know matches nothing;
    podMatchesSelector: the pod is the label set {PriorityClass: its class}, empty without one."""
    facts = pod_facts(gpu_pod_with(priorityClassName=priority_class or None))
    assert applies(Quota("q", {}, (), (expression,)), facts) is expected


def test_an_unknown_scope_in_spec_scopes_matches_nothing():
    """podMatchesScopeFunc returns false for a scope it does not know."""
    assert not applies(Quota("q", {}, ("SomeFutureScope",)), pod_facts(gpu_pod_with()))


def test_on_aks_amd_and_nvidia_gpus_count_in_one_budget():
    # AKS has ND MI300X v5 (amd.com/gpu) beside its NVIDIA sizes: both are GPU-equivalents of its quota,
    # and an unpinned AMD GPU brings the memory of AKS's AMD model, never an NVIDIA one's.
    amd = use(pod({"amd.com/gpu": "8"}), "aks")
    assert amd == GpuUse(Fraction(8), 8 * 196592)  # MI300X, 196,592 MiB
    both = pod({"amd.com/gpu": "2"})
    both["spec"]["containers"].append({"name": "b", "resources": {"limits": {"nvidia.com/gpu": "1"}}})
    assert use(both, "aks").equivalents == Fraction(3)
