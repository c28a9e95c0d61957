"""`gpuport plan mig --kubeconfig` on a real kube-apiserver: a p4d node partitioned all-1g.5gb with one
slice pod bound to it, two pods pending for 3g.20gb slices no node advertises (no scheduler runs: they
stay Pending), and the plan read from what the API server serves."""

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.integration.conftest import E2E_KUBECONFIG, ApiServer, kubeconfig
from tests.integration.test_dra import add_node
from webhook.commands.cli import main


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if E2E_KUBECONFIG:
        pytest.skip("the kind cluster's nodes are real: the plan here is worked out for one made node")
    server = ApiServer(tmp_path_factory.mktemp("plan-apiserver"))
    core = client.CoreV1Api(server.client())
    labels = {"node.kubernetes.io/instance-type": "p4d.24xlarge", "nvidia.com/mig.config": "all-1g.5gb"}
    add_node(server, "live-a", [], allocatable={"nvidia.com/mig-1g.5gb": "56"}, labels=labels)
    core.create_namespace({"metadata": {"name": "ml"}})
    try:
        core.create_namespaced_service_account("ml", {"metadata": {"name": "default"}})
    except ApiException as exc:
        if exc.status != 409:
            raise

    def pod(name, profile, node=None):
        spec = {
            "containers": [
                {"name": "c", "image": "x", "resources": {"limits": {f"nvidia.com/mig-{profile}": "1"}}}
            ]
        }
        if node:
            spec["nodeName"] = node  # bound as the scheduler would bind it
        return {"metadata": {"name": name, "ownerReferences": _owner(name)}, "spec": spec}

    core.create_namespaced_pod("ml", pod("web-1", "1g.5gb", "live-a"))
    core.create_namespaced_pod("ml", pod("train-1", "3g.20gb"))
    core.create_namespaced_pod("ml", pod("train-2", "3g.20gb"))
    yield server
    server.stop()


def _owner(name):
    return [
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": name.split("-")[0],
            "uid": f"uid-{name.split('-')[0]}",
        }
    ]


def test_the_live_plan_holds_pending_and_running_slices_and_drains_the_node_it_changes(
    cluster, tmp_path, capsys
):
    config = kubeconfig(cluster, tmp_path / "kubeconfig")
    capsys.readouterr()
    assert main(["plan", "mig", "--to", "eks", "--kubeconfig", str(config)]) == 0
    out = capsys.readouterr().out
    mig_config, patches = [d for d in yaml.safe_load_all(out) if d is not None]
    assert [n["metadata"]["name"] for n in patches["items"]] == ["live-a"]
    name = patches["items"][0]["metadata"]["labels"]["nvidia.com/mig.config"]
    entries = mig_config["mig-configs"][name]
    # The two pending 3g.20gb take one GPU; the running 1g.5gb pod fits the others as they are today.
    assert [(e["devices"], e["mig-devices"]) for e in entries] == [
        ([0], {"3g.20gb": 2}),
        ([1, 2, 3, 4, 5, 6, 7], {"1g.5gb": 7}),
    ]
    lines = out.splitlines()
    assert "#   live-a: drain ml/web-1" in lines
    assert (
        "#     warning: every running replica of ReplicaSet/ml/web is on live-a: scale it out before draining"
        in lines
    )


def test_a_cluster_refusing_the_token_is_one_line_and_exit_2(cluster, tmp_path, capsys):
    config = kubeconfig(cluster, tmp_path / "kubeconfig", token="not-a-token")
    capsys.readouterr()
    assert main(["plan", "mig", "--to", "eks", "--kubeconfig", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpuport plan mig: reading the cluster's nodes and pods: ")
    assert "401 Unauthorized" in err
