"""Rolling usage peaks per pod, kept by the node agent so `gpuport rightsize` can size workloads on a
cluster without Prometheus (pure: dicts in, dicts out; the agent supplies the clock).

Why peaks and a histogram, not the last figure: a five-minute snapshot under-provisions. For every pod
whose processes the agent sees on a GPU (host-PID attribution), each sample adds, in the day it falls
in: the seconds it stands for to the day's coverage, the pod's GPU memory to the day's peak, and its
compute to a histogram. A high
percentile read from a histogram by its bins' upper edges is never below the true one, and histograms of
days add up, so any window of whole days is read exactly enough and never low.

A pod's compute is the sum, over the devices its processes run on, of each device's NVML utilisation in
percent of one GPU; a device shared by several pods gives its whole figure to each (NVML's device rate
cannot be split, and an upper bound never under-sizes). A MIG instance has no utilisation in NVML, so a
pod on one has memory samples only: its compute is unknown, never 0.

Bounded, so the Node's annotation stays small whatever runs there: at most MAX_PODS pods (the least
recently seen leave first), MAX_DAYS days per pod, MAX_BINS bins per day (past it, bins merge upwards:
coarser, never lower). The record is published in USAGE_PEAKS_ANNOTATION and read back when the agent
starts, so a restart loses nothing. Format (the reader is webhook/core/sizing/history.py):

    {"v": 1, "day_s": 86400,
     "pods": {"<uid>": [{"t": <day start, epoch s>, "s": <seconds with memory read>,
                         "cs": <seconds with compute read>, "m": <peak MiB or null>,
                         "c": {"<percent of one GPU, rounded up>": <samples>}, "w": <bin width>}]}}
"""

import math
from collections.abc import Iterable, Mapping
from typing import Any

VERSION = 1
DAY_S = 86400
MAX_PODS = 64
MAX_DAYS = 8  # a 7-day window and the day in progress
MAX_BINS = 16

Sample = tuple[int | None, int | None]  # (GPU memory MiB, compute in percent of one GPU), None: unknown


def empty() -> dict[str, Any]:
    return {"v": VERSION, "day_s": DAY_S, "pods": {}}


def pod_samples(devices: Iterable[Mapping[str, Any]]) -> dict[str, Sample]:
    """Per pod UID, this sample's GPU memory (Σ its processes'; None when NVML did not report one of
    them: a part of the sum read as the whole would be low) and compute (Σ the utilisation of each
    device it runs on, in whole percent rounded up; None when one of them did not answer, as on MIG)."""
    memory: dict[str, int | None] = {}
    compute: dict[str, int | None] = {}
    for device in devices:
        rate = device["compute_percent"]
        for process in device["processes"]:
            uid = process["pod_uid"]
            if uid is None:
                continue
            mib = process["memory_mib"]
            memory[uid] = (
                None
                if mib is None or (uid in memory and memory[uid] is None)
                else ((memory.get(uid) or 0) + mib)
            )
        for uid in {p["pod_uid"] for p in device["processes"] if p["pod_uid"] is not None}:
            if rate is None or (uid in compute and compute[uid] is None):
                compute[uid] = None
            else:
                compute[uid] = (compute.get(uid) or 0) + math.ceil(rate)
    return {uid: (memory[uid], compute.get(uid)) for uid in sorted(memory)}


def add_sample(
    peaks: Mapping[str, Any], now: float, seconds: float, samples: Mapping[str, Sample]
) -> dict[str, Any]:
    """`peaks` with one sample per pod added in the day `now` falls in, standing for `seconds` of it (the
    time since the previous sample, at most the agent's period); then bounded."""
    day = int(now // DAY_S) * DAY_S
    pods = {uid: [dict(b) for b in days] for uid, days in peaks["pods"].items()}
    for uid, (memory, compute) in samples.items():
        days = pods.setdefault(uid, [])
        if not days or days[-1]["t"] != day:
            days.append({"t": day, "s": 0, "cs": 0, "m": None, "c": {}, "w": 1})
        bucket = days[-1]
        if memory is not None:  # only a sample that read the memory covers the window for it
            bucket["s"] += max(round(seconds), 0)
            bucket["m"] = memory if bucket["m"] is None else max(bucket["m"], memory)
        if compute is not None:
            bucket["cs"] += max(round(seconds), 0)
            key = str(_bin(compute, bucket["w"]))
            bucket["c"] = {**bucket["c"], key: bucket["c"].get(key, 0) + 1}
            _coarsen(bucket)
    return {**peaks, "pods": _bounded(pods, day)}


def merge(kept: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, Any]:
    """What the agent read back at start (`kept`) joined with what it gathered since (`current`):
    days present in both add up, bins coarsened to the wider of the two widths."""
    pods: dict[str, list[dict[str, Any]]] = {u: [dict(b) for b in d] for u, d in kept["pods"].items()}
    for uid, days in current["pods"].items():
        by_day = {b["t"]: b for b in pods.setdefault(uid, [])}
        for bucket in days:
            old = by_day.get(bucket["t"])
            if old is None:
                pods[uid].append(dict(bucket))
                continue
            width = max(old["w"], bucket["w"])
            bins: dict[str, int] = {}
            for source in (old, bucket):
                for key, count in source["c"].items():
                    wide = str(_bin(int(key), width))
                    bins[wide] = bins.get(wide, 0) + count
            memories = [m for m in (old["m"], bucket["m"]) if m is not None]
            old.update(
                s=old["s"] + bucket["s"],
                cs=old["cs"] + bucket["cs"],
                m=max(memories) if memories else None,
                c=bins,
                w=width,
            )
            _coarsen(old)
        pods[uid].sort(key=lambda b: b["t"])
    latest = max((b["t"] for d in pods.values() for b in d), default=0)
    return {**current, "pods": _bounded(pods, latest)}


def _bin(percent: int, width: int) -> int:
    """The upper edge of the bin `percent` falls in: a reading is only ever rounded up."""
    return math.ceil(percent / width) * width


def _coarsen(bucket: dict[str, Any]) -> None:
    while len(bucket["c"]) > MAX_BINS:
        bucket["w"] *= 2
        bins: dict[str, int] = {}
        for key, count in bucket["c"].items():
            wide = str(_bin(int(key), bucket["w"]))
            bins[wide] = bins.get(wide, 0) + count
        bucket["c"] = bins


def _bounded(pods: dict[str, list[dict[str, Any]]], today: int) -> dict[str, list[dict[str, Any]]]:
    oldest = today - (MAX_DAYS - 1) * DAY_S
    kept = {uid: [b for b in days if b["t"] >= oldest] for uid, days in pods.items()}
    kept = {uid: days for uid, days in kept.items() if days}
    recent = sorted(kept, key=lambda uid: kept[uid][-1]["t"], reverse=True)[:MAX_PODS]
    return {uid: kept[uid] for uid in sorted(recent)}


def read_back(text: str | None) -> dict[str, Any]:
    """The peaks a previous run of the agent published, or an empty record when there are none or they
    are not in this version's shape (a reader newer or older than the writer starts again: measured
    history is lost, never misread)."""
    import json

    try:
        data = json.loads(text) if text else None
    except ValueError:
        data = None
    ok = (
        isinstance(data, dict)
        and data.get("v") == VERSION
        and data.get("day_s") == DAY_S
        and isinstance(data.get("pods"), dict)
        and all(isinstance(days, list) and all(_bucket_ok(b) for b in days) for days in data["pods"].values())
    )
    return dict(data) if ok and isinstance(data, dict) else empty()


def _bucket_ok(bucket: Any) -> bool:
    return (
        isinstance(bucket, dict)
        and isinstance(bucket.get("t"), int)
        and isinstance(bucket.get("s"), int)
        and isinstance(bucket.get("cs"), int)
        and (bucket.get("m") is None or isinstance(bucket.get("m"), int))
        and isinstance(bucket.get("w"), int)
        and bucket["w"] >= 1
        and isinstance(bucket.get("c"), dict)
        and all(k.isdigit() and isinstance(v, int) for k, v in bucket["c"].items())
    )
