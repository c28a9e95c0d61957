from pathlib import Path

import pytest

from webhook.cloudmap import CloudMapError, default_directory, load_directory, parse_cloud_map

GOOD = """\
name: lab
resources:
  whole: nvidia.com/gpu
  mig:
    form: mixed
    resource_prefix: nvidia.com/mig-
"""


def test_every_shipped_map_loads():
    maps = load_directory(default_directory())
    assert {"generic", "amd"} <= set(maps)
    generic = maps["generic"]
    assert generic.whole_gpu == "nvidia.com/gpu"
    assert generic.is_accelerator("nvidia.com/mig-3g.40gb")
    assert generic.is_accelerator("nvidia.com/gpu.shared")
    assert not generic.is_accelerator("example.com/widget")


def test_a_valid_map_parses():
    cloud_map = parse_cloud_map(GOOD, "lab.yaml")
    assert cloud_map.mig_form == "mixed"
    assert cloud_map.shared_resource is None


def test_unknown_key_is_reported_with_file_and_line():
    text = GOOD.replace("    form: mixed\n", "    form: mixed\n    stratgy: single\n")
    with pytest.raises(CloudMapError) as info:
        parse_cloud_map(text, "cloudmaps/lab.yaml")
    assert info.value.line == 6  # the misspelt key itself
    assert str(info.value).startswith("cloudmaps/lab.yaml:6: resources.mig: Additional properties")
    assert "'stratgy'" in str(info.value)


def test_bad_resource_name_points_at_its_line():
    with pytest.raises(CloudMapError) as info:
        parse_cloud_map(GOOD.replace("whole: nvidia.com/gpu", "whole: nvidia gpu"), "lab.yaml")
    assert info.value.line == 3
    assert "resources.whole" in info.value.problem


def test_yaml_syntax_error_points_at_its_line():
    with pytest.raises(CloudMapError) as info:
        parse_cloud_map("name: lab\nresources: [\n", "lab.yaml")
    assert info.value.line == 3
    assert "not valid YAML" in info.value.problem


def test_unsafe_yaml_tags_are_refused():
    with pytest.raises(CloudMapError, match="not valid YAML"):
        parse_cloud_map("name: !!python/object/apply:os.system ['true']\n", "lab.yaml")


def test_duplicate_map_names_are_refused(tmp_path: Path):
    (tmp_path / "a.yaml").write_text(GOOD)
    (tmp_path / "b.yaml").write_text(GOOD)
    with pytest.raises(CloudMapError) as info:
        load_directory(tmp_path)
    assert info.value.path.endswith("b.yaml")
    assert info.value.line == 1
