"""`gpuport usage`'s GPU budgets: each namespace's GPU quota entries beside what its not-finished pods
hold, read from the ResourceQuotas and pods the command read, and how each output form shows them."""

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the budget arithmetic imports the quantity grammar (kubernetes): only when run
    from webhook.core.budget.overshoot import BudgetFigure


def read_budgets(quotas: list[dict[str, Any]], pods: list[dict[str, Any]], context) -> "list[BudgetFigure]":
    """Each namespace's GPU quota entries beside what its not-finished pods hold (DRA claims aside: the
    server counts them, `gpuport_gpu_budget_used`)."""
    from webhook.adapters.kube.clusterview import to_quota
    from webhook.core.budget.overshoot import budget_figures, quota_use
    from webhook.core.budget.quota import gpu_quotas

    whole_gpu = context.target.whole_gpu
    by_namespace: dict[str, list] = {}
    for obj in quotas:
        by_namespace.setdefault(str(obj["metadata"].get("namespace")), []).append(to_quota(obj))
    figures = []
    for namespace, held in sorted(by_namespace.items()):
        gpu = gpu_quotas(held, whole_gpu)
        if not gpu:
            continue
        theirs = [p for p in pods if (p.get("metadata") or {}).get("namespace") == namespace]
        figures += budget_figures(
            namespace, gpu, quota_use(theirs, gpu, context.target, context.dialects), whole_gpu
        )
    return figures


def budget_lines(budgets: "Sequence[BudgetFigure]") -> list[str]:
    """One line per GPU quota entry: namespace/quota, entry, held of allowed, OVER where past it."""
    if not budgets:
        return []
    lines = ["GPU budgets (held ÷ allowed, by gpuport's count):"]
    for f in budgets:
        mark = "  OVER" if f.over else ""
        lines.append(f"  {f.namespace}/{f.quota}  {f.entry}  {f.used_shown} ÷ {f.hard_shown}{mark}")
    return lines


def budget_markdown(budgets: "Sequence[BudgetFigure]") -> list[str]:
    rows = [
        (f.namespace, f.quota, f.entry, f.used_shown, f.hard_shown, "**OVER**" if f.over else "")
        for f in budgets
    ]
    header = ["| namespace | quota | resource | held | allowed | |", "|---|---|---|---:|---:|---|"]
    return header + ["| " + " | ".join(row) + " |" for row in rows]


def budget_json(budgets: "Sequence[BudgetFigure]") -> list[dict[str, Any]]:
    return [
        {
            "namespace": f.namespace,
            "quota": f.quota,
            "resource": f.entry,
            "used": round(f.used, 4),
            "limit": round(f.hard, 4),
            "over": f.over,
        }
        for f in budgets
    ]
