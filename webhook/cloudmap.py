"""Cloud maps: one admin-edited YAML per platform, validated against a JSON Schema.

Errors name the file and the line, so an admin can fix a bad edit without reading Python.
"""

import json
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from webhook.platform import CloudMap

# Files in a cloud-map directory that are not platform maps.
NON_MAP_FILES = frozenset({"gpus.yaml"})


class CloudMapError(ValueError):
    def __init__(self, path: Path | str, line: int | None, problem: str):
        self.path = str(path)
        self.line = line
        self.problem = problem
        where = f"{self.path}:{line}" if line else self.path
        super().__init__(f"{where}: {problem}")


def _schema() -> dict[str, Any]:
    text = resources.files("webhook").joinpath("schemas/cloudmap.schema.json").read_text()
    return json.loads(text)


_VALIDATOR = jsonschema.Draft202012Validator(_schema())


def parse_cloud_map(text: str, source: Path | str) -> CloudMap:
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise CloudMapError(
            source, mark.line + 1 if mark else None, f"not valid YAML: {exc.problem}"
        ) from None
    except yaml.YAMLError as exc:
        raise CloudMapError(source, None, f"not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise CloudMapError(source, 1, "a cloud map must be a YAML mapping")
    errors = sorted(_VALIDATOR.iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        first = errors[0]
        location = ".".join(map(str, first.absolute_path)) or "(top level)"
        raise CloudMapError(source, _line_of(node, _error_path(first)), f"{location}: {first.message}")
    res = data["resources"]
    mig = res.get("mig", {"form": "none"})
    shared = res.get("shared")
    return CloudMap(
        name=data["name"],
        description=data.get("description", ""),
        whole_gpu=res["whole"],
        mig_form=mig["form"],
        mig_resource_prefix=mig.get("resource_prefix", ""),
        mig_example_profiles=tuple(mig.get("example_profiles", ())),
        shared_resource=shared["resource"] if shared else None,
        source=str(source),
    )


def load_cloud_map(path: Path) -> CloudMap:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CloudMapError(path, None, f"cannot read: {exc}") from None
    return parse_cloud_map(text, path)


def map_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob("*.yaml") if p.name not in NON_MAP_FILES)


def load_directory(directory: Path) -> dict[str, CloudMap]:
    """Every platform map in a directory, by name; the first bad file raises CloudMapError."""
    maps: dict[str, CloudMap] = {}
    for path in map_files(directory):
        cloud_map = load_cloud_map(path)
        if cloud_map.name in maps:
            raise CloudMapError(path, _line_of_key(path, "name"), f"duplicate map name {cloud_map.name!r}")
        maps[cloud_map.name] = cloud_map
    return maps


def default_directory() -> Path:
    """The repository's cloudmaps/ (a source checkout or the container image's copy)."""
    return Path(__file__).resolve().parent.parent / "cloudmaps"


def _line_of(node: yaml.Node | None, path: list[Any]) -> int | None:
    """1-based line of the deepest entry on `path` that exists (a mapping entry's key line)."""
    if node is None:
        return None
    line = node.start_mark.line + 1
    for key in path:
        found = None
        if isinstance(node, yaml.MappingNode):
            found = next(((k, v) for k, v in node.value if k.value == key), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            found = (node.value[key], node.value[key])
        if found is None:
            break
        key_node, node = found
        line = key_node.start_mark.line + 1
    return line


def _error_path(error: jsonschema.ValidationError) -> list[Any]:
    """The path to point at: for an unexpected key, the key itself rather than its parent."""
    path = list(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = set(error.schema.get("properties", {}))
        extra = sorted(k for k in error.instance if k not in allowed)
        if extra:
            path.append(extra[0])
    return path


def _line_of_key(path: Path, key: str) -> int | None:
    node = yaml.compose(path.read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
    return _line_of(node, [key])
