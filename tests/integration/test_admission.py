"""gpuport behind a real kube-apiserver: what users see from kubectl, and what lands in etcd."""

import json

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.translation_cases import pod as _pod


def pod(resources, selector=None, name="work", namespace=None):
    body = _pod(resources, selector, name=name)
    body["metadata"].pop("namespace")  # the request's namespace decides
    return body


def core(apiserver):
    return client.CoreV1Api(apiserver.client())


def counted(server, route, result, reason):
    import ssl
    import urllib.request

    context = ssl.create_default_context(cafile=str(server.ca_file))
    with urllib.request.urlopen(server.url("/metrics"), context=context) as response:
        for line in response.read().decode().splitlines():
            if line.startswith("gpuport_admission_requests_total{") and all(
                f'{k}="{v}"' in line for k, v in (("route", route), ("result", result), ("reason", reason))
            ):
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_half_a_gpu_is_denied_with_our_message_not_a_go_dump(apiserver, gpuport_eks, namespace):
    body = pod({"nvidia.com/gpu": "0.5"}, name="half")
    with pytest.raises(ApiException) as info:
        core(apiserver).create_namespaced_pod(namespace, body)
    assert info.value.status == 403
    message = json.loads(info.value.body)["message"]
    assert message.startswith(
        'admission webhook "pods.mutate.gpuport.io" denied the request: Pod "half": '
        'containers[0] "main": nvidia.com/gpu is 500m (0.5), but GPUs are whole units'
    )
    assert "resource.Quantity" not in message


def test_a_gke_pod_is_translated_and_stored_in_eks_words(apiserver, gpuport_eks, namespace):
    body = pod(
        {"nvidia.com/gpu": "1"}, {"cloud.google.com/gke-accelerator": "nvidia-tesla-a100"}, name="moved"
    )
    created = core(apiserver).create_namespaced_pod(namespace, body)
    assert created.spec.node_selector == {"node.kubernetes.io/instance-type": "p4d.24xlarge"}
    assert created.spec.containers[0].resources.limits == {"nvidia.com/gpu": "1"}
    assert json.loads(created.metadata.annotations["gpuport.io/translated-from"]) == {
        "containers[0]": {"nvidia.com/gpu": "1"},
        "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-tesla-a100"},
    }


def test_generate_name_pod_without_labels_or_annotations_gets_the_map_created(
    apiserver, gpuport_eks, namespace
):
    body = pod({"nvidia.com/gpu": "2"}, {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"})
    body["metadata"] = {"generateName": "gen-", "namespace": namespace}
    created = core(apiserver).create_namespaced_pod(namespace, body)
    assert created.metadata.name.startswith("gen-")
    assert "gpuport.io/translated-from" in created.metadata.annotations


def test_dry_run_decides_the_same_and_stores_nothing(apiserver, gpuport_eks, namespace):
    body = pod({"nvidia.com/gpu": "1"}, {"cloud.google.com/gke-accelerator": "nvidia-tesla-a100"}, name="dry")
    answer = core(apiserver).create_namespaced_pod(namespace, body, dry_run="All")
    assert answer.spec.node_selector == {"node.kubernetes.io/instance-type": "p4d.24xlarge"}
    with pytest.raises(ApiException) as info:
        core(apiserver).read_namespaced_pod("dry", namespace)
    assert info.value.status == 404


def test_a_native_pod_is_stored_as_sent(apiserver, gpuport_eks, namespace):
    body = pod({"nvidia.com/gpu": "1"}, {"node.kubernetes.io/instance-type": "p4d.24xlarge"}, name="native")
    created = core(apiserver).create_namespaced_pod(namespace, body)
    assert created.metadata.annotations is None
    assert created.spec.node_selector == {"node.kubernetes.io/instance-type": "p4d.24xlarge"}


def test_cpu_only_pods_never_reach_gpuport(apiserver, gpuport_eks, namespace):
    before = counted(gpuport_eks, "mutate", "allowed", "kind-ignored") + counted(
        gpuport_eks, "mutate", "allowed", "unchanged"
    )
    body = pod({"cpu": "100m"}, name="cpu")
    core(apiserver).create_namespaced_pod(namespace, body)
    after = counted(gpuport_eks, "mutate", "allowed", "kind-ignored") + counted(
        gpuport_eks, "mutate", "allowed", "unchanged"
    )
    assert after == before  # matchConditions kept the call from being made


def test_a_deployment_asking_half_a_gpu_is_refused_at_apply_time(apiserver, gpuport_eks, namespace):
    template = pod({"nvidia.com/gpu": "0.5"})
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "train"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "t"}},
            "template": {"metadata": {"labels": {"app": "t"}}, "spec": template["spec"]},
        },
    }
    # Templates carry limits only: the API server does not copy them into requests there.
    del deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]
    with pytest.raises(ApiException) as info:
        client.AppsV1Api(apiserver.client()).create_namespaced_deployment(namespace, deployment)
    message = json.loads(info.value.body)["message"]
    said = 'denied the request: Deployment "train": containers[0] "main": nvidia.com/gpu is 500m (0.5)'
    assert said in message


def test_a_memory_share_from_ack_becomes_a_time_sliced_gpu_on_eks(apiserver, gpuport_eks, namespace):
    body = pod(
        {"nvidia.com/gpu": "1"}, {"cloud.google.com/gke-gpu-sharing-strategy": "time-sharing"}, name="s"
    )
    body["spec"]["containers"][0]["resources"] = {
        "limits": {"aliyun.com/gpu-mem": "8"},
        "requests": {"aliyun.com/gpu-mem": "8"},
    }
    created = core(apiserver).create_namespaced_pod(namespace, body)
    assert created.spec.containers[0].resources.limits == {"nvidia.com/gpu.shared": "1"}


def memo_lookups(server, result):
    import ssl
    import urllib.request

    context = ssl.create_default_context(cafile=str(server.ca_file))
    with urllib.request.urlopen(server.url("/metrics"), context=context) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(f'gpuport_decision_memo_total{{result="{result}"}}'):
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_replicas_are_translated_alike_and_answered_from_the_memo(apiserver, gpuport_eks, namespace):
    # Three pods as a ReplicaSet sends them (generateName, no name yet at admission): gpuport has two
    # workers, so at least two of the three mutating calls reach one worker and one is a memo hit.
    hits = memo_lookups(gpuport_eks, "hit")
    stored = []
    for _ in range(3):
        body = pod({"nvidia.com/gpu": "1"}, {"cloud.google.com/gke-accelerator": "nvidia-tesla-a100"})
        body["metadata"] = {"generateName": "replica-", "labels": {"app": "replicas"}}
        stored.append(core(apiserver).create_namespaced_pod(namespace, body))
    assert len({p.metadata.name for p in stored}) == 3
    for created in stored:
        assert created.spec.node_selector == {"node.kubernetes.io/instance-type": "p4d.24xlarge"}
        assert created.spec.containers[0].resources.limits == {"nvidia.com/gpu": "1"}
        assert "gpuport.io/translated-from" in created.metadata.annotations
    assert memo_lookups(gpuport_eks, "hit") >= hits + 1


def test_the_completions_of_an_indexed_job_share_one_decision(apiserver, gpuport_eks, namespace):
    # As the Job controller sends them: generateName per index (the API server names a pod only after
    # admission), the completion index as a label and an annotation, which no decision reads. gpuport
    # has two workers, so of three creates at least two reach one worker: one answer from its memo.
    hits = memo_lookups(gpuport_eks, "hit")
    stored = []
    for index in range(3):
        body = pod({"nvidia.com/gpu": "1"}, {"cloud.google.com/gke-accelerator": "nvidia-tesla-a100"})
        body["metadata"] = {
            "generateName": f"train-{index}-",
            "labels": {
                "batch.kubernetes.io/job-name": "train",
                "batch.kubernetes.io/job-completion-index": str(index),
            },
            "annotations": {"batch.kubernetes.io/job-completion-index": str(index)},
        }
        stored.append(core(apiserver).create_namespaced_pod(namespace, body))
    for index, created in enumerate(stored):
        assert created.metadata.annotations["batch.kubernetes.io/job-completion-index"] == str(index)
        assert created.spec.node_selector == {"node.kubernetes.io/instance-type": "p4d.24xlarge"}
    assert memo_lookups(gpuport_eks, "hit") >= hits + 1
