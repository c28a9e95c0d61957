"""`gpuport node-agent`: gather, publish on the Node when something changed, repeat on a period and
on critical XID events. On a node without a GPU or driver it says so once and idles. Each record also
carries the GPUs' measured usage ("usage"), which the agent serves as Prometheus metrics too."""

import contextlib
import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from webhook.core.vocabulary.catalogue import Catalogue
from webhook.core.vocabulary.topology import CAPABILITY_ANNOTATION, USAGE_PEAKS_ANNOTATION
from webhook.nodeagent.cgroup import pod_uid_reader
from webhook.nodeagent.gather import gather, nvml_text
from webhook.nodeagent.labels import desired_metadata
from webhook.nodeagent.measure import measure_devices
from webhook.nodeagent.metrics import DEFAULT_METRICS_PORT, serve_metrics, usage_registry
from webhook.nodeagent.peaks import add_sample, empty, merge, pod_samples, read_back
from webhook.nodeagent.util_eff import DEFAULT_MEMORY_FILL, parse_memory_fill, usage_summary

log = logging.getLogger("gpuport.node-agent")

# How often at most the Node is patched when only the measured figures changed (Prometheus scrapes the
# live ones from /metrics; `gpuport usage` reads these).
USAGE_EVERY = 300.0

# The device plugin's rule: every critical XID marks a GPU unhealthy except these, which applications cause.
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 109})


def read_cpulist(numa_node: int) -> str | None:
    try:
        return Path(f"/sys/devices/system/node/node{numa_node}/cpulist").read_text().strip()
    except OSError:
        return None


class NodeAgent:
    def __init__(
        self,
        nvml,
        catalogue: Catalogue,
        core_api,
        node_name: str,
        interval: float = 60.0,
        sleep: Callable[[float], None] = time.sleep,
        memory_fill: float = DEFAULT_MEMORY_FILL,
        pod_of: Callable[[int], str | None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ):
        self.nvml = nvml
        self.catalogue = catalogue
        self.core_api = core_api
        self.node_name = node_name
        self.interval = interval
        self.sleep = sleep
        self.unhealthy: dict[int, str] = {}
        self.memory_fill = parse_memory_fill(memory_fill)
        # pid → pod UID; None unless the agent sees the host's PIDs (opt-in: hostPID + GPUPORT_HOST_PID).
        self.pod_of = pod_of
        self.last_record: dict[str, Any] | None = None  # what /metrics shows
        self.clock = clock
        self._written_at: float | None = None  # when the Node was last patched
        # Each pod's rolling peaks (peaks.py), joined at the first publish with what the Node kept from
        # this agent's previous run; days are calendar days, so this clock is the wall clock.
        self.wall_clock = wall_clock
        self.peaks: dict[str, Any] = empty()
        self._peaks_read_back = False
        self._sampled_at: float | None = None

    def record(self) -> dict[str, Any]:
        record = gather(self.nvml, self.catalogue, read_cpulist, self.unhealthy)
        if record["gpus"]:
            try:
                devices = measure_devices(self.nvml, record["gpus"], self.pod_of)
            except Exception:  # the figures never cost the node its labels, health and annotation
                log.exception("GPU usage not measured this period; publishing the rest")
            else:
                record["usage"] = usage_summary(devices, self.memory_fill)
                self._sample_peaks(devices)
        self.last_record = record
        return record

    def _sample_peaks(self, devices: list[dict[str, Any]]) -> None:
        now = self.wall_clock()
        # A sample stands for the time since the previous one, at most a period: an early wake-up
        # (a critical XID) never counts a period twice.
        since = self.interval if self._sampled_at is None else min(now - self._sampled_at, self.interval)
        self._sampled_at = now
        self.peaks = add_sample(self.peaks, now, since, pod_samples(devices))

    def configure(self, environ: Mapping[str, str] = os.environ, metrics: bool = True) -> None:
        """The usage options from the environment: GPUPORT_SHARED_MEMORY_FILL (κ, default 0.9),
        GPUPORT_HOST_PID ("true" where the pod has hostPID: attribute processes to pods) and
        GPUPORT_METRICS_PORT (default 9410, 0 to serve none). Exits with a clear message on a bad value."""
        try:
            self.memory_fill = parse_memory_fill(
                environ.get("GPUPORT_SHARED_MEMORY_FILL", DEFAULT_MEMORY_FILL)
            )
            host_pid = environ.get("GPUPORT_HOST_PID", "false").strip().lower()
            if host_pid not in ("true", "false"):
                raise ValueError(f"GPUPORT_HOST_PID must be true or false, got {host_pid!r}")
            self.pod_of = pod_uid_reader() if host_pid == "true" else None
            port = environ.get("GPUPORT_METRICS_PORT", str(DEFAULT_METRICS_PORT))
            if not port.isdigit() or int(port) > 65535:
                raise ValueError(f"GPUPORT_METRICS_PORT must be a port number (0: no metrics), got {port!r}")
        except ValueError as exc:
            raise SystemExit(f"gpuport node-agent: {exc}") from None
        if metrics and int(port):
            serve_metrics(usage_registry(self.node_name, lambda: self.last_record), int(port))
            log.info("serving usage metrics on :%s/metrics", port)

    def publish_once(self, record: dict[str, Any] | None = None) -> dict[str, Any]:
        """Patch the Node with `record` (gathered now when not given) if anything changed; returns the
        patch sent (empty if none)."""
        record = record if record is not None else self.record()
        node = self.core_api.read_node(self.node_name)
        labels, annotations = node.metadata.labels or {}, node.metadata.annotations or {}
        if not self._peaks_read_back:
            self.peaks = merge(read_back(annotations.get(USAGE_PEAKS_ANNOTATION)), self.peaks)
            self._peaks_read_back = True
        patch = desired_metadata(record, labels, annotations)
        if patch and self._figures_only(record, labels, annotations, patch) and not self._figures_due():
            return {}  # /metrics has the live figures; the Node gets them at most every USAGE_EVERY
        patch = self._with_peaks(patch, annotations)
        if patch:
            self.core_api.patch_node(self.node_name, patch)
            self._written_at = self.clock()
            log.info("node %s updated: %s", self.node_name, sorted(patch["metadata"].get("labels", {})))
        return patch

    def _figures_only(
        self,
        record: Mapping[str, Any],
        labels: Mapping[str, str],
        annotations: Mapping[str, str],
        patch: Mapping[str, Any],
    ) -> bool:
        """Whether the patch would change nothing but the measured figures (no label, no fact): the
        figures change every period, and writing every Node every minute is load on the API server
        that no decision needs (the webhook reads the shared-memory-full label, which is always
        written when it changes)."""
        if "labels" in patch["metadata"]:
            return False
        try:
            published = json.loads(annotations.get(CAPABILITY_ANNOTATION, ""))
        except ValueError:
            return False
        if not isinstance(published, dict):
            return False
        same = {k: v for k, v in record.items() if k != "usage"}
        if "usage" in published:
            same["usage"] = published["usage"]
        return not desired_metadata(same, labels, annotations)

    def _with_peaks(self, patch: dict[str, Any], annotations: Mapping[str, str]) -> dict[str, Any]:
        """The patch with the peaks annotation added when it changed, and the Node is written anyway or
        the figures are due (peaks change every sample: they go at the figures' pace)."""
        text = json.dumps(self.peaks, sort_keys=True, separators=(",", ":"))
        if not self.peaks["pods"] or annotations.get(USAGE_PEAKS_ANNOTATION) == text:
            return patch
        if not patch and not self._figures_due():
            return patch
        metadata = dict(patch.get("metadata", {}))
        metadata["annotations"] = {**metadata.get("annotations", {}), USAGE_PEAKS_ANNOTATION: text}
        return {"metadata": metadata}

    def _figures_due(self) -> bool:
        return self._written_at is None or self.clock() - self._written_at >= USAGE_EVERY

    def run_forever(self) -> None:
        while True:
            try:
                record = self.record()
                if not record["gpus"]:
                    log.warning("%s; publishing gpu-present=false and idling", record.get("error", "no GPU"))
                self.publish_once(record)  # one measurement a period
            except Exception:  # the API server may be briefly away: try again next period
                log.exception("publishing the node's GPU capability failed; retrying in %ss", self.interval)
            self.wait_for_xid_or(self.interval)

    def wait_for_xid_or(self, seconds: float) -> None:
        """Sleep until the period ends, or return early when a critical XID marks a GPU unhealthy."""
        nvml = self.nvml
        try:
            nvml.nvmlInit()
        except nvml.NVMLError:
            self.sleep(seconds)
            return
        try:
            events = nvml.nvmlEventSetCreate()
            # Each GPU's UUID, read while all answer: after a GPU falls off the bus, only the event's
            # own device need be asked who it is.
            uuids: dict[str, int] = {}
            for index in range(nvml.nvmlDeviceGetCount()):
                # Some GPUs cannot report events; they are still polled every period.
                with contextlib.suppress(nvml.NVMLError):
                    handle = nvml.nvmlDeviceGetHandleByIndex(index)
                    uuids[nvml_text(nvml.nvmlDeviceGetUUID(handle))] = index
                    nvml.nvmlDeviceRegisterEvents(handle, nvml.nvmlEventTypeXidCriticalError, events)
            deadline = time.monotonic() + seconds
            while (left := deadline - time.monotonic()) > 0:
                try:
                    event = nvml.nvmlEventSetWait(events, int(left * 1000))
                except nvml.NVMLError_Timeout:
                    return
                xid = event.eventData
                if xid in APPLICATION_XIDS:
                    continue
                indexes = self._indexes_of(event.device, uuids)
                for index in indexes:
                    self.unhealthy[index] = f"critical XID {xid}"
                log.error("GPU %s reported critical XID %s: marked unhealthy", indexes, xid)
                return
        except nvml.NVMLError as exc:
            # The device plugin marks every GPU unhealthy when event waiting fails; we only log and
            # fall back to polling, since health is also read from ECC and row remapping each period.
            log.warning("XID events unavailable (%s); polling every %ss", exc, seconds)
            self.sleep(seconds)
        finally:
            with contextlib.suppress(nvml.NVMLError):
                nvml.nvmlShutdown()

    def _indexes_of(self, device, uuids: dict[str, int]) -> list[int]:
        """The index of the GPU an event came from, found by UUID: pynvml hands out a new pointer for
        every handle, and pointers compare by identity, so handles never match. An event whose
        device cannot be named marks every GPU, as the device plugin does: a critical XID is never
        dropped."""
        try:
            found = uuids.get(nvml_text(self.nvml.nvmlDeviceGetUUID(device)))
            if found is not None:
                return [found]
        except self.nvml.NVMLError as exc:
            log.warning("the GPU of an XID event could not be named (%s)", exc)
        return list(range(self.nvml.nvmlDeviceGetCount()))


def node_name_from_env() -> str:
    return os.environ.get("NODE_NAME", "")
