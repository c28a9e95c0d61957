"""The third audit's manifests (tests/manifests/audit3/README.md names each published shape) moved to
every shipped map, each output read for what the workload meant: does it schedule there on the
hardware meant, and is anything lost without a word? Swept with the first two audits' in
test_audit_manifests.py."""

from pathlib import Path

import pytest

from tests.commands.test_audit2_manifests import MAPS, _pod_spec, _required
from tests.commands.test_audit_manifests import _doc
from tests.commands.translating import translate, warnings

AUDIT = Path(__file__).parents[1] / "manifests" / "audit3"
GFD = ("nvidia.com/gpu.memory", "nvidia.com/gpu.count", "nvidia.com/gpu.family")
OWN_LABEL = {
    "gke": "cloud.google.com/gke-accelerator",
    "eks": "node.kubernetes.io/instance-type",
    "aks": "node.kubernetes.io/instance-type",
    "oke": "node.kubernetes.io/instance-type",
    "ack": "aliyun.accelerator/nvidia_name",
}


@pytest.mark.parametrize("target", sorted(OWN_LABEL))
def test_gfd_labels_a_platform_names_its_gpus_without_are_said_kept(capsys, tmp_path, target):
    # A vLLM server on any node of four Hopper GPUs of 70 GB or more, in GPU Feature Discovery's labels:
    # kept on a platform whose nodes carry them only where an admin runs GFD, it stayed Pending there
    # without a word (GFD's product label beside them is translated).
    text = (AUDIT / "gfd-memory-count-deployment.yaml").read_text()
    code, out, err = translate(capsys, tmp_path, text, target)
    assert code == 0, err
    assert [k for k, _, _ in _required(_pod_spec(out))][:3] == list(GFD)  # kept: GFD may run there
    said = warnings(err)
    for key in GFD:
        assert any(
            line.startswith(
                f"GFD label {key} kept: only {target} nodes running GPU Feature Discovery (the GPU Operator) "
                f"have it ({target} names its GPUs by {OWN_LABEL[target]}"
            )
            for line in said
        ), said


@pytest.mark.parametrize(
    ("target", "pin"),
    [
        (
            "gke",
            "cloud.google.com/gke-accelerator: nvidia-h100-80gb, nvidia-h100-mega-80gb, nvidia-h200-141gb",
        ),
        # Four GPUs on one node: p5.4xlarge (one H100) is no pin for this pod.
        ("eks", "node.kubernetes.io/instance-type: p5.48xlarge, p5e.48xlarge, p5en.48xlarge"),
        ("aks", "node.kubernetes.io/instance-type: Standard_ND96isr_H100_v5, Standard_ND96isr_H200_v5"),
    ],
)
def test_gfd_model_labels_said_kept_name_the_target_s_pin_for_the_gpus_they_admit(
    capsys, tmp_path, target, pin
):
    # Hopper with more than 70,000 MiB as NVML reports it (GFD's gpu.memory): H100 80GB, H200...
    text = (AUDIT / "gfd-memory-count-deployment.yaml").read_text()
    _, _, err = translate(capsys, tmp_path, text, target)
    assert f"({target} names its GPUs by {pin} for the GPUs these labels admit)" in err


def test_gfd_model_labels_no_gpu_of_the_target_meets_are_said_so(capsys, tmp_path):
    text = (AUDIT / "gfd-memory-count-deployment.yaml").read_text()
    _, _, err = translate(capsys, tmp_path, text, "aks")
    assert "for the GPUs these labels admit" in err
    _, _, err = translate(capsys, tmp_path, text.replace('["70000"]', '["200000"]'), "aks")
    assert (
        "(aks names its GPUs by node.kubernetes.io/instance-type: none of its GPUs has what these labels ask)"
        in err
    )


@pytest.mark.parametrize("target", ["generic", "kai", "hami", "tke", "dra-nvidia"])
def test_gfd_labels_are_not_said_where_the_map_presumes_gfd(capsys, tmp_path, target):
    # These maps name GPUs by GFD's product label (or by DRA classes on GPU Operator nodes).
    text = (AUDIT / "gfd-memory-count-deployment.yaml").read_text()
    _, _, err = translate(capsys, tmp_path, text, target)
    assert "GPU Feature Discovery" not in err


def test_a_gfd_exclusion_is_not_said(capsys, tmp_path):
    # NotIn and DoesNotExist admit a node without the label: nothing is lost.
    text = (AUDIT / "gfd-memory-count-deployment.yaml").read_text()
    text = text.replace('operator: Gt\n                    values: ["70000"]', "operator: DoesNotExist")
    _, _, err = translate(capsys, tmp_path, text, "eks")
    assert "nvidia.com/gpu.memory kept" not in err and "nvidia.com/gpu.count kept" in err


@pytest.mark.parametrize("target", ["ack", "oke", "generic", "dra-nvidia"])
def test_a_gke_sandbox_runtime_class_is_said_where_the_map_names_no_runtime_class(capsys, tmp_path, target):
    # GKE makes the gvisor RuntimeClass when Sandbox is on; a map that lists no RuntimeClass said
    # nothing, and the API server refused the moved pod ("RuntimeClass gvisor not found").
    text = (AUDIT / "gke-sandbox-gvisor-t4.yaml").read_text()
    code, out, err = translate(capsys, tmp_path, text, target)
    assert code == 0, err
    assert _doc(out)["spec"]["runtimeClassName"] == "gvisor"  # kept: an admin may have made it
    assert (
        "runtimeClassName gvisor kept: the API server refuses the pod unless an admin made it (gke makes "
        f"it; the {target} map does not say {target} does)"
    ) in warnings(err)


def test_a_runtime_class_no_platform_is_said_to_make_is_still_not_said(capsys, tmp_path):
    text = (AUDIT / "gke-sandbox-gvisor-t4.yaml").read_text().replace("gvisor", "kata-qemu")
    _, _, err = translate(capsys, tmp_path, text, "oke")
    assert "runtimeClassName" not in err


def test_a_gke_sandbox_pod_on_gke_gains_only_the_whole_gpu_terms(capsys, tmp_path):
    text = (AUDIT / "gke-sandbox-gvisor-t4.yaml").read_text()
    code, out, err = translate(capsys, tmp_path, text, "gke")
    assert code == 0 and "runtimeClassName" not in err
    spec = _doc(out)["spec"]
    assert spec["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"}
    assert _required(spec) == [("cloud.google.com/gke-gpu-sharing-strategy", "DoesNotExist", ())]


@pytest.mark.parametrize(
    ("name", "target"),
    [
        ("openshift-ai-notebook-h100.yaml", "generic"),
        ("openshift-ai-notebook-h100.yaml", "kai"),
        ("pytorchjob-aks-a100.yaml", "aks"),
        ("rayjob-eks-g5.yaml", "eks"),
    ],
)
def test_a_manifest_comes_back_unchanged_from_its_own_platform_s_map(capsys, tmp_path, name, target):
    text = (AUDIT / name).read_text()
    assert translate(capsys, tmp_path, text, target) == (0, text, "")


@pytest.mark.parametrize(
    ("target", "pinned"),
    [
        ("gke", ("cloud.google.com/gke-accelerator", "In", ("nvidia-h100-80gb", "nvidia-h100-mega-80gb"))),
        ("eks", ("node.kubernetes.io/instance-type", "In", ("p5.48xlarge", "p5.4xlarge"))),
    ],
)
def test_an_openshift_ai_h100_workbench_stays_on_sxm_h100s(capsys, tmp_path, target, pinned):
    # GFD's NVIDIA-H100-80GB-HBM3 is the SXM H100: A3 (high, mega) on GKE, P5 on EKS.
    text = (AUDIT / "openshift-ai-notebook-h100.yaml").read_text()
    code, out, _ = translate(capsys, tmp_path, text, target)
    assert code == 0
    assert _required(_pod_spec(out))[0] == pinned


@pytest.mark.parametrize("target", MAPS)
@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("katib-experiment-gke-t4.yaml", "Experiment/lr-search"),
        ("seldon-v2-server-gke-l4.yaml", "Server/mlserver-gpu"),
        ("kserve-llminferenceservice.yaml", "LLMInferenceService/chat-8b"),
    ],
)
def test_a_kind_gpuport_does_not_open_is_said_left_as_written(capsys, tmp_path, target, name, kind):
    text = (AUDIT / name).read_text()
    code, out, err = translate(capsys, tmp_path, text, target)
    assert (code, out) == (0, text)
    assert (
        f"{kind}: not looked into: gpuport does not know where this kind keeps its pod templates; its GPU "
        "asks (nvidia.com/gpu) are left as written"
    ) in err


def test_a_worker_group_no_node_size_holds_is_refused_naming_the_fix(capsys, tmp_path):
    # Four A10G per g5.12xlarge worker: AKS's A10 sizes hold two at most. The refusal named the sizes
    # but neither the substitution (A10 for A10G) nor what to change.
    text = (AUDIT / "rayjob-eks-g5.yaml").read_text()
    code, out, err = translate(capsys, tmp_path, text, "aks")
    assert (code, out) == (1, text)
    assert (
        "asks for 4 GPUs on one node; no node.kubernetes.io/instance-type with A10 (no A10G here) has more "
        "than 2 (Standard_NV36ads_A10_v5, Standard_NV36adms_A10_v5, Standard_NV72ads_A10_v5): ask for at "
        "most 2 per pod"
    ) in err


def test_gfd_s_sharing_label_beside_gke_s_own_is_said(capsys, tmp_path):
    # The GPU Operator's time-slicing, renamed: on GKE the share becomes a time-sharing node pool's
    # nvidia.com/gpu, and GFD's strategy label, which GKE's own device plugin never writes, is kept.
    text = (AUDIT / "gpu-operator-time-slicing-renamed.yaml").read_text()
    code, out, err = translate(capsys, tmp_path, text, "gke")
    assert code == 0, err
    assert _pod_spec(out)["nodeSelector"]["cloud.google.com/gke-gpu-sharing-strategy"] == "time-sharing"
    assert (
        "GFD label nvidia.com/gpu.sharing-strategy kept: only gke nodes running GPU Feature Discovery" in err
    )


@pytest.mark.parametrize(
    ("target", "pinned"),
    [
        ("eks", {"node.kubernetes.io/instance-type": "p4d.24xlarge"}),
        ("aks", {"node.kubernetes.io/instance-type": "Standard_ND96asr_v4"}),
    ],
)
def test_a_flyte_pod_template_is_translated_where_it_keeps_its_template(capsys, tmp_path, target, pinned):
    # A core PodTemplate keeps its pod template at `template`, beside no spec: it was "not looked into",
    # and its GKE selector left for the webhook to meet in every task pod.
    text = (AUDIT / "flyte-podtemplate-gke-a100.yaml").read_text()
    code, out, err = translate(capsys, tmp_path, text, target)
    assert code == 0 and "not looked into" not in err
    assert _doc(out)["template"]["spec"]["nodeSelector"] == pinned


def test_a_flyte_pod_template_comes_back_from_gke_with_only_the_whole_gpu_terms(capsys, tmp_path):
    text = (AUDIT / "flyte-podtemplate-gke-a100.yaml").read_text()
    code, out, _ = translate(capsys, tmp_path, text, "gke")
    spec = _doc(out)["template"]["spec"]
    assert code == 0 and spec["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-tesla-a100"}
    assert [op for _, op, _ in _required(spec)] == ["DoesNotExist", "DoesNotExist"]


GANG = "the Job's gang scheduling (minAvailable, its PodGroup) does not hold for them"


@pytest.mark.parametrize(
    ("target", "scheduler"),
    [("hami", "hami-scheduler"), ("kai", "kai-scheduler"), ("koordinator", "koord-scheduler")],
)
def test_a_volcano_job_s_task_given_another_scheduler_is_said_to_leave_its_gang(
    capsys, tmp_path, target, scheduler
):
    # Volcano's controller gives a task's pods the Job's scheduler only where the template names none:
    # the scheduler layer's name written in the task took its pods out of Volcano's gang, unsaid.
    text = (AUDIT / "volcano-job-gpu-share.yaml").read_text()
    code, out, err = translate(capsys, tmp_path, text, target)
    assert code == 0, err
    doc = _doc(out)
    assert doc["spec"]["schedulerName"] == "volcano"
    assert doc["spec"]["tasks"][0]["template"]["spec"]["schedulerName"] == scheduler
    assert (
        f"the task's pods are scheduled by {scheduler}, not by the Volcano Job's volcano: {GANG}"
        in warnings(err)
    )


@pytest.mark.parametrize("target", ["volcano", "volcano-gpushare", "gke", "eks"])
def test_a_volcano_job_s_task_left_to_volcano_says_nothing_of_its_gang(capsys, tmp_path, target):
    text = (AUDIT / "volcano-job-gpu-share.yaml").read_text()
    _, _, err = translate(capsys, tmp_path, text, target)
    assert GANG not in err


def test_a_label_removed_is_said_once_not_again_in_the_line_that_replaces_the_selector(capsys, tmp_path):
    # AKS's accelerator label beside the VM size: removed (a label no generic node carries), said so;
    # the line saying what replaces the node selector named it again.
    text = (AUDIT / "pytorchjob-aks-a100.yaml").read_text()
    code, _, err = translate(capsys, tmp_path, text, "generic")
    assert code == 0, err
    said = warnings(err)
    assert (
        said.count("node selector kubernetes.azure.com/accelerator removed: a label no generic node carries")
        == 2
    )
    replaced = [w for w in said if "replaced by required node affinity" in w]
    assert replaced and all(
        w.startswith("node selector node.kubernetes.io/instance-type=Standard_NC24ads_A100_v4 replaced by")
        for w in replaced
    )


@pytest.mark.parametrize("target", ["eks", "aks"])
def test_a_spot_label_carried_over_is_not_also_said_replaced_by_the_gpu_affinity(capsys, tmp_path, target):
    # GKE's spot label becomes the target's capacity word, said so; the line saying what replaced the
    # node selector named it too, as if an instance-type affinity had taken its place.
    text = (Path(__file__).parents[1] / "manifests" / "gke-l4-vllm-spot.yaml").read_text()
    code, _, err = translate(capsys, tmp_path, text, target)
    assert code == 0, err
    said = warnings(err)
    assert any(w.startswith("spot capacity cloud.google.com/gke-spot → ") for w in said), said
    replaced = [w for w in said if "replaced by required node affinity" in w]
    assert replaced and all(
        w.startswith("node selector cloud.google.com/gke-accelerator=nvidia-l4 replaced by") for w in replaced
    ), replaced
