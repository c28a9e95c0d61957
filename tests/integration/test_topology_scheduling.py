"""Pods grouped by GKE's node labels, moved to EKS, land on EKS's nodes with the real scheduler.

A GKE job keeps its ranks in one node pool with a required pod affinity on
cloud.google.com/gke-nodepool (what JobSet's exclusive placement becomes on its pods), or spreads them
over GKE's physical blocks with a DoNotSchedule constraint on cloud.google.com/gce-topology-block. No
EKS node carries those keys, and the scheduler filters out every node without a required topology key:
kept as written, the pods stayed Pending ("didn't match pod affinity rules", "missing required
label"). Translated to EKS's node group and network layer labels (cloudmaps/eks.yaml
topology_labels), the first pod lands and the second lands in the first one's node group; GKE's
physical host, which EKS does not label, is the node's name there, and ranks kept on one host share a
node. A JobSet's exclusive placement reaches gpuport on the pods its Jobs' controller creates (JobSet is
no kind gpuport registers): a refusal shows in the Job's events naming the JobSet to fix. No kubelet
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
from tests.integration.test_dra import add_node, scheduled_node, wait_for

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


JOBSET_NAMES = {
    "jobset.sigs.k8s.io/jobset-name": "llama-pretrain",
    "jobset.sigs.k8s.io/replicatedjob-name": "workers",
    "jobset.sigs.k8s.io/job-index": "0",
    "jobset.sigs.k8s.io/job-key": "5f8a2c",
}


def jobset_child_job(key):
    """A Job as JobSet's controller makes it from tests/manifests/topology/gke-jobset-exclusive-nodepool.yaml
    (its labelAndAnnotateObject: the JobSet's names as labels and annotations on the Job and its pod
    template, the exclusive-placement annotation copied onto the template), here naming `key`. JobSet is
    no kind gpuport registers: the pods the Job controller makes from this are what the webhook sees."""
    template = gke_pod("unused", "llama")
    template["metadata"] = {
        "labels": dict(JOBSET_NAMES),
        "annotations": {**JOBSET_NAMES, "alpha.jobset.sigs.k8s.io/exclusive-topology": key},
    }
    template["spec"]["restartPolicy"] = "Never"
    del template["apiVersion"], template["kind"]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "llama-pretrain-workers-0", "labels": dict(JOBSET_NAMES)},
        "spec": {
            "completionMode": "Indexed",
            "completions": 2,
            "parallelism": 2,
            "backoffLimit": 0,
            "template": template,
        },
    }


def run_job(cluster, namespace, job):
    client.BatchV1Api(cluster.client()).create_namespaced_job(namespace, job)


def stop_job(cluster, namespace, name):
    client.BatchV1Api(cluster.client()).delete_namespaced_job(
        name, namespace, propagation_policy="Background", grace_period_seconds=0
    )


def test_a_jobset_pod_refused_for_its_placement_tells_the_job_which_jobset_to_fix(eks, team):
    # GKE's compact placement label has no EKS equivalent: the Job controller's creates are refused,
    # and what `kubectl describe job` shows names the JobSet whose annotation to change.
    run_job(eks, team, jobset_child_job("cloud.google.com/gke-placement-group"))
    core = client.CoreV1Api(eks.client())

    def refused():
        events = core.list_namespaced_event(
            team, field_selector="involvedObject.name=llama-pretrain-workers-0"
        )
        return next((e.message for e in events.items if e.reason == "FailedCreate"), None)

    try:
        message = wait_for(refused)
        assert message is not None
        assert "copied from JobSet llama-pretrain" in message
        assert (
            "set JobSet llama-pretrain's alpha.jobset.sigs.k8s.io/exclusive-topology to a topology key its "
            "nodes carry" in message
        )
        assert core.list_namespaced_pod(team).items == []
    finally:
        stop_job(eks, team, "llama-pretrain-workers-0")


def test_a_jobset_pod_s_placement_moved_to_eks_s_node_group_says_whose_placement_it_is(eks, team):
    run_job(eks, team, jobset_child_job("cloud.google.com/gke-nodepool"))
    core = client.CoreV1Api(eks.client())
    try:
        pods = wait_for(lambda: len(items := core.list_namespaced_pod(team).items) == 2 and items)
        assert pods
        for pod in pods:
            annotations = pod.metadata.annotations
            assert annotations["alpha.jobset.sigs.k8s.io/exclusive-topology"] == GROUP
            assert "JobSet llama-pretrain's exclusive placement" in annotations["gpuport.io/rewrites"]
    finally:
        stop_job(eks, team, "llama-pretrain-workers-0")
