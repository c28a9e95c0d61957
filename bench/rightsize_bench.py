"""`gpuport rightsize` at fleet size, in process: 10,000 GPU pods (1,250 Deployments of 8 replicas) on
1,250 nodes of 8 GPUs, each node carrying its agent's week of peaks, read from one `kubectl get -o yaml`
file and right-sized end to end (reading, sizing, the JSON written). Beside it, in the same run, the time
to parse the same file with PyYAML's C loader alone (how gpuport read inventories before): the ratio
says what reading and sizing together cost against reading alone.

    .venv/bin/python bench/rightsize_bench.py [--pods 10000]
"""

import argparse
import contextlib
import io
import json
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import yaml  # noqa: E402

from webhook.commands.cli import main  # noqa: E402
from webhook.core.vocabulary.topology import USAGE_PEAKS_ANNOTATION  # noqa: E402

DAY = 86400
END = 1_795_478_400 + 7 * DAY  # 2026-12-01T00:00:00Z
PRODUCTS = {"A100-80GB": "NVIDIA-A100-SXM4-80GB", "H100-80GB": "NVIDIA-H100-80GB-HBM3"}


def cluster(pods: int, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    nodes = -(-pods // 8)
    items: list[dict] = []
    peaks: dict[int, dict] = {}
    for n in range(nodes):
        model = "A100-80GB" if n % 2 else "H100-80GB"
        labels = {"nvidia.com/gpu.product": PRODUCTS[model], "nvidia.com/gpu.count": "8"}
        peaks[n] = {"v": 1, "day_s": DAY, "pods": {}}
        items.append(
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{n:05}", "labels": labels}}
        )
    for p in range(pods):
        n = deployment = p // 8  # a Deployment's replicas on one node's model
        uid = f"{p:08x}-0000-4000-8000-000000000000"
        memory = rng.randrange(2_000, 25_000)
        days = [
            {
                "t": END - (d + 1) * DAY,
                "s": DAY,
                "cs": DAY,
                "m": memory,
                "c": {str(rng.randrange(1, 30)): 288},
                "w": 1,
            }
            for d in range(7)
        ]
        peaks[n]["pods"][uid] = days
        items.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"web-{deployment}-5d8f-{p}",
                    "namespace": "serving",
                    "uid": uid,
                    "labels": {"pod-template-hash": "5d8f"},
                    "ownerReferences": [
                        {"kind": "ReplicaSet", "name": f"web-{deployment}-5d8f", "controller": True}
                    ],
                },
                "spec": {
                    "nodeName": f"node-{n:05}",
                    "nodeSelector": {
                        "nvidia.com/gpu.product": PRODUCTS["A100-80GB" if n % 2 else "H100-80GB"]
                    },
                    "containers": [{"name": "server", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
                },
                "status": {"phase": "Running"},
            }
        )
    for n, record in peaks.items():
        annotations = {USAGE_PEAKS_ANNOTATION: json.dumps(record, separators=(",", ":"))}
        items[n]["metadata"]["annotations"] = annotations
    return items


def measure(pods: int) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "cluster.yaml"
        path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": cluster(pods)}))
        start = time.perf_counter()
        list(yaml.load_all(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
        parse_s = time.perf_counter() - start
        out = io.StringIO()
        start = time.perf_counter()
        with contextlib.redirect_stdout(out):
            code = main(["rightsize", "--inventory", str(path), "--at", "2026-12-01T00:00:00Z", "-o", "json"])
        total_s = time.perf_counter() - start
    workloads = json.loads(out.getvalue())["workloads"]
    return {
        "pods": pods,
        "exit": code,
        "workloads": len(workloads),
        "resized": sum(1 for w in workloads if w["proposal"]),
        "seconds": round(total_s, 2),
        "parse_seconds": round(parse_s, 2),
        "ratio_to_parse": round(total_s / parse_s, 2) if parse_s else None,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=10_000)
    print(json.dumps(measure(parser.parse_args().pods), indent=2))
