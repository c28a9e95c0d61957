"""The node agent's measured usage, read back from its `gpuport.io/capability` annotation.

The record's `usage` says, per GPU (or MIG instance), the memory used and held, the compute busy and
the processes with the pods they belong to; per node the agent's effective utilisation (Util_eff),
the memory fill limit κ and whether the shared GPUs are past it. Everything is checked as it is read:
a figure of the wrong kind makes the node's record unusable, said with where it is wrong, never
guessed at. A null figure is unknown (NVML could not read it) and stays None: never 0.
"""

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.core.vocabulary.errors import BadInput


class UsageRecordError(BadInput):
    """The annotation cannot be read as the agent writes it; the message says where and why."""


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    memory_mib: int | None
    pod_uid: str | None


@dataclass(frozen=True)
class MeasuredDevice:
    """One GPU, or one MIG instance of a GPU (then `index` is its GPU's and `mig_profile` is set)."""

    index: int
    uuid: str | None
    model: str | None
    mig_profile: str | None
    memory_used_mib: int | None
    memory_total_mib: int | None
    compute_percent: int | None
    processes: tuple[GpuProcess, ...]


@dataclass(frozen=True)
class MeasuredNode:
    devices: tuple[MeasuredDevice, ...]
    util_eff_compute: float | None
    util_eff_memory: float | None
    memory_fill_limit: float
    shared_memory_full: bool
    # The node's physical GPUs: every device's index, and every GPU of the record's `gpus` list.
    gpu_indexes: frozenset[int]
    gpu_models: Mapping[int, str]  # index → catalogue model, from the record's `gpus` list


def read_measured(text: str) -> MeasuredNode | None:
    """The usage the annotation's text records; None when the record has no `usage` (an agent from
    before it measured). Raises UsageRecordError on anything else the agent would not write."""
    try:
        record = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise UsageRecordError(f"not JSON: {exc}") from None
    if not isinstance(record, Mapping):
        raise UsageRecordError("not a JSON object")
    if "usage" not in record:
        return None
    usage = _map(record, "usage", "usage")
    devices = _list(usage, "devices", "usage.devices")
    measured = tuple(_device(item, f"usage.devices[{n}]") for n, item in enumerate(devices))
    util_eff = _map(usage, "util_eff", "usage.util_eff")
    fill = _number(usage, "memory_fill_limit", "usage.memory_fill_limit", nullable=False)
    if fill is None or not 0 < fill <= 1:
        raise UsageRecordError(f"usage.memory_fill_limit: {fill!r} is not in (0, 1]")
    full = usage.get("shared_memory_full", _MISSING)
    if not isinstance(full, bool):
        raise UsageRecordError(f"usage.shared_memory_full: {_said(full)} is not true or false")
    gpus = record.get("gpus")
    listed = [g for g in gpus if isinstance(g, Mapping)] if isinstance(gpus, list) else []
    models = {
        g["index"]: g["model"] for g in listed if _is_int(g.get("index")) and isinstance(g.get("model"), str)
    }
    indexes = {d.index for d in measured} | {g["index"] for g in listed if _is_int(g.get("index"))}
    return MeasuredNode(
        devices=measured,
        util_eff_compute=_fraction(util_eff, "compute", "usage.util_eff.compute"),
        util_eff_memory=_fraction(util_eff, "memory", "usage.util_eff.memory"),
        memory_fill_limit=fill,
        shared_memory_full=full,
        gpu_indexes=frozenset(indexes),
        gpu_models=models,
    )


_MISSING = object()


def _device(item: Any, where: str) -> MeasuredDevice:
    if not isinstance(item, Mapping):
        raise UsageRecordError(f"{where}: not an object")
    index = _count(item, "index", f"{where}.index", nullable=False)
    compute = _count(item, "compute_percent", f"{where}.compute_percent")
    if compute is not None and compute > 100:
        raise UsageRecordError(f"{where}.compute_percent: {compute} is over 100")
    processes = _list(item, "processes", f"{where}.processes")
    return MeasuredDevice(
        index=index if index is not None else 0,
        uuid=_text(item, "uuid", f"{where}.uuid"),
        model=_text(item, "model", f"{where}.model"),
        mig_profile=_text(item, "mig_profile", f"{where}.mig_profile"),
        memory_used_mib=_count(item, "memory_used_mib", f"{where}.memory_used_mib"),
        memory_total_mib=_count(item, "memory_total_mib", f"{where}.memory_total_mib"),
        compute_percent=compute,
        processes=tuple(_process(p, f"{where}.processes[{n}]") for n, p in enumerate(processes)),
    )


def _process(item: Any, where: str) -> GpuProcess:
    if not isinstance(item, Mapping):
        raise UsageRecordError(f"{where}: not an object")
    pid = _count(item, "pid", f"{where}.pid", nullable=False)
    return GpuProcess(
        pid=pid if pid is not None else 0,
        memory_mib=_count(item, "memory_mib", f"{where}.memory_mib"),
        pod_uid=_text(item, "pod_uid", f"{where}.pod_uid"),
    )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _said(value: Any) -> str:
    return "missing" if value is _MISSING else json.dumps(value)[:40]


def _map(parent: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = parent.get(key, _MISSING)
    if not isinstance(value, Mapping):
        raise UsageRecordError(f"{where}: {_said(value)} is not an object")
    return value


def _list(parent: Mapping[str, Any], key: str, where: str) -> list[Any]:
    value = parent.get(key, _MISSING)
    if not isinstance(value, list):
        raise UsageRecordError(f"{where}: {_said(value)} is not a list")
    return value


def _count(parent: Mapping[str, Any], key: str, where: str, nullable: bool = True) -> int | None:
    """A whole number ≥ 0, or None where the agent may write null."""
    value = parent.get(key, _MISSING)
    if value is None and nullable:
        return None
    if not _is_int(value) or value < 0:
        kind = "a whole number ≥ 0" + (" or null" if nullable else "")
        raise UsageRecordError(f"{where}: {_said(value)} is not {kind}")
    return int(value)


def _number(parent: Mapping[str, Any], key: str, where: str, nullable: bool = True) -> float | None:
    value = parent.get(key, _MISSING)
    if value is None and nullable:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise UsageRecordError(f"{where}: {_said(value)} is not a number" + (" or null" if nullable else ""))
    return float(value)


def _fraction(parent: Mapping[str, Any], key: str, where: str) -> float | None:
    value = _number(parent, key, where)
    if value is not None and not 0 <= value <= 1:
        raise UsageRecordError(f"{where}: {value!r} is not between 0 and 1")
    return value


def _text(parent: Mapping[str, Any], key: str, where: str) -> str | None:
    value = parent.get(key, _MISSING)
    if value is None or (isinstance(value, str) and value):
        return value
    raise UsageRecordError(f"{where}: {_said(value)} is not a string or null")
