import shutil
from pathlib import Path

import pytest

from tests.translation_cases import TARGETS
from webhook.config.cloudmap import (
    CloudMapError,
    default_directory,
    directory_signature,
    load_directory,
    parse_catalogue_text,
    parse_cloud_map,
)

GOOD = """\
name: lab
resources:
  whole: nvidia.com/gpu
  mig:
    form: mixed
    resource_prefix: nvidia.com/mig-
model_labels:
  - label: example.com/gpu
    values:
      H100-80GB: h100
"""
SHIPPED = set(TARGETS)


@pytest.fixture(scope="module")
def catalogue():
    return load_directory(default_directory()).catalogue


def parse(text, catalogue, source="cloudmaps/lab.yaml"):
    return parse_cloud_map(text, source, catalogue)


def test_every_shipped_map_loads():
    loaded = load_directory(default_directory())
    assert set(loaded.maps) == SHIPPED
    generic = loaded.maps["generic"]
    assert generic.whole_gpu == "nvidia.com/gpu"
    assert generic.is_accelerator("nvidia.com/mig-3g.40gb")
    assert generic.is_accelerator("nvidia.com/gpu.shared")
    assert not generic.is_accelerator("example.com/widget")


def test_a_valid_map_parses(catalogue):
    cloud_map = parse(GOOD, catalogue)
    assert cloud_map.mig.form == "mixed"
    assert cloud_map.shared.form == "none"
    assert cloud_map.model_labels[0].models_for("h100") == {"H100-80GB"}
    assert cloud_map.models_offered(catalogue) == ("H100-80GB",)


def test_catalogue_names_are_the_map_s_own_vendor_s(catalogue):
    # GFD's nvidia.com/gpu.product never names an AMD GPU: an NVIDIA map reading `catalogue-names` must
    # not appear to sell one (generic said "it offers MI300X" beside "NVIDIA GPUs only").
    text = GOOD.replace("    values:\n      H100-80GB: h100\n", "    values: catalogue-names\n")
    nvidia = parse(text, catalogue)
    assert "H100-80GB" in nvidia.models_offered(catalogue)
    assert all(catalogue.models[m].vendor == "nvidia" for m in nvidia.models_offered(catalogue))
    amd = parse(
        text.replace("name: lab\n", "name: lab\nvendor: amd\n").replace("nvidia.com/", "amd.com/"), catalogue
    )
    assert "MI300X" in amd.models_offered(catalogue)
    assert all(catalogue.models[m].vendor == "amd" for m in amd.models_offered(catalogue))


def test_unknown_key_is_reported_with_file_and_line(catalogue):
    text = GOOD.replace("name: lab\n", "name: lab\nscheduler: volcano\n")
    with pytest.raises(CloudMapError) as info:
        parse(text, catalogue)
    assert info.value.line == 2  # the misspelt key itself
    assert str(info.value).startswith("cloudmaps/lab.yaml:2: (top level): Additional properties")
    assert "'scheduler'" in str(info.value)


def test_unknown_gpu_model_points_at_its_line(catalogue):
    with pytest.raises(CloudMapError) as info:
        parse(GOOD.replace("H100-80GB: h100", "H100-81GB: h100"), catalogue)
    assert info.value.line == 10
    assert info.value.problem == "unknown GPU model 'H100-81GB' (models are the keys of gpus.yaml)"


def test_a_mig_profile_a_model_lacks_points_at_its_line(catalogue):
    sizes = "    resource_prefix: nvidia.com/mig-\n    profiles:\n      A100-40GB: [1g.5gb, 1g.20gb]\n"
    with pytest.raises(CloudMapError) as info:
        parse(GOOD.replace("    resource_prefix: nvidia.com/mig-\n", sizes), catalogue)
    assert info.value.line == 8
    assert info.value.problem.startswith("A100-40GB has no MIG profile '1g.20gb' (it has: 1g.5gb, ")


def test_duplicate_model_points_at_the_second_one(catalogue):
    with pytest.raises(CloudMapError) as info:
        parse(GOOD + "      H100-80GB: h100b\n", catalogue)
    assert info.value.line == 11
    assert info.value.problem == "duplicate key 'H100-80GB'"


def test_bad_label_syntax_points_at_its_line(catalogue):
    with pytest.raises(CloudMapError) as info:
        parse(GOOD.replace("example.com/gpu", "example.com/gpu model"), catalogue)
    assert info.value.line == 8
    assert "model_labels.0.label" in info.value.problem


def test_bad_resource_name_points_at_its_line(catalogue):
    with pytest.raises(CloudMapError) as info:
        parse(GOOD.replace("whole: nvidia.com/gpu", "whole: nvidia gpu"), catalogue)
    assert info.value.line == 3
    assert "resources.whole" in info.value.problem


def test_yaml_syntax_error_points_at_its_line(catalogue):
    with pytest.raises(CloudMapError) as info:
        parse("name: lab\nresources: [\n", catalogue)
    assert info.value.line == 3
    assert "not valid YAML" in info.value.problem


def test_unsafe_yaml_tags_are_refused(catalogue):
    with pytest.raises(CloudMapError, match="not valid YAML"):
        parse("name: !!python/object/apply:os.system ['true']\n", catalogue)


def test_bad_profile_in_the_catalogue_points_at_its_line():
    text = (
        "models:\n  X:\n    vendor: nvidia\n    family: f\n    memory_gb: 8\n    memory_mib: 8192\n"
        "    mig:\n      compute_slices: 7\n      profiles: {1g.5g: 7}\n"
    )
    with pytest.raises(CloudMapError) as info:
        parse_catalogue_text(text, "gpus.yaml")
    assert info.value.line == 9
    assert "not a MIG profile" in info.value.problem


def copy_maps(tmp_path: Path) -> Path:
    target = tmp_path / "maps"
    shutil.copytree(default_directory(), target)
    return target


def test_duplicate_map_names_are_refused(tmp_path: Path):
    maps = copy_maps(tmp_path)
    (maps / "zz.yaml").write_text((maps / "gke.yaml").read_text())
    with pytest.raises(CloudMapError) as info:
        load_directory(maps)
    assert info.value.path.endswith("zz.yaml")
    assert info.value.problem == "duplicate map name 'gke'"


def test_directory_signature_changes_on_every_edit(tmp_path: Path):
    maps = copy_maps(tmp_path)
    before = directory_signature(maps)
    (maps / "gke.yaml").write_text((maps / "gke.yaml").read_text() + "\n")
    assert directory_signature(maps) != before


# The map's words: (schema path to the property, the value and field that hold it). A new word must
# be added on both sides, and a default changed on one side only fails here.
def _schema_property(path):
    import json
    from importlib import resources

    node = json.loads(resources.files("webhook.config").joinpath("schemas/cloudmap.schema.json").read_text())
    for step in path:
        node = node[step]
    return node


def _form_words(section):
    """Every `form` a oneOf section of the schema allows."""
    return {branch["properties"]["form"]["const"] for branch in _schema_property(section)["oneOf"]}


def test_the_schema_lists_exactly_the_words_the_values_know_with_the_same_defaults():
    from dataclasses import fields
    from typing import get_args, get_type_hints

    from webhook.core.vocabulary import dra_api, platform, sharing

    words = {
        ("properties", "vendor"): (platform.CloudMap, "vendor"),
        ("properties", "policy", "properties", "fractional"): (platform.CloudMap, "fractional_policy"),
        ("properties", "policy", "properties", "mig_to_whole"): (platform.CloudMap, "mig_to_whole"),
        ("properties", "policy", "properties", "substitution"): (platform.CloudMap, "substitution"),
        ("properties", "policy", "properties", "topology"): (platform.CloudMap, "topology_policy"),
        ("properties", "numa_scheduler"): (platform.CloudMap, "numa_scheduler"),
    }
    for path, (cls, name) in words.items():
        schema = _schema_property(path)
        allowed = set(get_args(get_type_hints(cls)[name]))
        assert set(schema["enum"]) == allowed - {""}, name  # "" is the value's "not set"
        default = next(f.default for f in fields(cls) if f.name == name)
        assert schema.get("default", "") == default, name

    policy_sharing = ("properties", "policy", "properties", "sharing", "properties")
    for key, name in (("memory_fill", "sharing_memory_fill"), ("memory_required", "sharing_memory_required")):
        default = next(f.default for f in fields(platform.CloudMap) if f.name == name)
        assert _schema_property((*policy_sharing, key))["default"] == default, name

    resources = ("properties", "resources", "properties")
    assert _form_words((*resources, "mig")) == set(get_args(platform.MigFormName))
    assert _form_words((*resources, "shared")) == set(get_args(sharing.SharedFormName))
    dra = ("properties", "dra", "properties")
    assert set(_schema_property((*dra, "types", "additionalProperties"))["enum"]) == set(
        get_args(platform.DeviceKind)
    )
    assert set(_schema_property((*dra, "api_version"))["enum"]) == {dra_api.AUTO, *dra_api.VERSIONS}


def test_a_map_that_leaves_a_word_out_gets_the_values_default():
    from dataclasses import fields

    from webhook.core.vocabulary.platform import CloudMap

    catalogue = load_directory(default_directory()).catalogue
    lab = parse_cloud_map(GOOD, "lab.yaml", catalogue)
    for f in fields(CloudMap):
        if f.name in ("fractional_policy", "mig_to_whole", "substitution", "topology_policy", "vendor"):
            assert getattr(lab, f.name) == f.default
    assert lab.shared.form == "none" and lab.shared.core_per_gpu == 100
    strict = parse_cloud_map(
        GOOD + "policy:\n  topology: required\n  fractional: mig\n", "lab.yaml", catalogue
    )
    assert (strict.topology_policy, strict.fractional_policy) == ("required", "mig")


def test_every_sharing_form_says_what_it_means_and_how_it_is_asked_for():
    from typing import get_args

    from webhook.core.vocabulary import sharing

    assert set(sharing.SHARING_TRAITS) == set(get_args(sharing.SharedFormName))
    loaded = load_directory(default_directory())
    for cloud_map in loaded.maps.values():
        # Each map that shares GPUs tells a user who wants part of one how to ask, in its own words.
        offered = any("share" in option for option in cloud_map.partial_gpu_options(loaded.catalogue))
        assert offered == cloud_map.shared.offered, cloud_map.name


def test_a_map_may_name_another_vendor_s_whole_gpu_resource(catalogue):
    text = GOOD.replace(
        "  whole: nvidia.com/gpu\n", "  whole: nvidia.com/gpu\n  whole_by_vendor:\n    amd: amd.com/gpu\n"
    )
    lab = parse(text, catalogue)
    assert lab.vendors == ("nvidia", "amd")
    assert lab.whole_for("amd") == "amd.com/gpu" and lab.whole_for("nvidia") == "nvidia.com/gpu"
    assert lab.is_accelerator("amd.com/gpu")
    assert parse(GOOD, catalogue).vendors == ("nvidia",)


@pytest.mark.parametrize(
    ("extra", "said", "line"),
    [
        ("    nvidia: example.com/gpu\n", "whole_by_vendor names 'nvidia', the map's own vendor", 5),
        ("    intel: gpu.intel.com/i915\n", "'intel' is not one of ['nvidia', 'amd']", 4),
    ],
)
def test_another_vendor_s_resource_must_be_another_known_vendor(catalogue, extra, said, line):
    text = GOOD.replace("  whole: nvidia.com/gpu\n", "  whole: nvidia.com/gpu\n  whole_by_vendor:\n" + extra)
    with pytest.raises(CloudMapError) as info:
        parse(text, catalogue)
    assert said in str(info.value)
    assert info.value.line == line


def test_a_dra_map_names_no_other_vendor_s_resource():
    shipped = (default_directory() / "dra-nvidia.yaml").read_text()
    text = shipped.replace("resources:\n", "resources:\n  whole_by_vendor:\n    amd: amd.com/gpu\n", 1)
    assert text != shipped
    catalogue = load_directory(default_directory()).catalogue
    with pytest.raises(CloudMapError, match="a map with dra asks by claim"):
        parse_cloud_map(text, "dra-nvidia.yaml", catalogue)
