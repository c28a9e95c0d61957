"""Every shipped cloud map says where its values come from.

A checked line is a resource name under `resources:` (`whole`, `resource`, `resource_prefix` and the
`*_resource` keys) or a value under a `model_labels` entry's `values:`. It is covered by an
`unconfirmed` note in its own comment, or by a comment saying "Source: <what>" or "Sources: <what>" in
its top-level section: in the comment block right above the section's key (no blank line between), or
indented inside the section before the line. A new value in a section that names no source fails.
"""

import re
from pathlib import Path

import pytest

from webhook.config.cloudmap import CATALOGUE_FILE, default_directory

SOURCE = re.compile(r"\bSources?:\s*\S")
TOP_LEVEL_KEY = re.compile(r"^([A-Za-z_]+):")
KEY = re.compile(r"^\s*(?:-\s+)?([A-Za-z_]+):\s*(.*)$")
SHIPPED_MAPS = sorted(p for p in default_directory().glob("*.yaml") if p.name != CATALOGUE_FILE)


def is_resource_key(key: str) -> bool:
    return key == "whole" or key.endswith(("resource", "resource_prefix"))


def checked_lines(text: str) -> list[tuple[int, str, bool]]:
    """(line number, line, covered) for each resource-name and model-label value line of a map."""
    found = []
    section, section_sourced, comments_above = None, False, []
    values_indent = None  # the indent of the `values:` mapping being read, if any
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped:
            comments_above = []
            continue
        if stripped.startswith("#"):
            comments_above.append(stripped)
            if section and line.startswith(" ") and SOURCE.search(stripped):
                section_sourced = True
            continue
        top = TOP_LEVEL_KEY.match(line)
        if top:
            section = top.group(1)
            section_sourced = any(SOURCE.search(c) for c in comments_above)
            values_indent = None
        comments_above = []
        key = KEY.match(line)
        indent = len(line) - len(line.lstrip())
        if values_indent is not None and indent <= values_indent:
            values_indent = None
        is_checked = values_indent is not None  # an entry of a `values:` mapping
        if key and section == "resources" and is_resource_key(key.group(1)):
            is_checked = True
        if key and section == "model_labels" and key.group(1) == "values":
            value = key.group(2).split(" #")[0].strip()
            if value and not value.startswith("&"):
                is_checked = True  # catalogue-names, an alias or a flow mapping on the line
            else:
                values_indent = indent
        if is_checked:
            covered = section_sourced or "unconfirmed" in line.partition(" #")[2]
            found.append((number, line, covered))
    return found


def uncovered(text: str) -> list[str]:
    return [f"{number}: {line.strip()}" for number, line, covered in checked_lines(text) if not covered]


@pytest.mark.parametrize("path", SHIPPED_MAPS, ids=lambda p: p.name)
def test_every_value_and_resource_line_of_a_shipped_map_names_a_source_or_says_unconfirmed(path: Path):
    assert uncovered(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("path", SHIPPED_MAPS, ids=lambda p: p.name)
def test_the_rule_checks_at_least_the_whole_gpu_resource_of_every_shipped_map(path: Path):
    lines = [line.strip() for _, line, _ in checked_lines(path.read_text(encoding="utf-8"))]
    assert any(line.startswith("whole:") for line in lines)


def test_the_rule_checks_each_model_value_of_a_map():
    lines = [
        line.strip()
        for _, line, _ in checked_lines((default_directory() / "aks.yaml").read_text(encoding="utf-8"))
    ]
    assert "A100-40GB: Standard_ND96asr_v4" in lines
    assert "values: *vm-sizes" in lines
    assert not any(line.startswith(("label:", "gpus:", "Standard_NC24ads_A100_v4:")) for line in lines)


LAB = """\
name: lab
# Source: example.com/gpu-docs
resources:
  whole: example.com/gpu
model_labels:
  - label: example.com/model
    values:
      H100-80GB: h100
"""


def test_a_value_added_to_a_section_without_a_source_is_reported():
    assert uncovered(LAB) == ["8: H100-80GB: h100"]


def test_a_value_is_covered_by_a_source_comment_above_its_section():
    assert uncovered(LAB.replace("model_labels:", "# Sources: example.com/models\nmodel_labels:")) == []


def test_a_value_is_covered_by_a_source_comment_earlier_in_its_section():
    text = LAB.replace("    values:", "    # Source: example.com/models\n    values:")
    assert uncovered(text) == []


def test_a_value_is_covered_by_its_own_unconfirmed_note():
    assert uncovered(LAB.replace("h100\n", "h100  # unconfirmed\n")) == []


def test_a_source_for_one_section_does_not_cover_the_next():
    text = LAB.replace("# Source: example.com/gpu-docs\n", "").replace("name: lab", "# Source: x\nname: lab")
    assert uncovered(text) == ["4: whole: example.com/gpu", "8: H100-80GB: h100"]


def test_a_source_comment_parted_from_its_section_by_a_blank_line_does_not_count():
    text = LAB.replace("model_labels:", "# Source: example.com/models\n\nmodel_labels:")
    assert uncovered(text) == ["10: H100-80GB: h100"]


def test_a_comment_without_a_named_source_does_not_count():
    assert uncovered(LAB.replace("model_labels:", "# Source:\nmodel_labels:")) == ["9: H100-80GB: h100"]
