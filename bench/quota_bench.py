"""Extra latency of the GPU-quota reservation per GPU pod: the Lease round trip against a real
kube-apiserver, against the same decision without a quota (no round trip), measured in the same run.

    KUBEBUILDER_ASSETS=/path/to/bin .venv/bin/python bench/quota_bench.py [--pods N]
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
from webhook.ledger import LeaseLedger  # noqa: E402
from webhook.quota import Quota  # noqa: E402
from webhook.quota_gate import QuotaGate  # noqa: E402


class StaticView:
    def __init__(self, quotas):
        self.quotas, self.synced = quotas, True

    def has_synced(self, *names):
        return True

    def quotas_in(self, namespace):
        return self.quotas

    def pods_version(self, namespace):
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
        assert gate.admit(request, ctx) is None
        times.append(time.perf_counter() - started)
    return times


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pods", type=int, default=300)
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
