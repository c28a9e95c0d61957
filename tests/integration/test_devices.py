"""Devices beside the GPUs and capacity types through a real kube-apiserver: what kubectl users see."""

import json

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException


def gpu_pod(name, limits, node_selector=None, affinity=None):
    spec = {"containers": [{"name": "main", "image": "x", "resources": {"limits": limits}}]}
    if node_selector:
        spec["nodeSelector"] = node_selector
    if affinity:
        spec["affinity"] = affinity
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def test_a_gke_gpudirect_pod_is_refused_on_eks_naming_the_device(apiserver, gpuport_eks, namespace):
    body = gpu_pod(
        "gpudirect",
        {"nvidia.com/gpu": "8", "networking.gke.io.networks/rdma-0": "1"},
        {"cloud.google.com/gke-accelerator": "nvidia-h200-141gb"},
    )
    api = client.CoreV1Api(apiserver.client())
    with pytest.raises(ApiException) as info:
        api.create_namespaced_pod(namespace, body)
    assert info.value.status == 403
    message = json.loads(info.value.body)["message"]
    assert message.startswith(
        'admission webhook "pods.mutate.gpuport.io" denied the request: Pod "gpudirect" cannot run on this '
        "cluster (eks): asks for networking.gke.io.networks/rdma-0 (on gke: a GKE multi-network interface "
        "(GPUDirect-TCPX/TCPXO/RDMA NICs)); eks has no equivalent and offers vpc.amazonaws.com/efa"
    )


def test_an_aks_on_demand_pod_stays_off_spot_capacity_on_eks(apiserver, gpuport_eks, namespace):
    not_spot = {"key": "kubernetes.azure.com/scalesetpriority", "operator": "NotIn", "values": ["spot"]}
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [not_spot]}]
            }
        }
    }
    body = gpu_pod(
        "steady",
        {"nvidia.com/gpu": "1"},
        {"node.kubernetes.io/instance-type": "Standard_NC24ads_A100_v4"},
        affinity,
    )
    created = client.CoreV1Api(apiserver.client()).create_namespaced_pod(namespace, body)
    said = created.metadata.annotations["gpuport.io/rewrites"]
    assert "on-demand or reserved capacity kubernetes.azure.com/scalesetpriority NotIn spot" in said
    terms = created.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
    expressions = [
        (e.key, e.operator, e.values) for t in terms.node_selector_terms for e in t.match_expressions
    ]
    assert ("eks.amazonaws.com/capacityType", "NotIn", ["SPOT"]) in expressions
    assert ("karpenter.sh/capacity-type", "NotIn", ["spot"]) in expressions
    assert not any(key == "kubernetes.azure.com/scalesetpriority" for key, _, _ in expressions)
