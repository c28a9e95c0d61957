"""The GPU budget counts what the real scheduler reserves, per resource name (issue 45), on a control
plane with kube-scheduler and a node publishing an H100's MIG slices and a KubeVirt-style passthrough
name. No kubelet runs: "bound" means the real scheduler placed the pod, having reserved each name's
effective request on the node; the built-in ResourceQuota counts nvidia.com/gpu alone.
"""

import json

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.integration.conftest import new_namespace, serve_with_cluster_access, unregister_webhooks
from tests.integration.test_dra import add_node, gke_pod, scheduled_node, scheduling_failure, wait_for

H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
# One H100 as the device plugin's mixed strategy would never cut it, but as a node's allocatable can
# say it: exactly what the pod reserves, so binding shows the scheduler reserves every name.
SLICES = {
    "nvidia.com/gpu": "1",
    "nvidia.com/mig-3g.40gb": "2",
    "nvidia.com/mig-2g.20gb": "3",
    "nvidia.com/mig-1g.10gb": "7",
    "nvidia.com/mig-7g.80gb": "1",
}
PASSTHROUGH = "nvidia.com/GA100_A100_PCIE_40GB"  # NVIDIA's KubeVirt GPU device plugin names GPUs so


@pytest.fixture(scope="module")
def cluster(dra_cluster, tmp_path_factory):
    add_node(dra_cluster, "h100-slices", [], allocatable=SLICES, labels=H100)
    add_node(dra_cluster, "a100-passthrough", [], allocatable={PASSTHROUGH: "8"})
    server = serve_with_cluster_access(dra_cluster, tmp_path_factory, "generic")
    yield dra_cluster
    unregister_webhooks(dra_cluster.client())
    server.stop()


def team(cluster, quota=None):
    core = client.CoreV1Api(cluster.client())
    name = new_namespace(cluster)
    if quota is not None:
        hard = {"requests.nvidia.com/gpu": str(quota)}
        core.create_namespaced_resource_quota(name, {"metadata": {"name": "gpus"}, "spec": {"hard": hard}})
        # gpuport's view takes the quota up within seconds: until then a pod over it may pass.
        probe = gke_pod("probe", {"nvidia.com/gpu": str(quota + 1)}, {})
        seen = wait_for(lambda: "GPU-equivalents" in _refused(core, name, probe))
        assert seen, "gpuport never saw the quota"
        # The built-in quota plugin refuses every pod until the controller manager has filled its status.
        assert wait_for(lambda: core.read_namespaced_resource_quota("gpus", name).status.hard)
    return core, name


def _refused(core, namespace, body) -> str:
    try:
        core.create_namespaced_pod(namespace, body, dry_run="All")
    except ApiException as exc:
        return json.loads(exc.body)["message"]
    return ""


def split_pod(name):
    """Issue 45's pod: init containers asking 1 whole GPU, 2 × 3g.40gb, 3 × 2g.20gb and 7 × 1g.10gb,
    an app asking 1 × 7g.80gb, on H100s."""
    body = gke_pod(name, {"nvidia.com/mig-7g.80gb": "1"}, H100)
    asks = [(n, c) for n, c in SLICES.items() if n != "nvidia.com/mig-7g.80gb"]
    body["spec"]["initContainers"] = [
        {"name": f"init-{i}", "image": "busybox", "resources": {"limits": {n: c}, "requests": {n: c}}}
        for i, (n, c) in enumerate(asks)
    ]
    return body


def test_gpu_names_split_across_init_and_app_containers_are_charged_what_the_scheduler_reserves(cluster):
    core, under_one = team(cluster, quota=1)
    with pytest.raises(ApiException) as info:
        core.create_namespaced_pod(under_one, split_pod("split"))
    message = json.loads(info.value.body)["message"]
    # 1 + 2 × 1/2 + 3 × 2/7 + 7 × 1/7 + 1 = 4.857 GPU-equivalents; gpuport charged 1 before.
    assert "exceeded quota: gpus, requested: requests.nvidia.com/gpu=4.857," in message, message
    # The app's slice alone is one GPU: admitted under the same quota, and bound.
    core.create_namespaced_pod(under_one, gke_pod("one", {"nvidia.com/mig-7g.80gb": "1"}, H100))
    assert scheduled_node(cluster, under_one, "one") == "h100-slices"
    core.delete_namespaced_pod("one", under_one, grace_period_seconds=0)
    assert wait_for(lambda: not core.list_namespaced_pod(under_one).items)

    core, under_five = team(cluster, quota=5)
    core.create_namespaced_pod(under_five, split_pod("split"))
    assert scheduled_node(cluster, under_five, "split") == "h100-slices"
    # The scheduler holds the init containers' slices for the pod's life: none is left for another.
    core, free = team(cluster)
    core.create_namespaced_pod(free, gke_pod("after", {"nvidia.com/mig-1g.10gb": "1"}, H100))
    assert scheduling_failure(cluster, free, "after", "Insufficient nvidia.com/mig-1g.10gb")


def test_a_gpu_name_without_a_gpu_word_is_refused_in_a_budget_namespace_and_bound_elsewhere(cluster):
    core, budget = team(cluster, quota=1)
    body = gke_pod("passthrough", {PASSTHROUGH: "8"}, {})
    with pytest.raises(ApiException) as info:
        core.create_namespaced_pod(budget, body)
    assert info.value.status == 403
    message = json.loads(info.value.body)["message"]
    assert f"gpuport cannot count {PASSTHROUGH}" in message and "GPU budget" in message, message
    # Outside any GPU budget it is the device plugin's business: admitted and bound.
    core, free = team(cluster)
    core.create_namespaced_pod(free, body)
    assert scheduled_node(cluster, free, "passthrough") == "a100-passthrough"
