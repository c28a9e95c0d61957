"""Inventories made the way a cluster makes them: Node objects carrying the capability annotation the node
agent writes, gathered from the recorded NVML machines (tests/fixtures/nvml/)."""

import json

import yaml

from tests.fakenvml import FakeNVML
from tests.helpers import context
from webhook.nodeagent.gather import gather

CATALOGUE = context().dialects.catalogue


def agent_node(name, record_name, labels=None):
    record = gather(FakeNVML.load(record_name), CATALOGUE)
    gpus = str(record["healthy_gpu_count"])
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"gpuport.io/nvlink-domain-size": str(record["nvlink_domain_size"]), **(labels or {})},
            "annotations": {"gpuport.io/capability": json.dumps(record)},
        },
        "status": {"allocatable": {"nvidia.com/gpu": gpus}},
    }


def write_inventory(tmp_path, *nodes):
    path = tmp_path / "nodes.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": list(nodes)}))
    return path


def mixed_cluster(tmp_path):
    return write_inventory(
        tmp_path,
        agent_node("h100-a", "h100-sxm-8-nvswitch"),
        agent_node("h100-b", "h100-sxm-8-nvswitch"),
        agent_node("a100-a", "a100-pcie-8-two-numa"),
    )
