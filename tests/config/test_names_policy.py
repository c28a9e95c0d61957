"""The safety-net policy (gpuport-gpu-names) as rendered for the map in force, evaluated here with
cel-python as tests/config/test_env_policy.py does; tests/integration/test_policy.py runs it in a real
API server. Its second check: a GPU pod whose node selector names another platform's GPU labels."""

import celpy
import jsonpatch
import pytest

from tests.config.test_env_policy import _is_greater_than, _quantity
from tests.helpers import context, parsed, review_of
from tests.translation_cases import SOURCES, TARGETS, pod
from webhook.config.policy import POLICY_NAME, foreign_selectors, policy_objects
from webhook.core.deciding import pipeline

GKE_L4 = {"cloud.google.com/gke-accelerator": "nvidia-l4"}
EVERY_MAP = sorted({*TARGETS, "aks", "oke", "amd", "dra-nvidia", "dra-amd", "koordinator"})
CONTEXTS = {name: context(name) for name in EVERY_MAP}


def _programs(cloud):
    ctx = CONTEXTS[cloud]
    policy, _ = policy_objects(ctx.target, ctx.dialects.maps, {})
    environment = celpy.Environment()
    functions = {"quantity": _quantity, "isGreaterThan": _is_greater_than}
    return [
        environment.program(environment.compile(v["expression"]), functions=functions)
        for v in policy["spec"]["validations"]
    ]


PROGRAMS = {name: _programs(name) for name in EVERY_MAP}


def refused_by(obj, cloud="eks"):
    """The indexes of the policy's validations that refuse `obj`."""
    activation = {"object": celpy.json_to_cel(obj)}
    return [i for i, p in enumerate(PROGRAMS[cloud]) if not bool(p.evaluate(activation))]


def with_terms(obj, *terms):
    obj["spec"]["affinity"] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}
    }
    return obj


def term(*expressions):
    return {"matchExpressions": [{"key": k, "operator": op, "values": list(v)} for k, op, v in expressions]}


def test_a_gke_pod_asking_this_cluster_s_gpu_is_refused_on_eks_and_an_eks_one_passes():
    assert refused_by(pod({"nvidia.com/gpu": "1"}, GKE_L4)) == [1]
    assert refused_by(pod({"nvidia.com/gpu": "1"}, {"node.kubernetes.io/instance-type": "g6.xlarge"})) == []
    assert refused_by(pod({"nvidia.com/gpu": "1"}, {"karpenter.k8s.aws/instance-gpu-name": "l4"})) == []
    assert refused_by(
        pod({"nvidia.com/mig-1g.10gb": "1"}, {"cloud.google.com/gke-gpu-partition-size": "1g.10gb"})
    )


@pytest.mark.parametrize(
    "selector",
    [
        {"node.kubernetes.io/instance-type": "Standard_ND96asr_v4"},  # AKS's VM size
        {"node.kubernetes.io/instance-type": "BM.GPU.H100.8"},  # OKE's shape
        {"beta.kubernetes.io/instance-type": "Standard_ND96asr_v4"},  # the old key
        {"aliyun.accelerator/nvidia_name": "NVIDIA-A10"},
        {"cloud.google.com/gke-gpu-sharing-strategy": "time-sharing"},
    ],
)
def test_another_platform_s_gpu_or_instance_type_label_is_refused(selector):
    assert refused_by(pod({"nvidia.com/gpu": "1"}, selector)) == [1]


@pytest.mark.parametrize(
    "selector",
    [
        {"node.kubernetes.io/instance-type": "p7.48xlarge"},  # newer than the map: the user's business
        {"node.kubernetes.io/instance-type": "ml.p4d.24xlarge"},  # HyperPod's, in the EKS map
        {"nvidia.com/gpu.product": "NVIDIA-L4"},  # GFD labels EKS nodes too, with the GPU Operator
        {"kubernetes.io/os": "linux"},
    ],
)
def test_what_eks_nodes_may_carry_passes(selector):
    assert refused_by(pod({"nvidia.com/gpu": "1"}, selector)) == []


def test_only_a_pod_asking_for_gpus_is_checked():
    # gpuport translates no pod without a GPU ask, so it would never drop these selectors either.
    assert refused_by(pod({"cpu": "1"}, GKE_L4)) == []
    assert refused_by(pod({"nvidia.com/gpu": "0"}, GKE_L4)) == []
    init = pod({"cpu": "1"}, GKE_L4)
    init["spec"]["initContainers"] = [
        {"name": "warm", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    ]
    assert refused_by(init) == [1]


def test_required_affinity_is_read_term_by_term_and_value_by_value():
    gpu = {"nvidia.com/gpu": "1"}
    gke = ("cloud.google.com/gke-accelerator", "In", ["nvidia-l4"])
    aks = ("node.kubernetes.io/instance-type", "In", ["Standard_ND96asr_v4"])
    eks = ("node.kubernetes.io/instance-type", "In", ["p4d.24xlarge"])
    assert refused_by(with_terms(pod(gpu), term(gke))) == [1]
    assert refused_by(with_terms(pod(gpu), term(gke), term(aks))) == [1]
    # A node of any one term will do, and so will any one value of an In.
    assert refused_by(with_terms(pod(gpu), term(gke), term(eks))) == []
    assert (
        refused_by(
            with_terms(
                pod(gpu),
                term(("node.kubernetes.io/instance-type", "In", ["Standard_ND96asr_v4", "p4d.24xlarge"])),
            )
        )
        == []
    )
    # Operators gpuport leaves as written keep nobody waiting for a label.
    assert (
        refused_by(with_terms(pod(gpu), term(("cloud.google.com/gke-accelerator", "DoesNotExist", [])))) == []
    )
    assert (
        refused_by(with_terms(pod(gpu), term(("cloud.google.com/gke-accelerator", "NotIn", ["nvidia-l4"]))))
        == []
    )


def test_on_gke_its_own_labels_pass_and_eks_instance_types_are_refused():
    assert refused_by(pod({"nvidia.com/gpu": "1"}, GKE_L4), "gke") == []
    # GKE's own machine types are in no map: its nodes carry the key, with values no other map names.
    assert (
        refused_by(pod({"nvidia.com/gpu": "1"}, {"node.kubernetes.io/instance-type": "g2-standard-4"}), "gke")
        == []
    )
    assert refused_by(
        pod({"nvidia.com/gpu": "1"}, {"node.kubernetes.io/instance-type": "p4d.24xlarge"}), "gke"
    ) == [1]
    assert refused_by(pod({"nvidia.com/gpu": "1"}, {"karpenter.k8s.aws/instance-gpu-name": "l4"}), "gke") == [
        1
    ]


def test_a_dra_claim_keeps_its_node_selector_as_gpuport_does():
    # gpuport leaves a claim pod native on a DRA cluster, whatever its node selector says.
    claimed = pod({}, GKE_L4)
    claimed["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    claimed["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    assert refused_by(claimed, "dra-nvidia") == []


@pytest.mark.parametrize("cloud", EVERY_MAP)
def test_a_pod_in_this_cluster_s_own_labels_always_passes(cloud):
    target = CONTEXTS[cloud].target
    labels = [(m.label, v) for m in target.model_labels for values in m.values.values() for v in values]
    labels += [(k, "x") for k in target.selector_keys()]
    assert labels or target.dra is not None
    for key, value in labels:
        obj = pod({target.whole_gpu: "1"}, {key: value})
        assert 1 not in refused_by(obj, cloud), (key, value)
        affinity = with_terms(pod({target.whole_gpu: "1"}), term((key, "In", [value])))
        assert 1 not in refused_by(affinity, cloud), (key, value)


CASES = [(source, target) for source in SOURCES for target in TARGETS]


@pytest.mark.parametrize(("source", "target"), CASES, ids=[f"{s}->{t}" for s, t in CASES])
def test_while_gpuport_answers_the_policy_never_fires(source, target):
    """Every dialect's pod as gpuport's /mutate leaves it for every target passes the policy: gpuport
    drops what the second check refuses, so the check fires only while gpuport is not answering."""
    _, obj, _ = SOURCES[source]
    decision = pipeline.decide(parsed(review_of(obj)), CONTEXTS[target])
    if not decision.allowed:
        return  # refused by gpuport: the policy never sees it
    assert refused_by(jsonpatch.apply_patch(obj, list(decision.patch)), target) == []


@pytest.mark.parametrize("target", ["eks", "gke", "aks", "generic", "amd"])
@pytest.mark.parametrize("written_for", ["eks", "gke", "aks", "oke", "ack", "koordinator", "cce"])
def test_every_label_the_check_refuses_gpuport_translates_away(target, written_for):
    """Each label another map reads, on a pod asking this cluster's GPU: refused by the policy only
    if gpuport, answering, drops it (or refuses the pod)."""
    other, ctx = CONTEXTS.get(written_for) or context(written_for), CONTEXTS[target]
    whole = ctx.target.whole_gpu
    for model_label in other.target.model_labels:
        for values in model_label.values.values():
            obj = pod({whole: "1"}, {model_label.label: values[0]})
            if refused_by(obj, target) != [1]:
                continue
            decision = pipeline.decide(parsed(review_of(obj)), ctx)
            if decision.allowed:
                after = jsonpatch.apply_patch(obj, list(decision.patch))
                assert refused_by(after, target) == [], (model_label.label, values[0], decision.patch)
                assert model_label.label not in after["spec"].get("nodeSelector", {}) or (
                    model_label.label in ctx.target.selector_keys()
                )


def test_the_message_says_what_to_do_in_this_cluster_s_words():
    ctx = CONTEXTS["eks"]
    policy, _ = policy_objects(ctx.target, ctx.dialects.maps, {})
    assert policy["metadata"]["name"] == POLICY_NAME
    message = policy["spec"]["validations"][1]["message"]
    assert "this cluster (eks)" in message
    assert "another platform's GPU or instance-type labels" in message
    assert "retry shortly" in message
    assert "node.kubernetes.io/instance-type" in message and "karpenter.k8s.aws/instance-gpu-name" in message


def test_rendered_from_the_map_in_force():
    ctx = CONTEXTS["eks"]
    keys, pairs = foreign_selectors(ctx.target, ctx.dialects.maps)
    assert "cloud.google.com/gke-accelerator" in keys and "cloud.google.com/gke-gpu-partition-size" in keys
    # Its own keys, the keys every cloud's nodes carry, and the GPU vendors' own labels are no keys here.
    assert not {"node.kubernetes.io/instance-type", "karpenter.k8s.aws/instance-gpu-name"} & set(keys)
    assert "nvidia.com/gpu.product" not in keys
    assert "node.kubernetes.io/instance-type=Standard_ND96asr_v4" in pairs
    assert not [p for p in pairs if p.endswith("=p4d.24xlarge")]
    gke = CONTEXTS["gke"]
    gke_keys, gke_pairs = foreign_selectors(gke.target, gke.dialects.maps)
    assert (
        "karpenter.k8s.aws/instance-gpu-name" in gke_keys
        and "cloud.google.com/gke-accelerator" not in gke_keys
    )
    assert "node.kubernetes.io/instance-type=p4d.24xlarge" in gke_pairs


@pytest.mark.parametrize("target", ["eks", "gke", "generic", "kai"])
def test_a_foreign_key_with_a_value_no_map_knows_is_dropped_or_refused_by_gpuport(target):
    ctx = CONTEXTS[target]
    keys, _ = foreign_selectors(ctx.target, ctx.dialects.maps)
    for key in keys:
        obj = pod({ctx.target.whole_gpu: "1"}, {key: "made-up-gpu"})
        assert refused_by(obj, target) == [1], key
        decision = pipeline.decide(parsed(review_of(obj)), ctx)
        if decision.allowed:
            assert refused_by(jsonpatch.apply_patch(obj, list(decision.patch)), target) == [], key


def test_aks_s_amd_gpus_on_its_mi300x_size_pass_the_safety_net():
    # AKS has AMD GPUs (amd.com/gpu) beside its NVIDIA ones: its own MI300X pod is never refused there.
    mi300x = {"node.kubernetes.io/instance-type": "Standard_ND96isr_MI300X_v5"}
    assert refused_by(pod({"amd.com/gpu": "8"}, mi300x), "aks") == []
    assert refused_by(pod({"amd.com/gpu": "8"}, mi300x), "eks") != []
