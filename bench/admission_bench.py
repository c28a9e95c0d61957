"""Admission throughput and latency of the real server, against a bare allow-all route on the same
server and connections, measured in the same run (ratios, not absolute numbers, are what compare
across machines). The bare route takes the admission routes' own path (plain WSGI, no Flask), so the
ratio is the decision's cost alone; a second column divides by allow-all as an ordinary Flask route,
what a webhook written on the framework costs.

    .venv/bin/python bench/admission_bench.py [--requests N] [--connections 1 8]

Each connection is one kept-alive TLS connection, as the API server uses; C connections run in
parallel threads. The server runs with the shipped defaults (`serve`'s workers and threads) and an
inventory of node-agent records, so a translated multi-GPU pod also gets placement hints. Translated
pods are sent two ways: the same pod over and over (the replicas of one workload: the decision memo
answers) and a different pod every time (each decided afresh). Results print as a table and are
written to bench/results/latest.json.
"""

import argparse
import itertools
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
from tests.inventories import mixed_cluster  # noqa: E402
from tests.server_process import SERVICE_NAME, RunningServer, make_certs  # noqa: E402
from webhook.adapters.http.settings import Settings  # noqa: E402

CASES = [
    ("allow-all baseline", "/bench/allow-all", "pod-create-gpu-limit-1.json"),
    (FLASK_BASELINE := "allow-all on a Flask route", "/bench/allow-all-flask", "pod-create-gpu-limit-1.json"),
    ("/mutate GPU pod (native)", "/mutate", "pod-create-gpu-limit-1.json"),
    ("/mutate 4×H100 GKE pod, repeated", "/mutate", "gke-pod"),
    ("/mutate 4×H100 GKE pod, each new", "/mutate", "gke-pod-each-new"),
    ("/mutate 0.5 GPU (denied)", "/mutate", "pod-create-fractional-gpu-500m-before-validation.json"),
    ("/validate GPU pod", "/validate", "validate-pod-create-gpu-8.json"),
]


def gke_review(seq: int | None = None):
    """The captured GPU pod as a GKE user writes a 4×H100 pod: translated, and given topology hints.
    With `seq`, a toleration of its own (a taint on nodes kept for this job) makes every pod different
    to the decision memo; nothing else changes. Neither an annotation nor the container's name would:
    the memo ignores annotations no decision reads (the pods of an indexed Job differ only there) and
    answers pods named otherwise where the decision says no name (core.deciding.remembered)."""
    review = fixture("pod-create-gpu-limit-1.json")
    pod = review["request"]["object"]
    pod["spec"]["nodeSelector"] = {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}
    pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "4"}}
    if seq is not None:
        pod["spec"]["tolerations"] = [{"key": f"example.com/job-{seq}", "operator": "Exists"}]
    return review


def bodies(name: str, count: int, start: int = 0) -> list[bytes]:
    if name == "gke-pod-each-new":
        return [json.dumps(gke_review(seq)).encode() for seq in range(start, start + count)]
    review = gke_review() if name == "gke-pod" else fixture(name)
    return [json.dumps(review).encode()]


def run_case(server, path, bodies, requests, connections):
    latencies: list[float] = []
    lock = threading.Lock()
    sequence = itertools.count()

    def worker(count):
        conn = VerifyingHTTPSConnection(
            "127.0.0.1", server.port, server_name=SERVICE_NAME, cafile=server.ca_file
        )
        local = []
        for _ in range(count):
            body = bodies[next(sequence) % len(bodies)]
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
    defaults = Settings()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000, help="per case and connection count")
    parser.add_argument("--connections", type=int, nargs="+", default=[8, 1])
    parser.add_argument("--workers", type=int, default=defaults.workers)
    parser.add_argument("--threads", type=int, default=defaults.threads)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        cert_dir = Path(tmp)
        make_certs(cert_dir)
        inventory = mixed_cluster(cert_dir)
        server = RunningServer(
            cert_dir,
            workers=args.workers,
            threads=args.threads,
            extra_env={"GPUPORT_INVENTORY": str(inventory)},
            baselines=True,
        )
        try:
            results = {c: measure(server, args, c) for c in args.connections}
        finally:
            server.stop()

    print(f"{args.requests} requests per case, {args.workers} worker(s) × {args.threads} threads")
    for connections, rows in results.items():
        print(f"\n{connections} kept-alive TLS connection(s)")
        header = f"{'req/s':>7} {'p50 ms':>7} {'p99 ms':>7} {'req/s ÷ bare':>13} {'÷ Flask route':>14}"
        print(f"{'case':36} {header}")
        for label, row in rows.items():
            rate, p50, p99, ratio = row["req_per_s"], row["p50_ms"], row["p99_ms"], row["ratio"]
            print(f"{label:36} {rate:7.0f} {p50:7.2f} {p99:7.2f} {ratio:13.2f} {row['ratio_flask']:14.2f}")
    out = REPO / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "latest.json").write_text(json.dumps({"args": vars(args), "results": results}, indent=2))
    return 0


def measure(server, args, connections) -> dict[str, dict]:
    # Cases take turns over several rounds, and each reports its median round and its median ratio to
    # the baseline of the same round, so that a machine busier in one stretch of the run does not
    # favour whichever case ran then.
    per_round = args.requests // args.rounds
    rounds: dict[str, list[dict]] = {label: [] for label, _, _ in CASES}
    for number in range(args.rounds):
        for label, path, name in CASES:
            # "each new" pods are numbered across rounds and connection counts: none repeats.
            start = (connections * args.rounds + number) * (per_round + 20)
            sent = bodies(name, per_round + 20, start)
            rounds[label].append(run_case(server, path, sent, per_round, connections))
    report = summarize(rounds, CASES[0][0])
    on_flask = summarize(rounds, FLASK_BASELINE)
    for label, row in report.items():
        row["ratio_flask"] = on_flask[label]["ratio"]
    return report


def summarize(rounds: dict[str, list[dict]], baseline_label: str) -> dict[str, dict]:
    """Each case's median round, and the median of its ratios to the baseline of the same round: the
    machine's speed drifts between rounds minutes apart more than the gap being measured."""
    baseline = rounds[baseline_label]
    results = {}
    for label, runs in rounds.items():
        ratios = sorted(r["req_per_s"] / b["req_per_s"] for r, b in zip(runs, baseline, strict=True))
        middle = sorted(runs, key=lambda r: r["req_per_s"])[len(runs) // 2]
        results[label] = {**middle, "ratio": ratios[len(ratios) // 2]}
    return results


if __name__ == "__main__":
    raise SystemExit(main())
