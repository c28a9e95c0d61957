"""Quota reservations that hold across threads, workers and replicas.

A reservation is written before a GPU pod is admitted and lives as long as its admission: until its pod is
in the views, is seen deleted or finished, or can no longer be created (its API server stopped waiting for
the answer, plus the time a created pod takes to reach the views). While the caller's cluster view counts
the pod itself, or has seen it gone, the reservation is not counted again. The check and the write are
one optimistic-concurrency transaction: read the namespace's reservations with their version, decide,
write back conditioned on that version, and start over on a conflict. Two admissions at once can never
both pass when together they exceed the quota.

The store is small by design: in memory for unit tests; a Lease per namespace in gpuport's own
namespace on a cluster (least privilege: leases in one namespace; Leases carry a resourceVersion the
API server checks on update).

Why one module of ~520 lines: the reservation record, the in-memory store and the grouped
compare-and-swap commit are one protocol; the Lease's raw API calls are in lease_store.py.
"""

import json
import logging
import math
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from webhook.adapters.kube.allotments import ALLOTMENT_KEY, Allotments, replace_closed
from webhook.adapters.kube.lease_store import CALL_TIMEOUT, LeaseStore, StoredLease
from webhook.core.vocabulary.gpu_use import GpuUse, from_wire, to_wire

log = logging.getLogger("gpuport.quota")

# How long after its API server stopped waiting for gpuport's answer a pod may still be stored and reach
# every view: the API server stores it after the answer (other webhooks, the built-in quota, etcd), and a
# loaded view reads it late. With 2 s, two processes on a 2-core machine at load 15-20 let a ninth pod past
# a quota of 8 (tests/integration/test_quota.py): a pod stored and read later than that was counted nowhere.
LANDING_SECONDS = 10.0
# The API server gives a webhook 5 s at most: the reservation must be settled well inside that, or
# the user sees a timeout instead of an answer. (connect, read) per call, and the whole reservation.
DEADLINE_SECONDS = 3.0
SETTLE_AFTER = 2.0  # seconds a reservation stays at least, even once its pod is in the writer's view
# The API server refuses an object whose annotations add up to more than 256 KiB (422). The record is
# kept under 192 KiB, about 1,900 reservations, leaving room for kubectl's and other tools' annotations:
# an admission that would push it past is refused in words, never answered by a failing write.
RECORD_LIMIT = 192 * 1024
# A reservation is named (its pod's UID) only so that its pod's arrival in the view can settle it. A pod is
# stored right after the webhooks answer (gpuport within ADMISSION_SECONDS), so past FOLD_AFTER seconds
# nearly every pod that comes has come; the rest are pods refused after gpuport (a full CPU quota, another
# webhook) that never come. They are folded into per-second sums by the second they end in, which name no
# pod: a pod that lands later is counted twice (in the view and its sum) until the sum ends, never less.
# With lives of ~40 s, named reservations whose pods never come made the record grow with the rate
# (about 1,800 at 45 a second, 100 KiB rewritten by every group commit); folded, it holds at most
# NAMED_LIMIT names and a sum per quota set and second: some 16 KiB whatever the rate.
FOLD_AFTER = 5.0
# Past it, names whose pods the writer's view holds leave at once (_settle), then the oldest are folded
# sooner: a burst faster than about NAMED_LIMIT / SETTLE_AFTER a second makes views behind the writer wait.
NAMED_LIMIT = 256
BUCKET = "#"  # a sum's key starts with it (a pod's UID never does), then how many admissions it holds


class LedgerUnavailable(RuntimeError):
    """The store could not be read or written: the API server unreachable or refusing, or the
    admission's deadline passed first. Contention alone never raises it: a conflict is retried."""


def record_full(namespace: str, held: int) -> LedgerUnavailable:
    return LedgerUnavailable(
        f"reservation store: {held} recent GPU admissions to {namespace} are not yet counted as pods, the "
        f"most its record holds ({RECORD_LIMIT // 1024} KiB); they leave as gpuport's view reads their pods "
        "or as the API server stops waiting to create them (seconds)"
    )


DEADLINE_PASSED = (
    "reservation store: the admission's deadline passed before the API server confirmed the reservation"
)


def unreachable(reason: object) -> LedgerUnavailable:
    return LedgerUnavailable(f"reservation store: API server unreachable: {reason}")


class ViewBehind(LedgerUnavailable):
    """The caller's view has not read as far as reservations already settled by another replica."""

    def __init__(self, through: int):
        self.through = through
        super().__init__(BEHIND)


@dataclass(frozen=True)
class Reservation:
    key: str  # the pod's UID
    usage: GpuUse
    quotas: tuple[str, ...]
    expires: float  # wall-clock time after which no API server can still create its pod unseen
    since: float  # wall-clock time of the admission (a bucket's: its oldest)


# Decides with the reservations still live: returns a denial message, or None to reserve.
DecideOnReservations = Callable[[list[Reservation]], str | None]


@dataclass(frozen=True)
class ViewMark:
    """How far the caller's view of pods has read (a resourceVersion), and at which version it first
    held a pod: what lets a reservation leave the store once its pod is in every view that decides."""

    read_through: int
    first_seen: Callable[[str], int | None]
    # Whether the view saw the reservation's pod deleted or finished: it then holds nothing, settled
    # or not, and its reservation leaves the record at once.
    gone: Callable[[str], bool] = lambda key: False


class Ledger(Protocol):
    def reserve(
        self,
        namespace: str,
        reservation: Reservation,
        decide: DecideOnReservations,
        now: float,
        settled: Callable[[str], bool],
        write: bool = True,
        mark: ViewMark | None = None,
        deadline: float | None = None,
    ) -> str | None:
        """Decide on the live reservations and, unless denied or `write` is False (dryRun), add ours.
        With `mark`, reservations whose pods the caller's view holds may be settled (dropped); with
        `deadline` (time.monotonic()), the answer comes by then or LedgerUnavailable is raised."""


# The record's format: tables of the quota sets and usages the reservations name, and one short row per
# reservation with times in tenths of a second from a base. About 55 bytes a reservation (a UID is 36 of
# them) where the first format spent 105: with lives of seconds, a record holds a few seconds of a burst.
RECORD_FORMAT = 2
_TICK = 10  # rows' times in tenths of a second
FIRST_FORMAT_TTL = 30.0


def encode(reservations: list[Reservation]) -> str:
    quota_sets: dict[tuple[str, ...], int] = {}
    usages: dict[str, int] = {}
    wires: list[dict] = []
    base = math.floor(min((r.since for r in reservations), default=0))
    rows = []
    for r in reservations:
        wire = to_wire(r.usage)
        usage_key = json.dumps(wire, sort_keys=True)
        if usage_key not in usages:
            usages[usage_key] = len(wires)
            wires.append(wire)
        q = quota_sets.setdefault(r.quotas, len(quota_sets))
        # The admission's time rounded down and its end rounded up: never younger nor shorter-lived.
        since = math.floor((r.since - base) * _TICK)
        rows.append([r.key, q, usages[usage_key], since, math.ceil((r.expires - base) * _TICK)])
    record = {"v": RECORD_FORMAT, "t": base, "q": [list(q) for q in quota_sets], "u": wires, "r": rows}
    return json.dumps(record, sort_keys=True, separators=(",", ":"))


def decode(text: str | None) -> list[Reservation]:
    if not text:
        return []
    record = json.loads(text)
    if record.get("v") != RECORD_FORMAT:  # the first format, as a replica of an earlier version writes it
        # whose reservations lived FIRST_FORMAT_TTL seconds
        firsts = [(key, v, float(v["expires"])) for key, v in record.items()]
        return [
            Reservation(key, from_wire(v), tuple(v["quotas"]), ends, ends - FIRST_FORMAT_TTL)
            for key, v, ends in firsts
        ]
    base, quota_sets = record["t"], [tuple(q) for q in record["q"]]
    usages = [from_wire(w) for w in record["u"]]
    # An earlier build wrote -1 for "never settled": as old as the record's base, as it is.
    return [
        Reservation(key, usages[u], quota_sets[q], base + expires / _TICK, base + max(since, 0) / _TICK)
        for key, q, u, since, expires in record["r"]
    ]


def is_sum(reservation: Reservation) -> bool:
    return reservation.key.startswith(BUCKET)


def admissions(reservations: list[Reservation]) -> int:
    """How many admissions these hold: a sum's key says how many it adds up."""
    return sum(int(r.key[len(BUCKET) :] or 1) if is_sum(r) else 1 for r in reservations)


def fold(reservations: list[Reservation], now: float) -> list[Reservation]:
    """The named reservations younger than FOLD_AFTER (the NAMED_LIMIT youngest at most), and every other
    one added into the sum of its quota set and of the whole second it ends in (rounded up: a sum never
    ends sooner than what it holds). Rows are written in the record's format, a sum's key saying how
    many admissions it holds, so a replica of the previous build reads a sum as one reservation that
    nothing settles: what it is."""
    # An allotment stays itself (its process replaces it by what it drew); there are few.
    named = [r for r in reservations if _named_young(r, now)]
    allotted = [r for r in reservations if r.key.startswith(ALLOTMENT_KEY)]
    if len(named) > NAMED_LIMIT:
        named = sorted(named, key=lambda r: r.since)[len(named) - NAMED_LIMIT :]
    named += allotted
    keep = {id(r) for r in named}
    sums: dict[tuple[tuple[str, ...], int], tuple[Reservation, int]] = {}
    for r in reservations:
        if id(r) in keep:
            continue
        slot = (r.quotas, math.ceil(r.expires))
        held = admissions([r])
        if slot in sums:
            other, count = sums[slot]
            r, held = (
                Reservation("", other.usage + r.usage, r.quotas, 0, min(other.since, r.since)),
                held + count,
            )
        sums[slot] = (r, held)
    return named + [
        Reservation(f"{BUCKET}{count}", r.usage, quotas, end, r.since)
        for (quotas, end), (r, count) in sums.items()
    ]


def _entry_size(reservation: Reservation) -> int:
    """At most what one reservation adds to the encoded record: its row, a comma, and its usage and quota
    set should the tables not hold them yet (times in tenths of a second: 7 digits reach 11 days)."""
    return (
        len(json.dumps(reservation.key))
        + 28
        + len(json.dumps(to_wire(reservation.usage), separators=(",", ":")))
        + len(json.dumps(list(reservation.quotas), separators=(",", ":")))
    )


def unexpired(reservations: list[Reservation], now: float) -> list[Reservation]:
    """What stays in the store: a reservation lives until its pod can no longer be created unseen, even
    once its pod is in one view (another replica's view may not have the pod yet), unless settled."""
    return [r for r in reservations if r.expires > now]


def uncounted(reservations: list[Reservation], settled: Callable[[str], bool]) -> list[Reservation]:
    """What to add to the view's usage: reservations whose pod the caller's view did not count."""
    return [r for r in reservations if not settled(r.key)]


class MemoryLedger:
    """For unit tests and a single process without a cluster: a lock stands in for the API server."""

    def __init__(self):
        self._lock = threading.Lock()
        self._by_namespace: dict[str, list[Reservation]] = {}

    def reserve(self, namespace, reservation, decide, now, settled, write=True, mark=None, deadline=None):
        with self._lock:
            current = unexpired(self._by_namespace.get(namespace, []), now)
            denial = decide(uncounted(current, settled))
            if denial is None and write:
                self._by_namespace[namespace] = [r for r in current if r.key != reservation.key] + [
                    reservation
                ]
            else:
                self._by_namespace[namespace] = current
            return denial

    def reservations(self, namespace: str) -> list[Reservation]:
        return list(self._by_namespace.get(namespace, []))


RESERVATIONS_ANNOTATION = "gpuport.io/reservations"
# Reservations of pods created at or before this resourceVersion have been dropped: a view that has
# not read that far may be missing them, so it must not decide.
SETTLED_THROUGH = "gpuport.io/settled-through"


@dataclass(eq=False)  # each admission is itself: found and withdrawn by identity
class _Ask:
    """One admission waiting for a turn at a namespace's Lease."""

    reservation: Reservation
    decide: DecideOnReservations
    settled: Callable[[str], bool]
    write: bool
    deadline: float
    mark: ViewMark | None
    done: threading.Event = field(default_factory=threading.Event)
    denial: str | None = None
    error: LedgerUnavailable | None = None

    def finish(self, denial: str | None = None, error: LedgerUnavailable | None = None) -> None:
        self.denial, self.error = denial, error
        self.done.set()


BEHIND = (
    "reservation store: this replica's view of pods has not caught up with reservations already "
    "settled by another; retry shortly"
)


def _settle(
    current: list[Reservation], leader: "_Ask", through: int, now: float
) -> tuple[list[Reservation], int]:
    """Drop the reservations whose pods the leader's view saw deleted or finished (they hold nothing
    whoever counts them), and those SETTLE_AFTER old whose pods the leader's view holds (by then every
    healthy view has the pod too, so few replicas must wait); say up to which version every view must
    have read before it decides again. Without a mark (a view whose versions are not numbers) nothing
    is dropped.

    Past NAMED_LIMIT young names, `fold` would add the oldest into sums no pod settles, though most of
    their pods are landing: counted twice for the sums' whole life (a burst of 170 creates a second into
    a quota of 900 admitted 580). So there, those whose pods the leader's view holds leave now instead,
    the first it saw first, whatever their age: safe for the same reason (a view that has not read as
    far waits until it has, ViewBehind), at the cost of such waits during the burst."""
    if leader.mark is None:
        return current, through
    kept = []
    landed: list[tuple[Reservation, int]] = []  # kept, though the leader's view holds their pods
    for reservation in current:
        if leader.mark.gone(reservation.key):
            continue
        seen = leader.mark.first_seen(reservation.key) if leader.settled(reservation.key) else None
        if seen is not None and reservation.since + SETTLE_AFTER <= now:
            through = max(through, seen)
            continue
        kept.append(reservation)
        if seen is not None:
            landed.append((reservation, seen))
    excess = sum(1 for r in kept if _named_young(r, now)) - NAMED_LIMIT
    if excess > 0 and landed:
        # Those the view saw first: `through` rises least, so fewest replicas must wait (by admission
        # time, one pod landing late raised it to nearly the newest version: ViewBehind ~30 times more).
        landed.sort(key=lambda found: found[1])
        leaving = landed[:excess]
        through = max(through, *(seen for _, seen in leaving))
        gone = {id(r) for r, _ in leaving}
        kept = [r for r in kept if id(r) not in gone]
    return kept, through


def _named_young(reservation: Reservation, now: float) -> bool:
    """Whether `fold` keeps it named (until NAMED_LIMIT): an admission's, not a sum or an allotment, younger
    than FOLD_AFTER."""
    return (
        not is_sum(reservation)
        and not reservation.key.startswith(ALLOTMENT_KEY)
        and reservation.since + FOLD_AFTER > now
    )


class LeaseLedger:
    """Reservations in coordination.k8s.io Leases named gpuport-quota-<namespace> in gpuport's namespace.

    Admissions to one namespace are committed in groups, as the built-in quota admission batches its
    status updates: whoever holds the namespace's turn reads the Lease once, decides every admission
    waiting at that moment in arrival order (each seeing the ones accepted before it), and writes them
    all with one compare-and-swap. A burst then costs a round trip per group, not per pod, and only
    other processes can conflict. A conflict (409) is decided again on a fresh read, with whoever
    arrived meanwhile, until the admissions' deadlines: contention costs a wait, never a refusal.

    What the Lease holds is bounded by the admissions' lives, not the burst: each write drops the
    reservations whose pods can no longer be created, those whose pods the writer's view saw deleted or
    finished, and those SETTLE_AFTER old whose pods it holds. So it holds the admissions of the last
    SETTLE_AFTER seconds (longer only while a deciding view lags) plus those whose pods never appeared
    (refused after gpuport, answer lost) until their API server can no longer create them and
    LANDING_SECONDS more (~40 s). Those are named only FOLD_AFTER seconds (NAMED_LIMIT at most), then
    kept as a sum per quota set and second they end in: some 16 KiB whatever the rate (named, 100 KiB
    at 45 a second). It never passes RECORD_LIMIT: an admission that would push it past (hundreds of
    quota sets) is refused saying so.

    The Lease as this process last wrote it is kept and tried first: when nobody wrote since, the
    compare-and-swap succeeds and the read is saved; when somebody did, it fails (409) and the group is
    decided again on a fresh read. A decision on the kept copy stands only once such a write confirms
    it, so a group that writes nothing is always decided on a fresh read."""

    def __init__(self, coordination_api, namespace: str, background: bool = True, clock=time.monotonic):
        self.store = LeaseStore(coordination_api, namespace)
        self._turns: dict[str, threading.Lock] = {}
        self._waiting: dict[str, list[_Ask]] = {}
        self._last_written: dict[str, StoredLease] = {}  # only read or changed under the name's turn
        self._guard = threading.Lock()
        # `background`: a thread replaces used-up or timed-out allotments as they close (allotments.py);
        # without, the caller does (allotments.flush_due), as a test's steps.
        self.allotments = Allotments(self.flush_closed, clock, background)

    def _name(self, namespace: str) -> str:
        return f"gpuport-quota-{namespace}"[:253]

    def reserve(self, namespace, reservation, decide, now, settled, write=True, mark=None, deadline=None):
        # The caller's deadline for the whole admission, when it has one: what it waited for already
        # (a slot, a view catching up) comes out of the same few seconds.
        latest = time.monotonic() + DEADLINE_SECONDS
        ask = _Ask(reservation, decide, settled, write, min(deadline or latest, latest), mark)
        with self._guard:
            self._waiting.setdefault(namespace, []).append(ask)
            turn = self._turns.setdefault(namespace, threading.Lock())
        while not ask.done.is_set():
            if not turn.acquire(timeout=max(ask.deadline - time.monotonic(), 0)):
                with self._guard:
                    if ask in self._waiting[namespace]:  # nobody took it: withdraw, write nothing
                        self._waiting[namespace].remove(ask)
                        raise LedgerUnavailable(DEADLINE_PASSED)
                # A group holding it is finishing; its calls end by the earliest deadline in it.
                ask.done.wait(max(ask.deadline - time.monotonic(), 0.0))
                break
            try:
                if not ask.done.is_set():
                    with self._guard:
                        group, self._waiting[namespace] = self._waiting[namespace], []
                    self._commit(namespace, group, now)
            finally:
                turn.release()
        if ask.error is not None:
            raise ask.error
        if not ask.done.is_set():
            raise LedgerUnavailable(DEADLINE_PASSED)
        return ask.denial

    def flush_closed(self, namespace: str) -> bool:
        """Replace the namespace's closed allotments in the record by the pods drawn from them, now: the
        flusher calls it as one is used up or past its time, so the other processes count what was drawn,
        not the allotment whole, without waiting for this process's next admission to the namespace. A
        group of its own under the namespace's turn (admissions arriving meanwhile wait for the next);
        nothing else in the record changes: what settles, ends or folds is left to the next admission's
        write, whose view says what may leave. False: not written (the flusher tries again later)."""
        with self._guard:
            turn = self._turns.setdefault(namespace, threading.Lock())
        deadline = time.monotonic() + DEADLINE_SECONDS
        if not turn.acquire(timeout=DEADLINE_SECONDS):
            return False
        try:
            return self._flush(namespace, deadline)
        finally:
            turn.release()

    def _flush(self, namespace: str, deadline: float) -> bool:
        import urllib3
        from kubernetes.client.exceptions import ApiException

        name = self._name(namespace)
        kept_copy = self._last_written.pop(name, None)
        while time.monotonic() < deadline:
            closed = self.allotments.closing(namespace)
            if not closed:  # replaced by an admission's write meanwhile
                if kept_copy is not None:
                    self._last_written[name] = kept_copy
                return True
            left = max(deadline - time.monotonic(), 0.05)
            timeout = (min(CALL_TIMEOUT[0], left), min(CALL_TIMEOUT[1], left))
            try:
                lease = kept_copy if kept_copy is not None else self.store.read(name, timeout)
                kept_copy = None
                if lease is None:  # the record is gone, and its allotments with it: nothing to replace
                    self.allotments.written(namespace, closed)
                    return True
                stored = decode(lease.annotations.get(RESERVATIONS_ANNOTATION))
                keys = {a.entry.key for a in closed}
                if not any(r.key in keys for r in stored):  # ended and dropped: nothing of them to write
                    self.allotments.written(namespace, closed)
                    return True
                # Nothing dropped, not even what ended: only a write that knows a view may drop.
                replaced = replace_closed(stored, closed, float("-inf"))
                body = {RESERVATIONS_ANNOTATION: encode(replaced)}
                self._last_written[name] = self.store.write(name, lease, body, timeout)
                self.allotments.written(namespace, closed)
                return True
            except ApiException as exc:
                if exc.status in (404, 409, 429):  # written or removed meanwhile, or load shed: again
                    time.sleep(random.uniform(0, 0.02))  # noqa: S311 - jitter, not security
                    continue
                log.warning("allotments of %s not replaced: the API server said %s", namespace, exc.status)
                return False
            except (OSError, urllib3.exceptions.HTTPError, ValueError) as exc:
                log.warning("allotments of %s not replaced: %s", namespace, exc)
                return False
        return False

    def waiting(self, namespace: str) -> int:
        """How many admissions to the namespace wait for the next group (not the one being written)."""
        with self._guard:
            return len(self._waiting.get(namespace, ()))

    def _join_waiting(self, namespace: str, group: list[_Ask]) -> list[_Ask]:
        """The group with every admission that arrived since, after it: a retry carries them too."""
        with self._guard:
            arrived, self._waiting[namespace] = self._waiting.get(namespace, []), []
        return group + arrived

    def _commit(self, namespace: str, group: list[_Ask], now: float) -> None:
        import urllib3
        from kubernetes.client.exceptions import ApiException

        name = self._name(namespace)
        kept_copy = self._last_written.pop(name, None)  # only the first attempt may decide on it
        # No attempt count: a conflict means another process wrote, and each retry carries every
        # admission waiting by then, so contention costs a wait. Only an admission's deadline ends it.
        first = True
        while True:
            if not first:
                group = self._join_waiting(namespace, group)
            first = False
            for ask in group:
                if time.monotonic() > ask.deadline:
                    ask.finish(error=LedgerUnavailable(DEADLINE_PASSED))
            group = [a for a in group if not a.done.is_set()]
            if not group:
                return
            try:
                fresh = kept_copy is None  # decided on a read, or on this process's own last write
                lease = self.store.read(name, _call_timeout(group)) if fresh else kept_copy
                kept_copy = None
                annotations = lease.annotations if lease else {}
                stored = decode(annotations.get(RESERVATIONS_ANNOTATION))
                closed = self.allotments.closing(namespace)
                live = unexpired(stored, now)
                current = replace_closed(live, closed, now)
                through = int(annotations.get(SETTLED_THROUGH) or 0)
                for ask in group:  # `through` only grows: behind a kept copy's is behind the current one
                    if through and (ask.mark is None or ask.mark.read_through < through):
                        ask.finish(error=ViewBehind(through))
                group = [a for a in group if not a.done.is_set()]
                if not group:
                    return
                kept, settled_through = _settle(current, group[0], through, now)
                if len(live) < len(stored) and group[0].mark is not None:
                    # What ended may have been stored (by its API server's last moment): the time
                    # since says every view holds it; the writer's view has read this far, and a view
                    # that has not, lagging more than that, waits to read as far before it decides.
                    settled_through = max(settled_through, group[0].mark.read_through)
                kept = fold(kept, now)
                # The record as read holds `kept`: its length bounds their size, made exact only near
                # the limit (encoding a full record costs milliseconds on every group).
                size, exact = len(annotations.get(RESERVATIONS_ANNOTATION) or ""), False
                accepted: list[Reservation] = []
                decided: list[tuple[_Ask, str | None]] = []
                full = False
                for ask in group:
                    denial = ask.decide(uncounted(current + accepted, ask.settled))
                    if denial is None and ask.write:
                        entry = _entry_size(ask.reservation)
                        if size + entry > RECORD_LIMIT and not exact:
                            size, exact = len(encode(kept + accepted)), True
                        if size + entry > RECORD_LIMIT:
                            full = True
                            if fresh:  # a kept copy may hold what others have settled since
                                ask.finish(error=record_full(namespace, len(kept) + len(accepted)))
                            continue
                        size += entry
                        accepted.append(ask.reservation)
                    decided.append((ask, denial))
                if full and not fresh:
                    continue  # decide again on a fresh read
                if accepted and any(time.monotonic() > a.deadline for a, _ in decided):
                    continue  # too late for some: decide again without them, write nothing for them
                # A dryRun review has no side effects (the webhook says NoneOnDryRun), housekeeping included.
                tidy = (
                    fresh and all(a.write for a in group) and (bool(closed) or _worth_writing(stored, kept))
                )
                if accepted or tidy:
                    keys = {r.key for r in accepted}
                    kept = [r for r in kept if r.key not in keys] + accepted
                    body = {RESERVATIONS_ANNOTATION: encode(kept)}
                    if settled_through:
                        body[SETTLED_THROUGH] = str(settled_through)
                    self._last_written[name] = self.store.write(name, lease, body, _call_timeout(group))
                    self.allotments.written(namespace, closed)
                elif not fresh:
                    continue  # decided on the kept copy and nothing to write: decide on a fresh read
                for ask, denial in decided:
                    ask.finish(denial)
                return
            except ApiException as exc:
                if exc.status in (404, 409):
                    # Someone reserved (or removed the Lease) meanwhile: decide again on what is there,
                    # after a short random pause so that colliding replicas do not collide in lockstep.
                    time.sleep(random.uniform(0, 0.02))  # noqa: S311 - jitter, not security
                    continue
                if exc.status == 429:
                    # The API server's priority and fairness sheds load in a burst: contention too.
                    time.sleep(random.uniform(0.01, 0.05))  # noqa: S311 - jitter, not security
                    continue
                error = LedgerUnavailable(f"reservation store: the API server said {exc.status} {exc.reason}")
            except (OSError, urllib3.exceptions.HTTPError) as exc:
                # A call cut by its timeout is the deadline passing, not the server being away.
                late = time.monotonic() >= min(a.deadline for a in group) - 0.05
                error = LedgerUnavailable(DEADLINE_PASSED) if late else unreachable(exc)
            except ValueError as exc:
                error = LedgerUnavailable(f"reservation store: the Lease could not be read ({exc})")
            for ask in group:
                ask.finish(error=error)
            return


def _call_timeout(group: list[_Ask]) -> tuple[float, float]:
    """(connect, read) for one store call, ending by the earliest deadline of the group: a call in flight
    must not outlast the admission it answers."""
    left = max(min(a.deadline for a in group) - time.monotonic(), 0.05)
    return min(CALL_TIMEOUT[0], left), min(CALL_TIMEOUT[1], left)


def _worth_writing(stored: list[Reservation], kept: list[Reservation]) -> bool:
    """A group that admits nothing (the quota is full, or dryRun) still writes when what is over (lives
    ended, pods gone or settled) is a quarter of the Lease: otherwise the last seconds of a burst stay
    stored until the next admission."""
    held = admissions(stored)
    dropped = held - admissions(kept)  # folding into sums drops none: only a write's by-product
    return dropped > 0 and dropped * 4 >= held
