"""The ValidatingAdmissionPolicy safety net, inside a real API server, with no gpuport answering."""

import json
import time

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.translation_cases import pod as _pod


def bare(resources, name):
    body = _pod(resources, name=name)
    body["metadata"].pop("namespace")
    return body


@pytest.fixture
def policy(apiserver):
    from tests.integration.conftest import E2E_KUBECONFIG

    if E2E_KUBECONFIG:
        pytest.skip("on kind gpuport is answering, so the policy never gets to fire")
    from tests.helpers import context
    from webhook.config.policy import policy_objects
    from webhook.config.registration import excluded_namespaces

    api = client.AdmissionregistrationV1Api(apiserver.client())
    generic = context("generic")  # as gpuport registers it for this cluster's map
    policy_doc, binding = policy_objects(generic.target, generic.dialects.maps, excluded_namespaces())
    api.create_validating_admission_policy(policy_doc)
    api.create_validating_admission_policy_binding(binding)
    yield
    api.delete_validating_admission_policy_binding(binding["metadata"]["name"])
    api.delete_validating_admission_policy(policy_doc["metadata"]["name"])


def test_a_pod_written_for_another_cloud_is_refused_while_gpuport_is_away(apiserver, policy, namespace):
    core = client.CoreV1Api(apiserver.client())
    deadline = time.monotonic() + 20
    message = None
    while time.monotonic() < deadline and message is None:
        try:
            core.create_namespaced_pod(namespace, bare({"aliyun.com/gpu-mem": "8"}, "ack"), dry_run="All")
            time.sleep(0.5)  # the policy is not active yet
        except ApiException as exc:
            message = json.loads(exc.body)["message"]
    assert message is not None, "the policy never refused the pod"
    assert "gpuport's safety net for this cluster (generic)" in message
    assert "written for another platform, which no node here offers" in message
    core.create_namespaced_pod(namespace, bare({"nvidia.com/gpu": "1"}, "native"))


def _new_namespace(core):
    import uuid

    name = f"team-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    core.create_namespaced_service_account(name, {"metadata": {"name": "default"}})
    return name


def _refusal(create, deadline_s=20):
    """The message the API server refuses with, once the policy is active (it is picked up
    asynchronously); None if it never refuses."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        try:
            create()
        except ApiException as exc:
            return json.loads(exc.body)["message"]
        time.sleep(0.5)
    return None


def _with_env(resources, name, env):
    body = bare(resources, name)
    body["spec"]["containers"][0]["env"] = env
    if not resources:
        del body["spec"]["containers"][0]["resources"]
    return body


ALL_GPUS = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]


@pytest.fixture
def env_policy(apiserver, namespace):
    """gpuport's environment-variable policy as it registers it, `namespace` the one GPU budget."""
    from tests.integration.conftest import E2E_KUBECONFIG

    if E2E_KUBECONFIG:
        pytest.skip("the kind install keeps its own budget list")
    from tests.helpers import context
    from webhook.config.policy import env_policy_objects
    from webhook.config.registration import budget_namespaces_selector

    api = client.AdmissionregistrationV1Api(apiserver.client())
    generic = context("generic")
    policy_doc, binding = env_policy_objects(
        generic.target, generic.dialects.maps, budget_namespaces_selector([namespace])
    )
    api.create_validating_admission_policy(policy_doc)
    api.create_validating_admission_policy_binding(binding)
    yield policy_doc
    api.delete_validating_admission_policy_binding(binding["metadata"]["name"])
    api.delete_validating_admission_policy(policy_doc["metadata"]["name"])


def test_gpus_by_environment_variable_are_refused_only_in_a_budget_namespace(
    apiserver, env_policy, namespace
):
    core = client.CoreV1Api(apiserver.client())
    everything = _with_env({}, "all-gpus", ALL_GPUS)
    message = _refusal(lambda: core.create_namespaced_pod(namespace, everything, dry_run="All"))
    assert message is not None, "the policy never refused the pod"
    assert "ValidatingAdmissionPolicy 'gpuport-gpu-env'" in message
    assert "Ask for the GPUs as a resource instead (e.g. resources.limits nvidia.com/gpu: 1)" in message

    # The same pod where there is no GPU budget; a value that gives nothing.
    core.create_namespaced_pod(_new_namespace(core), everything)
    core.create_namespaced_pod(
        namespace, _with_env({}, "nothing", [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}])
    )
    # Zero GPUs is no ask, and a value read from elsewhere cannot be checked.
    for name, resources, env in (
        ("zero", {"nvidia.com/gpu": "0"}, ALL_GPUS),
        (
            "from-a-configmap",
            {},
            [{"name": "NVIDIA_VISIBLE_DEVICES", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}],
        ),
        ("amd", {}, [{"name": "AMD_VISIBLE_DEVICES", "value": "all"}]),
        # Issue 45: beside a GPU the budget counts too (the toolkit keeps the pod's value, the last).
        ("counted", {"nvidia.com/gpu": "1"}, ALL_GPUS),
        (
            "counted-slice",
            {"nvidia.com/mig-1g.10gb": "1"},
            [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "0,1"}],
        ),
    ):
        with pytest.raises(ApiException, match="gpuport-gpu-env"):
            core.create_namespaced_pod(namespace, _with_env(resources, name, env), dry_run="All")


KAI_WRITES = [
    {
        "name": "NVIDIA_VISIBLE_DEVICES",
        "valueFrom": {"configMapKeyRef": {"name": "p-shared-gpu", "key": "NVIDIA_VISIBLE_DEVICES"}},
    }
]


def _kai_share(name, containers, annotations, init=()):
    body = bare({}, name)
    body["metadata"]["annotations"] = annotations
    body["spec"]["schedulerName"] = "kai-scheduler"
    body["spec"]["containers"] = [{"name": n, "image": "busybox", "env": env} for n, env in containers]
    if init:
        body["spec"]["initContainers"] = [{"name": n, "image": "busybox", "env": env} for n, env in init]
    return body


def test_beside_a_kai_share_only_the_variable_kai_writes_passes(apiserver, env_policy, namespace):
    """Issue 45: the whole share pod was exempt; now only KAI's ConfigMap value on the container it gives
    the share (the first, or the one named) passes, as the real API server evaluates the policy."""
    core = client.CoreV1Api(apiserver.client())
    _refusal(lambda: core.create_namespaced_pod(namespace, _with_env({}, "probe", ALL_GPUS), dry_run="All"))
    one_percent = {"gpu-fraction": "0.01"}
    core.create_namespaced_pod(
        namespace, _kai_share("shared", [("main", KAI_WRITES)], one_percent), dry_run="All"
    )
    named = {"gpu-fraction": "0.5", "gpu-fraction-container-name": "cuda"}
    core.create_namespaced_pod(
        namespace, _kai_share("named", [("busybox", []), ("cuda", KAI_WRITES)], named), dry_run="All"
    )
    for body in (
        _kai_share("sidecar", [("main", KAI_WRITES), ("sidecar", ALL_GPUS)], one_percent),
        _kai_share("init", [("main", KAI_WRITES)], one_percent, init=[("setup", ALL_GPUS)]),
        _kai_share("literal", [("main", ALL_GPUS)], one_percent),
        _kai_share("elsewhere", [("busybox", KAI_WRITES), ("cuda", [])], named),
    ):
        with pytest.raises(ApiException, match="gpuport-gpu-env"):
            core.create_namespaced_pod(namespace, body, dry_run="All")


def test_an_ephemeral_container_added_with_the_variable_is_refused(apiserver, env_policy, namespace):
    core = client.CoreV1Api(apiserver.client())
    _refusal(lambda: core.create_namespaced_pod(namespace, _with_env({}, "probe", ALL_GPUS), dry_run="All"))
    core.create_namespaced_pod(namespace, bare({"nvidia.com/gpu": "1"}, "running"))
    debug = {"name": "debug", "image": "busybox", "targetContainerName": "main"}
    with pytest.raises(ApiException, match="An ephemeral container cannot ask for a GPU resource"):
        core.patch_namespaced_pod_ephemeralcontainers(
            "running", namespace, {"spec": {"ephemeralContainers": [{**debug, "env": ALL_GPUS}]}}
        )
    core.patch_namespaced_pod_ephemeralcontainers(
        "running", namespace, {"spec": {"ephemeralContainers": [debug]}}
    )


@pytest.fixture
def policy_status(apiserver, tmp_path):
    """kube-controller-manager running only the controller that type-checks policies into their status
    (nothing else of it touches this shared control plane)."""
    import subprocess

    from tests.integration.conftest import _binary, kubeconfig, stop_processes

    log = open(tmp_path / "controller-manager.log", "wb")  # noqa: SIM115
    process = subprocess.Popen(
        [
            _binary("kube-controller-manager"),
            "--kubeconfig",
            str(kubeconfig(apiserver, tmp_path / "kubeconfig")),
            "--leader-elect=false",
            "--secure-port=0",
            "--controllers=validatingadmissionpolicy-status-controller",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    yield
    stop_processes((process,), (log,))


def _type_checking(apiserver, name):
    """The policy's status.typeChecking once the status controller has filled it."""
    api = client.AdmissionregistrationV1Api(apiserver.client())
    deadline = time.monotonic() + 60
    status = {}
    while time.monotonic() < deadline:
        found = api.read_validating_admission_policy(name, _preload_content=False)
        status = json.loads(found.data).get("status") or {}
        if status.get("typeChecking") is not None:
            break
        time.sleep(0.5)
    assert "typeChecking" in status, f"the API server never type-checked the policy: {status}"
    return status["typeChecking"]


def test_the_env_policy_type_checks_cleanly_on_the_real_api_server(apiserver, env_policy, policy_status):
    checked = _type_checking(apiserver, env_policy["metadata"]["name"])
    assert not checked.get("expressionWarnings"), checked


@pytest.fixture
def eks_policy(apiserver):
    """The safety net as gpuport registers it on an EKS cluster, with nothing of gpuport serving."""
    from tests.integration.conftest import E2E_KUBECONFIG

    if E2E_KUBECONFIG:
        pytest.skip("on kind gpuport is answering, so the policy never gets to fire")
    from tests.helpers import context
    from webhook.config.policy import policy_objects
    from webhook.config.registration import excluded_namespaces

    api = client.AdmissionregistrationV1Api(apiserver.client())
    eks = context("eks")
    policy_doc, binding = policy_objects(eks.target, eks.dialects.maps, excluded_namespaces())
    api.create_validating_admission_policy(policy_doc)
    api.create_validating_admission_policy_binding(binding)
    yield policy_doc
    api.delete_validating_admission_policy_binding(binding["metadata"]["name"])
    api.delete_validating_admission_policy(policy_doc["metadata"]["name"])


def _selected(resources, name, selector):
    body = bare(resources, name)
    body["spec"]["nodeSelector"] = dict(selector)
    return body


def test_a_gke_gpu_pod_is_refused_on_eks_while_gpuport_is_away_and_its_own_pods_pass(
    apiserver, eks_policy, namespace, policy_status
):
    core = client.CoreV1Api(apiserver.client())
    gke = _selected({"nvidia.com/gpu": "1"}, "gke-l4", {"cloud.google.com/gke-accelerator": "nvidia-l4"})
    message = _refusal(lambda: core.create_namespaced_pod(namespace, gke, dry_run="All"))
    assert message is not None, "the policy never refused the pod"
    assert "ValidatingAdmissionPolicy 'gpuport-gpu-names'" in message
    assert "gpuport's safety net for this cluster (eks)" in message
    assert "names another platform's GPU or instance-type labels" in message
    assert "retry shortly, or write the pod for this cluster's GPU labels" in message
    assert "node.kubernetes.io/instance-type" in message
    # The same through a required node-affinity term, and an AKS instance type.
    aks = bare({"nvidia.com/gpu": "1"}, "aks-a100")
    aks["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": "node.kubernetes.io/instance-type",
                                "operator": "In",
                                "values": ["Standard_ND96asr_v4"],
                            }
                        ]
                    }
                ]
            }
        }
    }
    with pytest.raises(ApiException, match="names another platform's GPU or instance-type labels"):
        core.create_namespaced_pod(namespace, aks, dry_run="All")
    # EKS's own words pass, and so does a pod asking for no GPU whatever its selector.
    core.create_namespaced_pod(
        namespace,
        _selected({"nvidia.com/gpu": "1"}, "p4d", {"node.kubernetes.io/instance-type": "p4d.24xlarge"}),
    )
    core.create_namespaced_pod(
        namespace,
        _selected({"nvidia.com/gpu": "1"}, "karpenter", {"karpenter.k8s.aws/instance-gpu-name": "a100"}),
    )
    core.create_namespaced_pod(namespace, bare({"nvidia.com/gpu": "1"}, "plain"))
    core.create_namespaced_pod(
        namespace, _selected({"cpu": "100m"}, "cpu-only", {"cloud.google.com/gke-accelerator": "nvidia-l4"})
    )
    checked = _type_checking(apiserver, eks_policy["metadata"]["name"])
    assert not checked.get("expressionWarnings"), checked
