"""`gpuport translate` on manifests shaped like the clouds' published samples (tests/manifests/catalogue/,
sources in its README), judged on what the catalogue says: a substitute is a GPU users buy as the
same thing (same class, at least the memory as sold, the same family first)."""

import shutil
from pathlib import Path

import pytest
import yaml

from webhook.commands.cli import main
from webhook.config.cloudmap import default_directory

MANIFESTS = Path(__file__).parents[1] / "manifests"
CATALOGUE_MANIFESTS = MANIFESTS / "catalogue"


def translate(capsys, path, target, *extra):
    code = main(["translate", "--to", target, str(path), *extra])
    out, err = capsys.readouterr()
    return code, [d for d in yaml.safe_load_all(out) if d], err


def accepted(doc, label):
    """The values of `label` the pod template's node selector or required affinity accepts."""
    spec = doc["spec"]["template"]["spec"]
    if label in spec.get("nodeSelector", {}):
        return {spec["nodeSelector"][label]}
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    found = [
        set(e["values"])
        for term in terms["nodeSelectorTerms"]
        for e in term["matchExpressions"]
        if e["key"] == label and e["operator"] == "In"
    ]
    assert len(found) == 1, found
    return found[0]


def inventory(tmp_path, label, *values):
    """Nodes of eight whole GPUs, one per label value."""
    nodes = [
        {
            "kind": "Node",
            "metadata": {"name": f"node-{i}", "labels": {label: value}},
            "status": {"allocatable": {"nvidia.com/gpu": "8"}},
        }
        for i, value in enumerate(values)
    ]
    path = tmp_path / "nodes.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": nodes}))
    return str(path)


# (target, its model label, the A10 values it writes for an L4 inference Deployment)
L4_TO_A10 = [
    (
        "aks",
        "node.kubernetes.io/instance-type",
        {"Standard_NV36ads_A10_v5", "Standard_NV36adms_A10_v5", "Standard_NV72ads_A10_v5"},
    ),
    ("oke", "node.kubernetes.io/instance-type", {"VM.GPU.A10.1", "VM.GPU.A10.2", "BM.GPU.A10.4"}),
    ("ack", "aliyun.accelerator/nvidia_name", {"NVIDIA-A10"}),
]


@pytest.mark.parametrize(("target", "label", "values"), L4_TO_A10)
def test_a_gke_l4_deployment_goes_to_the_a10_both_sold_as_24_gb(capsys, target, label, values):
    # NVML gives an L4 23,034 MiB and an A10 23,028 MiB: both are 24 GB inference cards.
    code, docs, err = translate(capsys, MANIFESTS / "gke-l4-vllm-spot.yaml", target)
    assert code == 0, err
    assert accepted(docs[0], label) == values
    assert "gpuport: no L4 here: using A10" in err


def test_an_l4_deployment_where_no_inference_gpu_has_24_gb_is_refused_with_the_figures(capsys):
    code, _, err = translate(capsys, MANIFESTS / "gke-l4-vllm-spot.yaml", "cce")
    assert code == 1
    assert (
        "asks for L4 (24 GB, inference); cce offers no NVIDIA inference GPU with at least 24 GB (it offers "
        "T4 (16 GB, inference), V100-32GB (32 GB, training), A100-40GB (40 GB, training), "
        "A100-80GB (80 GB, training))"
    ) in err


# (target, node label, the label values of its A100 80GB and H100 80GB nodes, the A100 80GB one)
A100_80_AND_H100_80 = [
    ("eks", "node.kubernetes.io/instance-type", ("p5.48xlarge", "p4de.24xlarge"), "p4de.24xlarge"),
    (
        "aks",
        "node.kubernetes.io/instance-type",
        ("Standard_ND96isr_H100_v5", "Standard_ND96amsr_A100_v4"),
        "Standard_ND96amsr_A100_v4",
    ),
    ("oke", "node.kubernetes.io/instance-type", ("BM.GPU.H100.8", "BM.GPU.A100-v2.8"), "BM.GPU.A100-v2.8"),
]


@pytest.mark.parametrize(("target", "label", "present", "a100"), A100_80_AND_H100_80)
def test_an_a100_40gb_job_goes_to_the_a100_80gb_before_the_h100_80gb(
    capsys, tmp_path, target, label, present, a100
):
    # NVML gives the H100 80GB less memory than the A100 80GB (81,559 vs 81,920 MiB); both are sold as
    # 80 GB, and the A100 80GB is the same family as the A100 40GB the job was written for.
    nodes = inventory(tmp_path, label, *present)
    code, docs, err = translate(
        capsys, CATALOGUE_MANIFESTS / "gke-a100-40gb-job.yaml", target, "--inventory", nodes
    )
    assert code == 0, err
    values = accepted(docs[0], label)
    assert a100 in values
    assert present[0] not in values
    assert "gpuport: no A100-40GB here: using A100-80GB" in err


# (target, its model label, what the p4d job's 8 A100 40GB SXM4 GPUs on NVSwitch become there)
P4D_THERE = [
    ("tke", "nvidia.com/gpu.product", {"NVIDIA-A100-SXM4-40GB"}),
    ("generic", "nvidia.com/gpu.product", {"NVIDIA-A100-SXM4-40GB"}),
    ("aks", "node.kubernetes.io/instance-type", {"Standard_ND96asr_v4"}),
    ("ack", "aliyun.accelerator/nvidia_name", {"NVIDIA-A100-SXM4-40GB"}),
]


@pytest.mark.parametrize(("target", "label", "values"), P4D_THERE)
def test_an_eks_p4d_nccl_job_never_lands_on_pcie_a100s(capsys, target, label, values):
    # p4d.24xlarge joins its A100s by NVSwitch: a product selector that also accepts
    # NVIDIA-A100-PCIE-40GB would let the 8-GPU job land on cards without NVLink.
    code, docs, err = translate(capsys, CATALOGUE_MANIFESTS / "eks-p4d-nccl-job.yaml", target)
    assert code == 0, err
    assert accepted(docs[0], label) == values


def test_a_one_gpu_pod_from_a_p4d_keeps_pcie_cards_it_has_no_peer_to_reach(capsys, tmp_path):
    text = (CATALOGUE_MANIFESTS / "eks-p4d-nccl-job.yaml").read_text().replace("gpu: 8", "gpu: 1")
    path = tmp_path / "one.yaml"
    path.write_text(text)
    code, docs, err = translate(capsys, path, "tke")
    assert code == 0, err
    assert accepted(docs[0], "nvidia.com/gpu.product") == {"NVIDIA-A100-SXM4-40GB", "NVIDIA-A100-PCIE-40GB"}


def test_a_multi_gpu_sxm_job_is_refused_where_only_pcie_cards_hold_it(capsys, tmp_path):
    # An AKS whose only A100 80GB sizes holding 4 GPUs are NC A100 v4 (PCIe): a 4-GPU job from a
    # p4de (NVSwitch) is refused, naming the sizes, rather than sent to cards without NVLink.
    maps = tmp_path / "maps"
    shutil.copytree(default_directory(), maps)
    aks = (maps / "aks.yaml").read_text()
    aks = aks.replace("A100-80GB: [Standard_ND96amsr_A100_v4, ", "A100-80GB: [")
    aks = "\n".join(line for line in aks.splitlines() if "Standard_ND96amsr_A100_v4:" not in line)
    (maps / "aks.yaml").write_text(aks + "\n")
    text = (CATALOGUE_MANIFESTS / "eks-p4d-nccl-job.yaml").read_text()
    path = tmp_path / "p4de.yaml"
    path.write_text(text.replace("p4d.24xlarge", "p4de.24xlarge").replace("gpu: 8", "gpu: 4"))
    code, _, err = translate(capsys, path, "aks", "--cloudmap-dir", str(maps))
    assert code == 1
    assert (
        "asks for 4 GPUs on one node joined by NVLink/NVSwitch (SXM), as its node selector's nodes have "
        "them; every node.kubernetes.io/instance-type with A100-80GB that holds 4 has PCIe cards "
        "(Standard_NC96ads_A100_v4)"
    ) in err


# (target, what its nodes must have set up for the GKE job's 3g.20gb partition of an A100 40GB)
OPERATOR_MIG = (
    "exists only on nodes the MIG manager partitioned so (nvidia.com/mig.config; see gpuport plan mig)"
)
MIG_SET_UP = [
    ("aks", "MIG 3g.20gb exists only on a node pool created with --gpu-instance-profile MIG3g"),
    ("eks", f"MIG 3g.20gb {OPERATOR_MIG}"),
    ("generic", f"MIG 3g.20gb {OPERATOR_MIG}"),
]


@pytest.mark.parametrize(("target", "said"), MIG_SET_UP)
def test_a_gke_partition_says_how_the_target_s_nodes_must_be_partitioned(capsys, target, said):
    code, docs, err = translate(capsys, CATALOGUE_MANIFESTS / "gke-a100-mig-job.yaml", target)
    assert code == 0, err
    assert docs[0]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] == {
        "nvidia.com/mig-3g.20gb": 1
    }
    assert f"gpuport: {said}" in err


def test_eks_slices_and_shares_sent_to_gke_say_which_node_pools_have_them(capsys):
    code, _, err = translate(capsys, CATALOGUE_MANIFESTS / "eks-mig-and-shared-pods.yaml", "gke")
    assert code == 0, err
    assert (
        "Pod/mig-inference: gpuport: MIG 1g.10gb exists only on a node pool created with --accelerator "
        "...,gpu-partition-size=1g.10gb"
    ) in err
    assert (
        "Pod/shared-notebook: gpuport: cloud.google.com/gke-gpu-sharing-strategy exists only with a node "
        "pool created with --accelerator ...,gpu-sharing-strategy=time-sharing (or mps)"
    ) in err


def test_a_map_that_says_nothing_of_its_mig_set_up_adds_no_words(capsys):
    code, _, err = translate(capsys, CATALOGUE_MANIFESTS / "gke-a100-mig-job.yaml", "kai")
    assert code == 0, err
    assert "nvidia.com/mig-3g.20gb" in err
    assert "exists only on" not in err


# AKS sells ND MI300X v5 (8 × AMD Instinct MI300X 192 GB) beside its NVIDIA sizes; its pods ask the
# ROCm device plugin's amd.com/gpu (tests/manifests/catalogue/aks-mi300x-training-job.yaml).
MI300X_JOB = CATALOGUE_MANIFESTS / "aks-mi300x-training-job.yaml"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"


def gpu_limits(doc):
    return doc["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]


def test_aks_s_own_mi300x_job_stays_an_amd_job_on_the_mi300x_size(capsys):
    code, docs, err = translate(capsys, MI300X_JOB, "aks")
    assert code == 0, err
    assert "denied" not in err
    assert gpu_limits(docs[0]) == {"memory": "32Gi", "amd.com/gpu": 8}
    assert accepted(docs[0], INSTANCE_TYPE) == {"Standard_ND96isr_MI300X_v5"}
    assert "nvidia.com" not in yaml.safe_dump(docs[0])


def test_an_amd_map_job_goes_to_aks_s_mi300x_size_as_amd_gpus(capsys, tmp_path):
    # Written for a cluster running the ROCm device plugin and its node labeller.
    text = MI300X_JOB.read_text().replace(
        f"{INSTANCE_TYPE}: Standard_ND96isr_MI300X_v5", "amd.com/gpu.product-name: AMD_Instinct_MI300X_OAM"
    )
    path = tmp_path / "rocm.yaml"
    path.write_text(text)
    code, docs, err = translate(capsys, path, "aks")
    assert code == 0, err
    assert gpu_limits(docs[0]) == {"memory": "32Gi", "amd.com/gpu": 8}
    assert docs[0]["spec"]["template"]["spec"]["nodeSelector"] == {
        INSTANCE_TYPE: "Standard_ND96isr_MI300X_v5"
    }


def test_aks_s_mi300x_job_goes_to_the_amd_map_by_product_name(capsys):
    code, docs, err = translate(capsys, MI300X_JOB, "amd")
    assert code == 0, err
    assert gpu_limits(docs[0]) == {"memory": "32Gi", "amd.com/gpu": 8}
    assert docs[0]["spec"]["template"]["spec"]["nodeSelector"] == {
        "amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM"
    }


def test_aks_s_mi300x_job_is_refused_on_eks_where_no_amd_gpu_has_its_192_gb(capsys):
    code, _, err = translate(capsys, MI300X_JOB, "eks")
    assert code == 1
    said = "asks for MI300X (192 GB, training); eks offers no AMD training GPU with at least 192 GB"
    assert said in err
    assert "(it offers V520 (8 GB, inference))" in err  # EKS has AMD GPUs (g4ad's), only not this one


@pytest.mark.parametrize("target", ["gke", "generic", "koordinator"])
@pytest.mark.parametrize(("job", "asked"), [("aks-mi300x", "amd.com/gpu: 8"), ("eks-v520", "amd.com/gpu: 1")])
def test_an_amd_job_is_refused_once_where_no_amd_gpu_is_sold(capsys, target, job, asked):
    # The vendor refusal says it all: the other vendor's models listed as "offered" instead said nothing
    # to act on, and generic's (every GFD product name, MI300X's too) read "it offers MI300X" beside
    # "generic offers NVIDIA GPUs only".
    code, _, err = translate(capsys, MI300X_JOB if job == "aks-mi300x" else EKS_V520, target)
    assert code == 1
    assert f"containers[0] asks for an AMD GPU ({asked}); {target} offers NVIDIA GPUs only" in err
    assert "offers no AMD" not in err and "MI300X (192 GB" not in err


def test_an_aks_nvidia_job_is_left_as_written_beside_the_amd_sizes(capsys, tmp_path):
    text = MI300X_JOB.read_text().replace("amd.com/gpu: 8", "nvidia.com/gpu: 8")
    text = text.replace("Standard_ND96isr_MI300X_v5", "Standard_ND96isr_H100_v5")
    path = tmp_path / "h100.yaml"
    path.write_text(text)
    code, docs, err = translate(capsys, path, "aks")
    assert code == 0, err
    assert gpu_limits(docs[0]) == {"memory": "32Gi", "nvidia.com/gpu": 8}
    assert accepted(docs[0], INSTANCE_TYPE) == {"Standard_ND96isr_H100_v5"}
    assert "amd.com/gpu:" not in yaml.safe_dump(docs[0]["spec"]["template"]["spec"]["containers"])


def test_an_eks_nvidia_job_sent_to_aks_asks_nvidia_gpus_on_nvidia_sizes_only(capsys):
    code, docs, err = translate(capsys, CATALOGUE_MANIFESTS / "eks-p4d-nccl-job.yaml", "aks")
    assert code == 0, err
    limits = gpu_limits(docs[0])
    assert limits.get("nvidia.com/gpu") in (8, "8") and "amd.com/gpu" not in limits
    assert "Standard_ND96isr_MI300X_v5" not in accepted(docs[0], INSTANCE_TYPE)


def test_an_nvidia_ask_pinned_to_the_mi300x_size_is_refused(capsys, tmp_path):
    path = tmp_path / "mixed-up.yaml"
    path.write_text(MI300X_JOB.read_text().replace("amd.com/gpu: 8", "nvidia.com/gpu: 8"))
    code, _, err = translate(capsys, path, "aks")
    assert code == 1
    assert "asks for an NVIDIA GPU (nvidia.com/gpu: 8) on MI300X, which is not NVIDIA" in err


# OKE sells BM.GPU.MI300X.8 and EKS sells g4ad (AMD Radeon Pro V520) beside their NVIDIA shapes and
# types: their own AMD workloads run there (tests/commands/test_own_map.py), and move by model.
OKE_MI300X_JOB = CATALOGUE_MANIFESTS / "oke-mi300x-mpijob.yaml"
EKS_V520 = CATALOGUE_MANIFESTS / "eks-karpenter-amd-g4ad.yaml"


def worker(doc):
    return doc["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]


@pytest.mark.parametrize(
    ("target", "selector"),
    [
        ("aks", {INSTANCE_TYPE: "Standard_ND96isr_MI300X_v5"}),
        ("amd", {"amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM"}),
    ],
)
def test_oke_s_mi300x_mpijob_moves_to_the_mi300x_sold_elsewhere(capsys, target, selector):
    code, docs, err = translate(capsys, OKE_MI300X_JOB, target)
    assert code == 0, err
    spec = worker(docs[0])
    assert spec["nodeSelector"] == selector  # the OCI shape is gone: no node of the target carries it
    assert spec["containers"][0]["resources"]["limits"] == {"amd.com/gpu": 8}


def test_an_aks_mi300x_job_moves_to_oke_s_mi300x_shape(capsys):
    code, docs, err = translate(capsys, MI300X_JOB, "oke")
    assert code == 0, err
    assert docs[0]["spec"]["template"]["spec"]["nodeSelector"] == {INSTANCE_TYPE: "BM.GPU.MI300X.8"}
    assert gpu_limits(docs[0]) == {"memory": "32Gi", "amd.com/gpu": 8}


def test_an_mi300x_job_sent_to_eks_is_refused_naming_the_only_amd_gpu_eks_sells(capsys):
    code, _, err = translate(capsys, OKE_MI300X_JOB, "eks")
    assert code == 1
    assert (
        "asks for MI300X (192 GB, training); eks offers no AMD training GPU with at least 192 GB "
        "(it offers V520 (8 GB, inference))"
    ) in err


def test_eks_s_v520_by_instance_type_stays_on_g4ad(capsys, tmp_path):
    path = tmp_path / "g4ad.yaml"
    path.write_text(
        EKS_V520.read_text().replace(
            "karpenter.k8s.aws/instance-gpu-name: radeon-pro-v520", f"{INSTANCE_TYPE}: g4ad.8xlarge"
        )
    )
    code, docs, err = translate(capsys, path, "eks")
    assert code == 0, err
    assert docs[0]["spec"]["template"]["spec"]["nodeSelector"] == {INSTANCE_TYPE: "g4ad.8xlarge"}
    assert "gpuport:" not in err


@pytest.mark.parametrize("target", ["aks", "oke", "amd"])
def test_a_v520_job_is_refused_where_no_amd_inference_gpu_is_sold(capsys, target):
    code, _, err = translate(capsys, EKS_V520, target)
    assert code == 1
    assert f"asks for V520 (8 GB, inference); {target} offers no AMD inference GPU with at least 8 GB" in err


def test_an_unpinned_mig_slice_moved_to_gke_keeps_every_gpu_gke_cuts_it_from(capsys, tmp_path):
    # GKE sells 3g.40gb partitions of A100 80GB and H100 80GB GPUs alike (gke.yaml's mig.profiles): an
    # EKS pod asking nvidia.com/mig-3g.40gb on no particular model runs on either, never on A100s only.
    path = tmp_path / "mig.yaml"
    path.write_text(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: slice\nspec:\n  template:\n    spec:\n"
        "      restartPolicy: Never\n      containers:\n      - name: c\n        image: cuda\n"
        "        resources:\n          limits:\n            nvidia.com/mig-3g.40gb: 1\n"
    )
    code, docs, err = translate(capsys, path, "gke")
    assert code == 0, err
    assert accepted(docs[0], "cloud.google.com/gke-accelerator") == {
        "nvidia-a100-80gb",
        "nvidia-h100-80gb",
        "nvidia-h100-mega-80gb",
    }
    assert docs[0]["spec"]["template"]["spec"]["nodeSelector"] == {
        "cloud.google.com/gke-gpu-partition-size": "3g.40gb"
    }


def test_gke_s_whole_gpu_exclusions_moved_to_aks_are_removed_and_said(capsys, tmp_path):
    # GKE pods keep whole GPUs with DoesNotExist on GKE's partition and sharing labels (GKE's docs, and
    # gpuport's own whole-GPU terms); no AKS node has those keys, so the terms go, said, and recorded.
    path = tmp_path / "whole.yaml"
    path.write_text(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: whole\nspec:\n  template:\n    spec:\n"
        "      restartPolicy: Never\n      nodeSelector:\n"
        "        cloud.google.com/gke-accelerator: nvidia-tesla-t4\n"
        "      affinity:\n        nodeAffinity:\n          requiredDuringSchedulingIgnoredDuringExecution:\n"
        "            nodeSelectorTerms:\n            - matchExpressions:\n"
        "              - key: cloud.google.com/gke-gpu-sharing-strategy\n"
        "                operator: DoesNotExist\n"
        "      containers:\n      - name: c\n        image: cuda\n"
        "        resources:\n          limits:\n            nvidia.com/gpu: 1\n"
    )
    code, docs, err = translate(capsys, path, "aks")
    assert code == 0, err
    assert "cloud.google.com" not in yaml.safe_dump(docs[0]["spec"]["template"]["spec"])
    assert (
        "node affinity cloud.google.com/gke-gpu-sharing-strategy DoesNotExist removed: no aks node has it"
        in err
    )
    assert accepted(docs[0], INSTANCE_TYPE) == {
        "Standard_NC4as_T4_v3",
        "Standard_NC8as_T4_v3",
        "Standard_NC16as_T4_v3",
        "Standard_NC64as_T4_v3",
    }


@pytest.mark.parametrize(
    "manifest, target, label, values",
    [
        ("eks-p6e-gb200-job.yaml", "aks", INSTANCE_TYPE, {"Standard_ND128isr_NDR_GB200_v6"}),
        ("eks-p6e-gb200-job.yaml", "gke", "cloud.google.com/gke-accelerator", {"nvidia-gb200"}),
        (
            "eks-p6e-gb200-job.yaml",
            "oke",
            "node.kubernetes.io/instance-type",
            {"BM.GPU.GB200.4", "BM.GPU.GB200-v2.4", "BM.GPU.GB200-v3.4"},
        ),
        # B300 stays B300: on its own platform, and on a GFD-labelled cluster by its product name.
        ("eks-p6-b300-job.yaml", "eks", "node.kubernetes.io/instance-type", {"p6-b300.48xlarge"}),
        ("eks-p6-b300-job.yaml", "generic", "nvidia.com/gpu.product", {"NVIDIA-B300-SXM6-AC"}),
    ],
)
def test_a_job_moves_to_every_platform_that_sells_its_gpu(capsys, manifest, target, label, values):
    code, docs, err = translate(capsys, CATALOGUE_MANIFESTS / manifest, target)
    assert code == 0, err
    assert accepted(docs[0], label) == values


def test_a_gb200_job_comes_back_to_eks_and_aks_as_written(capsys):
    code, docs, err = translate(capsys, CATALOGUE_MANIFESTS / "eks-p6e-gb200-job.yaml", "eks")
    assert code == 0, err
    assert accepted(docs[0], "node.kubernetes.io/instance-type") == {"p6e-gb200.36xlarge"}
    assert "gpuport:" not in err


def test_a_b200_job_is_never_sent_to_gb200_s_arm_hosts(capsys, tmp_path):
    # AKS sells GB200 (186 GB, Blackwell) and no B200: its x86-64 image would not start on a Grace host.
    text = (CATALOGUE_MANIFESTS / "eks-p6e-gb200-job.yaml").read_text()
    path = tmp_path / "b200.yaml"
    path.write_text(text.replace("p6e-gb200.36xlarge", "p6-b200.48xlarge").replace("gpu: 4", "gpu: 8"))
    code, _, err = translate(capsys, path, "aks")
    assert code == 1
    assert "aks offers no NVIDIA training GPU with at least 180 GB on x86-64 hosts" in err
    assert "GB200 (186 GB, training, arm64)" in err


EKS_L4_TYPES = {
    *(f"g6.{size}" for size in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge", "12xlarge")),
    "g6.24xlarge",
    "g6.48xlarge",
    "gr6.4xlarge",  # one L4 each, with more host memory (AWS's accelerated computing specifications)
    "gr6.8xlarge",
}


def test_a_gke_l4_deployment_moved_to_eks_may_land_on_every_l4_type_gr6_included(capsys):
    code, docs, err = translate(capsys, MANIFESTS / "gke-l4-vllm-spot.yaml", "eks")
    assert code == 0, err
    assert accepted(docs[0], "node.kubernetes.io/instance-type") == EKS_L4_TYPES


def test_an_eks_pod_pinned_to_gr6_is_read_as_an_l4(capsys, tmp_path):
    text = (CATALOGUE_MANIFESTS / "eks-p6-b300-job.yaml").read_text()
    path = tmp_path / "gr6.yaml"
    path.write_text(text.replace("p6-b300.48xlarge", "gr6.8xlarge").replace("gpu: 8", "gpu: 1"))
    code, docs, err = translate(capsys, path, "gke")
    assert code == 0, err
    assert accepted(docs[0], "cloud.google.com/gke-accelerator") == {"nvidia-l4"}


def test_a_b300_job_on_a_dra_cluster_claims_b300s_by_the_name_nvml_gives_them(capsys):
    code, docs, err = translate(capsys, CATALOGUE_MANIFESTS / "eks-p6-b300-job.yaml", "dra-nvidia")
    assert code == 0, err
    template = next(d for d in docs if d["kind"] == "ResourceClaimTemplate")
    assert 'productName == "NVIDIA B300 SXM6 AC"' in yaml.safe_dump(template, width=1000)
    assert "(8 × B300)" in err


def test_a_b300_job_from_a_gfd_labelled_cluster_goes_to_eks_s_p6_b300(capsys, tmp_path):
    text = (CATALOGUE_MANIFESTS / "eks-p6-b300-job.yaml").read_text()
    path = tmp_path / "generic-b300.yaml"
    path.write_text(
        text.replace(
            "node.kubernetes.io/instance-type: p6-b300.48xlarge",
            "nvidia.com/gpu.product: NVIDIA-B300-SXM6-AC",
        )
    )
    code, docs, err = translate(capsys, path, "eks")
    assert code == 0, err
    assert accepted(docs[0], "node.kubernetes.io/instance-type") == {"p6-b300.48xlarge"}


@pytest.mark.parametrize("target", ["gke", "aks"])
def test_a_b300_job_is_refused_where_no_gpu_has_its_memory(capsys, target):
    code, _, err = translate(capsys, CATALOGUE_MANIFESTS / "eks-p6-b300-job.yaml", target)
    assert code == 1
    assert "asks for B300 (269 GB, training)" in err


KARPENTER_A100_H100 = CATALOGUE_MANIFESTS / "eks-karpenter-a100-h100-job.yaml"


@pytest.mark.parametrize(
    ("target", "key", "meant"),
    [
        (
            "generic",
            "nvidia.com/gpu.product",
            {"NVIDIA-A100-SXM4-40GB", "NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"},
        ),
        (
            "koordinator",
            "node.koordinator.sh/gpu-model",
            {"NVIDIA-A100-SXM4-40GB", "NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"},
        ),
    ],
)
def test_an_8_gpu_job_pinned_by_karpenter_s_gpu_name_keeps_its_nvlink_gpus(capsys, target, key, meant):
    # Every EC2 type with an a100 or h100 is an HGX board (p4d, p4de, p5): the job's eight GPUs reach each
    # other over NVSwitch. Moved elsewhere it was also offered the PCIe cards (A100 PCIe, H100 PCIe), whose
    # collectives go through the host.
    code, docs, err = translate(capsys, KARPENTER_A100_H100, target)
    assert code == 0, err
    assert accepted(docs[0], key) == meant
    # Karpenter's count and memory requirements were written as node affinity, not a node selector.
    assert "node affinity karpenter.k8s.aws/instance-gpu-count removed: a label no" in err
    assert "node selector karpenter.k8s.aws/" not in err
