"""The cluster view at scale, through a real kube-apiserver: memory, time to sync, the longest stall a
request thread sees while the view lists, and a quota decision's latency, for growing pod counts in
one run (ratios against the smallest size, never absolute bounds).

    KUBEBUILDER_ASSETS=/path/to/bin .venv/bin/python bench/scale_bench.py [--pods 2000,10000] [--nodes 500]

A third of the pods ask for a GPU, spread over 300 namespaces; nodes carry GFD labels. Each size runs
the view in a fresh child process, so its RSS is the view's alone.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

NAMESPACES = 300


def populate(api_client, nodes: int, pods: int, already: int) -> None:
    from kubernetes import client

    core = client.CoreV1Api(api_client)
    if already == 0:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda n: _namespace(core, f"team-{n}"), range(NAMESPACES)))
            list(pool.map(lambda n: _node(core, n), range(nodes)))
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda n: _pod(core, n), range(already, pods)))


def _namespace(core, name):
    core.create_namespace({"metadata": {"name": name}})
    core.create_namespaced_service_account(name, {"metadata": {"name": "default"}})
    if int(name.split("-")[1]) % 10 == 0:
        core.create_namespaced_resource_quota(
            name, {"metadata": {"name": "gpus"}, "spec": {"hard": {"requests.nvidia.com/gpu": "64"}}}
        )


def _node(core, n):
    labels = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8"}
    core.create_node({"metadata": {"name": f"gpu-node-{n}", "labels": labels}})


def _pod(core, n):
    resources = {"limits": {"nvidia.com/gpu": "1"}} if n % 3 == 0 else {"limits": {"cpu": "100m"}}
    core.create_namespaced_pod(
        f"team-{n % NAMESPACES}",
        {
            "metadata": {"name": f"p{n}", "labels": {"app": "bench", "n": str(n)}},
            "spec": {
                "containers": [
                    {"name": "main", "image": "example/app:1", "resources": resources, "env": _env()}
                ]
            },
        },
    )


def _env():
    # Real pods carry some weight: env, args, volumes. The view must not keep it.
    return [{"name": f"VAR_{i}", "value": "x" * 40} for i in range(10)]


def measure_view(kubeconfig: str) -> dict:
    """In a child process: start a ClusterView, time its sync, watch a request thread's stalls."""
    from kubernetes import client

    from tests.helpers import context, parsed, review_of
    from tests.translation_cases import pod
    from webhook.adapters.kube.clusterview import ClusterView
    from webhook.adapters.kube.kubeclient import api_client
    from webhook.adapters.kube.ledger import MemoryLedger
    from webhook.adapters.kube.quota_gate import QuotaGate

    before = _rss_mib()
    view = ClusterView(client.CoreV1Api(api_client(kubeconfig)))
    stalls: list[float] = []
    stop = threading.Event()

    def request_thread():
        while not stop.is_set():
            started = time.perf_counter()
            time.sleep(0.001)
            stalls.append(time.perf_counter() - started - 0.001)

    ticker = threading.Thread(target=request_thread, daemon=True)
    ticker.start()
    started = time.perf_counter()
    view.start()
    assert view.wait_synced(600)
    synced = time.perf_counter() - started
    time.sleep(1)
    stop.set()
    ticker.join()
    gate = QuotaGate(view, MemoryLedger())
    ctx = context("generic")
    latencies = []
    for n in range(300):
        obj = dict(
            pod({"nvidia.com/gpu": "1"}), metadata={"name": f"q{n}", "namespace": "team-0", "uid": f"q{n}"}
        )
        envelope = review_of(obj, uid=f"r{n}", dry_run=True)
        envelope["request"]["namespace"] = "team-0"  # one with a GPU quota: the sum over its pods runs
        request = parsed(envelope)
        t0 = time.perf_counter()
        gate.admit(request, ctx)
        latencies.append(time.perf_counter() - t0)
    return {
        "rss_mib": round(_rss_mib() - before, 1),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "sync_s": round(synced, 2),
        "worst_stall_ms": round(max(stalls) * 1000, 1),
        "decision_p50_us": round(statistics.median(latencies) * 1e6, 1),
    }


def _rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pods", default="2000,10000")
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # the child process's entry
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure_view(args.measure)))
        return 0
    from tests.integration.conftest import ApiServer, kubeconfig

    sizes = [int(s) for s in args.pods.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        server = ApiServer(Path(tmp))
        try:
            config = str(kubeconfig(server, Path(tmp) / "kubeconfig"))
            created = 0
            for size in sizes:
                t0 = time.perf_counter()
                populate(server.client(), args.nodes, size, created)
                created = size
                print(f"created {size} pods ({time.perf_counter() - t0:.0f}s)", file=sys.stderr)
                out = subprocess.run(
                    [sys.executable, __file__, "--measure", config],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                rows.append((size, json.loads(out.stdout.strip().splitlines()[-1])))
        finally:
            server.stop()
    base = rows[0][1]
    header = ("pods", "RSS MiB", "peak", "sync s", "stall ms", "decide µs", "decide ×")
    print(" ".join(f"{h:>9}" for h in header))
    for size, row in rows:
        ratio = row["decision_p50_us"] / base["decision_p50_us"]
        values = (size, row["rss_mib"], row["peak_rss_mib"], row["sync_s"], row["worst_stall_ms"])
        print(" ".join(f"{v:>9}" for v in values), f"{row['decision_p50_us']:>9} {ratio:>9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
