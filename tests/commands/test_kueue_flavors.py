"""A Kueue ResourceFlavor pinning another platform's hardware, moved with its workloads
(tests/manifests/kueue/, sources in its README): every target says it, the ones that read the same key
(EKS and AKS name the model by node.kubernetes.io/instance-type, as OKE names the shape) as well as the
ones that do not, and names the label and values to write instead."""

from pathlib import Path

import pytest

from webhook.commands.cli import main

FLAVOR = Path(__file__).parents[1] / "manifests" / "kueue" / "oke-h100-flavor-mpijob.yaml"
SAID = (
    "ResourceFlavor bm-gpu-h100-8 puts node.kubernetes.io/instance-type=BM.GPU.H100.8 on the pods it "
    "admits, which no {target} node carries: they would stay Pending (use {instead})"
)


@pytest.mark.parametrize(
    ("target", "instead"),
    [
        ("eks", "node.kubernetes.io/instance-type: p5.48xlarge|p5.4xlarge"),
        ("aks", "node.kubernetes.io/instance-type: Standard_ND96isr_H100_v5"),
        ("gke", "cloud.google.com/gke-accelerator: nvidia-h100-80gb|nvidia-h100-mega-80gb"),
        ("generic", "nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3|NVIDIA-H100-PCIe"),
    ],
)
def test_an_oci_shape_flavor_is_said_on_every_target_with_the_target_s_words(capsys, target, instead):
    code = main(["translate", "--to", target, str(FLAVOR)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert SAID.format(target=target, instead=instead) in err
    assert "BM.GPU.H100.8" in out.split("---")[0]  # said, never rewritten: quotas per flavor are the admin's


def test_at_home_the_flavor_is_not_said(capsys):
    code = main(["translate", "--to", "oke", str(FLAVOR)])
    _, err = capsys.readouterr()
    assert code == 0 and "ResourceFlavor" not in err
