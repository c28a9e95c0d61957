"""The agent's Prometheus metrics: its last usage record as gauges, built fresh on every scrape from that
record, so a GPU, MIG instance or process that is gone is gone from /metrics too (no stale label sets).
A figure NVML did not give has no sample, rather than a 0. Served from the agent's own registry."""

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from webhook.nodeagent.peaks import pod_samples
from webhook.nodeagent.util_eff import gpu_util_eff, pod_memory_mib

DEFAULT_METRICS_PORT = 9410
_MIB = 1024 * 1024
DEVICE_LABELS = ["node", "gpu", "uuid", "model", "mig_profile"]


class UsageCollector(Collector):
    """Reads the record `last_record()` returns (None before the first gathering) at every scrape."""

    def __init__(self, node: str, last_record: Callable[[], Mapping[str, Any] | None]):
        self.node = node
        self.last_record = last_record

    def collect(self) -> Iterator[GaugeMetricFamily]:
        record = self.last_record() or {}
        usage = record.get("usage") or {}
        devices = usage.get("devices") or []
        node = self.node

        def gauge(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, doc, labels=labels)

        used = gauge(
            "gpuport_gpu_memory_used_bytes", "GPU memory in use (MIG: the instance's)", DEVICE_LABELS
        )
        total = gauge("gpuport_gpu_memory_total_bytes", "GPU memory (MIG: the instance's)", DEVICE_LABELS)
        compute = gauge(
            "gpuport_gpu_compute_utilization_ratio",
            "NVML utilisation rate of the GPU, 0..1 (NVML gives none for MIG)",
            DEVICE_LABELS,
        )
        count = gauge("gpuport_gpu_processes", "compute processes on the device", DEVICE_LABELS)
        process = gauge(
            "gpuport_gpu_process_memory_bytes",
            "GPU memory of a compute process; pod_uid is empty unless the agent sees host PIDs",
            [*DEVICE_LABELS, "pid", "pod_uid"],
        )
        for d in devices:
            labels = [node, str(d["index"]), d["uuid"] or "", d["model"] or "", d["mig_profile"] or ""]
            if d["memory_used_mib"] is not None:
                used.add_metric(labels, d["memory_used_mib"] * _MIB)
            if d["memory_total_mib"] is not None:
                total.add_metric(labels, d["memory_total_mib"] * _MIB)
            if d["compute_percent"] is not None:
                compute.add_metric(labels, d["compute_percent"] / 100)
            count.add_metric(labels, len(d["processes"]))
            for p in d["processes"]:
                if p["memory_mib"] is not None:
                    process.add_metric([*labels, str(p["pid"]), p["pod_uid"] or ""], p["memory_mib"] * _MIB)
        yield from (used, total, compute, count, process)

        per_gpu = gauge(
            "gpuport_gpu_util_eff_ratio",
            "effective utilisation of a GPU (Σ used ÷ capacity; MIG: over its instances)",
            ["node", "gpu", "model", "resource"],
        )
        models = {d["index"]: d["model"] or "" for d in devices}
        for index, ratios in gpu_util_eff(devices).items():
            for resource, value in ratios.items():
                if value is not None:
                    per_gpu.add_metric([node, str(index), models[index], resource], value)
        yield per_gpu

        node_eff = gauge(
            "gpuport_node_gpu_util_eff_ratio",
            "effective utilisation of the node's GPUs (compute: mean over GPUs that answered; memory: "
            "Σ used ÷ Σ total)",
            ["node", "resource"],
        )
        for resource, value in (usage.get("util_eff") or {}).items():
            if value is not None:
                node_eff.add_metric([node, resource], value)
        yield node_eff

        pods = gauge(
            "gpuport_pod_gpu_memory_bytes",
            "GPU memory of a pod's processes on this node",
            ["node", "pod_uid"],
        )
        for uid, mib in sorted(pod_memory_mib(devices).items()):
            pods.add_metric([node, uid], mib * _MIB)
        yield pods

        # What `gpuport rightsize --prometheus` takes a percentile of: a pod's compute in GPUs (Σ the
        # utilisation of each device its processes run on; a shared device's whole figure for each of
        # its pods, an upper bound). No sample where a device did not answer (MIG): unknown, not 0.
        pod_compute = gauge(
            "gpuport_pod_gpu_compute_ratio",
            "compute of a pod's processes on this node, in GPUs (1 = one GPU fully busy)",
            ["node", "pod_uid"],
        )
        for uid, (_memory, percent) in pod_samples(devices).items():
            if percent is not None:
                pod_compute.add_metric([node, uid], percent / 100)
        yield pod_compute

        if usage:
            full = gauge(
                "gpuport_node_shared_memory_full",
                "1 while every GPU a share could land on is filled past the limit (label "
                "gpuport.io/shared-memory-full)",
                ["node"],
            )
            full.add_metric([node], 1 if usage["shared_memory_full"] else 0)
            limit = gauge("gpuport_node_shared_memory_fill_limit_ratio", "κ the agent applies", ["node"])
            limit.add_metric([node], usage["memory_fill_limit"])
            yield from (full, limit)


def usage_registry(node: str, last_record: Callable[[], Mapping[str, Any] | None]) -> CollectorRegistry:
    """A registry of its own (not the process-global one) holding only the usage collector."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(UsageCollector(node, last_record))
    return registry


def serve_metrics(registry: CollectorRegistry, port: int = DEFAULT_METRICS_PORT):
    """Serve /metrics from a daemon thread of the agent process; returns (server, thread)."""
    return start_http_server(port, registry=registry)
