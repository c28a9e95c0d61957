"""The fifth audit's manifests (tests/manifests/audit5/README.md names each published shape) moved to
every shipped map, each output read for what the workload meant: does it schedule there on the
hardware meant, and is anything lost without a word? Swept with the earlier audits' in
test_audit_manifests.py."""

from pathlib import Path

import pytest
import yaml

from tests.commands.test_audit4_manifests import _at, _pinned
from tests.commands.translating import translate, warnings

AUDIT = Path(__file__).parents[1] / "manifests" / "audit5"


def _deployment(out):
    return next(d for d in yaml.safe_load_all(out) if d and d["kind"] == "Deployment")


def _said_within_kubectl(err, *lines):
    """Each of `lines` is among the warnings, and every warning fits kubectl's 120 characters."""
    said = warnings(err)
    for line in lines:
        assert line in said, said
    assert all(len(line) <= 120 for line in said), said


@pytest.mark.parametrize(
    ("target", "label"),
    [
        ("eks", "node.kubernetes.io/instance-type"),
        ("aks", "node.kubernetes.io/instance-type"),
        ("generic", "nvidia.com/gpu.product"),
        ("oke", "node.kubernetes.io/instance-type"),
    ],
)
def test_a_gke_compute_class_s_gpu_model_is_said_lost_with_the_label_to_pin_it_by(
    capsys, tmp_path, target, label
):
    # The Deployment names no model: its ComputeClass's priorities chose two L4s per node. Before, the
    # selector was said "removed: a label no <target> node carries" and the pod took any GPU in silence.
    text = (AUDIT / "gke-custom-compute-class-l4.yaml").read_text()
    code, out, err = translate(capsys, tmp_path, text, target)
    assert code == 0, err
    _said_within_kubectl(
        err,
        "node selector cloud.google.com/compute-class=l4-inference removed: the class chose the GPU model; "
        f"any {target} GPU now",
        f"GKE's, kept: its pods got L4 ×2 per node; on {target} pin it by {label}",
    )
    assert "cloud.google.com/compute-class" not in _pinned(
        _at(_deployment(out), ("spec", "template", "spec"))
    )


def test_a_gke_compute_class_is_kept_and_unsaid_on_gke(capsys, tmp_path):
    # (Like any GKE pod naming no model, it is kept off partitioned and shared nodes, and that is said.)
    text = (AUDIT / "gke-custom-compute-class-l4.yaml").read_text()
    code, out, err = translate(capsys, tmp_path, text, "gke")
    assert code == 0, err
    assert _pinned(_at(_deployment(out), ("spec", "template", "spec")))["cloud.google.com/compute-class"]
    assert "compute-class" not in err and "ComputeClass" not in err


def test_a_compute_class_beside_a_model_the_pod_names_is_said_as_any_label(capsys, tmp_path):
    # GKE Autopilot's Accelerator class with the model beside it (audit2): the model goes on, by the
    # pod's own label; the class chose nothing more.
    text = (AUDIT.parent / "audit2" / "gke-autopilot-accelerator-l4.yaml").read_text()
    _, _, err = translate(capsys, tmp_path, text, "eks")
    assert "node selector cloud.google.com/compute-class removed: a label no eks node carries" in warnings(
        err
    )


@pytest.mark.parametrize("target", ["gke", "aks", "oke"])
def test_an_intel_gaudi_pod_is_refused_where_the_map_lists_its_devices_and_no_gaudi(capsys, tmp_path, target):
    # habana.ai/gaudi was described by no map: kept in silence, the pod Pending for ever on the target.
    # Without its EFA asks, refused on these maps as EKS's too.
    lines = (AUDIT / "eks-gaudi-dl1-pod.yaml").read_text().splitlines(keepends=True)
    text = "".join(line for line in lines if "vpc.amazonaws.com/efa" not in line)
    code, out, err = translate(capsys, tmp_path, text, target)
    assert (code, out) == (1, text)
    assert (
        f"denied: asks for habana.ai/gaudi (on eks: Intel Gaudi accelerator (Habana), not a GPU); {target} "
        "has no equivalent"
    ) in err


@pytest.mark.parametrize("target", ["generic", "volcano", "ack"])
def test_an_intel_gaudi_pod_is_kept_and_said_where_the_map_does_not_say_its_devices(capsys, tmp_path, target):
    text = (AUDIT / "eks-gaudi-dl1-pod.yaml").read_text()
    code, out, err = translate(capsys, tmp_path, text, target)
    assert code == 0 and out == text
    assert (
        "habana.ai/gaudi (on eks: Intel Gaudi accelerator (Habana), not a GPU) kept as written: the "
        f"{target} map does not say whether its nodes have it"
    ) in warnings(err)


def test_an_intel_gaudi_pod_comes_back_unchanged_from_eks(capsys, tmp_path):
    text = (AUDIT / "eks-gaudi-dl1-pod.yaml").read_text()
    assert translate(capsys, tmp_path, text, "eks") == (0, text, "")


@pytest.mark.parametrize("target", ["eks", "aks", "generic"])
def test_a_gke_reservation_left_behind_is_said_as_capacity_lost(capsys, tmp_path, target):
    # Kept as before (a named reservation is not any reserved capacity), said as what it is: the pod
    # now takes any capacity, where before the words were those of a stray label.
    text = (AUDIT / "gke-reservation-h100-job.yaml").read_text()
    code, _, err = translate(capsys, tmp_path, text, target)
    assert code == 0, err
    _said_within_kubectl(
        err,
        "node selector cloud.google.com/reservation-name=a3-high-reservation removed: GKE's reservation; "
        f"any {target} capacity now",
    )


def test_mig_single_pins_only_nvidia_products_for_a_whole_nvidia_gpu(capsys, tmp_path):
    # A whole GPU on MIG "single" nodes is pinned to plain product names; the map reads GFD's names
    # for the whole catalogue, and AMD's MI300X was among them.
    text = (AUDIT / "gke-custom-compute-class-l4.yaml").read_text()
    code, out, err = translate(capsys, tmp_path, text, "generic-mig-single")
    assert code == 0, err
    products = _pinned(_at(_deployment(out), ("spec", "template", "spec")))["nvidia.com/gpu.product"]
    assert "NVIDIA-L4" in products and not [p for p in products if "AMD" in p]
