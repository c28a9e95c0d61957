"""The quota step of /validate: GPU-equivalents against the namespace's quotas, with a reservation, for
a pod create and for a pod update that moves GPUs into a quota (a deadline set, a GPU share changed).

An adapter: it reads the cluster view and writes the reservation store; the arithmetic and the
message are the pure functions in webhook.core.budget (quota, equivalents). Only pods that ask for
a GPU in a namespace with a GPU quota pay the store's round trip.

When the store cannot be reached it denies (fail closed): quota is a promise to the namespace's
owner, and a GPU pod that waits for a retry costs less than an over-committed budget. Pods outside
GPU quotas are never affected.

Why one module of ~710 lines: a pod create's and a pod update's charges, the namespace's sum they are
checked against and the reservation that makes the check race-free are one protocol; what a reservation
key means (a pod, or a pod as an update leaves it) is read where the sum is made. The sum remembers a
pod's charge only while what it was worked out from is current, and reads claims made ahead again. Far
below its quotas, identical creates are admitted from an allotment (allotments.py): whether one fits is
the same sum against the same quotas.
"""

import hashlib
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import reduce
from typing import Any

from webhook.adapters.kube.allotments import (
    ALLOTMENT_KEY,
    COVER_SECONDS,
    USABLE_SECONDS,
    Allotment,
    sizing,
)
from webhook.adapters.kube.clusterview import compact_pod
from webhook.adapters.kube.ledger import (
    LANDING_SECONDS,
    Ledger,
    LedgerUnavailable,
    Reservation,
    ViewBehind,
    ViewMark,
)
from webhook.core.asks.demand import PodDemand
from webhook.core.asks.unread import unread_refusal
from webhook.core.budget.equivalents import pod_use
from webhook.core.budget.quota import applies, exceeded, gpu_quotas, pod_facts
from webhook.core.deciding.context import Context
from webhook.core.deciding.decision import Decision, deny
from webhook.core.deciding.pipeline import ClaimTemplates, read_pod_demand
from webhook.core.deciding.review import AdmissionRequest
from webhook.core.vocabulary.gpu_use import NO_GPU, GpuUse
from webhook.core.vocabulary.workloads import read_pod

log = logging.getLogger("gpuport.quota")
# The quota step's share of an admission, counted from the review's arrival: the server cuts an exchange
# at 4.5 s, the API server waits 5 s; the rest is reading the review, deciding and answering.
ADMISSION_SECONDS = 3.5
# The longest a validating webhook may make the API server wait (admissionregistration/v1's timeoutSeconds
# is at most 30): another webhook beside gpuport's may answer that late, and the pod is stored after it.
OTHER_WEBHOOKS_SECONDS = 30.0
# Kept back from what the API server waits (its call's `timeout`) for the answer to travel back.
ANSWER_MARGIN = 1.0
# A review's timing: (when it arrived, time.monotonic(); the seconds its API server waits from then).
RequestTiming = Callable[[], tuple[float, float] | None]
# What a reservation needs once it has its turn (a read and a write, or a retry after a conflict):
# waits before it (a slot, a view catching up) end this long before the admission's deadline.
RESERVING_SECONDS = 1.0
# A store that answered this gate within this long is answering: a slot is then waited for, not refused.
ANSWERING_WITHIN = 1.5
# A pod update's reservation is keyed <uid><UPDATE_KEY><the pod after it, digested>: the pod's own UID
# is counted as soon as a view holds the pod at all, and that view may still hold it as it was before.
UPDATE_KEY = "@update:"
# After a namespace had no room for an allotment, its pods are reserved one by one this long before another
# allotment is asked for (each ask is a write that admits nothing).
NO_ROOM_SECONDS = 2.0
# A refusal that only allotments explain (the quota is reached only through their part that may be unused:
# see allotments.py) is decided again this often, for as long as the admission may wait, before it is
# given: those allotments are replaced by the pods drawn from them within USABLE_SECONDS.
ALLOTMENT_RECHECK = 0.1
ALLOTMENT_WAIT = ADMISSION_SECONDS - RESERVING_SECONDS


class QuotaGate:
    def __init__(
        self,
        view,
        ledger: Ledger,
        clock: Callable[[], float] = time.time,
        max_waiting: int = 7,
        wait_for_slot: float = 0.5,
        templates: ClaimTemplates | None = None,
        timing: RequestTiming = lambda: None,
        allotment: int | None = None,
        headroom_factor: int | None = None,
        pause: Callable[[float], None] = time.sleep,
    ):
        self.view = view
        # When the review being answered arrived and how long its API server waits: its deadlines
        # count from there (a review that waited for a thread has less left), and its reservation
        # lives as long as that API server may still create the pod, no longer.
        self.timing = timing
        self.templates = templates  # reads what running pods' DRA claims ask for
        self.ledger = ledger
        self.clock = clock
        # At most this many of a worker's threads wait on the reservation store at once (set it below
        # the worker's thread count): a slow or frozen API server then delays quota'd GPU pods only,
        # never the reviews of everything else.
        self._slots = threading.BoundedSemaphore(max_waiting)
        self.wait_for_slot = wait_for_slot
        self._last_answer = float("-inf")  # time.monotonic() of the store's last answer to this gate
        # Each running pod's usage, worked out once per context (maps reload → new context → recount).
        self._usage: dict[str, tuple[dict, tuple[GpuUse, object, dict[str, GpuUse]], object]] = {}
        self._usage_context: Context | None = None  # held, so its identity cannot be reused
        self._by_namespace: dict[str, _NamespaceSum] = {}  # each namespace's last sum
        # Far below its quotas, a namespace's identical pods are admitted from allotments (see
        # allotments.py): `allotment` pods' worth reserved in one write where `headroom_factor` times as
        # much would still fit. 0: every pod reserved on its own. Unset: allotments.sizing (the defaults, or
        # the environment's GPUPORT_QUOTA_ALLOTMENT).
        default_allotment, default_factor = sizing()
        self.allotment = default_allotment if allotment is None else allotment
        self.headroom_factor = default_factor if headroom_factor is None else headroom_factor
        self._taking: dict[tuple[str, object], threading.Lock] = {}  # one thread takes each allotment
        self._taking_guard = threading.Lock()
        self._no_room: dict[tuple[str, object], float] = {}  # (namespace, tag) → until, time.monotonic()
        self.pause = pause  # between decisions of a refusal that only allotments explain

    def concerns(self, request: AdmissionRequest, context: Context) -> bool:
        """Whether a GPU quota may stand against this pod create, whatever it asks: one is in its
        namespace, or the quotas are not listed yet (then its GPU pods wait, as admit says)."""
        if not self.view.has_synced("resourcequotas"):
            return True
        return bool(gpu_quotas(self.view.quotas_in(request.namespace), context.target.whole_gpu))

    def admit(self, request: AdmissionRequest, context: Context, demand: PodDemand) -> Decision | None:
        """A denial, or None when quota has nothing against this pod create."""
        # Every wait below (a slot, the store, a view catching up) ends by then: the clear refusal
        # always comes before the server cuts the exchange (4.5 s) or the API server gives up (5 s).
        deadline, _ = self._deadlines()
        pod = request.object or {}
        target, catalogue = context.target, context.dialects.catalogue
        if not demand.asks and not demand.claims.any and not demand.unread and not demand.unreadable:
            return None
        # Never on a view that is still loading: an empty view would count nothing as used. Until the
        # quotas are listed every GPU pod waits; then only those a GPU quota applies to.
        if not self.view.has_synced("resourcequotas"):
            return _loading(request)
        facts = pod_facts(pod)
        quotas = [
            q
            for q in gpu_quotas(self.view.quotas_in(request.namespace), target.whole_gpu)
            if applies(q, facts)
        ]
        if not quotas:
            return None
        if demand.unread:
            return deny(
                "quota-gpu-name-unread", unread_refusal(demand.unread, request.namespace, target.whole_gpu)
            )
        if demand.unreadable:
            # What its scheduler gives it is unknown: counting it as nothing would let it past the budget.
            return deny(
                "quota-share-unreadable",
                f"gpuport cannot count this pod's GPU share against the GPU quota of {request.namespace} "
                f"as its scheduler reads it: {demand.unreadable}",
            )
        uncountable = demand.claims.blocking(request.dry_run)
        if uncountable:
            # What the claims may allocate is unknown: counting it as nothing would let a pod past its budget.
            return deny(
                "quota-claims-uncountable",
                f"gpuport cannot count this pod's claims against the GPU quota of {request.namespace}: "
                + "; ".join(uncountable),
            )
        if not demand.asks and not demand.claims.charges:
            return None
        if not self.view.has_synced("pods"):
            return _loading(request)
        own = pod_use(demand, target, catalogue, shared_claims=False)
        return self._guarded(request, quotas, own, demand.claims.shared(), context, deadline)

    def admit_update(
        self, request: AdmissionRequest, context: Context, demand: PodDemand, before: PodDemand
    ) -> Decision | None:
        """A denial, or None when quota has nothing against this pod update. The built-in evaluator
        charges an update (where it looks at one: pods.go's Handles takes pod creates and resizes only)
        by CheckRequest's rule in the resourcequota admission plugin: a quota the object matches after
        but not before is charged its whole usage, one it matched already only the increase, and an
        update that raises no quota's usage passes. gpuport applies that rule to the updates that move a
        pod's GPUs: activeDeadlineSeconds set (Terminating scopes) and GPU-share annotations changed."""
        deadline, _ = self._deadlines()
        target, catalogue = context.target, context.dialects.catalogue
        if not self.view.has_synced("resourcequotas"):
            return _loading(request)
        after, was = pod_facts(request.object or {}), pod_facts(request.old_object or {})
        own = pod_use(demand, target, catalogue, shared_claims=False)
        held = pod_use(before, target, catalogue, shared_claims=False)
        shared = demand.claims.shared()
        charge: dict[str, GpuUse] = {}  # per quota whose charge may rise, the pod's own after the update
        entered: set[str] = set()
        quotas = []
        unreadable = [p for p in demand.problems if p not in before.problems]
        for quota in gpu_quotas(self.view.quotas_in(request.namespace), target.whole_gpu):
            if not applies(quota, after):
                continue  # a quota the pod leaves, or never was under: nothing to check
            if unreadable:
                # A share gpuport cannot read would be charged nothing; its scheduler may read it.
                return deny(
                    "quota-share-unreadable",
                    f"gpuport cannot count this pod's GPUs against the GPU quota {quota.name} of "
                    f"{request.namespace} after this update: " + "; ".join(unreadable),
                )
            if not applies(quota, was):
                if own == NO_GPU and not shared:
                    continue
                entered.add(quota.name)
                charge[quota.name] = own
            elif own.above(held) != NO_GPU:
                charge[quota.name] = own.most(held)
            else:
                continue
            quotas.append(quota)
        if not quotas:
            return None
        uncountable = demand.claims.blocking(request.dry_run)
        if uncountable:
            return deny(
                "quota-claims-uncountable",
                f"gpuport cannot count this pod's claims against the GPU quota of {request.namespace}: "
                + "; ".join(uncountable),
            )
        if not self.view.has_synced("pods"):
            return _loading(request)
        update = _Update(charge, frozenset(entered), _landing_mark(request.object or {}))
        return self._guarded(request, quotas, own, shared, context, deadline, update)

    def _guarded(
        self,
        request: AdmissionRequest,
        quotas: list,
        own: GpuUse,
        shared: dict[str, GpuUse],
        context: Context,
        deadline: float,
        update: "_Update | None" = None,
    ) -> Decision | None:
        """The reservation, within a slot and the admission's deadline; the store's failures in words."""
        if not self._take_slot(deadline):
            log.warning("GPU quota not checked for %s/%s: all slots waiting", request.namespace, request.name)
            return deny(
                "quota-busy",
                f"gpuport is waiting on the API server for other GPU pods and cannot check the GPU quota "
                f"of {request.namespace} now; retry shortly",
            )
        try:
            denial = self._reserve_patiently(request, quotas, own, shared, context, deadline, update)
        except LedgerUnavailable as exc:
            log.error("GPU quota not checked for %s/%s: %s", request.namespace, request.name, exc)
            return deny(
                "quota-unavailable",
                f"gpuport could not check the GPU quota of {request.namespace} ({exc}); retry shortly",
            )
        except RunningPodUncountable as exc:
            # Counting a running pod's claims as nothing would let this pod past the budget.
            log.warning("GPU quota not checked for %s/%s: %s", request.namespace, request.name, exc)
            return deny(
                "quota-running-pod-uncountable",
                f"gpuport cannot count {exc} in {request.namespace}, so it cannot check the "
                "GPU quota; GPU pods here wait until it can (retry shortly)",
            )
        finally:
            self._slots.release()
        if denial:
            subject = f'pods "{request.name}"' if request.name else "pods"
            return deny("quota-exceeded", f"{subject} is forbidden: {denial}")
        return None

    def _deadlines(self) -> tuple[float, float]:
        """(by when the quota step answers, time.monotonic(); until when the API server may still
        create this review's pod, time.monotonic()): both from the review's arrival and its API
        server's `timeout`; from now when the server cannot say (a test calling the gate directly).
        The pod is stored only once every validating webhook has answered, and the others run beside
        gpuport's with timeouts of their own, up to OTHER_WEBHOOKS_SECONDS: until then it may come."""
        now = time.monotonic()
        arrived, seconds = self.timing() or (now, ADMISSION_SECONDS + ANSWER_MARGIN)
        creatable = max(seconds, OTHER_WEBHOOKS_SECONDS)
        return arrived + min(ADMISSION_SECONDS, seconds - ANSWER_MARGIN), arrived + creatable

    def _take_slot(self, deadline: float) -> bool:
        """A slot to wait on the store in. Past `wait_for_slot`, waited for only while the store keeps
        answering (a burst: the slots free within moments, so contention costs a wait, not a refusal);
        a store that stopped answering gets the quick refusal, and the threads stay free."""
        patient_until = time.monotonic() + self.wait_for_slot
        while True:
            left = _left(deadline) - RESERVING_SECONDS
            if self._slots.acquire(timeout=max(min(0.05, left), 0.0)):
                return True
            now = time.monotonic()
            answering = now - self._last_answer <= ANSWERING_WITHIN
            if left <= 0 or (now >= patient_until and not answering):
                return False

    def _catch_up(self, through: int, seconds: float = 1.0) -> bool:
        deadline = time.monotonic() + seconds
        while self.view.pods_read_through() < through:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def _reserve_patiently(
        self,
        request: AdmissionRequest,
        quotas: list,
        own: GpuUse,
        shared: dict[str, GpuUse],
        context: Context,
        deadline: float,
        update: "_Update | None" = None,
    ) -> str | None:
        """The reservation's answer. A refusal that only allotments explain is not given at once: the
        quota is reached only through what allotments hold, drawn from partly or not at all, and each is
        replaced by the pods drawn from it within USABLE_SECONDS (at once when used up), so the decision
        is taken again, on a fresh read and a fresh view, every ALLOTMENT_RECHECK seconds while the
        admission has time (ALLOTMENT_WAIT at most, and RESERVING_SECONDS left for the last attempt).
        Then it is given as before: waiting admits nothing, so no quota is ever passed."""
        waited = 0.0
        while True:
            try:
                denial, provisional = self._reserve(request, quotas, own, shared, context, deadline, update)
            except ViewBehind as behind:
                # Another replica settled pods this view has not read yet: they arrive within moments
                # (longer when a burst loads the API server, and in a fast burst the record may move on
                # again meanwhile: waited for until the reservation's share of the admission's time).
                # The store answered: reviews queued for a slot wait for this one, not refused busy.
                self._last_answer = time.monotonic()
                if not self._catch_up(behind.through, _left(deadline) - RESERVING_SECONDS):
                    raise
                continue
            # The store answers: a review queued for this slot waits for it rather than being refused.
            self._last_answer = time.monotonic()
            waited += ALLOTMENT_RECHECK
            if (
                denial is None
                or not provisional
                or waited > ALLOTMENT_WAIT
                or _left(deadline) - RESERVING_SECONDS < ALLOTMENT_RECHECK
            ):
                return denial
            self.pause(ALLOTMENT_RECHECK)

    def _reserve(
        self,
        request: AdmissionRequest,
        quotas: list,
        own: GpuUse,
        shared: dict[str, GpuUse],
        context: Context,
        deadline: float,
        update: "_Update | None" = None,
    ) -> tuple[str | None, bool]:
        """One attempt: this view's usage of the namespace, then the store's decision, and whether a
        refusal is one that only allotments explain (it would not be given were they counted as
        nothing). A claim made ahead (`shared`) is charged only to the quotas no counted pod has
        charged it to already. An update asks each quota for what its charge there rises by over what
        this view counts of the pod now (the view holds it as it was, or not at all)."""
        target = context.target
        # How far the view has read is taken before its snapshot: the snapshot holds at least that.
        mark = self._mark(request.namespace)
        used, records, claims_charged = self._namespace_usage(request.namespace, quotas, context, shared)
        pod = request.object or {}
        uid = str((pod.get("metadata") or {}).get("uid") or request.uid)
        asked = {}
        for quota in quotas:
            new = sum((u for n, u in shared.items() if n not in claims_charged[quota.name]), NO_GPU)
            if update is None:
                asked[quota.name] = own + new
                continue
            entered = quota.name in update.entered
            after = update.charge[quota.name] + (new if entered else NO_GPU)
            asked[quota.name] = after.above(self._counted_in(records.get(uid), quota, context))
        if update is not None:
            quotas = [q for q in quotas if asked[q.name] != NO_GPU]  # RemoveZeros: nothing rises there
            if not quotas:
                return None, False
        key = uid if update is None else f"{uid}{UPDATE_KEY}{update.landing}"

        def over(reservations: list[Reservation]) -> str | None:
            for quota in quotas:
                # Its own key again is this same update retried: never charged twice.
                reserved = sum(
                    (r.usage for r in reservations if quota.name in r.quotas and r.key != key), NO_GPU
                )
                message = exceeded(quota, asked[quota.name], used[quota.name] + reserved, target.whole_gpu)
                if message:
                    return message
            return None

        only_allotments = [False]  # of the last decision the store asked for: the one answered

        def decide(reservations: list[Reservation]) -> str | None:
            denial = over(reservations)
            only_allotments[0] = denial is not None and (
                over([r for r in reservations if not r.key.startswith(ALLOTMENT_KEY)]) is None
            )
            return denial

        now = self.clock()
        # Held for the others: the most this pod adds to any quota (a shared claim it is the first
        # to use may be charged again by a concurrent pod until both are in the view: never less).
        most = reduce(GpuUse.most, (asked[q.name] for q in quotas), NO_GPU)
        # Its life is the admission's: the API server stops waiting for this answer by then, and a pod it
        # stores after the answer reaches every view within LANDING_SECONDS more. A pod refused after
        # gpuport (another webhook, the built-in quota) costs no more.
        _, creatable_until = self._deadlines()
        expires = now + max(creatable_until - time.monotonic(), 0.0) + LANDING_SECONDS
        reservation = Reservation(key, most, tuple(q.name for q in quotas), expires, since=now)
        settled = _settled_in(records, self._gone(request.namespace))
        # A create charging each quota the same (no claim made ahead it is the first to use) may be
        # admitted from an allotment; an update, a dry run or anything else is reserved on its own.
        if update is None and not request.dry_run and all(asked[q.name] == most for q in quotas):
            room = _Room(request.namespace, (repr(quotas), most), quotas, used, target.whole_gpu)
            if self._allotted(room, reservation, settled, mark, deadline):
                return None, False
        denial = self.ledger.reserve(
            request.namespace,
            reservation,
            decide,
            now,
            settled,
            write=not request.dry_run,
            mark=mark,
            deadline=deadline,
        )
        return denial, denial is not None and only_allotments[0]

    def _allotted(self, room: "_Room", reservation: Reservation, settled, mark, deadline: float) -> bool:
        """Whether the pod was admitted from an allotment of this process: one it holds, or one taken
        now where the namespace has room for `headroom_factor` of them (one thread takes it; the others
        wait for it rather than each taking one)."""
        allotments = getattr(self.ledger, "allotments", None)
        if allotments is None or self.allotment <= 0:
            return False
        if allotments.draw(room.namespace, room.tag, reservation):
            return True
        slot = (room.namespace, room.tag)
        if time.monotonic() < self._no_room.get(slot, 0.0):
            return False
        with self._taking_guard:
            if len(self._no_room) > 1024:
                self._no_room.clear()
            if len(self._taking) > 1024:  # many namespaces: a lock forgotten costs at most a second taker
                self._taking.clear()
            taking = self._taking.setdefault(slot, threading.Lock())
        if not taking.acquire(timeout=max(_left(deadline) - RESERVING_SECONDS, 0.0)):
            return False
        try:
            if allotments.draw(room.namespace, room.tag, reservation):
                return True  # taken by another thread while this one waited
            # Sums, not products: the gate names no measure of a use (a measure is a row in gpu_use.py).
            share = sum((reservation.usage for _ in range(self.allotment)), NO_GPU)
            needed = sum((share for _ in range(self.headroom_factor)), NO_GPU)
            # It ends no sooner than the reservation of any pod drawn while it is usable would.
            entry = Reservation(
                f"{ALLOTMENT_KEY}{uuid.uuid4().hex}",
                share,
                reservation.quotas,
                reservation.expires + COVER_SECONDS,
                reservation.since,
            )
            denial = self.ledger.reserve(
                room.namespace,
                entry,
                room.decide(needed),
                reservation.since,
                settled,
                mark=mark,
                deadline=deadline,
            )
            if denial is not None:
                self._no_room[slot] = time.monotonic() + NO_ROOM_SECONDS
                return False
            allotments.hold(
                room.namespace,
                Allotment(entry, room.tag, self.allotment, allotments.clock() + USABLE_SECONDS),
            )
            return allotments.draw(room.namespace, room.tag, reservation)
        finally:
            taking.release()

    def _counted_in(self, record: Mapping[str, Any] | None, quota, context: Context) -> GpuUse:
        """What this view's sum charges `quota` for the pod as it holds it (its own use; claims made
        ahead are charged once per quota whoever uses them, and an update never changes them)."""
        if record is None:
            return NO_GPU
        use, facts, _ = self.running_pod_use(dict(record), context)
        return use if applies(quota, facts) else NO_GPU

    def namespace_use(self, namespace: str, quotas: list, context: Context) -> dict[str, GpuUse]:
        """What the namespace's pods hold per quota, as an admission's sum counts them (claims made
        ahead once each): the budget figures the server exports (adapters/kube/budget_watch.py)."""
        return self._namespace_usage(namespace, quotas, context)[0]

    def _mark(self, namespace: str) -> ViewMark | None:
        read_through = self.view.pods_read_through()
        if not read_through:
            return None  # a view that cannot say how far it has read settles nothing
        return ViewMark(
            read_through, lambda uid: self.view.pod_first_seen(namespace, uid), self._gone(namespace)
        )

    def _gone(self, namespace: str) -> Callable[[str], bool]:
        """Whether this view saw a reservation's pod deleted or finished (an update's key: its pod)."""
        pod_gone = getattr(self.view, "pod_gone", None)
        if pod_gone is None:
            return lambda key: False
        return lambda key: pod_gone(namespace, key.partition(UPDATE_KEY)[0])

    def _namespace_usage(
        self, namespace: str, quotas: list, context: Context, read_now: dict[str, GpuUse] | None = None
    ):
        """(usage per quota, the records counted by UID, claims charged per quota) of the namespace's
        running GPU pods, from one snapshot of the view: a pod the view counts must also be the pod
        whose reservation is skipped, or a pod that lands between two reads would be counted nowhere.
        Worked out again only when the namespace's pods, its quotas or the context changed; when pods
        were only added (a burst), only the new ones are summed onto the last result, found in the
        view's journal without walking the namespace's other pods, so a burst of n pods costs n
        additions, not n squared (issue 37: one replica's latency grew with the namespace). A pod
        changed in place (bound, started, an update that set its activeDeadlineSeconds or its
        GPU-share annotations) or gone is taken out of each quota it was summed into, by the charge
        and facts of its old record, and put back as it is now; one holding claims made ahead, or a
        view that does not remember that far, makes the sum worked out again (unchanged pods come
        from memory)."""
        version, quotas_key = self.view.pods_version(namespace), repr(quotas)
        dra = self._dra_version()
        last = self._by_namespace.get(namespace)
        if last is not None and (
            last.quotas_key != quotas_key or last.context is not context or last.dra != dra or dra is None
        ):
            last = None  # other rules, or other classes and slices: the last sum says nothing
        if last is not None and last.pods_version == version:
            return self._with_shared_claims(namespace, last, context, read_now), last.records, last.claims
        added = self._added_since(namespace, last, context) if last is not None else None
        if last is not None and added is not None:
            # The view's journal names the pods changed since the last sum: only they are read, so a
            # review in a burst walks none of the namespace's other pods.
            version, arrived, gone = added
            by_uid = {uid: r for uid, r in last.records.items() if uid not in gone} | arrived
            new = list(arrived.values())
        else:
            snapshot = self.view.pods_in(namespace)
            by_uid = {str((p.get("metadata") or {}).get("uid")): p for p in snapshot}
            if last is not None and any(by_uid.get(uid) is not r for uid, r in last.records.items()):
                last = None  # a pod changed or left: summed afresh, never subtracted
            new = [p for uid, p in by_uid.items() if uid not in last.records] if last else snapshot
        if last is not None:
            used = dict(last.used)
            claims = {name: set(charged) for name, charged in last.claims.items()}
            as_read = dict(last.as_read)
            for old_use, old_facts in gone.values() if added is not None else ():
                for quota in quotas:  # exactly what was added for it: the old record's charge
                    if applies(quota, old_facts):
                        used[quota.name] = used[quota.name].above(old_use)
        else:
            used, new = {q.name: NO_GPU for q in quotas}, snapshot
            claims = {q.name: set() for q in quotas}
            as_read = {}
        for other in new:
            other_use, other_facts, other_claims = self.running_pod_use(other, context)
            as_read.update(other_claims)
            for quota in quotas:
                if applies(quota, other_facts):
                    used[quota.name] = used[quota.name] + other_use
                    claims[quota.name] |= other_claims.keys()  # a claim shared by pods: charged once
        if len(self._usage) > 4 * len(by_uid) + 1000:
            self._usage.clear()  # pods come and go; keep the memo about the size of what runs
        frozen = {name: frozenset(charged) for name, charged in claims.items()}
        summed = _NamespaceSum(version, quotas_key, context, used, by_uid, frozen, dra, as_read)
        self._by_namespace[namespace] = summed
        return self._with_shared_claims(namespace, summed, context, read_now), by_uid, frozen

    def _added_since(
        self, namespace: str, last: "_NamespaceSum", context: Context
    ) -> tuple[int, dict[str, Any], dict[str, tuple[GpuUse, Any]]] | None:
        """(the namespace's pods version, the pods added or changed since `last` by UID, and the
        charge and facts each changed or departed pod was summed with) when the view can say what
        changed since (its journal); None: read them all. A pod bound, started or finished in a burst
        is taken out by its old charge and put back by its new one, never by walking the namespace;
        one with claims made ahead is not (a claim shared by pods is charged once: only a walk can
        say whether another pod still holds it)."""
        changed_since = getattr(self.view, "pods_changed_since", None)
        found = changed_since(namespace, last.pods_version) if changed_since is not None else None
        if found is None:
            return None
        version, changed = found
        arrived: dict[str, Any] = {}
        gone: dict[str, tuple[GpuUse, Any]] = {}
        for uid, record in changed.items():
            held = last.records.get(uid)
            if record is held:
                continue  # the same record, or a pod that came and went between the two sums
            if held is not None:
                old_use, old_facts, old_claims = self.running_pod_use(held, context)
                if old_claims:
                    return None
                gone[uid] = (old_use, old_facts)
            if record is not None:
                arrived[uid] = record
        return version, arrived, gone

    def _with_shared_claims(
        self,
        namespace: str,
        summed: "_NamespaceSum",
        context: Context,
        read_now: dict[str, GpuUse] | None = None,
    ) -> dict[str, GpuUse]:
        """The sum's usage per quota with each claim made ahead charged once, as it is now: its owner
        may delete it and make it again, larger, under the same name while the pods naming it wait,
        so it is read again for every decision (the sum keeps only which quotas each is charged to).
        `read_now`: those the pod being decided names, read for it a moment ago."""
        now = dict(read_now or {})
        names = set().union(*summed.claims.values()) - now.keys()
        if names:
            now.update(self._read_shared(namespace, sorted(names), context))
        return {
            quota: use
            + sum((now.get(n, summed.as_read.get(n, NO_GPU)) for n in summed.claims[quota]), NO_GPU)
            for quota, use in summed.used.items()
        }

    def _read_shared(self, namespace: str, names: list[str], context: Context) -> dict[str, GpuUse]:
        if self.templates is None:
            return {}  # no cluster to read them from: as the pods' own reading found them
        holder = {
            "metadata": {"name": "claims made ahead", "namespace": namespace},
            "spec": {
                "resourceClaims": [{"name": n, "resourceClaimName": n} for n in names],
                "containers": [],
            },
        }
        demand = read_pod_demand(read_pod(holder), namespace, context, self.templates)
        if demand.claims.uncountable:
            raise RunningPodUncountable(
                f"what the claims made ahead hold ({'; '.join(demand.claims.uncountable)})"
            )
        return demand.claims.shared()

    def _dra_version(self) -> object:
        """The watch-fed view's version of DeviceClasses and ResourceSlices: () for a view that watches
        none, None until it has listed them (then nothing a pod's claims charge is remembered)."""
        version = getattr(self.view, "dra_version", None)
        return version() if version is not None else ()

    def running_pod_use(self, other: dict, context: Context):
        """(GpuUse, PodFacts, claims made ahead → GpuUse) of a running pod, as its namespace's sum adds
        it; read once per context, per version of the pod the view holds (an update may set its
        activeDeadlineSeconds or change its GPU-share annotations; the cluster names the claims it
        made for a pending pod in its status, and then the pod is charged what they hold, not its
        templates) and per version of the classes and slices its claims are read with."""
        if context is not self._usage_context:
            self._usage.clear()
            self._usage_context = context
        key = str(other["metadata"].get("uid"))
        dra = self._dra_version()
        found = self._usage.get(key)
        if found is None or dra is None or found[2] != dra or not (found[0] is other or found[0] == other):
            namespace = str(other["metadata"].get("namespace"))
            demand = read_pod_demand(read_pod(other), namespace, context, self.templates)
            if demand.claims.uncountable:  # never remembered: the next read may succeed
                name = other["metadata"].get("name")
                raise RunningPodUncountable(f"what pod {name} ({'; '.join(demand.claims.uncountable)}) holds")
            use = pod_use(demand, context.target, context.dialects.catalogue, shared_claims=False)
            shared = demand.claims.shared()
            found = (other, (use, pod_facts(other), shared), dra)
            self._usage[key] = found
        return found[1]


@dataclass(frozen=True)
class _Room:
    """What an allotment is judged on: the namespace, what a pod drawing from it must have (the quotas as
    read, limits included, and its use), the quotas and this view's usage of them."""

    namespace: str
    tag: tuple[str, GpuUse]
    quotas: list
    used: dict[str, GpuUse]
    whole_gpu: str

    def decide(self, needed: GpuUse):
        """Room for `needed` beside the pods and every reservation counted (an allotment is written only
        where that much fits, far more than it holds)."""

        def decide(reservations: list[Reservation]) -> str | None:
            for quota in self.quotas:
                reserved = sum((r.usage for r in reservations if quota.name in r.quotas), NO_GPU)
                if exceeded(quota, needed, self.used[quota.name] + reserved, self.whole_gpu):
                    return "no room for an allotment"
            return None

        return decide


def _left(deadline: float) -> float:
    return max(deadline - time.monotonic(), 0.0)


class RunningPodUncountable(Exception):
    """A pod the view counts has claims gpuport cannot count now: the namespace's usage is unknown."""


@dataclass(frozen=True)
class _Update:
    """A pod update's charges: per quota whose charge may rise, the pod's own use there after it
    (whole where it newly falls under the quota, else the larger of before and after), the quotas it
    newly falls under (its claims made ahead are charged there too), and the pod after it, digested."""

    charge: dict[str, GpuUse]
    entered: frozenset[str]
    landing: str


def _landing_mark(pod: Mapping[str, Any]) -> str:
    """The pod as a view will hold it once this version lands, digested ("" where no view holds it)."""
    record = compact_pod(dict(pod))
    if record is None:
        return ""
    held = {k: v for k, v in record.items() if k in ("metadata", "spec")}
    text = json.dumps(held, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _settled_in(records: Mapping[str, Any], gone: Callable[[str], bool]) -> Callable[[str], bool]:
    """Whether the view that holds `records` counts a reservation's pod already: a create's once it
    holds the pod; an update's once it holds the pod as the update left it; either once it saw the pod
    deleted or finished (it holds nothing then, and its place is free at once: issue 49)."""

    def settled(key: str) -> bool:
        if key in records or gone(key):
            return True
        uid, sep, landing = key.partition(UPDATE_KEY)
        record = records.get(uid) if sep else None
        return record is not None and bool(landing) and _landing_mark(record) == landing

    return settled


@dataclass(frozen=True)
class _NamespaceSum:
    """A namespace's usage per quota and the pods counted in it, and what it was summed under: the
    view's version of the namespace's pods, its quotas and the context (held, so its identity cannot
    be reused by a later one)."""

    pods_version: int
    quotas_key: str
    context: Context
    used: dict[str, GpuUse]  # the claims made ahead left out: they are read again for each decision
    records: dict[str, Any]  # the pods counted, by UID, as the view held them
    claims: dict[str, frozenset[str]]  # per quota, the claims made ahead already charged to it
    dra: object  # the view's version of DeviceClasses and ResourceSlices
    as_read: dict[str, GpuUse]  # each claim made ahead, as the pods' own reading charged it


def _loading(request: AdmissionRequest) -> Decision:
    log.warning(
        "GPU quota not checked for %s/%s: cluster view still loading", request.namespace, request.name
    )
    return deny(
        "quota-view-loading",
        f"gpuport is still loading its view of the cluster and cannot check the GPU quota of "
        f"{request.namespace} yet; retry shortly",
    )
