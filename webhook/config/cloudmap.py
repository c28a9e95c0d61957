"""Cloud maps and the GPU catalogue from YAML: safe loading, schema validation, errors at file:line.

An admin who breaks a map gets `file:line: problem`; the server keeps serving the last good maps.

Why one module of ~300 lines: the schema check, the parse into values and the line of every error
read one node tree per file; apart, each file would be parsed twice and the lines could disagree.
"""

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from webhook.config.yamlsource import duplicate_keys, error_line, line_of
from webhook.core.vocabulary.catalogue import (
    INTERCONNECTS,
    Catalogue,
    MigProfile,
    ProfileError,
    parse_catalogue,
)
from webhook.core.vocabulary.platform import (
    CloudDevice,
    CloudMap,
    DraForm,
    MigForm,
    ModelAnnotations,
    ModelLabel,
    NodeLabels,
)
from webhook.core.vocabulary.sharing import SharedForm

CATALOGUE_FILE = "gpus.yaml"

_CATALOGUE_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["models"],
    "properties": {
        "models": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "additionalProperties": False,
                "required": ["vendor", "family", "memory_gb", "memory_mib"],
                "properties": {
                    "vendor": {"enum": ["nvidia", "amd"]},
                    "family": {"type": "string"},
                    "class": {"enum": ["training", "inference"]},
                    "memory_gb": {"type": "integer", "minimum": 1},
                    "memory_mib": {"type": "integer", "minimum": 1},  # NVML's total
                    "architecture": {"type": "string"},  # as NVIDIA's DRA driver publishes it
                    "compute_capability": {"type": "string", "pattern": r"^[0-9]+\.[0-9]+$"},
                    "pci_ids": {"type": "array", "items": {"type": "string", "pattern": "^0x[0-9A-F]{4}$"}},
                    "names": {"type": "array", "items": {"type": "string"}},
                    # the CPU of the hosts the GPU is sold in, where it is not x86-64 (GB200: Grace)
                    "host_cpu": {"enum": ["arm64"]},
                    # sxm | pcie for every name, or per name where one model is sold both ways
                    "interconnect": {
                        "oneOf": [
                            {"$ref": "#/$defs/interconnect"},
                            {"type": "object", "additionalProperties": {"$ref": "#/$defs/interconnect"}},
                        ]
                    },
                    "mig": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["compute_slices", "profiles"],
                        "properties": {
                            "compute_slices": {"type": "integer", "minimum": 1},
                            "profiles": {
                                "type": "object",
                                "additionalProperties": {"type": "integer", "minimum": 1},
                            },
                        },
                    },
                },
            },
        }
    },
    "$defs": {"interconnect": {"enum": list(INTERCONNECTS)}},
}


class CloudMapError(ValueError):
    def __init__(self, path: Path | str, line: int | None, problem: str):
        self.path = str(path)
        self.line = line
        self.problem = problem
        where = f"{self.path}:{line}" if line else self.path
        super().__init__(f"{where}: {problem}")


@dataclass(frozen=True)
class LoadedMaps:
    catalogue: Catalogue
    maps: dict[str, CloudMap]


def _map_schema() -> dict[str, Any]:
    return json.loads(resources.files("webhook.config").joinpath("schemas/cloudmap.schema.json").read_text())


_MAP_VALIDATOR = jsonschema.Draft202012Validator(_map_schema())
_CATALOGUE_VALIDATOR = jsonschema.Draft202012Validator(_CATALOGUE_SCHEMA)


def _compose(text: str, source: Path | str) -> tuple[yaml.Node | None, Any]:
    """Parse YAML safely, keeping the node tree for line numbers; refuse duplicate keys."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        raise CloudMapError(source, error_line(exc), f"not valid YAML: {exc.problem}") from None
    except yaml.YAMLError as exc:
        raise CloudMapError(source, None, f"not valid YAML: {exc}") from None
    for key_node in duplicate_keys(node):
        raise CloudMapError(source, key_node.start_mark.line + 1, f"duplicate key {key_node.value!r}")
    return node, data


def _validate(validator, data, node, source) -> None:
    found = schema_problems(validator, data, node)
    if found:
        line, problem = found[0]
        more = f" (and {len(found) - 1} more: `gpuport lint` lists them all)" if len(found) > 1 else ""
        raise CloudMapError(source, line, problem + more)


def schema_problems(validator, data, node) -> list[tuple[int | None, str]]:
    """Every schema error of a document, each at its line and in words that say what is allowed."""
    found = []
    for error in sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path))):
        error = _most_specific(error)
        location = ".".join(map(str, error.absolute_path)) or "(top level)"
        found.append((line_of(node, _error_path(error)), f"{location}: {_said(error)}"))
    return sorted(set(found), key=lambda f: (f[0] or 0, f[1]))


def _most_specific(error: jsonschema.ValidationError) -> jsonschema.ValidationError:
    """For a `form` written with the keys of another form, the error of the form it names."""
    choices = error.validator_value
    if error.validator == "oneOf" and isinstance(error.instance, dict) and isinstance(choices, list):
        for alternative in error.context or ():
            branch = choices[int(alternative.relative_schema_path[0])]
            if branch.get("properties", {}).get("form", {}).get("const") == error.instance["form"]:
                return _most_specific(alternative)
    return error


def _said(error: jsonschema.ValidationError) -> str:
    """The error in words; a choice of forms lists them, with the keys each needs."""
    if error.validator == "oneOf" and isinstance(error.validator_value, list):
        forms = []
        for branch in error.validator_value:
            form = branch.get("properties", {}).get("form", {}).get("const")
            if form is None:
                return error.message
            needs = [k for k in branch.get("required", []) if k != "form"]
            forms.append(f"{form} (with {', '.join(needs)})" if needs else form)
        return f"not one of the forms it may take: {'; '.join(forms)}"
    return error.message


def map_problems(text: str, source: Path | str, catalogue: Catalogue) -> list[CloudMapError]:
    """Everything wrong with a cloud map, in one go: every schema error at its line and every value the
    catalogue contradicts (a model it lacks, a profile a model does not have...); [] for a good map."""
    try:
        node, data = _compose(text, source)
    except CloudMapError as exc:
        return [exc]
    if not isinstance(data, dict):
        return [CloudMapError(source, 1, "a cloud map must be a YAML mapping")]
    found = [
        CloudMapError(source, line, problem) for line, problem in schema_problems(_MAP_VALIDATOR, data, node)
    ]
    found += _value_problems(data, node, source, catalogue)
    if found:
        return sorted(found, key=lambda e: e.line or 0)
    try:
        parse_cloud_map(text, source, catalogue)
    except CloudMapError as exc:
        return [exc]
    return []


def catalogue_problems(text: str, source: Path | str) -> list[CloudMapError]:
    """Everything wrong with a GPU catalogue, in one go (every schema error, every unknown profile)."""
    try:
        node, data = _compose(text, source)
    except CloudMapError as exc:
        return [exc]
    if not isinstance(data, dict):
        return [CloudMapError(source, 1, "the GPU catalogue must be a YAML mapping with a 'models' key")]
    found = [
        CloudMapError(source, line, problem)
        for line, problem in schema_problems(_CATALOGUE_VALIDATOR, data, node)
    ]
    found += _profile_problems(data, node, source) + _interconnect_problems(data, node, source)
    if found:
        return sorted(found, key=lambda e: e.line or 0)
    try:
        parse_catalogue_text(text, source)
    except CloudMapError as exc:
        return [exc]
    return []


def _profile_problems(
    data: Mapping[str, Any], node: yaml.Node | None, source: Path | str
) -> list[CloudMapError]:
    found = []
    models = data.get("models")
    for model_id, entry in models.items() if isinstance(models, dict) else ():
        mig = entry.get("mig") if isinstance(entry, dict) else None
        profiles = mig.get("profiles") if isinstance(mig, dict) else None
        for profile in profiles if isinstance(profiles, dict) else ():
            try:
                MigProfile.parse(profile)
            except ProfileError as exc:
                line = line_of(node, ["models", model_id, "mig", "profiles", profile])
                found.append(CloudMapError(source, line, str(exc)))
    return found


def _interconnect_problems(
    data: Mapping[str, Any], node: yaml.Node | None, source: Path | str
) -> list[CloudMapError]:
    """A per-name interconnect must name one of the model's product names."""
    found = []
    models = data.get("models")
    for model_id, entry in models.items() if isinstance(models, dict) else ():
        given = entry.get("interconnect") if isinstance(entry, dict) else None
        names = entry.get("names") if isinstance(entry, dict) else None
        for name in given if isinstance(given, dict) else ():
            if name not in (names if isinstance(names, list) else ()):
                line = line_of(node, ["models", model_id, "interconnect", name])
                problem = f"interconnect names {name!r}, which is not one of {model_id}'s names"
                found.append(CloudMapError(source, line, problem))
    return found


def parse_catalogue_text(text: str, source: Path | str) -> Catalogue:
    node, data = _compose(text, source)
    if not isinstance(data, dict):
        raise CloudMapError(source, 1, "the GPU catalogue must be a YAML mapping with a 'models' key")
    _validate(_CATALOGUE_VALIDATOR, data, node, source)
    for problem in _profile_problems(data, node, source) + _interconnect_problems(data, node, source):
        raise problem
    return parse_catalogue(data)


def parse_cloud_map(text: str, source: Path | str, catalogue: Catalogue) -> CloudMap:
    node, data = _compose(text, source)
    if not isinstance(data, dict):
        raise CloudMapError(source, 1, "a cloud map must be a YAML mapping")
    _validate(_MAP_VALIDATOR, data, node, source)
    for problem in _value_problems(data, node, source, catalogue):
        raise problem
    model_labels = []
    for entry in data.get("model_labels", []):
        values = _expanded(entry, catalogue, data.get("vendor", "nvidia"))
        interconnect = _interconnects(values, entry.get("interconnect", {}), catalogue)
        model_labels.append(ModelLabel(entry["label"], values, dict(entry.get("gpus", {})), interconnect))
    dra = _dra_form(data.get("dra"))
    res = data["resources"]
    mig, shared = res.get("mig", {}), res.get("shared", {})
    if "profiles" in mig:
        mig = {**mig, "profiles": {model_id: tuple(names) for model_id, names in mig["profiles"].items()}}
    node_labels = data.get("node_labels", {})
    return CloudMap(
        name=data["name"],
        whole_gpu=res["whole"],
        whole_by_vendor=dict(res.get("whole_by_vendor", {})),
        mig=MigForm(**_given(mig, *_names(MigForm))),
        shared=SharedForm(**_given(shared, *_names(SharedForm))),
        model_labels=tuple(model_labels),
        model_annotations=ModelAnnotations(**_given(data.get("model_annotations", {}), "use", "avoid")),
        node_labels=NodeLabels(
            spot=_pairs(node_labels, "spot"),
            on_demand=_pairs(node_labels, "on_demand"),
            reserved=_pairs(node_labels, "reserved"),
            **_given(node_labels, "owned", "spot_tolerations"),
        ),
        dra=dra,
        **_topology(data.get("topology_labels", {})),
        devices=_devices(data.get("devices")),
        other_schedulers=tuple(data.get("other_schedulers", ())),
        source=str(source),
        **_given(
            data,
            "description",
            "vendor",
            "offered_models",
            "offered_profiles",
            "tolerations",
            "extended_resource_toleration",
            "scheduler_name",
            "runtime_classes",
            "driver_version",
            "numa_scheduler",
            "preflight_weights",
        ),
        **_given(
            data.get("policy", {}),
            "mig_to_whole",
            "substitution",
            fractional_policy="fractional",
            topology_policy="topology",
        ),
        **_given(
            data.get("policy", {}).get("sharing", {}),
            sharing_memory_fill="memory_fill",
            sharing_memory_required="memory_required",
        ),
    )


def _pairs(section: Mapping[str, Any], key: str) -> tuple[tuple[str, str], ...]:
    return tuple((s["key"], s["value"]) for s in section.get(key, ()))


def _devices(entries: list[Mapping[str, Any]] | None) -> tuple[CloudDevice, ...] | None:
    if entries is None:
        return None
    return tuple(
        CloudDevice(
            e["resource"], e["kind"], e["what"], tuple(e.get("same_as", ())), e.get("portable", False)
        )
        for e in entries
    )


def _topology(section: Mapping[str, Any]) -> dict[str, Any]:
    """`topology_labels`: the key written for each role (the first where a list is given) and every
    key read, with its role."""
    listed = {role: [keys] if isinstance(keys, str) else list(keys) for role, keys in section.items()}
    return {
        "topology_labels": {role: keys[0] for role, keys in listed.items()},
        "topology_read": {key: role for role, keys in listed.items() for key in keys},
    }


def _given(section: Mapping[str, Any], *same: str, **renamed: str) -> dict[str, Any]:
    """The fields a map section sets, by field name (`same`: the YAML key is the field's name;
    `renamed`: field=key). A key the section leaves out is not passed, so its default is the
    dataclass's: defaults are written once, on the values in core/vocabulary/platform.py (the schema
    repeats them for editors, and tests/config/test_cloudmap.py holds the two together). YAML lists become
    tuples, the values' immutable form."""
    given = {}
    for name, key in (*((n, n) for n in same), *renamed.items()):
        if key in section:
            value = section[key]
            given[name] = tuple(value) if isinstance(value, list) else value
    return given


def _names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls))


def _expanded(entry: Mapping[str, Any], catalogue: Catalogue, vendor: Any) -> dict[str, tuple[str, ...]]:
    """A model label's values, model → the label values that name it. `catalogue-names` are the names
    the map's own vendor's labeller writes (GFD's nvidia.com/gpu.product): another vendor's model is
    never named by that label, and listing it made an NVIDIA-only map appear to sell an AMD GPU (a
    V520 pod moved to generic was told "it offers MI300X" beside "generic offers NVIDIA GPUs only")."""
    values = entry["values"]
    if values == "catalogue-names":
        return {m.id: m.names for m in catalogue.models.values() if m.names and m.vendor == vendor}
    return {m: tuple(v) if isinstance(v, list) else (v,) for m, v in values.items()}


def _interconnects(
    values: Mapping[str, tuple[str, ...]], given: Mapping[str, str], catalogue: Catalogue
) -> dict[str, str]:
    """Each label value's interconnect: as the map gives it (instance types), else the catalogue's for
    a product name, else that of the models it names when they are all sold one way."""
    found: dict[str, str] = {}
    for value in {v for names in values.values() for v in names}:
        named = {catalogue.models[m].interconnect for m, names in values.items() if value in names}
        word = (
            given.get(value) or catalogue.interconnect_of(value) or (named.pop() if len(named) == 1 else "")
        )
        if word:
            found[value] = word
    return found


def _value_problems(
    data: Mapping[str, Any], node: yaml.Node | None, source: Path | str, catalogue: Catalogue
) -> list[CloudMapError]:
    """Every value of a map that the catalogue contradicts, each at its line. Read on a map that may
    also break the schema (lint says both at once), so a part of the wrong shape is passed over: the
    schema's errors already say what is wrong with it."""
    found: list[CloudMapError] = []

    def known(model_id: Any, path: list[Any]) -> bool:
        if isinstance(model_id, str) and model_id in catalogue.models:
            return True
        problem = f"unknown GPU model {model_id!r} (models are the keys of {CATALOGUE_FILE})"
        found.append(CloudMapError(source, line_of(node, path), problem))
        return False

    def entries(value: Any) -> list[Any]:
        return value if isinstance(value, list) else []

    def keys(value: Any) -> list[Any]:
        return list(value) if isinstance(value, dict) else []

    for index, entry in enumerate(entries(data.get("model_labels"))):
        if not isinstance(entry, dict) or not (
            entry.get("values") == "catalogue-names" or keys(entry.get("values"))
        ):
            continue
        for model_id in keys(entry["values"]):
            known(model_id, ["model_labels", index, "values", model_id])
        named = {
            v
            for names in _expanded(entry, catalogue, data.get("vendor", "nvidia")).values()
            for v in names
            if isinstance(v, (str, int))
        }
        for part in ("gpus", "interconnect"):
            for value in keys(entry.get(part)):
                if value not in named:
                    line = line_of(node, ["model_labels", index, part, value])
                    problem = f"{part} names {value!r}, which no model of this label has"
                    found.append(CloudMapError(source, line, problem))
    for index, model_id in enumerate(entries(data.get("offered_models"))):
        known(model_id, ["offered_models", index])
    resources = data.get("resources")
    mig = resources.get("mig") if isinstance(resources, dict) else None
    profiles = mig.get("profiles") if isinstance(mig, dict) else None
    for model_id, names in profiles.items() if isinstance(profiles, dict) else ():
        where = ["resources", "mig", "profiles", model_id]
        if not known(model_id, where):
            continue
        model = catalogue.models[model_id]
        for index, name in enumerate(entries(names)):
            if isinstance(name, str) and name not in model.profiles:
                has = ", ".join(p.name for p in model.mig_profiles()) or "none"
                problem = f"{model_id} has no MIG profile {name!r} (it has: {has})"
                found.append(CloudMapError(source, line_of(node, [*where, index]), problem))
    dra = data.get("dra")
    for model_id in keys(dra.get("product_names") if isinstance(dra, dict) else None):
        known(model_id, ["dra", "product_names", model_id])
    by_vendor = resources.get("whole_by_vendor") if isinstance(resources, dict) else None
    for vendor in keys(by_vendor):
        line = line_of(node, ["resources", "whole_by_vendor", vendor])
        if vendor == data.get("vendor", "nvidia"):
            problem = f"whole_by_vendor names {vendor!r}, the map's own vendor: its resource is `whole`"
            found.append(CloudMapError(source, line, problem))
        elif dra is not None:
            # A DRA map's claims name one driver's device classes: another vendor's GPUs are another driver.
            problem = "whole_by_vendor is for extended resources; a map with dra asks by claim"
            found.append(CloudMapError(source, line, problem))
    return found


def _dra_form(section: Any) -> DraForm | None:
    if section is None:
        return None
    classes = section["classes"]
    return DraForm(
        api_version=section["api_version"],
        driver=section["driver"],
        whole_class=classes["whole"],
        product_names={m: tuple(v) for m, v in section.get("product_names", {}).items()},
        **_given(classes, "whole_type", mig_class="mig"),
        **_given(
            section.get("attributes", {}),
            product_attribute="product",
            profile_attribute="profile",
            pci_attribute="pci_id",
        ),
        **_given(section.get("capacity", {}), memory_capacity="memory"),
        **_given(section, "types"),
    )


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CloudMapError(path, None, f"cannot read: {exc}") from None


def map_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob("*.yaml") if p.name != CATALOGUE_FILE)


def load_directory(directory: Path) -> LoadedMaps:
    """The catalogue and every platform map in a directory; the first bad file raises CloudMapError."""
    catalogue_path = directory / CATALOGUE_FILE
    if not catalogue_path.is_file():
        raise CloudMapError(catalogue_path, None, "the GPU catalogue is missing")
    catalogue = parse_catalogue_text(_read(catalogue_path), catalogue_path)
    maps: dict[str, CloudMap] = {}
    for path in map_files(directory):
        cloud_map = parse_cloud_map(_read(path), path, catalogue)
        if cloud_map.name in maps:
            node, _ = _compose(_read(path), path)
            raise CloudMapError(path, line_of(node, ["name"]), f"duplicate map name {cloud_map.name!r}")
        maps[cloud_map.name] = cloud_map
    return LoadedMaps(catalogue, maps)


def directory_signature(directory: Path, *extra_files: Path | None) -> tuple:
    """Changes whenever a map file is added, removed or rewritten (a ConfigMap swaps a symlink), or one
    of `extra_files` (the inventory) changes."""
    entries = []
    for path in [*sorted(directory.glob("*.yaml")), *(p for p in extra_files if p is not None)]:
        try:
            st = path.stat()
        except OSError:
            continue
        entries.append((path.name, st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(entries)


def default_directory() -> Path:
    """The shipped cloud maps: the package's shipped_cloudmaps, which in a checkout is a link to the
    repository's cloudmaps/ (resolved, so errors name cloudmaps/…) and in an installed wheel the copy
    inside it. A cluster's maps come from GPUPORT_CLOUDMAP_DIR (the mounted ConfigMap) instead."""
    return (Path(__file__).resolve().parents[1] / "shipped_cloudmaps").resolve()


def _error_path(error: jsonschema.ValidationError) -> list[Any]:
    """The path to point at: for an unexpected key, the key itself rather than its parent."""
    path = list(error.absolute_path)
    schema = error.schema
    if (
        error.validator == "additionalProperties"
        and isinstance(error.instance, dict)
        and isinstance(schema, dict)
    ):
        allowed = set(schema.get("properties", {}))
        extra = sorted(k for k in error.instance if k not in allowed)
        if extra:
            path.append(extra[0])
    return path
