"""The audit's manifests (tests/manifests/audit/README.md names each published shape) moved to every
shipped map, each output read for what the workload meant: does it schedule there on the hardware
meant, and is anything lost without a word?"""

from pathlib import Path

import pytest
import yaml

from tests.commands.translating import translate, warnings
from webhook.config.cloudmap import default_directory

AUDIT = Path(__file__).parents[1] / "manifests" / "audit"
MAPS = sorted(p.stem for p in default_directory().glob("*.yaml") if p.stem != "gpus")
MANIFESTS = sorted(p.name for p in AUDIT.glob("*.yaml"))
# Every audit's manifests (the later audits' are read in test_audit2_manifests.py,
# test_audit3_manifests.py, test_audit4_manifests.py and test_audit5_manifests.py): swept together below.
EVERY_AUDITED = sorted(
    str(p.relative_to(AUDIT.parent))
    for folder in ("audit", "audit2", "audit3", "audit4", "audit5")
    for p in (AUDIT.parent / folder).glob("*.yaml")
)


def _doc(out):
    return next(d for d in yaml.safe_load_all(out) if d)


@pytest.mark.parametrize("target", MAPS)
@pytest.mark.parametrize("name", EVERY_AUDITED)
def test_every_audit_manifest_is_translated_or_refused_in_words_on_every_map(capsys, tmp_path, name, target):
    text = (AUDIT.parent / name).read_text()
    code, out, err = translate(capsys, tmp_path, text, target)
    assert code in (0, 1), err
    if code == 1:
        assert "denied:" in err and out == text  # refused: printed as written, the reason said
    else:
        _doc(out)  # parses
    assert "Traceback" not in err


@pytest.mark.parametrize("target", ["gke", "eks", "aks"])
@pytest.mark.parametrize(
    "name",
    [
        "audit/vllm-stack-rendered.yaml",  # the GPU Operator's class, in a chart translated there
        # k3s's sample: a plain nvidia.com/gpu through k3s's class, already in the target's words. The
        # warning was given only to what gpuport translated: this one moved in silence.
        "audit4/k3s-nvidia-runtime-class.yaml",
    ],
)
def test_the_gpu_operator_s_runtime_class_is_said_where_the_platform_does_not_make_it(
    capsys, tmp_path, name, target
):
    # The API server's RuntimeClass admission refuses a pod naming a RuntimeClass that does not exist.
    text = (AUDIT.parent / name).read_text()
    code, out, err = translate(capsys, tmp_path, text, target)
    assert code == 0, err
    doc = _doc(out)
    spec = doc["spec"] if doc["kind"] == "Pod" else doc["spec"]["template"]["spec"]
    assert spec["runtimeClassName"] == "nvidia"  # kept: an admin may make it
    # True in both cases: whether or not an admin made the class, the platform did not.
    assert (
        f"runtimeClassName nvidia kept: {target} does not make it; the API server refuses the pod unless "
        "an admin made a RuntimeClass nvidia"
    ) in warnings(err)


def test_a_runtime_class_is_not_said_where_the_map_does_not_say_which_the_platform_makes(capsys, tmp_path):
    text = (AUDIT / "vllm-stack-rendered.yaml").read_text()
    _, _, err = translate(capsys, tmp_path, text, "oke")
    assert "runtimeClassName" not in err


@pytest.mark.parametrize("target", ["eks", "aks", "generic"])
def test_replicas_kept_off_each_other_s_gke_host_stay_off_each_other_s_node(capsys, tmp_path, target):
    text = (AUDIT / "gke-host-anti.yaml").read_text()
    code, out, err = translate(capsys, tmp_path, text, target)
    assert code == 0, err
    terms = _doc(out)["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    assert (
        terms["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"] == "kubernetes.io/hostname"
    )
    assert (
        "topology key cloud.google.com/gce-topology-host → kubernetes.io/hostname: apart by node, not host"
        in warnings(err)
    )


def test_gke_s_mps_clients_per_gpu_is_said_removed_and_the_share_kept(capsys, tmp_path):
    text = (AUDIT / "gke-mps-l4.yaml").read_text()
    code, out, err = translate(capsys, tmp_path, text, "eks")
    assert code == 0, err
    limits = _doc(out)["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"nvidia.com/gpu.shared": 1}
    said = warnings(err)
    assert (
        "node selector cloud.google.com/gke-max-shared-clients-per-gpu removed: a label no eks node carries"
        in said
    )
    assert (
        "nvidia.com/gpu.shared exists only with the device plugin's time-slicing or MPS set to "
        "renameByDefault" in said
    )


@pytest.mark.parametrize("target", MAPS)
def test_a_slinky_node_set_s_gpus_are_said_left_as_written(capsys, tmp_path, target):
    text = (AUDIT / "slinky-nodeset.yaml").read_text()
    code, out, err = translate(capsys, tmp_path, text, target)
    assert (code, out) == (0, text)
    assert "not looked into: gpuport does not know where this kind keeps its pod templates" in err


def test_a_group_on_one_eks_network_layer_is_refused_where_no_node_says_its_layer(capsys, tmp_path):
    text = (AUDIT / "lws-eks-p5.yaml").read_text()
    code, _, err = translate(capsys, tmp_path, text, "generic")
    assert code == 1
    assert "add topology_labels.subblock to the generic map" in err
    # Without its EFA asks (OKE gives no EFA: refused, test_devices_cli.py), the group's layer becomes
    # OKE's local block.
    code, out, err = translate(
        capsys, tmp_path, text.replace("              vpc.amazonaws.com/efa: 32\n", ""), "oke"
    )
    assert code == 0, err
    annotation = _doc(out)["metadata"]["annotations"]["leaderworkerset.sigs.k8s.io/exclusive-topology"]
    assert annotation == "oci.oraclecloud.com/rdma.local_block_id"


# (target, how the map says the slice could be shared there): every map that takes the partition.
PARTITION_SHARING_LOST = [
    (
        "eks",
        "to share it, an admin sets replicas: 2 for nvidia.com/mig-1g.5gb in the device plugin's sharing "
        "config (timeSlicing; mps for whole GPUs only)",
    ),
    (
        "generic",
        "to share it, an admin sets replicas: 2 for nvidia.com/mig-1g.5gb in the device plugin's sharing "
        "config (timeSlicing; mps for whole GPUs only)",
    ),
    (
        "generic-mig-single",
        "to share it, an admin sets replicas: 2 for nvidia.com/gpu in the device plugin's sharing config "
        "(timeSlicing; mps for whole GPUs only)",
    ),
    ("aks", "aks offers no GPU sharing"),
    ("dra-nvidia", "pods share one on dra-nvidia by referencing one ResourceClaim"),
    ("hami", "hami offers a share of a GPU by memory (nvidia.com/gpumem)"),
    ("volcano", "volcano offers a share of a GPU by memory (volcano.sh/vgpu-memory)"),
    (
        "kai",
        "kai offers a share of a GPU by pod annotation (gpu-fraction or gpu-memory, with schedulerName "
        "kai-scheduler)",
    ),
]


@pytest.mark.parametrize(("target", "advice"), PARTITION_SHARING_LOST)
def test_a_time_shared_gke_partition_moved_says_the_slice_is_no_longer_shared(
    capsys, tmp_path, target, advice
):
    # GKE gave two pods each 1g.5gb slice; elsewhere the slice is one pod's: twice the slices.
    text = (AUDIT / "gke-partition-time-shared.yaml").read_text()
    code, _, err = translate(capsys, tmp_path, text, target)
    assert code == 0, err
    assert (
        f"MIG 1g.5gb no longer shared: on gke 2 pods shared each slice (time-sharing); on {target} each pod "
        f"holds one; {advice}"
    ) in warnings(err)


def test_every_map_keeps_says_or_refuses_a_time_shared_partition(capsys, tmp_path):
    text = (AUDIT / "gke-partition-time-shared.yaml").read_text()
    silent = []
    for target in MAPS:
        code, _, err = translate(capsys, tmp_path, text, target)
        said = code == 1 or any("no longer shared" in line for line in warnings(err))
        if target != "gke" and not said:
            silent.append(target)
    assert silent == []


@pytest.mark.parametrize("target", ["eks", "generic", "generic-mig-single"])
def test_gke_s_mps_sharing_moved_says_its_clients_and_what_an_admin_sets(capsys, tmp_path, target):
    text = (AUDIT / "gke-mps-l4.yaml").read_text()
    code, _, err = translate(capsys, tmp_path, text, target)
    assert code == 0, err
    assert (
        "gke's mps sharing by 3 clients per GPU (cloud.google.com/gke-max-shared-clients-per-gpu) not kept "
        f"as such: on {target} its nodes' sharing set-up decides how and by how many; an admin sets "
        "replicas: 3 for nvidia.com/gpu in the device plugin's sharing config (timeSlicing; mps for whole "
        "GPUs only)"
    ) in warnings(err)


def test_every_map_keeps_says_or_refuses_gke_s_mps_sharing(capsys, tmp_path):
    text = (AUDIT / "gke-mps-l4.yaml").read_text()
    silent = []
    for target in MAPS:
        code, out, err = translate(capsys, tmp_path, text, target)
        said = code == 1 or any("mps sharing" in line for line in warnings(err))
        if not said and out != text:
            silent.append(target)
    assert silent == []


@pytest.mark.parametrize(
    ("target", "resource"),
    [("hami", "nvidia.com/gpumem"), ("volcano", "volcano.sh/vgpu-memory"), ("ack", "aliyun.com/gpu-mem")],
)
def test_gke_s_mps_share_on_a_map_sharing_by_memory_is_refused_asking_for_the_memory(
    capsys, tmp_path, target, resource
):
    # The pod names its model (nvidia-l4) already; GKE's MPS share has no size a model would give.
    text = (AUDIT / "gke-mps-l4.yaml").read_text()
    code, _, err = translate(capsys, tmp_path, text, target)
    assert code == 1
    assert (
        f"asks for a shared GPU without a memory size; {target} shares GPUs by memory ({resource}): ask for "
        f"{resource} directly, the GPU memory the container needs"
    ) in err
    assert "name one GPU model" not in err
