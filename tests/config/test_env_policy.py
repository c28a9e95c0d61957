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


def test_a_container_that_asks_this_cluster_for_gpus_may_set_the_variable():
    everything = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    for resource in ("nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/gpu.shared"):
        assert admitted(pod(container(everything, {resource: "1"})))
        assert admitted(pod(container(), initContainers=[container(everything, {resource: "1"}, "i")]))
    # Asking for none of it is not asking: `0` however written, or a resource this cluster lacks.
    for zero in ("0", "0k", "0.0"):
        assert not admitted(pod(container(everything, {"nvidia.com/gpu": zero})))
    assert not admitted(pod(container(everything, {"example.com/fpga": "1"})))
    amd = programs("amd")
    assert admitted(pod(container(everything, {"amd.com/gpu": "1"})), amd)
    assert not admitted(pod(container(everything, {"nvidia.com/gpu": "1"})), amd)


def test_on_a_dra_cluster_a_container_with_a_claim_asks_for_gpus():
    dra = programs("dra-nvidia")
    env = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    claimed = container(env)
    claimed["resources"] = {"claims": [{"name": "gpu"}]}
    assert admitted(pod(claimed, resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "t"}]), dra)
    assert not admitted(pod(container(env)), dra)
    # On a device-plugin cluster a claim is not how gpuport counts GPUs.
    assert not admitted(pod(claimed, resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "t"}]))


def test_a_share_asked_of_kai_keeps_the_variable_kai_s_webhook_writes_from_a_configmap():
    env = [
        {
            "name": "NVIDIA_VISIBLE_DEVICES",
            "valueFrom": {"configMapKeyRef": {"name": "shared-gpu", "key": "k"}},
        }
    ]
    shared = pod(container(env), schedulerName="kai-scheduler")
    shared["metadata"]["annotations"] = {"gpu-fraction": "0.5"}
    assert admitted(shared)
    # The annotation means a share only to the scheduler that reads it.
    del shared["spec"]["schedulerName"]
    assert not admitted(shared)


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
