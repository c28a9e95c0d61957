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
