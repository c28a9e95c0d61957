"""Fewest GPUs for MIG slices over every model a slice may use: a branch-and-bound over each GPU's
maximal layouts, exact where the instance is small, after a greedy fill where it is not, and a lower
bound that every plan respects, so a plan cut short says how far from the best it can be.

Why one module: the greedy fill, the search and the bound share one reading of the problem:

- a `Need` is slices of one profile that may sit on any of some models (the profile's name on each);
- a `Kind` is GPUs alike for planning (model, layout today, busy node, held), with how many there are;
- each GPU of a kind takes an option: its layout today (kept) or one of the model's maximal layouts
  over the profiles asked of it (repartitioned). A held kind (a node whose running slice pods stay
  where they run) has only its layout today, less what those pods hold.

A plan's cost, compared in order: slices no GPU holds, GPUs that serve slices, GPUs repartitioned,
GPUs repartitioned on busy nodes (a running pod there is stopped). The instances of one GPU's layout
go to the needs that may take them, those with the fewest other models first: exact when the needs
that share a profile on a model accept nested sets of models (a model family and its subsets), the
shape selectors give; otherwise the best plan under that rule.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import lcm

from webhook.core.planning.geometry import MigGeometry
from webhook.core.planning.layouts import maximal_layouts
from webhook.core.vocabulary.catalogue import MigProfile

Key = tuple[tuple[str, int], ...]  # a layout as sorted (profile, count) pairs
Cost = tuple[int, int, int, int]  # short instances, GPUs used, repartitioned, repartitioned on busy nodes

SEARCH_NODES = 8_000  # branch-and-bound steps before the search is cut short (about 0.3 s here)
TAIL_GPUS = 10  # the greedy fill stops where the bound on what is left is this many GPUs; the search takes it


@dataclass(frozen=True)
class Need:
    on: tuple[tuple[str, str], ...]  # (model, the profile's name on it), the model to charge first
    count: int


@dataclass(frozen=True)
class Kind:
    model: str
    current: Key | None  # None: not known
    busy: bool
    count: int
    held: bool = False  # its layout cannot change (running slice pods stay); current is what is spare
    prepaid: bool = False  # held and already serving running pods: serving more costs no GPU


@dataclass(frozen=True)
class Choice:
    kind: int
    layout: Key
    serves: tuple[int, ...]  # per need, instances one GPU serves
    gpus: int  # GPUs of the kind taking it


@dataclass(frozen=True)
class Solution:
    choices: tuple[Choice, ...]
    short: tuple[int, ...]  # per need, instances no GPU holds
    cost: Cost
    bound: int  # no plan serves the slices it serves on fewer GPUs
    proven: bool  # the search finished: no plan costs less


_MEASURES = (0, 1, 2, 3)


class Problem:
    """The needs and kinds, each option of each kind, and the weights of the bound."""

    def __init__(self, needs: Sequence[Need], kinds: Sequence[Kind], geometries: Mapping[str, MigGeometry]):
        self.needs = tuple(needs)
        self.kinds = tuple(kinds)
        self.geometries = geometries
        # Who takes a model's profile first: the needs with the fewest other models.
        order = sorted(range(len(needs)), key=lambda j: (len(needs[j].on), j))
        self.takers: dict[tuple[str, str], list[int]] = {}
        for j in order:
            for model, name in needs[j].on:
                self.takers.setdefault((model, name), []).append(j)
        asked: dict[str, set[str]] = {}
        for need in needs:
            for model, name in need.on:
                asked.setdefault(model, set()).add(name)
        self.options: list[list[tuple[Key, bool]]] = []
        layouts: dict[str, list[Key]] = {
            model: [_key(layout) for layout in maximal_layouts(geometries[model], names)]
            for model, names in asked.items()
            if any(kind.model == model and not kind.held for kind in kinds)
        }
        for kind in kinds:
            mine: list[tuple[Key, bool]] = [(kind.current, False)] if kind.current else []
            if not kind.held:
                mine += [(layout, True) for layout in layouts.get(kind.model, []) if layout != kind.current]
            self.options.append(mine)
        self._weights()
        self._cache: dict[frozenset[str], list[tuple[int, int, int, int] | None]] = {}
        self._scores = self._score_weights()

    def _weights(self) -> None:
        """Per need, the least share of any GPU it may sit on, in memory slots, compute slices and media
        engines, over common denominators: a GPU holds at most one whole of each."""
        models = {model for need in self.needs for model, _ in need.on}
        self.slots = lcm(*(self.geometries[m].memory_slices for m in models)) if models else 1
        self.compute = lcm(*(self.geometries[m].compute_slices for m in models)) if models else 1
        self.mem_w: list[dict[str, int]] = []
        self.comp_w: list[dict[str, int]] = []
        self.media_w: list[dict[str, int]] = []
        self.most: list[dict[str, int]] = []
        for need in self.needs:
            mem, comp, media, most = {}, {}, {}, {}
            for model, name in need.on:
                geometry = self.geometries[model]
                profile = MigProfile.parse(name)
                mem[model] = geometry.placements[name].size * self.slots // geometry.memory_slices
                comp[model] = profile.compute * self.compute // geometry.compute_slices
                media[model] = 1 if profile.has_media else 0  # one '+me' per GPU (media_instances ≥ 1)
                if profile.has_media and geometry.media_instances > 1:
                    media[model] = 0
                most[model] = geometry.most[name]
            self.mem_w.append(mem)
            self.comp_w.append(comp)
            self.media_w.append(media)
            self.most.append(most)

    def bound(self, left: Sequence[int], models: frozenset[str], gpus: int = -1) -> tuple[int, int]:
        """(fewest instances no plan on `gpus` GPUs of `models` can hold (any number when -1), fewest
        GPUs of `models` that hold the rest, 0 when those GPUs cannot). Per measure (memory slots,
        compute slices, media engines, each profile's count) a GPU holds at most one whole; a slice
        taking every memory slot of each model it may use takes a GPU of its own."""
        weights = self._cache.get(models)
        if weights is None:
            weights = self._cache[models] = [self._least(j, models) for j in range(len(self.needs))]
        impossible = mem = comp = media = whole = each = 0
        whole_comp = heaviest_mem = heaviest_comp = over = 0
        for count, weight in zip(left, weights, strict=True):
            if not count:
                continue
            if weight is None:
                impossible += count
                continue
            w_mem, w_comp, w_media, most = weight
            heaviest_mem, heaviest_comp = max(heaviest_mem, w_mem), max(heaviest_comp, w_comp)
            if gpus >= 0:
                over = max(over, count - gpus * most)
            if w_mem == self.slots:
                whole += count
                whole_comp += count * w_comp
                continue
            mem += count * w_mem
            comp += count * w_comp
            media += count * w_media
            each = max(each, -(-count // most))
        fewest = whole + max(-(-mem // self.slots), -(-comp // self.compute), media, each)
        if gpus < 0 or fewest <= gpus:
            return impossible, fewest
        beyond = [
            over,
            media - gpus,
            -(-(whole * self.slots + mem - gpus * self.slots) // heaviest_mem),
            -(-(whole_comp + comp - gpus * self.compute) // max(heaviest_comp, 1)),
        ]
        # Some of the rest is short too; how few GPUs hold what is not, this does not say: none.
        return impossible + max(0, *beyond), 0

    def _least(self, j: int, models: frozenset[str]) -> tuple[int, int, int, int] | None:
        usable = [m for m, _ in self.needs[j].on if m in models]
        if not usable:
            return None
        return (
            min(self.mem_w[j][m] for m in usable),
            min(self.comp_w[j][m] for m in usable),
            min(self.media_w[j][m] for m in usable),
            max(self.most[j][m] for m in usable),
        )

    def serve(self, kind: int, layout: Key, left: Sequence[int]) -> tuple[int, ...]:
        served = [0] * len(left)
        model = self.kinds[kind].model
        for name, count in layout:
            for j in self.takers.get((model, name), ()):
                take = min(count, left[j] - served[j])
                served[j] += take
                count -= take
                if not count:
                    break
        return tuple(served)

    def score(self, served: Sequence[int], by: int = 0) -> tuple[int, int]:
        """What a GPU serving `served` takes off the bound, by one measure (see _greedy), and how many
        instances it serves."""
        weights = self._scores[by]
        return sum(count * w for count, w in zip(served, weights, strict=True) if count), sum(served)

    def weight(self, j: int) -> int:
        """Need j's largest least share of a GPU, memory or compute, over a common denominator."""
        return self._scores[0][j]

    def _score_weights(self) -> list[list[int]]:
        """Per measure of _greedy, each need's weight: its least share of any GPU it may sit on."""
        by_measure: list[list[int]] = [[], [], [], []]
        for j in range(len(self.needs)):
            mem, comp = min(self.mem_w[j].values()), min(self.comp_w[j].values())
            media = min(self.media_w[j].values())
            by_measure[0].append(
                max(mem * self.compute, comp * self.slots, media * self.slots * self.compute)
            )
            by_measure[1].append(mem * self.compute * self.slots + comp)
            by_measure[2].append(1)
            by_measure[3].append(comp * self.slots * self.compute + mem)
        return by_measure


def solve(problem: Problem, nodes: int = SEARCH_NODES) -> Solution:
    """The greedy fill down to a small remainder (by each measure of _greedy, the one whose greedy
    completion costs least), then the search over the remainder, seeded with the greedy plans of it,
    which it only replaces by a cheaper one."""
    counts = [need.count for need in problem.needs]
    models = frozenset(kind.model for kind in problem.kinds if kind.count)
    _, bound = problem.bound(counts, models)
    fills = []
    for by in _MEASURES:
        remaining = [kind.count for kind in problem.kinds]
        prefix = _greedy(problem, counts, remaining, TAIL_GPUS, by)
        left = list(counts)
        for choice in prefix:
            _apply(choice, left, remaining)
        seeds = [_greedy(problem, list(left), list(remaining), -1, other) for other in _MEASURES]
        seed = min(seeds, key=lambda c: _cost(problem, c, _short(left, c)))
        fills.append(
            (
                _cost(problem, (*prefix, *seed), _short(counts, (*prefix, *seed))),
                prefix,
                left,
                remaining,
                seed,
            )
        )
        if not prefix:
            break  # nothing filled: the search sees it all
    _, prefix, left, remaining, seed = min(fills, key=lambda fill: fill[0])
    tail, proven = _search(problem, left, remaining, seed, nodes)
    choices = (*prefix, *tail)
    short = _short(counts, choices)
    return Solution(choices, tuple(short), _cost(problem, choices, short), bound, proven and not prefix)


def _short(left: Sequence[int], choices: Sequence[Choice]) -> list[int]:
    short = list(left)
    for choice in choices:
        for j, served in enumerate(choice.serves):
            short[j] -= served * choice.gpus
    return short


def _greedy(
    problem: Problem, left: list[int], remaining: list[int], stop_at: int, by: int = 0
) -> list[Choice]:
    """Each step the option serving the most of the bound (`by` 0: the scarcest of media, memory and
    compute; 1: memory then compute, as first-fit-decreasing; 2: instances; 3: compute then memory,
    where compute binds), ties going to kept, idle
    node, fewer idle instances; repeated over the GPUs of its kind while the demand left takes it whole."""
    choices: list[Choice] = []
    left = list(left)
    remaining = list(remaining)
    while any(left):
        if stop_at >= 0:
            models = frozenset(k.model for k, n in zip(problem.kinds, remaining, strict=True) if n)
            if min(problem.bound(left, models)[1], sum(remaining)) <= stop_at:
                break  # what is left takes at most `stop_at` GPUs more: the search's to plan
        best: tuple[tuple[int, ...], Choice] | None = None
        for index, kind in enumerate(problem.kinds):
            if not remaining[index]:
                continue
            for layout, changed in problem.options[index]:
                served = problem.serve(index, layout, left)
                score, instances = problem.score(served, by)
                if not score:
                    continue
                idle = sum(c for _, c in layout) - instances
                # Of options alike, the one placing the largest slices (first-fit-decreasing's rule: the
                # small ones fill the gaps later, the large ones find none).
                large = sum(count * problem.weight(j) ** 2 for j, count in enumerate(served) if count)
                rank = (score, kind.prepaid, not changed, not kind.busy, large, -index, -idle)
                if best is None or rank > best[0]:
                    best = (rank, Choice(index, layout, served, 1))
        if best is None:
            break
        choice = best[1]
        whole = min(left[j] // s for j, s in enumerate(choice.serves) if s)
        choice = Choice(choice.kind, choice.layout, choice.serves, max(1, min(whole, remaining[choice.kind])))
        _apply(choice, left, remaining)
        choices.append(choice)
    return choices


def _search(
    problem: Problem, left: list[int], remaining: list[int], seed: list[Choice], nodes: int
) -> tuple[list[Choice], bool]:
    """Branch and bound: kind by kind, each GPU of a kind an option at or after the previous GPU's (a
    multiset of options, each tried once), or the kind left; pruned where the bound cannot beat the
    best plan found. Returns the best plan and whether the search finished."""
    kinds = problem.kinds
    after = [
        frozenset(k.model for k, n in zip(kinds[i:], remaining[i:], strict=True) if n)
        for i in range(len(kinds))
    ]
    after.append(frozenset())
    later = [sum(remaining[i:]) for i in range(len(kinds) + 1)]  # GPUs of the kinds after each
    seed_short = list(left)
    for choice in seed:
        _apply(choice, seed_short, [0] * len(kinds), count_kinds=False)
    best_cost = _cost(problem, seed, seed_short)
    best: list[Choice] = list(seed)
    path: list[Choice] = []
    steps = 0
    seen: dict[tuple[int, int, int, tuple[int, ...]], tuple[int, int, int]] = {}

    def dfs(ki: int, oi: int, left: list[int], rem: int, cost: tuple[int, int, int]) -> None:
        nonlocal best_cost, best, steps
        steps += 1
        if steps > nodes:
            return  # cut short: every open branch returns at once
        if ki == len(kinds) or not any(left):
            total = (sum(left), *cost)
            if total < best_cost:
                best_cost, best = total, _merged(path)
            return
        state = (ki, oi, rem, tuple(left))
        if seen.get(state, (1 << 60, 0, 0)) <= cost:
            return  # reached before at no greater cost
        seen[state] = cost
        models = after[ki + 1] | ({kinds[ki].model} if rem else frozenset())
        impossible, more = problem.bound(left, models, rem + later[ki + 1])
        if (impossible, cost[0] + more, cost[1], cost[2]) >= best_cost:
            return
        kind = kinds[ki]
        if rem:
            for o in range(oi, len(problem.options[ki])):
                layout, changed = problem.options[ki][o]
                served = problem.serve(ki, layout, left)
                if not any(served):
                    continue
                path.append(Choice(ki, layout, served, 1))
                step = (0 if kind.prepaid else 1, int(changed), int(changed and kind.busy))
                dfs(
                    ki,
                    o,
                    [a - b for a, b in zip(left, served, strict=True)],
                    rem - 1,
                    (cost[0] + step[0], cost[1] + step[1], cost[2] + step[2]),
                )
                path.pop()
        dfs(ki + 1, 0, left, remaining[ki + 1] if ki + 1 < len(kinds) else 0, cost)

    dfs(0, 0, list(left), remaining[0] if kinds else 0, (0, 0, 0))
    return best, steps <= nodes


def _merged(path: list[Choice]) -> list[Choice]:
    merged: list[Choice] = []
    for choice in path:
        if merged and (merged[-1].kind, merged[-1].layout, merged[-1].serves) == (
            choice.kind,
            choice.layout,
            choice.serves,
        ):
            last = merged.pop()
            choice = Choice(last.kind, last.layout, last.serves, last.gpus + 1)
        merged.append(choice)
    return merged


def _apply(choice: Choice, left: list[int], remaining: list[int], count_kinds: bool = True) -> None:
    for j, served in enumerate(choice.serves):
        left[j] -= served * choice.gpus
    if count_kinds:
        remaining[choice.kind] -= choice.gpus


def _cost(problem: Problem, choices: Sequence[Choice], short: Sequence[int]) -> Cost:
    gpus = repartitioned = busy = 0
    for choice in choices:
        kind = problem.kinds[choice.kind]
        changed = choice.layout != kind.current
        gpus += 0 if kind.prepaid else choice.gpus
        repartitioned += choice.gpus if changed else 0
        busy += choice.gpus if changed and kind.busy else 0
    return sum(short), gpus, repartitioned, busy


def _key(layout: Mapping[str, int]) -> Key:
    return tuple(sorted((name, count) for name, count in layout.items() if count > 0))


def key_of(layout: Mapping[str, int]) -> Key:
    return _key(layout)
