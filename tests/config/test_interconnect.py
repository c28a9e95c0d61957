"""The interconnect facts (sxm | pcie) as the maps and the catalogue give them, and their errors at
file:line."""

import pytest

from webhook.config.cloudmap import (
    CloudMapError,
    default_directory,
    load_directory,
    parse_catalogue_text,
    parse_cloud_map,
)

MAP = """\
name: lab
resources:
  whole: nvidia.com/gpu
model_labels:
  - label: example.com/instance-type
    values:
      A100-40GB: [big-8, small-1]
      L4: l4-1
    interconnect:
      big-8: sxm
"""
CATALOGUE_ENTRY = (
    "models:\n  X:\n    vendor: nvidia\n    family: f\n    memory_gb: 8\n    memory_mib: 8192\n"
    "    names: [X-SXM, X-PCIe]\n    interconnect: {X-SXM: sxm, X-PCIE: pcie}\n"
)


@pytest.fixture(scope="module")
def catalogue():
    return load_directory(default_directory()).catalogue


def test_a_value_takes_the_map_s_word_else_that_of_a_model_sold_one_way(catalogue):
    label = parse_cloud_map(MAP, "lab.yaml", catalogue).model_labels[0]
    # small-1 is an A100 40GB, sold as an SXM4 module and as a PCIe card: not known.
    assert label.interconnect == {"big-8": "sxm", "l4-1": "pcie"}


def test_an_interconnect_for_a_value_no_model_has_points_at_its_line(catalogue):
    with pytest.raises(CloudMapError) as info:
        parse_cloud_map(MAP.replace("big-8: sxm", "big-9: sxm"), "lab.yaml", catalogue)
    assert info.value.line == 10
    assert info.value.problem == "interconnect names 'big-9', which no model of this label has"


def test_an_interconnect_word_outside_sxm_and_pcie_is_refused_at_its_line(catalogue):
    with pytest.raises(CloudMapError) as info:
        parse_cloud_map(MAP.replace("big-8: sxm", "big-8: nvlink"), "lab.yaml", catalogue)
    assert info.value.line == 10


def test_a_catalogue_interconnect_for_a_name_the_model_lacks_points_at_its_line():
    with pytest.raises(CloudMapError) as info:
        parse_catalogue_text(CATALOGUE_ENTRY, "gpus.yaml")
    assert info.value.line == 8
    assert info.value.problem == "interconnect names 'X-PCIE', which is not one of X's names"


@pytest.mark.parametrize(
    ("target", "value", "word"),
    [
        ("eks", "p4d.24xlarge", "sxm"),
        ("eks", "g5.48xlarge", "pcie"),
        ("aks", "Standard_ND96asr_v4", "sxm"),
        ("aks", "Standard_NC96ads_A100_v4", "pcie"),
        ("tke", "NVIDIA-A100-SXM4-40GB", "sxm"),
        ("tke", "NVIDIA-A100-PCIE-40GB", "pcie"),
    ],
)
def test_the_shipped_maps_say_how_each_instance_type_joins_its_gpus(target, value, word):
    label = load_directory(default_directory()).maps[target].model_labels[0]
    assert label.interconnect[value] == word
