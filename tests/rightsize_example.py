"""The shipped right-sizing example (examples/inventories/generic-rightsize.yaml), made the way a cluster
makes it: the node agent sampling a recorded machine (tests/fixtures/nvml/a100-80gb-pcie-2-triton-serving,
from a public nvidia-smi capture) every five minutes for a week, its peaks on the Node, and the two
Triton pods that ran there. tests/commands/test_rightsize_cli.py holds the shipped file to this."""

import json

import yaml

from tests.fakenvml import FakeNVML
from tests.helpers import context
from tests.nodeagent.fakecore import FakeCore
from webhook.core.vocabulary.topology import USAGE_PEAKS_ANNOTATION
from webhook.nodeagent.agent import NodeAgent
from webhook.nodeagent.cgroup import pod_uid_reader

FIXTURE = "a100-80gb-pcie-2-triton-serving"
START = 1_795_478_400  # 2026-11-24T00:00:00Z
END = START + 7 * 86400  # 2026-12-01T00:00:00Z: `--at` in the README
PERIOD = 300
PODS = {  # pod UID (the fixture's cgroups) → (Deployment, ReplicaSet hash)
    "9e1f0a2b-3c4d-4e5f-8a6b-7c8d9e0f1a2b": ("triton-large", "6f7c9d"),
    "a02b1c3d-4e5f-4061-9b7c-8d9e0f1a2b3c": ("triton-small", "84b2e1"),
}


def sampled_peaks() -> dict:
    fake = FakeNVML.load(FIXTURE)
    now = [float(START)]
    agent = NodeAgent(
        fake,
        context().dialects.catalogue,
        FakeCore(),
        "gpu-a100-1",
        interval=PERIOD,
        pod_of=pod_uid_reader(fake.read_cgroup),
        wall_clock=lambda: now[0],
    )
    while now[0] < END:
        agent.record()
        now[0] += PERIOD
    return agent.peaks


def example_cluster() -> str:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "gpu-a100-1",
            "labels": {"nvidia.com/gpu.product": "NVIDIA-A100-80GB-PCIe", "nvidia.com/gpu.count": "2"},
            "annotations": {
                USAGE_PEAKS_ANNOTATION: json.dumps(sampled_peaks(), sort_keys=True, separators=(",", ":"))
            },
        },
        "status": {"allocatable": {"nvidia.com/gpu": "2"}},
    }
    pods = []
    for uid, (deployment, suffix) in PODS.items():
        replicaset = f"{deployment}-{suffix}"
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{replicaset}-x7k2p",
                    "namespace": "serving",
                    "uid": uid,
                    "labels": {"app": deployment, "pod-template-hash": suffix},
                    "ownerReferences": [
                        {
                            "apiVersion": "apps/v1",
                            "kind": "ReplicaSet",
                            "name": replicaset,
                            "controller": True,
                        }
                    ],
                },
                "spec": {
                    "nodeName": "gpu-a100-1",
                    "containers": [
                        {
                            "name": "triton",
                            "image": "nvcr.io/nvidia/tritonserver:25.04-py3",
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                        }
                    ],
                },
                "status": {"phase": "Running"},
            }
        )
    head = (
        "# `kubectl get nodes,pods -A -o yaml` of a small cluster after a week: the node agent's peaks\n"
        "# for two Triton pods, from a public nvidia-smi capture (made by tests/rightsize_example.py).\n"
    )
    return head + yaml.safe_dump(
        {"apiVersion": "v1", "kind": "List", "items": [node, *pods]}, sort_keys=False
    )


if __name__ == "__main__":
    print(example_cluster(), end="")
