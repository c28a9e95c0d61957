"""Prometheus metrics. Under gunicorn every worker is a process, so the server runs prometheus_client
in multiprocess mode (PROMETHEUS_MULTIPROC_DIR, set by `gpuport serve` before workers start) and
/metrics on any worker reports the sum over all of them."""

import os
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily

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
EVENTS = Counter(
    "gpuport_events_total",
    "The Translated Events, by outcome: created (an Event made: a lone pod's, or the first of an owner's "
    "pods), updated (an owner's Event given its new count), aggregated (a pod counted on its owner's "
    "Event), rate-limited (a lone pod's Event not written: its namespace's bucket was empty), dropped "
    "(not recorded: the queue or the table of series was full), failed (the API server refused or failed).",
    ["outcome"],
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


BUDGET_USED = "gpuport_gpu_budget_used"
BUDGET_LIMIT = "gpuport_gpu_budget_limit"


class _Budgets:
    """The GPU budgets as the answering worker's view holds them, read at the scrape: live figures,
    not samples kept in the multiprocess files (every worker's view holds the same cluster)."""

    def __init__(self, figures: Callable[[], Iterable[Any]]):
        self.figures = figures

    def collect(self):
        labels = ["namespace", "quota", "resource"]
        used = GaugeMetricFamily(
            BUDGET_USED,
            "What a namespace's not-finished pods hold of a GPU quota entry (GPU-equivalents; MiB for "
            "requests.gpuport.io/gpu-memory), as gpuport's quota counts them. Above "
            f"{BUDGET_LIMIT}: the namespace is over its budget (a quota made or lowered while gpuport "
            "was down).",
            labels=labels,
        )
        limit = GaugeMetricFamily(
            BUDGET_LIMIT, "The GPU quota entry's limit, in the same unit.", labels=labels
        )
        for figure in self.figures():
            key = [figure.namespace, figure.quota, figure.entry]
            used.add_metric(key, figure.used)
            limit.add_metric(key, figure.hard)
        yield used
        yield limit


def exposition(budgets: Callable[[], Iterable[Any]] | None = None) -> tuple[bytes, str]:
    """Every worker's metrics in the Prometheus text format, and its content type; with `budgets`
    (BudgetFigure values, read now), each namespace's GPU budget beside what it holds."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    else:
        registry = REGISTRY
    live = CollectorRegistry()  # listed without samples where there is no cluster: the alerts name them
    live.register(_Budgets(budgets or (lambda: ())))
    return generate_latest(registry) + generate_latest(live), CONTENT_TYPE_LATEST


def worker_exited(pid: int) -> None:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.mark_process_dead(pid)
