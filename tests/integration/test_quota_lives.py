"""A reservation's life is its admission's (issue 49), through two gpuport processes behind a real
kube-apiserver: pods refused after gpuport by the built-in ResourceQuota never hold GPUs for long, a pod
deleted at the quota frees its place as soon as gpuport's view has seen the delete, and every quota review
sent while the API server is frozen (SIGSTOP) is answered, never met with a closed connection.

This API server has no controller manager: a ResourceQuota's status is filled in here by the test, as the
quota controller would, so the built-in quota plugin enforces it after gpuport's webhooks.
"""

import json
import os
import signal
import ssl
import threading
import time
import urllib.request
import uuid

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.helpers import review_of
from tests.integration.test_quota import gpu_pod, with_quota
from tests.translation_cases import pod as _pod


def full_cpu_quota(core, namespace: str) -> None:
    """A built-in quota on CPU already used up, as a Job retrying against it meets it: the API server
    refuses every pod asking for CPU after the validating webhooks have admitted it."""
    hard = {"requests.cpu": "1"}
    core.create_namespaced_resource_quota(namespace, {"metadata": {"name": "cpu"}, "spec": {"hard": hard}})
    core.patch_namespaced_resource_quota_status(
        "cpu", namespace, {"status": {"hard": hard, "used": {"requests.cpu": "1"}}}
    )


def reservations(apiserver, namespace: str) -> dict:
    coordination = client.CoordinationV1Api(apiserver.client())
    lease = coordination.read_namespaced_lease(f"gpuport-quota-{namespace}", "gpuport-system")
    return json.loads((lease.metadata.annotations or {})["gpuport.io/reservations"])


def test_pods_refused_after_gpuport_by_a_cpu_quota_never_use_up_the_gpu_quota(
    apiserver, gpuport_quota, namespace
):
    """A Job controller retrying against a full CPU quota, a create a second for 60 s against a GPU quota
    of 45: every create is admitted by gpuport and refused by the built-in quota on CPU, none by gpuport
    (a reservation that outlived the time its pod could be stored would refuse the 46th), and the record
    holds only the admissions whose pods the API server may still store (another validating webhook may
    take 30 s, then the landing margin)."""
    core = with_quota(apiserver, namespace, 45)
    full_cpu_quota(core, namespace)
    outcomes = []
    started = time.monotonic()
    for n in range(60):
        time.sleep(max(started + n - time.monotonic(), 0.0))
        body = _pod({"nvidia.com/gpu": "1", "cpu": "100m"}, name=f"retry-{n}")
        body["metadata"].pop("namespace")
        try:
            core.create_namespaced_pod(namespace, body)
            outcomes.append("created")
        except ApiException as exc:
            outcomes.append(json.loads(exc.body)["message"])
    by_gpuport = [o for o in outcomes if "gpuport" in o]
    assert by_gpuport == []
    assert all(
        o.startswith(f'pods "retry-{n}" is forbidden: exceeded quota: cpu') for n, o in enumerate(outcomes)
    )
    # The record holds the admissions whose pods may still come, at one a second.
    from webhook.adapters.kube.ledger import LANDING_SECONDS
    from webhook.adapters.kube.quota_gate import OTHER_WEBHOOKS_SECONDS

    assert len(reservations(apiserver, namespace)["r"]) <= 2 * (
        OTHER_WEBHOOKS_SECONDS + LANDING_SECONDS + 0.5
    )


def test_a_replacement_is_admitted_as_soon_as_the_view_has_seen_the_delete(
    apiserver, gpuport_quota, namespace
):
    """At a quota of 2, one pod deleted: its replacement passes as soon as every gpuport worker has seen
    the delete (dry runs asked until one passes, then the real create), where the deleted pod's
    reservation kept it out for the rest of its 30 s before."""
    core = with_quota(apiserver, namespace, 2)
    core.create_namespaced_pod(namespace, gpu_pod(1, "first"))
    core.create_namespaced_pod(namespace, gpu_pod(1, "second"))
    try:
        core.create_namespaced_pod(namespace, gpu_pod(1, "third"), dry_run="All")
        raise AssertionError("a third GPU pod passed a quota of 2")
    except ApiException as exc:
        assert "exceeded quota: gpus" in exc.body
    core.delete_namespaced_pod("first", namespace, grace_period_seconds=0)
    deleted = time.monotonic()
    passed_in = None
    while passed_in is None and time.monotonic() < deleted + 10:
        try:
            for _ in range(8):  # both replicas, both workers: each must have seen the delete
                core.create_namespaced_pod(namespace, gpu_pod(1, "replacement"), dry_run="All")
            passed_in = time.monotonic() - deleted
        except ApiException as exc:
            assert "exceeded quota: gpus" in exc.body
            time.sleep(0.1)
    assert passed_in is not None, "the replacement was still refused 10 s after the delete"
    core.create_namespaced_pod(namespace, gpu_pod(1, "replacement"))
    print(f"replacement admitted {passed_in:.2f} s after the delete")


def test_every_quota_review_is_answered_while_the_api_server_is_frozen(apiserver, gpuport_quota, namespace):
    """24 quota reviews at once to one gpuport process (2 workers of 4 threads) while the API server is
    stopped: each is answered, refused in words, before the server's 4.5 s cut; the reviews that waited
    for a thread had their deadlines counted from their arrival (before, those ran a fresh 3.5 s and
    some connections were cut without an answer)."""
    with_quota(apiserver, namespace, 8)
    server = gpuport_quota[0]
    context = ssl.create_default_context(cafile=str(server.ca_file))
    start, answers, seconds = threading.Barrier(24), [None] * 24, [0.0] * 24

    def review(n: int) -> None:
        uid = str(uuid.uuid4())
        body = dict(
            _pod({"nvidia.com/gpu": "1"}), metadata={"name": f"f{n}", "namespace": namespace, "uid": uid}
        )
        envelope = review_of(body, uid=uid)
        envelope["request"]["namespace"] = namespace
        url = f"https://127.0.0.1:{server.port}/validate?timeout=5s"  # as the API server calls it
        request = urllib.request.Request(
            url, data=json.dumps(envelope).encode(), headers={"Content-Type": "application/json"}
        )
        start.wait()
        sent = time.monotonic()
        try:
            with urllib.request.urlopen(request, context=context, timeout=10) as response:
                answers[n] = json.loads(response.read())["response"]
        except OSError as exc:
            answers[n] = f"no answer: {exc}"
        seconds[n] = time.monotonic() - sent

    os.kill(apiserver.apiserver.pid, signal.SIGSTOP)
    try:
        threads = [threading.Thread(target=review, args=(n,)) for n in range(24)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        os.kill(apiserver.apiserver.pid, signal.SIGCONT)
    unanswered = [(f"{s:.2f} s", a) for a, s in zip(answers, seconds, strict=True) if not isinstance(a, dict)]
    assert unanswered == [], sorted(round(s, 2) for s in seconds)
    refused = [a["status"]["message"] for a in answers if not a["allowed"]]
    assert refused and all("gpuport" in m and "retry shortly" in m for m in refused), refused
