"""`gpuport translate` on Argo Workflows: each step that runs a container, a script or a container set is
read as the pod Argo makes of it (its node placement and metadata as Argo gives them, defaults of the
workflow's included where they can be written back exactly), and reported with the reason where not
(manifests in tests/manifests/workflows/, written for this project in the shapes Argo publishes)."""

import copy
import json
from pathlib import Path

import pytest
import yaml

from tests.commands.translating import T4_ON_AKS, TRANSLATED_FROM, translate, warnings, whole_gpu_nodes
from webhook.commands.cli import main
from webhook.core.vocabulary.templates import UNREAD_KINDS, pod_templates

WORKFLOWS = Path(__file__).parents[1] / "manifests" / "workflows"
GKE_STEP = "argo-workflow-gke-t4.yaml"  # a CPU step, then a GPU container step on GKE's label
SCRIPT_AND_SET = "argo-workflowtemplate-eks-t4.yaml"  # a script step, a containerSet step (EKS)
CRON = "argo-cronworkflow-aks-t4.yaml"  # spec.workflowSpec (AKS)
DEFAULTS = "argo-workflow-defaults-gke-t4.yaml"  # the step's node selector is the workflow's
T4_ON_EKS = ["g4dn.xlarge", "g4dn.2xlarge", "g4dn.4xlarge", "g4dn.8xlarge", "g4dn.16xlarge"]
AKS_GPU_TAINT = {"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}


def written(name):
    return (WORKFLOWS / name).read_text()


def step(workflow, name):
    spec = workflow["spec"].get("workflowSpec", workflow["spec"])
    return next(t for t in spec["templates"] if t["name"] == name)


def instance_types(template):
    terms = template["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    [expression] = [e for term in terms["nodeSelectorTerms"] for e in term["matchExpressions"]]
    assert expression["key"] == "node.kubernetes.io/instance-type" and expression["operator"] == "In"
    return expression["values"]


def record(template):
    return json.loads(template["metadata"]["annotations"][TRANSLATED_FROM])


def test_argo_kinds_are_read_not_only_reported():
    assert not [key for key in UNREAD_KINDS if key[0] == "argoproj.io"]


# Workflow: a container step pinned to GKE's accelerator label.


def test_a_workflow_s_gpu_step_is_translated_and_recorded_where_argo_takes_its_pod_s_annotations(
    capsys, tmp_path
):
    code, out, err = translate(capsys, tmp_path, written(GKE_STEP), "eks")
    assert code == 0
    assert out.startswith("# An Argo workflow: a CPU step")  # the author's comments stay
    workflow = yaml.safe_load(out)
    train = step(workflow, "train")
    assert "nodeSelector" not in train
    assert instance_types(train)[: len(T4_ON_EKS)] == T4_ON_EKS
    assert train["container"]["resources"]["limits"] == {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": 1}
    assert (
        "containers" not in train and "affinity" not in train["container"]
    )  # read as a pod, written as a step
    # Argo copies a template's metadata to its pod (addMetadata): the record goes beside the author's.
    assert record(train) == {
        "containers[0]": {"nvidia.com/gpu": "1"},
        "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"},
    }
    assert train["metadata"]["annotations"]["example.com/owner"] == "ml-platform"
    assert train["metadata"]["labels"] == {"team": "research"}
    before = yaml.safe_load(written(GKE_STEP))
    assert step(workflow, "prepare") == step(before, "prepare")  # the CPU step is left alone
    assert step(workflow, "main") == step(before, "main")
    assert {k: v for k, v in workflow["spec"].items() if k != "templates"} == {
        k: v for k, v in before["spec"].items() if k != "templates"
    }
    assert warnings(err) == [
        "node selector cloud.google.com/gke-accelerator=nvidia-tesla-t4 replaced by required node affinity "
        f"node.kubernetes.io/instance-type in {'|'.join(instance_types(train))}"
    ]


def test_a_workflow_s_gpu_step_on_aks_gets_the_gpu_pool_s_toleration(capsys, tmp_path):
    code, out, err = translate(capsys, tmp_path, written(GKE_STEP), "aks")
    assert code == 0
    train = step(yaml.safe_load(out), "train")
    assert instance_types(train) == T4_ON_AKS
    assert train["tolerations"] == [AKS_GPU_TAINT]
    assert "toleration sku added" in warnings(err)
    assert "Knative" not in err and "Argo" not in err


def test_a_workflow_s_gpu_step_on_a_generic_cluster_is_selected_by_product(capsys, tmp_path):
    code, out, _ = translate(capsys, tmp_path, written(GKE_STEP), "generic")
    assert code == 0
    train = step(yaml.safe_load(out), "train")
    assert train["nodeSelector"] == {"nvidia.com/gpu.product": "Tesla-T4"}
    assert "affinity" not in train and "tolerations" not in train
    assert list(train)[:3] == ["name", "metadata", "nodeSelector"]  # edited where it stood


# WorkflowTemplate: a script step and a container set.


def test_a_script_step_and_a_container_set_are_translated_as_the_pods_argo_makes(capsys, tmp_path):
    code, out, err = translate(capsys, tmp_path, written(SCRIPT_AND_SET), "aks")
    assert code == 0
    template = yaml.safe_load(out)
    check, embed = step(template, "check-gpu"), step(template, "embed")
    assert "nodeSelector" not in check and instance_types(check) == T4_ON_AKS
    assert check["tolerations"] == [AKS_GPU_TAINT]
    assert check["script"]["source"] == "import torch\nprint(torch.cuda.get_device_name(0))\n"
    assert check["script"]["resources"] == {"limits": {"nvidia.com/gpu": 1}}
    assert list(check)[:2] == ["name", "metadata"]  # a metadata Argo copies, made after the name
    assert record(check)["containers[0]"] == {"nvidia.com/gpu": "1"}
    # Two GPUs in one pod: the set's containers are the pod's, counted together onto a 4-T4 size.
    assert embed["nodeSelector"] == {"node.kubernetes.io/instance-type": "Standard_NC64as_T4_v3"}
    assert record(embed)["containers[1]"] == {"nvidia.com/gpu": "1"}
    assert [c["resources"] for c in embed["containerSet"]["containers"]] == [
        {"limits": {"nvidia.com/gpu": 1}}
    ] * 2
    assert step(template, "main") == step(yaml.safe_load(written(SCRIPT_AND_SET)), "main")
    assert warnings(err).count("toleration sku added") == 2

    code, out, err = translate(capsys, tmp_path, written(SCRIPT_AND_SET), "generic")
    template = yaml.safe_load(out)
    assert code == 0
    for name in ("check-gpu", "embed"):
        assert step(template, name)["nodeSelector"] == {"nvidia.com/gpu.product": "Tesla-T4"}


def test_a_container_set_s_sidecar_asking_for_a_gpu_counts_in_its_pod(capsys, tmp_path):
    text = written(SCRIPT_AND_SET) + (
        "      sidecars:\n        - name: profiler\n          image: ghcr.io/example/profiler:1\n"
        "          resources:\n            limits:\n              nvidia.com/gpu: 1\n"
    )
    code, out, err = translate(capsys, tmp_path, text, "generic")
    assert code == 0 and "not looked into" not in err
    assert record(step(yaml.safe_load(out), "embed"))["containers[2]"] == {"nvidia.com/gpu": "1"}


# CronWorkflow: its workflow is spec.workflowSpec.


def test_a_cron_workflow_s_steps_are_those_of_its_workflow_spec(capsys, tmp_path):
    code, out, err = translate(capsys, tmp_path, written(CRON), "eks")
    assert code == 0 and "not looked into" not in err
    cron = yaml.safe_load(out)
    fine_tune = step(cron, "fine-tune")
    assert "nodeSelector" not in fine_tune
    assert instance_types(fine_tune)[: len(T4_ON_EKS)] == T4_ON_EKS
    assert record(fine_tune)["nodeSelector"] == {"node.kubernetes.io/instance-type": "Standard_NC4as_T4_v3"}
    assert cron["spec"]["schedules"] == ["0 2 * * *"] and cron["spec"]["concurrencyPolicy"] == "Forbid"

    code, out, _ = translate(capsys, tmp_path, written(CRON), "generic")
    fine_tune = step(yaml.safe_load(out), "fine-tune")
    assert code == 0 and fine_tune["nodeSelector"] == {"nvidia.com/gpu.product": "Tesla-T4"}


# Workflow-level defaults: read as the step's where only it takes them, else reported.


def test_a_workflow_level_node_selector_only_the_gpu_step_takes_is_translated_where_it_is_written(
    capsys, tmp_path
):
    code, out, err = translate(capsys, tmp_path, written(DEFAULTS), "eks")
    assert code == 0
    workflow = yaml.safe_load(out)
    transcribe = step(workflow, "transcribe")
    assert "nodeSelector" not in workflow["spec"]  # the GKE label is gone where it was written
    assert instance_types(transcribe)[: len(T4_ON_EKS)] == T4_ON_EKS  # the new field is the step's
    assert record(transcribe)["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"}
    assert "not looked into" not in err

    code, out, err = translate(capsys, tmp_path, written(DEFAULTS), "generic")
    workflow = yaml.safe_load(out)
    assert code == 0
    assert workflow["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "Tesla-T4"}
    assert "nodeSelector" not in step(workflow, "transcribe")

    code, out, err = translate(capsys, tmp_path, written(DEFAULTS), "aks")
    workflow = yaml.safe_load(out)
    assert code == 0 and "nodeSelector" not in workflow["spec"]
    assert step(workflow, "transcribe")["tolerations"] == [AKS_GPU_TAINT]


UPLOAD = "    - name: upload\n      container:\n        image: ghcr.io/example/uploader:1\n"
POD_METADATA = "  podMetadata:\n    labels:\n      app: whisper\n"


@pytest.mark.parametrize(
    ("name", "change", "why"),
    [
        # Another pod takes the workflow's node selector: removing it there would move that pod too.
        (
            DEFAULTS,
            lambda t: t + UPLOAD,
            "1: its nodeSelector is spec.nodeSelector, which other pods take too",
        ),
        # So may a template of another WorkflowTemplate, called through a templateRef.
        (
            DEFAULTS,
            lambda t: t.replace(
                "            template: transcribe\n",
                "            template: transcribe\n        - - name: notify\n"
                "            templateRef: {name: notify, template: slack}\n",
            ),
            "1: its nodeSelector is spec.nodeSelector, which other pods take too",
        ),
        # Argo takes a step's unset node selector from the steps template that runs it first.
        (
            DEFAULTS,
            lambda t: t.replace("      steps:\n", "      nodeSelector:\n        pool: batch\n      steps:\n"),
            "1: its nodeSelector may be that of the steps or dag template that runs it",
        ),
        # Every pod gets spec.podMetadata's labels and annotations under its own.
        (
            GKE_STEP,
            lambda t: t.replace("  templates:\n", POD_METADATA + "  templates:\n"),
            "2: its pod gets the labels and annotations of spec.podMetadata beside its own",
        ),
    ],
    ids=["another-step", "template-ref", "steps-template", "pod-metadata"],
)
def test_a_default_other_pods_share_leaves_the_step_reported_with_why(capsys, tmp_path, name, change, why):
    text = change(written(name))
    code, out, err = translate(capsys, tmp_path, text, "eks")
    assert code == 0
    assert out == text  # nothing is written
    assert f"not looked into: /spec/templates/{why}; " in err.replace("/container/resources: ", ": ")
    assert "its GPU asks (nvidia.com/gpu) are left as written" in err


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (
            lambda t: t.replace(
                "      container:\n",
                '      podSpecPatch: \'{"priorityClassName": "batch"}\'\n      container:\n',
            ),
            "/spec/templates/0/container/resources: Argo merges its podSpecPatch into the pod",
        ),
        (
            lambda t: t.replace(
                "  templates:\n",
                "  templateDefaults:\n    tolerations: [{key: spot, operator: Exists}]\n  templates:\n",
            ),
            "/container/resources: Argo merges spec.templateDefaults (tolerations) into every step",
        ),
        (
            lambda t: t.replace("  templates:\n", "  workflowTemplateRef: {name: base}\n  templates:\n"),
            "its workflow's spec comes from the WorkflowTemplate spec.workflowTemplateRef names",
        ),
        # A GPU ask written only in a workflow's podSpecPatch (text Argo merges into every pod).
        (
            lambda t: t.replace("nvidia.com/gpu: 1", "cpu: 1").replace(
                "  templates:\n",
                "  podSpecPatch: |\n    containers:\n      - name: main\n"
                "        resources: {limits: {nvidia.com/gpu: 2}}\n"
                "  templates:\n",
            ),
            "/spec/podSpecPatch: Argo merges it into the pod of every step",
        ),
        # Parameters Argo fills in when the step runs: a GPU count, an accelerator.
        (
            lambda t: t.replace("nvidia.com/gpu: 1", 'nvidia.com/gpu: "{{inputs.parameters.gpus}}"'),
            "/container/resources: Argo fills in its {{...}} parameters only when the step runs",
        ),
        (
            lambda t: t.replace("nvidia-tesla-t4", '"{{workflow.parameters.accelerator}}"'),
            "/container/resources: Argo fills in its {{...}} parameters only when the step runs",
        ),
    ],
    ids=[
        "pod-spec-patch",
        "template-defaults",
        "workflow-template-ref",
        "gpus-in-a-pod-spec-patch",
        "parameter-count",
        "parameter-selector",
    ],
)
def test_what_argo_merges_or_fills_in_as_it_makes_the_pod_leaves_the_step_reported(
    capsys, tmp_path, change, why
):
    text = change(written("argo-workflow-gpu.yaml"))
    code, out, err = translate(capsys, tmp_path, text, "eks")
    assert code == 0 and out == text
    assert why in err and "not looked into: " in err


def test_template_defaults_naming_no_pod_field_leave_steps_translated(capsys, tmp_path):
    text = written("argo-workflow-gpu.yaml").replace(
        "  templates:\n", "  templateDefaults:\n    timeout: 2h\n  templates:\n"
    )
    code, out, err = translate(capsys, tmp_path, text, "eks")
    assert code == 0 and "not looked into" not in err
    assert "nodeSelector" not in step(yaml.safe_load(out), "train")


def test_pod_metadata_only_the_gpu_step_takes_holds_its_record(capsys, tmp_path):
    text = written(DEFAULTS).replace("  nodeSelector:\n", POD_METADATA + "  nodeSelector:\n")
    code, out, err = translate(capsys, tmp_path, text, "eks")
    assert code == 0 and "not looked into" not in err
    workflow = yaml.safe_load(out)
    # Argo gives the pod spec.podMetadata's labels and annotations: the one pod's record lands there.
    assert workflow["spec"]["podMetadata"]["labels"] == {"app": "whisper"}
    assert json.loads(workflow["spec"]["podMetadata"]["annotations"][TRANSLATED_FROM])["nodeSelector"] == {
        "cloud.google.com/gke-accelerator": "nvidia-tesla-t4"
    }
    assert "metadata" not in step(workflow, "transcribe")


def test_a_step_s_claims_on_a_dra_cluster_are_said_to_need_argo_4_1(capsys, tmp_path):
    code, out, err = translate(capsys, tmp_path, written("argo-workflow-gpu.yaml"), "dra-nvidia")
    assert code == 0
    workflow, claim_template = [d for d in yaml.safe_load_all(out) if d]
    train = step(workflow, "train")
    assert train["container"]["resources"] == {"claims": [{"name": "gpuport-c0"}]}
    [claim] = train["resourceClaims"]
    assert claim["resourceClaimTemplateName"] == claim_template["metadata"]["name"]
    assert "Argo Workflows passes a step's resourceClaims to its pod from v4.1.0 on" in warnings(err)


# Written for the cloud it goes to: printed as written.


@pytest.mark.parametrize(
    ("name", "target", "gke_nodes"),
    [
        (GKE_STEP, "gke", True),
        (DEFAULTS, "gke", True),
        ("argo-workflow-gpu.yaml", "gke", True),
        (SCRIPT_AND_SET, "eks", False),
        (CRON, "aks", False),
    ],
)
def test_a_workflow_written_for_the_target_is_printed_byte_for_byte(
    capsys, tmp_path, name, target, gke_nodes
):
    # On GKE, whole-GPU nodes alone say that no partition or time-sharing node needs avoiding.
    extra = (
        ["--inventory", whole_gpu_nodes(tmp_path, "cloud.google.com/gke-accelerator", "nvidia-tesla-t4")]
        if gke_nodes
        else []
    )
    code, out, err = translate(capsys, tmp_path, written(name), target, *extra)
    assert code == 0
    assert out == written(name)
    assert "not looked into" not in err


# The walker: views of a step's pod whose edits land in the document, whose copies do not.


def test_a_step_s_view_is_its_pod_and_writes_into_the_document():
    template = yaml.safe_load(written(SCRIPT_AND_SET))
    (check_at, check), (embed_at, embed) = pod_templates(template)
    assert (check_at, embed_at) == ("/spec/templates/1", "/spec/templates/2")
    assert check["spec"]["containers"] == [step(template, "check-gpu")["script"]]
    assert embed["spec"]["containers"] == step(template, "embed")["containerSet"]["containers"]
    assert embed["spec"]["nodeSelector"] is step(template, "embed")["nodeSelector"]
    detached = copy.deepcopy(check)
    detached["spec"]["affinity"] = {}
    detached["metadata"]["annotations"] = {}
    assert "affinity" not in step(template, "check-gpu") and "metadata" not in step(template, "check-gpu")
    assert type(detached["spec"]) is dict
    check["spec"]["affinity"] = {"nodeAffinity": {}}
    del check["spec"]["nodeSelector"]
    check["metadata"]["annotations"] = {"a": "b"}  # the template's metadata, made when first written
    written_step = step(template, "check-gpu")
    assert written_step["affinity"] == {"nodeAffinity": {}} and "nodeSelector" not in written_step
    assert written_step["metadata"] == {"annotations": {"a": "b"}} and "containers" not in written_step


def test_a_default_only_the_step_takes_is_read_and_written_in_the_workflow_s_spec():
    workflow = yaml.safe_load(written(DEFAULTS))
    [(at, transcribe)] = pod_templates(workflow)
    assert at == "/spec/templates/1"
    assert transcribe["spec"]["nodeSelector"] is workflow["spec"]["nodeSelector"]
    del transcribe["spec"]["nodeSelector"]
    transcribe["spec"]["tolerations"] = [AKS_GPU_TAINT]  # set by neither: the step's own
    assert "nodeSelector" not in workflow["spec"] and "tolerations" not in workflow["spec"]
    assert step(workflow, "transcribe")["tolerations"] == [AKS_GPU_TAINT]


def test_preflight_places_a_workflow_s_gpu_step_on_the_target(capsys):
    code = main(["preflight", "--from", "gke", "--to", "eks", "-o", "json", str(WORKFLOWS / GKE_STEP)])
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    [workload] = report["workloads"]
    assert workload["replicas"] == 2  # the CPU step and the GPU step make a pod each
    assert any(
        line.startswith("/spec/templates/2: nvidia.com/gpu: 1, node.kubernetes.io/instance-type=g4dn.xlarge")
        for line in workload["translated"]
    )
    assert report["unread"] == []
