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
is usable the unused part, then nothing, since the next write of its process replaces it by the named
reservations of the pods drawn from it (those settle and fold as any other). A process that dies leaves
its allotments in the record until they end.
"""

import os
import threading
import time
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any, Protocol


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
# Taken only where this many allotments more would fit under every quota. 8 was too few: a 1,000-pod
# burst into a quota of 900 through four processes was refused 49-93 pods short of it (other processes'
# allotments, unused, still counted as the burst reached the quota), 0 with no allotment taken.
HEADROOM_FACTOR = 16
# How long an allotment is drawn from: a burst draws it within seconds, and its part not drawn is
# over-counted until its process writes again (it is replaced then by what was drawn).
USABLE_SECONDS = 4.0
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
    closed: bool = False  # drawn from no more: replaced in the record by `drawn` at its process's next write


class Allotments:
    """One process's allotments, by namespace."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_namespace: dict[str, list[Allotment]] = {}

    def hold(self, namespace: str, allotment: Allotment) -> None:
        """An allotment whose entry the record now holds (the write that took it succeeded)."""
        with self._lock:
            self._by_namespace.setdefault(namespace, []).append(allotment)

    def draw(self, namespace: str, tag: Hashable, reservation: _Held) -> bool:
        """Admit a pod from an allotment when one covers it: same tag, some left, still usable, and
        ending no sooner than the pod's own reservation would."""
        now = time.monotonic()
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
                    return True
        return False

    def closing(self, namespace: str) -> list[Allotment]:
        """The allotments drawn from no more (used up or past their time), now closed: a write of the
        namespace's record replaces each by what was drawn from it."""
        now = time.monotonic()
        with self._lock:
            held = self._by_namespace.get(namespace, [])
            for allotment in held:
                if allotment.left <= 0 or now >= allotment.usable_until:
                    allotment.closed = True
            return [a for a in held if a.closed]

    def written(self, namespace: str, replaced: list[Allotment]) -> None:
        with self._lock:
            self._by_namespace[namespace] = [
                a for a in self._by_namespace.get(namespace, []) if a not in replaced
            ]


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
