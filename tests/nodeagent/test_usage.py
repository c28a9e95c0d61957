"""Measured usage and Util_eff, driven through the real agent (gather → record → labels/annotation →
/metrics) over recorded machines. Every expected figure is worked out here from the fixture's numbers."""

import json

import pynvml
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.fakenvml import FakeNVML
from tests.helpers import context
from tests.nodeagent.fakecore import FakeCore
from webhook.core.vocabulary.topology import CAPABILITY_ANNOTATION, SHARED_MEMORY_FULL, best_cost
from webhook.nodeagent.agent import NodeAgent
from webhook.nodeagent.cgroup import pod_uid_reader
from webhook.nodeagent.metrics import usage_registry
from webhook.nodeagent.util_eff import parse_memory_fill

CATALOGUE = context().dialects.catalogue
MIB = 1024 * 1024


def agent_on(fake, host_pid=True, memory_fill=0.9):
    pod_of = pod_uid_reader(fake.read_cgroup) if host_pid else None
    return NodeAgent(fake, CATALOGUE, FakeCore(), "node-a", memory_fill=memory_fill, pod_of=pod_of)


def scrape(agent):
    """/metrics as Prometheus reads it: {(name, sorted label items): value}."""
    text = generate_latest(usage_registry(agent.node_name, lambda: agent.last_record)).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def labels(**kw):
    return tuple(sorted(kw.items()))


def dev(gpu, uuid, model, mig=""):
    return {"node": "node-a", "gpu": str(gpu), "uuid": uuid, "model": model, "mig_profile": mig}


# The A100 80GB PCIe with MIG all-balanced (fixture a100-80gb-pcie-mig-balanced), MiB per instance:
#   GI 1  3g.40gb  1442 / 40192  processes 3817640: 648 (pod4), 3817645: 30 (MPS daemon), 3817656: 648 (pod5)
#   GI 5  2g.20gb  1513 / 19968  processes 3817655: 714 (pod2), 3817659: 714 (pod3)
#   GI 13 1g.10gb  1376 /  9728  processes 3817658: 664, 3817700: 664 (pod1, two containers)
#   GI 14 1g.10gb  1398 /  9728  processes 3817404: 662, 3817454: 662 (pod0), 3817406: 30 (MPS daemon)
#   the GPU itself: 5728 / 81920 (it is represented by its instances, never counted itself)
A100_USED = 1442 + 1513 + 1376 + 1398  # 5729
A100_TOTAL = 40192 + 19968 + 9728 + 9728  # 79616
POD = {
    "pod0": "1c7e2a40-0b5f-4d8e-9a61-3f2b7c9d0e11",
    "pod1": "2d8f3b51-1c6a-4e9f-8b72-4a3c8dae1f22",
    "pod2": "3e9a4c62-2d7b-4fa0-9c83-5b4d9ebf2a33",
    "pod3": "4fab5d73-3e8c-40b1-8d94-6c5eafc03b44",
    "pod4": "5abc6e84-4f9d-41c2-9ea5-7d6fb0d14c55",
    "pod5": "6bcd7f95-5aae-42d3-8fb6-8e70c1e25d66",
    "mps-3g": "7cde80a6-6bbf-43e4-a0c7-9f81d2f36e77",
    "mps-1g": "8def91b7-7cc0-44f5-b1d8-a092e3047f88",
}


def test_a_mig_node_reports_each_instance_and_util_eff_counts_the_parent_gpu_once():
    agent = agent_on(FakeNVML.load("a100-80gb-pcie-mig-balanced"))
    agent.publish_once()
    record = json.loads(agent.core_api.metadata.annotations[CAPABILITY_ANNOTATION])
    usage = record["usage"]
    assert usage["memory_fill_limit"] == 0.9
    # Util_eff: memory 5729 / 79616 = 0.07196 → 0.072 (counting the GPU too would give
    # (5729 + 5728) / (79616 + 81920) = 0.0709 → 0.071); compute: no GPU answered.
    assert usage["util_eff"] == {"compute": None, "memory": round(A100_USED / A100_TOTAL, 3)}
    assert usage["util_eff"]["memory"] == 0.072
    # One device per MIG instance, none for the MIG-enabled GPU; NVML gives no utilisation on MIG.
    # Profile names: ⌈share·8⌉/8 × 80 GiB: 40192/81920 → 4/8 → 40, 19968/81920 → 2/8 → 20, 9728 → 1/8 → 10.
    assert [
        (d["index"], d["uuid"], d["model"], d["mig_profile"], d["memory_used_mib"], d["memory_total_mib"])
        for d in usage["devices"]
    ] == [
        (0, "MIG-a100-80gb-0000-gi1", "A100-80GB", "3g.40gb", 1442, 40192),
        (0, "MIG-a100-80gb-0000-gi5", "A100-80GB", "2g.20gb", 1513, 19968),
        (0, "MIG-a100-80gb-0000-gi13", "A100-80GB", "1g.10gb", 1376, 9728),
        (0, "MIG-a100-80gb-0000-gi14", "A100-80GB", "1g.10gb", 1398, 9728),
    ]
    assert all(d["compute_percent"] is None for d in usage["devices"])
    assert [
        [(p["pid"], p["memory_mib"], p["pod_uid"]) for p in d["processes"]] for d in usage["devices"]
    ] == [
        [(3817640, 648, POD["pod4"]), (3817645, 30, POD["mps-3g"]), (3817656, 648, POD["pod5"])],
        [(3817655, 714, POD["pod2"]), (3817659, 714, POD["pod3"])],
        [(3817658, 664, POD["pod1"]), (3817700, 664, POD["pod1"])],
        [(3817404, 662, POD["pod0"]), (3817406, 30, POD["mps-1g"]), (3817454, 662, POD["pod0"])],
    ]
    # No whole GPU without MIG: a share lands nowhere here, so the node is not "full".
    assert usage["shared_memory_full"] is False
    assert agent.core_api.metadata.labels[SHARED_MEMORY_FULL] == "false"
    # The annotation stays compact JSON.
    assert ": " not in agent.core_api.metadata.annotations[CAPABILITY_ANNOTATION]

    m = scrape(agent)
    gi1 = dev(0, "MIG-a100-80gb-0000-gi1", "A100-80GB", "3g.40gb")
    gi14 = dev(0, "MIG-a100-80gb-0000-gi14", "A100-80GB", "1g.10gb")
    assert m[("gpuport_gpu_memory_used_bytes", labels(**gi1))] == 1442 * MIB
    assert m[("gpuport_gpu_memory_total_bytes", labels(**gi1))] == 40192 * MIB
    assert m[("gpuport_gpu_memory_used_bytes", labels(**gi14))] == 1398 * MIB
    assert m[("gpuport_gpu_processes", labels(**gi14))] == 3
    assert not any(name == "gpuport_gpu_compute_utilization_ratio" for name, _ in m)  # null, not 0
    assert (
        m[("gpuport_gpu_process_memory_bytes", labels(**gi14, pid="3817404", pod_uid=POD["pod0"]))]
        == 662 * MIB
    )
    assert m[
        ("gpuport_gpu_util_eff_ratio", labels(node="node-a", gpu="0", model="A100-80GB", resource="memory"))
    ] == (pytest.approx(A100_USED / A100_TOTAL))
    assert m[("gpuport_node_gpu_util_eff_ratio", labels(node="node-a", resource="memory"))] == 0.072
    assert ("gpuport_node_gpu_util_eff_ratio", labels(node="node-a", resource="compute")) not in m
    # Per pod: pod0 662 + 662, pod1 664 + 664, the MPS daemons 30 each.
    pods = {
        dict(k)["pod_uid"]: v / MIB for (name, k), v in m.items() if name == "gpuport_pod_gpu_memory_bytes"
    }
    assert pods == {
        POD["pod0"]: 662 + 662,
        POD["pod1"]: 664 + 664,
        POD["pod2"]: 714,
        POD["pod3"]: 714,
        POD["pod4"]: 648,
        POD["pod5"]: 648,
        POD["mps-3g"]: 30,
        POD["mps-1g"]: 30,
    }
    assert m[("gpuport_node_shared_memory_full", labels(node="node-a"))] == 0
    assert m[("gpuport_node_shared_memory_fill_limit_ratio", labels(node="node-a"))] == 0.9


# The T4 time-sliced by five pods (fixture t4-1-time-sliced-five-pods): 1577 / 15360 MiB, 100 %, five
# processes of 315 MiB; four PIDs' cgroups name a pod (cgroupfs driver), the fifth's /proc entry is gone.
T4 = dev(0, "GPU-t4-0000", "T4")
T4_PODS = [
    "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d",
    "1b2c3d4e-5f60-4b7c-9d8e-0f1a2b3c4d5e",
    "2c3d4e5f-6071-4c8d-ae9f-1a2b3c4d5e6f",
    "3d4e5f60-7182-4d9e-bfa0-2b3c4d5e6f70",
    None,
]


def test_a_time_sliced_gpu_reports_its_processes_by_pod_and_its_util_eff():
    agent = agent_on(FakeNVML.load("t4-1-time-sliced-five-pods"))
    agent.publish_once()
    usage = json.loads(agent.core_api.metadata.annotations[CAPABILITY_ANNOTATION])["usage"]
    (t4,) = usage["devices"]
    assert (t4["uuid"], t4["model"], t4["mig_profile"], t4["memory_used_mib"], t4["memory_total_mib"]) == (
        "GPU-t4-0000",
        "T4",
        None,
        1577,
        15360,
    )
    assert t4["compute_percent"] == 100
    assert t4["processes"] == [
        {"pid": pid, "memory_mib": 315, "pod_uid": uid}
        for pid, uid in zip([3666, 3679, 3992, 4119, 4324], T4_PODS, strict=True)
    ]
    # compute 100 / 100 = 1.0; memory 1577 / 15360 = 0.10267 → 0.103
    assert (
        usage["util_eff"]
        == {"compute": 1.0, "memory": round(1577 / 15360, 3)}
        == {"compute": 1.0, "memory": 0.103}
    )
    # 1577 < 0.9 × 15360 = 13824: room for another share.
    assert usage["shared_memory_full"] is False
    assert agent.core_api.metadata.labels[SHARED_MEMORY_FULL] == "false"

    m = scrape(agent)
    assert m[("gpuport_gpu_memory_used_bytes", labels(**T4))] == 1577 * MIB
    assert m[("gpuport_gpu_memory_total_bytes", labels(**T4))] == 15360 * MIB
    assert m[("gpuport_gpu_compute_utilization_ratio", labels(**T4))] == 1.0
    assert m[("gpuport_gpu_processes", labels(**T4))] == 5
    assert m[("gpuport_gpu_process_memory_bytes", labels(**T4, pid="4324", pod_uid=""))] == 315 * MIB
    for pid, uid in zip(["3666", "3679", "3992", "4119"], T4_PODS, strict=False):
        assert m[("gpuport_gpu_process_memory_bytes", labels(**T4, pid=pid, pod_uid=uid))] == 315 * MIB
    for resource, value in (("compute", 1.0), ("memory", 1577 / 15360)):
        gpu = labels(node="node-a", gpu="0", model="T4", resource=resource)
        assert m[("gpuport_gpu_util_eff_ratio", gpu)] == pytest.approx(value)
    assert m[("gpuport_node_gpu_util_eff_ratio", labels(node="node-a", resource="memory"))] == 0.103
    assert m[("gpuport_node_shared_memory_full", labels(node="node-a"))] == 0


# Two L4s nearly full (fixture l4-2-memory-nearly-full): 21172 and 21520 of 23034 MiB, both 100 %.
def test_a_node_whose_every_shareable_gpu_is_past_kappa_is_labelled_shared_memory_full():
    agent = agent_on(FakeNVML.load("l4-2-memory-nearly-full"))
    agent.publish_once()
    usage = agent.last_record["usage"]
    assert [
        (d["memory_used_mib"], d["memory_total_mib"], d["compute_percent"]) for d in usage["devices"]
    ] == [
        (21172, 23034, 100),
        (21520, 23034, 100),
    ]
    assert [
        [(p["pid"], p["memory_mib"], p["pod_uid"]) for p in d["processes"]] for d in usage["devices"]
    ] == [
        [(187110, 21152, None)],  # no cgroup recorded: not a pod's
        [(187111, 21500, None)],
    ]
    # memory (21172 + 21520) / (23034 + 23034) = 42692 / 46068 = 0.92672 → 0.927;
    # compute (100 + 100) / 2 / 100 = 1.0
    assert (
        usage["util_eff"]
        == {"compute": 1.0, "memory": round(42692 / 46068, 3)}
        == {"compute": 1.0, "memory": 0.927}
    )
    # κ = 0.9: 0.9 × 23034 = 20730.6 ≤ 21172 and ≤ 21520 → full.
    assert usage["shared_memory_full"] is True
    assert agent.core_api.metadata.labels[SHARED_MEMORY_FULL] == "true"
    m = scrape(agent)
    assert m[("gpuport_node_shared_memory_full", labels(node="node-a"))] == 1
    assert m[("gpuport_node_gpu_util_eff_ratio", labels(node="node-a", resource="compute"))] == 1.0
    assert m[("gpuport_node_gpu_util_eff_ratio", labels(node="node-a", resource="memory"))] == 0.927
    assert m[("gpuport_gpu_memory_used_bytes", labels(**dev(1, "GPU-l4-0001", "L4")))] == 21520 * MIB

    # κ = 0.92: 0.92 × 23034 = 21191.28 > 21172, so GPU 0 still takes a share: not full, and the label
    # the agent set before is turned back to "false".
    agent.memory_fill = 0.92
    agent.publish_once()
    assert agent.last_record["usage"]["shared_memory_full"] is False
    assert agent.last_record["usage"]["memory_fill_limit"] == 0.92
    assert agent.core_api.metadata.labels[SHARED_MEMORY_FULL] == "false"


def test_node_compute_util_eff_is_the_mean_over_the_gpus_that_answered():
    fake = FakeNVML.load("l4-2-memory-nearly-full")
    fake.record["gpus"][1]["utilization"] = {"gpu": 40}
    assert agent_on(fake).record()["usage"]["util_eff"]["compute"] == (100 + 40) / 2 / 100  # 0.7
    del fake.record["gpus"][1]["utilization"]  # GPU 1 no longer answers: GPU 0 alone
    assert agent_on(fake).record()["usage"]["util_eff"]["compute"] == 100 / 100


def test_a_process_whose_memory_nvml_does_not_report_is_null_not_zero_and_left_out_of_the_sums():
    fake = FakeNVML.load("t4-1-time-sliced-five-pods")
    fake.record["gpus"][0]["processes"][0]["used_memory_bytes"] = None  # NVML_VALUE_NOT_AVAILABLE
    agent = agent_on(fake)
    usage = agent.record()["usage"]
    first = usage["devices"][0]["processes"][0]
    assert first == {"pid": 3666, "memory_mib": None, "pod_uid": T4_PODS[0]}  # null, not 0
    # Util_eff reads the device's memory (nvmlDeviceGetMemoryInfo), which the missing figure does not touch.
    assert usage["util_eff"]["memory"] == 0.103
    m = scrape(agent)
    # Still counted as a process, but no memory sample (a 0 would claim it uses none) and no sum for its
    # pod, whose only process it is; the other pods' sums are their one process each, 315 MiB.
    assert m[("gpuport_gpu_processes", labels(**T4))] == 5
    assert ("gpuport_gpu_process_memory_bytes", labels(**T4, pid="3666", pod_uid=T4_PODS[0])) not in m
    pods = {dict(k)["pod_uid"]: v for (name, k), v in m.items() if name == "gpuport_pod_gpu_memory_bytes"}
    assert pods == {uid: 315 * MIB for uid in T4_PODS[1:4]}


def test_a_gpu_or_process_that_disappears_disappears_from_the_metrics():
    fake = FakeNVML.load("l4-2-memory-nearly-full")
    agent = agent_on(fake)
    agent.record()
    gpu1 = labels(**dev(1, "GPU-l4-0001", "L4"))
    assert ("gpuport_gpu_memory_used_bytes", gpu1) in scrape(agent)
    fake.record["gpus"].pop(1)  # GPU 1 is gone (e.g. fell off the bus and the node rebooted without it)
    agent.record()
    assert not any(dict(key).get("gpu") == "1" for _, key in scrape(agent))

    fake = FakeNVML.load("t4-1-time-sliced-five-pods")
    agent = agent_on(fake)
    agent.record()
    assert ("gpuport_gpu_process_memory_bytes", labels(**T4, pid="3992", pod_uid=T4_PODS[2])) in scrape(agent)
    fake.record["gpus"][0]["processes"] = [p for p in fake.record["gpus"][0]["processes"] if p["pid"] != 3992]
    agent.record()
    m = scrape(agent)
    assert not any(dict(key).get("pid") == "3992" for _, key in m)
    assert T4_PODS[2] not in {dict(k).get("pod_uid") for _, k in m}
    assert m[("gpuport_gpu_processes", labels(**T4))] == 4


def test_without_host_pids_processes_are_counted_but_not_attributed():
    agent = agent_on(FakeNVML.load("t4-1-time-sliced-five-pods"), host_pid=False)
    (t4,) = agent.record()["usage"]["devices"]
    assert [(p["pid"], p["memory_mib"], p["pod_uid"]) for p in t4["processes"]] == [
        (3666, 315, None),
        (3679, 315, None),
        (3992, 315, None),
        (4119, 315, None),
        (4324, 315, None),
    ]
    m = scrape(agent)
    assert m[("gpuport_gpu_processes", labels(**T4))] == 5
    assert not any(name == "gpuport_pod_gpu_memory_bytes" for name, _ in m)


def test_a_pcie_box_with_single_and_hostbridge_levels_gets_switch_and_host_bridge_links():
    fake = FakeNVML.load("pcie-8-pix-phb-two-numa")
    handle, ancestor = fake.nvmlDeviceGetHandleByIndex, fake.nvmlDeviceGetTopologyCommonAncestor
    assert ancestor(handle(0), handle(1)) == pynvml.NVML_TOPOLOGY_SINGLE  # nvidia-smi's PIX
    assert ancestor(handle(0), handle(2)) == pynvml.NVML_TOPOLOGY_HOSTBRIDGE  # PHB
    record = agent_on(fake).record()
    matrix = record["topology"]
    assert matrix[0] == [
        "SELF",
        "PCIE_SWITCH",
        "HOST_BRIDGE",
        "HOST_BRIDGE",
        "SYSTEM",
        "SYSTEM",
        "SYSTEM",
        "SYSTEM",
    ]
    assert matrix[6][7] == "PCIE_SWITCH" and matrix[5][6] == "HOST_BRIDGE" and matrix[3][4] == "SYSTEM"
    assert record["nvlink_domains"] == [] and record["nvlink_domain_size"] == 0
    assert record["gpus_per_numa_node"] == 4
    # Hop costs: PCIe switch 2, host bridge 3, cross-socket 4.
    assert best_cost(matrix, 2) == (2, [0, 1])
    assert best_cost(matrix, 4)[0] == 2 + 2 + 4 * 3  # two PIX pairs and four PHB pairs in one socket
    assert best_cost(matrix, 8)[0] == 4 * 2 + 8 * 3 + 16 * 4


def test_the_fake_answers_as_the_real_driver_does_on_mig():
    fake = FakeNVML.load("a100-80gb-pcie-mig-balanced")
    gpu = fake.nvmlDeviceGetHandleByIndex(0)
    # A new opaque handle per call, for GPUs and MIG devices alike.
    assert fake.nvmlDeviceGetMigDeviceHandleByIndex(gpu, 0) != fake.nvmlDeviceGetMigDeviceHandleByIndex(
        gpu, 0
    )
    mig = fake.nvmlDeviceGetMigDeviceHandleByIndex(gpu, 0)
    for handle in (gpu, mig):
        with pytest.raises(pynvml.NVMLError_NotSupported):
            fake.nvmlDeviceGetUtilizationRates(handle)
    with pytest.raises(pynvml.NVMLError_NoPermission):
        fake.nvmlDeviceGetComputeRunningProcesses(gpu)  # the aggregate needs privileges
    (first, *_) = fake.nvmlDeviceGetComputeRunningProcesses(mig)
    assert (first.pid, first.usedGpuMemory, first.gpuInstanceId) == (3817640, 648 * MIB, 1)
    assert fake.nvmlDeviceGetMemoryInfo(mig).total == 40192 * MIB
    with pytest.raises(pynvml.NVMLError_NotFound):
        fake.nvmlDeviceGetMigDeviceHandleByIndex(gpu, 4)  # four instances exist of the seven slots
    # Only the fields a record holds can be read: nvidia-smi showed no memory-controller utilisation.
    t4 = FakeNVML.load("t4-1-time-sliced-five-pods")
    rates = t4.nvmlDeviceGetUtilizationRates(t4.nvmlDeviceGetHandleByIndex(0))
    assert rates.gpu == 100 and not hasattr(rates, "memory")


def test_the_fake_s_answers_carry_only_the_fields_pynvml_s_own_structs_have():
    # Checked against the installed pynvml, not against the fake: a field the fake made up (or a name
    # the agent reads that the driver never sets) fails here, not on a node.
    def fields(struct):
        return {name for name, _ in struct._fields_}

    fake = FakeNVML.load("a100-80gb-pcie-mig-balanced")
    mig = fake.nvmlDeviceGetMigDeviceHandleByIndex(fake.nvmlDeviceGetHandleByIndex(0), 0)
    assert set(vars(fake.nvmlDeviceGetMemoryInfo(mig))) == fields(pynvml.c_nvmlMemory_t)
    for process in fake.nvmlDeviceGetComputeRunningProcesses(mig):
        assert set(vars(process)) <= fields(pynvml.c_nvmlProcessInfo_v3_t)
    t4 = FakeNVML.load("t4-1-time-sliced-five-pods")
    rates = t4.nvmlDeviceGetUtilizationRates(t4.nvmlDeviceGetHandleByIndex(0))
    assert set(vars(rates)) <= fields(pynvml.c_nvmlUtilization_t)
    attributes = fake.nvmlDeviceGetAttributes(mig)
    assert set(vars(attributes)) <= fields(pynvml.c_nvmlDeviceAttributes)


def test_kappa_comes_from_the_environment_and_a_bad_value_is_refused_clearly(monkeypatch):
    served = []
    monkeypatch.setattr("webhook.nodeagent.agent.serve_metrics", lambda registry, port: served.append(port))
    agent = agent_on(FakeNVML.load("l4-2-memory-nearly-full"), host_pid=False)
    agent.configure({"GPUPORT_SHARED_MEMORY_FILL": "0.95", "GPUPORT_HOST_PID": "true"})
    assert agent.memory_fill == 0.95 and agent.pod_of is not None and served == [9410]
    assert agent.record()["usage"]["shared_memory_full"] is False  # 0.95 × 23034 = 21882.3 > 21520
    agent.configure({"GPUPORT_METRICS_PORT": "9500"}, metrics=True)
    assert served == [9410, 9500] and agent.memory_fill == 0.9 and agent.pod_of is None
    agent.configure({}, metrics=False)
    assert served == [9410, 9500]
    for bad in ("0", "1.5", "-0.1", "ninety", "nan"):
        with pytest.raises(SystemExit, match=r"GPUPORT_SHARED_MEMORY_FILL must be a number greater than 0"):
            agent.configure({"GPUPORT_SHARED_MEMORY_FILL": bad}, metrics=False)
    with pytest.raises(SystemExit, match="GPUPORT_HOST_PID must be true or false"):
        agent.configure({"GPUPORT_HOST_PID": "yes"}, metrics=False)
    with pytest.raises(SystemExit, match="GPUPORT_METRICS_PORT must be a port number"):
        agent.configure({"GPUPORT_METRICS_PORT": "70000"}, metrics=False)
    assert parse_memory_fill("1") == 1.0


def test_a_node_without_gpus_gets_no_usage_and_no_shared_memory_label():
    agent = agent_on(FakeNVML.load("no-driver"))
    record = agent.record()
    assert "usage" not in record
    assert not any(name.startswith("gpuport_gpu_") for name, _ in scrape(agent))


def test_compute_instances_of_one_gpu_instance_count_its_memory_once():
    fake = FakeNVML.load("a100-80gb-pcie-mig-balanced")
    gi1 = fake.record["gpus"][0]["mig"]["instances"][0]
    # GI 1 (3g.40gb) split into two compute instances: a second MIG device on the same GPU instance,
    # whose memory NVML reports as the GPU instance's again.
    second = dict(gi1, uuid="MIG-a100-80gb-0000-gi1-ci1", processes=[])
    second["attributes"] = dict(gi1["attributes"], compute_instance_slices=1)
    fake.record["gpus"][0]["mig"]["instances"].insert(1, second)
    usage = agent_on(fake).record()["usage"]
    shared = usage["devices"][1]
    assert (shared["uuid"], shared["mig_profile"]) == ("MIG-a100-80gb-0000-gi1-ci1", "1c.3g.40gb")
    assert (shared["memory_used_mib"], shared["memory_total_mib"]) == (None, None)
    assert usage["util_eff"]["memory"] == round(A100_USED / A100_TOTAL, 3)  # still 5729 / 79616


def test_the_metrics_are_served_over_http_from_the_agent_s_own_registry():
    import urllib.request

    import prometheus_client

    from webhook.nodeagent.metrics import serve_metrics

    agent = agent_on(FakeNVML.load("t4-1-time-sliced-five-pods"))
    agent.record()
    server, thread = serve_metrics(usage_registry("node-a", lambda: agent.last_record), port=0)
    try:
        url = f"http://127.0.0.1:{server.server_port}/metrics"
        text = urllib.request.urlopen(url, timeout=5).read().decode()
    finally:
        server.shutdown()
        thread.join(timeout=5)
    samples = {
        (x.name, tuple(sorted(x.labels.items()))): x.value
        for family in text_string_to_metric_families(text)
        for x in family.samples
    }
    assert samples[("gpuport_gpu_memory_used_bytes", labels(**T4))] == 1577 * MIB
    # Not the process-global registry: nothing of gpuport's there.
    assert b"gpuport_gpu_" not in prometheus_client.generate_latest()


def test_the_node_is_patched_for_new_figures_at_most_every_usage_period_but_at_once_for_a_label():
    # Figures change every period on every node; writing each Node each minute is API-server load no
    # decision needs. The shared-memory-full label, which the webhook reads, is written when it flips.
    from webhook.nodeagent.agent import USAGE_EVERY

    fake = FakeNVML.load("l4-2-memory-nearly-full")
    now = [0.0]
    agent = NodeAgent(fake, CATALOGUE, FakeCore(), "node-a", memory_fill=0.9, clock=lambda: now[0])
    assert agent.publish_once()  # the first report
    first = agent.core_api.metadata.annotations[CAPABILITY_ANNOTATION]
    assert agent.core_api.metadata.labels[SHARED_MEMORY_FULL] == "true"

    device = fake.record["gpus"][0]
    device["memory_used_bytes"] -= 64 * MIB  # a process frees 64 MiB: still past κ
    now[0] = USAGE_EVERY - 1
    assert agent.publish_once() == {}
    assert agent.core_api.metadata.annotations[CAPABILITY_ANNOTATION] == first
    assert agent.last_record["usage"] != json.loads(first)["usage"]  # /metrics has the live figures
    now[0] = USAGE_EVERY
    assert agent.publish_once()["metadata"]["annotations"][CAPABILITY_ANNOTATION] != first

    for gpu in fake.record["gpus"]:  # memory freed below κ on every GPU: the label flips at once
        gpu["memory_used_bytes"] = 0
    now[0] += 1
    assert agent.publish_once()["metadata"]["labels"] == {SHARED_MEMORY_FULL: "false"}


def test_a_mig_instance_whose_profile_cannot_be_named_is_still_no_gpu_a_share_lands_on():
    fake = FakeNVML.load("a100-80gb-pcie-mig-balanced")
    for instance in fake.record["gpus"][0]["mig"]["instances"]:
        instance.pop("attributes", None)  # nvmlDeviceGetAttributes answers NotSupported
        instance["memory_used_bytes"] = instance["memory_bytes"]  # every instance full
    agent = agent_on(fake)
    agent.publish_once()
    usage = agent.last_record["usage"]
    assert {d["mig_profile"] for d in usage["devices"]} == {"unknown"}
    assert usage["shared_memory_full"] is False  # no whole GPU here: nothing a share could fill


def test_a_driver_older_than_the_bound_process_call_still_gets_its_node_published():
    # pynvml binds nvmlDeviceGetComputeRunningProcesses_v3; a driver before R510 lacks it, and pynvml
    # says so with NVMLLibraryMismatchError, which is not an NVMLError.
    fake = FakeNVML.load("t4-1-time-sliced-five-pods")

    def missing_v3(handle):
        raise pynvml.NVMLLibraryMismatchError(
            "Unversioned function called and the pyNVML version does not match"
        )

    fake.nvmlDeviceGetComputeRunningProcesses = missing_v3
    agent = agent_on(fake)
    patch = agent.publish_once()
    assert patch["metadata"]["labels"]["gpuport.io/gpu-present"] == "true"
    (t4,) = agent.last_record["usage"]["devices"]
    assert t4["processes"] == [] and t4["memory_used_mib"] == 1577  # the rest is still measured


def test_usage_that_cannot_be_measured_never_costs_the_node_its_labels(monkeypatch):
    from webhook.nodeagent import agent as agent_module

    def broken(*args):
        raise RuntimeError("a defect in measuring")

    monkeypatch.setattr(agent_module, "measure_devices", broken)
    agent = agent_on(FakeNVML.load("t4-1-time-sliced-five-pods"))
    patch = agent.publish_once()
    assert patch["metadata"]["labels"]["gpuport.io/healthy-gpus"] == "1"
    assert "usage" not in json.loads(patch["metadata"]["annotations"][CAPABILITY_ANNOTATION])
