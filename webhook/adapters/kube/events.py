"""The `Translated` Events saying which pods gpuport rewrote and how, beside the scheduler's own (the pods
of a Deployment never pass kubectl's warnings to anyone). Which Events, and how often, is
event_series.py's: one per owner and rewrite with a count, a lone pod's own under a rate limit.

Recorded when the pod's validating review comes (the API server has named it by then), off the
admission thread: the admission thread only puts the pod on a queue of bounded size (full: dropped
and counted, never waited for); one writer thread takes what has gathered, folds it and writes, with
a deadline on every call. A lone pod's Event is named after the pod and its uid, so a review the API
server sends twice records one Event and a pod made again under the same name (a StatefulSet's) gets
its own. What cannot be recorded is counted, logged and dropped, never retried on the admission path.
"""

import datetime as dt
import logging
import os
import queue
import secrets
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from webhook.adapters.kube.capabilities import Capabilities, is_refusal, reason_of
from webhook.adapters.kube.event_series import (
    PER_SECOND,
    UPDATE_SECONDS,
    Rewritten,
    Series,
    SeriesTable,
    TokenBuckets,
    controller_of,
)

log = logging.getLogger("gpuport.events")

REASON = "Translated"
_TIMEOUT = (2, 3)
# Records that arrive together (a ReplicaSet's pods come within milliseconds) are folded in one pass:
# the writer waits this long after the first before taking what has gathered.
GATHER_SECONDS = 0.25
_MERGE_PATCH = "application/merge-patch+json"
_PREFIX = "gpuport rewrote "

# What became of each pod handed over, and of each write (gpuport_events_total's outcome label).
CREATED, UPDATED, AGGREGATED, RATE_LIMITED, DROPPED, FAILED = (
    "created",
    "updated",
    "aggregated",
    "rate-limited",
    "dropped",
    "failed",
)


def event_name(pod: str, uid: str) -> str:
    """One name per pod object, within the 253 characters of a DNS subdomain."""
    suffix = f".gpuport-{uid}" if uid else ".gpuport"
    return pod[: 253 - len(suffix)].rstrip(".-") + suffix


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class PodEvents:
    def __init__(
        self,
        api_client: Any,
        capacity: int = 1000,
        capabilities: Capabilities | None = None,
        outcome: Callable[[str], None] = lambda _: None,
        start: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ):
        from kubernetes import client

        # Events the RBAC does not let gpuport create: said once, not for every rewritten pod.
        self.capabilities = capabilities or Capabilities()
        self.core: Any = client.CoreV1Api(api_client)  # a plain dict body, as the API takes it
        self.outcome = outcome  # counts each outcome (the server's metric)
        self.clock = clock
        self._queue: queue.Queue[Rewritten] = queue.Queue(maxsize=capacity)
        self._instance = socket.gethostname()
        # Each writer updates only the Events it made (no read-modify-write between replicas): its
        # series are named from this, new for every process.
        self.table = SeriesTable(instance=f"{self._instance}-{os.getpid()}-{secrets.token_hex(4)}")
        self.buckets = TokenBuckets()
        self._dropped_said = float("-inf")
        if start:
            threading.Thread(target=self._run, name="pod-events", daemon=True).start()

    def rewritten(
        self, namespace: str, name: str, uid: str, message: str, owner_references: Any = None
    ) -> None:
        """Record, later, that gpuport rewrote this pod; never blocks."""
        try:
            self._queue.put_nowait(Rewritten(namespace, name, uid, message, owner_references))
        except queue.Full:
            self.outcome(DROPPED)
            now = self.clock()
            if now - self._dropped_said >= 60:  # said once a minute, not once a pod, under a flood
                self._dropped_said = now
                log.warning("event for pod %s/%s dropped: the queue is full", namespace, name)

    def _run(self) -> None:
        while True:
            try:
                self.step(self._gathered())
            except Exception:  # the writer must outlive any one bad record or answer
                log.exception("recording events failed")

    def _gathered(self) -> list[Rewritten]:
        """What came since the last pass, waiting for the first no longer than the next series' write."""
        try:
            first = self._queue.get(timeout=self.table.next_due(self.clock()))
        except queue.Empty:
            return []
        time.sleep(GATHER_SECONDS)
        records = [first]
        while True:
            try:
                records.append(self._queue.get_nowait())
            except queue.Empty:
                return records

    def step(self, records: list[Rewritten]) -> None:
        """Fold `records` into their series, write a lone pod's Event now (if its namespace has a token),
        and every series that is due."""
        now = self.clock()
        for record in records:
            owner = controller_of(record.owner_references)
            if owner is not None:
                counted = self.table.count(record.namespace, owner, record.message, now, _now())
                self.outcome(AGGREGATED if counted is not None else DROPPED)
            elif self.buckets.take(record.namespace, now):
                self._write_pod_event(record)
            else:
                self.outcome(RATE_LIMITED)
        for series in self.table.due(now):
            if series.created:
                self._update(series, now)
            elif self.buckets.take(series.namespace, now):
                self._create(series, now)
            else:
                self.table.retry_in(series, now, 1 / PER_SECOND)
        self.table.expire(now)

    def _write_pod_event(self, record: Rewritten) -> None:
        involved = {"apiVersion": "v1", "kind": "Pod", "name": record.pod, "uid": record.uid}
        message = f"{_PREFIX}this pod's GPU asks for this cluster: {record.message}"
        body = self._event(record.namespace, event_name(record.pod, record.uid), involved, message, 1)
        try:
            self._call(self.core.create_namespaced_event, record.namespace, body)
            self.outcome(CREATED)
        except Exception as exc:  # 409: recorded already (the review came twice)
            if getattr(exc, "status", None) != 409:
                self._failed("create events", exc, f"pod {record.namespace}/{record.pod}")

    def _create(self, series: Series, now: float) -> None:
        owner = series.owner
        involved = {"apiVersion": owner.api_version, "kind": owner.kind, "name": owner.name, "uid": owner.uid}
        message = f"{_PREFIX}the GPU asks of this {owner.kind}'s pods for this cluster: {series.message}"
        body = self._event(series.namespace, series.name, involved, message, series.counted)
        body["firstTimestamp"] = series.first_seen
        try:
            self._call(self.core.create_namespaced_event, series.namespace, body)
        except Exception as exc:
            if getattr(exc, "status", None) != 409:
                self._series_failed("create events", exc, series, now)
                return
            series.created = True  # by this writer, before its series was forgotten: brought up to date
            self._update(series, now)
            return
        series.created = True
        self.table.written_now(series, now)
        self.outcome(CREATED)

    def _update(self, series: Series, now: float) -> None:
        """The series' Event says every pod counted so far: its count and when the last came."""
        patch = {"count": series.counted, "lastTimestamp": _now()}
        try:
            self._call(
                self.core.patch_namespaced_event,
                series.name,
                series.namespace,
                patch,
                _content_type=_MERGE_PATCH,
            )
        except Exception as exc:
            if getattr(exc, "status", None) == 404:  # gone (the API server keeps Events an hour): made
                series.created = False  # anew on the next pass
                self.table.retry_in(series, now, 0.0)
            else:
                self._series_failed("patch events", exc, series, now)
            return
        self.table.written_now(series, now)
        self.outcome(UPDATED)

    def _call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        # The answer is not read into a V1Event: nothing uses it, and making one cost the worker's threads
        # (one GIL) more CPU than the admission of the pod the Event is about (bench/e2e_bench.py). A
        # refusal still raises, with its status, before the body is read.
        answer = method(*args, _request_timeout=_TIMEOUT, _preload_content=False, **kwargs)
        answer.read()  # the connection goes back to the pool only once its answer is read
        answer.release_conn()

    def _series_failed(self, what: str, exc: Exception, series: Series, now: float) -> None:
        self._failed(what, exc, f"{series.owner.kind} {series.namespace}/{series.owner.name}")
        if is_refusal(exc):  # those pods go without: the RBAC gives the same answer till it changes
            self.table.written_now(series, now)
        else:
            self.table.retry_in(series, now, UPDATE_SECONDS)

    def _failed(self, what: str, exc: Exception, about: str) -> None:
        self.outcome(FAILED)
        if is_refusal(exc):
            self.capabilities.missing(what, reason_of(exc))
        else:
            log.warning("event for %s not recorded: %s", about, getattr(exc, "reason", exc))

    def _event(
        self, namespace: str, name: str, involved: dict[str, str], message: str, count: int
    ) -> dict[str, Any]:
        now = _now()
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": {**involved, "namespace": namespace},
            "reason": REASON,
            "message": message[:1024],
            "type": "Normal",
            "source": {"component": "gpuport"},
            "reportingComponent": "gpuport",
            "reportingInstance": self._instance,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": count,
        }
