"""`gpuport translate` on manifests whose pods are grouped by another cloud's node labels
(tests/manifests/topology/README.md names the published shapes): JobSet's exclusive placement written
on the JobSet, pod affinity and topology spread in pod templates, HAMi's GPU pin."""

import shutil
from pathlib import Path

import pytest
import yaml

from tests.commands.translating import translate, warnings
from webhook.config.cloudmap import default_directory

TOPOLOGY = Path(__file__).parents[1] / "manifests" / "topology"
EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"


def _doc(out):
    return next(d for d in yaml.safe_load_all(out) if d)


@pytest.mark.parametrize(
    "target, key", [("eks", "eks.amazonaws.com/nodegroup"), ("aks", "kubernetes.azure.com/agentpool")]
)
def test_a_jobset_s_exclusive_node_pool_becomes_the_target_s_and_only_that_line_changes(
    capsys, tmp_path, target, key
):
    text = (TOPOLOGY / "gke-jobset-exclusive-nodepool.yaml").read_text()
    code, out, err = translate(capsys, tmp_path, text, target)
    assert code == 0, err
    assert _doc(out)["metadata"]["annotations"][EXCLUSIVE] == key
    assert f"topology key cloud.google.com/gke-nodepool → {key} (node pool)" in warnings(err)
    # The author's comment above it and the line's place stay.
    comment = "    # one replicated job per node pool: its pods together, no other job beside them\n"
    assert f"{comment}    {EXCLUSIVE}: {key}\n" in out


def test_exclusive_placement_on_a_replicated_job_s_template_is_translated_there(capsys, tmp_path):
    text = (TOPOLOGY / "gke-jobset-exclusive-nodepool.yaml").read_text()
    comment = "    # one replicated job per node pool: its pods together, no other job beside them\n"
    pool = f"{EXCLUSIVE}: cloud.google.com/gke-nodepool\n"
    moved = text.replace(f"  annotations:\n{comment}    {pool}", "").replace(
        "    template:\n      spec:\n        parallelism",
        f"    template:\n      metadata:\n        annotations:\n          {pool}"
        "      spec:\n        parallelism",
    )
    assert moved != text
    code, out, err = translate(capsys, tmp_path, moved, "eks")
    assert code == 0, err
    job = _doc(out)["spec"]["replicatedJobs"][0]["template"]
    assert job["metadata"]["annotations"][EXCLUSIVE] == "eks.amazonaws.com/nodegroup"


def test_a_jobset_whose_exclusive_node_pool_the_target_cannot_say_is_refused_naming_the_fix(capsys, tmp_path):
    text = (TOPOLOGY / "gke-jobset-exclusive-nodepool.yaml").read_text()
    code, _, err = translate(capsys, tmp_path, text, "generic")
    assert code == 1
    assert (
        "denied: keeps its pods together on one cloud.google.com/gke-nodepool (gke's node pool; annotation "
        f"{EXCLUSIVE}); no generic node carries it and the generic map names no equivalent: write a topology "
        "key its nodes carry (kubernetes.io/hostname) or add topology_labels.nodepool to the generic map"
    ) in err


def test_a_pod_affinity_on_gke_s_node_pool_moves_with_the_deployment(capsys, tmp_path):
    text = (TOPOLOGY / "gke-affinity-nodepool.yaml").read_text()
    code, out, err = translate(capsys, tmp_path, text, "eks")
    assert code == 0, err
    affinity = _doc(out)["spec"]["template"]["spec"]["affinity"]
    required = "requiredDuringSchedulingIgnoredDuringExecution"
    assert affinity["podAffinity"][required][0]["topologyKey"] == "eks.amazonaws.com/nodegroup"
    assert affinity["podAntiAffinity"][required][0]["topologyKey"] == "kubernetes.io/hostname"


def test_a_spread_over_gke_blocks_is_eks_s_layer_there_and_removed_on_aks(capsys, tmp_path):
    text = (TOPOLOGY / "gke-spread-topology-block.yaml").read_text()
    code, out, err = translate(capsys, tmp_path, text, "eks")
    assert code == 0, err
    spec = _doc(out)["spec"]["template"]["spec"]
    assert spec["topologySpreadConstraints"][0]["topologyKey"] == "topology.k8s.aws/network-node-layer-2"
    # The host preference: eks labels no host, so a node (said).
    preferred = spec["affinity"]["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert preferred[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    code, out, err = translate(capsys, tmp_path, text, "aks")
    assert code == 0, err
    assert "topologySpreadConstraints" not in _doc(out)["spec"]["template"]["spec"]
    assert (
        "spread on cloud.google.com/gce-topology-block removed: no aks node has it, else Pending"
        in warnings(err)
    )


def test_hami_s_gpu_pin_is_said_elsewhere(capsys, tmp_path):
    text = (TOPOLOGY / "hami-gpu-uuid.yaml").read_text()
    code, out, err = translate(capsys, tmp_path, text, "gke")
    assert code == 0, err
    assert _doc(out)["metadata"]["annotations"]["nvidia.com/use-gpuuuid"].startswith("GPU-7a1bc2de")
    assert "annotation nvidia.com/use-gpuuuid kept, inert: HAMi's pin to the old cluster's GPUs" in warnings(
        err
    )
    code, _, err = translate(capsys, tmp_path, text, "hami")
    assert "use-gpuuuid" not in err


def test_a_leaderworkerset_s_exclusive_node_pool_becomes_the_target_s(capsys, tmp_path):
    # LeaderWorkerSet's exclusive placement (its docs: the annotation on the LeaderWorkerSet, one group per
    # domain), on the corpus's GKE H100 LeaderWorkerSet.
    text = (TOPOLOGY.parent / "lws-gke-h100.yaml").read_text()
    annotation = "leaderworkerset.sigs.k8s.io/exclusive-topology"
    annotated = text.replace(
        "  name: vllm\n",
        f"  name: vllm\n  annotations:\n    {annotation}: cloud.google.com/gke-nodepool\n",
        1,
    )
    assert annotated != text
    code, out, err = translate(capsys, tmp_path, annotated, "aks")
    assert code == 0, err
    assert _doc(out)["metadata"]["annotations"][annotation] == "kubernetes.azure.com/agentpool"


def test_the_annotation_on_a_kind_no_controller_reads_it_from_is_left_alone(capsys, tmp_path):
    text = (TOPOLOGY / "gke-affinity-nodepool.yaml").read_text()
    annotated = text.replace(
        "  name: embedder\n",
        f"  name: embedder\n  annotations:\n    {EXCLUSIVE}: cloud.google.com/gke-nodepool\n",
        1,
    )
    code, out, err = translate(capsys, tmp_path, annotated, "eks")
    assert code == 0, err
    assert _doc(out)["metadata"]["annotations"][EXCLUSIVE] == "cloud.google.com/gke-nodepool"


def test_a_jobset_whose_pods_are_refused_keeps_its_exclusive_placement_as_written(capsys, tmp_path):
    # Two kinds of GPU in one container are refused: the JobSet is not moved, so its placement is not
    # rewritten for EKS either (it was, leaving half a translation).
    refused = yaml.safe_load((TOPOLOGY / "gke-jobset-exclusive-nodepool.yaml").read_text())
    container = refused["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
    container["resources"]["limits"]["nvidia.com/mig-1g.10gb"] = 1
    code, out, err = translate(capsys, tmp_path, yaml.safe_dump(refused), "eks")
    assert code == 1, err
    assert _doc(out)["metadata"]["annotations"][EXCLUSIVE] == "cloud.google.com/gke-nodepool"


def test_a_karpenter_node_pool_is_the_old_cluster_s_and_its_instance_family_names_the_gpu(capsys, tmp_path):
    # Karpenter's instance family pins the GPU (g5: A10G); its NodePool is a pool of the old cluster.
    text = (TOPOLOGY / "eks-karpenter-nodepool-g5.yaml").read_text()
    code, out, err = translate(capsys, tmp_path, text, "gke")
    assert code == 0, err
    selector = _doc(out)["spec"]["template"]["spec"]["nodeSelector"]
    assert selector == {"cloud.google.com/gke-accelerator": "nvidia-l4"}  # no A10G there: its 24 GB kin
    assert "node selector karpenter.sh/nodepool removed: a label no gke node carries" in warnings(err)
    code, out, err = translate(capsys, tmp_path, text, "generic")
    assert code == 0, err
    assert _doc(out)["spec"]["template"]["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-A10G"}
    code, out, err = translate(capsys, tmp_path, text, "eks")
    assert (code, out, err) == (0, text, "")


KAI_JOB = TOPOLOGY / "kai-job-gke-block.yaml"
KAI_REQUIRED = "kai.scheduler/topology-required-placement"
KAI_PREFERRED = "kai.scheduler/topology-preferred-placement"


def test_kai_s_placement_levels_are_removed_and_said_where_the_target_runs_no_kai(capsys, tmp_path):
    # Read by KAI alone: on EKS, which runs no KAI (its schedulerName goes too), they place nothing.
    code, out, err = translate(capsys, tmp_path, KAI_JOB.read_text(), "eks")
    assert code == 0, err
    assert "annotations" not in _doc(out)["metadata"]
    for annotation in (KAI_REQUIRED, KAI_PREFERRED, "kai.scheduler/topology"):
        assert (
            f"annotation {annotation} removed: eks does not run KAI Scheduler (a cluster that does lists "
            "kai-scheduler in its map's other_schedulers)"
        ) in warnings(err)


def test_kai_s_placement_levels_become_the_target_s_where_it_runs_kai(capsys, tmp_path):
    # An EKS whose admin says it runs KAI (other_schedulers): GKE's block and sub-block become EKS's
    # network layers, and the Topology KAI places by must have those levels.
    maps = tmp_path / "maps"
    shutil.copytree(default_directory(), maps)
    with (maps / "eks.yaml").open("a") as eks:
        eks.write("other_schedulers: [kai-scheduler]\n")
    code, out, err = translate(capsys, tmp_path, KAI_JOB.read_text(), "eks", "--cloudmap-dir", str(maps))
    assert code == 0, err
    job = _doc(out)
    assert job["metadata"]["annotations"] == {
        "kai.scheduler/topology": "gke-a3-ultra",
        KAI_REQUIRED: "topology.k8s.aws/network-node-layer-2",
        KAI_PREFERRED: "topology.k8s.aws/network-node-layer-3",
    }
    assert job["spec"]["template"]["spec"]["schedulerName"] == "kai-scheduler"
    assert (
        "KAI Topology gke-a3-ultra must list topology.k8s.aws/network-node-layer-2 as a level on this cluster"
        in warnings(err)
    )


def test_kai_s_required_level_no_node_of_the_target_carries_is_refused_naming_the_fix(capsys, tmp_path):
    # The kai map (KAI on GFD-labelled nodes) has no block: KAI would place the job on no node.
    text = KAI_JOB.read_text()
    code, out, err = translate(capsys, tmp_path, text, "kai")
    assert (code, out) == (1, text)
    assert (
        "denied: keeps its pods together on one cloud.google.com/gce-topology-block (gke's block; annotation "
        f"{KAI_REQUIRED}); no kai node carries it and the kai map names no equivalent: write a topology key "
        "its nodes carry (kubernetes.io/hostname) or add topology_labels.block to the kai map"
    ) in err
