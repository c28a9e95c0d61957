"""Migration preflight: for every workload, what changes, what breaks, how risky the move is, and
whether it fits — from the same translation core as the webhook.

Risk = Σ_f w_f × (1 − compat_f) over the checks below; compat_f ∈ [0, 1] with partial credit, each
with the reason it got. Pure: manifests, maps and inventory in, a Report out.

Why one module of ~430 lines: it is one pipeline (read each workload's templates, translate them,
pack the replicas onto the inventory, score, order into waves) whose steps share the `_Template`
record; the checks that stand alone are in preflight_checks.py, the packing in packing.py.
"""

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from decimal import Decimal
from fractions import Fraction
from typing import Any

import jsonpatch

from webhook.core.asks.checks import is_extended_resource
from webhook.core.asks.demand import PodDemand, node_constraints, read_demand
from webhook.core.asks.pod_claims import ClaimsBeside, TemplateLookup
from webhook.core.asks.unread import gives_gpus
from webhook.core.budget.equivalents import pod_use
from webhook.core.deciding.admission import decide_template
from webhook.core.deciding.context import Context
from webhook.core.migration.packing import Replica, pack, tolerates
from webhook.core.migration.preflight_checks import (
    driver_check,
    memory_check,
    mode_check,
    model_check,
    topology_check,
)
from webhook.core.rewriting.devices import plan_devices
from webhook.core.rewriting.dra import ASKS_ANNOTATION
from webhook.core.vocabulary import quantity
from webhook.core.vocabulary.inventory import BoundPod, Inventory, models_present
from webhook.core.vocabulary.platform import CloudMap
from webhook.core.vocabulary.templates import pod_templates, unread_reason
from webhook.core.vocabulary.workloads import (
    ContainerRef,
    containers,
    held_at_once,
    mapping_at,
)

DEFAULT_WEIGHTS: dict[str, float] = {
    "resource_names": 0.20,
    "gpu_model": 0.15,
    "gpu_memory": 0.15,
    "mig_sharing_mode": 0.10,
    "driver_cuda": 0.15,
    "topology": 0.10,
    "capacity": 0.10,
    "quota": 0.05,
}
CATEGORY_RANK = {"inference/stateless": 0, "training": 1, "stateful": 2}
# Kinds that run to completion (batch training, pipelines): migrated after the stateless ones.
TRAINING_KINDS = {
    "Job",
    "CronJob",
    "JobSet",
    "PyTorchJob",
    "TFJob",
    "MPIJob",
    "PaddleJob",
    "XGBoostJob",
    "MXJob",
    "JAXJob",
    "ScaledJob",  # KEDA: a Job per batch of events, each run to completion
    "TrainingRuntime",
    "ClusterTrainingRuntime",
    "RayJob",
    "TrainJob",
    "Workflow",
    "WorkflowTemplate",
    "ClusterWorkflowTemplate",
    "CronWorkflow",
}
CLASS_ANNOTATION = "gpuport.io/workload-class"  # inference/stateless | training | stateful


@dataclass(frozen=True)
class CheckResult:
    check: str
    compat: float
    weight: float
    why: str

    @property
    def contribution(self) -> float:
        return self.weight * (1 - self.compat)


@dataclass
class WorkloadReport:
    name: str
    kind: str
    namespace: str
    category: str
    replicas: int
    checks: list[CheckResult] = field(default_factory=list)
    translated: list[str] = field(default_factory=list)  # one line per template: what it becomes
    placement: dict[str, int] = field(default_factory=dict)  # node → replicas
    pending: int = 0
    refused: int = 0  # replicas of templates translation refuses: never created, so never fitting
    why_pending: str = ""  # what stops its pending replicas everywhere

    @property
    def risk(self) -> float:
        return round(sum(c.contribution for c in self.checks), 4)

    @property
    def key(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}"


@dataclass
class Report:
    source: str
    target: str
    total_weight: float
    max_risk: float
    workloads: list[WorkloadReport]
    waves: list[list[str]]
    inventory_nodes: int | None
    unread: list[str] = field(default_factory=list)  # GPU workloads gpuport could not look into
    # node → GPU-equivalents the running pods there hold (as the quota counts them), already taken
    # from that node's free capacity; empty when the inventory lists no pods
    held: dict[str, Fraction] = field(default_factory=dict)
    # workloads that ask for MIG slices: the target's nodes must be partitioned for them (plan mig)
    mig_slices: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """Every workload under the risk limit, none left Pending and none refused: not fitting is a
        fact, not a risk. A GPU workload gpuport could not read is no pass either: nothing about it
        is known."""
        return not self.unread and all(
            w.risk <= self.max_risk and not w.pending and not w.refused for w in self.workloads
        )


@dataclass
class _Template:
    path: str
    original: dict[str, Any]
    translated: dict[str, Any] | None
    replicas: int
    problems: list[str]
    needed_policy: str
    demand: PodDemand  # the original template's GPU asks, read once
    claim_templates: list[dict[str, Any]]  # what the translated template's claims ask for (DRA target)


def preflight(
    documents: list[Any],
    source: CloudMap,
    context: Context,
    inventory: Inventory | None,
    *,
    max_risk_fraction: float = 0.3,
    wave_size: int = 5,
) -> Report:
    weights = {**DEFAULT_WEIGHTS, **context.target.preflight_weights}
    total = sum(weights.values())
    workloads: list[WorkloadReport] = []
    templates_by_workload: dict[str, list[_Template]] = {}
    unread: list[str] = []
    beside = ClaimsBeside(documents)
    for doc in documents:
        if not isinstance(doc, Mapping):
            continue
        reason = unread_reason(doc, gives_gpus(context.dialects))
        if reason:
            metadata = doc.get("metadata") or {}
            unread.append(
                f"{doc.get('kind')}/{metadata.get('namespace', 'default')}/{metadata.get('name')}: {reason}"
            )
        if not list(pod_templates(doc)):
            continue
        namespace = str((doc.get("metadata") or {}).get("namespace", ""))
        report, templates = _workload(doc, context, inventory, beside.lookup(namespace))
        where = f"{doc.get('kind')}/{namespace or 'default'}/{report.name}"
        unread += [f"{where}: {why}" for t in templates for why in t.demand.claims.uncountable]
        if not any(t.demand.asks or t.demand.claims.problems or t.demand.claims.charges for t in templates):
            continue  # CPU-only workloads (and those whose claims cannot be read, said above) are not scored
        workloads.append(report)
        templates_by_workload[report.key] = templates

    replicas = [r for w in workloads for r in _replicas(w, templates_by_workload[w.key], context)]
    held = _held(inventory.pods, context) if inventory else {}
    packing = (
        pack(replicas, inventory.nodes, {node: resources for node, (resources, _) in held.items()})
        if inventory
        else None
    )
    present = models_present(inventory, context.dialects) if inventory is not None else None
    for workload in workloads:
        templates = templates_by_workload[workload.key]
        workload.refused = sum(t.replicas for t in templates if t.translated is None)
        if packing is not None:
            for (name, _), node in packing.placed.items():
                if name == workload.key:
                    workload.placement[node] = workload.placement.get(node, 0) + 1
            workload.pending = sum(1 for r in packing.pending if r.workload == workload.key)
            reasons = [why for (name, _), why in sorted(packing.why_pending.items()) if name == workload.key]
            workload.why_pending = reasons[0] if reasons else ""
        workload.checks = [
            CheckResult(check, compat, weights[check], why)
            for check, (compat, why) in _checks(
                workload,
                templates,
                source,
                context,
                inventory,
                present,
                packing is not None,
                workloads,
                templates_by_workload,
            ).items()
        ]
    waves = _waves(workloads, wave_size)
    return Report(
        source=source.name,
        target=context.target.name,
        total_weight=total,
        max_risk=round(max_risk_fraction * total, 4),
        workloads=sorted(workloads, key=lambda w: (-w.risk, w.key)),
        waves=waves,
        inventory_nodes=len(inventory.nodes) if inventory else None,
        unread=unread,
        held={node: use for node, (_, use) in held.items() if use},
        mig_slices=sorted(w.key for w in workloads if _asks_slices(templates_by_workload[w.key])),
    )


def _asks_slices(templates: list[_Template]) -> bool:
    """A MIG slice by resource or by label (a partition size, a -MIG- product) in any template."""
    return any(
        t.demand.selection.profile is not None or any(a.kind == "mig" for a in t.demand.asks)
        for t in templates
    )


def _held(pods: tuple[BoundPod, ...], context: Context) -> dict[str, tuple[dict[str, Decimal], Fraction]]:
    """node → (the extended resources its running pods hold, as the scheduler counts them; their
    GPU-equivalents, as the quota counts them). The resources are what a replica cannot have there."""
    held: dict[str, tuple[dict[str, Decimal], Fraction]] = {}
    for pod in pods:
        resources, use = held.setdefault(pod.node, ({}, Fraction(0)))
        for name, amount in _pod_resources(pod.manifest).items():
            resources[name] = resources.get(name, Decimal(0)) + amount
        held[pod.node] = (resources, use + _running_use(pod, context))
    return held


def _running_use(pod: BoundPod, context: Context) -> Fraction:
    demand = read_demand(pod.manifest, context.dialects)
    return pod_use(demand, context.target, context.dialects.catalogue).equivalents


def _wraps_training(doc: Mapping[str, Any]) -> bool:
    """A CodeFlare AppWrapper whose components wrap a kind that runs to completion (a PyTorchJob...)."""
    if doc.get("kind") != "AppWrapper":
        return False
    components = (doc.get("spec") or {}).get("components")
    wrapped = [c.get("template") for c in components or () if isinstance(c, Mapping)]
    return any(isinstance(t, Mapping) and t.get("kind") in TRAINING_KINDS for t in wrapped)


def _workload(
    doc: Mapping[str, Any], context: Context, inventory: Inventory | None, claims: TemplateLookup
) -> tuple[WorkloadReport, list[_Template]]:
    kind = str(doc.get("kind"))
    metadata = doc.get("metadata") or {}
    category = ((metadata.get("annotations") or {}).get(CLASS_ANNOTATION) or "").strip()
    if category not in CATEGORY_RANK:
        # By kind when the owner has not said; a Deployment may well train, hence the annotation.
        category = (
            "training"
            if kind in TRAINING_KINDS or _wraps_training(doc)
            else "stateful"
            if kind == "StatefulSet"
            else "inference/stateless"
        )
    templates = []
    for path, template in pod_templates(doc):
        original = copy.deepcopy(dict(template))
        original.setdefault("metadata", {})
        translated, problems, needed, made = _translate(original, context, claims)
        templates.append(
            _Template(
                path,
                original,
                translated,
                replica_count(doc, path, inventory),
                problems,
                needed,
                read_demand(original, context.dialects, claims),
                made,
            )
        )
    report = WorkloadReport(
        name=str(metadata.get("name", "?")),
        kind=kind,
        namespace=str(metadata.get("namespace", "default")),
        category=category,
        replicas=sum(t.replicas for t in templates),
    )
    for template in templates:
        if template.translated is not None:
            described = _describe_gpu(template.translated, template.claim_templates)
            report.translated.append(f"{template.path or '/'}: {described}")
        else:
            report.translated.append(f"{template.path or '/'}: not translatable")
    return report, templates


def _translate(
    template: dict[str, Any], context: Context, claims: TemplateLookup
) -> tuple[dict[str, Any] | None, list[str], str, list[dict[str, Any]]]:
    """The translated template; problems when it cannot be; which policy it needed, if any; and the
    claim templates it refers to on a DRA target."""
    strict = replace(context, target=replace(context.target, fractional_policy="deny", mig_to_whole="deny"))
    first_error: list[str] = []
    for attempt, label in ((strict, ""), (context, "policy")):
        decided = decide_template(template, attempt, templates=claims)
        if decided.rewrite is None:
            first_error = first_error or decided.refusals
            continue
        rewrite = decided.rewrite
        return jsonpatch.apply_patch(template, rewrite.patch), [], label, rewrite.claim_templates
    return None, first_error, "", []


def replica_count(doc: Mapping[str, Any], path: str, inventory: Inventory | None) -> int:
    """How many pods of this template run at once; 1 where the manifest does not say it plainly (a
    count that is not a number, a list written as a map): the checks still run on one."""
    try:
        return max(_counted_replicas(doc, path, inventory), 0)
    except (TypeError, ValueError, IndexError, AttributeError):
        return 1


def _counted_replicas(doc: Mapping[str, Any], path: str, inventory: Inventory | None) -> int:
    """Pods of one template as its operator makes them: a Job's parallelism, a TrainJob's numNodes, a
    LeaderWorkerSet's groups (replicas × size, the leader one of each), a JobSet's replicated jobs ×
    parallelism, a Ray worker group's replicas × numOfHosts, a Volcano task's or a replica type's
    replicas. Kinds are told apart by group: a Volcano Job is no batch Job."""
    kind = doc.get("kind")
    group = str(doc.get("apiVersion") or "").rpartition("/")[0]
    spec = doc.get("spec") or {}
    if kind in ("Deployment", "StatefulSet", "ReplicaSet"):
        return int(spec.get("replicas", 1))
    if kind == "Job" and group == "batch":
        return int(spec.get("parallelism", 1))
    if kind == "CronJob":
        return int(((spec.get("jobTemplate") or {}).get("spec") or {}).get("parallelism", 1))
    if kind == "DaemonSet":
        return len(inventory.nodes) if inventory else 1
    if kind == "PyTorchJob":
        role = path.split("/")[3]
        return int((spec.get("pytorchReplicaSpecs") or {}).get(role, {}).get("replicas", 1))
    if kind == "JobSet":
        job = (spec.get("replicatedJobs") or [])[int(path.split("/")[3])]
        return int(job.get("replicas", 1)) * int(
            ((job.get("template") or {}).get("spec") or {}).get("parallelism", 1)
        )
    if kind == "TrainJob":
        # The trainer's pods: numNodes (the runtime's own count when the TrainJob leaves it out: 1 here).
        return int((spec.get("trainer") or {}).get("numNodes", 1))
    if kind == "LeaderWorkerSet":
        return _lws_pods(spec, path)
    if kind in ("DynamoGraphDeployment", "DynamoComponentDeployment"):
        return _dynamo_pods(doc, path)
    return _nearest_replicas(doc, path)


def _lws_pods(spec: Mapping[str, Any], path: str) -> int:
    """A LeaderWorkerSet makes `replicas` groups of `size` pods: one leader (leaderTemplate, or the
    workerTemplate when there is none) and size − 1 workers per group."""
    groups = int(spec.get("replicas", 1))
    template = spec.get("leaderWorkerTemplate") or {}
    size = int(template.get("size", 1))
    if path.endswith("/leaderTemplate"):
        return groups
    return groups * (size - 1 if template.get("leaderTemplate") else size)


def _dynamo_pods(doc: Mapping[str, Any], path: str) -> int:
    """A Dynamo service's (or v1beta1 component's) pods: its replicas, each of multinode.nodeCount pods
    (the CRD's default 2 where multinode names none); see DYNAMO in the templates table."""
    parts = path.strip("/").split("/")
    node: Any = doc
    for part in parts[:-1] if parts[-1] == "podTemplate" else parts:
        part = part.replace("~1", "/").replace("~0", "~")
        node = node[int(part)] if isinstance(node, list) else node.get(part)
    multinode = node.get("multinode")
    nodes = multinode.get("nodeCount", 2) if isinstance(multinode, Mapping) else 1
    return int(node.get("replicas", 1)) * int(nodes)


def _nearest_replicas(doc: Mapping[str, Any], path: str) -> int:
    """The `replicas` of the closest object holding the template (a Ray worker group, a replica type,
    a Volcano task), times its `numOfHosts` (a Ray multi-host group: that many pods per replica); 1
    when none says."""
    replicas = 1
    node: Any = doc
    for part in path.strip("/").split("/")[:-1]:
        node = (
            node.get(part.replace("~1", "/").replace("~0", "~"))
            if isinstance(node, Mapping)
            else (node[int(part)] if isinstance(node, list) else None)
        )
        if isinstance(node, Mapping) and isinstance(node.get("replicas"), int):
            hosts = node.get("numOfHosts", 1)
            replicas = node["replicas"] * (hosts if isinstance(hosts, int) and hosts > 0 else 1)
    return replicas


def _pod_resources(template: Mapping[str, Any]) -> dict[str, Decimal]:
    """Extended resources one pod holds on its node, as Kubernetes counts them (held_at_once)."""
    parts: dict[str, list[tuple[ContainerRef, Decimal]]] = {}
    for container in containers(mapping_at(template, ("spec",)) or {}):
        requests, limits = container.requests, container.limits
        for name in filter(is_extended_resource, {*requests, *limits}):
            amount = requests[name] if name in requests else limits[name]  # a missing request is the limit
            parts.setdefault(name, []).append((container, quantity.parse(amount)))
    return {name: held_at_once(found, Decimal(0), max) for name, found in parts.items()}


def _requires(template: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """Label values a node must have (nodeSelector and In expressions)."""
    return {k: values for k, op, values in node_constraints(template.get("spec") or {}) if op == "In"}


def _excludes(template: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """Label values a node must not have (NotIn), or () for a label it must not carry at all."""
    constraints = node_constraints(template.get("spec") or {})
    return {k: values for k, op, values in constraints if op in ("NotIn", "DoesNotExist")}


def _replicas(workload: WorkloadReport, templates: list[_Template], context: Context) -> list[Replica]:
    replicas = []
    index = 0
    for template in templates:
        if template.translated is None:
            continue
        resources = _pod_resources(template.translated)
        size = Decimal(str(float(_gpu_equivalents(template, context))))
        own = tuple((template.translated.get("spec") or {}).get("tolerations") or ())
        tolerations = own + admitted_tolerations(resources, context.target)
        for _ in range(template.replicas):
            replicas.append(
                Replica(
                    workload.key,
                    index,
                    size,
                    resources,
                    _requires(template.translated),
                    tolerations,
                    _excludes(template.translated),
                )
            )
            index += 1
    return replicas


def admitted_tolerations(resources: Mapping[str, Decimal], target: CloudMap) -> tuple[Mapping[str, str], ...]:
    """What the target's ExtendedResourceToleration admission plugin adds to a pod asking `resources`:
    a NoSchedule toleration keyed by each extended resource's name (a MIG slice's own name, so a
    nvidia.com/gpu taint is not tolerated by a pod asking nvidia.com/mig-1g.5gb)."""
    if not target.extended_resource_toleration:
        return ()
    return tuple({"key": name, "operator": "Exists", "effect": "NoSchedule"} for name in sorted(resources))


def _admission_note(templates: list[_Template], inventory: Inventory | None, target: CloudMap) -> str:
    """Said when a template's pods tolerate a node's taint only by what the target adds at admission,
    naming those templates (a Ray head asking no GPU gets no such toleration)."""
    if inventory is None or not target.extended_resource_toleration:
        return ""
    taints = {
        f"{t.get('key')}:NoSchedule": t
        for n in inventory.nodes
        for t in n.taints
        if t.get("effect") == "NoSchedule"
    }
    tolerated: dict[str, list[str]] = {}
    for template in templates:
        if template.translated is None:
            continue
        own = tuple((template.translated.get("spec") or {}).get("tolerations") or ())
        added = admitted_tolerations(_pod_resources(template.translated), target)
        for said, taint in sorted(taints.items()):
            if not tolerates(own, taint) and tolerates(added, taint):
                tolerated.setdefault(said, []).append(template.path or "/")
    return "".join(
        f"; {', '.join(paths)} tolerate{'s' if len(paths) == 1 else ''} the {said} taint by the toleration "
        f"{target.name} adds at admission (ExtendedResourceToleration), not written in the manifest"
        for said, paths in sorted(tolerated.items())
    )


def _whole_gpus(template: _Template) -> int:
    """Whole GPUs one pod holds at once (the most one node must hold)."""
    return held_at_once([(a, a.count) for a in template.demand.asks if a.kind == "whole"], 0, max)


def _gpu_equivalents(template: _Template, context: Context) -> Fraction:
    """GPU-equivalents of one pod, by the same rule the webhook's quota counts with."""
    return pod_use(template.demand, context.target, context.dialects.catalogue).equivalents


def _checks(
    workload: WorkloadReport,
    templates: list[_Template],
    source: CloudMap,
    context: Context,
    inventory: Inventory | None,
    present: set[str] | None,
    packed: bool,
    workloads: list[WorkloadReport],
    templates_by_workload: Mapping[str, list[_Template]],
) -> dict[str, tuple[float, str]]:
    target = context.target
    catalogue = context.dialects.catalogue
    asks = [a for t in templates for a in t.demand.asks]
    models = set().union(*(t.demand.selection.models or () for t in templates))
    results: dict[str, tuple[float, str]] = {}

    failed = [t for t in templates if t.translated is None]
    if failed:
        results["resource_names"] = (0.0, "not translatable: " + "; ".join(failed[0].problems))
    elif any(t.needed_policy for t in templates):
        results["resource_names"] = (
            0.5,
            f"translatable only by the {target.name} map's policy "
            f"(fractional: {target.fractional_policy}, mig_to_whole: {target.mig_to_whole})",
        )
    else:
        changed = [line for line in workload.translated]
        results["resource_names"] = (1.0, "translates as is: " + "; ".join(changed))
    # Devices beside the GPUs kept as written that the target may not have: said, and only half sure.
    unsure = [
        w.removeprefix("gpuport: ")
        for t in templates
        if t.translated is not None
        for w in plan_devices(t.demand.resource_names, target, context.dialects).warnings
    ]
    if unsure:
        score = min(results["resource_names"][0], 0.5)
        results["resource_names"] = (score, "; ".join(dict.fromkeys(unsure)))

    results["gpu_model"] = model_check(models, target, catalogue, present)
    results["gpu_memory"] = memory_check(asks, models, target, catalogue)
    results["mig_sharing_mode"] = mode_check(asks, target)
    results["driver_cuda"] = driver_check([t.original for t in templates], target, inventory)
    translated = [t.translated for t in templates if t.translated is not None]
    per_pod = max(map(_whole_gpus, templates), default=0) if target.dra is not None else None
    results["topology"] = topology_check(translated, inventory, models, catalogue, per_pod, target.whole_gpu)
    if failed:  # a refused template is no pod on the target: its GPUs are not "one per pod"
        paths = ", ".join(t.path or "/" for t in failed)
        if not translated:
            results["topology"] = (0.5, f"not checked: translation refuses {paths} (see resource_names)")
        else:
            compat, why = results["topology"]
            results["topology"] = (
                min(compat, 0.5),
                f"{why}; not checked for {paths}: refused by translation",
            )
    if not packed:
        results["capacity"] = (0.5, "not checked: no inventory of the target (--inventory)")
    elif target.dra is not None:
        results["capacity"] = (
            0.5,
            "not checked: a DRA cluster's devices are in ResourceSlices, which the inventory does not list",
        )
    elif workload.replicas == 0:
        results["capacity"] = (1.0, "no replicas")
    elif workload.refused:
        placed = sum(workload.placement.values())
        results["capacity"] = (
            placed / workload.replicas,
            f"{placed}/{workload.replicas} replicas fit; {workload.refused} refused by translation "
            f"(never created, so fitting nowhere): {'; '.join(failed[0].problems)}",
        )
    else:
        placed = workload.replicas - workload.pending
        where = (
            ", ".join(f"{node} ×{count}" for node, count in sorted(workload.placement.items())) or "nowhere"
        )
        why = f"{placed}/{workload.replicas} replicas fit ({where})"
        if workload.pending:
            why += f"; {workload.pending} stay Pending: {workload.why_pending}"
        why += _admission_note(templates, inventory, target)
        results["capacity"] = (placed / workload.replicas, why)
    results["quota"] = _quota_check(workload, inventory, target, context, workloads, templates_by_workload)
    return results


def _quota_check(
    workload: WorkloadReport,
    inventory: Inventory | None,
    target: CloudMap,
    context: Context,
    workloads: list[WorkloadReport],
    templates_by_workload: Mapping[str, list[_Template]],
) -> tuple[float, str]:
    if inventory is None:
        return 0.5, "not checked: no inventory"
    quotas = [
        q
        for q in inventory.quotas
        if q.namespace == workload.namespace and f"requests.{target.whole_gpu}" in q.hard
    ]
    if not quotas:
        return 1.0, f"no GPU quota for namespace {workload.namespace} in the inventory"
    moved = sum(
        (
            _gpu_equivalents(t, context) * t.replicas
            for w in workloads
            if w.namespace == workload.namespace
            for t in templates_by_workload[w.key]
        ),
        Fraction(0),
    )
    # What the namespace's running pods hold is charged already, as the webhook's quota charges it.
    running = sum(
        (_running_use(p, context) for p in inventory.pods if p.namespace == workload.namespace),
        Fraction(0),
    )
    used = moved + running
    held = f" ({float(running):g} held by running pods)" if running else ""
    limit = min(q.hard[f"requests.{target.whole_gpu}"] for q in quotas)
    if used <= Fraction(str(limit)):
        return 1.0, f"{float(used):g} of {limit} GPU-equivalents in {workload.namespace}{held}"
    return (
        0.0,
        f"{workload.namespace} would need {float(used):g} GPU-equivalents{held}; quota allows {limit}",
    )


def _describe_gpu(template: Mapping[str, Any], claim_templates: list[dict[str, Any]]) -> str:
    parts = [f"claim of {t['metadata']['annotations'][ASKS_ANNOTATION]}" for t in claim_templates]
    for name, value in sorted(_pod_resources(template).items()):
        parts.append(f"{name}: {value}")
    for key, values in sorted(_requires(template).items()):
        parts.append(f"{key}={'|'.join(values)}")
    return ", ".join(parts) or "no GPU"


def _waves(workloads: list[WorkloadReport], size: int) -> list[list[str]]:
    ordered = sorted(workloads, key=lambda w: (CATEGORY_RANK[w.category], w.risk, w.key))
    keys = [w.key for w in ordered]
    return [keys[i : i + size] for i in range(0, len(keys), max(size, 1))] if keys else []
