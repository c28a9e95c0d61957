"""MIG layouts for the target's GPUs: which mix of slices each GPU should carry so that the slice
demand fits on the fewest GPUs over every model each slice may use, then with the fewest GPUs
repartitioned, then with the fewest on busy nodes; running slice pods stay where they run.

The choosing is search.py's (a greedy fill, then an exact search over the remainder, and a bound);
here the target's GPUs become the search's kinds and its choices become a layout per GPU, in the
shape the rendering and the reports read (`ModelPlan` per model). GPUs alike are one kind, so the
cost grows with the number of distinct (model, layout today, busy) groups, not with the GPUs.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from webhook.core.planning.geometry import MigGeometry
from webhook.core.planning.layouts import Layout
from webhook.core.planning.search import Choice, Key, Kind, Need, Problem, key_of, solve
from webhook.core.vocabulary.errors import CannotSay


@dataclass(frozen=True)
class Gpu:
    """One GPU of the target: where it is, its model, and its layout today (None: not known; an empty
    layout: MIG off)."""

    node: str
    index: int
    model: str
    current: Layout | None = None
    busy: bool = False  # a running pod on its node holds GPUs: changing the node stops it


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


@dataclass(frozen=True)
class Slices:
    """Slices of one profile that may sit on any of some models: per model, the profile's name there
    (an older driver's alias read as the geometry's name), the model to charge what is short first."""

    on: tuple[tuple[str, str], ...]
    count: int


@dataclass(frozen=True)
class LayoutsPlan:
    models: tuple[ModelPlan, ...]
    fewest_gpus: int  # no plan holds the slices it holds on fewer GPUs
    proven: bool  # the search finished: fewest GPUs, then fewest repartitioned, then fewest on busy nodes


def plan_model(
    model: str, demand: Mapping[str, int], gpus: Sequence[Gpu], geometry: MigGeometry
) -> ModelPlan:
    """Layouts for `gpus` (all of `model`) that hold `demand`, or what is short."""
    left = {name: count for name, count in demand.items() if count > 0}
    unknown = sorted(set(left) - set(geometry.placements))
    if unknown:
        raise NoGeometry(f"{model} has no MIG profile {', '.join(unknown)}")
    slices = [Slices(((model, name),), count) for name, count in sorted(left.items())]
    plan = plan_gpus(slices, gpus, {model: geometry}, models=(model,))
    return next(m for m in plan.models if m.model == model)


def plan_gpus(
    slices: Sequence[Slices],
    gpus: Sequence[Gpu],
    geometries: Mapping[str, MigGeometry],
    running: Mapping[str, Mapping[str, int]] | None = None,
    models: Sequence[str] = (),
) -> LayoutsPlan:
    """Every GPU's layout: the slices on the fewest GPUs over every model each may use, then the fewest
    GPUs repartitioned, then the fewest on busy nodes. `running`: node → profile → instances its
    running slice pods hold; such a node keeps its layout (the pods stay where they run) and what they
    leave spare serves the rest first. `models`: models to plan even with nothing asked of them."""
    running = {node: asked for node, asked in (running or {}).items() if any(asked.values())}
    node_model = {gpu.node: gpu.model for gpu in gpus}
    released: list[str] = []
    per_node: dict[str, int] = {}
    for gpu in gpus:
        per_node[gpu.node] = per_node.get(gpu.node, 0) + 1
    while True:
        # Nodes with running slice pods keep them; one is drained (fewest pods first) only while the
        # slices do not fit otherwise, its pods then asking anew on its model.
        held = _held(gpus, {node: asked for node, asked in running.items() if node not in released})
        kinds, members = _kinds(gpus, held, frozenset(released))
        moved: dict[tuple[str, str], int] = {}
        for node in released:
            for name, count in running[node].items():
                moved[(node_model[node], name)] = moved.get((node_model[node], name), 0) + count
        needs = [*(Need(s.on, s.count) for s in slices), *(Need((on,), n) for on, n in sorted(moved.items()))]
        solution = solve(Problem(needs, kinds, geometries))
        staying = sorted(
            (n for n in running if n not in released), key=lambda n: (sum(running[n].values()), n)
        )
        if not any(solution.short) or not staying:
            break
        # This round drains nodes holding at least the GPUs what is short takes (its bound), and at
        # least as many nodes as before, so a fleet of busy nodes takes a few rounds, not one a node.
        all_models = frozenset(m for need in needs for m, _ in need.on)
        wanted = Problem(needs, [], geometries).bound(list(solution.short), all_models)[1]
        rounds_least, taken = max(len(released), 1), 0
        for count, node in enumerate(staying):
            if count >= rounds_least and taken >= wanted:
                break
            released.append(node)
            taken += per_node[node]
    planned: dict[int, GpuLayout] = {}
    for index, kind in enumerate(kinds):
        spots = iter(members[index])
        mine = [c for c in solution.choices if c.kind == index]
        for choice in sorted(mine, key=lambda c: c.layout == kind.current):  # changes packed on few nodes
            for _ in range(choice.gpus):
                position = next(spots)
                planned[position] = _planned(gpus[position], choice, needs, held.get(position))
    charged: dict[str, dict[str, int]] = {}
    short: dict[str, dict[str, int]] = {}
    for node, asked in running.items():
        if node in released:
            continue  # asked anew: charged where the search puts it
        for name, count in asked.items():
            _add(charged.setdefault(node_model[node], {}), name, count)
    for choice in solution.choices:
        model = kinds[choice.kind].model
        for need, count in zip(needs, choice.serves, strict=True):
            if count:
                _add(charged.setdefault(model, {}), dict(need.on)[model], count * choice.gpus)
    for position, gpu in enumerate(gpus):
        if position not in planned:
            pinned, _ = held.get(position, ({}, None))
            planned[position] = GpuLayout(gpu, dict(gpu.current or {}), dict(pinned))
    for need, count in zip(needs, solution.short, strict=True):
        if count:
            model, name = need.on[0]
            _add(charged.setdefault(model, {}), name, count)
            _add(short.setdefault(model, {}), name, count)
    plans = []
    for model in sorted({*charged, *models, *(g.model for g in gpus)}):
        geometry = geometries[model]
        demand = charged.get(model, {})
        layouts = tuple(planned[p] for p, g in enumerate(gpus) if g.model == model)
        missing = short.get(model, {})
        more = gpus_for(missing, model, geometry)
        if more:
            # As many as the whole of the model's slices take on new GPUs, less those it has: planned
            # again with that many more, nothing is short (the fill is not exact at any size).
            more = max(more, gpus_for(demand, model, geometry) - len(layouts))
        plans.append(ModelPlan(model, demand, layouts, missing, more, fewest_possible(demand, geometry)))
    return LayoutsPlan(tuple(plans), solution.bound, solution.proven)


def _held(
    gpus: Sequence[Gpu], running: Mapping[str, Mapping[str, int]]
) -> dict[int, tuple[dict[str, int], Key | None]]:
    """Per GPU of a node with running slice pods: what of its layout they hold, and what is spare
    (None: its layout is not known, so nothing is counted spare)."""
    held: dict[int, tuple[dict[str, int], Key | None]] = {}
    on_node: dict[str, list[int]] = {}
    for position, gpu in enumerate(gpus):
        on_node.setdefault(gpu.node, []).append(position)
    for node, asked in running.items():
        left = {name: count for name, count in asked.items() if count > 0}
        if not left:
            continue
        for position in on_node.get(node, ()):
            gpu = gpus[position]
            if gpu.current is None:
                held[position] = ({}, None)
                continue
            pinned = {}
            for name, count in gpu.current.items():
                take = min(count, left.get(name, 0))
                if take:
                    pinned[name] = take
                    left[name] -= take
            spare = {name: count - pinned.get(name, 0) for name, count in gpu.current.items()}
            held[position] = (pinned, key_of(spare))
    return held


def _kinds(
    gpus: Sequence[Gpu], held: Mapping[int, tuple[dict[str, int], Key | None]], drained: frozenset[str]
) -> tuple[list[Kind], list[list[int]]]:
    """GPUs alike for planning, those that cost least to use first, each with its GPUs in node order."""
    groups: dict[tuple[str, Key | None, bool, bool, bool], list[int]] = {}
    for position, gpu in enumerate(gpus):
        if position in held:
            pinned, spare = held[position]
            key = (gpu.model, spare, gpu.busy, True, bool(pinned))
        else:
            current = key_of(gpu.current) if gpu.current is not None else None
            key = (gpu.model, current, gpu.busy or gpu.node in drained, False, False)
        groups.setdefault(key, []).append(position)
    present: dict[str, int] = {}
    for gpu in gpus:
        present[gpu.model] = present.get(gpu.model, 0) + 1
    # Of plans alike, the first found is kept: held, idle and known layouts first, then the model with
    # the most GPUs in the target (what is left of it stays one pool).
    order = sorted(
        groups,
        key=lambda k: (not k[4], not k[3], k[2], k[1] is None or not k[1], -present[k[0]], k[0], repr(k[1])),
    )
    kinds = [Kind(k[0], k[1], k[2], len(groups[k]), held=k[3], prepaid=k[4]) for k in order]
    members = [sorted(groups[k], key=lambda p: (gpus[p].node, gpus[p].index)) for k in order]
    return kinds, members


def _planned(
    gpu: Gpu, choice: Choice, needs: Sequence[Need], held: tuple[dict[str, int], Key | None] | None
) -> GpuLayout:
    serves: dict[str, int] = dict(held[0]) if held else {}
    for need, count in zip(needs, choice.serves, strict=True):
        if count:
            name = dict(need.on)[gpu.model]
            _add(serves, name, count)
    layout = dict(gpu.current or {}) if held else dict(choice.layout)
    return GpuLayout(gpu, layout, serves)


def _add(into: dict[str, int], name: str, count: int) -> None:
    into[name] = into.get(name, 0) + count


def fewest_possible(demand: Mapping[str, int], geometry: MigGeometry) -> int:
    """A floor on the GPUs any valid plan needs: the memory slots, compute slices and media engines
    asked, and each profile's count, each over what one GPU holds, besides one GPU for each slice that
    takes a whole GPU (search.py's bound). The planner's count is judged by it."""
    asked = {name: count for name, count in demand.items() if count > 0}
    needs = [Need(((geometry.model, name),), count) for name, count in sorted(asked.items())]
    problem = Problem(needs, [], {geometry.model: geometry})
    return problem.bound([need.count for need in needs], frozenset({geometry.model}))[1]


def gpus_for(slices: Mapping[str, int], model: str, geometry: MigGeometry) -> int:
    """New GPUs of `model` it would take to hold `slices`, planned as the target's GPUs are."""
    if not any(slices.values()):
        return 0
    needs = [Need(((model, name),), count) for name, count in sorted(slices.items()) if count]
    kinds = [Kind(model, None, False, sum(slices.values()))]
    return solve(Problem(needs, kinds, {model: geometry})).cost[1]
