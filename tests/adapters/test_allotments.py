"""Allotments (issue 49): far below its quotas, a namespace's identical pods are admitted from a share of the
headroom one process reserved in one write, never past a quota, and near it every pod is reserved on its
own. On the real cluster view and the Lease ledger against a fake coordination API that fails where the
API server would; two processes share one Lease as two workers or replicas do."""

import time

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.adapters.test_reservation_lives import created, one_gpu, play_at_quota, view_with_quota
from tests.helpers import context
from tests.quota_fakes import FakeCoordination, admit, request_for
from tests.translation_cases import pod
from webhook.adapters.kube.allotments import (
    ALLOTMENT,
    ALLOTMENT_KEY,
    CLOSED_GRACE,
    HEADROOM_FACTOR,
    SIZING_VARIABLE,
    USABLE_SECONDS,
    sizing,
)
from webhook.adapters.kube.ledger import RESERVATIONS_ANNOTATION, LeaseLedger, decode
from webhook.adapters.kube.quota_gate import ALLOTMENT_RECHECK, ALLOTMENT_WAIT, QuotaGate


def gate_on(view, api, clock, background=True, tenths=False, **kwargs) -> QuotaGate:
    """A process's gate; its allotments on the test's clock (`tenths`) or time.monotonic."""
    monotonic = (lambda: clock[0] / 10) if tenths else time.monotonic
    return QuotaGate(
        view,
        LeaseLedger(api, "gpuport-system", background=background, clock=monotonic),
        clock=lambda: clock[0] / 10,
        timing=lambda: (time.monotonic(), 5.0),
        **kwargs,
    )


def record(api: FakeCoordination):
    return decode(api.leases["gpuport-quota-team-a"][1][RESERVATIONS_ANNOTATION])


def test_a_burst_far_below_its_quota_writes_once_per_allotment_not_once_per_pod():
    """200 one-GPU creates under a quota of 1,000,000: a Lease write per 64 pods (there was one per pod,
    each a chance of a conflict with the other worker and of a stall on a loaded API server)."""
    view, api, clock = view_with_quota(1_000_000), FakeCoordination(), [10_000]
    gate = gate_on(view, api, clock)
    for n in range(200):
        clock[0] += 1
        assert one_gpu(gate, f"p{n}")
    writes = [verb for verb, _ in api.calls if verb in ("create", "replace")]
    assert len(writes) == 4  # 200 pods drawn from four allotments of 64
    held = record(api)
    # What the record holds covers every pod admitted (none in the view yet): the allotment still
    # drawn from, and the pods of the ones used up, named or summed.
    assert sum(r.usage.equivalents for r in held) >= 200


def test_near_its_quota_every_pod_is_reserved_on_its_own_and_exactly_the_quota_passes():
    """A quota of 600: allotments of 64 only while 8 of them more would fit, then one reservation per pod;
    exactly 600 pass, none more, though the allotments held more than their pods for a while."""
    view, api, clock = view_with_quota(600), FakeCoordination(), [10_000]
    gate = gate_on(view, api, clock)
    passed = sum(one_gpu(gate, f"p{n}") for n in range(700))
    assert passed <= 600
    # Within the pods' lives nothing leaves: the unused part of an allotment is given back at the next
    # write of its process, so the quota fills to the last GPU.
    assert passed == 600


def test_a_dry_run_and_an_update_are_never_drawn_from_an_allotment():
    view, api, clock = view_with_quota(1_000_000), FakeCoordination(), [10_000]
    gate = gate_on(view, api, clock)
    assert one_gpu(gate, "first")  # takes an allotment
    api.calls.clear()
    dry = admit(gate, request_for(pod({"nvidia.com/gpu": "1"}), "dry", dry_run=True), context("generic"))
    assert dry is None
    assert [verb for verb, _ in api.calls] == ["read"]  # decided on the record, as before


def test_used_up_allotments_are_replaced_by_their_pods_in_one_write_without_another_admission():
    """Two allotments of one namespace used up (pods of 1 and of 2 GPUs): once CLOSED_GRACE has passed with
    no write of their process, its flusher replaces both by the pods drawn, in one write; the record then
    names the 8 pods and holds no allotment."""
    view, api, clock = view_with_quota(1_000), FakeCoordination(), [10_000]
    ledger = LeaseLedger(api, "gpuport-system", background=False, clock=lambda: clock[0] / 10)
    gate = QuotaGate(view, ledger, clock=lambda: clock[0] / 10, allotment=4, headroom_factor=2)
    two = pod({"nvidia.com/gpu": "2"})
    for n in range(4):
        assert one_gpu(gate, f"one-{n}")
        assert admit(gate, request_for(two, f"two-{n}"), context("generic")) is None
    writes = [verb for verb, _ in api.calls if verb in ("create", "replace")]
    assert len(writes) == 2 and [r.key[0] for r in record(api)] == [ALLOTMENT_KEY] * 2
    ledger.allotments.flush_due()  # within the grace: its process may still write first
    assert len([verb for verb, _ in api.calls if verb in ("create", "replace")]) == 2
    clock[0] += 10 * CLOSED_GRACE + 1
    ledger.allotments.flush_due()
    ledger.allotments.flush_due()  # nothing more to replace: no write
    assert len([verb for verb, _ in api.calls if verb in ("create", "replace")]) == 3
    assert sorted(r.key for r in record(api)) == sorted(f"{k}-{n}" for k in ("one", "two") for n in range(4))


def test_a_busy_process_replaces_its_timed_out_allotment_in_its_next_write_not_in_one_more():
    """An allotment past USABLE_SECONDS is replaced by its process's next admission (which takes the next
    allotment in the same write) when that comes within CLOSED_GRACE: a burst pays one write per
    allotment; the flusher writes only for a process that got no pod since."""
    view, api, clock = view_with_quota(1_000), FakeCoordination(), [10_000]
    gate = gate_on(view, api, clock, background=False, tenths=True, allotment=64, headroom_factor=2)
    assert one_gpu(gate, "first")
    clock[0] += 10 * USABLE_SECONDS + 1  # past its time, within the grace
    gate.ledger.allotments.flush_due()
    assert one_gpu(gate, "next")  # a new allotment, the old one replaced by "first" in the same write
    assert len([verb for verb, _ in api.calls if verb in ("create", "replace")]) == 2
    assert [r.key for r in record(api) if not r.key.startswith(ALLOTMENT_KEY)] == ["first"]
    clock[0] += 10 * (USABLE_SECONDS + CLOSED_GRACE) + 1  # no pod since: the flusher writes
    gate.ledger.allotments.flush_due()
    assert len([verb for verb, _ in api.calls if verb in ("create", "replace")]) == 3
    assert sorted(r.key for r in record(api)) == ["first", "next"]


def test_the_flusher_thread_replaces_a_used_up_allotment_by_itself():
    view, api, clock = view_with_quota(1_000), FakeCoordination(), [10_000]
    gate = gate_on(view, api, clock, allotment=4, headroom_factor=2)
    for n in range(4):
        assert one_gpu(gate, f"p{n}")
    deadline = time.monotonic() + 30  # replaced CLOSED_GRACE after the last draw, here within moments
    while any(r.key.startswith(ALLOTMENT_KEY) for r in record(api)) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert sorted(r.key for r in record(api)) == [f"p{n}" for n in range(4)]


# One step of two processes (workers or replicas) sharing a namespace's Lease at its GPU quota: a create
# reviewed by either, the API server creating an admitted pod (within its API server's wait) or never, the
# view receiving it, a pod deleted, time passing (tenths).
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("review"), st.integers(0, 1)),
        st.tuples(st.sampled_from(["create", "see", "delete", "see-delete"]), st.integers(0, 30)),
        st.tuples(st.just("wait"), st.integers(1, 60)),
    ),
    max_size=80,
)


@given(STEPS, st.integers(1, 3), st.integers(1, 3), st.booleans())
@settings(max_examples=150, deadline=None)
# A pod drawn 30 s after its allotment was taken outlives it: were it drawn, nothing would cover it once
# the allotment ended, and twelve more would pass before it lands.
@example(
    [("review", 0)]
    + [("wait", 60)] * 5
    + [("review", 0)]
    + [("wait", 60)] * 3
    + [("review", 0)] * 12
    + [("create", 0)] * 13,
    3,
    1,
    False,
)
# An allotment used up is replaced by the pods drawn from it: dropped instead, two more would pass.
@example([("review", 0)] * 14 + [("create", 0)] * 14, 2, 1, False)
# The same, with the allotments' flusher replacing it: the pods drawn must be kept.
@example([("review", 0)] * 3 + [("wait", 30)] + [("review", 0)] * 11 + [("create", 0)] * 14, 2, 1, True)
def test_allotments_never_overshoot_a_quota_whatever_pods_come_late_never_or_go(
    steps, allotment, factor, tenths
):
    """Two processes admitting from allotments of `allotment` pods taken where `factor` of them fit under
    a quota of 12, with views that receive a created pod at most LANDING_SECONDS after it was created and
    deletes whenever they like: the pods that exist never pass the quota. With `tenths`, the allotments
    live on the test's clock and each process's flusher replaces those due as time passes (without, they
    are usable for the whole run and only the pods' own lives end what they cover)."""
    quota = 12
    view, api, clock = view_with_quota(quota), FakeCoordination(), [10_000]
    gates = [
        gate_on(
            view, api, clock, background=False, tenths=tenths, allotment=allotment, headroom_factor=factor
        )
        for _ in range(2)
    ]

    def flushers() -> None:
        for gate in gates:
            gate.ledger.allotments.flush_due()

    play_at_quota(steps, gates, view, clock, quota, flushers)


# Reviews by one of three processes near a quota, and time passing (tenths); every admitted pod is created
# and reaches the view within LANDS_WITHIN.
NEAR_STEPS = st.lists(
    st.one_of(st.tuples(st.just("review"), st.integers(0, 2)), st.tuples(st.just("wait"), st.integers(1, 8))),
    max_size=40,
)
LANDS_WITHIN = (
    40  # tenths: before a named reservation is folded into a sum (FOLD_AFTER), which no pod settles
)


@given(NEAR_STEPS, st.integers(1, 5), st.integers(1, 2))
@settings(max_examples=150, deadline=None)
# One process takes an allotment of 4 for its first pod; another is refused at 8 more though only 9 pods
# exist (before: at once, "used 12": the allotment's 3 unused places counted by everyone until its own
# process wrote again).
@example([("review", 0)] + [("review", 1)] * 9, 4, 1)
# An allotment used up, its 4 pods in the view: counted twice (the allotment whole, and the pods) until
# replaced, so the others were refused at 8; the flusher replaces it without its process's next pod.
@example([("review", 0)] * 4 + [("wait", 8)] * 6 + [("review", 1)] * 9, 4, 1)
def test_a_refusal_near_the_quota_is_final_only_once_the_quota_is_really_reached(steps, allotment, factor):
    """Three processes admit near a quota of 12, drawing from allotments of `allotment` pods taken where
    `factor` of them fit; each process's flusher runs as time passes (while a refused review waits, too).
    Every refusal comes when the pods admitted really fill the quota, never because another process's
    allotment, drawn from partly or used up, still counted whole; and no refusal waits longer than
    ALLOTMENT_WAIT. No pod ever passes the quota."""
    quota = 12
    view, api, clock = view_with_quota(quota), FakeCoordination(), [10_000]
    admitted: dict[str, int] = {}  # uid → when (tenths), until the view holds it
    in_view: list[str] = []
    version, waited = [10], [0.0]
    ledgers = [
        LeaseLedger(api, "gpuport-system", background=False, clock=lambda: clock[0] / 10) for _ in range(3)
    ]

    def land(older_than: int) -> None:
        for uid in [u for u, t in admitted.items() if clock[0] - t >= older_than]:
            del admitted[uid]
            version[0] += 1
            created(view, uid, version[0])
            in_view.append(uid)

    def pass_time(tenths: int) -> None:  # what the processes' flusher threads and the views do meanwhile
        clock[0] += tenths
        land(LANDS_WITHIN)
        for ledger in ledgers:
            ledger.allotments.flush_due()

    def pause(seconds: float) -> None:
        waited[0] += seconds
        pass_time(round(seconds * 10))

    gates = [
        QuotaGate(
            view,
            ledger,
            clock=lambda: clock[0] / 10,
            timing=lambda: (time.monotonic(), 5.0),
            allotment=allotment,
            headroom_factor=factor,
            pause=pause,
        )
        for ledger in ledgers
    ]
    for n, (action, pick) in enumerate(steps):
        if action == "wait":
            pass_time(pick)
            continue
        waited[0] = 0.0
        if one_gpu(gates[pick], f"p{n}"):
            admitted[f"p{n}"] = clock[0]
        else:
            assert len(admitted) + len(in_view) == quota, (len(admitted) + len(in_view), waited[0])
        assert waited[0] <= ALLOTMENT_WAIT + ALLOTMENT_RECHECK
        assert len(admitted) + len(in_view) <= quota


def test_the_sizing_variable_sets_allotments_and_a_bad_one_says_what_it_expects():
    assert sizing({}) == (ALLOTMENT, HEADROOM_FACTOR)
    assert sizing({SIZING_VARIABLE: "48x1"}) == (48, 1)
    assert sizing({SIZING_VARIABLE: " 0X0 "}) == (0, 0)
    for bad in ("48", "x2", "4.5x2", "-1x2", "ax1", "2x"):
        with pytest.raises(ValueError, match="expected <pods>x<factor>"):
            sizing({SIZING_VARIABLE: bad})
