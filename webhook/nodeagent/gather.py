"""Read a node's GPUs through NVML into one capability record (plain JSON-able dicts).

Every NVML call may fail on some GPU, driver or host (NotSupported, NoPermission...): each failure is
recorded as "unknown" and the agent goes on. A node without a driver gets a record that says so.
The NVML module is a parameter, so tests drive the real code with recorded machines.
"""

from collections.abc import Callable
from typing import Any

from webhook.core.vocabulary.catalogue import Catalogue
from webhook.core.vocabulary.topology import nvlink_domains

UNKNOWN = None
FAMILIES = {
    (7, 0): "volta",
    (7, 5): "turing",
    (8, 0): "ampere",
    (8, 6): "ampere",
    (8, 9): "ada-lovelace",
    (9, 0): "hopper",
    (10, 0): "blackwell",
    (12, 0): "blackwell",
}


def _call(nvml, fn: Callable, *args) -> Any:
    try:
        return fn(*args)
    except (nvml.NVMLError, getattr(nvml, "NVMLLibraryMismatchError", nvml.NVMLError)):
        # pynvml raises the mismatch (not an NVMLError) when the driver lacks the versioned function it
        # binds, e.g. nvmlDeviceGetComputeRunningProcesses_v3 before R510: unknown, like NotSupported.
        return UNKNOWN


def nvml_text(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


def gather(
    nvml,
    catalogue: Catalogue,
    read_cpulist: Callable[[int], str | None] = lambda node: None,
    unhealthy: dict[int, str] | None = None,
) -> dict[str, Any]:
    """The capability record of this node. `unhealthy` carries devices marked by XID events."""
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        return {
            "gpu_count": 0,
            "healthy_gpu_count": 0,
            "gpus": [],
            "error": f"no NVIDIA driver or GPU: {exc}",
        }
    try:
        return _gather(nvml, catalogue, read_cpulist, unhealthy or {})
    finally:
        _call(nvml, nvml.nvmlShutdown)


def _gather(nvml, catalogue, read_cpulist, unhealthy) -> dict[str, Any]:
    count = _call(nvml, nvml.nvmlDeviceGetCount) or 0
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
    gpus = [
        _gpu(nvml, catalogue, index, handle, unhealthy.get(index)) for index, handle in enumerate(handles)
    ]
    cuda = _call(nvml, nvml.nvmlSystemGetCudaDriverVersion)
    matrix = [
        [_link(nvml, a, b) if i != j else "SELF" for j, b in enumerate(handles)]
        for i, a in enumerate(handles)
    ]
    domains = nvlink_domains(matrix)
    numa: dict[str, dict[str, Any]] = {}
    for gpu in gpus:
        if gpu["numa_node"] is not None:
            entry = numa.setdefault(
                str(gpu["numa_node"]), {"gpus": [], "cpus": read_cpulist(gpu["numa_node"])}
            )
            entry["gpus"].append(gpu["index"])
    return {
        "driver_version": nvml_text(_call(nvml, nvml.nvmlSystemGetDriverVersion)),
        "cuda_driver_version": f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else UNKNOWN,
        "gpu_count": count,
        "healthy_gpu_count": sum(1 for g in gpus if g["health"]["healthy"]),
        "gpus": gpus,
        "topology": matrix,
        "nvlink_domains": domains,
        "nvlink_domain_size": max((len(d) for d in domains), default=0),
        "numa": numa,
        "gpus_per_numa_node": max((len(n["gpus"]) for n in numa.values()), default=UNKNOWN)
        if numa
        else UNKNOWN,
    }


def _gpu(nvml, catalogue: Catalogue, index: int, handle, xid_reason: str | None) -> dict[str, Any]:
    name = nvml_text(_call(nvml, nvml.nvmlDeviceGetName, handle))
    memory = _call(nvml, nvml.nvmlDeviceGetMemoryInfo, handle)
    pci = _call(nvml, nvml.nvmlDeviceGetPciInfo, handle)
    device_id = f"0x{pci.pciDeviceId:08X}" if pci is not None else UNKNOWN
    capability = _call(nvml, nvml.nvmlDeviceGetCudaComputeCapability, handle)
    return {
        "index": index,
        "name": name,
        "model": _model(catalogue, name, device_id),
        "memory_mib": memory.total // (1024 * 1024) if memory is not None else UNKNOWN,
        "uuid": nvml_text(_call(nvml, nvml.nvmlDeviceGetUUID, handle)),
        "pci_bus_id": nvml_text(pci.busId) if pci is not None else UNKNOWN,
        "pci_device_id": device_id,
        "compute_capability": f"{capability[0]}.{capability[1]}" if capability else UNKNOWN,
        "family": FAMILIES.get(tuple(capability)) if capability else UNKNOWN,
        "numa_node": _call(nvml, nvml.nvmlDeviceGetNumaNodeId, handle),
        "health": _health(nvml, handle, xid_reason),
        "mig": _mig(nvml, handle),
    }


def _model(catalogue: Catalogue, name: str | None, device_id: str | None) -> str | None:
    """Catalogue model from the PCI device id (0x233010DE → 0x2330), else from the product name."""
    if device_id:
        short = "0x" + device_id[2:6]
        for model in catalogue.models.values():
            if short in model.pci_ids:
                return model.id
    if name:
        found = catalogue.by_product_name(name.replace(" ", "-"))
        if found:
            return found[0].id
    return UNKNOWN


def _health(nvml, handle, xid_reason: str | None) -> dict[str, Any]:
    reasons = []
    ecc = _call(
        nvml,
        nvml.nvmlDeviceGetTotalEccErrors,
        handle,
        nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
        nvml.NVML_VOLATILE_ECC,
    )
    if ecc:
        reasons.append(f"{ecc} uncorrected ECC errors")
    if _call(nvml, nvml.nvmlDeviceGetRetiredPagesPendingStatus, handle):
        reasons.append("retired pages pending")
    remapped = _call(nvml, nvml.nvmlDeviceGetRemappedRows, handle)
    if remapped is not None and (remapped[2] or remapped[3]):
        reasons.append("row remapping pending" if remapped[2] else "row remapping failed")
    if xid_reason:
        reasons.append(xid_reason)
    return {"healthy": not reasons, "reasons": reasons, "ecc_uncorrected": ecc}


def _mig(nvml, handle) -> dict[str, Any]:
    mode = _call(nvml, nvml.nvmlDeviceGetMigMode, handle)
    if mode is None:
        return {"mode": "unsupported", "profiles": [], "instances": []}
    profiles = []
    for attribute in sorted(
        a for a in dir(nvml) if a.startswith("NVML_GPU_INSTANCE_PROFILE_") and "COUNT" not in a
    ):
        info = _call(nvml, nvml.nvmlDeviceGetGpuInstanceProfileInfo, handle, getattr(nvml, attribute))
        if info is not None and info.instanceCount:
            profiles.append(
                {
                    "id": info.id,
                    "slices": info.sliceCount,
                    "instances": info.instanceCount,
                    "memory_mib": info.memorySizeMB,
                    "multiprocessors": info.multiprocessorCount,
                }
            )
    instances = []
    if mode[0] == nvml.NVML_DEVICE_MIG_ENABLE:
        for i in range(_call(nvml, nvml.nvmlDeviceGetMaxMigDeviceCount, handle) or 0):
            mig = _call(nvml, nvml.nvmlDeviceGetMigDeviceHandleByIndex, handle, i)
            if mig is None:
                continue
            memory = _call(nvml, nvml.nvmlDeviceGetMemoryInfo, mig)
            instances.append(
                {
                    "uuid": nvml_text(_call(nvml, nvml.nvmlDeviceGetUUID, mig)),
                    "gpu_instance_id": _call(nvml, nvml.nvmlDeviceGetGpuInstanceId, mig),
                    "memory_mib": memory.total // (1024 * 1024) if memory is not None else UNKNOWN,
                }
            )
    return {
        "mode": "enabled" if mode[0] == nvml.NVML_DEVICE_MIG_ENABLE else "disabled",
        "pending": "enabled" if mode[1] == nvml.NVML_DEVICE_MIG_ENABLE else "disabled",
        "profiles": sorted(profiles, key=lambda p: p["id"]),
        "instances": instances,
    }


def _link(nvml, a, b) -> str:
    status = _call(nvml, nvml.nvmlDeviceGetP2PStatus, a, b, nvml.NVML_P2P_CAPS_INDEX_NVLINK)
    if status == nvml.NVML_P2P_STATUS_OK:
        return "NVLINK"
    level = _call(nvml, nvml.nvmlDeviceGetTopologyCommonAncestor, a, b)
    if level is None:
        return "UNKNOWN"
    if level <= nvml.NVML_TOPOLOGY_MULTIPLE:
        return "PCIE_SWITCH"
    if level == nvml.NVML_TOPOLOGY_HOSTBRIDGE:
        return "HOST_BRIDGE"
    if level == nvml.NVML_TOPOLOGY_NODE:
        return "NUMA"
    return "SYSTEM"
