"""A capacity type moved to EKS holds on the real scheduler, whichever provisioner made the nodes.

An EKS cluster's GPU nodes come from managed node groups (eks.amazonaws.com/capacityType: ON_DEMAND |
SPOT | CAPACITY_BLOCK), from Karpenter (karpenter.sh/capacity-type: on-demand | spot | reserved), or
both. Here the spot capacity is Karpenter's only, as on a cluster whose node groups are on-demand: a
GKE spot pod must land on it (an In on the node groups' key would leave it Pending, and Karpenter
would not provision for it), and a GKE on-demand pod must stay off it although the scheduler's own
scoring prefers it. No kubelet runs: "lands" means the real scheduler bound the pod there.
"""

import pytest
from kubernetes import client

from tests.integration.conftest import (
    ApiServer,
    Scheduling,
    new_namespace,
    serve_with_cluster_access,
    unregister_webhooks,
)
from tests.integration.test_dra import add_node, scheduled_node

L4_NODE = {"node.kubernetes.io/instance-type": "g6.xlarge"}
GKE_L4 = {"cloud.google.com/gke-accelerator": "nvidia-l4"}


def gke_pod(name, node_selector, affinity=None):
    spec = {
        "nodeSelector": node_selector,
        "containers": [
            {"name": "main", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "1"}}}
        ],
    }
    if affinity:
        spec["affinity"] = affinity
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


@pytest.fixture(scope="module")
def eks(tmp_path_factory):
    server = ApiServer(tmp_path_factory.mktemp("capacity-apiserver"))
    components = Scheduling(server, feature_gates="")
    # The spot node has the most CPU free, so the scheduler's scoring prefers it for any pod.
    add_node(
        server,
        "karpenter-spot",
        [],
        allocatable={"nvidia.com/gpu": "4", "cpu": "64"},
        labels={**L4_NODE, "karpenter.sh/capacity-type": "spot"},
    )
    add_node(
        server,
        "karpenter-on-demand",
        [],
        allocatable={"nvidia.com/gpu": "4", "cpu": "8"},
        labels={**L4_NODE, "karpenter.sh/capacity-type": "on-demand"},
    )
    add_node(
        server,
        "nodegroup-on-demand",
        [],
        allocatable={"nvidia.com/gpu": "4", "cpu": "8"},
        labels={**L4_NODE, "eks.amazonaws.com/capacityType": "ON_DEMAND"},
    )
    gpuport = serve_with_cluster_access(server, tmp_path_factory, "eks")
    yield server
    unregister_webhooks(server.client())
    gpuport.stop()
    components.stop()
    server.stop()


@pytest.fixture
def team(eks):
    return new_namespace(eks)


def test_a_gke_spot_pod_lands_on_karpenter_s_spot_node(eks, team):
    core = client.CoreV1Api(eks.client())
    created = core.create_namespaced_pod(
        team, gke_pod("spot", {**GKE_L4, "cloud.google.com/gke-spot": "true"})
    )
    assert "cloud.google.com/gke-spot" not in (created.spec.node_selector or {})
    assert scheduled_node(eks, team, "spot") == "karpenter-spot"


@pytest.mark.parametrize("name", ["steady-1", "steady-2", "steady-3"])
def test_a_gke_on_demand_pod_stays_off_spot_capacity_of_either_provisioner(eks, team, name):
    no_spot = {"key": "cloud.google.com/gke-spot", "operator": "DoesNotExist"}
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [no_spot]}]
            }
        }
    }
    core = client.CoreV1Api(eks.client())
    core.create_namespaced_pod(team, gke_pod(name, GKE_L4, affinity))
    assert scheduled_node(eks, team, name) in {"karpenter-on-demand", "nodegroup-on-demand"}
