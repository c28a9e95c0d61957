"""The worker's memo of recent pod-create decisions (core.deciding.remembered.Memo): bounded, thread-safe, and
emptied whenever the context changes (a cloud-map reload or a node change builds a new one). Which pods
an entry answers is the core's to say (core.deciding.remembered): an entry that answers only its own
containers' names is kept under its key and those names, so each such workload keeps its own."""

import threading
from collections import OrderedDict

from webhook.adapters.http import metrics
from webhook.core.asks.demand import PodDemand
from webhook.core.deciding.context import Context
from webhook.core.deciding.decision import Decision
from webhook.core.deciding.remembered import Names, Remembered, answer_for, named_key

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
        self._entries: OrderedDict[bytes, Remembered] = OrderedDict()

    def get(self, key: bytes, context: Context, names: Names) -> tuple[PodDemand | None, Decision] | None:
        served = None
        with self._lock:
            if context is self._context:
                entry = self._entries.get(key)
                served = answer_for(entry, names) if entry is not None else None
                if served is None:
                    key = named_key(key, names)
                    entry = self._entries.get(key)
                    served = answer_for(entry, names) if entry is not None else None
                if served is not None:
                    self._entries.move_to_end(key)
        if self._counted:
            (_HITS if served is not None else _MISSES).inc()
        return served

    def put(self, key: bytes, context: Context, value: Remembered) -> None:
        if not value.portable:
            key = named_key(key, value.names)
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
