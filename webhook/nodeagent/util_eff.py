"""Effective utilisation Util_eff = Σ used ÷ Σ capacity, from the devices the agent measured (pure).

A device is a whole GPU or a MIG instance, as `measure.measure_devices` reports it; a MIG-enabled GPU is
represented by its instances only, so nothing is counted twice. Compute is NVML's utilisation percent
(null where NVML does not answer, as on MIG); memory is MiB used and total. A figure NVML did not give
is left out of both sides of a ratio: it is never read as 0.
"""

from collections.abc import Iterable, Mapping
from typing import Any

DEFAULT_MEMORY_FILL = 0.9
Device = Mapping[str, Any]


def parse_memory_fill(text: str | float) -> float:
    """κ, the fill past which a shared GPU's memory counts as full: a number in (0, 1]."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = float("nan")
    if not 0 < value <= 1:  # also refuses NaN
        raise ValueError(
            f"GPUPORT_SHARED_MEMORY_FILL must be a number greater than 0 and at most 1 (a fraction of a "
            f"GPU's memory, e.g. 0.9), got {text!r}; set it to the cloud map's policy.sharing.memory_fill"
        )
    return value


def _memory(devices: Iterable[Device]) -> float | None:
    known = [d for d in devices if d["memory_used_mib"] is not None and d["memory_total_mib"]]
    if not known:
        return None
    return sum(d["memory_used_mib"] for d in known) / sum(d["memory_total_mib"] for d in known)


def _compute(devices: Iterable[Device]) -> float | None:
    answered = [d["compute_percent"] for d in devices if d["compute_percent"] is not None]
    return sum(answered) / len(answered) / 100 if answered else None


def gpu_util_eff(devices: Iterable[Device]) -> dict[int, dict[str, float | None]]:
    """Per GPU index: compute (its utilisation ÷ 100) and memory (Σ used ÷ Σ total over the GPU, or over
    its MIG instances)."""
    by_gpu: dict[int, list[Device]] = {}
    for device in devices:
        by_gpu.setdefault(device["index"], []).append(device)
    return {index: {"compute": _compute(d), "memory": _memory(d)} for index, d in sorted(by_gpu.items())}


def node_util_eff(devices: Iterable[Device]) -> dict[str, float | None]:
    """Compute: the mean over GPUs that answered; memory: Σ used MiB ÷ Σ total MiB over every device."""
    devices = list(devices)
    per_gpu = [g["compute"] for g in gpu_util_eff(devices).values() if g["compute"] is not None]
    return {
        "compute": sum(per_gpu) / len(per_gpu) if per_gpu else None,
        "memory": _memory(devices),
    }


def shared_memory_full(devices: Iterable[Device], memory_fill: float) -> bool:
    """True when every device a share could land on (a whole GPU without MIG) has used ≥ κ × total;
    false otherwise, when one of them did not say, or when there is no such device."""
    shareable = [d for d in devices if d["mig_profile"] is None]
    return bool(shareable) and all(
        d["memory_used_mib"] is not None
        and d["memory_total_mib"] is not None
        and d["memory_used_mib"] >= memory_fill * d["memory_total_mib"]
        for d in shareable
    )


def pod_memory_mib(devices: Iterable[Device]) -> dict[str, int]:
    """GPU memory per pod UID: Σ of its processes' memory over every device. A process whose memory NVML
    did not report is left out of the sum (not counted as 0); a pod none of whose processes reported
    memory has no sum."""
    sums: dict[str, int] = {}
    for device in devices:
        for process in device["processes"]:
            if process["pod_uid"] is not None and process["memory_mib"] is not None:
                sums[process["pod_uid"]] = sums.get(process["pod_uid"], 0) + process["memory_mib"]
    return sums


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def usage_summary(devices: list[dict[str, Any]], memory_fill: float = DEFAULT_MEMORY_FILL) -> dict[str, Any]:
    """The capability record's "usage" entry."""
    node = node_util_eff(devices)
    return {
        "memory_fill_limit": _rounded(memory_fill),
        "devices": devices,
        "util_eff": {"compute": _rounded(node["compute"]), "memory": _rounded(node["memory"])},
        "shared_memory_full": shared_memory_full(devices, memory_fill),
    }
