"""`gpuport usage`: what the node agents measured on each GPU beside what the pods there ask for."""

import argparse
import json
import os
import sys
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from webhook.commands.common import Subcommands, bad_input, read_yaml_documents
from webhook.commands.usage_budgets import budget_json, budget_lines, budget_markdown, read_budgets
from webhook.core.vocabulary.errors import BadInput

if TYPE_CHECKING:
    from webhook.core.budget.overshoot import BudgetFigure
    from webhook.core.migration.usage import UsageReport

_COLUMNS = (
    "NODE",
    "GPU",
    "MODEL",
    "MODE",
    "PODS",
    "ALLOCATED",
    "MEMORY MiB",
    "UTIL_EFF COMPUTE",
    "UTIL_EFF MEMORY",
)


def register(commands: Subcommands) -> None:
    parser = commands.add_parser(
        "usage",
        help="per node and GPU: measured memory and Util_eff beside the GPU-equivalents pods are allocated",
        description="Read the Nodes (the node agent's gpuport.io/capability annotation) and the Pods bound "
        "to them, read-only, and print per node and GPU: model, mode (whole, MIG <profile>, shared), the "
        "pods running there, the GPU-equivalents allocated (as the GPU quota counts them), memory used of "
        "total and Util_eff (compute; memory used ÷ total), then the cluster's totals: Σ used ÷ Σ capacity "
        "and allocated ÷ GPUs, then each namespace's GPU quota beside what its not-finished pods hold "
        "(OVER where a quota made or lowered later left it past its budget). Unknown figures are shown "
        "as - and left out of the sums. Exit 0, or 2 when the cluster or the cloud maps cannot be read.",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--kubeconfig",
        help="the cluster's kubeconfig, or in-cluster (default: $KUBECONFIG, else ~/.kube/config)",
    )
    where.add_argument(
        "--inventory",
        type=Path,
        help="read the Nodes and Pods from this file instead: `kubectl get nodes,pods -A -o yaml`",
    )
    parser.add_argument("--cloud", default="generic", help="this cluster's cloud map (default generic)")
    parser.add_argument("--cloudmap-dir", type=Path, help="folder of cloud maps (default: the shipped ones)")
    parser.add_argument("-o", "--output", choices=["text", "json", "markdown"], default="text")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import yaml

    from webhook.config.cloudmap import default_directory
    from webhook.config.loading import StartupError, build_context
    from webhook.core.migration.usage import usage_report
    from webhook.core.vocabulary.inventory import InventoryError, parse_inventory

    if args.inventory:
        try:
            nodes, pods, quotas = _from_file(args.inventory)
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            return bad_input("usage", exc)
        budget_pods = pods
    else:
        kubeconfig = (
            args.kubeconfig or os.environ.get("KUBECONFIG") or str(Path("~/.kube/config").expanduser())
        )
        from webhook.adapters.kube.kubeclient import ClusterUnreadable, read_cluster
        from webhook.adapters.kube.usage_reader import nodes_and_pods, quotas_and_their_pods

        try:
            nodes, pods = read_cluster(kubeconfig, nodes_and_pods)
            quotas, budget_pods = read_cluster(kubeconfig, quotas_and_their_pods)
        except ClusterUnreadable as exc:
            return bad_input("usage", exc)
    try:
        # The models and slices the nodes show narrow the map, as the server's cluster view does (what a
        # share by memory is a share of). A node whose agent record is broken is read without it (the
        # report says which); nodes that cannot be read as an inventory leave the map as written.
        inventory = parse_inventory(nodes) if nodes else None
    except InventoryError:
        inventory = None
    try:
        context = build_context(args.cloudmap_dir or default_directory(), args.cloud, inventory=inventory)
    except StartupError as exc:
        return bad_input("usage", exc)
    report = usage_report(nodes, pods, context)
    try:
        budgets = read_budgets(quotas, budget_pods, context)
    except (BadInput, KeyError, TypeError) as exc:
        return bad_input("usage", f"a ResourceQuota cannot be read: {exc}")
    render = {"text": usage_text, "json": usage_json, "markdown": usage_markdown}[args.output]
    sys.stdout.write(render(report, budgets))
    return 0


def _from_file(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """The Nodes, Pods and ResourceQuotas of a `kubectl get -o yaml` dump (Lists unwrapped), as the API
    serves them."""
    items: list[dict[str, Any]] = []
    for doc in read_yaml_documents([str(path)]):
        listed = doc.get("items") if isinstance(doc, dict) and doc.get("kind") == "List" else [doc]
        items += [item for item in listed or () if isinstance(item, dict)]
    kinds = ("Node", "Pod", "ResourceQuota")
    nodes, pods, quotas = ([i for i in items if i.get("kind") == kind] for kind in kinds)
    return nodes, pods, quotas


# -- rendering -------------------------------------------------------------------------------------


def usage_rows(report: "UsageReport") -> list[tuple[str, ...]]:
    """The table's rows (header first, the TOTAL row last), each cell as printed."""
    from webhook.core.vocabulary.gpu_use import show

    rows: list[tuple[str, ...]] = [_COLUMNS]
    for node in report.nodes:
        state: str = "" if node.state == "measured" else node.state
        if node.shared_memory_full:
            state = f"shared memory full (κ {node.memory_fill_limit:g})"
        measured = node.state == "measured"
        rows.append(
            (
                node.name,
                "all" if measured or node.advertised is None else f"{node.advertised} GPUs",
                "" if measured else node.model or "-",
                state,
                ", ".join(node.pods) or "-",
                show(node.allocated),
                _memory(node.memory_used_mib, node.memory_total_mib) if measured else _NEEDS_AGENT,
                _percent(node.util_eff_compute) if measured else _NEEDS_AGENT,
                _percent(node.util_eff_memory) if measured else _NEEDS_AGENT,
            )
        )
        for gpu in node.gpus:
            rows.append(
                (
                    node.name,
                    str(gpu.index),
                    gpu.model or "-",
                    gpu.mode,
                    ", ".join(gpu.pods) or "-",
                    "",
                    _memory(gpu.memory_used_mib, gpu.memory_total_mib),
                    _percent(gpu.compute),
                    _percent(gpu.memory),
                )
            )
    t = report.totals
    rows.append(
        (
            "TOTAL",
            f"{t.gpus} GPUs",
            "",
            f"{t.nodes} node(s) measured"
            + (f", {t.advertised_nodes} advertised" if t.advertised_nodes else ""),
            str(sum(len(n.pods) for n in report.nodes if n.state == "measured" or n.advertised is not None)),
            show(t.allocated),
            _memory(t.memory_used_mib, t.memory_total_mib) if t.memory_total_mib else "-",
            _percent(t.compute),
            _percent(t.memory),
        )
    )
    return rows


def _allocation_line(report: "UsageReport") -> str:
    from webhook.core.vocabulary.gpu_use import show

    t = report.totals
    ratio = "-" if t.allocation_ratio is None else f"{float(t.allocation_ratio):.3f}"
    return f"Allocation ratio (allocated ÷ GPU capacity): {show(t.allocated)} ÷ {t.gpus} = {ratio}"


_NEEDS_AGENT = "needs agent"  # a figure only the node agent measures, on a node without its record
_LEGEND = (
    "Util_eff: a GPU's compute busy and memory used ÷ total; a node's (GPU all) as its agent published it; "
    "TOTAL's Σ used ÷ Σ capacity (compute in GPU-equivalents, a MIG instance weighing its slice)"
)


def usage_text(report: "UsageReport", budgets: "Sequence[BudgetFigure]" = ()) -> str:
    rows = usage_rows(report)
    widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines += ["", _allocation_line(report), _LEGEND]
    lines += [f"Note: {note}" for note in report.notes]
    over = [f for f in budgets if f.over]
    if budgets:
        lines += ["", *budget_lines(budgets)]
    lines += [f"Warning: {f.words()}" for f in over]
    return "\n".join(lines) + "\n"


def usage_markdown(report: "UsageReport", budgets: "Sequence[BudgetFigure]" = ()) -> str:
    rows = usage_rows(report)
    lines = ["### gpuport usage", "", _pipe(rows[0]), "|" + "---|" * 5 + "---:|" * 4]
    lines += [_pipe(row) for row in rows[1:-1]]
    lines += [_pipe(tuple(f"**{cell}**" if cell else "" for cell in rows[-1]))]
    lines += ["", _allocation_line(report) + ".", "", _LEGEND + "."]
    if report.notes:
        lines += ["", *(f"- {note}" for note in report.notes)]
    if budgets:
        lines += ["", *budget_markdown(budgets)]
    return "\n".join(lines) + "\n"


def usage_json(report: "UsageReport", budgets: "Sequence[BudgetFigure]" = ()) -> str:
    t = report.totals
    document = {
        "nodes": [
            {
                "node": n.name,
                "state": n.state,
                "problem": n.problem or None,
                "pods": list(n.pods),
                "allocated": _number(n.allocated),
                "gpu_count": n.capacity if n.state == "measured" else n.advertised,
                "gpu_count_from": "agent" if n.state == "measured" else "cluster" if n.advertised else None,
                "model": n.model,
                "memory_used_mib": n.memory_used_mib,
                "memory_total_mib": n.memory_total_mib,
                "util_eff": {"compute": n.util_eff_compute, "memory": n.util_eff_memory},
                "memory_fill_limit": n.memory_fill_limit,
                "shared_memory_full": n.shared_memory_full,
                "gpus": [
                    {
                        "index": g.index,
                        "uuid": g.uuid,
                        "model": g.model,
                        "mode": g.mode,
                        "pods": list(g.pods),
                        "processes_without_pod": g.podless,
                        "memory_used_mib": g.memory_used_mib,
                        "memory_total_mib": g.memory_total_mib,
                        "util_eff": {"compute": _number(g.compute), "memory": _number(g.memory)},
                    }
                    for g in n.gpus
                ],
            }
            for n in report.nodes
        ],
        "totals": {
            "nodes": t.nodes,
            "gpus": t.gpus,
            "allocated": _number(t.allocated),
            "allocation_ratio": _number(t.allocation_ratio),
            "memory_used_mib": t.memory_used_mib,
            "memory_total_mib": t.memory_total_mib,
            "util_eff": {"compute": _number(t.compute), "memory": _number(t.memory)},
            "compute_capacity": _number(t.compute_capacity),
            "advertised_nodes": t.advertised_nodes,
        },
        "notes": list(report.notes),
        "budgets": budget_json(budgets),
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def _number(value: Fraction | None) -> float | None:
    return None if value is None else round(float(value), 4)


def _percent(value: Fraction | float | None) -> str:
    return "-" if value is None else f"{float(value):.1%}"


def _memory(used: int | None, total: int | None) -> str:
    return "-" if used is None or total is None else f"{used}/{total}"


def _pipe(row: tuple[str, ...]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |"
