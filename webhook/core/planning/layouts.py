"""Can this mix of MIG profiles sit on one GPU? An exact search over the placements, not a sum of
slices; and every mix that can, for the planner to choose from.

A layout is a multiset of profile names (name → count). The search places the largest instances first,
each at one of its start slots, and backtracks; a GPU has at most 8 slots, so it is small.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from webhook.core.planning.geometry import MigGeometry
from webhook.core.vocabulary.catalogue import MigProfile

Layout = Mapping[str, int]  # profile name → instances on one GPU


@dataclass(frozen=True)
class Verdict:
    fits: bool
    reason: str = ""  # why not, in words
    starts: tuple[tuple[str, int], ...] = ()  # (profile, start slot) of each instance, when it fits


def check_layout(geometry: MigGeometry, layout: Layout) -> Verdict:
    """Whether `layout` can be placed on one GPU of the geometry's model, with where, or why not."""
    wanted = {name: count for name, count in layout.items() if count > 0}
    for name, count in sorted(wanted.items()):
        if name not in geometry.placements:
            offered = ", ".join(sorted(geometry.placements))
            return Verdict(False, f"{geometry.model} has no MIG profile {name} (it has {offered})")
        if count > geometry.most[name]:
            return Verdict(
                False, f"{geometry.model} holds at most {geometry.most[name]} × {name}, not {count}"
            )
    media = sum(count for name, count in wanted.items() if MigProfile.parse(name).has_media)
    if media > geometry.media_instances:
        return Verdict(
            False,
            f"{geometry.model} has media engines for {geometry.media_instances} '+me' instance(s), "
            f"not {media}",
        )
    compute = sum(MigProfile.parse(name).compute * count for name, count in wanted.items())
    if compute > geometry.compute_slices:
        return Verdict(
            False, f"{compute} compute slices asked; {geometry.model} has {geometry.compute_slices}"
        )
    slots = sum(geometry.placements[name].size * count for name, count in wanted.items())
    if slots > geometry.memory_slices:
        return Verdict(False, f"{slots} memory slices asked; {geometry.model} has {geometry.memory_slices}")
    instances = sorted(
        (name for name, count in wanted.items() for _ in range(count)),
        key=lambda n: (-geometry.placements[n].size, len(geometry.placements[n].starts), n),
    )
    found = _place(geometry, instances, 0, 0, -1, [])
    if found is not None:
        return Verdict(True, starts=tuple(found))
    where = "; ".join(f"{name} starts at {geometry.placements[name]}" for name in sorted(wanted))
    return Verdict(False, f"no arrangement of the placements holds them all on {geometry.model} ({where})")


def _place(
    geometry: MigGeometry,
    instances: list[str],
    index: int,
    used: int,
    last: int,
    placed: list[tuple[str, int]],
) -> list[tuple[str, int]] | None:
    """Depth-first over start slots; the instances of one profile take increasing starts, so each set of
    starts is tried once, not in every order."""
    if index == len(instances):
        return list(placed)
    name = instances[index]
    placement = geometry.placements[name]
    same = index > 0 and instances[index - 1] == name
    for start in placement.starts:
        if same and start <= last:
            continue
        mask = ((1 << placement.size) - 1) << start
        if used & mask:
            continue
        placed.append((name, start))
        found = _place(geometry, instances, index + 1, used | mask, start, placed)
        placed.pop()
        if found is not None:
            return found
    return None


def maximal_layouts(geometry: MigGeometry, profiles: Iterable[str]) -> list[dict[str, int]]:
    """Every valid layout of `profiles` on one GPU to which no instance of them can be added: the
    planner's choices (any valid layout is one of these with instances left unused). Found by walking
    the slots left to right, each either left empty or the start of an instance that fits there."""
    names = sorted(set(profiles) & set(geometry.placements))
    seen: set[tuple[tuple[str, int], ...]] = set()
    found: list[dict[str, int]] = []

    def walk(slot: int, used: int, counts: dict[str, int]) -> None:
        if slot == geometry.memory_slices:
            key = tuple(sorted((n, c) for n, c in counts.items() if c))
            if key not in seen and check_layout(geometry, counts).fits:
                seen.add(key)
                found.append({n: c for n, c in key})
            return
        walk(slot + 1, used, counts)
        for name in names:
            placement = geometry.placements[name]
            mask = ((1 << placement.size) - 1) << slot
            if slot not in placement.starts or used & mask or counts.get(name, 0) >= geometry.most[name]:
                continue
            counts[name] = counts.get(name, 0) + 1
            walk(slot + 1, used | mask, counts)
            counts[name] -= 1

    walk(0, 0, {})
    return [layout for layout in found if not _extendable(geometry, layout, names)]


def _extendable(geometry: MigGeometry, layout: Mapping[str, int], names: list[str]) -> bool:
    return any(check_layout(geometry, {**layout, name: layout.get(name, 0) + 1}).fits for name in names)
