"""`gpuport plan mig` at scale, in process on one core: 1,000 GPU nodes of 8 GPUs and 10,000 pods
asking for MIG slices (8,000 as replicas of 400 Deployments, 2,000 already running on the nodes),
planned from reading the manifests to the YAML written. Also at a quarter and a half of the size, to
show the cost grows with the cluster, not faster.

    .venv/bin/python bench/plan_bench.py [--nodes 1000] [--pods 10000]
"""

import argparse
import json
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from webhook.commands.plan_report import as_yaml  # noqa: E402
from webhook.config.cloudmap import default_directory  # noqa: E402
from webhook.config.loading import build_context  # noqa: E402
from webhook.config.mig_geometry import load_geometry  # noqa: E402
from webhook.core.planning.mig_plan import plan_mig  # noqa: E402
from webhook.core.planning.slice_demand import slice_demand  # noqa: E402
from webhook.core.planning.target_gpus import target_gpus  # noqa: E402
from webhook.core.vocabulary.inventory import parse_inventory  # noqa: E402

PROFILES = {
    "A100-40GB": ["1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb"],
    "H100-80GB": ["1g.10gb", "2g.20gb", "3g.40gb"],
}
PRODUCTS = {"A100-40GB": "NVIDIA-A100-SXM4-40GB", "H100-80GB": "NVIDIA-H100-80GB-HBM3"}


def cluster(nodes: int, pods: int, seed: int = 7) -> tuple[list, list]:
    rng = random.Random(seed)
    inventory: list[dict] = []
    for i in range(nodes):
        model = "A100-40GB" if i % 2 else "H100-80GB"
        labels = {"nvidia.com/gpu.product": PRODUCTS[model], "nvidia.com/gpu.count": "8"}
        if i % 3 == 0:
            labels["nvidia.com/mig.config"] = f"all-{PROFILES[model][0]}"
        inventory.append(
            {"kind": "Node", "metadata": {"name": f"node-{i:05}", "labels": labels}, "status": {}}
        )
    running = pods // 5
    for i in range(running):
        node = rng.randrange(nodes)
        model = "A100-40GB" if node % 2 else "H100-80GB"
        profile = rng.choice(PROFILES[model])
        inventory.append(
            {
                "kind": "Pod",
                "metadata": {"name": f"run-{i}", "namespace": "ml"},
                "spec": {
                    "nodeName": f"node-{node:05}",
                    "containers": [{"name": "m", "resources": {"limits": {f"nvidia.com/mig-{profile}": 1}}}],
                },
                "status": {"phase": "Running"},
            }
        )
    manifests = []
    deployments = 400 * pods // 10000
    for i in range(deployments):
        model = "A100-40GB" if i % 2 else "H100-80GB"
        profile = rng.choice(PROFILES[model])
        manifests.append(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": f"svc-{i}", "namespace": "ml"},
                "spec": {
                    "replicas": (pods - running) // deployments,
                    "template": {
                        "spec": {
                            "nodeSelector": {"nvidia.com/gpu.product": PRODUCTS[model]},
                            "containers": [
                                {"name": "m", "resources": {"limits": {f"nvidia.com/mig-{profile}": 1}}}
                            ],
                        }
                    },
                },
            }
        )
    return manifests, inventory


def measure(nodes: int, pods: int) -> dict:
    manifests, documents = cluster(nodes, pods)
    context = build_context(default_directory(), "generic", read_as="generic")
    geometries = load_geometry(context.dialects.catalogue)
    start = time.perf_counter()
    inventory = parse_inventory(documents)
    read = time.perf_counter()
    demand = slice_demand(manifests, context, inventory)
    asked = time.perf_counter()
    gpus = target_gpus(inventory, context.dialects, geometries)
    plan = plan_mig(demand, gpus, geometries, context.target)
    planned = time.perf_counter()
    text = as_yaml(plan, context.dialects.catalogue, inventory)
    written = time.perf_counter()
    return {
        "nodes": nodes,
        "gpus": len(gpus),
        "pods": sum(a.pods for a in demand.asks),
        "fits": plan.fits,
        # GPUs the plan uses against the floor no plan can beat (memory slots, compute, counts)
        "used_gpus": sum(m.used_gpus for m in plan.models),
        "fewest_possible": sum(m.fewest_possible for m in plan.models),
        "changed_nodes": text.count("nvidia.com/mig.config:"),
        "read_inventory_s": round(read - start, 3),
        "read_demand_s": round(asked - read, 3),
        "plan_s": round(planned - asked, 3),
        "write_yaml_s": round(written - planned, 3),
        "total_s": round(written - start, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=10000)
    args = parser.parse_args()
    sizes = [(args.nodes // 4, args.pods // 4), (args.nodes // 2, args.pods // 2), (args.nodes, args.pods)]
    results = [measure(n, p) for n, p in sizes]
    base = results[0]["total_s"] or 1e-9
    for result in results:
        result["vs_smallest"] = round(result["total_s"] / base, 2)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
