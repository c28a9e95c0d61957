"""`gpuport plan mig` at scale, in process on one core: 1,000 GPU nodes of 8 GPUs and 10,000 pods
asking for MIG slices (8,000 as replicas of 400 Deployments, 2,000 already running on the nodes),
planned from reading the manifests to the YAML written. Also at a quarter and a half of the size, to
show the cost grows with the cluster, not faster. Then end to end: `gpuport plan mig` run as a process on
the inventory written as `kubectl get -o yaml` prints it (about 200 lines a node, 60 a pod), read with
libyaml's loader, against the same run with PyYAML's pure-Python loader forced (rounds alternated).

    .venv/bin/python bench/plan_bench.py [--nodes 1000] [--pods 10000]
"""

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from webhook.commands.plan_report import Output, as_yaml  # noqa: E402
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
    """In process, step by step, on the documents as values (no file read)."""
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
    text = as_yaml(plan, context.dialects.catalogue, inventory, Output(context.target, gpus))
    written = time.perf_counter()
    return {
        "nodes": nodes,
        "gpus": len(gpus),
        "pods": sum(a.pods for a in demand.asks),
        "fits": plan.fits,
        # GPUs the plan uses against the floor no plan can beat (memory slots, compute, counts)
        "used_gpus": sum(m.used_gpus for m in plan.models),
        "fewest_possible": sum(m.fewest_possible for m in plan.models),
        "changed_nodes": text.count("kind: Node\n"),
        "read_inventory_s": round(read - start, 3),
        "read_demand_s": round(asked - read, 3),
        "plan_s": round(planned - asked, 3),
        "write_yaml_s": round(written - planned, 3),
        "total_s": round(written - start, 3),
    }


def as_kubectl_prints(documents: list[dict]) -> list[dict]:
    """Each object padded to what `kubectl get -o yaml` prints of a real one (managed fields aside):
    a node's conditions, addresses, images and node info; a pod's status, container statuses, the
    service-account token volume. The loader reads all of it, whatever the plan looks at."""
    shaped = []
    for doc in documents:
        doc = {"apiVersion": "v1", **doc}
        meta = doc["metadata"]
        meta.update(
            {
                "creationTimestamp": "2026-11-02T08:14:31Z",
                "resourceVersion": "48213377",
                "uid": "5f0c2a57-8a4e-4a4b-9d1e-2c7f4b0e9a11",
                "annotations": {
                    "node.alpha.kubernetes.io/ttl": "0",
                    "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                },
            }
        )
        if doc["kind"] == "Node":
            meta["labels"].update(
                {
                    "kubernetes.io/arch": "amd64",
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/hostname": meta["name"],
                    "topology.kubernetes.io/zone": "us-east-1a",
                    "node.kubernetes.io/instance-type": "p4d.24xlarge",
                    "nvidia.com/cuda.driver-version.full": "550.54.15",
                    "nvidia.com/gpu.memory": "40960",
                    "nvidia.com/mig.capable": "true",
                }
            )
            doc["spec"] = {"providerID": f"aws:///us-east-1a/i-{meta['name']}", "podCIDR": "10.0.0.0/24"}
            resources = {"cpu": "96", "memory": "1176914508Ki", "pods": "110", "nvidia.com/gpu": "8"}
            doc["status"] = {
                "addresses": [
                    {"address": "10.0.12.34", "type": "InternalIP"},
                    {"address": f"{meta['name']}.ec2.internal", "type": "Hostname"},
                ],
                "allocatable": resources,
                "capacity": dict(resources),
                "conditions": [
                    {
                        "lastHeartbeatTime": "2026-12-03T10:00:00Z",
                        "lastTransitionTime": "2026-11-02T08:15:00Z",
                        "message": message,
                        "reason": reason,
                        "status": status,
                        "type": kind,
                    }
                    for kind, status, reason, message in (
                        (
                            "MemoryPressure",
                            "False",
                            "KubeletHasSufficientMemory",
                            "kubelet has enough memory",
                        ),
                        ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                        ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has enough PID"),
                        ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
                    )
                ],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "images": [
                    {
                        "names": [
                            f"registry.example.com/team/image-{i}@sha256:{i:064x}",
                            f"registry.example.com/team/image-{i}:v1.{i}",
                        ],
                        "sizeBytes": 1000000 + i,
                    }
                    for i in range(20)
                ],
                "nodeInfo": {
                    "architecture": "amd64",
                    "containerRuntimeVersion": "containerd://1.7.22",
                    "kernelVersion": "6.1.112",
                    "kubeletVersion": "v1.32.1",
                    "operatingSystem": "linux",
                    "osImage": "Amazon Linux 2023",
                },
            }
        else:
            meta["labels"] = {"app": "serve", "pod-template-hash": "7d9f8c6b5"}
            meta["generateName"] = "serve-7d9f8c6b5-"
            meta["ownerReferences"] = [
                {
                    "apiVersion": "apps/v1",
                    "blockOwnerDeletion": True,
                    "controller": True,
                    "kind": "ReplicaSet",
                    "name": "serve-7d9f8c6b5",
                    "uid": "0b6e1f2a-3c4d-4e5f-8a9b-0c1d2e3f4a5b",
                }
            ]
            container = doc["spec"]["containers"][0]
            container.update(
                {
                    "image": "registry.example.com/team/serve:v1.4",
                    "imagePullPolicy": "IfNotPresent",
                    "env": [{"name": "MODEL", "value": "small"}, {"name": "PORT", "value": "8080"}],
                    "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "volumeMounts": [
                        {
                            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                            "name": "kube-api-access-x7k2p",
                            "readOnly": True,
                        }
                    ],
                }
            )
            doc["spec"].update(
                {
                    "dnsPolicy": "ClusterFirst",
                    "enableServiceLinks": True,
                    "preemptionPolicy": "PreemptLowerPriority",
                    "priority": 0,
                    "restartPolicy": "Always",
                    "schedulerName": "default-scheduler",
                    "serviceAccountName": "default",
                    "terminationGracePeriodSeconds": 30,
                    "tolerations": [
                        {"effect": "NoExecute", "key": key, "operator": "Exists", "tolerationSeconds": 300}
                        for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
                    ],
                    "volumes": [
                        {
                            "name": "kube-api-access-x7k2p",
                            "projected": {
                                "defaultMode": 420,
                                "sources": [
                                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                                    {
                                        "configMap": {
                                            "items": [{"key": "ca.crt", "path": "ca.crt"}],
                                            "name": "kube-root-ca.crt",
                                        }
                                    },
                                ],
                            },
                        }
                    ],
                }
            )
            doc["status"].update(
                {
                    "conditions": [
                        {"lastTransitionTime": "2026-11-02T08:20:00Z", "status": "True", "type": kind}
                        for kind in (
                            "PodReadyToStartContainers",
                            "Initialized",
                            "Ready",
                            "ContainersReady",
                            "PodScheduled",
                        )
                    ],
                    "containerStatuses": [
                        {
                            "containerID": "containerd://" + "a" * 64,
                            "image": "registry.example.com/team/serve:v1.4",
                            "imageID": "registry.example.com/team/serve@sha256:" + "b" * 64,
                            "lastState": {},
                            "name": "m",
                            "ready": True,
                            "restartCount": 0,
                            "started": True,
                            "state": {"running": {"startedAt": "2026-11-02T08:19:58Z"}},
                        }
                    ],
                    "hostIP": "10.0.12.34",
                    "podIP": "10.0.40.7",
                    "podIPs": [{"ip": "10.0.40.7"}],
                    "qosClass": "BestEffort",
                    "startTime": "2026-11-02T08:19:50Z",
                }
            )
        shaped.append(doc)
    return shaped


def end_to_end(nodes: int, pods: int, folder: Path, loader: str) -> dict:
    """`gpuport plan mig` as a user runs it, on files written as kubectl writes them: wall and CPU time
    of the whole process (start-up, reading, planning, writing). `loader`: "c" (libyaml, the default
    where present) or "pure" (PyYAML's Python loader, forced for the baseline in the same run)."""
    manifests, documents = cluster(nodes, pods)
    inventory = folder / f"inventory-{nodes}.yaml"
    workloads = folder / f"workloads-{nodes}.yaml"
    if not inventory.exists():
        dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
        listing = {"apiVersion": "v1", "kind": "List", "items": as_kubectl_prints(documents)}
        inventory.write_text(yaml.dump(listing, Dumper=dumper, sort_keys=True), encoding="utf-8")
        workloads.write_text(yaml.dump_all(manifests, Dumper=dumper), encoding="utf-8")
    # The baseline hides libyaml's loader before gpuport is imported, as a PyYAML built without it would.
    hide = "del yaml.CSafeLoader; " if loader == "pure" else ""
    start_cli = f"import sys, yaml; {hide}from webhook.commands.cli import main; sys.exit(main(sys.argv[1:]))"
    command = [sys.executable, "-c", start_cli, "plan", "mig", "--to", "generic", "--from", "generic"]
    command += ["--inventory", str(inventory), str(workloads)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"plan mig exited {done.returncode}: {done.stderr[-2000:]}")
    return {
        "nodes": nodes,
        "pods": pods,
        "loader": loader,
        "inventory_mib": round(inventory.stat().st_size / 2**20, 1),
        "wall_s": round(wall, 2),
        "cpu_s": round((after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime), 2),
        "changed_nodes": done.stdout.count("kind: Node\n"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=3, help="end-to-end rounds, the loaders alternated")
    args = parser.parse_args()
    sizes = [(args.nodes // 4, args.pods // 4), (args.nodes // 2, args.pods // 2), (args.nodes, args.pods)]
    results = [measure(n, p) for n, p in sizes]
    base = results[0]["total_s"] or 1e-9
    for result in results:
        result["vs_smallest"] = round(result["total_s"] / base, 2)
    print(json.dumps({"in_process": results}, indent=2))
    with tempfile.TemporaryDirectory() as folder:
        rounds = [
            end_to_end(args.nodes, args.pods, Path(folder), loader)
            for _ in range(args.rounds)
            for loader in ("c", "pure")
        ]
    for loader in ("c", "pure"):
        mine = [r for r in rounds if r["loader"] == loader]
        print(json.dumps({"end_to_end": loader, "rounds": mine}))
    ratios = sorted(c["wall_s"] / p["wall_s"] for c, p in zip(rounds[0::2], rounds[1::2], strict=True))
    print(json.dumps({"c_over_pure_wall_median": round(ratios[len(ratios) // 2], 3)}))


if __name__ == "__main__":
    main()
