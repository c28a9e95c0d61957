"""MIG layouts for the target's GPUs: which mix of slices each GPU should carry so that the slice
demand fits on the fewest GPUs, then with the fewest GPUs repartitioned.

Per model, the choices are the model's maximal valid layouts over the profiles asked for (a few tens,
found once with the exact checker). Each GPU takes the choice that serves the most of what is still
asked (memory slots served first, as first-fit-decreasing takes the largest first); a GPU keeps its
current layout when that serves as much as the best choice. A choice repeats over the next GPUs while
the demand left takes it whole, so the cost grows with the number of distinct choices made, not with
the GPUs: 8,000 GPUs cost about as much as 80.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from webhook.core.planning.geometry import MigGeometry
from webhook.core.planning.layouts import Layout, maximal_layouts
from webhook.core.vocabulary.catalogue import MigProfile
from webhook.core.vocabulary.errors import CannotSay


@dataclass(frozen=True)
class Gpu:
    """One GPU of the target: where it is, its model, and its layout today (None: not known; an empty
    layout: MIG off)."""

    node: str
    index: int
    model: str
    current: Layout | None = None


@dataclass(frozen=True)
class GpuLayout:
    gpu: Gpu
    layout: Mapping[str, int]  # empty: MIG off (a whole GPU)
    serves: Mapping[str, int]  # the instances of `layout` the demand uses

    @property
    def kept(self) -> bool:
        return self.gpu.current is not None and dict(self.gpu.current) == dict(self.layout)


@dataclass(frozen=True)
class ModelPlan:
    model: str
    demand: Mapping[str, int]  # profile → instances asked
    gpus: tuple[GpuLayout, ...]
    short: Mapping[str, int] = field(default_factory=dict)  # profile → instances no GPU holds
    more_gpus: int = 0  # GPUs of the model it would take to hold what is short
    fewest_possible: int = 0  # no plan holds the demand on fewer GPUs (memory, compute, counts)

    @property
    def capacity(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for planned in self.gpus:
            for name, count in planned.layout.items():
                total[name] = total.get(name, 0) + count
        return total

    @property
    def used_gpus(self) -> int:
        return sum(1 for planned in self.gpus if any(planned.serves.values()))

    @property
    def repartitioned(self) -> int:
        """GPUs whose layout changes: those of every node where a GPU must serve slices with a layout
        other than today's (mig-parted rewrites the whole node); the other nodes are left alone."""
        changing = {p.gpu.node for p in self.gpus if p.serves and not p.kept}
        return sum(1 for planned in self.gpus if planned.gpu.node in changing and not planned.kept)


class NoGeometry(CannotSay):
    """Slices asked of a model whose MIG placements gpuport does not know."""


def plan_model(
    model: str, demand: Mapping[str, int], gpus: Sequence[Gpu], geometry: MigGeometry
) -> ModelPlan:
    """Layouts for `gpus` (all of `model`) that hold `demand`, or what is short."""
    left = {name: count for name, count in demand.items() if count > 0}
    unknown = sorted(set(left) - set(geometry.placements))
    if unknown:
        raise NoGeometry(f"{model} has no MIG profile {', '.join(unknown)}")
    choices = maximal_layouts(geometry, left) if left else []
    weight = {name: (geometry.placements[name].size, MigProfile.parse(name).compute) for name in left}
    planned: dict[int, GpuLayout] = {}
    # First the GPUs whose layout today already serves as well as any: not touching them is free.
    by_current: dict[tuple[tuple[str, int], ...], list[int]] = {}
    for position, gpu in enumerate(gpus):
        if gpu.current:
            by_current.setdefault(_key(gpu.current), []).append(position)
    for key, positions in sorted(by_current.items()):
        current = dict(key)
        while positions and any(left.values()):
            best = _best(choices, left, weight)
            if best is None or _gain(current, left, weight) < _gain(best, left, weight):
                break
            for position in positions[: _repeats(current, left, len(positions))]:
                planned[position] = _take(gpus[position], current, left)
            positions = [p for p in positions if p not in planned]
    free = [position for position in range(len(gpus)) if position not in planned]
    done = 0
    while done < len(free) and any(left.values()):
        best = _best(choices, left, weight)
        if best is None or _gain(best, left, weight) == (0, 0):
            break
        today = gpus[free[done]].current
        if today is not None and _gain(today, left, weight) == _gain(best, left, weight):
            best = dict(today)
        repeats = _repeats(best, left, len(free) - done)
        for position in free[done : done + repeats]:
            planned[position] = _take(gpus[position], best, left)
        done += repeats
    for position in free[done:]:
        # Not needed: left as it is when known, else with MIG off (free for whole-GPU pods).
        planned[position] = GpuLayout(gpus[position], dict(gpus[position].current or {}), {})
    short = {name: count for name, count in left.items() if count > 0}
    more = _gpus_for(short, choices, weight)
    bound = fewest_possible(demand, geometry)
    return ModelPlan(model, dict(demand), tuple(planned[p] for p in range(len(gpus))), short, more, bound)


def fewest_possible(demand: Mapping[str, int], geometry: MigGeometry) -> int:
    """A floor on the GPUs any valid plan needs: the memory slots asked, the compute slices asked,
    and each profile's count, each over what one GPU holds. The planner's count is judged by it."""
    asked = {name: count for name, count in demand.items() if count > 0}
    slots = sum(geometry.placements[name].size * count for name, count in asked.items())
    compute = sum(MigProfile.parse(name).compute * count for name, count in asked.items())
    floors = [
        -(-slots // geometry.memory_slices),
        -(-compute // geometry.compute_slices),
        *(-(-count // geometry.most[name]) for name, count in asked.items()),
    ]
    return max(floors, default=0)


def _key(layout: Layout) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((name, count) for name, count in layout.items() if count > 0))


def _gain(layout: Layout, left: Mapping[str, int], weight: Mapping[str, tuple[int, int]]) -> tuple[int, int]:
    """What a GPU with `layout` serves of the demand left: (memory slots, compute slices)."""
    slots = compute = 0
    for name, count in layout.items():
        used = min(count, left.get(name, 0))
        if used:
            slots += used * weight[name][0]
            compute += used * weight[name][1]
    return slots, compute


def _best(
    choices: list[dict[str, int]], left: Mapping[str, int], weight: Mapping[str, tuple[int, int]]
) -> dict[str, int] | None:
    """The choice serving the most of `left`; of equals, the one with the fewest instances left idle."""
    if not choices:
        return None
    return max(
        choices,
        key=lambda c: (_gain(c, left, weight), -sum(c.values()), _key(c)),
    )


def _repeats(layout: Layout, left: Mapping[str, int], available: int) -> int:
    """How many GPUs in a row the layout can take while the demand left uses it whole (at least one)."""
    whole = min((left.get(name, 0) // count for name, count in layout.items() if count > 0), default=0)
    return max(1, min(whole, available))


def _take(gpu: Gpu, layout: Layout, left: dict[str, int]) -> GpuLayout:
    serves = {}
    for name, count in layout.items():
        used = min(count, left.get(name, 0))
        if used:
            serves[name] = used
            left[name] -= used
    return GpuLayout(gpu, dict(layout), serves)


def _gpus_for(
    short: dict[str, int], choices: list[dict[str, int]], weight: Mapping[str, tuple[int, int]]
) -> int:
    """GPUs of the model it would take to hold `short`, planned the same way on new GPUs."""
    left = dict(short)
    count = 0
    while any(left.values()):
        best = _best(choices, left, weight)
        if best is None or _gain(best, left, weight) == (0, 0):
            break
        repeats = _repeats(best, left, 1 << 30)
        for name, each in best.items():
            left[name] = max(left.get(name, 0) - each * repeats, 0)
        count += repeats
    return count
