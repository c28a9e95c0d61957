"""Pods grouped by GKE's node labels, moved to EKS, land on EKS's nodes with the real scheduler.

A GKE job keeps its ranks in one node pool with a required pod affinity on
cloud.google.com/gke-nodepool (what JobSet's exclusive placement becomes on its pods), or spreads them
over GKE's physical blocks with a DoNotSchedule constraint on cloud.google.com/gce-topology-block. No
EKS node carries those keys, and the scheduler filters out every node without a required topology key:
kept as written, the pods stayed Pending ("didn't match pod affinity rules", "missing required
label"). Translated to EKS's node group and network layer labels (cloudmaps/eks.yaml
topology_labels), the first pod lands and the second lands in the first one's node group; GKE's
physical host, which EKS does not label, is the node's name there, and ranks kept on one host share a
node. No kubelet
runs: "lands" means the real scheduler bound the pod there. Pod shapes:
tests/manifests/topology/README.md.
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

GROUP = "eks.amazonaws.com/nodegroup"
LAYER_2 = "topology.k8s.aws/network-node-layer-2"
# node → (node group, network layer 2): two groups of two p5.48xlarge nodes.
NODES = {
    "p5-a-1": ("gpu-a", "nn-1"),
    "p5-a-2": ("gpu-a", "nn-1"),
    "p5-b-1": ("gpu-b", "nn-2"),
    "p5-b-2": ("gpu-b", "nn-2"),
}


def gke_pod(name, job, affinity=None, spread=None):
    spec = {
        "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"},
        "containers": [
            {"name": "trainer", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "8", "cpu": "1"}}}
        ],
    }
    if affinity:
        spec["affinity"] = affinity
    if spread:
        spec["topologySpreadConstraints"] = spread
    metadata = {"name": name, "labels": {"job": job}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


@pytest.fixture(scope="module")
def eks(tmp_path_factory):
    server = ApiServer(tmp_path_factory.mktemp("topology-apiserver"))
    components = Scheduling(server, feature_gates="")
    for name, (group, layer) in NODES.items():
        labels = {"node.kubernetes.io/instance-type": "p5.48xlarge", GROUP: group, LAYER_2: layer}
        add_node(server, name, [], allocatable={"nvidia.com/gpu": "8"}, labels=labels)
    gpuport = serve_with_cluster_access(server, tmp_path_factory, "eks")
    yield server
    unregister_webhooks(server.client())
    gpuport.stop()
    components.stop()
    server.stop()


@pytest.fixture
def team(eks):
    namespace = new_namespace(eks)
    yield namespace
    # Every pod asks a whole node: give the nodes back (no kubelet: a zero grace period deletes at once).
    client.CoreV1Api(eks.client()).delete_collection_namespaced_pod(namespace, grace_period_seconds=0)


def test_a_gke_job_kept_in_one_node_pool_lands_in_one_eks_node_group(eks, team):
    together = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"job": "llama"}},
                    "topologyKey": "cloud.google.com/gke-nodepool",
                }
            ]
        }
    }
    core = client.CoreV1Api(eks.client())
    created = core.create_namespaced_pod(team, gke_pod("rank-0", "llama", affinity=together))
    terms = created.spec.affinity.pod_affinity.required_during_scheduling_ignored_during_execution
    assert [t.topology_key for t in terms] == [GROUP]
    first = scheduled_node(eks, team, "rank-0")
    core.create_namespaced_pod(team, gke_pod("rank-1", "llama", affinity=together))
    second = scheduled_node(eks, team, "rank-1")
    assert first != second  # each takes a node's 8 GPUs
    assert NODES[first][0] == NODES[second][0]  # in the first one's node group


def test_a_gke_job_spread_over_blocks_lands_on_eks_nodes(eks, team):
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": "cloud.google.com/gce-topology-block",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"job": "bench"}},
        }
    ]
    core = client.CoreV1Api(eks.client())
    for name in ("bench-0", "bench-1"):
        created = core.create_namespaced_pod(team, gke_pod(name, "bench", spread=spread))
        assert created.spec.topology_spread_constraints[0].topology_key == LAYER_2
    layers = {NODES[scheduled_node(eks, team, name)][1] for name in ("bench-0", "bench-1")}
    assert layers == {"nn-1", "nn-2"}  # one in each layer-2 group: spread, as on GKE's blocks


def test_gke_ranks_kept_on_one_physical_host_land_on_one_eks_node(eks, team):
    # EKS labels no host (an instance is the node): GKE's host becomes the node's name, so the ranks
    # that shared a host share a node. Four GPUs each: two fit one 8-GPU node.
    host = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"job": "pair"}},
                    "topologyKey": "cloud.google.com/gce-topology-host",
                }
            ]
        }
    }
    core = client.CoreV1Api(eks.client())
    for name in ("pair-0", "pair-1"):
        pod = gke_pod(name, "pair", affinity=host)
        pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "4"
        created = core.create_namespaced_pod(team, pod)
        terms = created.spec.affinity.pod_affinity.required_during_scheduling_ignored_during_execution
        assert [t.topology_key for t in terms] == ["kubernetes.io/hostname"]
    assert scheduled_node(eks, team, "pair-0") == scheduled_node(eks, team, "pair-1")
