"""`gpuport translate` on the kinds people serve GPUs with: a Knative Service's pod template, and KServe's
pod specs written inline (a runtime's spec; an InferenceService's predictor, transformer, explainer),
judged as their controllers read them (manifests in tests/manifests/ and tests/manifests/serving/,
written for this project in the shapes Knative and KServe publish)."""

import copy
import json
from pathlib import Path

import pytest
import yaml

from tests.commands.translating import T4_ON_AKS, TRANSLATED_FROM, translate, warnings, whole_gpu_nodes
from webhook.commands.cli import main
from webhook.core.vocabulary.templates import pod_templates

MANIFESTS = Path(__file__).parents[1] / "manifests"
# KServe's documents are in serving/: see its README for why they are not in the corpus whose output
# tests/commands/test_yaml_output.py holds to line-by-line edits.
ISVC, RUNTIME = "serving/kserve-isvc-eks-t4.yaml", "serving/kserve-runtime-gke-l4.yaml"
KNATIVE = "knative-gke-t4.yaml"


def corpus(name):
    return (MANIFESTS / name).read_text()


def required(spec):
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    return [e for term in terms["nodeSelectorTerms"] for e in term["matchExpressions"]]


# InferenceService: the predictor is a pod spec; its model block, the pod's first container.


def test_an_inference_service_s_predictor_is_translated_with_its_model_block_as_its_container(
    capsys, tmp_path
):
    code, out, err = translate(capsys, tmp_path, corpus(ISVC), "aks")
    assert code == 0
    assert out.startswith("# A KServe InferenceService on one T4")  # the author's comments stay
    isvc = yaml.safe_load(out)
    predictor = isvc["spec"]["predictor"]
    assert "nodeSelector" not in predictor  # the EKS instance type is gone
    [instance_type] = required(predictor)
    assert instance_type == {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": T4_ON_AKS}
    assert {"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"} in predictor[
        "tolerations"
    ]
    resources = predictor["model"]["resources"]
    assert resources["limits"]["nvidia.com/gpu"] == "1" and resources["requests"]["nvidia.com/gpu"] == "1"
    assert "containers" not in predictor  # the block was read as a container, never written as one
    assert predictor["minReplicas"] == 1 and predictor["model"]["modelFormat"] == {"name": "huggingface"}
    # Where KServe takes its pods' annotations from: the InferenceService's own.
    record = json.loads(isvc["metadata"]["annotations"][TRANSLATED_FROM])
    assert record == {
        "containers[0]": {"nvidia.com/gpu": "1"},
        "nodeSelector": {"node.kubernetes.io/instance-type": "g4dn.xlarge"},
    }
    assert "annotations" not in predictor
    assert isvc["spec"]["transformer"] == yaml.safe_load(corpus(ISVC))["spec"]["transformer"]  # CPU only
    said = warnings(err)
    assert "KServe on Knative needs config-features kubernetes.podspec-{affinity,tolerations}" in said
    assert all(len(f"gpuport: {w}") <= 120 for w in said if "node selector" not in w)


def test_a_framework_block_is_the_predictor_s_container_too(capsys, tmp_path):
    pytorch = corpus(ISVC).replace(
        "    model:\n      modelFormat:\n        name: huggingface\n", "    pytorch:\n"
    )
    code, out, err = translate(capsys, tmp_path, pytorch, "dra-nvidia")
    assert code == 0
    [isvc, claim_template] = [d for d in yaml.safe_load_all(out) if d]
    predictor = isvc["spec"]["predictor"]
    # The ask became a claim: the container's edits landed in the framework block, the pod's beside it.
    assert "nvidia.com/gpu" not in predictor["pytorch"]["resources"]["limits"]
    assert predictor["pytorch"]["resources"]["claims"] == [{"name": "gpuport-c0"}]
    [claim] = predictor["resourceClaims"]
    assert claim["resourceClaimTemplateName"] == claim_template["metadata"]["name"]
    assert claim_template["metadata"]["namespace"] == "support"
    assert "KServe on Knative admits no resourceClaims in a pod spec yet (knative/serving#15332)" in warnings(
        err
    )


def test_an_inference_service_kserve_deploys_without_knative_is_not_warned_about_its_flags(capsys, tmp_path):
    raw = corpus(ISVC).replace(
        "  labels:\n", "  annotations:\n    serving.kserve.io/deploymentMode: RawDeployment\n  labels:\n"
    )
    code, out, err = translate(capsys, tmp_path, raw, "aks")
    assert code == 0 and "tolerations" in yaml.safe_load(out)["spec"]["predictor"]
    assert "Knative" not in err


def test_a_multi_node_predictor_is_reported_never_translated_in_part(capsys, tmp_path):
    workers = corpus(ISVC).replace(
        "  transformer:\n",
        "    workerSpec:\n      tensorParallelSize: 2\n      containers:\n      - name: worker-container\n"
        '        resources:\n          limits:\n            nvidia.com/gpu: "1"\n  transformer:\n',
    )
    code, out, err = translate(capsys, tmp_path, workers, "gke")
    assert code == 0
    assert out == workers
    assert (
        "not looked into: /spec/predictor/model/resources, /spec/predictor/workerSpec/containers/0/resources"
        in err
    )
    assert "KServe sizes a multi-node (workerSpec) head and its workers together" in err
    assert "its GPU asks (nvidia.com/gpu) are left as written" in err


# ServingRuntime: its spec is the pod spec; its pods' annotations are the spec's.


@pytest.mark.parametrize("kind", ["ServingRuntime", "ClusterServingRuntime"])
def test_a_serving_runtime_s_spec_is_translated_and_recorded_where_its_pods_get_annotations(
    capsys, tmp_path, kind
):
    text = corpus(RUNTIME).replace("kind: ServingRuntime", f"kind: {kind}")
    code, out, err = translate(capsys, tmp_path, text, "eks")
    assert code == 0
    runtime = yaml.safe_load(out)
    spec = runtime["spec"]
    assert "nodeSelector" not in spec
    [instance_type] = required(spec)
    assert (
        instance_type["key"] == "node.kubernetes.io/instance-type" and "g6.xlarge" in instance_type["values"]
    )
    assert spec["containers"][0]["resources"]["limits"] == {"memory": "20Gi", "nvidia.com/gpu": "1"}
    assert spec["supportedModelFormats"] == [{"name": "textgen", "version": "1", "autoSelect": True}]
    # KServe gives the runtime's pods the annotations of its spec, not of its metadata.
    assert json.loads(spec["annotations"][TRANSLATED_FROM])["containers[0]"] == {"nvidia.com/gpu": "1"}
    assert spec["annotations"]["prometheus.kserve.io/port"] == "8080"
    assert runtime["metadata"]["annotations"] == {"serving.kserve.io/enable-metric-aggregation": "true"}
    assert "KServe on Knative needs config-features kubernetes.podspec-affinity" in warnings(err)


# Knative Service: spec.template is a pod template; the flags its new fields need are said.


def test_a_knative_service_is_translated_and_the_flags_its_new_fields_need_are_said(capsys, tmp_path):
    code, out, err = translate(capsys, tmp_path, corpus(KNATIVE), "eks")
    assert code == 0
    template = yaml.safe_load(out)["spec"]["template"]
    spec = template["spec"]
    assert "nodeSelector" not in spec
    [instance_type] = required(spec)
    assert (
        instance_type["key"] == "node.kubernetes.io/instance-type"
        and "g4dn.xlarge" in instance_type["values"]
    )
    assert spec["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert spec["containerConcurrency"] == 2
    annotations = template["metadata"]["annotations"]
    assert annotations["autoscaling.knative.dev/min-scale"] == "1"
    assert json.loads(annotations[TRANSLATED_FROM])["nodeSelector"] == {
        "cloud.google.com/gke-accelerator": "nvidia-tesla-t4"
    }
    assert warnings(err).count("Knative needs config-features kubernetes.podspec-affinity") == 1

    code, out, err = translate(capsys, tmp_path, corpus(KNATIVE), "aks")
    assert code == 0 and "tolerations" in yaml.safe_load(out)["spec"]["template"]["spec"]
    assert "Knative needs config-features kubernetes.podspec-{affinity,tolerations}" in warnings(err)

    # A node selector it had already: the flag for it is on where it runs.
    code, out, err = translate(capsys, tmp_path, corpus(KNATIVE), "generic")
    spec = yaml.safe_load(out)["spec"]["template"]["spec"]
    assert code == 0 and spec["nodeSelector"] == {"nvidia.com/gpu.product": "Tesla-T4"}
    assert "Knative" not in err


def test_a_core_service_is_not_a_knative_one(capsys, tmp_path):
    core = "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  template:\n    spec: {}\n"
    code, out, err = translate(capsys, tmp_path, core, "eks")
    assert code == 0 and out == core and not err


# Written for the cloud it goes to: printed as written.


@pytest.mark.parametrize(
    ("name", "target", "nodes"),
    [
        (ISVC, "eks", None),
        (RUNTIME, "gke", ("cloud.google.com/gke-accelerator", "nvidia-l4")),
        (KNATIVE, "gke", ("cloud.google.com/gke-accelerator", "nvidia-tesla-t4")),
    ],
)
def test_a_serving_manifest_written_for_the_target_is_printed_byte_for_byte(
    capsys, tmp_path, name, target, nodes
):
    # On GKE, whole-GPU nodes alone say that no partition or time-sharing node needs avoiding.
    extra = ["--inventory", whole_gpu_nodes(tmp_path, *nodes)] if nodes else []
    code, out, err = translate(capsys, tmp_path, corpus(name), target, *extra)
    assert code == 0
    assert out == corpus(name)
    assert "not looked into" not in err


def test_every_way_of_changing_a_view_changes_the_document():
    # A view is a dict: its own mutators (setdefault, update, pop, |=...) must not edit the view alone.
    doc = yaml.safe_load(corpus(ISVC))
    (_, predictor), _ = pod_templates(doc)
    spec, written = predictor["spec"], doc["spec"]["predictor"]
    spec.setdefault("schedulerName", "gpu-scheduler")
    spec.update(priorityClassName="high")
    spec |= {"hostIPC": False}
    assert (written["schedulerName"], written["priorityClassName"], written["hostIPC"]) == (
        "gpu-scheduler",
        "high",
        False,
    )
    assert spec.pop("nodeSelector") and "nodeSelector" not in written
    assert spec.popitem()[0] == "hostIPC" and "hostIPC" not in written
    spec.clear()
    assert set(written) == {"model"}  # the block the view shows as containers stays where it is written


# The walker: views whose edits land in the document, whose copies do not.


def test_an_inline_pod_spec_s_view_writes_into_the_document_and_its_copy_stays_apart():
    doc = yaml.safe_load(corpus(ISVC))
    (pointer, predictor), (transformer_at, transformer) = pod_templates(doc)
    assert (pointer, transformer_at) == ("/spec/predictor", "/spec/transformer")
    assert predictor["metadata"] is doc["metadata"]
    assert predictor["spec"]["containers"][0] is doc["spec"]["predictor"]["model"]
    assert transformer["spec"] is doc["spec"]["transformer"]
    detached = copy.deepcopy(predictor)
    detached["spec"]["affinity"] = {}
    assert "affinity" not in doc["spec"]["predictor"] and type(detached["spec"]) is dict
    predictor["spec"]["affinity"] = {"nodeAffinity": {}}
    del predictor["spec"]["nodeSelector"]
    assert doc["spec"]["predictor"]["affinity"] == {"nodeAffinity": {}}
    assert "nodeSelector" not in doc["spec"]["predictor"] and "containers" not in doc["spec"]["predictor"]
    [(runtime_at, runtime)] = pod_templates(yaml.safe_load(corpus(RUNTIME)))
    assert runtime_at == "/spec" and runtime["metadata"] is runtime["spec"]


def test_preflight_places_an_inference_service_s_predictor_on_the_target(capsys):
    code = main(["preflight", "--from", "eks", "--to", "gke", "-o", "json", str(MANIFESTS / ISVC)])
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    [workload] = report["workloads"]
    assert workload["workload"] == "InferenceService/support/ticket-triage"
    assert workload["replicas"] == 2  # a predictor, a transformer
    assert (
        "/spec/predictor: nvidia.com/gpu: 1, cloud.google.com/gke-accelerator=nvidia-tesla-t4"
        in (workload["translated"])
    )
    assert report["unread"] == []


def test_two_components_asking_gpus_keep_both_records_of_what_they_asked(capsys, tmp_path):
    # KServe copies the InferenceService's own annotations to every component's pods: one record each
    # would leave only the last translated; both are kept, by component.
    text = """apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: two-gpu-components
spec:
  predictor:
    nodeSelector:
      cloud.google.com/gke-accelerator: nvidia-l4
    model:
      modelFormat: {name: huggingface}
      resources:
        limits:
          nvidia.com/gpu: "1"
  transformer:
    nodeSelector:
      cloud.google.com/gke-accelerator: nvidia-tesla-t4
    containers:
      - name: kserve-container
        image: registry.example/tokenizer:1.0
        resources:
          limits:
            nvidia.com/gpu: "1"
"""
    code, out, err = translate(capsys, tmp_path, text, "eks")
    assert code == 0, err
    (isvc,) = [d for d in yaml.safe_load_all(out) if d]
    record = json.loads(isvc["metadata"]["annotations"][TRANSLATED_FROM])
    accelerator = "cloud.google.com/gke-accelerator"
    assert record["/spec/predictor"]["nodeSelector"] == {accelerator: "nvidia-l4"}
    assert record["/spec/transformer"]["nodeSelector"] == {accelerator: "nvidia-tesla-t4"}
