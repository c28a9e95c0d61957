"""The namespace's usage a quota decision is made against, on the real cluster view fed watch events: a
burst reads each new pod once, not the whole namespace per review (issue 37: the latency of one
replica grew with the namespace's pods), and the sum kept from the view's journal always decides as
a recount of the pods held would."""

from decimal import Decimal

from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.helpers import context
from tests.quota_fakes import admit, request_for
from tests.translation_cases import pod
from webhook.adapters.kube import clusterview
from webhook.adapters.kube.clusterview import ClusterView
from webhook.adapters.kube.ledger import MemoryLedger
from webhook.adapters.kube.quota_gate import QuotaGate

QUOTA_GPUS = 1000


def listed_view() -> ClusterView:
    view = ClusterView(None)
    for name in ("pods", "resourcequotas", "namespaces", "limitranges", "nodes"):
        view.apply(name, "RELIST", items=[])
        view._synced[name].set()  # listed: as the watch loop marks it
    quota = {"metadata": {"name": "gpus", "namespace": "team-a"}, "spec": {"hard": {}}}
    quota["spec"]["hard"]["requests.nvidia.com/gpu"] = str(QUOTA_GPUS)
    view.apply("resourcequotas", "ADDED", quota)
    return view


def gpu_pod(uid: str, gpus: int = 1, phase: str = "Pending", namespace: str = "team-a", version: int = 1):
    obj = pod({"nvidia.com/gpu": str(gpus)}, name=uid)
    obj["metadata"].update(namespace=namespace, uid=uid, resourceVersion=str(version))
    obj["status"] = {"phase": phase}
    return obj


def fits(gate: QuotaGate, gpus: int, uid: str) -> bool:
    """Whether a dry-run create asking `gpus` passes the quota (dry run: nothing reserved)."""
    return (
        admit(gate, request_for(pod({"nvidia.com/gpu": str(gpus)}), uid, dry_run=True), context("generic"))
        is None
    )


def test_a_burst_reads_each_new_pod_once_whatever_the_namespace_and_cluster_hold():
    view = listed_view()
    for n in range(300):
        view.apply("pods", "ADDED", gpu_pod(f"o{n}", namespace="others"))  # a busy cluster elsewhere
    for n in range(200):
        view.apply("pods", "ADDED", gpu_pod(f"b{n}"))
    listings, summed = [], []
    pods_in = view.pods_in
    view.pods_in = lambda namespace: listings.append(namespace) or pods_in(namespace)
    gate = QuotaGate(view, MemoryLedger(), clock=lambda: 1000.0)
    running_pod_use = gate.running_pod_use
    gate.running_pod_use = lambda other, ctx: (
        summed.append(other["metadata"]["uid"]) or running_pod_use(other, ctx)
    )
    assert fits(gate, QUOTA_GPUS - 200, "first") and not fits(gate, QUOTA_GPUS - 199, "first-over")
    assert listings == ["team-a"] and len(summed) == 200  # the first sum reads the namespace once
    for n in range(200, 500):  # the burst: each review after one more pod landed
        view.apply("pods", "ADDED", gpu_pod(f"b{n}"))
        assert fits(gate, QUOTA_GPUS - n - 1, f"r{n}")
    assert listings == ["team-a"]  # never the whole namespace again
    assert len(summed) == 500  # each pod summed once: a review costs what arrived since, not n
    assert not fits(gate, QUOTA_GPUS - 499, "over")


def test_pods_bound_started_and_finished_in_a_burst_are_moved_in_the_sum_not_recounted():
    # On a real cluster a Job's pods are bound and start while the burst goes on: each is a new record
    # of a pod already summed. It is taken out by its old charge and put back by its new one.
    view = listed_view()
    for n in range(100):
        view.apply("pods", "ADDED", gpu_pod(f"b{n}"))
    listings = []
    pods_in = view.pods_in
    view.pods_in = lambda namespace: listings.append(namespace) or pods_in(namespace)
    gate = QuotaGate(view, MemoryLedger(), clock=lambda: 1000.0)
    assert fits(gate, QUOTA_GPUS - 100, "first")
    for n in range(100):
        view.apply("pods", "MODIFIED", gpu_pod(f"b{n}", phase="Running", version=2))
        view.apply("pods", "ADDED", gpu_pod(f"c{n}", gpus=2))
        assert fits(gate, QUOTA_GPUS - 100 - 2 * (n + 1), f"r{n}")
        assert not fits(gate, QUOTA_GPUS - 100 - 2 * (n + 1) + 1, f"o{n}")
    for n in range(50):  # half of the first ones finish: their GPUs are free again
        view.apply("pods", "MODIFIED", gpu_pod(f"b{n}", phase="Succeeded", version=3))
    assert fits(gate, QUOTA_GPUS - 250, "after") and not fits(gate, QUOTA_GPUS - 249, "after-over")
    assert listings == ["team-a"]  # the namespace was walked once, at the first sum


EVENTS = st.lists(
    st.tuples(
        st.sampled_from(["add", "add", "add", "grow", "finish", "delete", "relist"]),
        st.integers(0, 11),  # which pod
        st.integers(1, 4),  # GPUs
        st.booleans(),  # decide after this event
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(EVENTS, st.integers(1, 6))
# A pod changed in place, then finished: the sum must still hold its new record to take it out by.
@example([("add", 0, 1, True), ("grow", 0, 2, True), ("finish", 0, 2, True)], 6)
@example([("add", 0, 1, False), ("grow", 0, 3, True), ("delete", 0, 1, True)], 6)
def test_the_sum_kept_from_the_journal_decides_as_a_recount(events, journal_length):
    """Pods added, changed in place, finished and deleted, relists, and a journal short enough to be
    outrun: after every decision the quota admits exactly what a recount of the held pods leaves."""
    saved, clusterview.JOURNAL_LENGTH = clusterview.JOURNAL_LENGTH, journal_length
    try:
        view = listed_view()
        gate = QuotaGate(view, MemoryLedger(), clock=lambda: 1000.0)
        held: dict[str, dict] = {}
        for step, (kind, which, gpus, decide) in enumerate(events, start=2):
            uid = f"p{which}"
            if kind in ("add", "grow"):
                if (kind == "add") == (uid in held):
                    continue  # add what is not there, grow what is
                held[uid] = gpu_pod(uid, gpus, version=step)
                view.apply("pods", "MODIFIED" if kind == "grow" else "ADDED", held[uid])
            elif kind == "finish" and uid in held:
                held[uid] = gpu_pod(
                    uid,
                    int(held[uid]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]),
                    "Succeeded",
                    version=step,
                )
                view.apply("pods", "MODIFIED", held[uid])
            elif kind == "delete" and uid in held:
                view.apply("pods", "DELETED", held.pop(uid))
            elif kind == "relist":
                view.apply("pods", "RELIST", items=list(held.values()))
            if decide:
                used = sum(
                    int(Decimal(p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]))
                    for p in held.values()
                    if p["status"]["phase"] != "Succeeded"
                )
                assert fits(gate, QUOTA_GPUS - used, f"fits-{step}")
                assert not fits(gate, QUOTA_GPUS - used + 1, f"over-{step}")
    finally:
        clusterview.JOURNAL_LENGTH = saved
