"""A recorded NVML at the pynvml function level: the real module's constants and error classes, with
answers taken from a JSON record of a machine. Calls a record does not cover raise NotSupported, as
they do on real hosts.

Usage, where a record has it (per GPU, and per MIG instance): `memory_used_bytes` (nvmlDeviceGetMemoryInfo
.used; a record without it stands for a machine whose usage was not recorded, and reads 0), `utilization`
(nvmlDeviceGetUtilizationRates, only the fields recorded: reading another fails), `processes`
(nvmlDeviceGetComputeRunningProcesses: pid and used_memory_bytes, null where NVML says
NVML_VALUE_NOT_AVAILABLE, which pynvml turns into None). As the real driver does, utilisation is not
supported on a MIG-enabled GPU nor on a MIG device handle, and a MIG-enabled GPU's own handle lists no
processes without the privilege to see all instances (NoPermission: ask each MIG device). A record's
`proc_cgroups` (pid → /proc/<pid>/cgroup text) stands for the host's /proc, read through `read_cgroup`.
`topology_levels` (GPU × GPU: SINGLE, MULTIPLE, HOSTBRIDGE, NODE, SYSTEM) overrides the level derived
from `pcie_switches` and NUMA nodes."""

import json
from pathlib import Path
from types import SimpleNamespace

import pynvml

RECORDS = Path(__file__).parent / "fixtures" / "nvml"


class Handle:
    """A device handle as pynvml gives it: a ctypes pointer, new on every call and equal only to
    itself (ctypes compares pointers by identity), so code that compares handles finds no match here
    either. It knows its GPU (and MIG instance) only for the fake's own lookups."""

    __slots__ = ("gpu", "mig")

    def __init__(self, gpu: int, mig: int | None = None):
        self.gpu = gpu
        self.mig = mig


class FakeNVML:
    def __init__(self, record: dict):
        self.record = record
        self.events: list[tuple[int, int]] = list(record.get("xid_events", []))  # (gpu index, xid)
        for name in dir(pynvml):
            if name.startswith(("NVML_", "NVMLError", "NVMLLibraryMismatchError", "nvmlEventType")):
                setattr(self, name, getattr(pynvml, name))

    @classmethod
    def load(cls, name: str) -> "FakeNVML":
        return cls(json.loads((RECORDS / f"{name}.json").read_text()))

    def _gpu(self, handle):
        if not isinstance(handle, Handle):  # pynvml refuses anything but a device pointer
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return self.record["gpus"][handle.gpu]

    def _instance(self, handle):
        return self._gpu(handle)["mig"]["instances"][handle.mig]

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
        if not 0 <= index < len(self.record["gpus"]):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return Handle(index)

    def nvmlDeviceGetName(self, handle):
        return self._gpu(handle)["name"]

    def _device(self, handle):
        """The record of what the handle names: a GPU, or a MIG instance."""
        return self._instance(handle) if handle.mig is not None else self._gpu(handle)

    def _mig_enabled(self, gpu) -> bool:
        return bool(gpu.get("mig")) and gpu["mig"].get("current") == pynvml.NVML_DEVICE_MIG_ENABLE

    def read_cgroup(self, pid: int) -> str | None:
        """/proc/<pid>/cgroup on the recorded host (None: no such process)."""
        return self.record.get("proc_cgroups", {}).get(str(pid))

    def nvmlDeviceGetMemoryInfo(self, handle):
        self._gpu(handle)  # refuses what is not a device pointer
        device = self._device(handle)
        total, used = device["memory_bytes"], device.get("memory_used_bytes", 0)
        return SimpleNamespace(total=total, used=used, free=total - used)

    def nvmlDeviceGetUtilizationRates(self, handle):
        gpu = self._gpu(handle)
        if handle.mig is not None or self._mig_enabled(gpu):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)  # "not currently supported" on MIG
        return SimpleNamespace(**self._need(gpu, "utilization"))

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        gpu = self._gpu(handle)
        if handle.mig is None and self._mig_enabled(gpu):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NO_PERMISSION)  # aggregate needs privileges
        device = self._device(handle)
        unset = 0xFFFFFFFF  # gpuInstanceId / computeInstanceId outside MIG
        instance = device.get("gpu_instance_id", unset) if handle.mig is not None else unset
        return [
            pynvml.nvmlFriendlyObject(
                {
                    "pid": p["pid"],
                    "usedGpuMemory": p["used_memory_bytes"],  # None: NVML_VALUE_NOT_AVAILABLE
                    "gpuInstanceId": instance,
                    "computeInstanceId": 0 if handle.mig is not None else unset,
                }
            )
            for p in device.get("processes", [])
        ]

    def nvmlDeviceGetAttributes(self, handle):
        self._gpu(handle)
        if handle.mig is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)  # not recorded for whole GPUs
        a = self._need(self._instance(handle), "attributes")
        return SimpleNamespace(
            multiprocessorCount=a["sms"],
            gpuInstanceSliceCount=a["gpu_instance_slices"],
            computeInstanceSliceCount=a["compute_instance_slices"],
            memorySizeMB=a["memory_mb"],
        )

    def nvmlDeviceGetUUID(self, handle):
        self._gpu(handle)  # refuses what is not a device pointer
        if handle.mig is not None:
            return self._instance(handle)["uuid"]
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
        # The most MIG devices the GPU can hold (7 on an A100 or H100: its 1-slice profile's count),
        # not how many exist now: the slots between are NOT_FOUND, as on a real host. NVML answers 0
        # where MIG is not supported or not enabled.
        mig = self._gpu(handle).get("mig")
        if not mig or mig.get("current") != pynvml.NVML_DEVICE_MIG_ENABLE:
            return 0
        return max((p["instances"] for p in mig.get("profiles", [])), default=0)

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle, index):
        if not 0 <= index < len(self._gpu(handle)["mig"].get("instances", [])):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return Handle(handle.gpu, index)

    def nvmlDeviceGetGpuInstanceId(self, handle):
        return self._instance(handle)["gpu_instance_id"]

    def nvmlDeviceGetP2PStatus(self, a, b, capability):
        nvlink = self.record.get("nvlink_groups", [])
        together = any(a.gpu in group and b.gpu in group for group in nvlink)
        return pynvml.NVML_P2P_STATUS_OK if together else pynvml.NVML_P2P_STATUS_NOT_SUPPORTED

    def nvmlDeviceGetTopologyCommonAncestor(self, a, b):
        levels = self.record.get("topology_levels")
        if levels:
            return getattr(pynvml, f"NVML_TOPOLOGY_{levels[a.gpu][b.gpu]}")
        if any(a.gpu in s and b.gpu in s for s in self.record.get("pcie_switches", [])):
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
        critical = pynvml.nvmlEventTypeXidCriticalError
        return SimpleNamespace(device=Handle(index), eventData=xid, eventType=critical)
