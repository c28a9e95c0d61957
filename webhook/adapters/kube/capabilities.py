"""What gpuport goes without: a capability the RBAC or the cluster does not offer (DeviceClasses on a
cluster without DRA, a watch the ServiceAccount may not make, Events it may not create).

Such a refusal repeats on every retry, and said every time it buries the log (a Forbidden list of
DeviceClasses every 2 s on every install without DRA). So each capability is logged once when it is
first missed, and again only when its reason changes or it comes back; what is missing now is shown in
/readyz's body; and the callers that poll ask `due` before trying again, on a back-off that doubles up
to `longest` seconds.
"""

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("gpuport.capabilities")


@dataclass
class _Missing:
    reason: str
    delay: float  # seconds until the next look
    next_look: float


def reason_of(exc: BaseException) -> str:
    """An API failure in words: `403 Forbidden`, or the exception's kind where there is no status."""
    status, reason = getattr(exc, "status", None), getattr(exc, "reason", None)
    if status is not None:
        return f"{status} {reason or ''}".strip()
    return str(reason or type(exc).__name__)


def is_refusal(exc: BaseException) -> bool:
    """The API server's lasting no: not allowed (401, 403) or not served (404, 405). Retrying gives the
    same answer until someone changes the RBAC or the cluster."""
    return getattr(exc, "status", None) in (401, 403, 404, 405)


class Capabilities:
    def __init__(
        self, clock: Callable[[], float] = time.monotonic, first: float = 2.0, longest: float = 300.0
    ):
        self.clock = clock
        self.first = first
        self.longest = longest
        self._missing: dict[str, _Missing] = {}
        self._lock = threading.Lock()

    def missing(self, name: str, reason: str) -> None:
        """`name` could not be used, for `reason`: logged when new or changed, looked at again later."""
        with self._lock:
            before = self._missing.get(name)
            delay = self.first if before is None else min(before.delay * 2, self.longest)
            self._missing[name] = _Missing(reason, delay, self.clock() + delay)
        if before is None or before.reason != reason:
            log.warning("%s unavailable: %s; gpuport goes on without it and looks again later", name, reason)

    def available(self, name: str) -> None:
        if name not in self._missing:  # the common case, read without the lock (called per watch event)
            return
        with self._lock:
            before = self._missing.pop(name, None)
        if before is not None:
            log.info("%s available again", name)

    def due(self, name: str) -> bool:
        """Whether to try `name` now: always while it works, else once its back-off has passed."""
        with self._lock:
            missing = self._missing.get(name)
        return missing is None or self.clock() >= missing.next_look

    def summary(self) -> str:
        """What is missing now and why, for /readyz ("" when nothing is)."""
        with self._lock:
            said = sorted((name, m.reason) for name, m in self._missing.items())
        return "; ".join(f"{name} unavailable: {reason}" for name, reason in said)
