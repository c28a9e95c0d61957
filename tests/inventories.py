"""Inventories made the way a cluster makes them: Node objects carrying the capability annotation the node
agent writes, gathered from the recorded NVML machines (tests/fixtures/nvml/)."""

import json
from pathlib import Path

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


# -- the shipped example of a measured cluster ------------------------------------------------------

MEASURED_EXAMPLE = Path(__file__).parent.parent / "examples" / "inventories" / "generic-measured.yaml"

_MEASURED_HEADER = """\
# Sample inventory for the 'generic' cloud map with the node agent running: `kubectl get nodes,pods -A
# -o yaml`, trimmed to what gpuport reads. Made by tests/inventories.py (`python -m tests.inventories`)
# from the recorded machines in tests/fixtures/nvml/, each citing its public nvidia-smi source: l4-0
# (l4-2-memory-nearly-full), t4-0 (t4-1-time-sliced-five-pods), a100-mig-0 (a100-80gb-pcie-mig-balanced;
# its pod UIDs are the fixture's made-up ones) and pcie-0 (pcie-8-pix-phb-two-numa: a real PCIe/NUMA
# layout whose GPUs stand in as T4s, no usage recorded). The gpuport.io/capability annotation is what
# the agent gathers and measures there; the Pods are made up to match the processes. l40s-0 has no
# agent: only its device plugin's allocatable and GFD's labels. Try:
#   gpuport usage --inventory examples/inventories/generic-measured.yaml
#   gpuport explain --inventory examples/inventories/generic-measured.yaml examples/manifests/multi-gpu.yaml
"""


def _measured_node(name, record_name, labels, allocatable):
    from webhook.nodeagent.cgroup import pod_uid_from_cgroup
    from webhook.nodeagent.labels import gfd_labels, gpuport_labels
    from webhook.nodeagent.measure import measure_devices
    from webhook.nodeagent.util_eff import usage_summary

    nvml = FakeNVML.load(record_name)
    record = gather(nvml, CATALOGUE)
    # As the agent with host PIDs attributes a process to its pod: through /proc/<pid>/cgroup.
    devices = measure_devices(
        nvml, record["gpus"], lambda pid: pod_uid_from_cgroup(nvml.read_cgroup(pid) or "")
    )
    record["usage"] = usage_summary(devices)
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                **gfd_labels(record),
                **gpuport_labels(record),
                **labels,
            },
            "annotations": {"gpuport.io/capability": json.dumps(record, sort_keys=True)},
        },
        "status": {"allocatable": allocatable},
    }
    return node, devices


def _example_pod(name, node, resource, uid, namespace="ml"):
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": uid},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "main", "image": "example", "resources": {"limits": {resource: "1"}}}],
        },
        "status": {"phase": "Running"},
    }


def measured_example():
    """The example inventory's documents: Nodes with agent records from the fixtures, their Pods."""
    items, pods = [], []
    l4, _ = _measured_node("l4-0", "l4-2-memory-nearly-full", {}, {"nvidia.com/gpu": "2"})
    items.append(l4)
    # The source's two training workers; it names no pods, so their processes carry no pod UID.
    for i in range(2):
        pods.append(
            _example_pod(f"train-{i}", "l4-0", "nvidia.com/gpu", f"00000000-0000-4000-8000-00000000000{i}")
        )
    sharing = {
        "nvidia.com/gpu.product": "Tesla-T4-SHARED",  # GFD's name for a time-sliced GPU
        "nvidia.com/gpu.replicas": "5",
        "nvidia.com/gpu.sharing-strategy": "time-slicing",
    }
    t4, devices = _measured_node("t4-0", "t4-1-time-sliced-five-pods", sharing, {"nvidia.com/gpu": "5"})
    items.append(t4)
    uids = sorted({p["pod_uid"] for d in devices for p in d["processes"] if p["pod_uid"]})
    pods += [_example_pod(f"web-{i}", "t4-0", "nvidia.com/gpu", uid) for i, uid in enumerate(uids)]
    mig_labels = {"nvidia.com/mig.strategy": "mixed"}
    mig, devices = _measured_node(
        "a100-mig-0",
        "a100-80gb-pcie-mig-balanced",
        mig_labels,
        {"nvidia.com/mig-3g.40gb": "1", "nvidia.com/mig-2g.20gb": "1", "nvidia.com/mig-1g.10gb": "2"},
    )
    items.append(mig)
    seen = set()
    for device in devices:
        for process in device["processes"]:
            uid = process["pod_uid"]
            if uid and uid not in seen:
                seen.add(uid)
                resource = f"nvidia.com/mig-{device['mig_profile']}"
                pods.append(_example_pod(f"infer-{len(seen) - 1}", "a100-mig-0", resource, uid))
    pcie, _ = _measured_node("pcie-0", "pcie-8-pix-phb-two-numa", {}, {"nvidia.com/gpu": "8"})
    items.append(pcie)
    items.append(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": "l40s-0",
                "labels": {
                    "kubernetes.io/hostname": "l40s-0",
                    "nvidia.com/gpu.product": "NVIDIA-L40S",
                    "nvidia.com/gpu.count": "4",
                },
            },
            "status": {"allocatable": {"nvidia.com/gpu": "4"}},
        }
    )
    pods.append(_example_pod("render-0", "l40s-0", "nvidia.com/gpu", "00000000-0000-4000-8000-000000000010"))
    return {"apiVersion": "v1", "kind": "List", "items": items + pods}


def measured_example_text():
    return _MEASURED_HEADER + yaml.safe_dump(measured_example(), sort_keys=False, width=100)


if __name__ == "__main__":
    MEASURED_EXAMPLE.write_text(measured_example_text())
