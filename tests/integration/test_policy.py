"""The ValidatingAdmissionPolicy safety net, inside a real API server, with no gpuport answering."""

import json
import time
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.translation_cases import pod as _pod

POLICY = Path(__file__).resolve().parents[2] / "manifests" / "validatingadmissionpolicy.yaml"


def bare(resources, name):
    body = _pod(resources, name=name)
    body["metadata"].pop("namespace")
    return body


@pytest.fixture
def policy(apiserver):
    from tests.integration.conftest import E2E_KUBECONFIG

    if E2E_KUBECONFIG:
        pytest.skip("on kind gpuport is answering, so the policy never gets to fire")
    api = client.AdmissionregistrationV1Api(apiserver.client())
    policy_doc, binding = list(yaml.safe_load_all(POLICY.read_text()))
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
    assert "written for another platform; this cluster (generic) does not offer it" in message
    core.create_namespaced_pod(namespace, bare({"nvidia.com/gpu": "1"}, "native"))
