"""`gpuport rightsize`'s output: a table (one row a workload, then what the fleet frees), JSON with every
figure, and the MIG layout for the right-sized fleet (`--plan`)."""

import json
from fractions import Fraction
from typing import Any

from webhook.core.deciding.context import Context
from webhook.core.sizing.fleet import FleetSizing
from webhook.core.sizing.recommend import Sizing
from webhook.core.vocabulary.inventory import Inventory

HEADER = ("WORKLOAD", "PODS", "MODEL", "ASK TODAY", "PEAK MEMORY", "COMPUTE", "MEASURED", "PROPOSED", "SAVED")


def _mib(value: int | None) -> str:
    return "-" if value is None else f"{value} MiB"


def _gpus(value: Fraction | None) -> str:
    return "-" if value is None else f"{float(value):.2f}"


def _measured(sizing: Sizing) -> str:
    usage = sizing.usage
    if usage is None:
        return "-"
    covered = min(usage.memory_covered_s, usage.compute_covered_s) / sizing.window_s
    return f"{covered:.0%} of {sizing.window_s / 86400:g}d"


def _proposed(sizing: Sizing) -> str:
    proposal = sizing.proposal
    if proposal is None:
        return "-"
    asked = ", ".join(f"{k}: {v}" for k, v in proposal.resources.items())
    selector = ", ".join(f"{k}={v}" for k, v in proposal.node_selector.items())
    return asked + (f" (node selector {selector})" if selector else "")


def rows(fleet: FleetSizing) -> list[tuple[str, ...]]:
    found: list[tuple[str, ...]] = [HEADER]
    for s in fleet.sizings:
        usage = s.usage
        found.append(
            (
                s.workload,
                str(s.pods),
                s.model or "?",
                s.today,
                _mib(usage.peak_memory_mib if usage else None),
                _gpus(usage.compute if usage else None),
                _measured(s),
                _proposed(s),
                _gpus(s.saved) if s.proposal else "-",
            )
        )
    return found


def sizing_table(fleet: FleetSizing, quantile: Fraction) -> str:
    table = rows(fleet)
    table[0] = (*table[0][:5], f"COMPUTE p{float(quantile) * 100:g}", *table[0][6:])
    widths = [max(len(row[i]) for row in table) for i in range(len(HEADER))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in table]
    lines.append("")
    for s in fleet.sizings:
        lines.append(f"{s.workload}: {s.reason}")
    asked = sum((s.today_gpus * s.pods for s in fleet.sizings), Fraction(0))
    resized = sum(1 for s in fleet.sizings if s.proposal)
    lines.append(
        f"{resized} of {len(fleet.sizings)} GPU workloads resized: frees {float(fleet.freed):.2f} of "
        f"{float(asked):.2f} GPU-equivalents asked (PEAK MEMORY and COMPUTE as measured, compute in GPUs; "
        "each proposal holds them with the headroom)"
    )
    return "\n".join(lines) + "\n"


def sizing_json(fleet: FleetSizing) -> str:
    def number(value: Fraction | None) -> float | None:
        return None if value is None else float(value)

    items: list[dict[str, Any]] = []
    for s in fleet.sizings:
        usage = s.usage
        p = s.proposal
        items.append(
            {
                "workload": s.workload,
                "pods": s.pods,
                "model": s.model,
                "container": s.container,
                "ask": s.today,
                "ask_gpus": number(s.today_gpus),
                "peak_memory_mib": usage.peak_memory_mib if usage else None,
                "compute_gpus": number(usage.compute) if usage else None,
                "memory_covered_s": usage.memory_covered_s if usage else 0,
                "compute_covered_s": usage.compute_covered_s if usage else 0,
                "window_s": s.window_s,
                "proposal": None
                if p is None
                else {
                    "form": p.form,
                    "resources": dict(p.resources),
                    "node_selector": dict(p.node_selector),
                    "gpus": number(p.gpus),
                    "memory_mib": p.memory_mib,
                    "compute_gpus": number(p.compute),
                },
                "saved_gpus": number(s.saved),
                "reason": s.reason,
            }
        )
    return json.dumps({"workloads": items, "freed_gpus": float(fleet.freed)}, indent=2) + "\n"


def fleet_plan(inventory: Inventory, fleet: FleetSizing, context: Context) -> str:
    """The `plan mig` table for the right-sized fleet's slices on these nodes."""
    from webhook.commands.plan_report import Output, as_table, shortfalls
    from webhook.config.mig_geometry import load_geometry
    from webhook.core.planning.mig_plan import plan_mig
    from webhook.core.planning.resized import resized_demand, resized_inventory
    from webhook.core.planning.target_gpus import target_gpus

    geometries = load_geometry(context.dialects.catalogue)
    after = resized_inventory(inventory, fleet)
    demand = resized_demand(inventory, fleet, context)
    gpus = target_gpus(after, context.dialects, geometries)
    plan = plan_mig(demand, gpus, geometries, context.target)
    text = "\nMIG layout for the right-sized fleet (as `gpuport plan mig`):\n"
    text += as_table(plan, context.dialects.catalogue, after, Output(context.target, gpus))
    return text + "".join(f"short: {line}\n" for line in shortfalls(plan))
