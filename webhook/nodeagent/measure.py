"""What a node's GPUs are doing now, read through NVML: per whole GPU, and per MIG instance of a MIG-enabled
GPU, the memory used and total, the compute utilisation, and the compute processes with their memory.

NVML facts this relies on (NVML API reference): nvmlDeviceGetMemoryInfo gives .total/.used/.free in bytes,
a MIG device handle's being its instance's; nvmlDeviceGetUtilizationRates gives .gpu/.memory in percent
and is not supported on MIG-enabled GPUs (NotSupported: compute is then null, never 0);
nvmlDeviceGetComputeRunningProcesses lists .pid/.usedGpuMemory (bytes; pynvml gives None where NVML says
NVML_VALUE_NOT_AVAILABLE) and takes a MIG device handle for one instance's processes. PIDs are the host's.
"""

import math
from collections.abc import Callable
from typing import Any

from webhook.nodeagent.gather import _call, nvml_text

_MIB = 1024 * 1024
_GIB = 1024 * _MIB


# The mig_profile of a MIG device whose attributes NVML did not give.
UNNAMED_PROFILE = "unknown"


def mig_profile_name(gi_slices: int, ci_slices: int, memory_mb: int, parent_total_bytes: int) -> str:
    """A MIG device's profile as the NVIDIA device plugin names it (go-nvlib's MigProfile): "3g.40gb", or
    "1c.3g.40gb" when the compute instance holds fewer slices than its GPU instance. The gb figure is the
    instance's share of the GPU's memory rounded up to eighths, times the GPU's memory in whole GiB."""
    fraction = math.ceil(memory_mb * _MIB / parent_total_bytes * 8) / 8
    gb = round(fraction * math.ceil(parent_total_bytes / _GIB))
    return f"{gi_slices}g.{gb}gb" if ci_slices == gi_slices else f"{ci_slices}c.{gi_slices}g.{gb}gb"


def measure_devices(
    nvml, gpus: list[dict[str, Any]], pod_of: Callable[[int], str | None] | None = None
) -> list[dict[str, Any]]:
    """The devices of the record's GPUs as the "usage" entry lists them. `pod_of` maps a host PID to its
    pod UID; None where the agent does not see host PIDs (processes are then listed with pod_uid null)."""
    try:
        nvml.nvmlInit()
    except nvml.NVMLError:
        return []
    try:
        devices: list[dict[str, Any]] = []
        for gpu in gpus:
            handle = _call(nvml, nvml.nvmlDeviceGetHandleByIndex, gpu["index"])
            if handle is None:  # fell off the bus since the record was gathered
                continue
            if gpu["mig"]["mode"] != "enabled":
                devices.append(_device(nvml, handle, gpu, None, pod_of))
                continue
            parent = _call(nvml, nvml.nvmlDeviceGetMemoryInfo, handle)
            parent_total = parent.total if parent is not None else (gpu["memory_mib"] or 0) * _MIB
            seen: set[int] = set()  # GPU instances whose memory a device already reports
            for i in range(_call(nvml, nvml.nvmlDeviceGetMaxMigDeviceCount, handle) or 0):
                mig = _call(nvml, nvml.nvmlDeviceGetMigDeviceHandleByIndex, handle, i)
                if mig is None:
                    continue
                # A MIG device is never a GPU a share lands on, even when its profile cannot be named.
                profile = _profile(nvml, mig, parent_total) or UNNAMED_PROFILE
                device = _device(nvml, mig, gpu, profile, pod_of)
                # A MIG device is a compute instance; compute instances of one GPU instance share its
                # memory, so only the first of them reports it (counted once, not once per slice of SMs).
                instance = _call(nvml, nvml.nvmlDeviceGetGpuInstanceId, mig)
                if instance in seen:
                    device["memory_used_mib"] = device["memory_total_mib"] = None
                elif instance is not None:
                    seen.add(instance)
                devices.append(device)
        return devices
    finally:
        _call(nvml, nvml.nvmlShutdown)


def _profile(nvml, mig, parent_total: int) -> str | None:
    attributes = _call(nvml, nvml.nvmlDeviceGetAttributes, mig)
    if attributes is None or not parent_total:
        return None
    return mig_profile_name(
        attributes.gpuInstanceSliceCount,
        attributes.computeInstanceSliceCount,
        attributes.memorySizeMB,
        parent_total,
    )


def _device(nvml, handle, gpu: dict[str, Any], mig_profile: str | None, pod_of) -> dict[str, Any]:
    memory = _call(nvml, nvml.nvmlDeviceGetMemoryInfo, handle)
    rates = _call(nvml, nvml.nvmlDeviceGetUtilizationRates, handle)
    processes = _call(nvml, nvml.nvmlDeviceGetComputeRunningProcesses, handle) or []
    return {
        "index": gpu["index"],
        "uuid": nvml_text(_call(nvml, nvml.nvmlDeviceGetUUID, handle)),
        "model": gpu["model"],
        "mig_profile": mig_profile,
        "memory_used_mib": memory.used // _MIB if memory is not None else None,
        "memory_total_mib": memory.total // _MIB if memory is not None else None,
        "compute_percent": int(rates.gpu) if rates is not None else None,
        "processes": sorted(
            (
                {
                    "pid": int(p.pid),
                    "memory_mib": p.usedGpuMemory // _MIB if p.usedGpuMemory is not None else None,
                    "pod_uid": pod_of(int(p.pid)) if pod_of is not None else None,
                }
                for p in processes
            ),
            key=lambda p: p["pid"],
        ),
    }
