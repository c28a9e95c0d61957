"""`gpuport plan mig --kubeconfig` on a real kube-apiserver: a p4d node partitioned all-1g.5gb with one
slice pod bound to it, two pods pending for 3g.20gb slices no node advertises (no scheduler runs: they
stay Pending), and the plan read from what the API server serves."""

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.integration.conftest import E2E_KUBECONFIG, ApiServer, kubeconfig
from tests.integration.test_dra import add_node
from tests.integration.test_install import Kubectl
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
    config_map, node = [d for d in yaml.safe_load_all(out) if d is not None]
    mig_config = yaml.safe_load(config_map["data"]["config.yaml"])
    assert node["metadata"]["name"] == "live-a"
    name = node["metadata"]["labels"]["nvidia.com/mig.config"]
    entries = mig_config["mig-configs"][name]
    # The two pending 3g.20gb take one GPU; the running 1g.5gb pod fits the others as they are today.
    assert [(e["devices"], e["mig-devices"]) for e in entries] == [
        ([0], {"3g.20gb": 2}),
        ([1, 2, 3, 4, 5, 6, 7], {"1g.5gb": 7}),
    ]
    lines = out.splitlines()
    assert "# 1/1 live-a: drain ml/web-1 first (kubectl drain), then apply its label" in lines
    assert (
        "#   warning: every running replica of ReplicaSet/ml/web is on live-a: scale it out before draining"
        in lines
    )


def test_a_cluster_refusing_the_token_is_one_line_and_exit_2(cluster, tmp_path, capsys):
    config = kubeconfig(cluster, tmp_path / "kubeconfig", token="not-a-token")
    capsys.readouterr()
    assert main(["plan", "mig", "--to", "eks", "--kubeconfig", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpuport plan mig: reading the cluster's nodes and pods: ")
    assert "401 Unauthorized" in err


# A fleet of two p4d nodes partitioned all-1g.5gb, as the MIG manager left them (state success): busy-a
# runs two 1g.5gb pods of one ReplicaSet, idle-b nothing. 30 × 3g.20gb asked take 15 of the 16 GPUs, so
# both nodes change: idle-b first (nothing to drain), then busy-a, drained before its label is set.
FLEET_STATE = {"nvidia.com/mig.config": "all-1g.5gb", "nvidia.com/mig.config.state": "success"}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    if E2E_KUBECONFIG:
        pytest.skip("the kind cluster's nodes are real: the plan here is worked out for made nodes")
    server = ApiServer(tmp_path_factory.mktemp("fleet-apiserver"))
    core = client.CoreV1Api(server.client())
    labels = {"node.kubernetes.io/instance-type": "p4d.24xlarge", **FLEET_STATE}
    for name in ("busy-a", "idle-b"):
        add_node(server, name, [], allocatable={"nvidia.com/mig-1g.5gb": "56"}, labels=labels)
    for namespace in ("ml", "gpu-operator"):
        core.create_namespace({"metadata": {"name": namespace}})
    core.create_namespaced_service_account("ml", {"metadata": {"name": "default"}})  # no controller makes it
    for name in ("web-1", "web-2"):
        spec = {
            "nodeName": "busy-a",
            "containers": [
                {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/mig-1g.5gb": "1"}}}
            ],
        }
        owner = [{**_owner(name)[0], "controller": True}]  # as a ReplicaSet's pods carry it: drain needs it
        core.create_namespaced_pod("ml", {"metadata": {"name": name, "ownerReferences": owner}, "spec": spec})
    yield server
    server.stop()


class FakeNodeAgents:
    """What runs on a node and is absent here: the kubelet, which removes a pod being deleted once its
    containers stop, and the GPU Operator's MIG manager, which repartitions a node whose
    nvidia.com/mig.config changed and reports nvidia.com/mig.config.state. Each event is recorded with
    what the node looked like at that moment."""

    def __init__(self, api_client):
        self.core = client.CoreV1Api(api_client)
        self.events: list[tuple] = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *_exc):
        self.stopped.set()
        self.thread.join(10)

    def _run(self):
        while not self.stopped.wait(0.1):
            for pod in self.core.list_pod_for_all_namespaces().items:
                if pod.metadata.deletion_timestamp:
                    self.events.append(("pod gone", pod.spec.node_name, pod.metadata.name))
                    self.core.delete_namespaced_pod(
                        pod.metadata.name, pod.metadata.namespace, grace_period_seconds=0
                    )
            for node in self.core.list_node().items:
                labels = node.metadata.labels or {}
                if "nvidia.com/mig.config.state" not in labels:
                    on_node = [
                        p.metadata.name
                        for p in self.core.list_pod_for_all_namespaces(
                            field_selector=f"spec.nodeName={node.metadata.name}"
                        ).items
                    ]
                    cordoned = bool(node.spec.unschedulable)
                    self.events.append(("repartitioned", node.metadata.name, cordoned, tuple(on_node)))
                    self.core.patch_node(
                        node.metadata.name,
                        {"metadata": {"labels": {"nvidia.com/mig.config.state": "success"}}},
                    )


def test_the_plan_applies_as_printed_and_its_commands_drain_and_relabel_one_node_at_a_time(
    fleet, tmp_path, capsys
):
    config = kubeconfig(fleet, tmp_path / "kubeconfig")
    manifest = tmp_path / "train.yaml"
    template = {
        "containers": [{"name": "t", "image": "x", "resources": {"limits": {"nvidia.com/mig-3g.20gb": 1}}}]
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "train", "namespace": "ml"},
        "spec": {"replicas": 30, "template": {"spec": template}},
    }
    manifest.write_text(yaml.safe_dump(deployment), encoding="utf-8")
    plan = ["plan", "mig", str(manifest), "--to", "eks", "--kubeconfig", str(config)]
    capsys.readouterr()
    assert main(plan) == 0
    stream = tmp_path / "plan.yaml"
    stream.write_text(capsys.readouterr().out, encoding="utf-8")
    kubectl = Kubectl(config)
    # Every document is one the API server takes as it is: the ConfigMap and both Nodes.
    applied = kubectl("apply", "--dry-run=server", "-f", str(stream)).stdout.splitlines()
    assert applied == [
        "configmap/default-mig-parted-config created (server dry run)",
        "node/idle-b configured (server dry run)",
        "node/busy-a configured (server dry run)",
    ]
    assert main([*plan, "-o", "commands"]) == 0
    script = tmp_path / "plan.sh"
    script.write_text(capsys.readouterr().out, encoding="utf-8")
    environment = {
        **os.environ,
        "KUBECONFIG": str(config),
        "PATH": f"{Path(kubectl.binary).parent}{os.pathsep}{os.environ['PATH']}",
    }
    with FakeNodeAgents(fleet.client()) as agents:
        ran = subprocess.run(
            ["sh", str(script)], env=environment, capture_output=True, text=True, timeout=300
        )
    assert ran.returncode == 0, ran.stderr
    # idle-b first, cordoned, nothing on it; then busy-a, its two pods gone before it is repartitioned.
    assert agents.events == [
        ("repartitioned", "idle-b", True, ()),
        ("pod gone", "busy-a", "web-1"),
        ("pod gone", "busy-a", "web-2"),
        ("repartitioned", "busy-a", True, ()),
    ] or agents.events == [
        ("repartitioned", "idle-b", True, ()),
        ("pod gone", "busy-a", "web-2"),
        ("pod gone", "busy-a", "web-1"),
        ("repartitioned", "busy-a", True, ()),
    ]
    core = client.CoreV1Api(fleet.client())
    stored = yaml.safe_load(
        core.read_namespaced_config_map("default-mig-parted-config", "gpu-operator").data["config.yaml"]
    )
    for name in ("idle-b", "busy-a"):
        node = core.read_node(name)
        label = node.metadata.labels["nvidia.com/mig.config"]
        assert label.startswith("gpuport-a100-40gb-") and label in stored["mig-configs"]
        assert node.metadata.labels["nvidia.com/mig.config.state"] == "success"
        assert not node.spec.unschedulable  # uncordoned once the MIG manager said success


def test_with_a_kubeconfig_the_configmap_is_the_one_the_cluster_policy_names(cluster, tmp_path, capsys):
    # The GPU Operator's ClusterPolicy (nvidia.com/v1, cluster-scoped) pointing the MIG manager at a
    # ConfigMap of the admin's own, in the namespace the operator was installed in.
    extensions = client.ApiextensionsV1Api(cluster.client())
    extensions.create_custom_resource_definition(
        {
            "metadata": {"name": "clusterpolicies.nvidia.com"},
            "spec": {
                "group": "nvidia.com",
                "scope": "Cluster",
                "names": {"plural": "clusterpolicies", "singular": "clusterpolicy", "kind": "ClusterPolicy"},
                "versions": [
                    {
                        "name": "v1",
                        "served": True,
                        "storage": True,
                        "schema": {
                            "openAPIV3Schema": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            }
                        },
                    }
                ],
            },
        }
    )
    core = client.CoreV1Api(cluster.client())
    core.create_namespace({"metadata": {"name": "nvidia-gpu-operator"}})
    config_map = {"metadata": {"name": "custom-mig-config"}, "data": {"config.yaml": "version: v1\n"}}
    core.create_namespaced_config_map("nvidia-gpu-operator", config_map)
    policy = {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": "cluster-policy"},
        "spec": {"mig": {"strategy": "mixed"}, "migManager": {"config": {"name": "custom-mig-config"}}},
    }
    custom = client.CustomObjectsApi(cluster.client())
    for _ in range(50):  # the CRD is served once established
        try:
            custom.create_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", policy)
            break
        except ApiException as exc:
            if exc.status != 404:
                raise
            time.sleep(0.2)
    config = kubeconfig(cluster, tmp_path / "kubeconfig")
    capsys.readouterr()
    assert main(["plan", "mig", "--to", "eks", "--kubeconfig", str(config)]) == 0
    written = next(d for d in yaml.safe_load_all(capsys.readouterr().out) if d and d["kind"] == "ConfigMap")
    assert written["metadata"] == {"name": "custom-mig-config", "namespace": "nvidia-gpu-operator"}
