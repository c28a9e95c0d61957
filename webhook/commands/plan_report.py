"""`gpuport plan mig` output: the YAML to apply (default), the same as commands run one node at a time,
or a table of demand against capacity."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from webhook.core.planning.drains import Drain, drain_order
from webhook.core.planning.mig_plan import MigPlan
from webhook.core.planning.planner import Gpu
from webhook.core.planning.pool_commands import pools_to_create, variables
from webhook.core.planning.rendering import (
    CONFIG_KEY,
    NodeChange,
    Operator,
    config_map,
    in_use,
    mig_parted_config,
    node_changes,
    node_label,
)
from webhook.core.planning.steps import shell_script
from webhook.core.vocabulary.catalogue import Catalogue
from webhook.core.vocabulary.inventory import Inventory
from webhook.core.vocabulary.platform import CloudMap


def shortfalls(plan: MigPlan) -> list[str]:
    """What does not fit, each in GPUs of which model when gpuport can say."""
    lines = list(plan.problems)
    for model_plan in plan.models:
        if model_plan.short:
            asked = ", ".join(f"{count} × {name}" for name, count in sorted(model_plan.short.items()))
            lines.append(
                f"short on {model_plan.model}: {asked} do not fit; it would take {model_plan.more_gpus} "
                f"more {model_plan.model} GPU(s)"
            )
    for profile, (count, why) in sorted(plan.unplaced.items()):
        lines.append(f"{count} × {profile} fit nowhere: {why}")
    return lines


@dataclass(frozen=True)
class Output:
    """What the plan is written for: the target's map and GPUs (pool commands) and the MIG manager's
    ConfigMap."""

    target: CloudMap
    gpus: Sequence[Gpu]
    operator: Operator = field(default_factory=Operator)


def as_yaml(plan: MigPlan, catalogue: Catalogue, inventory: Inventory, output: Output) -> str:
    """A stream `kubectl apply -f` takes: the ConfigMap, then each changed node's label in drain order,
    each after the comments saying what to drain first; the notes on top. Nothing to change: no
    document at all (an empty mig-parted configuration is one mig-parted refuses)."""
    layouts = _layouts(plan, catalogue, inventory, output.operator) if plan.kind == "layouts" else None
    comments = [f"# {line}" for line in _notes(plan, catalogue, inventory, output, layouts=layouts)]
    parts = ["\n".join(comments) + "\n" if comments else ""]
    if layouts is not None:
        if layouts.config_map:
            parts.append(_dump(layouts.config_map))
        for number, drain in enumerate(layouts.drains, 1):
            parts.append(f"---\n# {number}/{len(layouts.drains)} {drain.node}: {_drain_line(drain)}\n")
            parts += [f"#   warning: {warning}\n" for warning in drain.warnings]
            parts.append(_dump(node_label(layouts.by_node[drain.node])).removeprefix("---\n"))
    return "".join(parts)


def as_commands(plan: MigPlan, catalogue: Catalogue, inventory: Inventory, output: Output) -> str:
    """The plan as a shell script: the ConfigMap applied, then one node at a time (steps.py); for
    per-pool targets, the commands creating the pools."""
    layouts = _layouts(plan, catalogue, inventory, output.operator) if plan.kind == "layouts" else None
    notes = _notes(plan, catalogue, inventory, output, commands=True, layouts=layouts)
    if plan.kind == "pools":
        made = pools_to_create(plan.pools, output.gpus, inventory, output.target)
        lines = ["#!/bin/sh", *[f"# {note}" for note in notes], "set -eu"]
        lines += [p.command for p in made if p.command]
        return "\n".join(lines) + "\n"
    if layouts is None:
        return "\n".join(["#!/bin/sh", *[f"# {note}" for note in notes]]) + "\n"
    text = _dump(layouts.config_map).removeprefix("---\n") if layouts.config_map else ""
    return shell_script(text, layouts.drains, list(layouts.by_node.values()), notes)


@dataclass(frozen=True)
class _Layouts:
    config_map: dict[str, Any] | None  # None: nothing to change
    drains: list[Drain]
    by_node: dict[str, NodeChange]
    unknown: list[str]  # configurations nodes use today that the ConfigMap written would drop
    carried: list[str]  # configurations nodes use today that it carries


def _layouts(plan: MigPlan, catalogue: Catalogue, inventory: Inventory, operator: Operator) -> _Layouts:
    configs, changes = node_changes(plan, catalogue)
    labels = {node.name: node.labels for node in inventory.nodes}
    kept, unknown = in_use(plan, labels, catalogue, {c.node for c in changes})
    if not changes:
        return _Layouts(None, [], {}, unknown, sorted(kept))
    text = yaml.dump(
        mig_parted_config({**kept, **configs}), Dumper=_Dumper, sort_keys=False, default_flow_style=None
    )
    drains = drain_order(changes, inventory.pods)
    return _Layouts(config_map(operator, text), drains, {c.node: c for c in changes}, unknown, sorted(kept))


def _drain_line(drain: Drain) -> str:
    if not drain.pods:
        return "no GPU pods run here: cordon it, then apply its label"
    return f"drain {', '.join(drain.pods)} first (kubectl drain), then apply its label"


class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """Multi-line strings (the ConfigMap's config.yaml) as literal blocks, readable as written; libyaml's
    emitter where present (the pure one took 3 s for the 400 Nodes of a 1,000-node plan)."""


_Dumper.add_representer(
    str,
    lambda dumper, text: dumper.represent_scalar(
        "tag:yaml.org,2002:str", text, style="|" if "\n" in text else None
    ),
)


def _dump(document: Mapping[str, Any]) -> str:
    return "---\n" + yaml.dump(document, Dumper=_Dumper, sort_keys=False)


def as_table(
    plan: MigPlan,
    catalogue: Catalogue,
    inventory: Inventory,
    output: Output,
    waves: list[tuple[list[str], MigPlan]] | None = None,
) -> str:
    """Demand against capacity per profile; with `waves`, what is asked once each wave has moved
    (cumulative, running pods included) and whether the target's GPUs can hold it."""
    lines = [f"MIG plan for {plan.target}"]
    if plan.kind == "layouts":
        for model_plan in plan.models:
            capacity = model_plan.capacity
            lines.append(
                f"\n{model_plan.model}: {model_plan.used_gpus} of {len(model_plan.gpus)} GPUs serve slices "
                f"(no plan needs fewer than {model_plan.fewest_possible}), "
                f"{model_plan.repartitioned} repartitioned"
            )
            lines.append(f"  {'profile':<12} {'asked':>7} {'capacity':>9} {'left over':>10}")
            for name in sorted(set(model_plan.demand) | set(capacity)):
                asked, held = model_plan.demand.get(name, 0), capacity.get(name, 0)
                lines.append(f"  {name:<12} {asked:>7} {held:>9} {max(held - asked, 0):>10}")
    elif plan.kind == "pools":
        lines.append(f"  {'model':<12} {'profile':<10} {'slices':>7} {'GPUs':>5} {'nodes':>6}")
        for made in pools_to_create(plan.pools, output.gpus, inventory, output.target):
            pool, nodes = made.pool, str(made.nodes or "?")
            lines.append(
                f"  {pool.model:<12} {pool.profile:<10} {pool.instances:>7} {pool.gpus:>5} {nodes:>6}"
            )
    if waves and plan.kind == "layouts":
        lines.append("\nPer migration wave (slices asked once it has moved, cumulative):")
        for number, (keys, wave_plan) in enumerate(waves, 1):
            wanted: dict[str, int] = {}
            for model_plan in wave_plan.models:
                for name, count in model_plan.demand.items():
                    wanted[name] = wanted.get(name, 0) + count
            said = ", ".join(f"{name} ×{count}" for name, count in sorted(wanted.items())) or "no slices"
            fits = "fits" if wave_plan.fits else "does not fit"
            lines.append(f"  wave {number} ({len(keys)} workload(s)): {said}: {fits}")
    lines += ["", *_notes(plan, catalogue, inventory, output, table=True)]
    return "\n".join(lines).rstrip("\n") + "\n"


def _notes(
    plan: MigPlan,
    catalogue: Catalogue,
    inventory: Inventory,
    output: Output,
    *,
    commands: bool = False,
    table: bool = False,
    layouts: "_Layouts | None" = None,
) -> list[str]:
    notes = [plan.note] if plan.note else []
    if plan.kind == "pools":
        notes += _pool_notes(plan, inventory, output, commands)
    if plan.kind == "layouts":
        layouts = layouts or _layouts(plan, catalogue, inventory, output.operator)
        notes += _layout_notes(plan, layouts, inventory, output, commands, table)
    notes += [f"not fitting: {line}" for line in shortfalls(plan)]
    return notes


def _pool_notes(plan: MigPlan, inventory: Inventory, output: Output, commands: bool) -> list[str]:
    made = pools_to_create(plan.pools, output.gpus, inventory, output.target)
    if not made:
        return ["no node pool to create: no slice is asked"]
    notes = [
        f"{plan.target} gives every GPU of a node one MIG profile, fixed when its node pool is created: "
        "create one pool per line (nothing here for kubectl to apply)"
    ]
    for pool in made:
        nodes = (
            f"{pool.nodes} node(s) of {pool.gpus_per_node} GPUs"
            if pool.nodes
            else "nodes: unknown (no node of the model in the inventory, and the map names no machine)"
        )
        notes.append(
            f"  {pool.pool.model} {pool.pool.profile}: {pool.pool.instances} slice(s), "
            f"{pool.pool.gpus} GPU(s), {nodes}"
        )
        if not commands:
            notes.append(f"    {pool.command or pool.pool.create or 'the map says no way to create it'}")
        elif not pool.command:
            notes.append(f"    no command known: {pool.pool.create or 'the map says no way to create it'}")
    if any(p.command.startswith("gcloud ") for p in made):
        notes.append(
            "gcloud's --num-nodes counts nodes per zone: in a regional cluster, per zone of the pool"
        )
    wanted = variables(made)
    if wanted:
        notes.append(f"set {', '.join(wanted)} first (the commands read them from the shell)")
    return notes


def _layout_notes(
    plan: MigPlan, layouts: "_Layouts", inventory: Inventory, output: Output, commands: bool, table: bool
) -> list[str]:
    if layouts.config_map is None:
        return (
            ["nothing to change: the nodes' MIG layouts hold what is asked as they are"] if plan.fits else []
        )
    operator = output.operator
    notes = [
        "these layouts need the GPU Operator's MIG strategy mixed (ClusterPolicy mig.strategy=mixed, Helm "
        "--set mig.strategy=mixed): the pods ask for nvidia.com/mig-<profile>, which the single strategy "
        "does not advertise"
    ]
    single = sorted(n.name for n in inventory.nodes if n.labels.get("nvidia.com/mig.strategy") == "single")
    if single:
        notes.append(f"  nodes reporting nvidia.com/mig.strategy=single today: {', '.join(single)}")
    notes.append(
        f"the MIG manager's configuration: ConfigMap {operator.namespace}/{operator.config_map} (the "
        "ClusterPolicy's migManager.config.name; --mig-config-name and --gpu-operator-namespace if yours "
        f"differ). kubectl apply writes its {CONFIG_KEY} whole: it carries gpuport's configurations"
        + (f" and those the other nodes use today ({', '.join(layouts.carried)})" if layouts.carried else "")
    )
    if layouts.unknown:
        notes.append(
            f"  merge by hand before applying: nodes use {', '.join(layouts.unknown)}, which gpuport cannot "
            f"write (kubectl get configmap -n {operator.namespace} {operator.config_map} -o yaml)"
        )
    if table:
        notes.append("then, one node at a time:")
        notes += [f"  {d.node}: {_drain_line(d)}" for d in layouts.drains]
    elif not commands:
        notes.append(
            "then one node at a time, in the order below: drain it, apply its label, and wait for "
            "nvidia.com/mig.config.state=success before the next (-o commands prints these steps)"
        )
    return notes
