"""The fourth audit's manifests (tests/manifests/audit4/README.md names each published shape) moved to
every shipped map, each output read for what the workload meant: does it schedule there on the
hardware meant, and is anything lost without a word? Swept with the earlier audits' in
test_audit_manifests.py."""

from pathlib import Path

import pytest

from tests.commands.test_audit2_manifests import _required
from tests.commands.test_audit_manifests import _doc
from tests.commands.translating import T4_ON_AKS, TRANSLATED_FROM, translate
from webhook.commands.cli import main
from webhook.commands.common import kinds_read

AUDIT = Path(__file__).parents[1] / "manifests" / "audit4"


@pytest.mark.parametrize("target", ["generic", "oke"])
# Said on GKE, EKS and AKS: test_audit_manifests.py, with the GPU Operator's class.
def test_a_runtime_class_is_not_said_where_the_platform_makes_it_or_the_map_does_not_say(
    capsys, tmp_path, target
):
    # Neither map lists the RuntimeClasses its platform makes (a cluster with the GPU Operator has
    # `nvidia`): nothing is known to say.
    text = (AUDIT / "k3s-nvidia-runtime-class.yaml").read_text()
    code, out, err = translate(capsys, tmp_path, text, target)
    assert code == 0 and "runtimeClassName" not in err
    assert out == text  # already in generic's words: unchanged


def _at(doc, path):
    """The node at a path of keys and list indexes in a document."""
    for step in path:
        doc = doc[step]
    return doc


def _pinned(spec):
    """Each node label the pod spec requires, from its node selector and its required node affinity."""
    return {**spec.get("nodeSelector", {}), **{key: values for key, _, values in _required(spec)}}


# Kinds whose pods are written as pod templates where gpuport did not look: each was reported "not
# looked into" on every map and left as written, Pending on the target (or, for the claims, on the
# scheduler's "insufficient nvidia.com/gpu"). (file, target, the translated pod templates, the label
# each must then require and its value(s).)
OPENED = [
    ("argo-rollout-vllm-gke-l4.yaml", "eks", [("spec", "template")], "node.kubernetes.io/instance-type"),
    ("kruise-cloneset-eks-g6.yaml", "gke", [("spec", "template")], "cloud.google.com/gke-accelerator"),
    (
        "kruise-advanced-statefulset-aks-a100.yaml",
        "eks",
        [("spec", "template")],
        "node.kubernetes.io/instance-type",
    ),
    (
        "keda-scaledjob-eks-g5.yaml",
        "aks",
        [("spec", "jobTargetRef", "template")],
        "node.kubernetes.io/instance-type",
    ),
    (
        "jaxjob-gke-h100.yaml",
        "oke",
        [("spec", "jaxReplicaSpecs", "Worker", "template")],
        "node.kubernetes.io/instance-type",
    ),
    (
        "seldon-deployment-gke-t4.yaml",
        "aks",
        [("spec", "predictors", 0, "componentSpecs", 0)],
        "node.kubernetes.io/instance-type",
    ),
    (
        "codeflare-appwrapper-pytorchjob.yaml",
        "eks",
        [
            ("spec", "components", 0, "template", "spec", "pytorchReplicaSpecs", role, "template")
            for role in ("Master", "Worker")
        ],
        "node.kubernetes.io/instance-type",
    ),
]
WANTED = {
    "argo-rollout-vllm-gke-l4.yaml": ("g6.xlarge", "gr6.8xlarge"),  # any L4 size, spot kept below
    "kruise-cloneset-eks-g6.yaml": "nvidia-l4",
    "kruise-advanced-statefulset-aks-a100.yaml": "p4de.24xlarge",  # A100 80GB
    "keda-scaledjob-eks-g5.yaml": ("Standard_NV36ads_A10_v5",),  # no A10G on AKS: the A10, said
    "jaxjob-gke-h100.yaml": "BM.GPU.H100.8",
    "seldon-deployment-gke-t4.yaml": tuple(T4_ON_AKS),
    "codeflare-appwrapper-pytorchjob.yaml": "p4de.24xlarge",  # GFD's A100-SXM4-80GB
}


@pytest.mark.parametrize(("name", "target", "templates", "label"), OPENED, ids=[o[0] for o in OPENED])
def test_a_kind_that_keeps_a_pod_template_is_opened_and_its_template_translated(
    capsys, tmp_path, name, target, templates, label
):
    text = (AUDIT / name).read_text()
    code, out, err = translate(capsys, tmp_path, text, target)
    assert code == 0, err
    assert "not looked into" not in err
    doc = _doc(out)
    for path in templates:
        template = _at(doc, path)
        pinned = _pinned(template["spec"])
        wanted = WANTED[name]
        if isinstance(wanted, tuple):
            assert set(wanted) <= set(pinned[label]), pinned
        else:
            assert pinned[label] == wanted, pinned
        assert not {"cloud.google.com/gke-accelerator", "nvidia.com/gpu.product"} & set(pinned) - {label}
        assert TRANSLATED_FROM in template["metadata"]["annotations"]  # where the kind's pods take it from


@pytest.mark.parametrize(
    ("name", "target"),
    [
        ("kruise-cloneset-eks-g6.yaml", "eks"),
        ("keda-scaledjob-eks-g5.yaml", "eks"),
        ("kruise-advanced-statefulset-aks-a100.yaml", "aks"),
        ("codeflare-appwrapper-pytorchjob.yaml", "generic"),  # OpenShift AI nodes: GFD's product label
        ("codeflare-appwrapper-pytorchjob.yaml", "kai"),
    ],
)
def test_an_opened_kind_comes_back_unchanged_from_its_own_platform_s_map(capsys, tmp_path, name, target):
    # Before, each came back byte for byte but with "not looked into" said: nothing had been checked.
    text = (AUDIT / name).read_text()
    assert translate(capsys, tmp_path, text, target) == (0, text, "")


def test_a_rollout_given_claims_is_not_told_about_argo_workflows(capsys, tmp_path):
    # Argo Rollouts shares the argoproj.io group with Argo Workflows, whose steps pass resourceClaims to
    # their pods only from v4.1.0: a Rollout's template is a plain pod template, which Rollouts copies.
    text = (AUDIT / "argo-rollout-vllm-gke-l4.yaml").read_text()
    code, out, err = translate(capsys, tmp_path, text, "dra-nvidia")
    assert code == 0, err
    spec = _at(_doc(out), ("spec", "template", "spec"))
    assert spec["resourceClaims"][0]["name"] == "gpuport-vllm"
    assert "Argo Workflows" not in err


def test_an_appwrapper_s_wrapped_kind_read_as_a_view_is_reported_not_opened(capsys, tmp_path):
    # A NIMService's pod is gpuport's view of the NIM operator's fields, whose fit is checked against
    # that kind; wrapped, it is left as written and said.
    wrapped = """\
apiVersion: workload.codeflare.dev/v1beta2
kind: AppWrapper
metadata:
  name: nim
spec:
  components:
  - template:
      apiVersion: apps.nvidia.com/v1alpha1
      kind: NIMService
      metadata:
        name: llama
      spec:
        image:
          repository: nvcr.io/nim/meta/llama-3.1-8b-instruct
          tag: "1.3"
        nodeSelector:
          cloud.google.com/gke-accelerator: nvidia-l4
        resources:
          limits:
            nvidia.com/gpu: 1
"""
    code, out, err = translate(capsys, tmp_path, wrapped, "eks")
    assert (code, out) == (0, wrapped)
    assert (
        "AppWrapper/nim: not looked into: /spec/components/0/template/spec/resources: gpuport reads a "
        "wrapped NIMService only where written alone"
    ) in err


def test_the_commands_name_a_kind_two_groups_use_by_its_group_beside_the_apps_one():
    # OpenKruise's Advanced StatefulSet shares its kind with apps': the help named both by group before
    # ("StatefulSet (apps)"), where the apps kinds are named plainly as batch's Job is.
    kinds = kinds_read().split(", ")
    assert {"StatefulSet", "StatefulSet (apps.kruise.io)", "Job", "Job (batch.volcano.sh)"} <= set(kinds)


@pytest.mark.parametrize(
    ("name", "source", "line"),
    [
        ("jaxjob-gke-h100.yaml", "gke", "JAXJob/default/maxtext-pretrain  training, 2 replica(s)"),
        ("keda-scaledjob-eks-g5.yaml", "eks", "ScaledJob/default/transcribe  training, 1 replica(s)"),
        # Kueue admits the wrapped PyTorchJob's master and two workers together.
        (
            "codeflare-appwrapper-pytorchjob.yaml",
            "generic",
            "AppWrapper/default/finetune-granite  training, 3",
        ),
        ("kruise-advanced-statefulset-aks-a100.yaml", "aks", "StatefulSet/default/vector-index  stateful, 3"),
    ],
)
def test_preflight_waves_an_opened_kind_that_runs_to_completion_with_the_training(
    capsys, tmp_path, name, source, line
):
    # Preflight moves stateless workloads first, training next: a JAXJob, a ScaledJob's Jobs and an
    # AppWrapper around a PyTorchJob were put in the first wave as "inference/stateless".
    code = main(["preflight", "--from", source, "--to", "oke", str(AUDIT / name)])
    out = capsys.readouterr().out
    assert code in (0, 1) and line in out, out


def test_an_appwrapper_s_wrapped_kind_gpuport_does_not_read_is_said_so_not_said_read_elsewhere(
    capsys, tmp_path
):
    text = (AUDIT / "codeflare-appwrapper-pytorchjob.yaml").read_text()
    text = text.replace("kind: PyTorchJob", "kind: PyTorchTrial").replace("kubeflow.org/v1", "example.com/v1")
    code, out, err = translate(capsys, tmp_path, text, "eks")
    assert (code, out) == (0, text)
    assert "gpuport does not know where a wrapped PyTorchTrial keeps its pods" in err
    assert "only where written alone" not in err
