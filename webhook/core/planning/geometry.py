"""MIG geometry as values: where each profile of a model may sit on one GPU, read from plain data.

Every problem names the path of keys it was found at, so the config layer can say file:line.
"""

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.core.vocabulary.catalogue import Catalogue, GpuModel, MigProfile, ProfileError

# nvidia-smi mig -lgipp's notation: "{0,2,4}:2" (start slots, then the slots each instance holds).
_PLACEMENT = re.compile(r"^\{(?P<starts>[0-9]+(?:,[0-9]+)*)\}:(?P<size>[1-9][0-9]*)$")


@dataclass(frozen=True)
class Placement:
    """Where one profile may sit: the slots it may start at, and how many slots it then holds."""

    starts: tuple[int, ...]
    size: int

    def __str__(self) -> str:
        return "{" + ",".join(map(str, self.starts)) + "}:" + str(self.size)


@dataclass(frozen=True)
class MigGeometry:
    """One model's MIG rules: its slots, each profile's placement and the most instances of each."""

    model: str
    memory_slices: int
    compute_slices: int
    placements: Mapping[str, Placement]  # profile name → where it may sit
    most: Mapping[str, int]  # profile name → most instances on one GPU (the catalogue's count)
    media_instances: int = 1  # "+me" instances one GPU holds, whatever their size
    seen_on: str = "hardware"  # or the model whose placements were copied
    source: str = ""
    balanced: Mapping[str, int] | None = None  # each GPU's layout under the GPU Operator's all-balanced
    aliases: Mapping[str, str] = field(default_factory=dict)  # an older driver's profile name → ours

    def profile(self, name: str) -> str:
        """The profile's name here: an older driver's alias read as the name the placements use."""
        return self.aliases.get(name, name)


@dataclass(frozen=True)
class GeometryProblem:
    path: tuple[str, ...]  # keys from the document's root to what is wrong
    problem: str


def parse_placement(text: Any) -> Placement | None:
    match = _PLACEMENT.match(text) if isinstance(text, str) else None
    if match is None:
        return None
    return Placement(tuple(int(s) for s in match["starts"].split(",")), int(match["size"]))


def parse_geometry(
    data: Mapping[str, Any], catalogue: Catalogue
) -> tuple[dict[str, MigGeometry], list[GeometryProblem]]:
    """The geometry of every catalogue model the data describes, and every problem found in it. A
    model the catalogue lacks is passed over (a trimmed catalogue plans fewer models); a profile or
    a placement the model lacks is a problem, as is a model profile with no placement."""
    geometries: dict[str, MigGeometry] = {}
    problems: list[GeometryProblem] = []
    models = data.get("models")
    if not isinstance(models, Mapping):
        return {}, [GeometryProblem((), "the MIG geometry must be a mapping with a 'models' key")]
    for model_id, entry in models.items():
        model = catalogue.get(str(model_id))
        if model is None:
            continue
        where = ("models", str(model_id))
        found = _model_problems(model, entry, where)
        if found:
            problems += found
            continue
        geometries[model.id] = MigGeometry(
            model=model.id,
            memory_slices=entry["memory_slices"],
            compute_slices=model.compute_slices,
            placements={
                name: p for name, text in entry["placements"].items() if (p := parse_placement(text))
            },
            most=dict(model.profiles),
            media_instances=entry.get("media_instances", 1),
            seen_on=str(entry.get("seen_on", "hardware")),
            source=str(entry.get("source", "")),
            balanced=dict(entry["balanced"]) if "balanced" in entry else None,
            aliases={str(old): str(new) for old, new in (entry.get("aliases") or {}).items()},
        )
    return geometries, problems


def _model_problems(model: GpuModel, entry: Any, where: tuple[str, ...]) -> list[GeometryProblem]:
    if not isinstance(entry, Mapping):
        return [GeometryProblem(where, f"{model.id}: expected a mapping with memory_slices and placements")]
    slots = entry.get("memory_slices")
    if not isinstance(slots, int) or isinstance(slots, bool) or slots < 1:
        return [GeometryProblem((*where, "memory_slices"), "memory_slices must be a positive integer")]
    media = entry.get("media_instances", 1)
    if not isinstance(media, int) or isinstance(media, bool) or media < 0:
        return [GeometryProblem((*where, "media_instances"), "media_instances must be a whole number")]
    if not entry.get("source"):
        return [GeometryProblem(where, f"{model.id}: say where the placements come from (source)")]
    placements = entry.get("placements")
    if not isinstance(placements, Mapping):
        return [GeometryProblem(where, f"{model.id}: placements must map each profile to '{{starts}}:size'")]
    problems = []
    for name, text in placements.items():
        at = (*where, "placements", str(name))
        problem = _placement_problem(model, str(name), text, slots)
        if problem:
            problems.append(GeometryProblem(at, problem))
    problems += _named_problems(model, entry, where)
    missing = sorted(set(model.profiles) - {str(n) for n in placements})
    if missing:
        problems.append(
            GeometryProblem((*where, "placements"), f"{model.id}: no placement for {', '.join(missing)}")
        )
    return problems


def _placement_problem(model: GpuModel, name: str, text: Any, slots: int) -> str:
    if name not in model.profiles:
        offered = ", ".join(sorted(model.profiles)) or "none"
        return f"{model.id} has no MIG profile {name!r} (the catalogue lists {offered})"
    placement = parse_placement(text)
    if placement is None:
        return f"{name}: {text!r} is not a placement (nvidia-smi's notation: '{{0,2,4}}:2')"
    try:
        profile = MigProfile.parse(name)
    except ProfileError as exc:
        return str(exc)
    if placement.size < profile.compute:
        return f"{name}: {placement.size} slots cannot hold {profile.compute} compute slices"
    beyond = [s for s in placement.starts if s + placement.size > slots]
    if beyond:
        return (
            f"{name}: starting at slot {beyond[0]}, {placement.size} slots run past the GPU's {slots} "
            f"memory slices"
        )
    return ""


def _named_problems(
    model: GpuModel, entry: Mapping[str, Any], where: tuple[str, ...]
) -> list[GeometryProblem]:
    """`balanced` names the model's profiles with counts within the catalogue's; `aliases` map names
    the model lacks onto names it has (the layout itself is checked by the loader with the placements)."""
    problems = []
    balanced = entry.get("balanced", {})
    if not isinstance(balanced, Mapping) or not all(
        name in model.profiles
        and isinstance(n, int)
        and not isinstance(n, bool)
        and 0 < n <= model.profiles[name]
        for name, n in balanced.items()
    ):
        problems.append(
            GeometryProblem(
                (*where, "balanced"), f"{model.id}: balanced must map its profiles to counts it holds"
            )
        )
    aliases = entry.get("aliases", {})
    if not isinstance(aliases, Mapping) or not all(
        str(old) not in model.profiles and new in model.profiles for old, new in aliases.items()
    ):
        problems.append(
            GeometryProblem(
                (*where, "aliases"), f"{model.id}: aliases must map names it lacks onto profiles it has"
            )
        )
    return problems
