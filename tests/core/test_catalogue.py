"""The GPU catalogue pinned row by row against reference/gpus.md, and the profile-matching rule."""

import pytest

from webhook.config.cloudmap import default_directory, load_directory
from webhook.core.vocabulary.catalogue import MigProfile, ProfileError, smallest_model_fit

CATALOGUE = load_directory(default_directory()).catalogue

MIG_TABLE = {
    "A30": (24, "1g.6gb ×4, 1g.6gb+me ×1, 2g.12gb ×2, 2g.12gb+me ×1, 4g.24gb ×1"),
    "A100-40GB": (40, "1g.5gb ×7, 1g.5gb+me ×1, 1g.10gb ×4, 2g.10gb ×3, 3g.20gb ×2, 4g.20gb ×1, 7g.40gb ×1"),
    "A100-80GB": (
        80,
        "1g.10gb ×7, 1g.10gb+me ×1, 1g.20gb ×4, 2g.20gb ×3, 3g.40gb ×2, 4g.40gb ×1, 7g.80gb ×1",
    ),
    "H100-80GB": (
        80,
        "1g.10gb ×7, 1g.10gb+me ×1, 1g.20gb ×4, 2g.20gb ×3, 3g.40gb ×2, 4g.40gb ×1, 7g.80gb ×1",
    ),
    "H100-94GB": (
        94,
        "1g.12gb ×7, 1g.12gb+me ×1, 1g.24gb ×4, 2g.24gb ×3, 3g.47gb ×2, 4g.47gb ×1, 7g.94gb ×1",
    ),
    "H100-96GB": (
        96,
        "1g.12gb ×7, 1g.12gb+me ×1, 1g.24gb ×4, 2g.24gb ×3, 3g.48gb ×2, 4g.48gb ×1, 7g.96gb ×1",
    ),
    "H20": (96, "1g.12gb ×7, 1g.12gb+me ×1, 1g.24gb ×4, 2g.24gb ×3, 3g.48gb ×2, 4g.48gb ×1, 7g.96gb ×1"),
    "H200": (141, "1g.18gb ×7, 1g.18gb+me ×1, 1g.35gb ×4, 2g.35gb ×3, 3g.71gb ×2, 4g.71gb ×1, 7g.141gb ×1"),
    "GH200-144GB": (
        144,
        "1g.18gb ×7, 1g.18gb+me ×1, 1g.36gb ×4, 2g.36gb ×3, 3g.72gb ×2, 4g.72gb ×1, 7g.144gb ×1",
    ),
    "B200": (180, "1g.23gb ×7, 1g.23gb+me ×1, 1g.45gb ×4, 2g.45gb ×3, 3g.90gb ×2, 4g.90gb ×1, 7g.180gb ×1"),
    # B300: the GPU Operator 25.10.0 release notes' profiles, the H100's counts (gpus.yaml says where).
    "B300": (269, "1g.34gb ×7, 1g.34gb+me ×1, 1g.67gb ×4, 2g.67gb ×3, 3g.135gb ×2, 4g.135gb ×1, 7g.269gb ×1"),
    "GB200": (186, "1g.23gb ×7, 1g.23gb+me ×1, 1g.47gb ×4, 2g.47gb ×3, 3g.93gb ×2, 4g.93gb ×1, 7g.186gb ×1"),
    "RTX-PRO-6000": (
        96,
        "1g.24gb ×4, 1g.24gb+me ×1, 1g.24gb+gfx ×4, 1g.24gb-me ×4, 1g.24gb+me.all ×1, 2g.48gb ×2, "
        "2g.48gb+gfx ×2, 2g.48gb-me ×2, 2g.48gb+me.all ×1, 4g.96gb ×1, 4g.96gb+gfx ×1",
    ),
}
WHOLE_ONLY = {
    "T4": 16,
    "V100-16GB": 16,
    "V100-32GB": 32,
    "A10": 24,
    "A10G": 24,
    "L4": 24,
    "L40S": 48,
    "MI300X": 192,
    "V520": 8,
}


def parse_row(text):
    return {name: int(count) for name, count in (item.split(" ×") for item in text.split(", "))}


@pytest.mark.parametrize("model_id", sorted(MIG_TABLE))
def test_mig_table_row(model_id):
    memory, row = MIG_TABLE[model_id]
    model = CATALOGUE.get(model_id)
    assert model.memory_gb == memory
    assert dict(model.profiles) == parse_row(row)
    assert model.compute_slices == (4 if model_id in ("A30", "RTX-PRO-6000") else 7)


@pytest.mark.parametrize("model_id", sorted(WHOLE_ONLY))
def test_non_mig_models(model_id):
    model = CATALOGUE.get(model_id)
    assert model.memory_gb == WHOLE_ONLY[model_id]
    assert not model.mig_capable


def test_catalogue_has_exactly_the_reference_models():
    assert set(CATALOGUE.ids()) == set(MIG_TABLE) | set(WHOLE_ONLY)


@pytest.mark.parametrize(
    ("model_id", "pci"),
    [
        ("A100-40GB", "0x20B0"),
        ("H100-80GB", "0x2330"),
        ("H200", "0x2335"),
        ("B200", "0x2901"),
        ("A30", "0x20B7"),
        ("GB200", "0x2941"),
        ("B300", "0x3182"),
        ("RTX-PRO-6000", "0x2BB5"),
        ("H100-94GB", "0x2321"),
        ("H20", "0x2329"),
        # PG506-96GB: the GPU Operator's default mig-parted config groups it with the H100 96GB
        ("H100-96GB", "0x20B6"),
    ],
)
def test_pci_ids(model_id, pci):
    assert pci in CATALOGUE.get(model_id).pci_ids


@pytest.mark.parametrize(
    ("product", "model_id", "profile"),
    [
        ("NVIDIA-A100-SXM4-40GB", "A100-40GB", None),
        ("NVIDIA-H100-80GB-HBM3", "H100-80GB", None),
        ("NVIDIA-H100-80GB-HBM3-MIG-1g.10gb", "H100-80GB", "1g.10gb"),
        ("NVIDIA-A100-SXM4-40GB-MIG-3g.20gb", "A100-40GB", "3g.20gb"),
        ("Tesla-T4-SHARED", "T4", None),
        ("NVIDIA-H200", "H200", None),
        ("NVIDIA-B300-SXM6-AC-MIG-3g.135gb", "B300", "3g.135gb"),
    ],
)
def test_gfd_product_names(product, model_id, profile):
    model, found = CATALOGUE.by_product_name(product)
    assert model.id == model_id
    assert (found.name if found else None) == profile


def test_profile_names_parse_and_print_back():
    for name in ("1g.5gb", "1g.10gb+me", "2g.48gb-me", "1g.24gb+me.all", "4g.96gb+gfx", "7g.141gb"):
        assert MigProfile.parse(name).name == name
    assert MigProfile.parse("3g.40gb") == MigProfile(3, 40)
    for bad in ("1g5gb", "0g.5gb", "1g.5gb+foo", "mig-1g.5gb", ""):
        with pytest.raises(ProfileError):
            MigProfile.parse(bad)


@pytest.mark.parametrize(
    ("source", "target", "expected"),
    [
        # The worked examples in reference/gpus.md.
        ("1g.5gb", "H100-80GB", "1g.10gb"),
        ("3g.20gb", "H200", "3g.71gb"),
        ("2g.20gb", "A100-40GB", "3g.20gb"),
        ("1g.20gb", "A30", "4g.24gb"),
        # Same name where it exists; media engine only when asked for.
        ("1g.10gb", "A100-80GB", "1g.10gb"),
        ("1g.10gb+me", "H100-80GB", "1g.10gb+me"),
        ("1g.5gb+me", "H200", "1g.18gb+me"),
        ("1g.24gb", "RTX-PRO-6000", "1g.24gb"),
        ("7g.80gb", "A100-40GB", None),
        ("1g.10gb+me", "GB200", "1g.23gb+me"),  # its +me profile (mig-parted#227)
        ("1g.10gb+me", "GH200-144GB", "1g.18gb+me"),
        ("2g.20gb+me", "GB200", None),
    ],
)
def test_smallest_fit_rule(source, target, expected):
    found = CATALOGUE.get(target).smallest_fit(MigProfile.parse(source))
    assert (found.name if found else None) == expected


def test_smallest_fit_across_models_prefers_the_smallest_slice():
    models = [CATALOGUE.get("H200"), CATALOGUE.get("A100-40GB")]
    model, profile = smallest_model_fit(models, MigProfile.parse("1g.5gb"))
    assert (model.id, profile.name) == ("A100-40GB", "1g.5gb")


# NVML's memory.total in MiB (driver 515 and later), as public nvidia-smi / rocm-smi output shows it: the
# figure a DRA driver publishes as the device's `memory` capacity (bytes), below the marketing name.
NVML_MEMORY_MIB = {
    "H100-80GB": 81559,  # 79.6 GiB: an "80Gi" bound does not hold
    "A100-80GB": 81920,
    "A100-40GB": 40960,
    "T4": 15360,
    "L4": 23034,
    "A10G": 23028,
    "L40S": 46068,
    "H200": 143771,
    "B200": 183359,
    "B300": 275040,
    "MI300X": 196592,
}


@pytest.mark.parametrize(("model_id", "mib"), sorted(NVML_MEMORY_MIB.items()))
def test_each_model_knows_its_memory_as_nvml_reports_it(model_id, mib):
    assert CATALOGUE.get(model_id).memory_mib == mib


def test_every_model_has_an_nvml_memory_figure_below_or_at_its_marketing_one_plus_a_gib():
    for model in CATALOGUE.models.values():
        assert 0 < model.memory_mib <= (model.memory_gb + 1) * 1024, model.id


def test_a_substitute_has_at_least_the_memory_the_original_was_sold_with_not_its_nvml_mib():
    # An L4 (NVML 23,034 MiB) and an A10 (23,028 MiB) are both sold as 24 GB cards: a few MiB of NVML
    # difference never refuses the equivalent.
    assert CATALOGUE.equivalent("L4", ["A10", "T4"]).id == "A10"
    # An H100 80GB (81,559 MiB) stands in for an A100 80GB (81,920 MiB): both are sold as 80 GB.
    assert CATALOGUE.equivalent("A100-80GB", ["H100-80GB", "H200"]).id == "H100-80GB"
    # Less memory than sold for the original is never a substitute: a T4 (16 GB) for an L4 (24 GB).
    assert CATALOGUE.equivalent("L4", ["T4"]) is None


def test_a_substitute_is_of_the_same_family_when_one_has_as_much_memory():
    # An A100 40GB job goes to an A100 80GB before an H100 80GB, whatever the NVML MiB say.
    assert CATALOGUE.equivalent("A100-40GB", ["H100-80GB", "A100-80GB"]).id == "A100-80GB"
    # The least memory that is enough comes first: a family match with more memory does not win.
    assert CATALOGUE.equivalent("L4", ["L40S", "A10"]).id == "A10"


@pytest.mark.parametrize(
    ("model_id", "architecture", "capability"),
    [
        ("A100-80GB", "Ampere", (8, 0)),
        ("L4", "Ada Lovelace", (8, 9)),
        ("H200", "Hopper", (9, 0)),
        ("B200", "Blackwell", (10, 0)),
        ("B300", "Blackwell", (10, 3)),
        ("T4", "Turing", (7, 5)),
    ],
)
def test_nvidia_models_carry_the_architecture_and_capability_the_dra_driver_publishes(
    model_id, architecture, capability
):
    model = CATALOGUE.get(model_id)
    assert (model.architecture, model.compute_capability) == (architecture, capability)


@pytest.mark.parametrize(
    ("product", "word"),
    [
        ("NVIDIA-A100-SXM4-40GB", "sxm"),
        ("NVIDIA-A100-PCIE-40GB", "pcie"),
        ("NVIDIA-A100-SXM4-80GB-MIG-1g.10gb", "sxm"),
        ("NVIDIA-H100-80GB-HBM3", "sxm"),
        ("NVIDIA-H100-PCIe", "pcie"),
        ("NVIDIA-H100-NVL", "pcie"),
        ("NVIDIA-H200-NVL", "pcie"),
        ("Tesla-V100-SXM2-16GB", "sxm"),
        ("NVIDIA-L4", "pcie"),
        ("AMD_Instinct_MI300X_OAM", "sxm"),
    ],
)
def test_each_product_name_says_how_its_gpus_are_joined(product, word):
    assert CATALOGUE.interconnect_of(product) == word


def test_a_model_sold_both_as_a_module_and_as_a_card_has_no_one_interconnect():
    assert CATALOGUE.get("A100-40GB").interconnect == ""
    assert CATALOGUE.get("L4").interconnect == "pcie"
    assert CATALOGUE.get("B200").interconnect == "sxm"


def test_a_model_on_arm_hosts_stands_in_for_none_on_x86_hosts_and_the_other_way():
    # GB200 runs on Grace (arm64) hosts; B200 and H200 on x86-64 ones: an image runs on one only.
    catalogue = CATALOGUE
    assert catalogue.equivalent("B200", ["GB200"]) is None
    assert catalogue.equivalent("H200", ["GB200", "B200"]).id == "B200"
    assert catalogue.equivalent("GB200", ["B200", "H200"]) is None
    assert catalogue.equivalent("GB200", ["GB200"]).id == "GB200"
