"""The overcommit guard on the real scheduler. gpuport serves the eks map with its view of the nodes;
the node agent's gpuport.io/shared-memory-full label is set here as the agent sets it when a node's
shared GPUs are filled past κ (policy.sharing.memory_fill). Three shared pods fill node a; the fourth is
placed on b; with both full the next waits, and gpuport says why. A whole-GPU pod is untouched. No
kubelet runs: "placed" means the real scheduler bound it there.
"""

import uuid

import pytest
from kubernetes import client

from tests.integration.conftest import serve_with_cluster_access, unregister_webhooks
from tests.integration.test_dra import add_node, gke_pod, scheduled_node, wait_for
from webhook.core.vocabulary.topology import SHARED_MEMORY_FULL

SHARED = {"nvidia.com/gpu.shared": "1"}
KEEP_OFF = (SHARED_MEMORY_FULL, "NotIn", ["true"])
WAITS = "every node's shared GPUs are past 90% of memory now: the pod waits"


def report(core, name, full):
    """What the node agent does when its node's shared GPUs cross κ."""
    core.patch_node(name, {"metadata": {"labels": {SHARED_MEMORY_FULL: "true" if full else "false"}}})


def terms(pod):
    affinity = pod.spec.affinity
    if affinity is None or affinity.node_affinity is None:
        return []
    required = affinity.node_affinity.required_during_scheduling_ignored_during_execution
    return [(e.key, e.operator, e.values) for t in required.node_selector_terms for e in t.match_expressions]


def warnings_for(core, namespace, body):
    """The warnings gpuport gives a pod create (a dry run: nothing is made)."""
    response = core.create_namespaced_pod(namespace, body, dry_run="All", _preload_content=False)
    return response.headers.get("Warning", "")


@pytest.fixture(scope="module")
def eks(dra_cluster, tmp_path_factory):
    add_node(
        dra_cluster,
        "shared-a",
        [],
        allocatable={"nvidia.com/gpu.shared": "8"},
        labels={SHARED_MEMORY_FULL: "false"},
    )
    add_node(dra_cluster, "whole", [], allocatable={"nvidia.com/gpu": "8"})
    server = serve_with_cluster_access(dra_cluster, tmp_path_factory, "eks")
    core = client.CoreV1Api(dra_cluster.client())
    core.create_namespace({"metadata": {"name": "trial"}})
    # gpuport reads the nodes from its cluster view, which it takes up within seconds.
    trial = gke_pod("trial", SHARED, {})
    assert wait_for(lambda: KEEP_OFF in terms(core.create_namespaced_pod("trial", trial, dry_run="All")))
    yield dra_cluster
    unregister_webhooks(dra_cluster.client())
    server.stop()


def test_shared_pods_go_where_the_shared_gpus_are_not_full_and_wait_with_gpuports_reason(eks):
    core = client.CoreV1Api(eks.client())
    team = f"team-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": team}})
    for n in range(3):
        created = core.create_namespaced_pod(team, gke_pod(f"share-{n}", SHARED, {}))
        assert KEEP_OFF in terms(created)
        assert scheduled_node(eks, team, f"share-{n}") == "shared-a"

    # The agent reports a full; a second shared node joins. gpuport's view takes both up.
    report(core, "shared-a", full=True)
    assert wait_for(lambda: WAITS in warnings_for(core, team, gke_pod("probe", SHARED, {})))
    add_node(
        eks, "shared-b", [], allocatable={"nvidia.com/gpu.shared": "8"}, labels={SHARED_MEMORY_FULL: "false"}
    )
    assert wait_for(lambda: WAITS not in warnings_for(core, team, gke_pod("probe", SHARED, {})))
    core.create_namespaced_pod(team, gke_pod("share-3", SHARED, {}))
    assert scheduled_node(eks, team, "share-3") == "shared-b"

    # Both full: the next shared pod is admitted, told why it waits, and the scheduler keeps it Pending.
    report(core, "shared-b", full=True)
    assert wait_for(lambda: WAITS in warnings_for(core, team, gke_pod("probe", SHARED, {})))
    said = warnings_for(core, team, gke_pod("share-4", SHARED, {}))
    assert f"kept off nodes with {SHARED_MEMORY_FULL}=true (past 90% of memory)" in said and WAITS in said
    core.create_namespaced_pod(team, gke_pod("share-4", SHARED, {}))
    assert scheduled_node(eks, team, "share-4", timeout=10) is None
    pending = core.read_namespaced_pod("share-4", team)
    condition = next(c for c in pending.status.conditions if c.type == "PodScheduled")
    assert condition.status == "False" and condition.reason == "Unschedulable"

    # Whole GPUs are never guarded.
    whole = core.create_namespaced_pod(team, gke_pod("whole", {"nvidia.com/gpu": "1"}, {}))
    assert KEEP_OFF not in terms(whole)
    assert scheduled_node(eks, team, "whole") == "whole"
