"""Admission latency and throughput of the real server, against a bare allow-all route on the same
server and connection, measured in the same run (ratios, not absolute numbers, are what compare
across machines).

    .venv/bin/python bench/admission_bench.py [--requests N] [--connections C]

Each connection is one kept-alive TLS connection, as the API server uses; C connections run in
parallel threads. Results print as a table and are written to bench/results/latest.json.
"""

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.helpers import VerifyingHTTPSConnection, fixture  # noqa: E402
from tests.server_process import SERVICE_NAME, RunningServer, make_certs  # noqa: E402

CASES = [
    ("allow-all baseline", "/bench/allow-all", "pod-create-gpu-limit-1.json"),
    ("/mutate GPU pod (native)", "/mutate", "pod-create-gpu-limit-1.json"),
    ("/mutate GKE pod translated", "/mutate", "gke-pod"),
    ("/mutate 0.5 GPU (denied)", "/mutate", "pod-create-fractional-gpu-500m-before-validation.json"),
    ("/validate GPU pod", "/validate", "validate-pod-create-gpu-8.json"),
]


def gke_review():
    """The captured GPU pod, rewritten as a GKE user would write it: the webhook must translate it."""
    review = fixture("pod-create-gpu-limit-1.json")
    review["request"]["object"]["spec"]["nodeSelector"] = {
        "cloud.google.com/gke-accelerator": "nvidia-tesla-a100"
    }
    return review


def run_case(server, path, body, requests, connections):
    latencies: list[float] = []
    lock = threading.Lock()

    def worker(count):
        conn = VerifyingHTTPSConnection(
            "127.0.0.1", server.port, server_name=SERVICE_NAME, cafile=server.ca_file
        )
        local = []
        for _ in range(count):
            started = time.perf_counter()
            conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            response.read()
            local.append(time.perf_counter() - started)
            if response.status != 200:
                raise RuntimeError(f"{path} answered {response.status}")
        conn.close()
        with lock:
            latencies.extend(local)

    # Warm-up: TLS handshakes and first-request imports are not what we measure.
    worker(20)
    latencies.clear()
    per_connection = requests // connections
    threads = [threading.Thread(target=worker, args=(per_connection,)) for _ in range(connections)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "requests": len(latencies),
        "req_per_s": len(latencies) / elapsed,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[int(len(latencies) * 0.99) - 1] * 1000,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--connections", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        cert_dir = Path(tmp)
        make_certs(cert_dir)
        server = RunningServer(
            cert_dir, workers=args.workers, threads=args.threads, extra_env={"GPUPORT_BENCH_BASELINE": "1"}
        )
        try:
            # Cases take turns over several rounds, and each reports its median round, so that a
            # machine busier in one stretch of the run does not favour whichever case ran then.
            rounds: dict[str, list[dict]] = {label: [] for label, _, _ in CASES}
            for _ in range(args.rounds):
                for label, path, name in CASES:
                    body = json.dumps(gke_review() if name == "gke-pod" else fixture(name)).encode()
                    rounds[label].append(
                        run_case(server, path, body, args.requests // args.rounds, args.connections)
                    )
            results = {
                label: sorted(runs, key=lambda r: r["p50_ms"])[len(runs) // 2]
                for label, runs in rounds.items()
            }
        finally:
            server.stop()

    baseline = results["allow-all baseline"]
    print(
        f"{args.requests} requests over {args.connections} kept-alive TLS connection(s), "
        f"{args.workers} workers × {args.threads} threads"
    )
    print(f"{'case':28} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'p50 / baseline':>15}")
    for label, row in results.items():
        ratio = row["p50_ms"] / baseline["p50_ms"]
        print(f"{label:28} {row['req_per_s']:8.0f} {row['p50_ms']:8.2f} {row['p99_ms']:8.2f} {ratio:15.2f}")
    out = REPO / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "latest.json").write_text(json.dumps({"args": vars(args), "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
