"""Each pod's peak GPU memory and compute percentile over a window, from the node agents' metrics as a
Prometheus server keeps them, through its HTTP API (`/api/v1/query`).

The queries, evaluated once at the window's end:
- peak memory: max_over_time of gpuport_pod_gpu_memory_bytes over the window;
- compute: quantile_over_time of gpuport_pod_gpu_compute_ratio (the pod's compute in GPUs);
- how much of the window each covers: count_over_time of a subquery stepped every STEP_S seconds, times
  the step. Prometheus's staleness look-back (5 minutes by default) makes a series present at a step when
  it was scraped within the look-back, so a step of 5 minutes counts time scraped, not samples.
Each is `max by (pod_uid)`: a pod is one series per node, and a restarted agent's series join.

Prometheus is reached with urllib3 (the HTTP client the Kubernetes client already brings): two GET
calls need no other library. A server that is unreachable or answers anything but success is one line
saying which and why (PrometheusUnreadable), never a traceback.
"""

import json
import math
from fractions import Fraction
from typing import Any

from webhook.core.sizing.history import PodUsage

STEP_S = 300
MEMORY = "gpuport_pod_gpu_memory_bytes"
COMPUTE = "gpuport_pod_gpu_compute_ratio"


class PrometheusUnreadable(Exception):
    """The server could not be asked, or did not answer as Prometheus does."""


def queries(window_s: int, quantile: Fraction) -> dict[str, str]:
    window = f"{int(window_s)}s"
    step = f"{STEP_S}s"
    return {
        "memory": f"max by (pod_uid) (max_over_time({MEMORY}[{window}]))",
        "compute": f"max by (pod_uid) (quantile_over_time({float(quantile)}, {COMPUTE}[{window}]))",
        "memory_covered": f"max by (pod_uid) (count_over_time({MEMORY}[{window}:{step}]))",
        "compute_covered": f"max by (pod_uid) (count_over_time({COMPUTE}[{window}:{step}]))",
    }


def read_pod_usage(
    url: str, window_s: int, quantile: Fraction, at: float, timeout_s: float = 60.0
) -> dict[str, PodUsage]:
    """Per pod UID, its usage over (at - window_s, at]."""
    found = {name: _instant(url, query, at, timeout_s) for name, query in queries(window_s, quantile).items()}
    uids = set(found["memory"]) | set(found["compute"])
    usage = {}
    for uid in sorted(uids):
        memory = found["memory"].get(uid)
        compute = found["compute"].get(uid)
        usage[uid] = PodUsage(
            uid,
            None if memory is None else math.ceil(memory / 2**20),
            compute,
            min(int(found["memory_covered"].get(uid, 0)) * STEP_S, window_s),
            min(int(found["compute_covered"].get(uid, 0)) * STEP_S, window_s),
        )
    return usage


def _instant(url: str, query: str, at: float, timeout_s: float) -> dict[str, Fraction]:
    import urllib3

    endpoint = url.rstrip("/") + "/api/v1/query"
    try:
        response = urllib3.PoolManager().request(
            "GET",
            endpoint,
            fields={"query": query, "time": f"{at:.3f}"},
            timeout=urllib3.Timeout(total=timeout_s),
            retries=False,
        )
    except urllib3.exceptions.HTTPError as exc:
        raise PrometheusUnreadable(f"{endpoint}: {exc}") from None
    try:
        body: Any = json.loads(response.data)
    except ValueError:
        raise PrometheusUnreadable(f"{endpoint}: HTTP {response.status}, not JSON") from None
    if response.status != 200 or not isinstance(body, dict) or body.get("status") != "success":
        said = body.get("error") if isinstance(body, dict) else None
        raise PrometheusUnreadable(f"{endpoint}: HTTP {response.status}: {said or 'not a success'} ({query})")
    data = body.get("data") or {}
    if data.get("resultType") != "vector":
        raise PrometheusUnreadable(f"{endpoint}: expected a vector for {query}, got {data.get('resultType')}")
    values: dict[str, Fraction] = {}
    for item in data.get("result") or []:
        uid = (item.get("metric") or {}).get("pod_uid")
        value = item.get("value") or [None, None]
        try:
            number = Fraction(str(value[1]))
        except (ValueError, ZeroDivisionError, TypeError):
            continue  # NaN or ±Inf: no figure, never a guess
        if uid:
            values[uid] = number
    return values
