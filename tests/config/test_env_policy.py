"""The policy that refuses GPUs asked by environment variable in budget namespaces: rendered for the map in
force and evaluated here with cel-python (Kubernetes' quantity functions stood in for by
kubernetes.utils.parse_quantity); tests/integration/test_policy.py runs it in a real API server."""

import celpy
import pytest
from kubernetes.utils import parse_quantity

from tests.helpers import context
from webhook.config.policy import ENV_POLICY_NAME, env_policy_objects
from webhook.config.registration import budget_namespaces_selector


def _quantity(text):
    return celpy.celtypes.StringType(text)


def _is_greater_than(left, right):
    return celpy.celtypes.BoolType(parse_quantity(str(left)) > parse_quantity(str(right)))


def programs(cloud="generic"):
    ctx = context(cloud)
    policy, _ = env_policy_objects(ctx.target, ctx.dialects.maps, {})
    environment = celpy.Environment()
    functions = {"quantity": _quantity, "isGreaterThan": _is_greater_than}
    return [
        environment.program(environment.compile(v["expression"]), functions=functions)
        for v in policy["spec"]["validations"]
    ]


GENERIC = programs()


def admitted(pod, checks=GENERIC):
    return all(bool(p.evaluate({"object": celpy.json_to_cel(pod)})) for p in checks)


def container(env=None, resources=None, name="main"):
    found = {"name": name, "image": "nvidia/cuda:12.4.0-base-ubuntu22.04"}
    if env is not None:
        found["env"] = env
    if resources is not None:
        found["resources"] = {"limits": dict(resources), "requests": dict(resources)}
    return found


def pod(*containers, **spec):
    return {"metadata": {"name": "p"}, "spec": {"containers": list(containers), **spec}}


@pytest.mark.parametrize(
    "env",
    [
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "0,1"},
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "GPU-fef8089b"},
        {"name": "AMD_VISIBLE_DEVICES", "value": "0-7"},
        {"name": "DOCKER_RESOURCE_GPU", "value": "all"},  # the AMD runtime reads every such name
        {"name": "HABANA_VISIBLE_DEVICES", "value": "all"},
        {"name": "HABANA_VISIBLE_DEVICES_EXTRA", "value": "all"},  # the Habana runtime compares prefixes
        {"name": "HABANA_VISIBLE_MODULES", "value": "0,1"},
        {"name": "NVIDIA_VISIBLE_DEVICES", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k"}}},
        {
            "name": "NVIDIA_VISIBLE_DEVICES",
            "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['g']"}},
        },
    ],
)
def test_a_container_given_gpus_by_an_environment_variable_and_no_gpu_resource_is_refused(env):
    assert not admitted(pod(container([env])))
    assert not admitted(pod(container([env], {"cpu": "1"})))
    # Whichever list holds it: an init container, a sidecar beside a container that does ask for GPUs.
    assert not admitted(pod(container(), initContainers=[container([env], name="init")]))
    assert not admitted(pod(container(resources={"nvidia.com/gpu": "1"}), container([env], name="side")))


@pytest.mark.parametrize("value", ["void", "none", ""])
def test_a_value_that_grants_no_gpu_passes(value):
    assert admitted(pod(container([{"name": "NVIDIA_VISIBLE_DEVICES", "value": value}])))
    assert admitted(pod(container([{"name": "AMD_VISIBLE_DEVICES", "value": value}])))
    assert admitted(pod(container([{"name": "NVIDIA_VISIBLE_DEVICES"}])))  # no value: empty


def test_variables_no_runtime_reads_to_give_devices_pass():
    # CUDA_VISIBLE_DEVICES and its kin choose among the devices a container was already given.
    for name in (
        "CUDA_VISIBLE_DEVICES",
        "ROCR_VISIBLE_DEVICES",
        "HIP_VISIBLE_DEVICES",
        "NVIDIA_DRIVER_CAPABILITIES",
    ):
        assert admitted(pod(container([{"name": name, "value": "all"}])))
    assert admitted(pod(container([{"name": "X", "value": "1"}]), initContainers=[container(name="i")]))
    assert admitted(pod(container()))


def test_a_container_that_asks_this_cluster_for_gpus_may_not_set_the_variable_either():
    """Issue 45: the device plugin writes the variable in its allocation and the toolkit keeps the last
    value, the pod's: a container given a 1/7 slice that also sets `all` sees every GPU of the node."""
    for value in ("all", "0,1", "GPU-fef8089b-7b4c-4d5e-9f1a-1234567890ab"):
        everything = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": value}]
        for resource in ("nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/gpu.shared"):
            assert not admitted(pod(container(everything, {resource: "1"})))
            assert not admitted(
                pod(container(), initContainers=[container(everything, {resource: "1"}, "i")])
            )
    amd = programs("amd")
    amd_all = [{"name": "AMD_VISIBLE_DEVICES", "value": "all"}]
    assert not admitted(pod(container(amd_all, {"amd.com/gpu": "1"})), amd)
    # What grants nothing still passes beside a GPU ask.
    void = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]
    assert admitted(pod(container(void, {"nvidia.com/gpu": "1"})))
    # A value read from elsewhere cannot be checked, GPU ask or not.
    from_secret = [
        {"name": "NVIDIA_VISIBLE_DEVICES", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}
    ]
    assert not admitted(pod(container(from_secret, {"nvidia.com/gpu": "1"})))


def test_on_a_dra_cluster_a_container_with_a_claim_may_not_set_the_variable():
    dra = programs("dra-nvidia")
    env = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    claimed = container(env)
    claimed["resources"] = {"claims": [{"name": "gpu"}]}
    assert not admitted(pod(claimed, resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "t"}]), dra)
    assert not admitted(pod(container(env)), dra)
    claimed["env"] = []
    assert admitted(pod(claimed, resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "t"}]), dra)


KAI_WRITES = [
    {
        "name": "NVIDIA_VISIBLE_DEVICES",
        "valueFrom": {"configMapKeyRef": {"name": "p-shared-gpu-0", "key": "NVIDIA_VISIBLE_DEVICES"}},
    }
]
EVERYTHING = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]


def kai_share(*containers, annotations=None, init=()):
    extra = {"initContainers": list(init)} if init else {}
    shared = pod(*containers, schedulerName="kai-scheduler", **extra)
    shared["metadata"]["annotations"] = dict(annotations or {"gpu-fraction": "0.5"})
    return shared


def test_a_share_asked_of_kai_keeps_the_variable_kai_s_webhook_writes_from_a_configmap():
    shared = kai_share(container(KAI_WRITES))
    assert admitted(shared)
    # The annotation means a share only to the scheduler that reads it.
    del shared["spec"]["schedulerName"]
    assert not admitted(shared)
    # Only from KAI's ConfigMap, never a literal, even on the container given the share.
    assert not admitted(kai_share(container(EVERYTHING)))
    secret = [{"name": "NVIDIA_VISIBLE_DEVICES", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]
    assert not admitted(kai_share(container(secret)))


def test_beside_a_kai_share_no_other_container_may_set_the_variable():
    """Issue 45: the whole share pod was exempt, so a sidecar or an init container beside a 1 % share
    could set NVIDIA_VISIBLE_DEVICES=all (or read it from KAI's ConfigMap)."""
    one_percent = {"gpu-fraction": "0.01"}
    for env in (EVERYTHING, KAI_WRITES):
        sidecar = container(env, name="sidecar")
        assert not admitted(kai_share(container(KAI_WRITES), sidecar, annotations=one_percent))
        setup = container(env, name="setup")
        assert not admitted(kai_share(container(KAI_WRITES), init=[setup], annotations=one_percent))


def test_the_container_kai_gives_the_share_is_the_one_the_pod_names():
    named = {"gpu-fraction": "0.5", "gpu-fraction-container-name": "cuda"}
    sidecar_first = kai_share(
        container(name="busybox"), container(KAI_WRITES, name="cuda"), annotations=named
    )
    assert admitted(sidecar_first)
    wrong = kai_share(container(KAI_WRITES, name="busybox"), container(name="cuda"), annotations=named)
    assert not admitted(wrong)
    # KAI's per-container key names it too (its NvFractions mode).
    keyed = {"nvidia.com/container.cuda.gpu-memory.request": "4Gi"}
    assert admitted(
        kai_share(container(name="busybox"), container(KAI_WRITES, name="cuda"), annotations=keyed)
    )
    assert not admitted(
        kai_share(container(KAI_WRITES, name="busybox"), container(name="cuda"), annotations=keyed)
    )


def test_an_ephemeral_container_can_never_set_the_variable():
    debug = {"name": "debug", "image": "busybox", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}
    running = pod(container(resources={"nvidia.com/gpu": "1"}), ephemeralContainers=[debug])
    assert not admitted(running)
    running["metadata"]["annotations"] = {"gpu-fraction": "0.5"}
    running["spec"]["schedulerName"] = "kai-scheduler"
    assert not admitted(running)
    debug["env"] = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]
    assert admitted(running)


def test_the_policy_holds_on_creates_and_added_ephemeral_containers_and_says_what_to_do():
    generic = context("generic")
    policy, binding = env_policy_objects(generic.target, generic.dialects.maps, {"matchLabels": {"a": "b"}})
    assert policy["metadata"]["name"] == binding["spec"]["policyName"] == ENV_POLICY_NAME
    assert policy["spec"]["failurePolicy"] == "Fail" and binding["spec"]["validationActions"] == ["Deny"]
    rules = {
        (tuple(r["operations"]), tuple(r["resources"]))
        for r in policy["spec"]["matchConstraints"]["resourceRules"]
    }
    assert rules == {(("CREATE",), ("pods",)), (("UPDATE",), ("pods/ephemeralcontainers",))}
    assert binding["spec"]["matchResources"]["namespaceSelector"] == {"matchLabels": {"a": "b"}}
    message = policy["spec"]["validations"][0]["message"]
    assert "NVIDIA_VISIBLE_DEVICES" in message and "resources.limits nvidia.com/gpu: 1" in message
    amd = context("amd")
    amd_policy, _ = env_policy_objects(amd.target, amd.dialects.maps, {})
    assert "resources.limits amd.com/gpu: 1" in amd_policy["spec"]["validations"][0]["message"]


def test_the_binding_s_namespaces_are_the_budget_ones_and_none_when_there_is_no_budget():
    def chosen(selector, name, labels=None):
        labels = {"kubernetes.io/metadata.name": name, **(labels or {})}
        for expression in selector["matchExpressions"]:
            present = expression["key"] in labels
            value = labels.get(expression["key"])
            operator = expression["operator"]
            if operator == "In" and not (present and value in expression["values"]):
                return False
            if operator == "NotIn" and present and value in expression["values"]:
                return False
            if operator == "DoesNotExist" and present:
                return False
        return True

    budget = budget_namespaces_selector(["team-b", "ml", "ml"])
    assert chosen(budget, "ml") and chosen(budget, "team-b")
    assert not chosen(budget, "default")
    assert not chosen(budget, "ml", {"gpuport.io/admission": "disabled"})  # opted out, as everywhere
    nothing = budget_namespaces_selector([])
    assert not any(chosen(nothing, n) for n in ("ml", "default", "team-b"))
