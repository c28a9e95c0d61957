"""Allotments on a real kube-apiserver (issue 49), through two gpuport processes of two workers each: far
below its GPU quota a namespace's burst of identical pods is admitted from allotments, each written into
the namespace's Lease as one row standing for many pods, and the record the API server holds says so.
Near the quota, every pod is reserved on its own and exactly the quota passes (tests/integration/
test_quota.py); that no quota is overshot whatever pods come late or never is the property test of
tests/adapters/test_allotments.py."""

from tests.integration.test_quota import gpu_pod, with_quota
from tests.integration.test_quota_lives import reservations
from webhook.adapters.kube.allotments import ALLOTMENT, ALLOTMENT_KEY


def test_a_burst_far_below_its_quota_is_admitted_from_allotments_the_lease_records(
    apiserver, gpuport_quota, namespace
):
    core = with_quota(apiserver, namespace, 1_000_000)
    for n in range(40):
        core.create_namespaced_pod(namespace, gpu_pod(1, name=f"burst-{n}"))
    stored = core.list_namespaced_pod(namespace).items
    assert len(stored) == 40
    rows = reservations(apiserver, namespace)["r"]
    allotments = [row for row in rows if row[0].startswith(ALLOTMENT_KEY)]
    # At most one per worker (four): 40 pods in a few seconds, each worker drawing on its own allotment.
    assert 1 <= len(allotments) <= 4, rows
    # Fewer rows than pods: the pods drawn from an allotment need no row of their own while it is usable.
    assert len(rows) < 40, rows
    assert ALLOTMENT > 40  # one allotment could hold the whole burst: the test reads what fits it
