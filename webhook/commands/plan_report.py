"""`gpuport plan mig` output: the YAML to apply (default) or a table of demand against capacity."""

from typing import Any

import yaml

from webhook.core.planning.drains import drain_order
from webhook.core.planning.mig_plan import MigPlan
from webhook.core.planning.rendering import label_patches, mig_parted_config, node_changes
from webhook.core.vocabulary.catalogue import Catalogue
from webhook.core.vocabulary.inventory import Inventory


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


def as_yaml(plan: MigPlan, catalogue: Catalogue, inventory: Inventory) -> str:
    comments = [f"# {line}" for line in _notes(plan, catalogue, inventory)]
    if plan.kind == "layouts":
        configs, changes = node_changes(plan, catalogue)
        documents: list[Any] = [mig_parted_config(configs), label_patches(changes)]
    elif plan.kind == "pools":
        documents = [
            {
                "nodePools": [
                    {"model": p.model, "migProfile": p.profile, "gpus": p.gpus, "slices": p.instances}
                    for p in plan.pools
                ]
            }
        ]
    else:
        documents = []
    body = yaml.safe_dump_all(documents, sort_keys=False, explicit_start=True) if documents else ""
    return "\n".join(comments) + ("\n" if comments else "") + body


def as_table(
    plan: MigPlan,
    catalogue: Catalogue,
    inventory: Inventory,
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
        lines.append(f"  {'model':<12} {'profile':<10} {'slices':>7} {'GPUs':>5}")
        for pool in plan.pools:
            lines.append(f"  {pool.model:<12} {pool.profile:<10} {pool.instances:>7} {pool.gpus:>5}")
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
    lines += ["", *_notes(plan, catalogue, inventory)]
    return "\n".join(lines).rstrip("\n") + "\n"


def _notes(plan: MigPlan, catalogue: Catalogue, inventory: Inventory) -> list[str]:
    notes = [plan.note] if plan.note else []
    if plan.kind == "pools":
        notes.append(
            f"{plan.target} gives every GPU of a node one MIG profile: create a node pool per line, "
            "with the GPUs said (each pool's GPU count, not its node count)"
        )
        notes += [f"  {p.model} {p.profile}, {p.gpus} GPU(s): {p.create}" for p in plan.pools if p.create]
    if plan.kind == "layouts":
        _, changes = node_changes(plan, catalogue)
        if changes:
            notes.append(
                "apply: add the mig-configs to the MIG manager's configuration (the ConfigMap the "
                "ClusterPolicy's migManager.config.name names), beside those nodes use today; then drain "
                "each node below, one at a time, before its label patch:"
            )
        for drain in drain_order(changes, inventory.pods):
            pods = ", ".join(drain.pods) or "no GPU pods"
            notes.append(f"  {drain.node}: drain {pods}")
            notes += [f"    warning: {w}" for w in drain.warnings]
    notes += [f"not fitting: {line}" for line in shortfalls(plan)]
    return notes
