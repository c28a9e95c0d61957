"""GPU quota in GPU-equivalents (pure): which ResourceQuotas apply to a pod, and the denial message.

The budget is the standard `requests.<whole-GPU resource>` entry admins already write (e.g.
requests.nvidia.com/gpu: 8), counted across every GPU form, plus an optional GPU-memory budget
`requests.gpuport.io/gpu-memory` (a byte quantity). Scopes are honoured as the built-in plugin does.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from webhook.core.vocabulary.gpu_use import MEASURES, GpuUse
from webhook.core.vocabulary.workloads import mapping_at, resource_entries

FORMS = "whole GPUs count 1, MIG slices their share of the GPU's compute, shared GPUs their share"


@dataclass(frozen=True)
class Quota:
    name: str
    hard: Mapping[str, Decimal]
    scopes: tuple[str, ...] = ()
    scope_selector: tuple[Mapping[str, Any], ...] = ()  # matchExpressions of spec.scopeSelector


@dataclass(frozen=True)
class PodFacts:
    terminating: bool
    best_effort: bool
    priority_class: str


def pod_facts(pod: Mapping[str, Any]) -> PodFacts:
    spec = mapping_at(pod, ("spec",)) or {}
    best_effort = not any(
        name in ("cpu", "memory")
        for section in ("requests", "limits")
        for _, name, _ in resource_entries(spec, section)
    )
    return PodFacts(
        terminating=spec.get("activeDeadlineSeconds") is not None,
        best_effort=best_effort,
        priority_class=str(spec.get("priorityClassName") or ""),
    )


def applies(quota: Quota, facts: PodFacts) -> bool:
    for scope in quota.scopes:
        if (scope == "Terminating" and not facts.terminating) or (
            scope == "NotTerminating" and facts.terminating
        ):
            return False
        if (scope == "BestEffort" and not facts.best_effort) or (
            scope == "NotBestEffort" and facts.best_effort
        ):
            return False
    for expression in quota.scope_selector:
        if expression.get("scopeName") != "PriorityClass":
            continue
        values = set(expression.get("values") or ())
        operator = expression.get("operator")
        if operator == "In" and facts.priority_class not in values:
            return False
        if operator == "NotIn" and facts.priority_class in values:
            return False
        if operator == "Exists" and not facts.priority_class:
            return False
        if operator == "DoesNotExist" and facts.priority_class:
            return False
    return True


def gpu_quotas(quotas: list[Quota], whole_gpu: str) -> list[Quota]:
    keys = [m.quota_key(whole_gpu) for m in MEASURES]
    return [q for q in quotas if any(key in q.hard for key in keys)]


def exceeded(quota: Quota, asked: GpuUse, used: GpuUse, whole_gpu: str) -> str | None:
    """The built-in plugin's message if this pod would take `quota` past its limits, else None."""
    over = []
    for measure in MEASURES:
        key = measure.quota_key(whole_gpu)
        if key not in quota.hard:
            continue
        limit = measure.limit(quota.hard[key])
        taken, held = measure.of(asked), measure.of(used)
        if held + taken > limit:
            over.append((key, measure.show(taken), measure.show(held), measure.show(limit)))
    if not over:
        return None
    over.sort()
    requested = ",".join(f"{k}={r}" for k, r, _, _ in over)
    used_text = ",".join(f"{k}={u}" for k, _, u, _ in over)
    limited = ",".join(f"{k}={lim}" for k, _, _, lim in over)
    return (
        f"exceeded quota: {quota.name}, requested: {requested}, used: {used_text}, limited: {limited} "
        f"(in GPU-equivalents across every GPU form: {FORMS})"
    )
