"""A reservation lives as long as its admission (issue 49): it frees its place the moment the view sees its
pod deleted or finished, ends once its API server can no longer create the pod, and a review's deadlines
count from its arrival, not from when a thread was free to answer it. On the real cluster view, fed watch
events, and the Lease ledger on a fake coordination API that fails where the API server would."""

import json
import threading
import time

from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.helpers import context
from tests.quota_fakes import FakeCoordination, admit, request_for
from tests.translation_cases import pod
from webhook.adapters.kube.clusterview import ClusterView
from webhook.adapters.kube.ledger import LANDING_SECONDS, RESERVATIONS_ANNOTATION, LeaseLedger, decode
from webhook.adapters.kube.quota_gate import ADMISSION_SECONDS, OTHER_WEBHOOKS_SECONDS, QuotaGate


def view_with_quota(gpus: int) -> ClusterView:
    view = ClusterView(None)
    for name in ("pods", "resourcequotas", "namespaces", "limitranges", "nodes"):
        view.apply(name, "RELIST", items=[])
        view._synced[name].set()  # listed: as the watch loop marks it
    quota = {"metadata": {"name": "gpus", "namespace": "team-a"}, "spec": {"hard": {}}}
    quota["spec"]["hard"]["requests.nvidia.com/gpu"] = str(gpus)
    view.apply("resourcequotas", "ADDED", quota)
    view._note_read_through("pods", "1")  # the watch has read the stream this far
    return view


def created(view: ClusterView, uid: str, version: int, phase: str = "Pending") -> dict:
    """The watch event of the pod that admission `uid` let through, as the view receives it."""
    obj = pod({"nvidia.com/gpu": "1"}, name=uid)
    obj["metadata"].update(namespace="team-a", uid=uid, resourceVersion=str(version))
    obj["status"] = {"phase": phase}
    view.apply("pods", "ADDED", obj)
    view._note_read_through("pods", str(version))
    return obj


def play_at_quota(
    steps, gates: list, view: ClusterView, clock: list[int], quota: int, meanwhile=lambda: None
) -> None:
    """Plays `steps` (review, create, see, delete, see-delete, wait; see STEPS) against `gates` sharing
    one namespace at its GPU quota: a review by gates[pick], the API server creating an admitted pod up to
    OTHER_WEBHOOKS_SECONDS later or never, views receiving a created pod within LANDING_SECONDS and deletes
    whenever, `meanwhile` called as time passes (what background threads do); after every step the pods
    that exist never pass `quota`. `clock` counts tenths."""
    admitted: list[tuple[str, int]] = []  # (uid, when)
    created_at: dict[str, int] = {}  # pods that exist, not yet in the view, by uid
    in_view: dict[str, dict] = {}
    deleted: list[str] = []  # deleted pods the view still holds
    version, reviews = [10], iter(range(1000))

    def deliver(uid: str) -> None:
        version[0] += 1
        in_view[uid] = created(view, uid, version[0])

    for action, pick in steps:
        if action == "wait":
            clock[0] += pick
            meanwhile()
        if action in ("review", "wait"):  # every pod created LANDING_SECONDS ago is in the view by now
            for uid in [u for u, t in created_at.items() if t + 10 * LANDING_SECONDS <= clock[0]]:
                created_at.pop(uid)
                deliver(uid)
        if action == "review":
            uid = f"p{next(reviews)}"
            if one_gpu(gates[pick], uid):
                admitted.append((uid, clock[0]))
        elif action == "create":
            creatable = [
                u
                for u, t in admitted
                if clock[0] <= t + 10 * OTHER_WEBHOOKS_SECONDS and u not in created_at and u not in in_view
            ]
            if creatable:
                uid = creatable[pick % len(creatable)]
                created_at[uid] = clock[0]
                admitted.remove(next(a for a in admitted if a[0] == uid))
        elif action == "see" and created_at:
            uid = sorted(created_at)[pick % len(created_at)]
            created_at.pop(uid)
            deliver(uid)
        elif action == "delete" and set(in_view) - set(deleted):
            # A pod is deleted once: counted out twice, it would hide a pod over the quota.
            alive = sorted(set(in_view) - set(deleted))
            deleted.append(alive[pick % len(alive)])
        elif action == "see-delete" and deleted:
            uid = deleted.pop(pick % len(deleted))
            view.apply("pods", "DELETED", in_view.pop(uid))
        exist = len(created_at) + len(in_view) - len(deleted)
        assert exist <= quota


def one_gpu(gate: QuotaGate, uid: str) -> bool:
    """Whether a one-GPU create is admitted (and reserved)."""
    return admit(gate, request_for(pod({"nvidia.com/gpu": "1"}), uid), context("generic")) is None


def stored_keys(api: FakeCoordination) -> list[str]:
    _, annotations = api.leases["gpuport-quota-team-a"]
    return [r.key for r in decode(annotations[RESERVATIONS_ANNOTATION])]


def test_a_pod_seen_deleted_or_finished_frees_its_place_at_once():
    """At its quota of 2, a pod deleted a second after its creation leaves room for its replacement as
    soon as the view has seen the delete (it was refused for the reservation's 30 s before), and the
    record drops it; a pod seen finished likewise."""
    view, api, clock = view_with_quota(2), FakeCoordination(), [1000.0]
    gate = QuotaGate(view, LeaseLedger(api, "gpuport-system"), clock=lambda: clock[0])
    assert one_gpu(gate, "a") and one_gpu(gate, "b")
    first = created(view, "a", 10)
    created(view, "b", 11)
    clock[0] += 1
    assert not one_gpu(gate, "c")  # at the quota
    view.apply("pods", "DELETED", first)
    assert one_gpu(gate, "replacement")
    assert "a" not in stored_keys(api)  # gone from the record with the write that admitted the replacement
    assert not one_gpu(gate, "d")  # b and the replacement: at the quota again
    finished = created(view, "b", 12, phase="Succeeded")
    assert finished["status"]["phase"] == "Succeeded"
    assert one_gpu(gate, "after-b")
    assert "b" not in stored_keys(api)


def test_a_deleted_pod_the_view_missed_while_its_watch_was_down_is_gone_all_the_same():
    view, api, clock = view_with_quota(1), FakeCoordination(), [1000.0]
    gate = QuotaGate(view, LeaseLedger(api, "gpuport-system"), clock=lambda: clock[0])
    assert one_gpu(gate, "a")
    created(view, "a", 10)
    assert not one_gpu(gate, "b")
    view.apply("pods", "RELIST", items=[])  # listed again after a 410: the pod was deleted meanwhile
    assert one_gpu(gate, "c")


def test_a_reservation_whose_pod_never_comes_lives_as_long_as_its_api_server_may_create_the_pod():
    """A pod refused after gpuport (the built-in quota on CPU, another webhook) is never created: its
    place is held while its API server may still create it (the other validating webhooks beside gpuport's
    may take up to 30 s, and it is stored after them) and as long as a created pod takes to reach the
    views, then freed."""
    view, api, clock = view_with_quota(1), FakeCoordination(), [1000.0]
    gate = QuotaGate(
        view,
        LeaseLedger(api, "gpuport-system"),
        clock=lambda: clock[0],
        timing=lambda: (time.monotonic(), 5.0),
    )
    assert one_gpu(gate, "never-created")
    clock[0] += OTHER_WEBHOOKS_SECONDS + LANDING_SECONDS - 0.5
    assert not one_gpu(gate, "while-it-may-still-come")  # never overshoot: it could still land
    clock[0] += 0.6
    assert one_gpu(gate, "after")
    assert stored_keys(api) == ["after"]  # the record holds nothing that is over


def test_a_review_that_waited_for_a_thread_has_that_much_less_time_for_the_store():
    """The deadline the store is given counts from the review's arrival: one that waited 3 s for a thread
    behind reviews stuck on a frozen API server is refused in words within the server's 4.5 s, never left
    to run 3.5 s more and have its connection cut."""
    deadlines = []

    class Frozen:
        def reserve(self, namespace, reservation, decide, now, settled, write=True, mark=None, deadline=None):
            deadlines.append(deadline)
            from webhook.adapters.kube.ledger import DEADLINE_PASSED, LedgerUnavailable

            raise LedgerUnavailable(DEADLINE_PASSED)

    arrived = time.monotonic() - 3.0
    gate = QuotaGate(view_with_quota(1), Frozen(), timing=lambda: (arrived, 5.0))
    refused = admit(gate, request_for(pod({"nvidia.com/gpu": "1"}), "late"), context("generic"))
    assert refused.reason == "quota-unavailable" and "deadline passed" in refused.message
    assert deadlines == [arrived + ADMISSION_SECONDS]


def test_the_record_stops_growing_when_pods_never_come_whatever_the_length_of_the_burst():
    """20 admissions a second whose pods never appear (a Job retrying against a full CPU quota): the
    record holds the admissions whose pods may still come (its lives end by 0.1 s ticks), the same after
    60 s as after 90: it stops growing once the first lives end."""
    view, api, clock = view_with_quota(1_000_000), FakeCoordination(), [1000.0]
    gate = QuotaGate(
        view,
        LeaseLedger(api, "gpuport-system"),
        clock=lambda: clock[0],
        timing=lambda: (time.monotonic(), 5.0),
    )
    sizes = {}
    for n in range(20 * 90):
        clock[0] = 1000.0 + n / 20
        assert one_gpu(gate, f"{n:08d}-7c1e-4a53-9f0b-3d2e6a8b1c4d")
        if n + 1 in (20 * 60, 20 * 90):
            sizes[(n + 1) // 20] = len(api.leases["gpuport-quota-team-a"][1][RESERVATIONS_ANNOTATION])
    live = len(stored_keys(api))
    assert live <= 20 * (OTHER_WEBHOOKS_SECONDS + LANDING_SECONDS + 0.2)
    assert sizes[90] <= sizes[60] * 1.02
    assert sizes[90] <= live * 60


def test_the_record_s_size_does_not_follow_the_rate_and_it_counts_every_admission_that_may_still_land():
    """At 20 and at 100 admissions a second whose pods never appear, the record is under 16 KiB after
    50 s (named, each took ~55 bytes: 44 KiB at 20 a second, 220 KiB at 100, refused past 192), and it
    still holds every admission whose pod its API server may create: folded into sums, never lost."""
    from webhook.adapters.kube.ledger import admissions

    for rate in (20, 100):
        view, api, clock = view_with_quota(1_000_000), FakeCoordination(), [1000.0]
        gate = QuotaGate(
            view,
            LeaseLedger(api, "gpuport-system"),
            clock=lambda clock=clock: clock[0],
            timing=lambda: (time.monotonic(), 5.0),
            allotment=0,  # every pod reserved on its own: what folding bounds
        )
        for n in range(rate * 50):
            clock[0] = 1000.0 + n / rate
            assert one_gpu(gate, f"{n:08d}-7c1e-4a53-9f0b-3d2e6a8b1c4d")
        text = api.leases["gpuport-quota-team-a"][1][RESERVATIONS_ANNOTATION]
        record = decode(text)
        assert len(text) < 16 * 1024, (rate, len(text))
        lives = OTHER_WEBHOOKS_SECONDS + LANDING_SECONDS
        may_land = len([n for n in range(rate * 50) if 1000.0 + n / rate + lives > clock[0]])
        assert admissions(record) >= may_land  # never fewer than may still come
        assert admissions(record) <= may_land + 2 * rate  # what ended leaves within a second or so


def test_the_seconds_a_review_has_are_read_from_the_api_servers_call():
    """The API server puts its wait in the call's URL as a Go duration, rounded up to whole seconds."""
    from webhook.adapters.http.admission_wsgi import DEFAULT_CALL_SECONDS, call_seconds

    assert call_seconds("timeout=5s") == 5.0
    assert call_seconds("timeout=1m0s") == 60.0
    assert call_seconds("timeout=1500ms") == 1.5
    for unreadable in ("", "timeout=", "timeout=5", "timeout=-3s", "timeout=5s;rm", "timeout=0s"):
        assert call_seconds(unreadable) == DEFAULT_CALL_SECONDS, unreadable


def test_a_store_call_that_times_out_is_not_made_again_past_its_deadline(tmp_path):
    """An API server that takes requests and never answers (frozen): the reservation store's read is sent
    once and ends with its timeout. urllib3's default sent it four times, each with the whole timeout, so
    an admission's answer came seconds after its deadline and the server cut the connection."""
    import socket

    import pytest
    from urllib3.exceptions import HTTPError

    from webhook.commands.app import quota_gate

    listener = socket.create_server(("127.0.0.1", 0))
    requests, held = [], []

    def take() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            held.append(connection)
            requests.append(connection.recv(65536).split(b" ", 1)[0])

    threading.Thread(target=take, daemon=True).start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "frozen",
                "clusters": [
                    {"name": "frozen", "cluster": {"server": f"http://127.0.0.1:{listener.getsockname()[1]}"}}
                ],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "frozen", "context": {"cluster": "frozen", "user": "u"}}],
            }
        )
    )
    gate = quota_gate(str(kubeconfig), "gpuport-system", threads=4)
    try:
        with pytest.raises((HTTPError, OSError)):
            gate.ledger.store.read("gpuport-quota-team-a", (0.5, 0.2))
    finally:
        listener.close()
        for connection in held:
            connection.close()
    assert requests == [b"GET"]


# One step of a cluster at its GPU quota: a create reviewed by gpuport, the API server creating an admitted
# pod (within its 5 s) or never, the view receiving what happened, a pod deleted, time passing (tenths).
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("review"), st.integers(0, 0)),
        st.tuples(st.sampled_from(["create", "see", "delete", "see-delete"]), st.integers(0, 30)),
        st.tuples(st.just("wait"), st.integers(1, 40)),
    ),
    max_size=60,
)


@given(STEPS)
@settings(max_examples=150, deadline=None)
# Three pods created at the last moment their API server could, a fourth reviewed before any is in the
# view: their reservations must still hold (a life without LANDING_SECONDS let the fourth in).
@example(
    [("review", 0)] * 3 + [("wait", 50)] + [("create", 0)] * 3 + [("wait", 1), ("review", 0), ("create", 0)]
)
# Another validating webhook took 16 s before the API server stored the three pods: a life of gpuport's own
# 5 s and LANDING_SECONDS had ended, and a fourth was admitted beside them.
@example([("review", 0)] * 3 + [("wait", 40)] * 4 + [("create", 0)] * 3 + [("review", 0), ("create", 0)])
def test_a_quota_is_never_overshot_whatever_pods_come_late_never_or_go(steps):
    """Whatever the API server does with what gpuport admits (creates it at once, up to 30 s later while
    another validating webhook beside gpuport's takes its time, or never) and whenever pods are deleted,
    with views that receive a created pod at most LANDING_SECONDS after it was created and deletes
    whenever they like: the pods that exist never pass the quota of 3."""
    view, api, clock = view_with_quota(3), FakeCoordination(), [10_000]  # tenths of a second
    gate = QuotaGate(
        view,
        LeaseLedger(api, "gpuport-system"),
        clock=lambda: clock[0] / 10,
        timing=lambda: (time.monotonic(), 5.0),
    )
    play_at_quota(steps, [gate], view, clock, quota=3)
