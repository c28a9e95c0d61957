"""Which Events the pods gpuport rewrote become, and when each is written: bookkeeping only, no I/O (the
writer, events.py, makes the calls).

An Event is an API write that loads the API server and etcd the pod creates use, so gpuport records
them the way Kubernetes' own recorders do (client-go's EventCorrelator: similar events folded into one
with a count, new ones under a token bucket), per owner rather than per pod:

- The pods of one controller (a ReplicaSet, a Job, a StatefulSet) rewritten alike are one series: one
  Event on the owner, written when its first pod comes, its `count` and `lastTimestamp` brought up to
  date at most every UPDATE_SECONDS while more come. Forgotten once idle for WINDOW_SECONDS (client-go
  aggregates over the same ten minutes); a later pod of that owner starts a new series.
- A pod no controller owns gets its own Event, as before, if its namespace's bucket has a token.
- Every new Event, a series' first write as well as a lone pod's, takes a token from its namespace's
  bucket (BURST, refilled PER_SECOND): a namespace making thousands of Jobs or bare pods at once
  costs the API server BURST Events, then one a second. A series without a token keeps counting and
  waits for one; a lone pod without one goes without its Event (counted, `rate-limited`). Either way
  the pod itself says what changed, in its gpuport.io/rewrites annotation.
- At most MAX_SERIES series and MAX_NAMESPACES buckets are held (the least recently used idle ones go
  first), so memory stays bounded whatever the cluster does.
"""

import hashlib
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

UPDATE_SECONDS = 10.0
WINDOW_SECONDS = 600.0
BURST = 25
PER_SECOND = 1.0
MAX_SERIES = 4096
MAX_NAMESPACES = 4096


@dataclass(frozen=True)
class Involved:
    """The object an Event is about, as its involvedObject names it."""

    api_version: str
    kind: str
    name: str
    uid: str


@dataclass(frozen=True)
class Rewritten:
    """One pod gpuport rewrote, as the admission thread hands it over: read no further than that."""

    namespace: str
    pod: str
    uid: str
    message: str
    owner_references: Any = None  # the pod's metadata.ownerReferences, unread


def controller_of(owner_references: Any) -> Involved | None:
    """The pod's managing controller (the owner reference marked `controller: true`, at most one by the
    API server's rules), or None for a pod no controller owns."""
    if not isinstance(owner_references, list):
        return None
    for ref in owner_references:
        if isinstance(ref, dict) and ref.get("controller") is True:
            values = [ref.get(k) for k in ("apiVersion", "kind", "name", "uid")]
            said = [v for v in values if isinstance(v, str) and v]
            if len(said) == len(values):
                return Involved(*said)
    return None


@dataclass
class Series:
    """The pods of one owner rewritten with one message, written as one Event."""

    namespace: str
    owner: Involved
    message: str
    name: str  # the Event's name
    first_seen: str  # wall-clock time of its first pod, as the Event's firstTimestamp says it
    counted: int = 0  # pods counted in all
    written: int = 0  # of them, in the Event as last written, or given up on (its write refused)
    created: bool = False  # its Event made (by this writer)
    next_try: float = float("-inf")  # monotonic time from which its next write may be tried
    last_seen: float = 0.0  # monotonic time of its last pod

    @property
    def pending(self) -> int:
        return self.counted - self.written


def series_event_name(owner: Involved, message: str, instance: str) -> str:
    """One name per owner, message and writer (each writer updates only the Events it made, as each
    client-go recorder does), within the 253 characters of a DNS subdomain."""
    digest = hashlib.sha256("\0".join((owner.uid, message, instance)).encode()).hexdigest()[:16]
    suffix = f".gpuport-{digest}"
    return owner.name[: 253 - len(suffix)].rstrip(".-") + suffix


class TokenBuckets:
    """One token bucket per namespace: BURST tokens, refilled PER_SECOND; the least recently used
    namespace's bucket is forgotten past MAX_NAMESPACES (it comes back full, as client-go's LRU does)."""

    def __init__(self, burst: int = BURST, per_second: float = PER_SECOND, most: int = MAX_NAMESPACES):
        self.burst = burst
        self.per_second = per_second
        self.most = most
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # tokens, when counted

    def take(self, namespace: str, now: float) -> bool:
        tokens, then = self._buckets.pop(namespace, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - then) * self.per_second)
        granted = tokens >= 1.0
        self._buckets[namespace] = (tokens - 1.0 if granted else tokens, now)
        while len(self._buckets) > self.most:
            self._buckets.popitem(last=False)
        return granted


@dataclass
class SeriesTable:
    """The series being counted, by (namespace, owner uid, message), least recently seen first."""

    instance: str
    most: int = MAX_SERIES
    update_seconds: float = UPDATE_SECONDS
    window_seconds: float = WINDOW_SECONDS
    _series: OrderedDict[tuple[str, str, str], Series] = field(default_factory=OrderedDict)

    def count(self, namespace: str, owner: Involved, message: str, now: float, wall: str) -> Series | None:
        """Count one pod on its series (made if new); None when the table is full of series still
        waiting to be written, and the pod goes uncounted."""
        key = (namespace, owner.uid, message)
        series = self._series.pop(key, None)
        if series is None:
            if len(self._series) >= self.most and not self._forget_one_idle():
                return None
            name = series_event_name(owner, message, self.instance)
            series = Series(namespace, owner, message, name, wall)
        series.counted += 1
        series.last_seen = now
        self._series[key] = series
        return series

    def due(self, now: float) -> Iterator[Series]:
        """The series with pods not yet written whose next write may be tried now (a new one at once)."""
        for series in list(self._series.values()):
            if series.pending and series.next_try <= now:
                yield series

    def written_now(self, series: Series, now: float) -> None:
        """Its Event now says every pod counted (or they are given up on); the next write waits
        update_seconds."""
        series.written = series.counted
        series.next_try = now + self.update_seconds

    def retry_in(self, series: Series, now: float, seconds: float) -> None:
        """Not written (no token, or the API server failed): tried again in `seconds`."""
        series.next_try = now + seconds

    def next_due(self, now: float) -> float | None:
        """Seconds until the next series is due to be written; None when no pod waits."""
        waits = [max(0.0, s.next_try - now) for s in self._series.values() if s.pending]
        return min(waits) if waits else None

    def expire(self, now: float) -> None:
        """Forget the series idle (nothing left to write) for window_seconds."""
        for key, series in list(self._series.items()):
            if not series.pending and now - series.last_seen >= self.window_seconds:
                del self._series[key]

    def _forget_one_idle(self) -> bool:
        for key, series in self._series.items():
            if not series.pending:
                del self._series[key]
                return True
        return False

    def __len__(self) -> int:
        return len(self._series)
