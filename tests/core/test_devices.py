"""Devices beside the GPUs in /mutate's decision (webhook/core/rewriting/devices.py): a foreign
cloud's device is refused in words, the target's own is untouched, a renamed one is patched."""

import jsonpatch

from tests.helpers import context, parsed, pod_with_resources, review_of
from webhook.core.deciding import pipeline


def decide(obj, target):
    return pipeline.decide(parsed(review_of(obj)), context(target))


def efa_pod(name="nccl"):
    limits = {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32"}
    return pod_with_resources({"limits": limits, "requests": dict(limits)}, name=name)


def test_an_efa_pod_is_refused_on_aks_naming_the_device_and_what_aks_offers():
    decision = decide(efa_pod(), "aks")
    assert not decision.allowed
    assert decision.reason == "untranslatable"
    assert decision.message == (
        'Pod "nccl" cannot run on this cluster (aks): asks for vpc.amazonaws.com/efa (on eks: AWS Elastic '
        "Fabric Adapter, an RDMA network interface per count); aks has no equivalent and offers rdma/<name>: "
        "InfiniBand RDMA, a device shared by the node's pods (NVIDIA RDMA shared device plugin)"
    )


def test_an_efa_pod_on_eks_is_native_and_untouched():
    decision = decide(efa_pod(), "eks")
    assert decision.allowed and decision.patch == ()
    assert not any("efa" in w for w in decision.warnings)


def test_a_workload_whose_pods_ask_for_efa_is_told_its_pods_will_be_refused():
    pod = efa_pod()
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "nccl", "namespace": "team-a"},
        "spec": {"template": {"metadata": {}, "spec": pod["spec"]}},
    }
    decision = decide(deployment, "gke")
    assert decision.allowed and decision.patch == ()
    (warning,) = [w for w in decision.warnings if "efa" in w]
    assert warning.startswith("gpuport: pods will be refused: asks for vpc.amazonaws.com/efa (on eks:")


def test_the_old_neuron_name_is_patched_to_the_new_in_limits_and_requests():
    pod = pod_with_resources(
        {"limits": {"aws.amazon.com/neurondevice": "2"}, "requests": {"aws.amazon.com/neurondevice": "2"}}
    )
    decision = decide(pod, "eks")
    assert decision.allowed
    patched = jsonpatch.apply_patch(pod, list(decision.patch))
    assert patched["spec"]["containers"][0]["resources"] == {
        "limits": {"aws.amazon.com/neuron": "2"},
        "requests": {"aws.amazon.com/neuron": "2"},
    }
    assert (
        "gpuport: aws.amazon.com/neurondevice → aws.amazon.com/neuron (the same device on eks)"
        in decision.warnings
    )


def test_a_pod_asking_only_for_a_foreign_accelerator_is_refused_too():
    pod = pod_with_resources({"limits": {"aws.amazon.com/neuroncore": "2"}}, name="neuron")
    decision = decide(pod, "gke")
    assert not decision.allowed
    assert "asks for aws.amazon.com/neuroncore (on eks: AWS NeuronCore" in decision.message


def test_both_neuron_names_in_one_container_are_one_ask_of_both_counts():
    pod = pod_with_resources({"limits": {"aws.amazon.com/neurondevice": "2", "aws.amazon.com/neuron": "1"}})
    decision = decide(pod, "eks")
    assert decision.allowed
    patched = jsonpatch.apply_patch(pod, list(decision.patch))
    assert patched["spec"]["containers"][0]["resources"] == {"limits": {"aws.amazon.com/neuron": "3"}}
