"""Every platform's own manifest, translated to its own map, comes back as written, or with only what it
needs added there (AKS's GPU-pool toleration, GKE's whole-GPU terms): never refused, never moved to other
hardware, nothing of it removed. The manifests are in the shapes the platforms publish (sources in the
READMEs of tests/manifests/ and its folders); a map added without one fails here."""

from pathlib import Path

import pytest
import yaml

from webhook.commands.cli import main
from webhook.config.cloudmap import default_directory

MANIFESTS = Path(__file__).parents[1] / "manifests"

# (map, a manifest written for that platform): every shipped map at least once.
OWN = [
    ("ack", "ack-gpushare.yaml"),
    ("aks", "aks-a100-spot.yaml"),
    ("aks", "catalogue/aks-mi300x-training-job.yaml"),
    ("amd", "amd-rocm-pod.yaml"),
    ("cce", "cce-gpu-mem.yaml"),
    ("dra-amd", "dra/amd-single-gpu.yaml"),
    ("dra-amd", "dra/amd-partitions.yaml"),
    ("dra-nvidia", "dra/nvidia-gpu-per-pod.yaml"),
    ("dra-nvidia", "dra/nvidia-mig-class.yaml"),
    ("dra-nvidia", "claims/nvidia-mig-extended-resource.yaml"),
    ("eks", "eks-p5-pod.yaml"),
    ("eks", "eks-karpenter-l4-spot.yaml"),
    ("eks", "catalogue/eks-karpenter-amd-g4ad.yaml"),
    ("eks", "catalogue/eks-p6-b300-job.yaml"),
    ("generic", "cuda-vectoradd.yaml"),
    ("generic-mig-single", "catalogue/mig-single-pod.yaml"),
    ("gke", "gke-h100-training-job.yaml"),
    ("gke", "gke-mig-partition.yaml"),
    ("gke", "gke-time-sharing-2gpu.yaml"),
    ("hami", "hami-percentage.yaml"),
    ("hami", "hami-dynamic-mig.yaml"),
    ("kai", "kai-fraction.yaml"),
    ("koordinator", "koordinator-ratio.yaml"),
    ("oke", "catalogue/oke-mi300x-mpijob.yaml"),
    ("tke", "tke-qgpu.yaml"),
    ("volcano", "volcano-vgpu-job.yaml"),
    ("volcano", "volcano-dynamic-mig.yaml"),
    ("volcano-gpushare", "volcano-gpushare-legacy.yaml"),
]


def kept_in(before, after, at="") -> list[str]:
    """Where `after` lost or changed something of `before` (additions are allowed: a mapping may gain
    keys, a list items after the ones written)."""
    if isinstance(before, dict):
        if not isinstance(after, dict):
            return [f"{at}: no longer a mapping"]
        return [p for k, v in before.items() for p in kept_in(v, after.get(k), f"{at}.{k}")]
    if isinstance(before, list):
        if not isinstance(after, list) or len(after) < len(before):
            return [f"{at}: items removed"]
        return [p for i, v in enumerate(before) for p in kept_in(v, after[i], f"{at}[{i}]")]
    return [] if str(before) == str(after) else [f"{at}: {before!r} became {after!r}"]


def test_every_shipped_map_has_a_manifest_of_its_own_here():
    maps = {p.stem for p in default_directory().glob("*.yaml") if p.name != "gpus.yaml"}
    assert maps == {name for name, _ in OWN}


@pytest.mark.parametrize(("target", "name"), OWN)
def test_a_platform_s_own_manifest_comes_back_from_its_map_as_written_or_only_added_to(capsys, target, name):
    path = MANIFESTS / name
    code = main(["translate", "--to", target, str(path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "denied" not in err and "using" not in err and "removed" not in err, err
    before = [d for d in yaml.safe_load_all(path.read_text()) if d]
    after = [d for d in yaml.safe_load_all(out) if d][: len(before)]  # a DRA target's templates follow
    assert len(after) == len(before)
    assert [p for b, a in zip(before, after, strict=True) for p in kept_in(b, a)] == []


def test_an_ask_a_device_class_written_beside_it_stands_for_stays_as_written_on_the_dra_map(capsys):
    # KEP-5004: the DeviceClass's extendedResourceName is the pod's resource, the pod pins no model: the
    # scheduler gives it a device of that class; a generated claim would only duplicate it.
    path = MANIFESTS / "claims" / "nvidia-mig-extended-resource.yaml"
    code = main(["translate", "--to", "dra-nvidia", str(path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    docs = [d for d in yaml.safe_load_all(out) if d]
    assert [d["kind"] for d in docs] == ["DeviceClass", "Pod"]  # no ResourceClaimTemplate made
    spec = docs[1]["spec"]
    assert spec["containers"][0]["resources"] == {"limits": {"nvidia.com/mig-1g.12gb": 1}}
    assert "resourceClaims" not in spec
