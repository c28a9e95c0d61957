"""`gpuport rightsize --kubeconfig` on a real control plane: a Deployment's pods made by the real
controller manager (ReplicaSet owner references, pod-template-hash labels) and bound by the real scheduler
to an A100 80GB node, that node carrying its agent's peaks for those pods' UIDs, and the proposal read
back for the Deployment, grouped as the controllers made its pods."""

import json

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.integration.conftest import E2E_KUBECONFIG, ApiServer, Scheduling, kubeconfig
from tests.integration.test_dra import add_node, wait_for
from webhook.commands.cli import main
from webhook.core.vocabulary.topology import USAGE_PEAKS_ANNOTATION

DAY = 86400
END = 1_795_478_400 + 7 * DAY  # 2026-12-01T00:00:00Z


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if E2E_KUBECONFIG:
        pytest.skip("the kind cluster's nodes are real: the peaks here are written for a made one")
    server = ApiServer(tmp_path_factory.mktemp("rightsize-apiserver"))
    components = Scheduling(server, feature_gates="")
    yield server
    components.stop()
    server.stop()


def test_a_deployments_pods_are_sized_together_from_their_nodes_peaks(cluster, tmp_path, capsys):
    core, apps = client.CoreV1Api(cluster.client()), client.AppsV1Api(cluster.client())
    labels = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/gpu.count": "4"}
    add_node(cluster, "a100-0", [], allocatable={"nvidia.com/gpu": "4"}, labels=labels)
    core.create_namespace({"metadata": {"name": "serving"}})
    try:  # the controller manager makes it too; whoever is first
        core.create_namespaced_service_account("serving", {"metadata": {"name": "default"}})
    except ApiException as exc:
        if exc.status != 409:
            raise
    container = {"name": "vllm", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    apps.create_namespaced_deployment(
        "serving",
        {
            "metadata": {"name": "embedder"},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "embedder"}},
                "template": {
                    "metadata": {"labels": {"app": "embedder"}},
                    "spec": {"containers": [container]},
                },
            },
        },
    )

    def bound():
        pods = core.list_namespaced_pod("serving", label_selector="app=embedder").items
        return pods if len(pods) == 3 and all(p.spec.node_name == "a100-0" for p in pods) else None

    pods = wait_for(bound, 60)
    # The agent's week for each: 6000-9000 MiB, compute 8-10 % of the GPU.
    peaks = {"v": 1, "day_s": DAY, "pods": {}}
    for n, pod in enumerate(pods):
        days = [
            {
                "t": END - (d + 1) * DAY,
                "s": DAY,
                "cs": DAY,
                "m": 6000 + 1500 * n,
                "c": {str(8 + n): 288},
                "w": 1,
            }
            for d in range(7)
        ]
        peaks["pods"][pod.metadata.uid] = days
    core.patch_node("a100-0", {"metadata": {"annotations": {USAGE_PEAKS_ANNOTATION: json.dumps(peaks)}}})

    config = kubeconfig(cluster, tmp_path / "kubeconfig")
    capsys.readouterr()
    args = ["rightsize", "--kubeconfig", str(config), "--at", "2026-12-01T00:00:00Z", "-o", "json"]
    assert main(args) == 0
    (sized,) = json.loads(capsys.readouterr().out)["workloads"]
    assert (sized["workload"], sized["pods"], sized["model"]) == (
        "Deployment/serving/embedder",
        3,
        "A100-80GB",
    )
    # The largest pod decides: 9000 MiB × 1.2 = 10800 > 1g.10gb's 9011, ≤ 1g.20gb's 18022; 0.10 × 1.2.
    assert (sized["peak_memory_mib"], sized["compute_gpus"]) == (9000, 0.1)
    assert sized["proposal"]["resources"] == {"nvidia.com/mig-1g.20gb": "1"}
    # A 1g.20gb takes 2 of the A100's 8 memory slices: charged 1/4 (more than its 1/7 of compute).
    assert sized["saved_gpus"] == pytest.approx(3 * (1 - 1 / 4))
