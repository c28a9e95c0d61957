"""Prometheus metrics. Under gunicorn every worker is a process, so the server runs prometheus_client
in multiprocess mode (PROMETHEUS_MULTIPROC_DIR, set by `gpuport serve` before workers start) and
/metrics on any worker reports the sum over all of them."""

import os

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)

REQUESTS = Counter(
    "gpuport_admission_requests_total",
    "Admission requests answered, by route, result (allowed, denied, bad-request, error) and reason.",
    ["route", "result", "reason"],
)
LATENCY = Histogram(
    "gpuport_admission_duration_seconds",
    "Time from reading the body to having the response, by route.",
    ["route"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)
DECISION_MEMO = Counter(
    "gpuport_decision_memo_total",
    "Pod creates looked up in the worker's decision memo, by result (hit: a recent pod equal in all the "
    "decision reads was answered from memory; miss: decided afresh).",
    ["result"],
)
CLOUDMAP_RELOADS = Counter(
    "gpuport_cloudmap_reloads_total",
    "Cloud-map reloads after the files changed, by result (ok; error: the previous maps stay in force).",
    ["result"],
)
CERT_RELOADS = Counter(
    "gpuport_tls_reloads_total",
    "Serving-certificate reloads after the files changed, by result (ok, error).",
    ["result"],
)


def exposition() -> tuple[bytes, str]:
    """Every worker's metrics in the Prometheus text format, and its content type."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    else:
        registry = REGISTRY
    return generate_latest(registry), CONTENT_TYPE_LATEST


def worker_exited(pid: int) -> None:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.mark_process_dead(pid)
