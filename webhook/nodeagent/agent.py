"""`gpuport node-agent`: gather, publish on the Node when something changed, repeat on a period and
on critical XID events. On a node without a GPU or driver it says so once and idles."""

import contextlib
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from webhook.core.vocabulary.catalogue import Catalogue
from webhook.nodeagent.gather import gather, nvml_text
from webhook.nodeagent.labels import desired_metadata

log = logging.getLogger("gpuport.node-agent")

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
    ):
        self.nvml = nvml
        self.catalogue = catalogue
        self.core_api = core_api
        self.node_name = node_name
        self.interval = interval
        self.sleep = sleep
        self.unhealthy: dict[int, str] = {}

    def record(self) -> dict[str, Any]:
        return gather(self.nvml, self.catalogue, read_cpulist, self.unhealthy)

    def publish_once(self) -> dict[str, Any]:
        """Gather and patch the Node if anything changed; returns the patch sent (empty if none)."""
        record = self.record()
        node = self.core_api.read_node(self.node_name)
        patch = desired_metadata(record, node.metadata.labels or {}, node.metadata.annotations or {})
        if patch:
            self.core_api.patch_node(self.node_name, patch)
            log.info("node %s updated: %s", self.node_name, sorted(patch["metadata"].get("labels", {})))
        return patch

    def run_forever(self) -> None:
        while True:
            try:
                record = self.record()
                if not record["gpus"]:
                    log.warning("%s; publishing gpu-present=false and idling", record.get("error", "no GPU"))
                self.publish_once()
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
