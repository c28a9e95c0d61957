"""The node agent on recorded machines: NVML faked at the function level, the real gathering code."""

import json
from types import SimpleNamespace

import pytest

from tests.fakenvml import FakeNVML, Handle
from tests.helpers import context
from tests.nodeagent.fakecore import FakeCore
from webhook.core.vocabulary.topology import best_cost
from webhook.nodeagent.agent import NodeAgent
from webhook.nodeagent.gather import gather
from webhook.nodeagent.labels import (
    CAPABILITY_ANNOTATION,
    MANAGED_ANNOTATION,
    desired_metadata,
    gpuport_labels,
)

CATALOGUE = context().dialects.catalogue


def record_of(name, **kw):
    return gather(FakeNVML.load(name), CATALOGUE, lambda node: {0: "0-47", 1: "48-95"}.get(node), **kw)


def test_h100_nvswitch_node():
    record = record_of("h100-sxm-8-nvswitch")
    assert record["gpu_count"] == 8 and record["healthy_gpu_count"] == 8
    gpu = record["gpus"][0]
    assert (gpu["model"], gpu["memory_mib"], gpu["compute_capability"], gpu["family"]) == (
        "H100-80GB",
        81559,
        "9.0",
        "hopper",
    )
    assert gpu["pci_device_id"] == "0x233010DE"
    assert gpu["mig"]["mode"] == "disabled"
    assert [p["slices"] for p in gpu["mig"]["profiles"]] == [7, 1]  # by profile id: 7-slice is id 0
    assert record["nvlink_domains"] == [list(range(8))]
    assert record["nvlink_domain_size"] == 8
    assert record["numa"] == {
        "0": {"gpus": [0, 1, 2, 3], "cpus": "0-47"},
        "1": {"gpus": [4, 5, 6, 7], "cpus": "48-95"},
    }
    assert record["gpus_per_numa_node"] == 4
    assert record["driver_version"] == "550.54.15" and record["cuda_driver_version"] == "12.4"
    assert best_cost(record["topology"], 8) == (28, list(range(8)))  # 28 pairs × NVLink hop 1


def test_a100_pcie_node_in_two_numa_nodes_without_nvlink():
    record = record_of("a100-pcie-8-two-numa")
    assert record["nvlink_domains"] == [] and record["nvlink_domain_size"] == 0
    matrix = record["topology"]
    assert matrix[0][1] == "PCIE_SWITCH" and matrix[0][2] == "NUMA" and matrix[0][4] == "SYSTEM"
    assert best_cost(matrix, 2) == (2, [0, 1])  # a PCIe-switch pair
    assert best_cost(matrix, 4)[0] == 2 + 2 + 4 * 3  # two switch pairs in one NUMA node
    assert best_cost(matrix, 8)[0] == 4 * 2 + 8 * 3 + 16 * 4  # switch pairs, same-NUMA pairs, cross-socket
    assert record["gpus"][0]["model"] == "A100-40GB"
    assert record["cuda_driver_version"] == "12.2"


def test_h200_mig_capable_with_numa_unknown():
    record = record_of("h200-1-mig-capable-off")
    (gpu,) = record["gpus"]
    assert gpu["model"] == "H200" and gpu["numa_node"] is None
    assert gpu["mig"]["mode"] == "disabled"
    assert {(p["slices"], p["memory_mib"]) for p in gpu["mig"]["profiles"]} == {
        (1, 16384),
        (3, 71680),
        (7, 143360),
    }
    assert record["numa"] == {} and record["gpus_per_numa_node"] is None
    assert gpu["health"] == {"healthy": True, "reasons": [], "ecc_uncorrected": 0}


def test_a_gpu_failing_ecc_is_unhealthy_and_counted_out():
    record = record_of("a100-sxm-4-one-ecc-failing")
    assert record["healthy_gpu_count"] == 3
    bad = record["gpus"][2]["health"]
    assert bad["healthy"] is False
    assert bad["reasons"] == ["4 uncorrected ECC errors", "row remapping pending"]
    assert gpuport_labels(record)["gpuport.io/healthy-gpus"] == "3"


def test_no_driver_says_so_and_does_not_crash():
    record = record_of("no-driver")
    assert record["gpus"] == [] and record["gpu_count"] == 0
    assert record["error"].startswith("no NVIDIA driver or GPU")
    assert gpuport_labels(record) == {"gpuport.io/gpu-present": "false", "gpuport.io/healthy-gpus": "0"}


def test_unsupported_calls_become_unknown_not_crashes():
    fake = FakeNVML.load("h100-sxm-8-nvswitch")
    for gpu in fake.record["gpus"]:
        gpu["numa_node"] = None
        gpu["ecc_uncorrected"] = None
        gpu["remapped_rows"] = None
        gpu["mig"] = None
    record = gather(fake, CATALOGUE)
    assert all(g["mig"]["mode"] == "unsupported" and g["numa_node"] is None for g in record["gpus"])
    assert record["healthy_gpu_count"] == 8


def test_agent_publishes_gfd_style_and_gpuport_labels_then_only_on_change():
    core = FakeCore(labels={"kubernetes.io/hostname": "n1"})
    agent = NodeAgent(FakeNVML.load("h100-sxm-8-nvswitch"), CATALOGUE, core, "n1")
    patch = agent.publish_once()
    labels = patch["metadata"]["labels"]
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert labels["nvidia.com/gpu.count"] == "8"
    assert labels["nvidia.com/cuda.runtime-version.minor"] == "4"
    assert labels["gpuport.io/nvlink-domain-size"] == "8"
    assert labels["gpuport.io/gpus-per-numa-node"] == "4"
    assert labels["gpuport.io/gpu-model"] == "H100-80GB"
    capability = json.loads(core.metadata.annotations[CAPABILITY_ANNOTATION])
    assert capability["nvlink_domain_size"] == 8
    assert agent.publish_once() == {}  # nothing changed: no API write
    assert len(core.patches) == 1


def test_agent_never_fights_gpu_feature_discovery():
    gfd = {"nvidia.com/gfd.timestamp": "1700000000", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-GFD"}
    core = FakeCore(labels=gfd)
    NodeAgent(FakeNVML.load("h100-sxm-8-nvswitch"), CATALOGUE, core, "n1").publish_once()
    assert core.metadata.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-GFD"
    assert "nvidia.com/gpu.count" not in core.metadata.labels
    assert core.metadata.labels["gpuport.io/healthy-gpus"] == "8"


def test_labels_someone_else_set_are_not_overwritten_but_our_own_are_removed_when_stale():
    record = record_of("h100-sxm-8-nvswitch")
    patch = desired_metadata(record, {"nvidia.com/gpu.family": "custom"}, {})
    assert "nvidia.com/gpu.family" not in patch["metadata"]["labels"]
    ours = {"gpuport.io/gpus-per-numa-node": "4"}
    patch = desired_metadata(
        record_of("h200-1-mig-capable-off"), ours, {MANAGED_ANNOTATION: json.dumps(sorted(ours))}
    )
    assert patch["metadata"]["labels"]["gpuport.io/gpus-per-numa-node"] is None


def test_a_critical_xid_marks_the_gpu_unhealthy_and_application_xids_do_not():
    fake = FakeNVML.load("a100-sxm-4-one-ecc-failing")
    agent = NodeAgent(fake, CATALOGUE, FakeCore(), "n1", sleep=lambda s: None)
    agent.wait_for_xid_or(5)  # XID 13 (application) is skipped, XID 79 (fell off the bus) is not
    assert agent.unhealthy == {3: "critical XID 79"}
    record = agent.record()
    assert record["healthy_gpu_count"] == 2
    assert record["gpus"][3]["health"]["reasons"] == ["critical XID 79"]


def test_the_gpu_of_an_xid_is_found_by_uuid_and_an_unnamed_one_marks_every_gpu():

    import pynvml

    fake = FakeNVML.load("a100-sxm-4-one-ecc-failing")
    # pynvml hands out a new pointer per call: the event's handle is never the one an index gives.
    assert fake.nvmlDeviceGetHandleByIndex(1) != fake.nvmlDeviceGetHandleByIndex(1)
    fake.events = [(1, 48)]  # XID 48: a double-bit ECC error
    agent = NodeAgent(fake, CATALOGUE, FakeCore(), "n1", sleep=lambda s: None)
    agent.wait_for_xid_or(5)
    assert agent.unhealthy == {1: "critical XID 48"}

    # Another GPU stops answering once the event arrives: the event's GPU is still named, alone.
    fake = FakeNVML.load("a100-sxm-4-one-ecc-failing")
    fake.events = [(2, 79)]
    waited = fake.nvmlEventSetWait

    def wait_then_lose_gpu_0(events, timeout_ms):
        lost = pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        fake.nvmlDeviceGetHandleByIndex = lambda i: (_ for _ in ()).throw(lost) if i == 0 else Handle(i)
        return waited(events, timeout_ms)

    fake.nvmlEventSetWait = wait_then_lose_gpu_0
    agent = NodeAgent(fake, CATALOGUE, FakeCore(), "n1", sleep=lambda s: None)
    agent.wait_for_xid_or(5)
    assert agent.unhealthy == {2: "critical XID 79"}

    unnamed = SimpleNamespace(device=None, eventData=79, eventType=pynvml.nvmlEventTypeXidCriticalError)
    fake.nvmlEventSetWait = lambda events, timeout_ms: unnamed
    agent = NodeAgent(fake, CATALOGUE, FakeCore(), "n1", sleep=lambda s: None)
    agent.wait_for_xid_or(5)
    assert agent.unhealthy == {i: "critical XID 79" for i in range(4)}  # never dropped


def test_cli_once_print_needs_no_api(capsys, monkeypatch):
    import pynvml

    from webhook.commands.cli import main

    fake = FakeNVML.load("h200-1-mig-capable-off")
    for name in dir(fake):
        if name.startswith("nvml"):
            monkeypatch.setattr(pynvml, name, getattr(fake, name))
    assert main(["node-agent", "--once", "--print"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["gpus"][0]["model"] == "H200"


@pytest.mark.parametrize(
    "name",
    [
        "h100-sxm-8-nvswitch",
        "a100-pcie-8-two-numa",
        "h200-1-mig-capable-off",
        "a100-sxm-4-one-ecc-failing",
        "no-driver",
        "a100-80gb-pcie-mig-balanced",
        "t4-1-time-sliced-five-pods",
        "l4-2-memory-nearly-full",
        "pcie-8-pix-phb-two-numa",
    ],
)
def test_every_record_gathers_into_json(name):
    json.dumps(record_of(name))
