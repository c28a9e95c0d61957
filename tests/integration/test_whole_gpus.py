"""A whole GPU stays whole on the real scheduler. On GKE a MIG-partitioned pool's nodes advertise
nvidia.com/gpu once per partition, as a whole-GPU pool's nodes do once per GPU; a pod written for GKE
that asks for nvidia.com/gpu without selecting a partition means a whole GPU, and gpuport (serving the
gke map, with its view of the nodes) keeps it off the partitioned node. No kubelet runs: "lands" means
the real scheduler bound it there.
"""

import pytest
from kubernetes import client

from tests.integration.conftest import new_namespace, serve_with_cluster_access, unregister_webhooks
from tests.integration.test_dra import add_node, gke_pod, scheduled_node, wait_for

ACCELERATOR = "cloud.google.com/gke-accelerator"
PARTITION = "cloud.google.com/gke-gpu-partition-size"
H100 = {ACCELERATOR: "nvidia-h100-80gb"}
# The view shows a partitioned pool and no time-sharing one: kept off the partitions only.
ONLY = [(PARTITION, "DoesNotExist")]


def expressions(pod):
    affinity = pod.spec.affinity
    if affinity is None:
        return []
    terms = affinity.node_affinity.required_during_scheduling_ignored_during_execution
    return [(e.key, e.operator) for t in terms.node_selector_terms for e in t.match_expressions]


@pytest.fixture(scope="module")
def gke(dra_cluster, tmp_path_factory):
    # The whole-GPU node has little CPU free, so the scheduler's own scoring prefers the other one.
    add_node(dra_cluster, "h100-whole", [], allocatable={"nvidia.com/gpu": "8", "cpu": "4"}, labels=H100)
    add_node(
        dra_cluster,
        "h100-mig",
        [],
        allocatable={"nvidia.com/gpu": "7"},
        labels={**H100, PARTITION: "1g.10gb"},
    )
    server = serve_with_cluster_access(dra_cluster, tmp_path_factory, "gke")
    # gpuport reads the nodes from its cluster view, which the maps' reloader takes up within seconds.
    core = client.CoreV1Api(dra_cluster.client())
    core.create_namespace({"metadata": {"name": "waiting"}})
    trial = gke_pod("trial", {"nvidia.com/gpu": "1"}, H100)
    assert wait_for(lambda: expressions(core.create_namespaced_pod("waiting", trial, dry_run="All")) == ONLY)
    yield dra_cluster
    unregister_webhooks(dra_cluster.client())
    server.stop()


@pytest.fixture
def team(gke):
    return new_namespace(gke)


def test_a_pod_asking_one_gpu_lands_on_the_whole_gpu_node_not_the_partitioned_one(gke, team):
    core = client.CoreV1Api(gke.client())
    core.create_namespaced_pod(team, gke_pod("probe", {"cpu": "2"}, H100))
    assert scheduled_node(gke, team, "probe") == "h100-mig"  # where the scheduler would put a pod

    created = core.create_namespaced_pod(team, gke_pod("trainer", {"nvidia.com/gpu": "1", "cpu": "2"}, H100))
    assert expressions(created) == ONLY
    assert scheduled_node(gke, team, "trainer") == "h100-whole"


def test_a_pod_that_selects_a_partition_is_left_to_it(gke, team):
    core = client.CoreV1Api(gke.client())
    body = gke_pod("slice", {"nvidia.com/gpu": "1"}, {**H100, PARTITION: "1g.10gb"})
    created = core.create_namespaced_pod(team, body)
    assert created.spec.affinity is None
    assert scheduled_node(gke, team, "slice") == "h100-mig"
