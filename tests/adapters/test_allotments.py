"""Allotments (issue 49): far below its quotas, a namespace's identical pods are admitted from a share of the
headroom one process reserved in one write, never past a quota, and near it every pod is reserved on its
own. On the real cluster view and the Lease ledger against a fake coordination API that fails where the
API server would; two processes share one Lease as two workers or replicas do."""

import time

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.adapters.test_reservation_lives import one_gpu, play_at_quota, view_with_quota
from tests.helpers import context
from tests.quota_fakes import FakeCoordination, admit, request_for
from tests.translation_cases import pod
from webhook.adapters.kube.allotments import ALLOTMENT, HEADROOM_FACTOR, SIZING_VARIABLE, sizing
from webhook.adapters.kube.ledger import RESERVATIONS_ANNOTATION, LeaseLedger, decode
from webhook.adapters.kube.quota_gate import QuotaGate


def gate_on(view, api, clock, **kwargs) -> QuotaGate:
    return QuotaGate(
        view,
        LeaseLedger(api, "gpuport-system"),
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


@given(STEPS, st.integers(1, 3), st.integers(1, 3))
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
)
# An allotment used up is replaced by the pods drawn from it: dropped instead, two more would pass.
@example([("review", 0)] * 14 + [("create", 0)] * 14, 2, 1)
def test_allotments_never_overshoot_a_quota_whatever_pods_come_late_never_or_go(steps, allotment, factor):
    """Two processes admitting from allotments of `allotment` pods taken where `factor` of them fit under
    a quota of 12, with views that receive a created pod at most LANDING_SECONDS after it was created and
    deletes whenever they like: the pods that exist never pass the quota."""
    quota = 12
    view, api, clock = view_with_quota(quota), FakeCoordination(), [10_000]
    gates = [gate_on(view, api, clock, allotment=allotment, headroom_factor=factor) for _ in range(2)]
    play_at_quota(steps, gates, view, clock, quota)


def test_the_sizing_variable_sets_allotments_and_a_bad_one_says_what_it_expects():
    assert sizing({}) == (ALLOTMENT, HEADROOM_FACTOR)
    assert sizing({SIZING_VARIABLE: "48x1"}) == (48, 1)
    assert sizing({SIZING_VARIABLE: " 0X0 "}) == (0, 0)
    for bad in ("48", "x2", "4.5x2", "-1x2", "ax1", "2x"):
        with pytest.raises(ValueError, match="expected <pods>x<factor>"):
            sizing({SIZING_VARIABLE: bad})
