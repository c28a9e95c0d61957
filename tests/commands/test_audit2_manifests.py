"""The second audit's manifests (tests/manifests/audit2/README.md names each published shape) moved to
every shipped map, each output read for what the workload meant: does it schedule there on the
hardware meant, and is anything lost without a word?"""

from pathlib import Path

import pytest

from tests.commands.test_audit_manifests import _doc
from tests.commands.translating import translate, warnings
from webhook.config.cloudmap import default_directory

AUDIT = Path(__file__).parents[1] / "manifests" / "audit2"
MAPS = sorted(p.stem for p in default_directory().glob("*.yaml") if p.stem != "gpus")


def _pod_spec(out):
    return _doc(out)["spec"]["template"]["spec"]


def _required(spec):
    """Every required node-affinity expression as (key, operator, values)."""
    terms = (
        spec.get("affinity", {}).get("nodeAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    )
    return [
        (e["key"], e["operator"], tuple(e.get("values", ())))
        for t in (terms or {}).get("nodeSelectorTerms", ())
        for e in t.get("matchExpressions", ())
    ]


@pytest.mark.parametrize(
    ("target", "pinned"),
    [
        ("gke", ("cloud.google.com/gke-accelerator", "nvidia-h200-141gb")),
        ("aks", ("node.kubernetes.io/instance-type", "Standard_ND96isr_H200_v5")),
        ("oke", ("node.kubernetes.io/instance-type", "BM.GPU.H200.8")),
    ],
)
def test_an_eks_auto_mode_gpu_name_keeps_its_gpus_elsewhere(capsys, tmp_path, target, pinned):
    # EKS Auto Mode names the GPU in its own label; read as nothing, the pin was dropped and the pod
    # sent to any GPU of the target (a T4 for an H200 server).
    text = (AUDIT / "eks-auto-mode-h200.yaml").read_text()
    code, out, _ = translate(capsys, tmp_path, text, target)
    assert code == 0
    assert _pod_spec(out)["nodeSelector"] == dict([pinned])


def test_an_eks_auto_mode_gpu_name_is_read_as_its_model_on_generic(capsys, tmp_path):
    text = (AUDIT / "eks-auto-mode-h200.yaml").read_text()
    code, out, _ = translate(capsys, tmp_path, text, "generic")
    assert code == 0
    # Two GPUs on EKS's H200 types (p5e, p5en: HGX boards) reach each other over NVSwitch: the H200 NVL
    # PCIe card is left out, as for any multi-GPU pod written for sxm nodes.
    assert _pod_spec(out)["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H200"}
    assert _required(_pod_spec(out)) == []


def test_an_eks_auto_mode_pod_is_left_as_written_on_eks(capsys, tmp_path):
    text = (AUDIT / "eks-auto-mode-h200.yaml").read_text()
    assert translate(capsys, tmp_path, text, "eks")[:2] == (0, text)


@pytest.mark.parametrize("target", ["gke", "eks", "oke", "generic"])
def test_an_aks_node_auto_provisioning_gpu_name_is_not_kept_inert_elsewhere(capsys, tmp_path, target):
    # Karpenter on AKS labels its nodes karpenter.azure.com/sku-gpu-name: no other cloud's node carries
    # it, and kept it left the Job Pending for ever, without a word.
    text = (AUDIT / "aks-nap-a100.yaml").read_text()
    code, out, err = translate(capsys, tmp_path, text, target)
    assert code == 0
    spec = _pod_spec(out)
    written = [*spec.get("nodeSelector", {}), *(k for k, _, _ in _required(spec))]
    assert not [k for k in written if k.startswith("karpenter.azure.com/")]
    assert (
        f"node selector karpenter.azure.com/sku-gpu-count removed: a label no {target} node carries"
        in warnings(err)
    )


@pytest.mark.parametrize(
    ("target", "key", "values"),
    [
        ("gke", "cloud.google.com/gke-accelerator", ("nvidia-a100-80gb",)),
        ("eks", "node.kubernetes.io/instance-type", ("p4de.24xlarge",)),
        ("generic", "nvidia.com/gpu.product", ("NVIDIA-A100-SXM4-80GB", "NVIDIA-A100-80GB-PCIe")),
    ],
)
def test_an_aks_node_auto_provisioning_a100_stays_an_80gb_a100(capsys, tmp_path, target, key, values):
    # "A100" is the accelerator part of the NC A100 v4 and NDm A100 v4 sizes' names, both 80GB; the
    # 40GB ND96asr_v4's name has none.
    text = (AUDIT / "aks-nap-a100.yaml").read_text()
    _, out, _ = translate(capsys, tmp_path, text, target)
    spec = _pod_spec(out)
    pins = {k: (v,) for k, v in spec.get("nodeSelector", {}).items()}
    pins |= {k: v for k, op, v in _required(spec) if op == "In"}
    assert pins[key] == values


KUEUE_REQUIRED = "kueue.x-k8s.io/podset-required-topology"


def _template_annotations(out):
    return _doc(out)["spec"]["template"]["metadata"]["annotations"]


@pytest.mark.parametrize(
    ("target", "level"),
    [("eks", "topology.k8s.aws/network-node-layer-2"), ("oke", "oci.oraclecloud.com/rdma.network_block_id")],
)
def test_a_kueue_topology_level_on_a_gke_block_becomes_the_target_s_block(capsys, tmp_path, target, level):
    # Kueue admits the Job only on a level of its Topology object: kept, GKE's block label is a level
    # no node of the target has, and the Job stays suspended for ever.
    text = (AUDIT / "kueue-tas-gke-block.yaml").read_text()
    code, out, err = translate(capsys, tmp_path, text, target)
    assert code == 0, err
    assert _template_annotations(out)[KUEUE_REQUIRED] == level
    assert f"topology key cloud.google.com/gce-topology-block → {level} (block)" in warnings(err)


def test_a_kueue_required_topology_is_refused_where_no_node_says_its_block(capsys, tmp_path):
    text = (AUDIT / "kueue-tas-gke-block.yaml").read_text()
    code, out, err = translate(capsys, tmp_path, text, "aks")
    assert (code, out) == (1, text)
    assert f"annotation {KUEUE_REQUIRED}" in err
    assert "add topology_labels.block to the aks map" in err


def test_a_kueue_preferred_topology_is_removed_with_a_word_where_no_node_says_its_block(capsys, tmp_path):
    text = (AUDIT / "kueue-tas-gke-block.yaml").read_text()
    preferred = text.replace(KUEUE_REQUIRED, "kueue.x-k8s.io/podset-preferred-topology")
    code, out, err = translate(capsys, tmp_path, preferred, "aks")
    assert code == 0, err
    assert "kueue.x-k8s.io/podset-preferred-topology" not in _doc(out)["spec"]["template"]["metadata"].get(
        "annotations", {}
    )
    assert (
        "preferred affinity on cloud.google.com/gce-topology-block removed: no aks node has it, "
        "it only scored" in warnings(err)
    )


def test_a_kueue_topology_level_is_left_as_written_on_its_own_platform(capsys, tmp_path):
    text = (AUDIT / "kueue-tas-gke-block.yaml").read_text()
    code, out, _ = translate(capsys, tmp_path, text, "gke")
    assert code == 0
    assert _template_annotations(out)[KUEUE_REQUIRED] == "cloud.google.com/gce-topology-block"


@pytest.mark.parametrize("target", MAPS)
@pytest.mark.parametrize("devices", ["gpus", "hostDevices"])
def test_a_kubevirt_vm_s_passed_through_gpu_is_said_left_as_written(capsys, tmp_path, target, devices):
    # The VM asks its GPU in its domain's devices, by the passthrough plugin's name: it was printed as
    # written without a word on every map, although only nodes running that plugin can take it.
    text = (AUDIT / "kubevirt-vm-t4.yaml").read_text().replace("          gpus:", f"          {devices}:")
    code, out, err = translate(capsys, tmp_path, text, target)
    assert (code, out) == (0, text)
    assert "not looked into: KubeVirt passes its GPUs through to the VM" in err
    assert "its GPU asks (nvidia.com/TU104GL_Tesla_T4) are left as written" in err


def test_a_kind_gpuport_does_not_open_is_said_for_a_gpu_name_no_map_reads(capsys, tmp_path):
    # A Slinky NodeSet (tests/manifests/audit) asking Intel's GPUs: named by no map, it was not taken for
    # a GPU ask, and the document was passed without a word.
    slinky = (AUDIT.parent / "audit" / "slinky-nodeset.yaml").read_text()
    text = slinky.replace("nvidia.com/gpu", "gpu.intel.com/i915")
    code, out, err = translate(capsys, tmp_path, text, "gke")
    assert (code, out) == (0, text)
    assert "its GPU asks (gpu.intel.com/i915) are left as written" in err


def test_a_nim_service_moved_to_gke_leaves_the_whole_gpu_terms_to_the_webhook(capsys, tmp_path):
    # The NIM operator takes no affinity from a NIMService. Moved to GKE, the only affinity the pod
    # needs is GKE's whole-GPU terms, which the webhook gives every pod in GKE's words when it is
    # created: refused before, although the same NIMService written for GKE passes.
    text = (AUDIT / "nimservice-aks-a100.yaml").read_text()
    code, out, err = translate(capsys, tmp_path, text, "gke")
    assert code == 0, err
    spec = _doc(out)["spec"]
    assert spec["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-a100-80gb"}
    assert "affinity" not in spec
    assert (
        "the webhook adds affinity, which the NIM operator does not take from a NIMService, to its pods "
        "when they are created" in warnings(err)
    )


def test_a_nim_service_is_still_refused_where_the_webhook_would_not_pin_its_gpus(capsys, tmp_path):
    # On generic the A100 80GB is two GFD product names: a native pod there is any GPU, so the webhook
    # would not add the pin; the refusal names the nodeSelector that would.
    text = (AUDIT / "nimservice-aks-a100.yaml").read_text()
    code, out, err = translate(capsys, tmp_path, text, "generic")
    assert (code, out) == (1, text)
    assert (
        "pin the GPUs in a nodeSelector instead: nvidia.com/gpu.product: one of NVIDIA-A100-SXM4-80GB, "
        "NVIDIA-A100-80GB-PCIe" in err
    )


@pytest.mark.parametrize(
    ("target", "line"),
    [
        (
            "gke",
            "        cloud.google.com/gke-accelerator: nvidia-h200-141gb  # the GPU, as Auto Mode labels it",
        ),
        ("oke", "        node.kubernetes.io/instance-type: BM.GPU.H200.8  # the GPU, as Auto Mode labels it"),
    ],
)
def test_a_rewritten_selector_keeps_its_comment_two_spaces_after_a_longer_value(
    capsys, tmp_path, target, line
):
    # The author wrote two spaces before the comment (yamllint's default); a longer value written on
    # the line moved the comment to one space after it.
    text = (AUDIT / "eks-auto-mode-h200.yaml").read_text()
    _, out, _ = translate(capsys, tmp_path, text, target)
    assert line in out.splitlines()


@pytest.mark.parametrize("target", ["eks", "aks", "oke"])
def test_a_daemonset_on_gke_s_gpu_nodes_asking_no_gpu_is_said_to_run_nowhere(capsys, tmp_path, target):
    # GKE's DCGM exporter runs on nodes with the accelerator label and asks no GPU: gpuport translates
    # nothing, and on another cloud the DaemonSet made no pod at all, without a word.
    text = (AUDIT / "gke-dcgm-exporter-daemonset.yaml").read_text()
    code, out, err = translate(capsys, tmp_path, text, target)
    assert (code, out) == (0, text)
    assert (
        "asks for no GPU, so nothing is translated, yet it selects nodes by cloud.google.com/gke-accelerator "
        f"(a GPU label of another platform), which no {target} node carries: its pods run on no {target} "
        f"node (select {target}'s GPU nodes by a label they carry)"
    ) in warnings(err)


@pytest.mark.parametrize("target", ["gke", "generic"])
def test_a_daemonset_asking_no_gpu_is_not_told_where_its_gpu_label_may_be_right(capsys, tmp_path, target):
    # On GKE the label is its own; a scheduler layer's map (generic) may run on GKE.
    text = (AUDIT / "gke-dcgm-exporter-daemonset.yaml").read_text()
    assert translate(capsys, tmp_path, text, target) == (0, text, "")


@pytest.mark.parametrize("target", ["eks", "aks", "generic"])
def test_a_gpu_pod_on_gke_s_accelerator_label_exists_loses_the_term_with_a_word(capsys, tmp_path, target):
    # The exporter made to ask a GPU: as written it required a node with GKE's accelerator label, which
    # no node elsewhere has, and was kept as "native" (the ask is in the target's words) without a word:
    # its pods were never made. The term goes, said; the GPU ask keeps it on GPU nodes.
    code, out, err = translate(capsys, tmp_path, _asking("nvidia.com/gpu"), target)
    assert code == 0, err
    spec = _doc(out)["spec"]["template"]["spec"]
    assert ("cloud.google.com/gke-accelerator", "Exists", ()) not in _required(spec)
    assert "asks for no GPU" not in err
    assert (
        f"node affinity cloud.google.com/gke-accelerator Exists removed: no {target} node has it; its GPU "
        f"ask keeps the pod on {target}'s GPU nodes"
    ) in warnings(err)


def test_a_pod_on_gke_s_gpu_nodes_asking_a_gpu_no_map_reads_is_not_told_it_asks_none(capsys, tmp_path):
    _, _, err = translate(capsys, tmp_path, _asking("gpu.intel.com/i915"), "eks")
    assert "asks for no GPU" not in err and "gpu.intel.com/i915" in err


def _asking(name):
    """The exporter made to ask a GPU by `name`."""
    text = (AUDIT / "gke-dcgm-exporter-daemonset.yaml").read_text()
    image = "          image: registry.example.com/nvidia/dcgm-exporter:3.3.8\n"
    asks = f"          resources:\n            limits:\n              {name}: 1\n"
    assert image in text
    return text.replace(image, image + asks)


# KEP-5004 (DeviceClass spec.extendedResourceName, alpha in 1.34): the class NVIDIA's DRA driver demo
# makes for whole GPUs, standing for the device plugin's name.
WHOLE_GPU_CLASS = """apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: gpu-extended.nvidia.com
spec:
  extendedResourceName: nvidia.com/gpu
  selectors:
  - cel:
      expression: "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
---
"""


def test_a_nim_service_refused_on_a_dra_map_names_the_device_class_that_would_serve_it(capsys, tmp_path):
    # The NIM operator takes no resourceClaims from a NIMService: the refusal names the fix an admin has.
    text = (AUDIT / "nimservice-aks-a100.yaml").read_text()
    code, out, err = translate(capsys, tmp_path, text, "dra-nvidia")
    assert (code, out) == (1, text)
    assert (
        "an admin gives a DeviceClass the GPU resource it asks as its extendedResourceName "
        "(Kubernetes 1.34+): an ask naming no GPU model is then served as written" in err
    )


def test_the_device_class_the_refusal_names_does_serve_a_nim_service_asking_no_model(capsys, tmp_path):
    # What the refusal promises holds: with that class, a NIMService asking a GPU and no model is kept.
    text = (AUDIT / "nimservice-aks-a100.yaml").read_text()
    unpinned = "\n".join(
        line for line in text.splitlines() if "nodeSelector:" not in line and "instance-type" not in line
    )
    code, out, err = translate(capsys, tmp_path, WHOLE_GPU_CLASS + unpinned + "\n", "dra-nvidia")
    assert code == 0, err
    spec = _doc(out.split("---\n", 1)[1])["spec"]
    assert spec["resources"] == {"limits": {"nvidia.com/gpu": 1}}  # as written: the class serves it
    assert "resourceClaims" not in out
