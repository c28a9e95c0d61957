"""`gpuport translate` on the kinds operators make pods from, to every shipped map they concern: each
fragment rewritten as the webhook rewrites the pods made from it, or the document refused when the target
cannot serve it (manifests in tests/manifests/operators/, written in the shapes the operators publish)."""

import copy
import json
from pathlib import Path

import pytest
import yaml

from tests.commands.translating import TRANSLATED_FROM, translate, warnings
from webhook.config.cloudmap import default_directory, load_directory

OPERATORS = Path(__file__).parents[1] / "manifests" / "operators"
LOADED = load_directory(default_directory())
SHIPPED = sorted(LOADED.maps)
VENDOR = {name: m.vendor for name, m in LOADED.maps.items()}


def manifest(name):
    return (OPERATORS / name).read_text()


def denials(err):
    return [line.partition(": denied: ")[2] for line in err.splitlines() if ": denied: " in line]


# Spark: the operator's gpu field is its own; what gpuport can say offline is whether the target has the
# NVIDIA GPUs RAPIDS runs on.


@pytest.mark.parametrize("target", SHIPPED)
def test_a_rapids_spark_application_is_refused_where_there_are_no_nvidia_gpus(capsys, tmp_path, target):
    text = manifest("spark-rapids-eks.yaml")
    code, out, err = translate(capsys, tmp_path, text, target)
    assert out == text  # never rewritten: the operator's gpu field is left to the webhook
    if VENDOR[target] == "nvidia":
        assert code == 0 and not denials(err)
    else:
        assert code == 1
        assert denials(err) == [
            "the RAPIDS Accelerator (sparkConf spark.plugins, sparkConf spark.rapids.sql.concurrentGpuTasks) "
            f"runs on NVIDIA GPUs only (CUDA); {target} has AMD GPUs"
        ]


def test_a_spark_application_asking_nvidia_gpus_without_rapids_is_refused_on_amd_by_its_gpu_field(
    capsys, tmp_path
):
    text = manifest("spark-rapids-eks.yaml")
    plain = "\n".join(
        line for line in text.splitlines() if "spark.plugins" not in line and "rapids.sql" not in line
    )
    code, _, err = translate(capsys, tmp_path, plain + "\n", "amd")
    assert code == 1
    assert denials(err) == ["it asks for NVIDIA GPUs (spec.executor.gpu nvidia.com/gpu); amd has AMD GPUs"]


def test_a_scheduled_spark_application_is_judged_by_its_template(capsys, tmp_path):
    app = manifest("spark-rapids-eks.yaml").split("spec:\n", 1)[1]
    scheduled = (
        "apiVersion: sparkoperator.k8s.io/v1beta2\nkind: ScheduledSparkApplication\n"
        'metadata:\n  name: nightly\nspec:\n  schedule: "@daily"\n  template:\n'
        + "".join(f"  {line}\n" for line in app.splitlines())
    )
    code, _, err = translate(capsys, tmp_path, scheduled, "amd")
    assert code == 1 and "the RAPIDS Accelerator" in denials(err)[0]


# KServe: serving.kserve.io/gke-accelerator on an InferenceService becomes the node selector
# cloud.google.com/gke-accelerator of each of its GPU pods (KServe's pod mutator), so it is translated
# exactly as that selector written in the predictor would be, and written back where it was written.

GKE_ANNOTATION = "serving.kserve.io/gke-accelerator"
GKE_LABEL = "cloud.google.com/gke-accelerator"


def kserve(name):
    return (OPERATORS.parent / "serving" / name).read_text()


def selector_as_kserve_makes_it(isvc):
    """The predictor pod's nodeSelector: the predictor's own, and the annotation's label (its GPU asks
    nvidia.com/gpu in both documents here)."""
    selector = dict(isvc["spec"]["predictor"].get("nodeSelector") or {})
    annotation = (isvc["metadata"].get("annotations") or {}).get(GKE_ANNOTATION)
    return selector | ({GKE_LABEL: annotation} if annotation else {})


@pytest.mark.parametrize("target", SHIPPED)
def test_kserve_s_gke_accelerator_annotation_is_translated_as_the_selector_kserve_makes_of_it(
    capsys, tmp_path, target
):
    text = kserve("kserve-gke-accelerator.yaml")
    written = text.replace(
        f"    {GKE_ANNOTATION}: nvidia-l4   # the GPU model, in GKE's words\n", ""
    ).replace(
        "    minReplicas: 1\n", f"    minReplicas: 1\n    nodeSelector:\n      {GKE_LABEL}: nvidia-l4\n"
    )
    assert written != text and GKE_ANNOTATION not in written
    code, out, err = translate(capsys, tmp_path, text, target)
    expected_code, expected_out, expected_err = translate(capsys, tmp_path, written, target)
    assert (code, denials(err)) == (expected_code, denials(expected_err))
    if code:
        assert out == text
        return
    [isvc, *claim_templates], [expected, *expected_templates] = (
        yaml.safe_load_all(out),
        yaml.safe_load_all(expected_out),
    )
    assert claim_templates == expected_templates  # a DRA target's, the same either way
    assert selector_as_kserve_makes_it(isvc) == selector_as_kserve_makes_it(expected)
    without = {k: v for k, v in isvc["spec"]["predictor"].items() if k != "nodeSelector"}
    assert without == {k: v for k, v in expected["spec"]["predictor"].items() if k != "nodeSelector"}
    annotations = isvc["metadata"]["annotations"]
    assert {k: v for k, v in annotations.items() if k != GKE_ANNOTATION} == expected["metadata"][
        "annotations"
    ]
    # The label stays where the author wrote it: in the annotation while the target is GKE, else gone.
    assert (GKE_ANNOTATION in annotations) == (GKE_LABEL in selector_as_kserve_makes_it(isvc))
    assert GKE_LABEL not in (isvc["spec"]["predictor"].get("nodeSelector") or {})
    # Untouched, byte for byte (a DRA target's claim template follows).
    assert out.split("  transformer:\n")[1].startswith(text.split("  transformer:\n")[1])


def test_on_eks_the_annotation_gives_way_to_the_instance_types_of_an_l4(capsys, tmp_path):
    code, out, _ = translate(capsys, tmp_path, kserve("kserve-gke-accelerator.yaml"), "eks")
    assert code == 0
    isvc = yaml.safe_load(out)
    assert GKE_ANNOTATION not in isvc["metadata"]["annotations"]
    assert json.loads(isvc["metadata"]["annotations"][TRANSLATED_FROM])["nodeSelector"] == {
        GKE_LABEL: "nvidia-l4"
    }
    terms = isvc["spec"]["predictor"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    [[expression]] = [term["matchExpressions"] for term in terms["nodeSelectorTerms"]]
    assert expression["key"] == "node.kubernetes.io/instance-type" and "g6.xlarge" in expression["values"]
    assert out.startswith("# A KServe InferenceService on a GKE L4")


def test_the_annotation_of_a_service_that_asks_for_no_nvidia_gpu_is_left_alone(capsys, tmp_path):
    text = kserve("kserve-gke-accelerator.yaml").replace('          nvidia.com/gpu: "1"\n', "")
    code, out, _ = translate(capsys, tmp_path, text, "eks")
    assert (code, out) == (0, text)  # KServe adds no selector to a pod without nvidia.com/gpu limits


# NIM: the operator makes a Deployment of each NIMService; the NIMService is translated as that
# Deployment's pod template is, where the NIMService can say it, and refused where it cannot.

NIM_CARRIED = {"nodeSelector", "tolerations", "containers"}


def deployment_the_nim_operator_makes(nim):
    """The Deployment the NIM operator makes of a NIMService, as far as gpuport reads it."""
    spec, name = nim["spec"], nim["metadata"]["name"]
    metadata = {k: spec[k] for k in ("labels", "annotations") if k in spec}
    pod = {k: spec[k] for k in ("nodeSelector", "tolerations") if k in spec}
    pod["containers"] = [{"name": f"{name}-ctr", "image": "nim", "resources": spec["resources"]}]
    template = {"metadata": metadata, "spec": pod}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {"template": template},
    }


@pytest.mark.parametrize("target", SHIPPED)
def test_a_nim_service_is_translated_as_the_deployment_the_nim_operator_makes_of_it(capsys, tmp_path, target):
    text = manifest("nimservice-gke-h100.yaml")
    nim = yaml.safe_load(text)
    deployment = yaml.safe_dump(deployment_the_nim_operator_makes(nim), sort_keys=False)
    code, out, err = translate(capsys, tmp_path, text, target)
    pod_code, pod_out, pod_err = translate(capsys, tmp_path, deployment, target)
    if pod_code:  # the webhook would refuse its pods: so is the NIMService, in the same words
        assert (code, denials(err), out) == (1, denials(pod_err), text)
        return
    pod = next(yaml.safe_load_all(pod_out))["spec"]["template"]  # a DRA target's claim template follows
    added = set(pod["spec"]) - NIM_CARRIED
    translated = TRANSLATED_FROM in (pod.get("metadata") or {}).get("annotations", {})
    if added and translated:
        assert code == 1 and out == text
        [denial] = denials(err)
        assert denial.startswith(
            f"the translated pod needs {', '.join(sorted(added))}, which the NIM operator does not take from "
            "a NIMService (only nodeSelector, tolerations, resources)"
        )
        return
    assert code == 0
    if added:  # already in the target's words: left as written, the webhook adds the rest to its pods
        assert out == text
        assert f"the webhook adds {', '.join(sorted(added))}" in "\n".join(warnings(err))
        return
    translated_nim = yaml.safe_load(out)["spec"]
    for field in ("nodeSelector", "tolerations"):
        assert translated_nim.get(field) == pod["spec"].get(field)
    [container] = pod["spec"]["containers"]
    assert translated_nim["resources"] == container["resources"]
    assert {"labels": translated_nim.get("labels"), "annotations": translated_nim.get("annotations")} == {
        "labels": pod["metadata"].get("labels"),
        "annotations": pod["metadata"].get("annotations"),
    }
    # Every line before the scheduling fields, the image and the model cache among them, as written.
    head = text.split("  nodeSelector:\n")[0]
    assert out.startswith(head)


def test_a_nim_service_moved_to_aks_takes_the_instance_type_of_an_h100(capsys, tmp_path):
    code, out, _ = translate(capsys, tmp_path, manifest("nimservice-gke-h100.yaml"), "aks")
    assert code == 0
    spec = yaml.safe_load(out)["spec"]
    assert spec["nodeSelector"] == {"node.kubernetes.io/instance-type": "Standard_ND96isr_H100_v5"}
    assert {"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"} in spec["tolerations"]
    assert json.loads(spec["annotations"][TRANSLATED_FROM])["nodeSelector"] == {
        "cloud.google.com/gke-accelerator": "nvidia-h100-80gb"
    }
    assert "affinity" not in spec and "containers" not in spec


# Kubeflow Trainer: a TrainJob's trainer pods are its runtime's "node" job, with the TrainJob's
# resourcesPerNode on the container "node" and its override for "node" laid over the pod.

TRAINER_CARRIED = {"nodeSelector", "tolerations", "affinity", "containers"}
TRAINJOBS = [OPERATORS / "trainjob-eks-a100.yaml", OPERATORS / "trainjob-gke-h100.yaml"]


def trainer_override(trainjob):
    """(the override's pod fields, its metadata) for the trainer job, in either form of the API."""
    spec = trainjob["spec"]
    for field in ("podTemplateOverrides", "podSpecOverrides"):
        for entry in spec.get(field) or []:
            if {"name": "node"} in entry["targetJobs"]:
                if field == "podSpecOverrides":
                    return entry, trainjob["metadata"]
                return entry.get("spec") or {}, entry.get("metadata") or {}
    return {}, {}


def job_the_trainer_makes(trainjob):
    """The pod template of the trainer's "node" Job, as far as the TrainJob says it."""
    placed, metadata = trainer_override(trainjob)
    pod = {k: placed[k] for k in ("nodeSelector", "tolerations", "affinity") if k in placed}
    pod["containers"] = [
        {"name": "node", "image": "t", "resources": trainjob["spec"]["trainer"]["resourcesPerNode"]}
    ]
    template = {"metadata": metadata, "spec": pod}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "node"},
        "spec": {"template": template},
    }


@pytest.mark.parametrize("target", SHIPPED)
@pytest.mark.parametrize("path", TRAINJOBS, ids=lambda p: p.stem)
def test_a_trainjob_is_translated_as_the_trainer_pods_its_runtime_makes(capsys, tmp_path, path, target):
    text = path.read_text()
    job = yaml.safe_dump(job_the_trainer_makes(yaml.safe_load(text)), sort_keys=False)
    code, out, err = translate(capsys, tmp_path, text, target)
    pod_code, pod_out, pod_err = translate(capsys, tmp_path, job, target)
    if pod_code:
        assert (code, denials(err), out) == (1, denials(pod_err), text)
        return
    pod = next(yaml.safe_load_all(pod_out))["spec"]["template"]
    added = set(pod["spec"]) - TRAINER_CARRIED
    if added:  # every shipped map's scheduler or claims: nothing in a TrainJob carries them
        assert code == 1 and out == text
        # Claims have a fix a TrainJob can take: a DeviceClass the plain GPU resource is asked through.
        fix = (
            "; or an admin gives a DeviceClass the GPU resource it asks as its extendedResourceName "
            "(Kubernetes 1.34+): an ask naming no GPU model is then served as written"
            if "resourceClaims" in added
            else ""
        )
        assert denials(err) == [
            f"the translated pod needs {', '.join(sorted(added))}, which gpuport does not write in a "
            "TrainJob (its trainer's resourcesPerNode; nodeSelector, tolerations, affinity of its override "
            f'for "node"){fix}'
        ]
        return
    assert code == 0
    trainjob = yaml.safe_load(out)
    placed, metadata = trainer_override(trainjob)
    for field in ("nodeSelector", "tolerations", "affinity"):
        assert placed.get(field) == pod["spec"].get(field), field
    [container] = pod["spec"]["containers"]
    assert trainjob["spec"]["trainer"]["resourcesPerNode"] == container["resources"]
    assert (metadata.get("annotations") or {}) == (pod["metadata"].get("annotations") or {})
    # The TrainJob's other fields, and the overrides of other jobs, as written.
    original = yaml.safe_load(text)
    assert {
        k: v
        for k, v in trainjob["spec"].items()
        if k not in ("trainer", "podTemplateOverrides", "podSpecOverrides")
    } == {
        k: v
        for k, v in original["spec"].items()
        if k not in ("trainer", "podTemplateOverrides", "podSpecOverrides")
    }
    others = [
        e for e in trainjob["spec"].get("podTemplateOverrides", []) if {"name": "node"} not in e["targetJobs"]
    ]
    assert others == [
        e for e in original["spec"].get("podTemplateOverrides", []) if {"name": "node"} not in e["targetJobs"]
    ]
    # Comments and the head, byte for byte (the podSpecOverrides form records the translation in the
    # TrainJob's metadata, having none of its own).
    assert out.startswith(text.split("metadata:\n")[0])
    assert ("  runtimeRef:\n    name: torch-distributed\n" in out) and "numNodes: 2" in out


def test_a_trainjob_moved_from_eks_to_gke_selects_the_a100_by_gke_s_label(capsys, tmp_path):
    code, out, _ = translate(capsys, tmp_path, (OPERATORS / "trainjob-eks-a100.yaml").read_text(), "gke")
    assert code == 0
    [initializer, trainer] = yaml.safe_load(out)["spec"]["podTemplateOverrides"]
    assert initializer["spec"]["nodeSelector"] == {"node.kubernetes.io/instance-type": "m6i.4xlarge"}
    assert trainer["spec"]["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-tesla-a100"}
    assert trainer["spec"]["serviceAccountName"] == "finetune" and trainer["metadata"]["labels"] == {
        "team": "summarization"
    }
    assert json.loads(trainer["metadata"]["annotations"][TRANSLATED_FROM])["nodeSelector"] == {
        "node.kubernetes.io/instance-type": "p4d.24xlarge"
    }
    assert "nvidia-tesla-a100" in out.split("    - targetJobs:\n        - name: node\n")[1]


def test_a_trainjob_without_an_override_for_its_trainer_gets_one_when_its_pods_need_a_selector(
    capsys, tmp_path
):
    text = (
        (OPERATORS / "trainjob-eks-a100.yaml")
        .read_text()
        .split("    - targetJobs:\n        - name: node\n")[0]
    )
    text = text.replace("nvidia.com/gpu: 8   # every GPU of the node", "nvidia.com/mig-1g.5gb: 2")
    code, out, err = translate(capsys, tmp_path, text, "gke")
    assert code == 0, err
    spec = yaml.safe_load(out)["spec"]
    assert spec["trainer"]["resourcesPerNode"]["limits"] == {"nvidia.com/gpu": 2}
    [_, made] = spec["podTemplateOverrides"]
    assert made["targetJobs"] == [{"name": "node"}]
    assert made["spec"]["nodeSelector"]["cloud.google.com/gke-gpu-partition-size"] == "1g.5gb"


def test_a_trainjob_whose_trainer_has_several_overrides_is_said_and_left_as_written(capsys, tmp_path):
    text = (OPERATORS / "trainjob-eks-a100.yaml").read_text()
    text += "    - targetJobs:\n        - name: node\n      spec:\n        nodeSelector:\n          zone: a\n"
    code, out, err = translate(capsys, tmp_path, text, "gke")
    assert (code, out) == (0, text)
    assert 'several of its pod overrides target the trainer job "node"' in err
    assert "(nvidia.com/gpu) are left as written" in err


def test_a_trainer_override_holding_only_metadata_gets_a_spec_when_the_translation_writes_a_selector(
    capsys, tmp_path
):
    text = (OPERATORS / "trainjob-eks-a100.yaml").read_text()
    bare = text.split("      spec:\n        serviceAccountName")[0]  # the override for "node": metadata only
    bare = bare.replace("nvidia.com/gpu: 8   # every GPU of the node", "nvidia.com/mig-1g.5gb: 2")
    code, out, _ = translate(
        capsys, tmp_path, bare, "eks"
    )  # eks names the MIG resource alike: nothing to write
    assert (code, out) == (0, bare)
    code, out, _ = translate(capsys, tmp_path, bare, "gke")
    assert code == 0
    [_, trainer] = yaml.safe_load(out)["spec"]["podTemplateOverrides"]
    assert trainer["metadata"]["labels"] == {"team": "summarization"}
    assert trainer["spec"]["nodeSelector"]["cloud.google.com/gke-gpu-partition-size"] == "1g.5gb"


# NVIDIA Dynamo: the operator makes each service's pods of its extraPodSpec, with the container "main"
# (extraPodSpec.mainContainer under the service's own resources: gpu as gpuType, nvidia.com/gpu when
# unset; custom by name); a service is translated as those pods are, written back in Dynamo's fields.

DYNAMO_GRAPHS = [OPERATORS / "dynamo-vllm-disagg-eks.yaml", OPERATORS / "dynamo-sglang-disagg-gke.yaml"]


def pod_the_dynamo_operator_makes(service):
    """A service's pod template as the Dynamo operator builds it (GenerateBasePodSpec), as far as gpuport
    reads it: extraPodSpec, its containers then "main" with the service's resources over its own."""
    extra = copy.deepcopy(dict(service.get("extraPodSpec") or {}))
    main = {"name": "main", **(extra.pop("mainContainer", None) or {})}
    resources = copy.deepcopy(main.get("resources") or {})
    ours = service.get("resources") or {}
    for section in ("limits", "requests"):
        item = ours.get(section) or {}
        amounts = {k: item[k] for k in ("cpu", "memory") if k in item}
        if "gpu" in item:
            amounts[item.get("gpuType") or "nvidia.com/gpu"] = item["gpu"]
        amounts |= item.get("custom") or {}
        if amounts:
            resources[section] = {**resources.get(section, {}), **amounts}
    if ours.get("claims"):
        resources["claims"] = [*resources.get("claims", []), *ours["claims"]]
    if resources:
        main["resources"] = resources
    pod = {**extra, "containers": [*extra.get("containers", []), main]}
    given = service.get("extraPodMetadata") or {}
    metadata = {
        key: {**(service.get(key) or {}), **(given.get(key) or {})}
        for key in ("labels", "annotations")
        if service.get(key) or given.get(key)
    }
    return {"metadata": metadata, "spec": pod}


def as_quantities(template):
    """The template with every amount a string (Dynamo writes them so; a Deployment as its author does)."""
    template = copy.deepcopy(template)
    for container in template["spec"]["containers"]:
        for section in ("limits", "requests"):
            amounts = (container.get("resources") or {}).get(section) or {}
            amounts.update({k: str(v) for k, v in amounts.items()})
    return template


def deployments_the_dynamo_operator_makes(graph):
    """One Deployment per service, named after it, in the graph's order."""
    return [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name},
            "spec": {
                "replicas": service.get("replicas", 1),
                "template": pod_the_dynamo_operator_makes(service),
            },
        }
        for name, service in graph["spec"]["services"].items()
    ]


@pytest.mark.parametrize("target", SHIPPED)
@pytest.mark.parametrize("path", DYNAMO_GRAPHS, ids=lambda p: p.stem)
def test_a_dynamo_graph_is_translated_as_the_pods_the_dynamo_operator_makes_of_each_service(
    capsys, tmp_path, path, target
):
    text = path.read_text()
    graph = yaml.safe_load(text)
    pods = yaml.safe_dump_all(deployments_the_dynamo_operator_makes(graph), sort_keys=False)
    code, out, err = translate(capsys, tmp_path, text, target)
    pod_code, pod_out, pod_err = translate(capsys, tmp_path, pods, target)
    assert (code, denials(err)) == (pod_code, denials(pod_err))
    assert "not looked into" not in err
    translated = next(yaml.safe_load_all(out))
    made = {d["metadata"]["name"]: d for d in yaml.safe_load_all(pod_out) if d["kind"] == "Deployment"}
    for name, service in translated["spec"]["services"].items():
        expected = made[name]["spec"]["template"]
        if pod_code and TRANSLATED_FROM not in (expected.get("metadata") or {}).get("annotations", {}):
            # Refused (or untouched): the service as written.
            assert service == graph["spec"]["services"][name]
            continue
        assert as_quantities(pod_the_dynamo_operator_makes(service)) == as_quantities(expected), name
        # Dynamo's amounts stay its strings.
        for section in ("limits", "requests"):
            item = (service.get("resources") or {}).get(section) or {}
            assert all(isinstance(v, str) for k, v in item.items() if k in ("gpu", "cpu", "memory"))
    # The graph's own fields and every line before the first service, as written.
    assert {k: v for k, v in translated["spec"].items() if k != "services"} == {
        k: v for k, v in graph["spec"].items() if k != "services"
    }
    assert out.startswith(text.split("    decode:\n")[0])


def test_a_dynamo_graph_moved_from_eks_to_gke_selects_its_h100s_by_gke_s_label(capsys, tmp_path):
    text = (OPERATORS / "dynamo-vllm-disagg-eks.yaml").read_text()
    code, out, err = translate(capsys, tmp_path, text, "gke")
    assert code == 0 and not denials(err)
    services = yaml.safe_load(out)["spec"]["services"]
    assert services["Frontend"] == yaml.safe_load(text)["spec"]["services"]["Frontend"]
    for name, count in (("decode", "2"), ("prefill", "1")):
        service = services[name]
        assert service["resources"]["limits"]["gpu"] == count  # Dynamo's count, its string, unchanged
        assert "gpuType" not in service["resources"]["limits"]
        assert "nodeSelector" not in service["extraPodSpec"]
        terms = service["extraPodSpec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]
        [expressions] = [term["matchExpressions"] for term in terms["nodeSelectorTerms"]]
        assert {
            "key": "cloud.google.com/gke-accelerator",
            "operator": "In",
            "values": ["nvidia-h100-80gb", "nvidia-h100-mega-80gb"],
        } in expressions
        recorded = json.loads(service["extraPodMetadata"]["annotations"][TRANSLATED_FROM])
        assert recorded["nodeSelector"]["node.kubernetes.io/instance-type"] == "p5.48xlarge"
        assert (
            service["extraPodSpec"]["mainContainer"]["image"] == "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.7.0"
        )
    assert '          gpu: "2"   # tensor parallel 2\n' in out  # the count's line, byte for byte


def test_a_dynamo_graph_moved_from_eks_to_aks_takes_the_instance_type_and_toleration_of_an_h100(
    capsys, tmp_path
):
    code, out, _ = translate(capsys, tmp_path, (OPERATORS / "dynamo-vllm-disagg-eks.yaml").read_text(), "aks")
    assert code == 0
    prefill = yaml.safe_load(out)["spec"]["services"]["prefill"]
    assert prefill["extraPodSpec"]["nodeSelector"] == {
        "node.kubernetes.io/instance-type": "Standard_ND96isr_H100_v5"
    }
    assert {"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"} in prefill[
        "extraPodSpec"
    ]["tolerations"]
    assert prefill["resources"] == {"limits": {"gpu": "1", "memory": "64Gi"}}


@pytest.mark.parametrize("target", [t for t in SHIPPED if VENDOR[t] != "nvidia"])
def test_a_dynamo_graph_is_refused_where_there_are_no_nvidia_gpus(capsys, tmp_path, target):
    text = (OPERATORS / "dynamo-vllm-disagg-eks.yaml").read_text()
    code, out, err = translate(capsys, tmp_path, text, target)
    assert code == 1 and out == text
    said = denials(err)
    for count in (2, 1):  # decode, then prefill
        assert (
            f"containers[0] asks for an NVIDIA GPU (nvidia.com/gpu: {count}); {target} offers AMD GPUs only"
            in said
        )


def test_a_gke_graph_moved_to_eks_selects_instance_types_and_keeps_its_pod_labels(capsys, tmp_path):
    text = (OPERATORS / "dynamo-sglang-disagg-gke.yaml").read_text()
    code, out, _ = translate(capsys, tmp_path, text, "eks")
    assert code == 0
    decode = yaml.safe_load(out)["spec"]["services"]["decode"]
    assert decode["extraPodMetadata"]["labels"] == {"team": "summaries"}
    assert decode["extraPodSpec"]["mainContainer"]["resources"] == {"limits": {"memory": "96Gi"}}
    terms = decode["extraPodSpec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert terms["nodeSelectorTerms"] == [
        {
            "matchExpressions": [
                {
                    "key": "node.kubernetes.io/instance-type",
                    "operator": "In",
                    "values": ["g6.12xlarge", "g6.24xlarge", "g6.48xlarge"],  # four L4s or more
                }
            ]
        }
    ]
    assert decode["multinode"] == {"nodeCount": 2} and decode["resources"] == {"limits": {"gpu": "4"}}


MIG_COMPONENT = """\
apiVersion: nvidia.com/v1alpha1
kind: DynamoComponentDeployment
metadata:
  name: small-model
spec:
  componentType: worker
  replicas: 4
  resources:
    limits:
      gpu: "1"
  extraPodSpec:
    nodeSelector:
      cloud.google.com/gke-accelerator: nvidia-h100-80gb
      cloud.google.com/gke-gpu-partition-size: 1g.10gb
"""


def test_a_gpu_the_target_names_otherwise_is_written_as_dynamo_s_gpu_type_and_back(capsys, tmp_path):
    code, out, _ = translate(capsys, tmp_path, MIG_COMPONENT, "eks")
    assert code == 0
    spec = yaml.safe_load(out)["spec"]
    assert spec["resources"] == {"limits": {"gpu": "1", "gpuType": "nvidia.com/mig-1g.10gb"}}
    assert "nodeSelector" not in spec["extraPodSpec"]
    code, back, _ = translate(capsys, tmp_path, out, "gke")
    assert code == 0
    spec = yaml.safe_load(back)["spec"]
    assert spec["resources"] == {"limits": {"gpu": "1"}}  # nvidia.com/gpu is Dynamo's default
    assert spec["extraPodSpec"]["nodeSelector"] == {"cloud.google.com/gke-gpu-partition-size": "1g.10gb"}


def test_a_dynamo_service_on_a_dra_target_asks_by_claims_in_its_resources_and_extra_pod_spec(
    capsys, tmp_path
):
    code, out, _ = translate(
        capsys, tmp_path, (OPERATORS / "dynamo-vllm-disagg-eks.yaml").read_text(), "dra-nvidia"
    )
    assert code == 0
    graph, *templates = yaml.safe_load_all(out)
    decode = graph["spec"]["services"]["decode"]
    assert decode["resources"] == {"claims": [{"name": "gpuport-main"}]}
    [claim] = decode["extraPodSpec"]["resourceClaims"]
    assert claim["name"] == "gpuport-main"
    assert claim["resourceClaimTemplateName"] in {t["metadata"]["name"] for t in templates}
    assert graph["spec"]["services"]["prefill"]["resources"] == {
        "limits": {"memory": "64Gi"},
        "claims": [{"name": "gpuport-main"}],
    }


def test_a_device_in_dynamo_s_custom_resources_is_accounted_for_on_the_target(capsys, tmp_path):
    text = (OPERATORS / "dynamo-vllm-disagg-eks.yaml").read_text()
    count = '          gpu: "2"   # tensor parallel 2\n'
    efa = text.replace(count, count + '          custom:\n            vpc.amazonaws.com/efa: "16"\n')
    assert efa != text
    code, out, err = translate(capsys, tmp_path, efa, "gke")
    assert code == 1
    assert any(
        d.startswith("asks for vpc.amazonaws.com/efa (on eks: AWS Elastic Fabric Adapter")
        for d in denials(err)
    )
    decode = yaml.safe_load(out)["spec"]["services"]["decode"]
    assert decode == yaml.safe_load(efa)["spec"]["services"]["decode"]  # refused: as written


V1BETA1 = """\
apiVersion: nvidia.com/v1beta1
kind: DynamoGraphDeployment
metadata:
  name: chat
spec:
  components:
  - name: decode
    type: decode
    replicas: 2
    podTemplate:
      spec:
        nodeSelector:
          node.kubernetes.io/instance-type: p5.48xlarge
        containers:
        - name: main
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.0.0
          resources:
            limits:
              nvidia.com/gpu: "2"
"""


def test_a_v1beta1_graph_s_components_are_pod_templates(capsys, tmp_path):
    code, out, err = translate(capsys, tmp_path, V1BETA1, "aks")
    assert code == 0 and "not looked into" not in err
    [component] = yaml.safe_load(out)["spec"]["components"]
    assert component["podTemplate"]["spec"]["nodeSelector"] == {
        "node.kubernetes.io/instance-type": "Standard_ND96isr_H100_v5"
    }
    assert TRANSLATED_FROM in component["podTemplate"]["metadata"]["annotations"]


def test_preflight_counts_a_dynamo_service_s_replicas_times_its_nodes(capsys, tmp_path):
    from webhook.commands.cli import main

    main(["preflight", "--from", "gke", "--to", "eks", str(OPERATORS / "dynamo-sglang-disagg-gke.yaml")])
    out = capsys.readouterr().out
    assert "DynamoGraphDeployment/default/summarize  inference/stateless, 6 replica(s)" in out  # 2 + 1×2 + 2
    path = tmp_path / "mig.yaml"
    path.write_text(MIG_COMPONENT)
    main(["preflight", "--from", "gke", "--to", "eks", str(path)])
    assert (
        "DynamoComponentDeployment/default/small-model  inference/stateless, 4 replica(s)"
        in capsys.readouterr().out
    )


def test_a_nim_service_refused_for_node_affinity_is_told_the_node_selector_that_pins_its_gpus(
    capsys, tmp_path
):
    # GKE L4 to EKS: the L4 instance types are many (an In affinity), but Karpenter's GPU-name label says
    # L4 in one value (so does EKS Auto Mode's; the instance families do not: g6 and gr6), and one
    # instance type would do too: all are named, and the first one works.
    text = manifest("nimservice-gke-h100.yaml").replace("nvidia-h100-80gb", "nvidia-l4")
    code, _, err = translate(capsys, tmp_path, text, "eks")
    assert code == 1
    [denial] = denials(err)
    assert denial.endswith(
        "; pin the GPUs in a nodeSelector instead: karpenter.k8s.aws/instance-gpu-name: l4 or "
        "eks.amazonaws.com/instance-gpu-name: l4 or node.kubernetes.io/instance-type: one of g6.xlarge, "
        "g6.2xlarge, g6.4xlarge, g6.8xlarge, g6.16xlarge, g6.12xlarge, g6.24xlarge, g6.48xlarge, "
        "gr6.4xlarge, gr6.8xlarge"
    )
    pinned = text.replace(
        "cloud.google.com/gke-accelerator: nvidia-l4", "karpenter.k8s.aws/instance-gpu-name: l4"
    )
    code, out, err = translate(capsys, tmp_path, pinned, "eks")
    assert code == 0, err
    assert out == pinned


def test_a_kaito_workspace_s_vm_size_is_said_where_no_node_is_of_it(capsys, tmp_path):
    # KAITO makes its nodes of resource.instanceType: elsewhere no node is of that size, and gpuport opens
    # no pod of a Workspace, so it says so with the target's words for the same GPUs.
    text = manifest("kaito-workspace-aks.yaml")
    code, out, err = translate(capsys, tmp_path, text, "eks")
    assert (code, out) == (0, text)
    assert (
        "not looked into: a KAITO Workspace makes its nodes of resource.instanceType "
        "Standard_NC24ads_A100_v4 (aks's A100-80GB), which no eks node is; the same GPUs are "
        "node.kubernetes.io/instance-type: p4de.24xlarge there"
    ) in err
    assert translate(capsys, tmp_path, text, "aks") == (0, text, "")
