"""A recorded NVML at the pynvml function level: the real module's constants and error classes, with
answers taken from a JSON record of a machine. Calls a record does not cover raise NotSupported, as
they do on real hosts."""

import json
from pathlib import Path
from types import SimpleNamespace

import pynvml

RECORDS = Path(__file__).parent / "fixtures" / "nvml"


class FakeNVML:
    def __init__(self, record: dict):
        self.record = record
        self.events: list[tuple[int, int]] = list(record.get("xid_events", []))  # (gpu index, xid)
        for name in dir(pynvml):
            if name.startswith(("NVML_", "NVMLError", "nvmlEventType")):
                setattr(self, name, getattr(pynvml, name))

    @classmethod
    def load(cls, name: str) -> "FakeNVML":
        return cls(json.loads((RECORDS / f"{name}.json").read_text()))

    def _gpu(self, handle):
        return self.record["gpus"][handle]

    def _need(self, gpu, key):
        if gpu.get(key) is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return gpu[key]

    def nvmlInit(self):
        if self.record.get("no_driver"):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    def nvmlShutdown(self):
        pass

    def nvmlSystemGetDriverVersion(self):
        return self.record["driver_version"]

    def nvmlSystemGetCudaDriverVersion(self):
        return self.record["cuda_driver_version"]

    def nvmlDeviceGetCount(self):
        return len(self.record["gpus"])

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetName(self, handle):
        return self._gpu(handle)["name"]

    def nvmlDeviceGetMemoryInfo(self, handle):
        if isinstance(handle, tuple):  # a MIG device
            return SimpleNamespace(total=self._gpu(handle[0])["mig"]["instances"][handle[1]]["memory_bytes"])
        return SimpleNamespace(total=self._gpu(handle)["memory_bytes"])

    def nvmlDeviceGetUUID(self, handle):
        if isinstance(handle, tuple):
            return self._gpu(handle[0])["mig"]["instances"][handle[1]]["uuid"]
        return self._gpu(handle)["uuid"]

    def nvmlDeviceGetPciInfo(self, handle):
        gpu = self._gpu(handle)
        return SimpleNamespace(busId=gpu["bus_id"], pciDeviceId=int(gpu["pci_device_id"], 16))

    def nvmlDeviceGetCudaComputeCapability(self, handle):
        return tuple(self._gpu(handle)["compute_capability"])

    def nvmlDeviceGetNumaNodeId(self, handle):
        return self._need(self._gpu(handle), "numa_node")

    def nvmlDeviceGetTotalEccErrors(self, handle, error_type, counter_type):
        return self._need(self._gpu(handle), "ecc_uncorrected")

    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle):
        return self._need(self._gpu(handle), "retired_pages_pending")

    def nvmlDeviceGetRemappedRows(self, handle):
        return tuple(self._need(self._gpu(handle), "remapped_rows"))

    def nvmlDeviceGetMigMode(self, handle):
        mig = self._need(self._gpu(handle), "mig")
        return [mig["current"], mig["pending"]]

    def nvmlDeviceGetGpuInstanceProfileInfo(self, handle, profile):
        mig = self._need(self._gpu(handle), "mig")
        for entry in mig["profiles"]:
            if getattr(pynvml, entry["constant"]) == profile:
                return SimpleNamespace(
                    id=entry["id"],
                    sliceCount=entry["slices"],
                    instanceCount=entry["instances"],
                    memorySizeMB=entry["memory_mb"],
                    multiprocessorCount=entry["sms"],
                )
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)

    def nvmlDeviceGetMaxMigDeviceCount(self, handle):
        return len(self._gpu(handle)["mig"].get("instances", []))

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle, index):
        return (handle, index)

    def nvmlDeviceGetGpuInstanceId(self, handle):
        return self._gpu(handle[0])["mig"]["instances"][handle[1]]["gpu_instance_id"]

    def nvmlDeviceGetP2PStatus(self, a, b, capability):
        nvlink = self.record.get("nvlink_groups", [])
        together = any(a in group and b in group for group in nvlink)
        return pynvml.NVML_P2P_STATUS_OK if together else pynvml.NVML_P2P_STATUS_NOT_SUPPORTED

    def nvmlDeviceGetTopologyCommonAncestor(self, a, b):
        if any(a in s and b in s for s in self.record.get("pcie_switches", [])):
            return pynvml.NVML_TOPOLOGY_MULTIPLE
        numa_a, numa_b = self._gpu(a).get("numa_node"), self._gpu(b).get("numa_node")
        if numa_a is not None and numa_a == numa_b:
            return pynvml.NVML_TOPOLOGY_NODE
        return pynvml.NVML_TOPOLOGY_SYSTEM

    def nvmlEventSetCreate(self):
        return "events"

    def nvmlDeviceRegisterEvents(self, handle, types, events):
        pass

    def nvmlEventSetWait(self, events, timeout_ms):
        if not self.events:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)
        index, xid = self.events.pop(0)
        return SimpleNamespace(device=index, eventData=xid, eventType=pynvml.nvmlEventTypeXidCriticalError)
