"""Allotments: a share of a namespace's GPU headroom that one process reserves in one write and then
admits from in memory, while the namespace is far below its quotas.

A burst into a namespace far from its quota paid a Lease read and write (and, with two workers, a
conflict two times in five) for every pod, though no admission could come near the quota: at 45 reviews
a second on a loaded 2-core machine, the group commits fell behind and some admissions ran past their
deadline. An allotment is a reservation of ALLOTMENT pods' worth written like any other; its process then
admits up to that many identical pods (same quotas as read, same use) without a call, each one covered
by the allotment in the record for as long as its own reservation would have lived. It is taken only
where HEADROOM_FACTOR allotments more would still fit, so near a quota every pod is reserved as before.

Why this is safe: every admitted pod is covered by an entry every deciding replica counts (its own
reservation, or the allotment it was drawn from, which ends no sooner than the pod's own would), until
the views hold the pod. What an allotment holds beyond its pods is over-counted, never under: while it
is usable the unused part, then nothing, since it is replaced by the named reservations of the pods
drawn from it (those settle and fold as any other). A process that dies leaves its allotments in the
record until they end.

When it is replaced: at its process's next write of the namespace's record, or by the process's flusher
thread once it is used up or past USABLE_SECONDS (CLOSED_GRACE later, when no write came first): one
write per namespace per closing, never per pod. Before, it was replaced only at the next write, so an
allotment whose process got no more pods counted whole for the others, its drawn pods twice once in
their views, and a burst reaching the quota was refused short of it. A refusal that only allotments
explain waits for them (quota_gate.py), so USABLE_SECONDS is kept inside what an admission may wait.
"""

import logging
import os
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Protocol

log = logging.getLogger("gpuport.quota")


class _Held(Protocol):
    """What of a ledger's reservation an allotment reads (the ledger, which imports this module, has
    the class)."""

    @property
    def key(self) -> str: ...
    @property
    def expires(self) -> float: ...
    @property
    def quotas(self) -> tuple[str, ...]: ...


ALLOTMENT = 64  # pods' worth reserved in one write
# Taken only where this many allotments more would fit under every quota: where a Lease write per pod
# is what a burst would cost. (With 8, a 1,000-pod burst into a quota of 900 through four processes was
# once refused 49-93 pods short of it, other processes' allotments still counting whole as the burst
# reached the quota; they are now replaced as they close, and a refusal they alone explain waits.)
HEADROOM_FACTOR = 16
# How long an allotment is drawn from: a burst draws it within seconds, and its part not drawn is
# over-counted until it is replaced by what was drawn. With CLOSED_GRACE, at most what a refusal that only
# allotments explain waits (quota_gate.py: the admission's 3.5 s less the last attempt's second).
USABLE_SECONDS = 2.0
# An allotment's entry ends this long after its first pod's reservation would: every pod drawn while it is
# usable ends sooner (draw checks it), the wall clock its ends are counted on and the monotonic clock of
# USABLE_SECONDS running apart by a second or so. A pod it cannot cover is reserved on its own.
COVER_SECONDS = 5.0
# A closed allotment (used up, or past USABLE_SECONDS) is replaced at its process's next write: in a burst
# the next pod comes within moments and takes a new allotment or a reservation of its own in one write.
# Only past this does the flusher write it alone: firing the moment it closed, it would race that write
# and make two writes of the one a busy process needs (tests/adapters/test_allotments.py).
CLOSED_GRACE = 0.2
# After a replacement that could not be written (the API server away, the namespace's turn busy).
RETRY_SECONDS = 1.0
# Its key in the record: never a pod's UID (nothing settles it), never a sum's.
ALLOTMENT_KEY = "+"
# "<pods>x<factor>" in place of ALLOTMENT and HEADROOM_FACTOR ("0x0": every pod reserved on its own). For
# tests and measurements that need allotments near a small quota; a deployment keeps the defaults.
SIZING_VARIABLE = "GPUPORT_QUOTA_ALLOTMENT"


def sizing(environ=os.environ) -> tuple[int, int]:
    """(pods per allotment, headroom factor): ALLOTMENT and HEADROOM_FACTOR unless SIZING_VARIABLE says."""
    value = environ.get(SIZING_VARIABLE, "").strip()
    if not value:
        return ALLOTMENT, HEADROOM_FACTOR
    pods, x, factor = value.lower().partition("x")
    if not (x and pods.strip().isdigit() and factor.strip().isdigit()):
        raise ValueError(f"{SIZING_VARIABLE}={value!r}: expected <pods>x<factor>, e.g. 64x16 (0x0: none)")
    return int(pods), int(factor)


@dataclass(eq=False)
class Allotment:
    entry: _Held  # as written: ALLOTMENT_KEY and a unique tail, ALLOTMENT times the pod's use
    tag: Hashable  # what a pod drawing from it must have: the quotas as read (limits included), its use
    left: int
    usable_until: float  # time.monotonic()
    drawn: list[_Held] = field(default_factory=list)
    closed: bool = False  # drawn from no more: to be replaced in the record by `drawn`
    used_up_at: float = float("inf")  # Allotments.clock() when its last pod was drawn

    def due(self) -> float:
        """When it is to be replaced in the record, on its process's clock."""
        if self.closed:
            return float("-inf")
        return (self.used_up_at if self.left <= 0 else self.usable_until) + CLOSED_GRACE


class Allotments:
    """One process's allotments, by namespace, on `clock` (time.monotonic). `flush`, given a namespace,
    replaces its closed allotments in the record now (False: not written, try again later); with
    `background`, a thread started with the first allotment held calls it as each one becomes due
    (without, flush_due does, when called)."""

    def __init__(
        self,
        flush: Callable[[str], bool] | None = None,
        clock: Callable[[], float] = time.monotonic,
        background: bool = True,
    ):
        self.clock = clock
        self._flush = flush
        self._background = background
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # an allotment held or used up: when next due
        self._by_namespace: dict[str, list[Allotment]] = {}
        self._retry_at: dict[str, float] = {}  # a namespace whose replacement failed: not before then
        self._flusher: threading.Thread | None = None

    def hold(self, namespace: str, allotment: Allotment) -> None:
        """An allotment whose entry the record now holds (the write that took it succeeded)."""
        with self._lock:
            self._by_namespace.setdefault(namespace, []).append(allotment)
            # Started here, in the process that admits (a server's workers fork after building the gate).
            if self._flush is not None and self._background and self._flusher is None:
                self._flusher = threading.Thread(
                    target=self._flushing, name="gpuport-allotments", daemon=True
                )
                self._flusher.start()
            self._changed.notify()

    def draw(self, namespace: str, tag: Hashable, reservation: _Held) -> bool:
        """Admit a pod from an allotment when one covers it: same tag, some left, still usable, and
        ending no sooner than the pod's own reservation would."""
        now = self.clock()
        with self._lock:
            for allotment in self._by_namespace.get(namespace, ()):
                if (
                    not allotment.closed
                    and allotment.tag == tag
                    and allotment.left > 0
                    and now < allotment.usable_until
                    and reservation.expires <= allotment.entry.expires
                    and reservation.quotas == allotment.entry.quotas
                ):
                    allotment.left -= 1
                    allotment.drawn.append(reservation)
                    if allotment.left == 0:
                        allotment.used_up_at = now
                        self._changed.notify()
                    return True
        return False

    def closing(self, namespace: str) -> list[Allotment]:
        """The allotments drawn from no more (used up or past their time), now closed: a write of the
        namespace's record replaces each by what was drawn from it."""
        now = self.clock()
        with self._lock:
            held = self._by_namespace.get(namespace, [])
            for allotment in held:
                if allotment.left <= 0 or now >= allotment.usable_until:
                    allotment.closed = True
            return [a for a in held if a.closed]

    def written(self, namespace: str, replaced: list[Allotment]) -> None:
        with self._lock:
            left = [a for a in self._by_namespace.get(namespace, []) if a not in replaced]
            if left:
                self._by_namespace[namespace] = left
            else:
                self._by_namespace.pop(namespace, None)
            self._retry_at.pop(namespace, None)

    def due(self) -> tuple[list[str], float | None]:
        """(the namespaces holding an allotment to be replaced now, when the next other one is due)."""
        with self._lock:
            return self._due(self.clock())

    def flush_due(self) -> None:
        """Replace every allotment due now (what the flusher thread does at each allotment's time)."""
        for namespace in self.due()[0]:
            self._flush_one(namespace)

    def _due(self, now: float) -> tuple[list[str], float | None]:
        ready, later = [], None
        for namespace, held in self._by_namespace.items():
            when = max(min(a.due() for a in held), self._retry_at.get(namespace, float("-inf")))
            if when <= now:
                ready.append(namespace)
            elif later is None or when < later:
                later = when
        return ready, later

    def _flush_one(self, namespace: str) -> None:
        if self._flush is None:
            return
        written = False
        try:
            written = self._flush(namespace)
        finally:
            if not written:
                with self._lock:
                    self._retry_at[namespace] = self.clock() + RETRY_SECONDS

    def _flushing(self) -> None:
        while True:
            with self._lock:
                if not self._by_namespace:
                    self._flusher = None  # nothing held: the next allotment held starts another
                    return
                now = self.clock()
                ready, later = self._due(now)
                if not ready:
                    self._changed.wait(None if later is None else later - now)
                    continue
            for namespace in ready:
                try:
                    self._flush_one(namespace)
                except Exception:  # the thread outlives any one failure: retried RETRY_SECONDS later
                    log.exception("allotments of %s not replaced; retried in %s s", namespace, RETRY_SECONDS)


def replace_closed(current: list[Any], closed: list[Allotment], now: float) -> list[Any]:
    """The record with each closed allotment replaced by the reservations of the pods drawn from it. One
    no longer in the record as itself was folded into a sum (which covers its pods as long) or ended
    (and its pods' lives with it): nothing of it is added."""
    by_key = {a.entry.key: a for a in closed}
    out: list[Any] = []
    for r in current:
        allotment = by_key.get(r.key)
        if allotment is None:
            out.append(r)
        else:
            out.extend(d for d in allotment.drawn if d.expires > now)
    return out
