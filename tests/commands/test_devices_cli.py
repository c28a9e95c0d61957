"""`gpuport translate` on manifests asking for a cloud's devices beside the GPUs (EFA, InfiniBand,
GKE's GPUDirect networks, AWS Neuron) and for a capacity type, to every shipped map
(tests/manifests/devices/README.md names the published shapes)."""

from pathlib import Path

import pytest
import yaml

from tests.commands.translating import translate, warnings
from webhook.config.cloudmap import default_directory, load_directory

DEVICES = Path(__file__).parents[1] / "manifests" / "devices"
SHIPPED = load_directory(default_directory()).maps

# manifest → (the device it asks for, the map it was written for)
DEVICE_MANIFESTS = {
    "eks-nccl-efa-job.yaml": ("vpc.amazonaws.com/efa", "eks"),
    "aks-infiniband-job.yaml": ("rdma/shared_ib", "aks"),
    "gke-a3-gpudirect.yaml": ("networking.gke.io.networks/rdma-0", "gke"),
    "eks-neuron-pod.yaml": ("aws.amazon.com/neuron", "eks"),
    "gke-tpu-job.yaml": ("google.com/tpu", "gke"),
}


def _limits(out):
    docs = [d for d in yaml.safe_load_all(out) if d]
    spec = docs[0]["spec"]
    spec = spec["template"]["spec"] if "template" in spec else spec
    return spec["containers"][0]["resources"]["limits"]


@pytest.mark.parametrize("target", sorted(SHIPPED))
@pytest.mark.parametrize("manifest", sorted(DEVICE_MANIFESTS))
def test_a_device_beside_the_gpus_is_accounted_for_on_every_map(capsys, tmp_path, manifest, target):
    device, home = DEVICE_MANIFESTS[manifest]
    text = (DEVICES / manifest).read_text()
    code, out, err = translate(capsys, tmp_path, text, target)
    cloud_map = SHIPPED[target]
    if target == home:
        assert code == 0, err
        assert _limits(out) == _limits(text)  # native: untouched, and nothing to say
        assert device not in err
    elif _fabric_elsewhere(SHIPPED[home].device_for(device), cloud_map):
        # A device any cluster may run (rdma/), on a cloud whose map lists its own fabric between
        # nodes (EKS's EFA, GKE's multi-network NICs): no node there has it.
        assert code == 1
        refusal = next(line for line in err.splitlines() if f"denied: asks for {device} (on {home}:" in line)
        assert f"no {target} node has it: {target}'s fabric between nodes is" in refusal
    elif cloud_map.devices is not None and not SHIPPED[home].device_for(device).portable:
        # The target lists its devices and has no equivalent: refused, naming the device, what it
        # is, where it comes from and what the target offers.
        assert code == 1
        refusal = next(line for line in err.splitlines() if f"denied: asks for {device} (on {home}:" in line)
        assert f"{target} has no equivalent and offers" in refusal
        for own in cloud_map.devices:
            assert own.resource in refusal
    else:
        # The map does not say which devices its nodes have, or the device's plugin runs anywhere
        # (rdma/): kept, never silently.
        said = [w for w in warnings(err) if w.startswith(f"{device} (on {home}:")]
        if code == 0:
            assert said and "kept as written" in said[0]
            assert _limits(out)[device] == _limits(text)[device]
        else:
            assert "denied" in err  # refused for its GPUs (an NVIDIA job on an AMD map)


def _fabric_elsewhere(device, cloud_map):
    fabrics = ("rdma-network", "gpudirect-network")
    return (
        device.portable and device.kind in fabrics and any(d.kind in fabrics for d in cloud_map.devices or ())
    )


def test_an_efa_job_sent_to_gke_is_refused_with_what_gke_offers(capsys, tmp_path):
    code, _, err = translate(capsys, tmp_path, (DEVICES / "eks-nccl-efa-job.yaml").read_text(), "gke")
    assert code == 1
    assert (
        "denied: asks for vpc.amazonaws.com/efa (on eks: AWS Elastic Fabric Adapter, an RDMA network "
        "interface per count); gke has no equivalent and offers networking.gke.io.networks/<name>: a GKE "
        "multi-network interface (GPUDirect-TCPX/TCPXO/RDMA NICs)"
    ) in err


def test_the_neuron_plugin_s_old_name_becomes_its_new_one_on_eks(capsys, tmp_path):
    code, out, err = translate(capsys, tmp_path, (DEVICES / "eks-neurondevice-pod.yaml").read_text(), "eks")
    assert code == 0, err
    assert _limits(out) == {"aws.amazon.com/neuron": 1}
    assert "aws.amazon.com/neurondevice → aws.amazon.com/neuron (the same device on eks)" in warnings(err)


def test_an_extended_resource_no_map_describes_is_kept_and_said(capsys, tmp_path):
    efa_job = (DEVICES / "eks-nccl-efa-job.yaml").read_text()
    text = efa_job.replace("vpc.amazonaws.com/efa", "example.com/fpga")
    code, out, err = translate(capsys, tmp_path, text, "gke")
    assert code == 0, err
    assert _limits(out)["example.com/fpga"] == 32
    assert "example.com/fpga is in no cloud map, kept as written: gke nodes must advertise it" in warnings(
        err
    )


def test_a_device_no_map_describes_on_a_pod_already_in_the_target_s_words_is_not_mentioned(capsys, tmp_path):
    # A FUSE device beside an EKS job's GPUs, on EKS: the cluster's own business, no warning.
    efa_job = (DEVICES / "eks-nccl-efa-job.yaml").read_text()
    text = efa_job.replace("vpc.amazonaws.com/efa", "smarter-devices/fuse")
    code, out, err = translate(capsys, tmp_path, text, "eks")
    assert code == 0, err
    assert _limits(out)["smarter-devices/fuse"] == 32
    assert "smarter-devices/fuse" not in err


def test_an_infiniband_job_from_aks_keeps_its_rdma_ask_where_the_map_names_no_fabric_and_says_so(
    capsys, tmp_path
):
    # The RDMA shared device plugin runs on any cluster: rdma/shared_ib is no sign of AKS. The generic
    # map does not say which fabric its nodes have: kept, and said.
    code, out, err = translate(capsys, tmp_path, (DEVICES / "aks-infiniband-job.yaml").read_text(), "generic")
    assert code == 0, err
    assert _limits(out)["rdma/shared_ib"] == 1
    assert any(
        w.startswith("rdma/shared_ib (on aks: InfiniBand RDMA")
        and w.endswith("the generic map does not say whether its nodes have it")
        for w in warnings(err)
    )


# What OKE's map says a pod does for RDMA there (Oracle's OKE quickstart, docs/using-rdma-network-
# interfaces-in-manifests.md): SR-IOV virtual functions, or the host's NICs with no device ask.
OKE_RDMA = (
    "nvidia.com/rdma-vf: RoCE RDMA NICs as SR-IOV virtual functions (16 on BM.GPU.H100.8, 8 on "
    "BM.GPU.H200.8; the NVIDIA Network Operator, with a k8s.v1.cni.cncf.io/networks rdma-vf entry per VF), "
    "or with no device ask at all: hostNetwork true with /dev/infiniband mounted and IPC_LOCK"
)


@pytest.mark.parametrize(
    "manifest, refused",
    [
        (
            "eks-nccl-efa-job.yaml",
            "asks for vpc.amazonaws.com/efa (on eks: AWS Elastic Fabric Adapter, an RDMA network interface "
            f"per count); oke has no equivalent and offers {OKE_RDMA}",
        ),
        (
            "aks-infiniband-job.yaml",
            "asks for rdma/shared_ib (on aks: InfiniBand RDMA, a device shared by the node's pods (NVIDIA "
            f"RDMA shared device plugin)); no oke node has it: oke's fabric between nodes is {OKE_RDMA}",
        ),
    ],
)
def test_an_efa_or_infiniband_job_sent_to_oke_is_refused_naming_how_oke_pods_reach_rdma(
    capsys, tmp_path, manifest, refused
):
    # No OKE node advertises EFA or rdma/shared_ib: kept, the pods waited forever (exit 0 before, with a
    # warning that said nothing of what to do on OKE).
    text = (DEVICES / manifest).read_text()
    code, out, err = translate(capsys, tmp_path, text, "oke")
    assert (code, out) == (1, text)
    assert f"denied: {refused}" in err


def test_an_oke_job_on_rdma_virtual_functions_is_its_own_and_stays_as_written(capsys, tmp_path):
    text = (DEVICES / "oke-rdma-vf-mpijob.yaml").read_text()
    code, out, err = translate(capsys, tmp_path, text, "oke")
    assert (code, out) == (0, text), err
    assert "gpuport:" not in err


@pytest.mark.parametrize(
    "target, fabric",
    [
        ("eks", "vpc.amazonaws.com/efa: AWS Elastic Fabric Adapter"),
        ("gke", "networking.gke.io.networks/<name>"),
    ],
)
def test_an_infiniband_job_from_aks_is_refused_where_the_cloud_s_only_fabric_is_another(
    capsys, tmp_path, target, fabric
):
    # EFA is the only RDMA fabric on AWS; GKE gives its RDMA NICs through multi-networking. Kept, the
    # rdma/shared_ib ask would wait forever for a device no node there advertises (exit 0 before).
    code, _, err = translate(capsys, tmp_path, (DEVICES / "aks-infiniband-job.yaml").read_text(), target)
    assert code == 1
    assert (
        "denied: asks for rdma/shared_ib (on aks: InfiniBand RDMA, a device shared by the node's pods "
        f"(NVIDIA RDMA shared device plugin)); no {target} node has it: {target}'s fabric between nodes is "
        f"{fabric}"
    ) in err


def _spec(out):
    return next(d for d in yaml.safe_load_all(out) if d)["spec"]["template"]["spec"]


@pytest.mark.parametrize("target", sorted(SHIPPED))
def test_an_on_demand_job_keeps_its_capacity_type_on_every_map(capsys, tmp_path, target):
    text = (DEVICES / "eks-karpenter-on-demand-job.yaml").read_text()
    code, out, err = translate(capsys, tmp_path, text, target)
    labels = SHIPPED[target].node_labels
    if code == 1:
        assert "karpenter.sh/capacity-type" not in err  # refused for its GPU (an AMD map), not this
        return
    spec = _spec(out)
    selector = spec.get("nodeSelector", {})
    terms = (
        spec.get("affinity", {}).get("nodeAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    )
    expressions = [
        e for t in (terms or {}).get("nodeSelectorTerms", []) for e in t.get("matchExpressions", [])
    ]
    if target == "eks":
        assert selector["karpenter.sh/capacity-type"] == "on-demand"
    elif labels.on_demand:
        key, value = labels.on_demand[0]
        assert selector[key] == value
    elif labels.spot:
        # On-demand there is "no spot label": every spot label is kept off, none dropped silently.
        for key, value in labels.spot:
            assert {"key": key, "operator": "NotIn", "values": [value]} in expressions
        assert not any(t.get("key") == labels.spot[0][0] for t in spec.get("tolerations", []))
    else:
        said = (
            f"capacity requirement karpenter.sh/capacity-type removed: the {target} map names no "
            "capacity type"
        )
        assert said in warnings(err)
    if target != "eks":
        assert "karpenter.sh/capacity-type" not in selector


@pytest.mark.parametrize("target", ["gke", "aks"])
def test_a_job_on_reserved_capacity_is_refused_naming_what_the_target_offers(capsys, tmp_path, target):
    text = (DEVICES / "eks-karpenter-on-demand-job.yaml").read_text().replace("on-demand", "reserved")
    code, _, err = translate(capsys, tmp_path, text, target)
    assert code == 1
    assert (
        f"denied: asks for reserved capacity (karpenter.sh/capacity-type=reserved); {target} has no word"
        in err
    )
