"""The worker's memo of recent pod-create decisions (core.deciding.pipeline.Memo): bounded, thread-safe, and
emptied whenever the context changes (a cloud-map reload or a node change builds a new one)."""

import threading
from collections import OrderedDict

from webhook.adapters.http import metrics
from webhook.core.asks.demand import PodDemand
from webhook.core.deciding.context import Context
from webhook.core.deciding.decision import Decision

Entry = tuple[PodDemand | None, Decision]  # None: the checks refused the pod

# The two children, looked up once: labels() takes a lock and a dict lookup on every call.
_HITS = metrics.DECISION_MEMO.labels("hit")
_MISSES = metrics.DECISION_MEMO.labels("miss")


class DecisionMemo:
    def __init__(self, size: int = 1024, counted: bool = True):
        """`counted`: its lookups go into gpuport_decision_memo_total (/mutate's memo; /validate's is not,
        the metric counting pod creates)."""
        self.size = size
        self._counted = counted
        self._lock = threading.Lock()
        self._context: Context | None = None
        self._entries: OrderedDict[bytes, Entry] = OrderedDict()

    def get(self, key: bytes, context: Context) -> Entry | None:
        with self._lock:
            entry = self._entries.get(key) if context is self._context else None
            if entry is not None:
                self._entries.move_to_end(key)
        if self._counted:
            (_HITS if entry is not None else _MISSES).inc()
        return entry

    def put(self, key: bytes, context: Context, value: Entry) -> None:
        with self._lock:
            if context is not self._context:
                # Identity, not equality: a context is replaced whole, never edited.
                self._entries.clear()
                self._context = context
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._context = None

    def __len__(self) -> int:
        return len(self._entries)
