"""GPU quota enforced by two gpuport processes behind a real kube-apiserver.

This API server has no controller manager: ResourceQuota status is never filled in, so the built-in
quota plugin enforces nothing and every refusal here is gpuport's.
"""

import json
import threading
import time
import uuid

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.translation_cases import pod as _pod


def gpu_pod(gpus, name=None):
    body = _pod({"nvidia.com/gpu": str(gpus)}, name=name or f"p-{uuid.uuid4().hex[:6]}")
    body["metadata"].pop("namespace")
    return body


def with_quota(apiserver, namespace, gpus):
    core = client.CoreV1Api(apiserver.client())
    core.create_namespaced_resource_quota(
        namespace, {"metadata": {"name": "gpus"}, "spec": {"hard": {"requests.nvidia.com/gpu": str(gpus)}}}
    )
    # Wait until every gpuport worker's view has the quota: a pod over it must be refused.
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        refused = 0
        for _ in range(6):
            try:
                core.create_namespaced_pod(namespace, gpu_pod(gpus + 1), dry_run="All")
            except ApiException as exc:
                refused += "exceeded quota" in exc.body
        if refused == 6:
            return core
        time.sleep(0.3)
    raise AssertionError("gpuport never saw the quota")


def test_quota_holds_at_the_boundary_with_the_builtin_wording(apiserver, gpuport_quota, namespace):
    core = with_quota(apiserver, namespace, 2)
    core.create_namespaced_pod(namespace, gpu_pod(2, "two"))
    with pytest.raises(ApiException) as info:
        core.create_namespaced_pod(namespace, gpu_pod(1, "one-more"))
    message = json.loads(info.value.body)["message"]
    assert info.value.status == 403
    assert message.startswith(
        'admission webhook "pods.validate.gpuport.io" denied the request: pods "one-more" is '
        "forbidden: exceeded quota: gpus, requested: requests.nvidia.com/gpu=1, "
        "used: requests.nvidia.com/gpu=2, limited: requests.nvidia.com/gpu=2"
    )


def test_fifty_concurrent_creates_against_a_quota_of_8_with_two_gpuport_processes(
    apiserver, gpuport_quota, namespace
):
    core = with_quota(apiserver, namespace, 8)
    outcomes = []

    def create():
        api = client.CoreV1Api(apiserver.client())
        try:
            api.create_namespaced_pod(namespace, gpu_pod(1))
            outcomes.append("created")
        except ApiException as exc:
            outcomes.append("quota" if "exceeded quota" in exc.body else f"other: {exc.body[:200]}")

    threads = [threading.Thread(target=create) for _ in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes.count("created") == 8, outcomes
    assert outcomes.count("quota") == 42, outcomes
    assert len(core.list_namespaced_pod(namespace).items) == 8


def test_dry_run_creates_leave_no_reservations(apiserver, gpuport_quota, namespace):
    core = with_quota(apiserver, namespace, 1)
    for _ in range(5):
        core.create_namespaced_pod(namespace, gpu_pod(1), dry_run="All")
    coordination = client.CoordinationV1Api(apiserver.client())
    try:
        lease = coordination.read_namespaced_lease(f"gpuport-quota-{namespace}", "gpuport-system")
        reservations = json.loads((lease.metadata.annotations or {}).get("gpuport.io/reservations", "{}"))
    except ApiException as exc:
        assert exc.status == 404
        reservations = {}
    assert reservations == {}
    core.create_namespaced_pod(namespace, gpu_pod(1, "real"))  # the dry runs took nothing
