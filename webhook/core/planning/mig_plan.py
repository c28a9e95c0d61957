"""A target's MIG plan from its slice demand and its GPUs: per model the layouts (planner), what is
short, and, for targets that do not take a layout per GPU, what to do instead.

- mixed (the GPU Operator's MIG manager): a layout per GPU, written as a mig-parted configuration
  and the `nvidia.com/mig.config` label of each node that changes (rendering.py);
- single, partition-label (GKE), and mixed maps that say `partitioned: node-pool` (AKS, whose
  --gpu-instance-profile is chosen at a pool's creation): every GPU of a node (pool) carries one
  profile, so the plan is a count of GPUs per (model, profile): the node pools to create, each with
  how the map says to create it (`requires`);
- by-memory (HAMi, Volcano) and DRA targets cut instances when pods arrive: nothing to plan.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from webhook.core.planning.geometry import MigGeometry
from webhook.core.planning.planner import Gpu, ModelPlan, Slices, plan_gpus
from webhook.core.planning.slice_demand import SliceAsk, SliceDemand
from webhook.core.vocabulary.catalogue import MigProfile
from webhook.core.vocabulary.platform import CloudMap

DYNAMIC_NOTE = (
    "{target} cuts MIG instances when pods arrive ({how}): no fixed layout to plan, nothing to apply"
)


@dataclass(frozen=True)
class Pool:
    """GKE / AKS / single strategy: GPUs of one model all carrying one profile."""

    model: str
    profile: str
    instances: int  # slices asked
    gpus: int  # GPUs it takes: instances over the most one GPU holds, rounded up
    create: str = ""  # how to create it, in the map's words (its `requires`); "" when it says nothing


@dataclass(frozen=True)
class MigPlan:
    target: str
    kind: str  # "layouts" | "pools" | "dynamic" | "none"
    models: tuple[ModelPlan, ...] = ()
    pools: tuple[Pool, ...] = ()
    # profile → (instances, why) asked of no model the target has geometry for
    unplaced: Mapping[str, tuple[int, str]] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    note: str = ""
    fewest_gpus: int = 0  # layouts: no plan holds what this one holds on fewer GPUs
    proven: bool = True  # layouts: the search finished (fewest GPUs, then repartitioned, then busy nodes)

    @property
    def fits(self) -> bool:
        return not self.unplaced and not self.problems and all(not m.short for m in self.models)


def plan_mig(
    demand: SliceDemand, gpus: Sequence[Gpu], geometries: Mapping[str, MigGeometry], target: CloudMap
) -> MigPlan:
    if target.dra is not None or target.mig.form == "by-memory":
        how = "DRA devices" if target.dra is not None else "HAMi-style dynamic MIG"
        return MigPlan(target.name, "dynamic", note=DYNAMIC_NOTE.format(target=target.name, how=how))
    if target.mig.form == "none":
        note = f"{target.name} offers no MIG slices; its slice asks are refused or made whole by translation"
        return MigPlan(target.name, "none", problems=demand.problems, note=note)
    per_model, unplaced = _by_model(demand.asks, gpus, geometries, target)
    if target.mig.per_pool:
        pools = tuple(
            Pool(
                model,
                profile,
                count,
                -(-count // geometries[model].most[profile]),
                target.mig.requirement(MigProfile.parse(profile)),
            )
            for model, profiles in sorted(per_model.items())
            for profile, count in sorted(profiles.items())
        )
        return MigPlan(target.name, "pools", pools=pools, unplaced=unplaced, problems=demand.problems)
    slices, running, unplaced = _slices(demand.asks, gpus, geometries, target)
    planned = plan_gpus(slices, gpus, geometries, running, models=sorted(per_model))
    return MigPlan(
        target.name,
        "layouts",
        planned.models,
        unplaced=unplaced,
        problems=demand.problems,
        fewest_gpus=planned.fewest_gpus,
        proven=planned.proven,
    )


def _slices(
    asks: Sequence[SliceAsk], gpus: Sequence[Gpu], geometries: Mapping[str, MigGeometry], target: CloudMap
) -> tuple[list[Slices], dict[str, dict[str, int]], dict[str, tuple[int, str]]]:
    """The asks as the planner takes them: a running pod's slices held on its node (of its node's
    model, whatever the pod says), every other ask's slices on any model it accepts that has the
    profile and that the target sells it for (charged first, when short, to the one with the most GPUs
    in the target); and what no such model takes."""
    present, node_model = _models_present(gpus)
    counts: dict[tuple[tuple[str, str], ...], int] = {}
    running: dict[str, dict[str, int]] = {}
    unplaced: dict[str, tuple[int, str]] = {}
    for ask in asks:
        model = node_model.get(ask.running_on)
        if model is not None and geometries[model].profile(ask.profile) in geometries[model].placements:
            on_node = running.setdefault(ask.running_on, {})
            name = geometries[model].profile(ask.profile)
            on_node[name] = on_node.get(name, 0) + ask.instances
            continue
        accepted = ask.models if ask.models is not None else frozenset(present)
        if model is not None:
            accepted = frozenset({model})
        on = tuple(
            sorted(
                (
                    (m, geometries[m].profile(ask.profile))
                    for m in accepted
                    if m in geometries
                    and geometries[m].profile(ask.profile) in geometries[m].placements
                    and _sold(target, m, geometries[m].profile(ask.profile))
                ),
                key=lambda pair: (-present.get(pair[0], 0), pair[0]),
            )
        )
        if not on:
            _unplaced(unplaced, ask, accepted, geometries, target)
            continue
        counts[on] = counts.get(on, 0) + ask.instances
    return [Slices(on, count) for on, count in sorted(counts.items())], running, unplaced


def _by_model(
    asks: Sequence[SliceAsk], gpus: Sequence[Gpu], geometries: Mapping[str, MigGeometry], target: CloudMap
) -> tuple[dict[str, dict[str, int]], dict[str, tuple[int, str]]]:
    """Each ask's instances charged to one model: of the models the pod accepts that have the
    profile (and that the target sells it for, where its map lists profiles per model), the one
    with the most GPUs in the target (a model it accepts but the target lacks still takes it: the
    plan then says how many GPUs of it are short). A running pod's is its node's model: 1g.10gb is
    a slice of an A100 40GB and of an H100 80GB alike."""
    present, node_model = _models_present(gpus)
    per_model: dict[str, dict[str, int]] = {}
    unplaced: dict[str, tuple[int, str]] = {}
    for ask in asks:
        accepted = ask.models if ask.models is not None else frozenset(present)
        if ask.running_on in node_model:  # a running pod's slice is of its node's model, whatever it says
            accepted = frozenset({node_model[ask.running_on]})
        holders = sorted(
            (
                m
                for m in accepted
                if m in geometries
                and ask.profile in geometries[m].placements
                and _sold(target, m, ask.profile)
            ),
            key=lambda m: (-present.get(m, 0), m),
        )
        if not holders:
            _unplaced(unplaced, ask, accepted, geometries, target)
            continue
        profiles = per_model.setdefault(holders[0], {})
        profiles[ask.profile] = profiles.get(ask.profile, 0) + ask.instances
    return per_model, unplaced


def _models_present(gpus: Sequence[Gpu]) -> tuple[dict[str, int], dict[str, str]]:
    """GPUs of each model in the target, and each node's model."""
    present: dict[str, int] = {}
    node_model: dict[str, str] = {}
    for gpu in gpus:
        present[gpu.model] = present.get(gpu.model, 0) + 1
        node_model[gpu.node] = gpu.model
    return present, node_model


def _unplaced(
    unplaced: dict[str, tuple[int, str]],
    ask: SliceAsk,
    accepted: frozenset[str],
    geometries: Mapping[str, MigGeometry],
    target: CloudMap,
) -> None:
    """Add an ask no model takes to what is unplaced, saying why."""
    count, _ = unplaced.get(ask.profile, (0, ""))
    models = ", ".join(sorted(accepted)) or "none in the inventory"
    why = f"no model it may run on has the profile with known MIG geometry (models: {models})"
    if any(m in geometries and ask.profile in geometries[m].placements for m in accepted):
        why = f"{target.name} sells it for no model it may run on (models: {models})"
    unplaced[ask.profile] = (count + ask.instances, why)


def _sold(target: CloudMap, model: str, profile: str) -> bool:
    """Whether the target cuts `model` into `profile` (a map listing no profiles sells them all)."""
    return not target.mig.profiles or profile in target.mig.profiles.get(model, ())
