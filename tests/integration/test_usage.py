"""`gpuport usage --kubeconfig` on a real control plane: two Nodes carrying the node agent's
annotation (written here as the agent writes it, naming the UIDs of the pods the API server gave),
GPU pods the real scheduler bound to them (no kubelet runs: they stay Pending, bound), and the table
and totals the command prints from what it read, worked out by hand below."""

import copy
import json
import re
import uuid

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.commands.test_usage import GPU_A, GPU_B
from tests.integration.conftest import E2E_KUBECONFIG, ApiServer, Scheduling, kubeconfig
from tests.integration.test_dra import add_node, scheduled_node
from webhook.commands.cli import main
from webhook.core.vocabulary.topology import CAPABILITY_ANNOTATION

HOSTNAME = "kubernetes.io/hostname"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if E2E_KUBECONFIG:
        pytest.skip("the kind cluster's nodes are real: the totals here are worked out for two made ones")
    server = ApiServer(tmp_path_factory.mktemp("usage-apiserver"))
    components = Scheduling(server, feature_gates="")
    yield server
    components.stop()
    server.stop()


def pod(name, resources, node):
    return {
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {HOSTNAME: node},
            "containers": [{"name": "c", "image": "x", "resources": {"limits": resources}}],
        },
    }


def with_uids(record, uids):
    """The record with each process's pod UID as the API server gave it (the data names pods)."""
    record = copy.deepcopy(record)
    for device in record["usage"]["devices"]:
        for process in device["processes"]:
            if process["pod_uid"] in uids:
                process["pod_uid"] = uids[process["pod_uid"]]
    return record


@pytest.fixture(scope="module")
def measured(cluster):
    """usage-a: GPU 0 whole, GPU 1 cut into two MIG 3g.40gb instances; usage-b: two L4 shared by
    time-slicing. Each node's pods are bound by the scheduler, then the agent's record is published."""
    core = client.CoreV1Api(cluster.client())
    add_node(cluster, "usage-a", [], allocatable={"nvidia.com/gpu": "1", "nvidia.com/mig-3g.40gb": "2"})
    add_node(cluster, "usage-b", [], allocatable={"nvidia.com/gpu.shared": "8"})
    namespace = "ml"
    core.create_namespace({"metadata": {"name": namespace}})
    try:  # the controller manager makes it too; whoever is first
        core.create_namespaced_service_account(namespace, {"metadata": {"name": "default"}})
    except ApiException as exc:
        if exc.status != 409:
            raise
    pods = {
        "train": pod("train", {"nvidia.com/gpu": "1"}, "usage-a"),
        "infer-1": pod("infer-1", {"nvidia.com/mig-3g.40gb": "1"}, "usage-a"),
        "infer-2": pod("infer-2", {"nvidia.com/mig-3g.40gb": "1"}, "usage-a"),
        "web-1": pod("web-1", {"nvidia.com/gpu.shared": "1"}, "usage-b"),
        "web-2": pod("web-2", {"nvidia.com/gpu.shared": "1"}, "usage-b"),
        "cpu": pod("cpu", {"cpu": "1"}, "usage-a"),  # bound, asks for no GPU: not listed
        "too-big": pod("too-big", {"nvidia.com/gpu": "5"}, "usage-a"),  # never bound: not counted
    }
    uids = {}
    for name, body in pods.items():
        uids[f"uid-{name}"] = core.create_namespaced_pod(namespace, body).metadata.uid
    for name in pods:
        if name != "too-big":
            assert scheduled_node(cluster, namespace, name) == pods[name]["spec"]["nodeSelector"][HOSTNAME]
    for node, record in (("usage-a", GPU_A), ("usage-b", GPU_B)):
        annotation = json.dumps(with_uids(record, uids))
        core.patch_node(node, {"metadata": {"annotations": {CAPABILITY_ANNOTATION: annotation}}})
    return cluster


def usage(cluster, tmp_path, capsys, *flags):
    config = kubeconfig(cluster, tmp_path / "kubeconfig")
    capsys.readouterr()
    assert main(["usage", "--kubeconfig", str(config), *flags]) == 0
    return capsys.readouterr().out


def test_the_table_shows_each_gpu_its_pods_and_the_cluster_totals(measured, tmp_path, capsys):
    text = usage(measured, tmp_path, capsys)
    lines = text.splitlines()
    rows = [re.split(r"\s{2,}", line) for line in lines[1 : lines.index("")]]
    assert rows == [
        # usage-a: train 1 + two 3g.40gb slices of 1/2 (4 of 8 memory slices each) = 2 GPU-equivalents
        ["usage-a", "all", "ml/infer-1, ml/infer-2, ml/train", "2", "71680/163840", "60.0%", "45.0%"],
        ["usage-a", "0", "A100-80GB", "whole", "ml/train", "40960/81920", "80.0%", "50.0%"],
        ["usage-a", "1", "A100-80GB", "MIG 3g.40gb", "ml/infer-1", "10240/40960", "-", "25.0%"],
        ["usage-a", "1", "A100-80GB", "MIG 3g.40gb", "ml/infer-2", "20480/40960", "50.0%", "50.0%"],
        # usage-b: two time-sliced slots of 1 each (the generic map names no replicas per GPU)
        ["usage-b", "all", "ml/web-1, ml/web-2", "2", "6000/24000", "40.0%", "25.0%"],
        ["usage-b", "0", "L4", "shared", "ml/web-1, ml/web-2", "6000/24000", "40.0%", "25.0%"],
        ["usage-b", "1", "L4", "shared", "-", "-", "-", "-"],
        # 4 GPUs; allocated 2 + 2 = 4; memory (71680 + 6000) / (163840 + 24000) = 41.4%;
        # compute (0.8 + 0.5 × 3/7 + 0.4) ÷ (1 + 3/7 + 1) = (99/70) ÷ (17/7) = 99/170 = 58.2%
        ["TOTAL", "4 GPUs", "2 node(s) measured", "5", "4", "77680/187840", "58.2%", "41.4%"],
    ]
    assert "Allocation ratio (allocated ÷ GPU capacity): 4 ÷ 4 = 1.000" in lines


def test_json_totals_from_the_real_cluster(measured, tmp_path, capsys):
    document = json.loads(usage(measured, tmp_path, capsys, "-o", "json"))
    assert document["totals"] == {
        "nodes": 2,
        "gpus": 4,
        "allocated": 4.0,
        "allocation_ratio": 1.0,
        "memory_used_mib": 77680,
        "memory_total_mib": 187840,
        "util_eff": {"compute": round(99 / 170, 4), "memory": round(77680 / 187840, 4)},
        "compute_capacity": round(17 / 7, 4),
        "advertised_nodes": 0,
    }
    assert [n["node"] for n in document["nodes"]] == ["usage-a", "usage-b"]


def test_a_node_without_the_agent_is_listed_as_such(measured, tmp_path, capsys):
    name = f"bare-{uuid.uuid4().hex[:6]}"
    add_node(measured, name, [], allocatable={"nvidia.com/gpu": "2"})
    core = client.CoreV1Api(measured.client())
    core.patch_node(name, {"metadata": {"labels": {"nvidia.com/gpu.product": "NVIDIA-L4"}}})  # GFD's
    try:
        text = usage(measured, tmp_path, capsys)
    finally:
        client.CoreV1Api(measured.client()).delete_node(name)
    row = next(re.split(r"\s{2,}", line) for line in text.splitlines() if line.startswith(name))
    # Day one: its GPUs as the device plugin advertises them, its model from GFD's label; what only
    # the agent measures is said to need it, and its GPUs count in the totals.
    assert row == [name, "2 GPUs", "L4", "no agent data", "-", "0", *["needs agent"] * 3]
    assert "TOTAL  6 GPUs  2 node(s) measured, 1 advertised" in re.sub(r"\s{2,}", "  ", text)


def test_a_cluster_refusing_the_token_is_one_line_and_exit_2(measured, tmp_path, capsys):
    config = kubeconfig(measured, tmp_path / "kubeconfig", token="not-a-token")
    capsys.readouterr()
    assert main(["usage", "--kubeconfig", str(config)]) == 2
    err = capsys.readouterr().err
    assert (
        err == f"gpuport usage: https://127.0.0.1:{measured.port} answered 401 Unauthorized: Unauthorized\n"
    )
