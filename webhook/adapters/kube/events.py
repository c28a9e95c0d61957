"""An Event on every pod gpuport rewrote, saying what changed and why, so `kubectl describe pod` shows it
beside the scheduler's own events (the pods of a Deployment never pass kubectl's warnings to anyone).

Recorded when the pod's validating review comes (the API server has named it by then), off the
admission thread: a queue of bounded size, one writer thread, a deadline on every call. The Event's
name is the pod's name and uid, so a review the API server sends twice records one Event and a pod
made again under the same name (a StatefulSet's) gets its own; what cannot be recorded is logged and
dropped, never retried on the admission path.
"""

import datetime as dt
import logging
import queue
import socket
import threading
from typing import Any

from webhook.adapters.kube.capabilities import Capabilities, is_refusal, reason_of

log = logging.getLogger("gpuport.events")

REASON = "Translated"
_TIMEOUT = (2, 3)


def event_name(pod: str, uid: str) -> str:
    """One name per pod object, within the 253 characters of a DNS subdomain."""
    suffix = f".gpuport-{uid}" if uid else ".gpuport"
    return pod[: 253 - len(suffix)].rstrip(".-") + suffix


class PodEvents:
    def __init__(self, api_client: Any, capacity: int = 1000, capabilities: Capabilities | None = None):
        from kubernetes import client

        # Events the RBAC does not let gpuport create: said once, not for every rewritten pod.
        self.capabilities = capabilities or Capabilities()
        self.core: Any = client.CoreV1Api(api_client)  # a plain dict body, as the API takes it
        self._queue: queue.Queue[tuple[str, str, str, str]] = queue.Queue(maxsize=capacity)
        self._instance = socket.gethostname()
        threading.Thread(target=self._run, name="pod-events", daemon=True).start()

    def rewritten(self, namespace: str, name: str, uid: str, message: str) -> None:
        """Record, later, that gpuport rewrote this pod; never blocks."""
        try:
            self._queue.put_nowait((namespace, name, uid, message))
        except queue.Full:
            log.warning("event for pod %s/%s dropped: the queue is full", namespace, name)

    def _run(self) -> None:
        while True:
            namespace, name, uid, message = self._queue.get()
            try:
                # The answer is not read into a V1Event: nothing uses it, and making one cost the worker's
                # threads (one GIL) more CPU than the admission of the pod the Event is about (bench/
                # e2e_bench.py). A refusal still raises, with its status, before the body is read.
                answer = self.core.create_namespaced_event(
                    namespace,
                    self._event(namespace, name, uid, message),
                    _request_timeout=_TIMEOUT,
                    _preload_content=False,
                )
                answer.read()  # the connection goes back to the pool only once its answer is read
                answer.release_conn()
            except Exception as exc:  # 409: recorded already; anything else is logged and dropped
                if is_refusal(exc):
                    self.capabilities.missing("create events", reason_of(exc))
                elif getattr(exc, "status", None) != 409:
                    log.warning(
                        "event for pod %s/%s not recorded: %s", namespace, name, getattr(exc, "reason", exc)
                    )

    def _event(self, namespace: str, name: str, uid: str, message: str) -> dict[str, Any]:
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": event_name(name, uid), "namespace": namespace},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": name,
                "namespace": namespace,
                "uid": uid,
            },
            "reason": REASON,
            "message": f"gpuport rewrote this pod's GPU asks for this cluster: {message}"[:1024],
            "type": "Normal",
            "source": {"component": "gpuport"},
            "reportingComponent": "gpuport",
            "reportingInstance": self._instance,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
