"""Extra latency of the GPU-quota reservation per GPU pod: the Lease round trip against a real
kube-apiserver, against the same decision without a quota (no round trip), measured in the same run;
then a burst: N concurrent admissions in one namespace through two replicas' ledgers against a quota
of N/2 (how many pass, how fast, and how large the Lease gets).

    KUBEBUILDER_ASSETS=/path/to/bin .venv/bin/python bench/quota_bench.py [--pods N] [--burst N]
"""

import argparse
import statistics
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kubernetes import client  # noqa: E402

from tests.helpers import context, parsed, review_of  # noqa: E402
from tests.integration.conftest import ApiServer  # noqa: E402
from tests.translation_cases import pod  # noqa: E402
from webhook.adapters.kube.ledger import LeaseLedger  # noqa: E402
from webhook.adapters.kube.quota_gate import QuotaGate  # noqa: E402
from webhook.core.asks.demand import read_demand  # noqa: E402
from webhook.core.budget.quota import Quota  # noqa: E402


class StaticView:
    def __init__(self, quotas):
        self.quotas, self.synced = quotas, True

    def has_synced(self, *names):
        return True

    def quotas_in(self, namespace):
        return self.quotas

    def pods_version(self, namespace):
        return 0

    def pods_read_through(self):
        return 0

    def pods_in(self, namespace):
        return []


def measure(gate, pods: int) -> list[float]:
    ctx = context("generic")
    times = []
    for n in range(pods):
        obj = dict(
            pod({"nvidia.com/gpu": "1"}), metadata={"name": f"p{n}", "namespace": "bench", "uid": f"u{n}"}
        )
        request = parsed(review_of(obj, uid=f"r{n}"))
        started = time.perf_counter()
        assert gate.admit(request, ctx, read_demand(obj, ctx.dialects)) is None
        times.append(time.perf_counter() - started)
    return times


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pods", type=int, default=300)
    parser.add_argument("--burst", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server = ApiServer(Path(tmp))
        try:
            api_client = server.client()
            client.CoreV1Api(api_client).create_namespace({"metadata": {"name": "gpuport-system"}})
            ledger = LeaseLedger(client.CoordinationV1Api(api_client), "gpuport-system")
            quota = Quota("gpus", {"requests.nvidia.com/gpu": Decimal(100000)})
            without = measure(QuotaGate(StaticView([]), ledger), args.pods)
            with_quota = measure(QuotaGate(StaticView([quota]), ledger), args.pods)
            burst = measure_burst(api_client, args.burst)
        finally:
            server.stop()
    for label, times in (
        ("no GPU quota (no round trip)", without),
        ("GPU quota (Lease reservation)", with_quota),
    ):
        times.sort()
        p50, p99 = statistics.median(times) * 1000, times[int(len(times) * 0.99) - 1] * 1000
        print(f"{label:32} p50 {p50:7.2f} ms   p99 {p99:7.2f} ms")
    extra = (statistics.median(with_quota) - statistics.median(without)) * 1000
    print(f"extra per GPU pod (p50): {extra:.2f} ms")
    print(
        f"burst: {burst['tries']} admissions at once, quota {burst['quota']}: {burst['admitted']} admitted "
        f"({burst['rate']:.0f}/s), {burst['busy']} refused as busy, {burst['unavailable']} unavailable; "
        f"Lease annotation {burst['lease_bytes'] / 1024:.1f} KiB"
    )
    return 0 if burst["admitted"] <= burst["quota"] else 1


def measure_burst(api_client, tries: int) -> dict:
    """Two replicas (each its own ledger and gate, 8 threads) admit `tries` GPU pods at once against a
    quota of half as many; retried like a controller would, until each is admitted or over quota."""
    from concurrent.futures import ThreadPoolExecutor

    quota = Quota("gpus", {"requests.nvidia.com/gpu": Decimal(tries // 2)})
    gates = [
        QuotaGate(StaticView([quota]), LeaseLedger(client.CoordinationV1Api(api_client), "gpuport-system"))
        for _ in range(2)
    ]
    ctx = context("generic")
    outcomes: list[str] = []

    def admit(n: int) -> None:
        obj = dict(
            pod({"nvidia.com/gpu": "1"}), metadata={"name": f"b{n}", "namespace": "burst", "uid": f"b{n}"}
        )
        review = review_of(obj, uid=f"rb{n}")
        review["request"]["namespace"] = "burst"
        request = parsed(review)
        demand = read_demand(obj, ctx.dialects)
        for _ in range(20):
            decision = gates[n % 2].admit(request, ctx, demand)
            if decision is None:
                outcomes.append("admitted")
                return
            if decision.reason == "quota-exceeded":
                outcomes.append("over")
                return
            outcomes.append(decision.reason)
            time.sleep(0.05)

    started = time.perf_counter()
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(admit, range(tries)))
    elapsed = time.perf_counter() - started
    lease = client.CoordinationV1Api(api_client).read_namespaced_lease(
        "gpuport-quota-burst", "gpuport-system"
    )
    admitted = outcomes.count("admitted")
    return {
        "tries": tries,
        "quota": tries // 2,
        "admitted": admitted,
        "rate": admitted / elapsed,
        "busy": outcomes.count("quota-busy"),
        "unavailable": outcomes.count("quota-unavailable"),
        "lease_bytes": len((lease.metadata.annotations or {}).get("gpuport.io/reservations", "")),
    }


if __name__ == "__main__":
    raise SystemExit(main())
