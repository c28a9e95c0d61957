"""Rewrites a user can see, on a real control plane with a controller manager (so a Deployment's pods
are really made by its ReplicaSet): `kubectl apply` of a workload prints how its pods will be rewritten,
the template stays as written, and each rewritten pod carries what changed, in an annotation and an
Event beside the scheduler's own."""

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
  replicas: 1
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
        pods = core.list_namespaced_pod(namespace).items
        return pods[0] if pods else None

    deadline = time.monotonic() + 60
    pod = made()
    while pod is None and time.monotonic() < deadline:
        time.sleep(0.5)
        pod = made()
    assert pod is not None, "the ReplicaSet made no pod"
    rewrites = pod.metadata.annotations["gpuport.io/rewrites"]
    assert spot in rewrites and karpenter in rewrites
    assert replaced in rewrites

    def event():
        events = core.list_namespaced_event(
            namespace, field_selector=f"involvedObject.name={pod.metadata.name}"
        )
        return next((e for e in events.items if e.reason == "Translated"), None)

    deadline = time.monotonic() + 20
    found = event()
    while found is None and time.monotonic() < deadline:
        time.sleep(0.5)
        found = event()
    assert found is not None, "gpuport recorded no Event on the pod"
    assert found.involved_object.uid == pod.metadata.uid
    assert found.message.startswith("gpuport rewrote this pod's GPU asks for this cluster: ")
    assert spot in found.message and karpenter in found.message
    assert replaced in found.message
    described = admin("describe", "pod", pod.metadata.name, "-n", namespace).stdout
    assert "Translated" in described and "gpuport.io/rewrites" in described
