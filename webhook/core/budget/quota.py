"""GPU quota in GPU-equivalents (pure): which ResourceQuotas apply to a pod, and the denial message.

The budget is the standard `requests.<whole-GPU resource>` entry admins already write (e.g.
requests.nvidia.com/gpu: 8), counted across every GPU form, plus an optional GPU-memory budget
`requests.gpuport.io/gpu-memory` (a byte quantity). Scopes are honoured as the built-in plugin does.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from webhook.core.vocabulary import quantity
from webhook.core.vocabulary.errors import BadInput
from webhook.core.vocabulary.gpu_use import MEASURES, GpuUse
from webhook.core.vocabulary.workloads import containers, mapping_at

FORMS = (
    "whole GPUs count 1, MIG slices the larger of their share of the GPU's compute and memory, "
    "shared GPUs their share"
)


@dataclass(frozen=True)
class Quota:
    name: str
    hard: Mapping[str, Decimal]
    scopes: tuple[str, ...] = ()
    scope_selector: tuple[Mapping[str, Any], ...] = ()  # matchExpressions of spec.scopeSelector


@dataclass(frozen=True)
class PodFacts:
    """What the built-in pod evaluator's scope functions read of a pod (podMatchesScopeFunc in
    kubernetes pkg/quota/v1/evaluator/core/pods.go), and nothing else."""

    terminating: bool
    best_effort: bool
    priority_class: str
    cross_namespace_affinity: bool = False


# The QoS class is decided by these alone (isSupportedQoSComputeResource, pkg/apis/core/helper/qos):
# hugepages, ephemeral storage and extended resources such as GPUs never make a pod Burstable.
QOS_RESOURCES = ("cpu", "memory")
# Ephemeral containers cannot ask for resources, so ComputePodQOS reads these lists only.
QOS_CONTAINER_LISTS = ("containers", "initContainers")


def pod_facts(pod: Mapping[str, Any]) -> PodFacts:
    spec = mapping_at(pod, ("spec",)) or {}
    deadline = spec.get("activeDeadlineSeconds")
    return PodFacts(
        # isTerminating: a deadline of zero or more (validation allows only positive ones).
        terminating=isinstance(deadline, int) and not isinstance(deadline, bool) and deadline >= 0,
        best_effort=qos_class(pod) == "BestEffort",
        priority_class=str(spec.get("priorityClassName") or ""),
        cross_namespace_affinity=_cross_namespace_affinity(spec),
    )


def qos_class(pod: Mapping[str, Any]) -> str:
    """GetPodQOS: the class the API server wrote into the status when the pod was created (it never
    changes after), else worked out as ComputePodQOS does. The written class is what the built-in
    evaluator reads, and it already says whether that server honours pod-level resources."""
    written = (mapping_at(pod, ("status",)) or {}).get("qosClass")
    if isinstance(written, str) and written:
        return written
    return compute_qos_class(mapping_at(pod, ("spec",)) or {})


def compute_qos_class(spec: Mapping[str, Any]) -> str:
    """ComputePodQOS (pkg/apis/core/helper/qos), as a server with pod-level resources on (beta and on by
    default since 1.34) works it out: pod-level resources, where set, decide alone; otherwise every
    container's and init container's, requests or limits. Only cpu and memory above zero count."""
    pod_level = mapping_at(spec, ("resources",)) or {}
    sections = [(mapping_at(pod_level, ("requests",)) or {}, mapping_at(pod_level, ("limits",)) or {})]
    # IsPodLevelResourcesSet: pod-level hugepages (newer servers) also count as pod-level resources set,
    # and then the containers are not read even though only cpu and memory decide the class.
    if not any(_pod_level_resource(name) for section in sections[0] for name in section):
        sections = [
            (container.requests, container.limits)
            for container in containers(spec, lists=QOS_CONTAINER_LISTS)
        ]
    requests: dict[str, Decimal] = {}
    limits: dict[str, Decimal] = {}
    guaranteed = True
    for asked, capped in sections:
        for section, total in ((asked, requests), (capped, limits)):
            for name, amount in section.items():
                value = _positive(amount) if name in QOS_RESOURCES else None
                if value is not None:
                    total[name] = total.get(name, Decimal(0)) + value
        if not all(_positive(capped.get(name)) is not None for name in QOS_RESOURCES):
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and requests.keys() == limits.keys() and all(requests[k] == limits[k] for k in requests):
        return "Guaranteed"
    return "Burstable"


def _pod_level_resource(name: str) -> bool:
    return name in QOS_RESOURCES or name.startswith("hugepages-")


def _positive(amount: Any) -> Decimal | None:
    if amount is None:
        return None
    try:
        value = quantity.parse(amount)
    except BadInput:
        return Decimal(1)  # the API server admits no such amount; never read a written one as none
    return value if value > 0 else None


def _cross_namespace_affinity(spec: Mapping[str, Any]) -> bool:
    """usesCrossNamespacePodAffinity: a pod (anti-)affinity term, required or preferred, that names
    namespaces or has a namespace selector (even an empty one, which selects every namespace)."""
    affinity = mapping_at(spec, ("affinity",)) or {}
    for kind in ("podAffinity", "podAntiAffinity"):
        section = mapping_at(affinity, (kind,)) or {}
        terms = list(section.get("requiredDuringSchedulingIgnoredDuringExecution") or ())
        for weighted in section.get("preferredDuringSchedulingIgnoredDuringExecution") or ():
            if isinstance(weighted, Mapping):
                terms.append(weighted.get("podAffinityTerm") or {})
        for term in terms:
            if isinstance(term, Mapping) and (
                term.get("namespaces") or term.get("namespaceSelector") is not None
            ):
                return True
    return False


def applies(quota: Quota, facts: PodFacts) -> bool:
    """generic.Matches with podMatchesScopeFunc: every scope of spec.scopes (read as `Exists`) and every
    expression of spec.scopeSelector must match; a scope the evaluator does not know matches no pod."""
    selectors = [{"scopeName": scope, "operator": "Exists"} for scope in quota.scopes]
    return all(_matches(expression, facts) for expression in (*selectors, *quota.scope_selector))


def _matches(expression: Mapping[str, Any], facts: PodFacts) -> bool:
    scope = expression.get("scopeName")
    if scope == "Terminating":
        return facts.terminating
    if scope == "NotTerminating":
        return not facts.terminating
    if scope == "BestEffort":
        return facts.best_effort
    if scope == "NotBestEffort":
        return not facts.best_effort
    if scope == "CrossNamespacePodAffinity":
        return facts.cross_namespace_affinity
    if scope == "PriorityClass":
        return _priority_class_matches(expression, facts.priority_class)
    return False


def _priority_class_matches(expression: Mapping[str, Any], priority_class: str) -> bool:
    """podMatchesSelector: the pod as a label set {PriorityClass: its class}, empty when it has none,
    against the expression read as a label selector requirement."""
    values = {str(v) for v in expression.get("values") or ()}
    operator = expression.get("operator")
    if operator == "Exists":
        return bool(priority_class)
    if operator == "DoesNotExist":
        return not priority_class
    if operator == "In":
        return bool(priority_class) and priority_class in values
    if operator == "NotIn":
        return not priority_class or priority_class not in values
    return False  # the API server admits no other operator; an unknown one selects nothing


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
