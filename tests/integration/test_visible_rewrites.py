"""Rewrites a user can see, on a real control plane with a controller manager (so a Deployment's pods
are really made by its ReplicaSet): `kubectl apply` of a workload prints how its pods will be rewritten,
the template stays as written, each rewritten pod carries what changed in an annotation, and its
ReplicaSet one Event saying it, counting the pods (not one Event a pod, each an API write)."""

import time
import uuid

import pytest
from kubernetes import client

from tests.integration.conftest import (
    ApiServer,
    Scheduling,
    kubeconfig,
    serve_with_cluster_access,
    unregister_webhooks,
)
from tests.integration.test_install import Kubectl, manifest_file

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: l4-server
spec:
  replicas: 3
  selector:
    matchLabels: {app: l4-server}
  template:
    metadata:
      labels: {app: l4-server}
    spec:
      nodeSelector:
        cloud.google.com/gke-accelerator: nvidia-l4
        cloud.google.com/gke-spot: "true"
      containers:
      - name: server
        image: vllm/vllm-openai:latest
        resources:
          limits:
            nvidia.com/gpu: 1
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    server = ApiServer(tmp_path_factory.mktemp("rewrites-apiserver"))
    components = Scheduling(server, feature_gates="")
    yield server
    components.stop()
    server.stop()


@pytest.fixture(scope="module")
def gpuport(cluster, tmp_path_factory):
    server = serve_with_cluster_access(cluster, tmp_path_factory, "eks")
    yield server
    unregister_webhooks(cluster.client())
    server.stop()


def test_applying_a_deployment_says_how_its_pods_will_be_rewritten_and_each_pod_records_it(
    cluster, gpuport, tmp_path
):
    admin = Kubectl(kubeconfig(cluster, tmp_path / "admin.kubeconfig"))
    namespace = f"team-{uuid.uuid4().hex[:6]}"
    admin("create", "namespace", namespace)
    applied = admin("apply", "-n", namespace, "-f", manifest_file(tmp_path, DEPLOYMENT))
    assert "deployment.apps/l4-server created" in applied.stdout
    # Spot on EKS: neither provisioner's other capacity types (managed node groups' and Karpenter's keys).
    spot = "spot capacity cloud.google.com/gke-spot → eks.amazonaws.com/capacityType not in ON_DEMAND|"
    spot += "CAPACITY_BLOCK"
    assert f"Warning: gpuport: pods: {spot}" in applied.stderr
    karpenter = (
        "spot capacity cloud.google.com/gke-spot → karpenter.sh/capacity-type not in on-demand|reserved"
    )
    assert f"Warning: gpuport: pods: {karpenter}" in applied.stderr
    # kubectl cuts each warning at 120 characters: the change is said in brief, in full on the pod.
    assert "Warning: gpuport: pods: node selector cloud.google.com/gke-accelerator" in applied.stderr
    assert "→ required affinity node.kubernetes.io/instance-type" in applied.stderr
    warned = [line for line in applied.stderr.splitlines() if line.startswith("Warning: gpuport:")]
    assert warned and all(len(line.removeprefix("Warning: ")) <= 120 for line in warned), warned
    replaced = "replaced by required node affinity node.kubernetes.io/instance-type in g6.xlarge|g6.2xlarge|"
    # The template stays as written (a GitOps tool sees no drift).
    stored = admin.json("get", "deployment", "l4-server", "-n", namespace)
    assert (
        stored["spec"]["template"]["spec"]["nodeSelector"]["cloud.google.com/gke-accelerator"] == "nvidia-l4"
    )

    core = client.CoreV1Api(cluster.client())

    def made():
        return core.list_namespaced_pod(namespace).items

    deadline = time.monotonic() + 60
    pods = made()
    while len(pods) < 3 and time.monotonic() < deadline:
        time.sleep(0.5)
        pods = made()
    assert len(pods) == 3, "the ReplicaSet made no pods"
    for pod in pods:
        rewrites = pod.metadata.annotations["gpuport.io/rewrites"]
        assert spot in rewrites and karpenter in rewrites
        assert replaced in rewrites
    [owner] = {(ref.kind, ref.name, ref.uid) for pod in pods for ref in pod.metadata.owner_references}
    assert owner[0] == "ReplicaSet"

    def translated():
        events = core.list_namespaced_event(namespace).items
        return [e for e in events if e.reason == "Translated"]

    # One Event on the ReplicaSet, its count the pods rewritten (brought up to date within ten seconds).
    deadline = time.monotonic() + 30
    found = translated()
    while (not found or found[0].count != 3) and time.monotonic() < deadline:
        time.sleep(0.5)
        found = translated()
    assert len(found) == 1, [(e.involved_object.kind, e.involved_object.name, e.count) for e in found]
    [event] = found
    assert (event.involved_object.kind, event.involved_object.name) == owner[:2]
    assert event.involved_object.uid == owner[2] and event.count == 3
    assert event.message.startswith(
        "gpuport rewrote the GPU asks of this ReplicaSet's pods for this cluster: "
    )
    assert spot in event.message and karpenter in event.message
    assert replaced in event.message
    # kubectl describe: the pod says what changed in its annotation, its ReplicaSet the Event.
    described = admin("describe", "pod", pods[0].metadata.name, "-n", namespace).stdout
    assert "gpuport.io/rewrites" in described and spot in described
    described = admin("describe", "replicaset", owner[1], "-n", namespace).stdout
    assert "Translated" in described and "gpuport rewrote the GPU asks of this ReplicaSet's pods" in described
    assert "(x3 over" in described  # kubectl's way of saying an Event's count
