"""Migration preflight: for every workload, what changes, what breaks, how risky the move is, and
whether it fits — from the same translation core as the webhook.

Risk = Σ_f w_f × (1 − compat_f) over the checks below; compat_f ∈ [0, 1] with partial credit, each
with the reason it got. Pure: manifests, maps and inventory in, a Report out.
"""

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from decimal import Decimal
from fractions import Fraction
from typing import Any

import jsonpatch

from webhook.core import quantity
from webhook.core.admission import Context, rewrite_pod
from webhook.core.catalogue import Catalogue
from webhook.core.checks import check_pod_spec, is_extended_resource
from webhook.core.cuda import container_cuda, driver_runs, max_cuda_for, parse_version
from webhook.core.demand import ContainerAsk, PodDemand, node_constraints, read_demand
from webhook.core.equivalents import pod_use
from webhook.core.inventory import Inventory, Node
from webhook.core.packing import Replica, pack
from webhook.core.platform import CloudMap
from webhook.core.templates import pod_templates, unread_reason
from webhook.core.translate import Untranslatable
from webhook.core.workloads import containers, mapping_at, requested, resource_entries, resource_section

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
TRAINING_KINDS = {"Job", "CronJob", "PyTorchJob", "JobSet"}
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

    @property
    def passed(self) -> bool:
        """Every workload under the risk limit, and none left Pending: not fitting is a fact, not a risk.
        A GPU workload gpuport could not read is no pass either: nothing about it is known."""
        return not self.unread and all(w.risk <= self.max_risk and not w.pending for w in self.workloads)


@dataclass
class _Template:
    path: str
    original: dict[str, Any]
    translated: dict[str, Any] | None
    replicas: int
    problems: list[str]
    needed_policy: str
    demand: PodDemand  # the original template's GPU asks, read once


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
    for doc in documents:
        if not isinstance(doc, Mapping):
            continue
        reason = unread_reason(doc, lambda name: name in context.dialects)
        if reason:
            metadata = doc.get("metadata") or {}
            unread.append(
                f"{doc.get('kind')}/{metadata.get('namespace', 'default')}/{metadata.get('name')}: {reason}"
            )
        if not list(pod_templates(doc)):
            continue
        report, templates = _workload(doc, context, inventory)
        if not any(t.demand.asks for t in templates):
            continue  # CPU-only workloads are not part of a GPU migration
        workloads.append(report)
        templates_by_workload[report.key] = templates

    replicas = [r for w in workloads for r in _replicas(w, templates_by_workload[w.key], context)]
    packing = pack(replicas, inventory.nodes) if inventory else None
    for workload in workloads:
        templates = templates_by_workload[workload.key]
        if packing is not None:
            for (name, _), node in packing.placed.items():
                if name == workload.key:
                    workload.placement[node] = workload.placement.get(node, 0) + 1
            workload.pending = sum(1 for r in packing.pending if r.workload == workload.key)
        workload.checks = [
            CheckResult(check, compat, weights[check], why)
            for check, (compat, why) in _checks(
                workload,
                templates,
                source,
                context,
                inventory,
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
    )


def _workload(
    doc: Mapping[str, Any], context: Context, inventory: Inventory | None
) -> tuple[WorkloadReport, list[_Template]]:
    kind = str(doc.get("kind"))
    metadata = doc.get("metadata") or {}
    category = ((metadata.get("annotations") or {}).get(CLASS_ANNOTATION) or "").strip()
    if category not in CATEGORY_RANK:
        # By kind when the owner has not said; a Deployment may well train, hence the annotation.
        category = (
            "training"
            if kind in TRAINING_KINDS
            else "stateful"
            if kind == "StatefulSet"
            else "inference/stateless"
        )
    templates = []
    for path, template in pod_templates(doc):
        original = copy.deepcopy(dict(template))
        original.setdefault("metadata", {})
        translated, problems, needed = _translate(original, context)
        templates.append(
            _Template(
                path,
                original,
                translated,
                _replica_count(doc, path, inventory),
                problems,
                needed,
                read_demand(original, context.dialects),
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
            report.translated.append(f"{template.path or '/'}: {_describe_gpu(template.translated)}")
        else:
            report.translated.append(f"{template.path or '/'}: not translatable")
    return report, templates


def _translate(template: dict[str, Any], context: Context) -> tuple[dict[str, Any] | None, list[str], str]:
    """The translated template; problems when it cannot be; and which policy it needed, if any."""
    strict = replace(context, target=replace(context.target, fractional_policy="deny", mig_to_whole="deny"))
    first_error: list[str] = []
    for attempt, label in ((strict, ""), (context, "policy")):
        violations = check_pod_spec(template["spec"], ("spec",), attempt.target, attempt.dialects)
        if violations:
            first_error = first_error or [v.message for v in violations]
            continue
        try:
            patch, _ = rewrite_pod(template, attempt)
        except Untranslatable as exc:
            first_error = first_error or list(exc.messages)
            continue
        return jsonpatch.apply_patch(template, patch), [], label
    return None, first_error, ""


def _replica_count(doc: Mapping[str, Any], path: str, inventory: Inventory | None) -> int:
    kind = doc.get("kind")
    spec = doc.get("spec") or {}
    if kind in ("Deployment", "StatefulSet", "ReplicaSet"):
        return int(spec.get("replicas", 1))
    if kind == "Job":
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
    return _nearest_replicas(doc, path)


def _nearest_replicas(doc: Mapping[str, Any], path: str) -> int:
    """The `replicas` of the closest object holding the template (a Ray worker group, a replica type,
    a Volcano task, the LeaderWorkerSet itself); 1 when none says."""
    replicas = 1
    node: Any = doc
    for part in path.strip("/").split("/")[:-1]:
        node = (
            node.get(part.replace("~1", "/").replace("~0", "~"))
            if isinstance(node, Mapping)
            else (node[int(part)] if isinstance(node, list) else None)
        )
        if isinstance(node, Mapping) and isinstance(node.get("replicas"), int):
            replicas = node["replicas"]
    return replicas


def _pod_resources(template: Mapping[str, Any]) -> dict[str, Decimal]:
    """Extended resources one pod asks for: app containers add up, init containers take the max."""
    totals: dict[str, Decimal] = {}
    for container in containers(mapping_at(template, ("spec",)) or {}):
        names = {*resource_section(container.spec, "requests"), *resource_section(container.spec, "limits")}
        for name in filter(is_extended_resource, names):
            amount = quantity.parse(requested(container.spec, name))
            if container.list_name == "containers":
                totals[name] = totals.get(name, Decimal(0)) + amount
            else:
                totals[name] = max(totals.get(name, Decimal(0)), amount)
    return totals


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
        for _ in range(template.replicas):
            replicas.append(
                Replica(
                    workload.key,
                    index,
                    size,
                    resources,
                    _requires(template.translated),
                    tuple((template.translated.get("spec") or {}).get("tolerations") or ()),
                    _excludes(template.translated),
                )
            )
            index += 1
    return replicas


def _gpu_equivalents(template: _Template, context: Context) -> Fraction:
    """GPU-equivalents of one pod, by the same rule the webhook's quota counts with."""
    return pod_use(template.original, template.demand, context.target, context.dialects.catalogue).equivalents


def _checks(
    workload: WorkloadReport,
    templates: list[_Template],
    source: CloudMap,
    context: Context,
    inventory: Inventory | None,
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

    results["gpu_model"] = _model_check(models, target, catalogue)
    results["gpu_memory"] = _memory_check(asks, models, target, catalogue)
    results["mig_sharing_mode"] = _mode_check(asks, target)
    results["driver_cuda"] = _driver_check(templates, target, inventory)
    results["topology"] = _topology_check(templates, inventory, models, catalogue)
    if not packed:
        results["capacity"] = (0.5, "not checked: no inventory of the target (--inventory)")
    elif workload.replicas == 0:
        results["capacity"] = (1.0, "no replicas")
    else:
        placed = workload.replicas - workload.pending
        where = (
            ", ".join(f"{node} ×{count}" for node, count in sorted(workload.placement.items())) or "nowhere"
        )
        why = f"{placed}/{workload.replicas} replicas fit ({where})"
        if workload.pending:
            why += f"; {workload.pending} stay Pending"
        results["capacity"] = (placed / workload.replicas, why)
    results["quota"] = _quota_check(workload, inventory, target, context, workloads, templates_by_workload)
    return results


def _model_check(models: set[str], target: CloudMap, catalogue: Catalogue) -> tuple[float, str]:
    if not models:
        return 1.0, "no GPU model pinned"
    offered = target.models_offered(catalogue)
    same = sorted(models & set(offered))
    if same:
        return 1.0, f"same model offered: {', '.join(same)}"
    for model_id in sorted(models):
        best = catalogue.equivalent(model_id, offered)
        if best is not None:
            return 0.7, f"{model_id} not offered; equivalent with ≥ memory: {best.id} ({best.memory_gb} GB)"
    return (
        0.0,
        f"{' / '.join(sorted(models))} not offered and nothing with as much memory ({', '.join(offered)})",
    )


def _memory_check(
    asks: list[ContainerAsk], models: set[str], target: CloudMap, catalogue: Catalogue
) -> tuple[float, str]:
    worst = (1.0, "every ask gets at least the memory it had")
    for ask in asks:
        if ask.kind == "mig":
            candidates = [
                catalogue.models[m]
                for m in (models & set(target.models_offered(catalogue)) or target.models_offered(catalogue))
            ]
            fits = [p for m in candidates if m.mig_capable and (p := m.smallest_fit(ask.mig_profile))]
            if target.mig.form == "none" or not fits:
                result = (0.0, f"no slice with ≥ {ask.mig_profile.memory_gb} GB on {target.name}")
            else:
                result = (1.0, f"{ask.mig_profile.name} → {min(fits).name}: ≥ {ask.mig_profile.memory_gb} GB")
        elif ask.kind == "shared" and ask.share and ask.share.memory_mib:
            if target.shared.form == "memory":
                result = (1.0, f"{ask.share.memory_mib} MiB stays a memory limit")
            elif target.shared.form in ("resource", "label"):
                result = (0.5, f"{ask.share.memory_mib} MiB becomes time-slicing: memory is no longer capped")
            else:
                result = (0.0, f"{target.name} offers no shared GPUs")
        elif ask.kind == "shared" and target.shared.form == "memory":
            result = (0.0, f"{target.name} shares by memory and the ask names no size")
        else:
            continue
        worst = min(worst, result, key=lambda r: r[0])
    return worst


def _mode_check(asks: list[ContainerAsk], target: CloudMap) -> tuple[float, str]:
    worst = (1.0, "whole GPUs" if all(a.kind == "whole" for a in asks) else "the form asked for is offered")
    for ask in asks:
        if ask.kind == "mig":
            if target.mig.form != "none":
                result = (1.0, f"MIG offered ({target.mig.form})")
            elif target.mig_to_whole == "allow":
                result = (0.5, "no MIG: whole GPUs by policy")
            else:
                result = (0.0, f"{target.name} offers no MIG")
        elif ask.kind == "shared":
            result = (
                (1.0, f"sharing offered ({target.shared.form})")
                if target.shared.form != "none"
                else (0.0, f"{target.name} offers no GPU sharing")
            )
        elif ask.kind == "fraction":
            result = (
                (0.5, f"fraction by policy ({target.fractional_policy})")
                if target.fractional_policy != "deny"
                else (0.0, "fractional GPU")
            )
        else:
            continue
        worst = min(worst, result, key=lambda r: r[0])
    return worst


def _node_cuda(node: Node) -> tuple[tuple[int, ...] | None, str, str]:
    """(version, "runtime" or "driver", the label text): GFD's runtime labels give the newest CUDA the
    driver runs; without them the driver version goes through the table in webhook/core/cuda.py."""
    labels = node.labels
    major, minor = (
        labels.get("nvidia.com/cuda.runtime-version.major"),
        labels.get("nvidia.com/cuda.runtime-version.minor"),
    )
    if major and minor:
        return (int(major), int(minor)), "runtime", f"{major}.{minor}"
    full = labels.get("nvidia.com/cuda.driver-version.full") or ".".join(
        labels[k]
        for k in (
            "nvidia.com/cuda.driver-version.major",
            "nvidia.com/cuda.driver-version.minor",
            "nvidia.com/cuda.driver-version.revision",
        )
        if k in labels
    )
    driver = parse_version(full) if full else None
    return (driver, "driver", full) if driver else (None, "", "")


def _driver_check(
    templates: list[_Template], target: CloudMap, inventory: Inventory | None
) -> tuple[float, str]:
    needs = [container_cuda(t.original) for t in templates]
    cuda = max((c for c, _ in needs if c), default=None)
    if cuda is None:
        return 0.5, needs[0][1] if needs else "no containers"
    where = next(w for c, w in needs if c == cuda)
    versions: list[tuple[float, str]] = []
    nodes = [
        n
        for n in (inventory.nodes if inventory else ())
        if any(is_extended_resource(r) for r in n.allocatable)
    ]
    for node in nodes:
        version, kind, text = _node_cuda(node)
        if version is None:
            continue
        if kind == "runtime":
            versions.append(
                (1.0 if version >= cuda else 0.0, f"{node.name} runs CUDA ≤ {version[0]}.{version[1]}")
            )
        else:
            top = max_cuda_for(version)
            shown = f"{top[0]}.{top[1]}" if top else "none"
            versions.append(
                (
                    driver_runs(version, cuda),
                    f"{node.name} driver {text} (CUDA ≤ {shown})",
                )
            )
    if not versions and target.driver_version:
        driver = parse_version(target.driver_version)
        if driver is not None:
            versions.append(
                (driver_runs(driver, cuda), f"{target.name} default driver {target.driver_version}")
            )
    if not versions:
        return (
            0.5,
            f"CUDA {cuda[0]}.{cuda[1]} ({where}); target driver unknown (no inventory labels or map default)",
        )
    compat, why = min(versions, key=lambda v: v[0])
    return compat, f"CUDA {cuda[0]}.{cuda[1]} ({where}) on {why}" + (
        " — minor-version compatibility only" if compat == 0.5 else ""
    )


def _topology_check(
    templates: list[_Template], inventory: Inventory | None, models: set[str], catalogue: Catalogue
) -> tuple[float, str]:
    k = 0
    for t in templates:
        if t.translated is None:
            continue
        spec = mapping_at(t.translated, ("spec",)) or {}
        for _, name, value in resource_entries(spec, "limits", ("containers",)):
            if is_extended_resource(name) and "mig-" not in name and not name.endswith(".shared"):
                k = max(k, int(quantity.parse(value)))
    if k <= 1:
        return 1.0, "one GPU per pod: no topology needs"
    if inventory is None:
        return 0.5, f"{k} GPUs per pod; not checked: no inventory"
    widest, nvlink = 0, None
    for node in inventory.nodes:
        gpus = max(
            (int(v) for n, v in node.allocatable.items() if is_extended_resource(n) and "mig-" not in n),
            default=0,
        )
        widest = max(widest, gpus)
        domain = node.capability.get("nvlink_domain_size") if node.capability else None
        if domain is not None:
            nvlink = max(nvlink or 0, int(domain))
    if widest < k:
        return 0.0, f"{k} GPUs per pod but the largest node has {widest}"
    if nvlink is None:
        return 0.8, f"{k} GPUs per pod fit on one node; NVLink unknown (no node-agent data)"
    if nvlink >= k:
        return 1.0, f"{k} GPUs per pod; NVLink domains of {nvlink}"
    return 0.5, f"{k} GPUs per pod but NVLink domains hold {nvlink}: traffic crosses PCIe"


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
    used = sum(
        (
            _gpu_equivalents(t, context) * t.replicas
            for w in workloads
            if w.namespace == workload.namespace
            for t in templates_by_workload[w.key]
        ),
        Fraction(0),
    )
    limit = min(q.hard[f"requests.{target.whole_gpu}"] for q in quotas)
    if used <= Fraction(str(limit)):
        return 1.0, f"{float(used):g} of {limit} GPU-equivalents in {workload.namespace}"
    return 0.0, f"{workload.namespace} would need {float(used):g} GPU-equivalents; quota allows {limit}"


def _describe_gpu(template: Mapping[str, Any]) -> str:
    parts = []
    for name, value in sorted(_pod_resources(template).items()):
        parts.append(f"{name}: {value}")
    for key, values in sorted(_requires(template).items()):
        parts.append(f"{key}={'|'.join(values)}")
    return ", ".join(parts) or "no GPU"


def _waves(workloads: list[WorkloadReport], size: int) -> list[list[str]]:
    ordered = sorted(workloads, key=lambda w: (CATEGORY_RANK[w.category], w.risk, w.key))
    keys = [w.key for w in ordered]
    return [keys[i : i + size] for i in range(0, len(keys), max(size, 1))] if keys else []
