"""What each pod used over a window, as `gpuport rightsize` reads it: from the node agents' rolling peaks
(nodeagent/peaks.py writes the format) or from Prometheus (the command's adapter makes the same values).

Every figure says how much of the window it covers; a figure nobody measured is None, never 0. Reading
is strict: a record that is not in the agent's shape is a problem said with the node's name, and its
pods are left unmeasured rather than read wrong.
"""

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from webhook.core.vocabulary.inventory import inventory_items

_DAY_S = 86400


@dataclass(frozen=True)
class PodUsage:
    """One pod's measured peak GPU memory and compute percentile (in GPUs: 1 = one GPU busy) over the
    window, with the seconds each figure covers."""

    uid: str
    peak_memory_mib: int | None
    compute: Fraction | None
    memory_covered_s: int
    compute_covered_s: int


def from_agent_peaks(
    records: Mapping[str, Any], now: float, window_s: int, quantile: Fraction
) -> tuple[dict[str, PodUsage], list[str]]:
    """Per pod UID, its usage over the days that overlap [now - window_s, now], from every node's parsed
    peaks record (node name → the annotation's JSON value); and the problems, one per node whose record
    is not in the agent's shape. A day that overlaps the window counts whole: its peak may be a little
    older than the window, never missing from it."""
    usage: dict[str, PodUsage] = {}
    problems: list[str] = []
    start = now - window_s
    for node, record in sorted(records.items()):
        pods = _pods(record)
        if pods is None:
            problems.append(f"node {node}: its usage peaks are not in the node agent's format; not read")
            continue
        for uid, days in pods.items():
            inside = [b for b in days if b["t"] + _DAY_S > start and b["t"] <= now]
            if inside:
                usage[uid] = _join(uid, inside, quantile, window_s)
    return usage, problems


def _join(uid: str, days: list[Mapping[str, Any]], quantile: Fraction, window_s: int) -> PodUsage:
    memories = [b["m"] for b in days if b["m"] is not None]
    width = max(b["w"] for b in days)
    bins: dict[int, int] = {}
    for bucket in days:
        for key, count in bucket["c"].items():
            edge = math.ceil(int(key) / width) * width
            bins[edge] = bins.get(edge, 0) + count
    return PodUsage(
        uid,
        max(memories) if memories else None,
        percentile(bins, quantile),
        min(sum(b["s"] for b in days), window_s),
        min(sum(b["cs"] for b in days), window_s),
    )


def percentile(bins: Mapping[int, int], quantile: Fraction) -> Fraction | None:
    """The `quantile` of samples counted in bins keyed by their upper edge (percent of one GPU), read
    at the edge: never below the true value. None without samples."""
    total = sum(bins.values())
    if total == 0:
        return None
    wanted = quantile * total
    seen = 0
    for edge in sorted(bins):
        seen += bins[edge]
        if seen >= wanted:
            return Fraction(edge, 100)
    return Fraction(max(bins), 100)


def _pods(record: Any) -> Mapping[str, list[Mapping[str, Any]]] | None:
    if not isinstance(record, Mapping) or record.get("v") != 1 or record.get("day_s") != _DAY_S:
        return None
    pods = record.get("pods")
    if not isinstance(pods, Mapping):
        return None
    for days in pods.values():
        if not isinstance(days, list) or not all(_bucket(b) for b in days):
            return None
    return pods


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _bucket(bucket: Any) -> bool:
    return (
        isinstance(bucket, Mapping)
        and all(_int(bucket.get(k)) for k in ("t", "s", "cs"))
        and (bucket.get("m") is None or _int(bucket.get("m")))
        and _int(bucket.get("w"))
        and bucket["w"] >= 1
        and isinstance(bucket.get("c"), Mapping)
        and all(isinstance(k, str) and k.isdigit() and _int(v) for k, v in bucket["c"].items())
    )


def node_peaks(documents: Iterable[Any], annotation: str) -> dict[str, Any]:
    """Node name → its agent's peaks record (parsed JSON; the text itself where it is not JSON, which
    from_agent_peaks then reports), from Node documents as `kubectl get nodes -o yaml` prints them."""
    import json

    found: dict[str, Any] = {}
    for item in inventory_items(list(documents)):
        if item.get("kind", "Node") != "Node":
            continue
        metadata = item.get("metadata") or {}
        text = (metadata.get("annotations") or {}).get(annotation)
        if isinstance(text, str):
            try:
                found[str(metadata.get("name", "?"))] = json.loads(text)
            except ValueError:
                found[str(metadata.get("name", "?"))] = text
    return found


def joined(usages: Iterable[PodUsage]) -> PodUsage | None:
    """A workload's usage from its pods': the largest peak and percentile (every pod must fit the ask
    they share) and the longest coverage (the pod measured longest). A figure one pod lacks is unknown
    for the workload: the largest of the others could be below it."""
    found = list(usages)
    if not found:
        return None
    memories = [u.peak_memory_mib for u in found]
    computes = [u.compute for u in found]
    return PodUsage(
        ",".join(sorted(u.uid for u in found)),
        None if None in memories else max(m for m in memories if m is not None),
        None if None in computes else max(c for c in computes if c is not None),
        max(u.memory_covered_s for u in found),
        max(u.compute_covered_s for u in found),
    )
