"""The reservations ledger: exact round trips, one Lease per namespace written in groups, conflicts, kept
copies and deadlines (a fake coordination API that answers as the API server does)."""

import threading
import time
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.quota_fakes import FakeCoordination
from webhook.adapters.kube.ledger import LeaseLedger, Reservation, decode, encode
from webhook.core.vocabulary.gpu_use import GpuUse


def test_reservations_round_trip_exactly():
    reservations = [Reservation("u1", GpuUse(Fraction(3, 7), 10240), ("gpus",), 100.0, 0.0)]
    assert decode(encode(reservations)) == reservations


def test_lease_ledger_retries_on_conflict_and_keeps_every_reservation():
    api = FakeCoordination(conflicts=2)
    ledger = LeaseLedger(api, "gpuport-system")
    for key in ("a", "b"):
        reservation = Reservation(key, GpuUse(Fraction(1)), ("gpus",), 100.0, 0.0)
        assert ledger.reserve("team-a", reservation, lambda current: None, 0.0, lambda uid: False) is None
    _, annotations = api.leases["gpuport-quota-team-a"]
    assert [r.key for r in decode(annotations["gpuport.io/reservations"])] == ["a", "b"]


def test_every_reservation_call_has_a_deadline_inside_the_webhook_timeout():
    from webhook.adapters.kube.lease_store import CALL_TIMEOUT
    from webhook.adapters.kube.ledger import DEADLINE_SECONDS

    api = FakeCoordination(conflicts=1)
    ledger = LeaseLedger(api, "gpuport-system")
    for key in ("a", "b"):
        ledger.reserve(
            "team-a", Reservation(key, GpuUse(Fraction(1)), ("gpus",), 100.0, 0.0), lambda c: None, 0.0, str
        )
    assert api.timeouts and all(t == CALL_TIMEOUT for t in api.timeouts)
    assert sum(CALL_TIMEOUT) <= DEADLINE_SECONDS < 5  # the API server's limit for a webhook call


def test_a_burst_in_one_namespace_is_written_in_groups_and_exactly_the_quota_passes():
    """The first admission's read is held until the 39 others wait for the namespace's turn: they are
    then one group, decided in arrival order against one reading and written at once (no timing)."""
    api = FakeCoordination()
    reading, release = threading.Event(), threading.Event()
    original_read = api.read_namespaced_lease

    def held_read(*args, **kwargs):
        reading.set()
        assert release.wait(10)
        return original_read(*args, **kwargs)

    api.read_namespaced_lease = held_read
    ledger = LeaseLedger(api, "gpuport-system")

    def at_most_ten(current):
        return "over" if sum(r.usage.equivalents for r in current) >= 10 else None

    results = {}

    def admit(n):
        reservation = Reservation(f"u{n}", GpuUse(Fraction(1)), ("gpus",), 100.0, 0.0)
        results[n] = ledger.reserve(
            "team-a", reservation, at_most_ten, 0.0, lambda uid: False, deadline=time.monotonic() + 30
        )

    first = threading.Thread(target=admit, args=(0,))
    first.start()
    assert reading.wait(10)
    others = [threading.Thread(target=admit, args=(n,)) for n in range(1, 40)]
    for arrived, thread in enumerate(others, start=1):
        thread.start()
        wait_until(lambda arrived=arrived: ledger.waiting("team-a") == arrived)
    release.set()
    for thread in [first, *others]:
        thread.join()
    # Arrival order decides: u0 alone, then u1..u9 fill the quota and u10..u39 are refused.
    assert [n for n in range(40) if results[n] is None] == list(range(10))
    _, annotations = api.leases["gpuport-quota-team-a"]
    assert [r.key for r in decode(annotations["gpuport.io/reservations"])] == [f"u{n}" for n in range(10)]
    assert [verb for verb, _ in api.calls] == ["read", "create", "replace"]  # two groups, two writes


def wait_until(condition, seconds=10.0):
    stop = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < stop, "never happened"
        time.sleep(0.001)


def test_conflicts_cost_a_wait_never_a_refusal_however_many():
    api = FakeCoordination(conflicts=60)  # another process writes before every one of 60 attempts
    ledger = LeaseLedger(api, "gpuport-system")
    api.leases["gpuport-quota-team-a"] = (1, {})
    reservation = Reservation("a", GpuUse(Fraction(1)), ("gpus",), 100.0, 0.0)
    assert ledger.reserve("team-a", reservation, lambda current: None, 0.0, lambda uid: False) is None
    _, annotations = api.leases["gpuport-quota-team-a"]
    assert [r.key for r in decode(annotations["gpuport.io/reservations"])] == ["a"]


def test_a_namespace_that_never_stops_conflicting_is_refused_when_the_deadline_passes():
    from webhook.adapters.kube.ledger import LedgerUnavailable

    api = FakeCoordination(conflicts=10**9)
    api.leases["gpuport-quota-team-a"] = (1, {})
    ledger = LeaseLedger(api, "gpuport-system")
    reservation = Reservation("a", GpuUse(Fraction(1)), ("gpus",), 100.0, 0.0)
    with pytest.raises(LedgerUnavailable, match="deadline passed"):
        ledger.reserve(
            "team-a", reservation, lambda c: None, 0.0, lambda uid: False, deadline=time.monotonic() + 0.3
        )
    assert len(api.calls) > 2  # it retried until then, not for a fixed count


def test_a_throttled_api_server_costs_a_wait_not_a_refusal():
    from kubernetes.client.exceptions import ApiException

    class Throttled(FakeCoordination):
        shed = 3

        def read_namespaced_lease(self, *args, **kwargs):
            if self.shed:
                self.shed -= 1
                raise ApiException(status=429, reason="Too Many Requests")
            return super().read_namespaced_lease(*args, **kwargs)

    api = Throttled()
    reservation = Reservation("a", GpuUse(Fraction(1)), ("gpus",), 100.0, 0.0)
    assert LeaseLedger(api, "gpuport-system").reserve("team-a", reservation, lambda c: None, 0.0, str) is None
    _, annotations = api.leases["gpuport-quota-team-a"]
    assert [r.key for r in decode(annotations["gpuport.io/reservations"])] == ["a"]


def test_an_unreachable_api_server_is_refused_in_those_words():
    import urllib3

    from webhook.adapters.kube.ledger import LedgerUnavailable

    class Away(FakeCoordination):
        def read_namespaced_lease(self, *args, **kwargs):
            raise urllib3.exceptions.MaxRetryError(None, "/leases", "Connection refused")

    ledger = LeaseLedger(Away(), "gpuport-system")
    reservation = Reservation("a", GpuUse(Fraction(1)), ("gpus",), 100.0, 0.0)
    with pytest.raises(LedgerUnavailable, match="API server unreachable"):
        ledger.reserve("team-a", reservation, lambda c: None, 0.0, lambda uid: False)


def test_reservations_of_pods_every_deciding_view_holds_leave_the_lease():
    from webhook.adapters.kube.ledger import SETTLED_THROUGH, LedgerUnavailable, ViewMark

    api = FakeCoordination()
    replica_a, replica_b = LeaseLedger(api, "gpuport-system"), LeaseLedger(api, "gpuport-system")

    def reserve(ledger, key, mark, settled=lambda uid: False, now=1000.0):
        reservation = Reservation(key, GpuUse(Fraction(1)), ("gpus",), now + 30, since=now)
        return ledger.reserve("team-a", reservation, lambda current: None, now, settled, mark=mark)

    assert reserve(replica_a, "u1", ViewMark(90, lambda uid: None)) is None
    # Replica A's view now holds u1's pod (first seen at version 100) and has read to 120.
    a_sees_u1 = ViewMark(120, {"u1": 100}.get)
    assert reserve(replica_a, "u2", a_sees_u1, settled=lambda uid: uid == "u1", now=1001.0) is None
    _, annotations = api.leases["gpuport-quota-team-a"]
    assert len(decode(annotations["gpuport.io/reservations"])) == 2  # seen, but only a second ago
    assert reserve(replica_a, "u2", a_sees_u1, settled=lambda uid: uid == "u1", now=1005.0) is None
    _, annotations = api.leases["gpuport-quota-team-a"]
    assert [r.key for r in decode(annotations["gpuport.io/reservations"])] == ["u2"]
    assert annotations[SETTLED_THROUGH] == "100"
    # Replica B has read only to 90: it might not count u1's pod, so it must not decide.
    with pytest.raises(LedgerUnavailable, match="not caught up"):
        reserve(replica_b, "u3", ViewMark(90, lambda uid: None))
    with pytest.raises(LedgerUnavailable, match="not caught up"):
        reserve(replica_b, "u3", None)
    assert reserve(replica_b, "u3", ViewMark(130, lambda uid: None)) is None  # caught up: decides


def test_a_reservation_dropped_as_over_makes_views_behind_its_writer_wait():
    """A reservation whose life ended leaves the record on the time argument (its pod, if stored at the
    API server's last moment, reached every view since). A view lagging far more than that would count
    the pod nowhere: the write that drops it records how far its writer's view had read, and a replica
    whose view has not read as far waits before deciding (it decided at once before)."""
    from webhook.adapters.kube.ledger import SETTLED_THROUGH, LedgerUnavailable, ViewMark

    api = FakeCoordination()
    replica_a, replica_b = LeaseLedger(api, "gpuport-system"), LeaseLedger(api, "gpuport-system")

    def reserve(ledger, key, mark, now):
        reservation = Reservation(key, GpuUse(Fraction(1)), ("gpus",), now + 30, since=now)
        return ledger.reserve("team-a", reservation, lambda current: None, now, lambda uid: False, mark=mark)

    assert reserve(replica_a, "u1", ViewMark(90, lambda uid: None), 1000.0) is None
    assert reserve(replica_a, "u2", ViewMark(150, lambda uid: None), 1031.0) is None  # u1 ended
    _, annotations = api.leases["gpuport-quota-team-a"]
    assert annotations[SETTLED_THROUGH] == "150"
    with pytest.raises(LedgerUnavailable, match="not caught up"):
        reserve(replica_b, "u3", ViewMark(120, lambda uid: None), 1031.0)
    assert reserve(replica_b, "u3", ViewMark(150, lambda uid: None), 1031.0) is None


def test_a_burst_keeps_the_lease_small_once_views_hold_the_pods():
    from webhook.adapters.kube.ledger import ViewMark

    api = FakeCoordination()
    ledger = LeaseLedger(api, "gpuport-system")
    for n in range(200):  # one admission a second, every earlier pod already in this view
        seen = {f"u{k}": 1000 + k for k in range(n)}
        mark = ViewMark(2000, seen.get)
        reservation = Reservation(f"u{n}", GpuUse(Fraction(1)), ("gpus",), n + 30.0, since=float(n))
        decision = ledger.reserve(
            "team-a", reservation, lambda c: None, float(n), seen.__contains__, mark=mark
        )
        assert decision is None
    _, annotations = api.leases["gpuport-quota-team-a"]
    assert len(annotations["gpuport.io/reservations"]) < 16 * 1024
    # What stays: the reservations younger than SETTLE_AFTER, whatever the view holds.
    assert [r.key for r in decode(annotations["gpuport.io/reservations"])] == ["u198", "u199"]


def test_a_burst_faster_than_the_names_it_keeps_settles_landed_pods_instead_of_counting_them_twice():
    """400 admissions within a second, nearly every pod landing in this view a moment later: past
    NAMED_LIMIT young names, the oldest were folded into sums that no pod settles, so each was counted in
    the view and in a sum until the sum ended (~40 s; a burst of 1,000 at 170 a second into a quota of
    900 admitted 580 on the real API server). Now those whose pods the view holds leave the record, and
    the next write says how far the view had read (a replica behind it waits): nothing is counted twice,
    nothing missed, and a pod that never comes stays named."""
    from webhook.adapters.kube.ledger import NAMED_LIMIT, SETTLED_THROUGH, LedgerUnavailable, ViewMark, is_sum

    api = FakeCoordination()
    ledger = LeaseLedger(api, "gpuport-system")
    burst = NAMED_LIMIT + 144
    counted_twice = []
    for n in range(burst):
        now = 1000.0 + n / burst
        # every earlier pod is in the view by now, but each seventh, refused after gpuport: it never comes
        landed = {f"u{k}": 5000 + k for k in range(n) if k % 7}

        def decide(current, landed=landed):
            counted_twice.append(sum(1 for r in current if is_sum(r)))
            return None

        mark = ViewMark(5000 + n, landed.get)
        reservation = Reservation(f"u{n}", GpuUse(Fraction(1)), ("gpus",), now + 30, since=now)
        assert ledger.reserve("team-a", reservation, decide, now, landed.__contains__, mark=mark) is None
    _, annotations = api.leases["gpuport-quota-team-a"]
    record = decode(annotations["gpuport.io/reservations"])
    assert not any(is_sum(r) for r in record) and max(counted_twice) == 0
    assert len(record) <= NAMED_LIMIT + 1 and record[-1].key == f"u{burst - 1}"  # the limit, and the last
    kept = {r.key for r in record}
    assert {f"u{k}" for k in range(0, burst, 7)} <= kept  # never seen: kept, named (no sum holds it)
    left = [k for k in range(burst) if f"u{k}" not in kept]
    # every view that decides next has read as far as the last pod whose reservation left
    assert left and int(annotations[SETTLED_THROUGH]) >= 5000 + max(left)
    assert len(annotations["gpuport.io/reservations"]) < 16 * 1024
    # A replica whose view has not read as far may be missing those pods: it waits, never decides.
    other = LeaseLedger(api, "gpuport-system")
    late = Reservation("v0", GpuUse(Fraction(1)), ("gpus",), 1031.0, since=1001.0)
    with pytest.raises(LedgerUnavailable, match="not caught up"):
        other.reserve(
            "team-a", late, lambda current: None, 1001.0, lambda uid: False, mark=ViewMark(5100, {}.get)
        )


def test_a_record_full_of_names_is_folded_into_sums_and_admits_on():
    """3,700 named reservations whose pods never came (as the previous build wrote them, which refused
    past 192 KiB): they are folded into a sum per second they end in, every admission passes, the
    record keeps NAMED_LIMIT names at most, and the sums hold every admission, never less."""
    from webhook.adapters.kube.ledger import NAMED_LIMIT, is_sum

    api = FakeCoordination()
    ledger = LeaseLedger(api, "gpuport-system")
    quota = "gpus-for-the-training-team"

    def uid(n):
        return f"{n:08d}-7c1e-4a53-9f0b-3d2e6a8b1c4d"

    earlier = [
        Reservation(uid(n), GpuUse(Fraction(1, 7), 10240), (quota,), 1030.0 + n / 1000, 1000.0)
        for n in range(3700)
    ]
    api.leases["gpuport-quota-team-a"] = (1, {"gpuport.io/reservations": encode(earlier)})
    for n in range(3700, 3900):
        reservation = Reservation(uid(n), GpuUse(Fraction(1, 7), 10240), (quota,), 1036.0, since=1006.0)
        assert ledger.reserve("team-a", reservation, lambda current: None, 1006.0, lambda uid: False) is None
    _, annotations = api.leases["gpuport-quota-team-a"]
    record = decode(annotations["gpuport.io/reservations"])
    assert len(annotations["gpuport.io/reservations"]) < 16 * 1024
    assert len([r for r in record if not is_sum(r)]) <= NAMED_LIMIT
    assert sum((r.usage for r in record), GpuUse(Fraction(0))) == GpuUse(Fraction(3900, 7), 3900 * 10240)
    assert all(r.expires >= 1030.0 for r in record)  # a sum never ends before what it holds
    assert len([r for r in record if r.expires < 1036.0]) == 5  # 1031..1035: a sum per second


def test_the_record_never_passes_its_limit_and_an_admission_past_it_is_refused_in_words(monkeypatch):
    """A view that reads nothing settles nothing: reservations then stay their whole lives. However many
    arrive, the record stays under its limit (the fake API server refuses annotations past 256 KiB, as
    the real one does) and an admission past it is refused saying why, not with the server's 422. Folding
    keeps a record of few quota sets far below it: here every reservation stays named."""
    from webhook.adapters.kube import ledger as ledger_module
    from webhook.adapters.kube.ledger import RECORD_LIMIT, LedgerUnavailable

    monkeypatch.setattr(ledger_module, "FOLD_AFTER", 1e9)
    monkeypatch.setattr(ledger_module, "NAMED_LIMIT", 10**9)

    api = FakeCoordination()
    ledger = LeaseLedger(api, "gpuport-system")
    quota = "gpus-for-the-training-team"  # a longer name than most: fewer fit

    def reserve(key, now):
        reservation = Reservation(key, GpuUse(Fraction(1, 7), 10240), (quota,), now + 30, since=now)
        return ledger.reserve("team-a", reservation, lambda current: None, now, lambda uid: False)

    def uid(n):
        return f"{n:08d}-7c1e-4a53-9f0b-3d2e6a8b1c4d"

    # The burst so far, as the ledger itself wrote it (building it one admission at a time costs a
    # full record's read and write per admission: the test would take half a minute).
    earlier = [
        Reservation(uid(n), GpuUse(Fraction(1, 7), 10240), (quota,), 1030.0, 1000.0) for n in range(3700)
    ]
    api.leases["gpuport-quota-team-a"] = (1, {"gpuport.io/reservations": encode(earlier)})
    admitted, refused = len(earlier), []
    for n in range(3700, 3900):
        try:
            assert reserve(uid(n), 1000.0) is None
            admitted += 1
        except LedgerUnavailable as exc:
            refused.append(str(exc))
    _, annotations = api.leases["gpuport-quota-team-a"]
    record = annotations["gpuport.io/reservations"]
    assert len(record) <= RECORD_LIMIT < len(record) + 200  # filled to the limit, not past it
    assert len(decode(record)) == admitted > 3750
    assert len(refused) == 3900 - admitted > 0
    assert refused[0] == (
        f"reservation store: {admitted} recent GPU admissions to team-a are not yet counted as pods, the "
        "most its record holds (192 KiB); they leave as gpuport's view reads their pods or as the API "
        "server stops waiting to create them (seconds)"
    )
    # Once their lives end they leave, and admissions pass again.
    assert reserve("later", 1031.0) is None
    _, annotations = api.leases["gpuport-quota-team-a"]
    assert [r.key for r in decode(annotations["gpuport.io/reservations"])] == ["later"]


def test_a_ledger_writes_on_its_own_last_write_without_reading_it_again():
    api = FakeCoordination()
    ledger = LeaseLedger(api, "gpuport-system")
    for n in range(5):
        reservation = Reservation(f"u{n}", GpuUse(Fraction(1)), ("gpus",), 100.0, 0.0)
        assert ledger.reserve("team-a", reservation, lambda current: None, 0.0, lambda uid: False) is None
    verbs = [verb for verb, _ in api.calls]
    assert verbs == ["read", "create", "replace", "replace", "replace", "replace"]
    _, annotations = api.leases["gpuport-quota-team-a"]
    assert [r.key for r in decode(annotations["gpuport.io/reservations"])] == [f"u{n}" for n in range(5)]


def two_replicas_with_quota(gpus):
    """A shared fake API server, two replicas' ledgers, and a reserve(ledger, key) of one GPU under a
    quota of `gpus`."""
    api = FakeCoordination()

    def within_quota(current):
        return "over" if sum(r.usage.equivalents for r in current) >= gpus else None

    def reserve(ledger, key):
        reservation = Reservation(key, GpuUse(Fraction(1)), ("gpus",), 100.0, 0.0)
        return ledger.reserve("team-a", reservation, within_quota, 0.0, lambda uid: False)

    return api, LeaseLedger(api, "gpuport-system"), LeaseLedger(api, "gpuport-system"), reserve


def test_a_kept_copy_another_replica_changed_is_decided_again_on_a_fresh_read():
    api, replica_a, replica_b, reserve = two_replicas_with_quota(2)

    assert reserve(replica_a, "a1") is None  # A keeps the Lease holding a1
    assert reserve(replica_b, "b1") is None  # B writes meanwhile: A's copy is now stale
    api.calls.clear()
    assert reserve(replica_a, "a2") == "over"  # on its stale copy A would have admitted a2 ...
    assert [verb for verb, _ in api.calls] == ["replace", "read"]  # ... but the server refused that write
    _, annotations = api.leases["gpuport-quota-team-a"]
    assert sorted(r.key for r in decode(annotations["gpuport.io/reservations"])) == ["a1", "b1"]
    api.calls.clear()
    assert reserve(replica_b, "b2") == "over"  # a denial writes nothing: it is only decided on a fresh read
    assert [verb for verb, _ in api.calls] == ["read"]


def test_an_admission_on_a_stale_kept_copy_is_refused_by_the_server_and_redecided():
    api, replica_a, replica_b, reserve = two_replicas_with_quota(3)

    assert reserve(replica_a, "a1") is None
    assert reserve(replica_b, "b1") is None
    api.calls.clear()
    assert reserve(replica_a, "a2") is None  # 3rd of 3: the stale write fails, the fresh one passes
    assert [verb for verb, _ in api.calls] == ["replace", "read", "replace"]
    assert reserve(replica_b, "b2") == "over"


def ledger_holding(n):
    """A fake API server and a ledger that reserved u0..u<n-1> (1 GPU each) at t=1000."""
    api = FakeCoordination()
    ledger = LeaseLedger(api, "gpuport-system")
    for k in range(n):
        reservation = Reservation(f"u{k}", GpuUse(Fraction(1)), ("gpus",), 1000.0 + 30, since=1000.0)
        ledger.reserve("team-a", reservation, lambda c: None, 1000.0, lambda uid: False)
    return api, ledger


def test_a_full_quota_still_drops_settled_reservations_but_a_dry_run_writes_nothing():
    from webhook.adapters.kube.ledger import ViewMark

    api, ledger = ledger_holding(4)
    everything_seen = ViewMark(2000, lambda uid: 1500)

    def full(current):
        return "over"

    dry = Reservation("dry", GpuUse(Fraction(1)), ("gpus",), 1010.0 + 30, since=1010.0)
    assert ledger.reserve("team-a", dry, full, 1010.0, bool, write=False, mark=everything_seen) == "over"
    _, annotations = api.leases["gpuport-quota-team-a"]
    assert len(decode(annotations["gpuport.io/reservations"])) == 4  # dryRun: no side effect at all
    late = Reservation("late", GpuUse(Fraction(1)), ("gpus",), 1010.0 + 30, since=1010.0)
    assert ledger.reserve("team-a", late, full, 1010.0, bool, mark=everything_seen) == "over"
    _, annotations = api.leases["gpuport-quota-team-a"]
    assert decode(annotations["gpuport.io/reservations"]) == []  # every pod is in the views: settled
    assert annotations["gpuport.io/settled-through"] == "1500"


def test_a_full_quota_rewrites_the_lease_only_when_settling_drops_a_quarter_of_it():
    from webhook.adapters.kube.ledger import ViewMark

    api, ledger = ledger_holding(8)
    one_seen = ViewMark(2000, {"u0": 1500}.get)
    late = Reservation("late", GpuUse(Fraction(1)), ("gpus",), 1003.0 + 30, since=1003.0)
    api.calls.clear()
    assert (
        ledger.reserve("team-a", late, lambda c: "over", 1003.0, {"u0"}.__contains__, mark=one_seen) == "over"
    )
    assert [verb for verb, _ in api.calls] == ["read"]  # 1 of 8 settled: not worth a write
    two_seen = ViewMark(2000, {"u0": 1500, "u1": 1501}.get)
    assert ledger.reserve("team-a", late, lambda c: "over", 1003.0, {"u0", "u1"}.__contains__, mark=two_seen)
    _, annotations = api.leases["gpuport-quota-team-a"]
    assert [r.key for r in decode(annotations["gpuport.io/reservations"])] == [f"u{n}" for n in range(2, 8)]


def test_a_kept_copy_of_a_lease_someone_deleted_is_created_again():
    api = FakeCoordination()
    ledger = LeaseLedger(api, "gpuport-system")

    def reserve(key):
        reservation = Reservation(key, GpuUse(Fraction(1)), ("gpus",), 100.0, 0.0)
        return ledger.reserve("team-a", reservation, lambda current: None, 0.0, lambda uid: False)

    assert reserve("u1") is None
    del api.leases["gpuport-quota-team-a"]  # an admin cleaned up gpuport's namespace
    api.calls.clear()
    assert reserve("u2") is None
    assert [verb for verb, _ in api.calls] == ["replace", "read", "create"]
    _, annotations = api.leases["gpuport-quota-team-a"]
    assert [r.key for r in decode(annotations["gpuport.io/reservations"])] == ["u2"]


@settings(max_examples=25, deadline=None)
@given(
    quota=st.integers(1, 12),
    asks=st.lists(st.tuples(st.integers(1, 3), st.booleans()), min_size=1, max_size=16),
    conflicts=st.one_of(st.integers(0, 6), st.integers(21, 30)),  # beyond 20: where retries used to stop
)
def test_two_replicas_sharing_one_lease_never_overshoot_and_refuse_only_for_the_quota(quota, asks, conflicts):
    """Admissions of 1-3 GPUs at once through two replicas' ledgers on one API server (with extra
    conflicts from a third writer): what is admitted fits the quota and is what the Lease holds, and
    every refusal is the quota's (it would not fit beside what was admitted)."""
    api = FakeCoordination(conflicts=conflicts)
    api.leases["gpuport-quota-team-a"] = (1, {})
    replicas = LeaseLedger(api, "gpuport-system"), LeaseLedger(api, "gpuport-system")

    def within_quota(gpus):
        def decide(current):
            return "over" if sum(r.usage.equivalents for r in current) + gpus > quota else None

        return decide

    answers = {}

    def admit(n, gpus, on_b):
        reservation = Reservation(f"u{n}", GpuUse(Fraction(gpus)), ("gpus",), 100.0, 0.0)
        answers[n] = replicas[on_b].reserve(
            "team-a", reservation, within_quota(gpus), 0.0, lambda uid: False, deadline=time.monotonic() + 30
        )

    threads = [threading.Thread(target=admit, args=(n, *ask)) for n, ask in enumerate(asks)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    admitted = {f"u{n}" for n, answer in answers.items() if answer is None}
    admitted_gpus = sum(asks[n][0] for n, answer in answers.items() if answer is None)
    assert len(answers) == len(asks)  # every admission answered: none raised
    assert admitted_gpus <= quota
    assert all(admitted_gpus + asks[n][0] > quota for n, answer in answers.items() if answer == "over")
    _, annotations = api.leases["gpuport-quota-team-a"]
    assert {r.key for r in decode(annotations.get("gpuport.io/reservations"))} == admitted


def test_a_replica_killed_between_its_write_and_its_answers_loses_only_those_answers():
    """SIGKILL after the Lease was replaced but before the reviews were answered: the API server refuses
    those pods (no answer), their reservations stay counted until their TTL (the quota held, never
    overshot) and everything admitted before stays."""

    class Killed(BaseException):
        """What no handler in the process runs after: the process is gone."""

    api = FakeCoordination()
    replica_a, replica_b = LeaseLedger(api, "gpuport-system"), LeaseLedger(api, "gpuport-system")

    def reserve(ledger, key):
        reservation = Reservation(key, GpuUse(Fraction(1)), ("gpus",), 100.0, 0.0)
        decide = lambda current: "over" if len(current) >= 3 else None  # noqa: E731
        return ledger.reserve("team-a", reservation, decide, 0.0, lambda uid: False)

    assert reserve(replica_a, "a1") is None
    original_replace = api.replace_namespaced_lease

    def replace_then_die(*args, **kwargs):
        original_replace(*args, **kwargs)
        raise Killed

    api.replace_namespaced_lease = replace_then_die
    with pytest.raises(Killed):
        reserve(replica_a, "a2")  # committed, never answered
    api.replace_namespaced_lease = original_replace
    assert reserve(replica_b, "b1") is None
    assert reserve(replica_b, "b2") == "over"  # a2 holds its GPU until its TTL or its pod appears
    _, annotations = api.leases["gpuport-quota-team-a"]
    assert sorted(r.key for r in decode(annotations["gpuport.io/reservations"])) == ["a1", "a2", "b1"]
