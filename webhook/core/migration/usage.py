"""`gpuport usage` as values: per node and GPU what the node agent measured beside what the pods ask.

A GPU's row: its model, its mode (whole, MIG <profile>, or shared: the node carries a sharing label
a loaded map knows, more than one pod's processes run on it, or a pod on the node asks for a share),
the pods whose processes run on it, its memory used of its total and its Util_eff (compute busy;
memory used ÷ total). A node's row: every pod bound there that asks for GPUs, what they are allocated
in GPU-equivalents (as the quota counts them: webhook.core.budget.equivalents), and the Util_eff
the agent published. The cluster's totals: Σ used ÷ Σ capacity (memory in MiB; compute in
GPU-equivalents, a MIG instance weighing its slice share), and allocated ÷ the GPUs the agents
report. Unknown figures are left out of every sum and said, never counted as 0.

Without a usable agent record a node still counts what the cluster says: the GPUs its device plugin
advertises (else its labels' count) and the model its labels name; only memory, Util_eff and each
GPU's mode and pods need the agent, and the notes say so.

Why one module of ~340 lines: one report made in one pass over the nodes and pods, whose rows, totals
and notes share the NodeRow record; reading the agent's record is in usage_record.py.

It lives in the migration part (the top of the core) because it reads pods' asks and prices them in
GPU-equivalents, as the preflight's capacity check does.
"""

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

from webhook.core.asks.demand import read_demand
from webhook.core.budget.equivalents import pod_use
from webhook.core.deciding.context import Context
from webhook.core.migration.usage_record import MeasuredDevice, MeasuredNode, UsageRecordError, read_measured
from webhook.core.vocabulary import quantity
from webhook.core.vocabulary.catalogue import Catalogue, MigProfile, ProfileError
from webhook.core.vocabulary.inventory import GFD_REPLICAS, labelled_gpu_count, labelled_models
from webhook.core.vocabulary.topology import CAPABILITY_ANNOTATION
from webhook.core.vocabulary.workloads import is_map, mapping_at

NodeState = Literal["measured", "no agent data", "no usage data", "bad agent data"]
DONE = ("Succeeded", "Failed")  # a pod in these phases holds nothing
_COMPUTE_INSTANCE = re.compile(r"^[1-9][0-9]*c\.")  # go-nvlib's "<c>c.<g>g.<m>gb"


@dataclass(frozen=True)
class GpuRow:
    index: int
    uuid: str | None
    model: str | None
    mode: str  # "whole", "MIG <profile>", "shared"
    pods: tuple[str, ...]  # namespace/name of the pods whose processes run here ("uid <8>" if unlisted)
    memory_used_mib: int | None
    memory_total_mib: int | None
    compute: Fraction | None  # Util_eff: compute_percent / 100
    memory: Fraction | None  # Util_eff: used / total
    weight: Fraction | None  # its capacity in GPU-equivalents (a MIG slice's share); None: unknown
    podless: int = 0  # processes the agent found no pod for


@dataclass(frozen=True)
class NodeRow:
    name: str
    state: NodeState
    problem: str  # why the agent's record could not be read ("" when it could)
    pods: tuple[str, ...]  # every pod bound here that asks for GPUs
    allocated: Fraction  # GPU-equivalents those pods ask for
    gpus: tuple[GpuRow, ...] = ()
    capacity: int = 0  # physical GPUs the agent reports
    util_eff_compute: float | None = None  # as the agent published them
    util_eff_memory: float | None = None
    memory_fill_limit: float | None = None
    shared_memory_full: bool | None = None
    # Without a usable agent record, what the cluster already says: the GPUs the device plugin
    # advertises (else the labels' count) and the model the labels name (GFD's product, an instance type).
    advertised: int | None = None
    model: str | None = None

    @property
    def memory_used_mib(self) -> int | None:
        known = [g for g in self.gpus if g.memory_used_mib is not None and g.memory_total_mib is not None]
        return sum(g.memory_used_mib or 0 for g in known) if known else None

    @property
    def memory_total_mib(self) -> int | None:
        known = [g for g in self.gpus if g.memory_used_mib is not None and g.memory_total_mib is not None]
        return sum(g.memory_total_mib or 0 for g in known) if known else None


@dataclass(frozen=True)
class UsageTotals:
    nodes: int  # nodes whose agent record was read
    gpus: int  # their physical GPUs, and those advertised by the others: what allocation is against
    allocated: Fraction  # GPU-equivalents allocated on the nodes whose GPUs are counted
    allocation_ratio: Fraction | None  # allocated ÷ gpus; None without GPUs
    memory_used_mib: int  # over the GPUs whose memory figures are both known
    memory_total_mib: int
    memory: Fraction | None  # Σ used ÷ Σ total
    compute: Fraction | None  # Σ (busy × weight) ÷ Σ weight over the GPUs whose compute is known
    compute_capacity: Fraction  # that Σ weight, in GPU-equivalents
    advertised_nodes: int = 0  # nodes without agent data whose GPUs are counted from the cluster's word


@dataclass(frozen=True)
class UsageReport:
    nodes: tuple[NodeRow, ...]
    totals: UsageTotals
    notes: tuple[str, ...]


def usage_report(
    nodes: Sequence[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]], context: Context
) -> UsageReport:
    """From the Node objects and Pods as the API server serves them (camelCase dicts)."""
    names = {}
    bound: dict[str, list[tuple[str, Fraction, bool, bool]]] = {}
    claimed = 0
    for pod in pods:
        metadata = _at(pod, "metadata")
        name = f"{metadata.get('namespace', '?')}/{metadata.get('name', '?')}"
        if isinstance(metadata.get("uid"), str):
            names[metadata["uid"]] = name
        spec, status = _at(pod, "spec"), _at(pod, "status")
        node = spec.get("nodeName")
        if not isinstance(node, str) or not node or status.get("phase") in DONE:
            continue
        demand = read_demand(pod, context.dialects)
        dra = bool(spec.get("resourceClaims"))
        if not demand.asks and not dra:
            continue
        claimed += dra
        use = pod_use(demand, context.target, context.dialects.catalogue).equivalents
        shares = any(a.kind == "shared" for a in demand.asks)
        bound.setdefault(node, []).append((name, use, shares, dra))
    sharing_labels = {m.shared.node_label for m in context.dialects.maps if m.shared.node_label}
    catalogue = context.dialects.catalogue
    rows, unlisted = [], 0
    for node in sorted(nodes, key=_node_name):
        name = _node_name(node)
        annotations = _at(node, "metadata", "annotations")
        labels = _at(node, "metadata", "labels")
        here = bound.get(name, [])
        pods_here = tuple(sorted(p[0] for p in here))
        allocated = sum((p[1] for p in here), Fraction(0))
        text = annotations.get(CAPABILITY_ANNOTATION)
        advertised, model = _advertised(node, labels, context), _labelled_model(labels, context)
        if text is None:
            if here or _offers_gpus(node, context):
                rows.append(
                    NodeRow(
                        name, "no agent data", "", pods_here, allocated, advertised=advertised, model=model
                    )
                )
            else:
                unlisted += 1
            continue
        try:
            measured = read_measured(text)
        except UsageRecordError as exc:
            problem = f"{CAPABILITY_ANNOTATION}: {exc}"
            rows.append(
                NodeRow(
                    name, "bad agent data", problem, pods_here, allocated, advertised=advertised, model=model
                )
            )
            continue
        if measured is None:
            rows.append(
                NodeRow(name, "no usage data", "", pods_here, allocated, advertised=advertised, model=model)
            )
            continue
        shared_node = any(k in labels for k in sharing_labels) or any(p[2] for p in here)
        gpus = tuple(_gpu_row(d, measured, shared_node, names, catalogue) for d in _ordered(measured))
        rows.append(
            NodeRow(
                name,
                "measured",
                "",
                pods_here,
                allocated,
                gpus,
                len(measured.gpu_indexes),
                measured.util_eff_compute,
                measured.util_eff_memory,
                measured.memory_fill_limit,
                measured.shared_memory_full,
            )
        )
    return UsageReport(tuple(rows), _totals(rows), _notes(rows, claimed, unlisted))


def _gpu_row(
    device: MeasuredDevice,
    node: MeasuredNode,
    shared_node: bool,
    names: Mapping[str, str],
    catalogue: Catalogue,
) -> GpuRow:
    uids = {p.pod_uid for p in device.processes if p.pod_uid}
    if device.mig_profile:
        mode = f"MIG {device.mig_profile}"
    elif shared_node or len(uids) > 1:
        mode = "shared"
    else:
        mode = "whole"
    model = device.model or node.gpu_models.get(device.index)
    used, total = device.memory_used_mib, device.memory_total_mib
    return GpuRow(
        index=device.index,
        uuid=device.uuid,
        model=model,
        mode=mode,
        pods=tuple(sorted(names.get(uid, f"uid {uid[:8]}") for uid in uids)),
        memory_used_mib=used,
        memory_total_mib=total,
        compute=None if device.compute_percent is None else Fraction(device.compute_percent, 100),
        memory=Fraction(used, total) if used is not None and total else None,
        weight=_weight(device.mig_profile, model, catalogue),
        podless=sum(1 for p in device.processes if not p.pod_uid),
    )


def _weight(profile: str | None, model: str | None, catalogue: Catalogue) -> Fraction | None:
    """A device's capacity in GPU-equivalents: 1 for a GPU, its slice share for a MIG instance; a
    compute instance holding fewer slices than its GPU instance ("1c.3g.40gb") weighs its own slices."""
    if not profile:
        return Fraction(1)
    compute, _, instance = profile.partition("c.") if _COMPUTE_INSTANCE.match(profile) else ("", "", profile)
    try:
        parsed = MigProfile.parse(instance)
    except ProfileError:
        return None
    share = catalogue.compute_share(parsed, {model} if model else None)
    return share * Fraction(int(compute), parsed.compute) if compute else share


def _totals(rows: Sequence[NodeRow]) -> UsageTotals:
    measured = [r for r in rows if r.state == "measured"]
    advertised = [r for r in rows if r.state != "measured" and r.advertised is not None]
    gpus = [g for r in measured for g in r.gpus]
    capacity = sum(r.capacity for r in measured) + sum(r.advertised or 0 for r in advertised)
    allocated = sum((r.allocated for r in [*measured, *advertised]), Fraction(0))
    memory = [g for g in gpus if g.memory_used_mib is not None and g.memory_total_mib is not None]
    used = sum(g.memory_used_mib or 0 for g in memory)
    total = sum(g.memory_total_mib or 0 for g in memory)
    busy = [(g.compute, g.weight) for g in gpus if g.compute is not None and g.weight is not None]
    weight = sum((w for _, w in busy), Fraction(0))
    return UsageTotals(
        nodes=len(measured),
        gpus=capacity,
        allocated=allocated,
        allocation_ratio=allocated / capacity if capacity else None,
        memory_used_mib=used,
        memory_total_mib=total,
        memory=Fraction(used, total) if total else None,
        compute=sum((c * w for c, w in busy), Fraction(0)) / weight if weight else None,
        compute_capacity=weight,
        advertised_nodes=len(advertised),
    )


def _notes(rows: Sequence[NodeRow], claimed: int, unlisted: int) -> tuple[str, ...]:
    notes = [f"{r.name}: {r.problem}" for r in rows if r.problem]
    gpus = [g for r in rows for g in r.gpus]
    no_memory = sum(1 for g in gpus if g.memory_used_mib is None or g.memory_total_mib is None)
    no_compute = sum(1 for g in gpus if g.compute is None)
    if no_memory or no_compute:
        notes.append(
            f"unknown figures (-: the agent could not read them) are left out of every sum: memory of "
            f"{no_memory} GPU(s), compute of {no_compute}"
        )
    if any(g.compute is not None and g.weight is None for g in gpus):
        notes.append(
            "compute of a MIG instance whose profile is not a known MIG profile is left out of the totals"
        )
    podless = sum(g.podless for g in gpus)
    if podless:
        notes.append(f"{podless} GPU process(es) carry no pod UID (not a pod's, or the agent could not tell)")
    said = [r for r in rows if r.state != "measured" and r.advertised is not None]
    if said:
        notes.append(
            f"{len(said)} node(s) without usable agent data ({', '.join(r.name for r in said)}): their "
            "GPUs are counted as the device plugin advertises them (else as their labels say) and their "
            "model is read from their labels; memory, Util_eff, each GPU's mode and the pods on it need "
            "the node agent (gpuport node-agent)"
        )
    outside = [r for r in rows if r.state != "measured" and r.advertised is None]
    if outside:
        held = sum((r.allocated for r in outside), Fraction(0))
        notes.append(
            f"{len(outside)} node(s) without usable agent data or a GPU count the cluster gives: their GPUs "
            f"and the {float(held):.3g} GPU-equivalent(s) allocated there are not in the totals"
        )
    if claimed:
        notes.append(
            f"{claimed} pod(s) ask for GPUs by DRA claim: the claims are not read here, so not in allocated"
        )
    if unlisted:
        notes.append(f"{unlisted} node(s) with no GPU, no GPU pod and no agent data are not listed")
    return tuple(notes)


def _ordered(node: MeasuredNode) -> list[MeasuredDevice]:
    return sorted(node.devices, key=lambda d: (d.index, d.mig_profile or "", d.uuid or ""))


def _at(obj: Mapping[str, Any], *path: str) -> Mapping[str, Any]:
    return mapping_at(obj, path) or {}


def _node_name(node: Mapping[str, Any]) -> str:
    metadata = node.get("metadata")
    return str(metadata.get("name", "?")) if is_map(metadata) else "?"


def _advertised(node: Mapping[str, Any], labels: Mapping[str, Any], context: Context) -> int | None:
    """The node's GPUs as the cluster already says: the whole GPUs its device plugin advertises (a GPU
    GFD says is shared N ways counted once), else the count its labels give; None when neither says."""
    names = {m.whole_gpu for m in context.dialects.maps}
    advertised = Fraction(0)
    for resource, amount in _at(node, "status", "allocatable").items():
        if resource in names:
            try:
                advertised += Fraction(quantity.parse(amount))
            except quantity.QuantityError:
                continue
    replicas = str(labels.get(GFD_REPLICAS, ""))
    if advertised and replicas.isdigit() and int(replicas) > 1:
        advertised /= int(replicas)
    if advertised:
        return int(advertised)
    return labelled_gpu_count({str(k): str(v) for k, v in labels.items()}, context.dialects)


def _labelled_model(labels: Mapping[str, Any], context: Context) -> str | None:
    """The model its labels name ("A100-40GB|A100-80GB" where a label does not tell them apart)."""
    models = labelled_models({str(k): str(v) for k, v in labels.items()}, context.dialects)
    return "|".join(sorted(models)) or None


def _offers_gpus(node: Mapping[str, Any], context: Context) -> bool:
    """Whether the node's allocatable names a GPU resource some loaded map reads, more than 0 of it."""
    for resource, amount in _at(node, "status", "allocatable").items():
        if any(m.is_accelerator(resource) for m in context.dialects.maps):
            try:
                if quantity.parse(amount) > 0:
                    return True
            except quantity.QuantityError:
                continue
    return False
