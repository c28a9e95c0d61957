"""Translation: canonical demand → the active cloud map's vocabulary, as a plan of pod edits.

Only what carries GPU meaning changes: GPU resource names and amounts, GPU node-selector keys and
required node-affinity expressions, tolerations and the scheduler the map asks for. Everything else
is kept. A pod already written in the target's words is never translated (foreign.is_native).

This module makes the pod-level choices (which models, which selectors go and come) and says them as
`PodEdit`s; translate_ask.py answers for one container's ask, dra.py for its claims, and
podedits.apply_edits makes the edits. Nothing here touches the pod. Why one module of ~300 lines:
the choices read each other's results (the model chosen decides the labels kept, which decide the
edits), so they are one function's steps, not separate jobs.
"""

from collections.abc import Mapping
from typing import Any, NamedTuple

from webhook.core.asks.demand import PodDemand
from webhook.core.rewriting.capacity import capacity_keys, plan_capacity
from webhook.core.rewriting.compute_class import COMPUTE_CLASS, class_removed
from webhook.core.rewriting.dra import ClaimPlan, plan_claims
from webhook.core.rewriting.foreign import Foreign
from webhook.core.rewriting.podedits import (
    AddClaim,
    AddTolerations,
    DropAnnotation,
    DropClaim,
    DropSelectors,
    PodEdit,
    RecordOriginal,
    RequireExpression,
    RequireLabel,
    Say,
    SetAnnotation,
    SetResources,
    SetScheduler,
)
from webhook.core.rewriting.reservation import RESERVATION_NAME, reservation_removed
from webhook.core.rewriting.shared_clients import sharing_lost
from webhook.core.rewriting.translate_ask import TargetAsk, Untranslatable, translate_ask
from webhook.core.vocabulary.catalogue import GpuModel
from webhook.core.vocabulary.dialects import Dialects
from webhook.core.vocabulary.platform import CloudMap, ModelLabel
from webhook.core.vocabulary.workloads import TRANSLATED_FROM

__all__ = [
    "TRANSLATED_FROM",
    "Translation",
    "Untranslatable",
    "translate_pod",
]


class Translation(NamedTuple):
    """The edits that translate a pod, each with its words, and the objects the translated pod refers
    to that must exist before it does (on a DRA cluster: the ResourceClaimTemplates its claims are
    made from)."""

    edits: list[PodEdit]
    claim_templates: list[dict[str, Any]]


def translate_pod(
    spec: Mapping[str, Any],
    demand: PodDemand,
    target: CloudMap,
    dialects: Dialects,
    declared: CloudMap,
    foreign: Foreign,
) -> Translation:
    """The edits that translate the pod whose spec is `spec`, in order, and the claim templates it
    needs. The caller has found the pod not native (is_native), so there is something to translate.
    `target` may be narrowed to what the cluster's nodes have now; `declared` is the map as written,
    the fallback when no node has what the pod asks for (an autoscaler may add one)."""
    catalogue = dialects.catalogue
    problems = list(demand.problems)  # claims it cannot say refused the pod before (rewrite_pod)
    if demand.selection.unknown:
        problems.append(
            f"node selector names no GPU model gpuport knows: {', '.join(demand.selection.unknown)}"
        )
    models, model_note = _target_models(demand, target, declared, dialects, problems)
    # On a DRA cluster a refused model stays refused in the claim (`!(productName in […])`): naming
    # every other model instead would refuse GPUs the map does not list as well.
    avoid = tuple(sorted(demand.selection.avoid)) if not models else ()
    asked_there: dict[tuple[str, int], TargetAsk] = {}
    for ask in demand.asks:
        try:
            asked_there[(ask.list_name, ask.index)] = translate_ask(ask, models, target, catalogue, avoid)
        except Untranslatable as exc:
            problems.extend(f"{ask.label} {m}" for m in exc.messages)
    needed = {m for p in asked_there.values() for m in p.models}
    if target.mig.form in ("single", "partition-label"):
        # One node has one model: the models every container's ask accepts (a slice cut the same way
        # from several models accepts each of them).
        common = set(needed)
        for placed in asked_there.values():
            common &= set(placed.models) or common
        if len(needed) > 1 and not common:
            problems.append(f"containers need different GPU models on one node ({', '.join(sorted(needed))})")
        needed = common

    node_labels: dict[str, tuple[str, ...]] = {}
    for there in asked_there.values():
        for key, values in there.node_labels.items():
            if node_labels.get(key, values) != values:
                # One node carries one value (GKE's partition size): two slices of other sizes
                # cannot both be had there, and the larger must not silently replace the smaller.
                problems.append(
                    f"containers need nodes with different {key} ({'|'.join(node_labels[key])} and "
                    f"{'|'.join(values)}); one pod runs on one node"
                )
            node_labels[key] = values
    chosen = tuple(sorted(needed)) or models
    model_key = target.model_labels[0].label if target.model_labels else ""
    model_note = model_note if chosen else ""
    rewrite_model = bool(model_note) or model_key in foreign.keys or model_key not in demand.selection.keys
    if model_key and chosen and model_key not in node_labels and rewrite_model:
        values = _values_holding(target.model_labels[0], chosen, demand, problems, model_note)
        if values:
            node_labels[model_key] = values
    # Whole GPUs of the platform's own vendor: only its GPUs are partitioned or shared there.
    whole = any(a.kind == "whole" and a.vendor == target.vendor for a in demand.asks)
    avoided: tuple[str, ...] = ()
    if model_key and not chosen and demand.selection.avoid:
        avoided = tuple(_values(target.model_labels[0], tuple(sorted(demand.selection.avoid))))
    if whole and target.mig.form == "single" and target.mig.product_label not in node_labels:
        # Slices are nvidia.com/gpu there too: only a plain product name keeps a whole GPU whole.
        # Of the target's vendor only: another vendor's GPUs the map also sells (whole_by_vendor) have
        # no name a product label of this vendor carries.
        plain = chosen or tuple(
            m for m in dialects.models_offered(target) if catalogue.models[m].vendor == target.vendor
        )
        node_labels[target.mig.product_label] = tuple(n for m in plain for n in catalogue.models[m].names)
    leaving = foreign.node_labels
    # Every map's capacity keys matter only to labels that leave (most pods select their GPU alone).
    capacity_keys_here = capacity_keys(dialects) if leaving else frozenset()
    capacity = plan_capacity(
        demand.constraints, {k: v for k, v in leaving.items() if k in capacity_keys_here}, target, dialects
    )
    problems += capacity.problems
    if problems:
        raise Untranslatable(problems)

    # Choices made reading the pod's claims (the firstAvailable alternative taken...), said once.
    edits: list[PodEdit] = [Say(f"gpuport: {note}") for note in demand.claims.notes]
    original: dict[str, Any] = {ask.label: dict(ask.written) for ask in demand.asks}
    # Foreign GPU keys go, and so do our own keys that are about to be written anew.
    stale = foreign.keys | set(leaving) | (demand.selection.keys & set(node_labels))
    # Exclusions on another platform's GPU keys (GKE's whole-GPU DoesNotExist terms): no node here
    # carries the key, so they hold everywhere and say nothing; they go, and are said.
    ours = target.selector_keys()
    for key, operator, _ in demand.constraints:
        if operator in ("DoesNotExist", "NotIn") and key in dialects.selector_keys() and key not in ours:
            if key not in stale:
                said = f"gpuport: node affinity {key} {operator} removed: no {target.name} node has it"
                edits.append(Say(said))
            stale = stale | {key}
        elif operator == "Exists" and key in foreign.keys:
            # "Any GPU node" in another platform's words (foreign_keys): the GPU ask keeps it on one here.
            edits.append(
                Say(
                    f"gpuport: node affinity {key} Exists removed: no {target.name} node has it; its GPU ask "
                    f"keeps the pod on {target.name}'s GPU nodes"
                )
            )
    carried = dict(node_labels)
    for key, values in capacity.labels.items():
        node_labels.setdefault(key, values)  # said with the capacity it carries
    spot = (
        _drop_labels(leaving, capacity_keys_here, target, demand, spec.get("nodeSelector")) + capacity.edits
    )
    # On a DRA cluster: which claims the pod gets, made from which templates.
    claims = _plan_claims(spec, demand, asked_there, target)
    templates: dict[str, dict[str, Any]] = {}
    for ask in demand.asks:
        at = (ask.list_name, ask.index)
        there = asked_there[at]
        edits.append(SetResources(ask, there.resources))
        if ask.claim:
            edits.append(DropClaim(at, ask.claim))
        plan = claims.get(at)
        if plan is not None and there.device is not None:
            name = plan.template["metadata"]["name"]
            templates[name] = plan.template
            edits.append(AddClaim(at, plan.claim, name, plan.request))
            edits.append(
                Say(f"gpuport: {ask.label} {ask.describe()} → claim {plan.claim} ({plan.words}){there.note}")
            )
        elif there.resources != dict(ask.written):
            now = ", ".join(f"{k}: {v}" for k, v in sorted(there.resources.items()))
            # A share asked by pod annotation alone (KAI's) leaves no resource to name: name the annotation.
            now = now or "pod annotation " + ", ".join(
                f"{k}={v}" for k, v in sorted(there.annotations.items())
            )
            edits.append(Say(f"gpuport: {ask.label} {ask.describe()} → {now}{there.note}"))
    edits += _node_set_up(asked_there, target)
    edits += [Say(said) for said in sharing_lost(demand, asked_there, target, dialects)]
    edits.append(DropSelectors(frozenset(stale)))
    edits += spot
    if model_note and model_key in node_labels:
        edits.append(Say(f"gpuport: {model_note.strip(' ()')}: using {' or '.join(chosen)}"))
    # The selector entries an affinity takes the place of are named with it, once: several values are a
    # required node affinity, not a node selector, and the pod loses the selector it was written with.
    selector = spec.get("nodeSelector")
    # Not the labels leaving: _drop_labels says those removed (AKS's accelerator label was said twice)
    # and the capacity plan those it carries over (GKE's spot label read as replaced by the GPU's).
    replaced_keys = stale - set(leaving)
    replaced = (
        [f"{k}={v}" for k, v in sorted(selector.items()) if k in replaced_keys]
        if isinstance(selector, dict)
        else []
    )
    for key, values in node_labels.items():
        # A carried spot label was said already, with where it came from.
        said = ""
        if key in carried and len(values) == 1:
            said = f"gpuport: node selector {key}={values[0]}"
        elif key in carried:
            instead = f"node selector {', '.join(replaced)} replaced by " if replaced else ""
            said = f"gpuport: {instead}required node affinity {key} in {'|'.join(values)}"
            replaced = []
        edits.append(RequireLabel(key, values, said))
    if model_key and avoided:
        expression = {"key": model_key, "operator": "NotIn", "values": list(avoided)}
        edits.append(
            RequireExpression(expression, f"gpuport: node selector {model_key} not in {'|'.join(avoided)}")
        )
    if whole:
        # Partitions and shared GPUs are plain whole-GPU resources there, told apart only by a label.
        # A MIG partition is excluded only where the pod's models can be partitioned there (no L4 can).
        partitioned = target.mig.form == "partition-label" and target.slices_any(chosen, catalogue)
        for key in (target.mig.label if partitioned else "", target.shared.node_label):
            if key and key not in node_labels:
                expression = {"key": key, "operator": "DoesNotExist"}
                edits.append(RequireExpression(expression, f"gpuport: whole GPUs only: nodes without {key}"))
    if target.tolerations:
        edits.append(AddTolerations(target.tolerations))
    scheduler = foreign.scheduler
    if scheduler:
        original["schedulerName"] = scheduler
    if target.scheduler_name and spec.get("schedulerName") != target.scheduler_name:
        edits.append(SetScheduler(target.scheduler_name, f"gpuport: schedulerName → {target.scheduler_name}"))
    elif scheduler:
        edits.append(
            SetScheduler(
                "",
                f"gpuport: schedulerName {scheduler} removed: {target.name} does not run it (a cluster that "
                f"does lists it in its map's other_schedulers)",
            )
        )
    for key in sorted(foreign.annotations):
        edits.append(
            DropAnnotation(key, f"gpuport: annotation {key} removed: {target.name} does not read it")
        )
    for there in asked_there.values():
        for key, value in there.annotations.items():
            edits.append(SetAnnotation(key, value, f"gpuport: annotation {key}={value}"))
    edits.append(RecordOriginal(TRANSLATED_FROM, original))
    return Translation(edits, list(templates.values()))


def _node_set_up(asked_there: Mapping[tuple[str, int], TargetAsk], target: CloudMap) -> list[PodEdit]:
    """What the target's nodes must have set up for what was written to exist there, once each: a
    shared name that depends on the device plugin's settings, a sharing label GKE puts only on node
    pools made so, a MIG slice (MIG is configured per node pool or node)."""
    shared = target.shared
    needs: list[str] = []
    for there in asked_there.values():
        if shared.requires and (shared.resource in there.resources or shared.label in there.node_labels):
            needs.append(f"{shared.resource or shared.label} exists only with {shared.requires}")
        if there.mig is not None and target.mig.requires:
            needs.append(f"MIG {there.mig.name} exists only on {target.mig.requirement(there.mig)}")
    return [Say(f"gpuport: {need}") for need in dict.fromkeys(needs)]


def _plan_claims(
    spec: Mapping[str, Any],
    demand: PodDemand,
    asked_there: Mapping[tuple[str, int], TargetAsk],
    target: CloudMap,
) -> dict[tuple[str, int], ClaimPlan]:
    if target.dra is None:
        return {}
    asked = [
        (a.list_name, a.index, a.name, there.device)
        for a in demand.asks
        if (there := asked_there[(a.list_name, a.index)]).device is not None
    ]
    sidecars = {a.index for a in demand.asks if a.sidecar}
    # The pod's other claims keep their names; those of the asks being rewritten are given up.
    leaving = {a.claim for a in demand.asks if a.claim}
    entries = spec.get("resourceClaims")
    taken = {
        c["name"]
        for c in (entries if isinstance(entries, list) else ())
        if isinstance(c, Mapping) and isinstance(c.get("name"), str) and c["name"] not in leaving
    }
    return plan_claims(target.dra, asked, sidecars, frozenset(taken))


def _drop_labels(
    leaving: Mapping[str, tuple[str, ...]],
    kept: frozenset[str],
    target: CloudMap,
    demand: PodDemand,
    selector: Any,
) -> list[PodEdit]:
    """Every label only the source's nodes carry, apart from capacity types (capacity.py), is
    dropped, and each is said where the pod wrote it (its node selector, else its node affinity)."""
    selected = selector if isinstance(selector, dict) else {}
    return [
        Say(
            _removed(
                key, leaving[key], target, demand, "node selector" if key in selected else "node affinity"
            )
        )
        for key in sorted(leaving)
        if key not in kept
    ]


def _removed(key: str, values: tuple[str, ...], target: CloudMap, demand: PodDemand, where: str) -> str:
    # What a few of GKE's labels chose goes with them: the GPU model, a reservation.
    if key == COMPUTE_CLASS and demand.selection.models is None:
        return class_removed(values, target, where)
    if key == RESERVATION_NAME:
        return reservation_removed(values, target, where)
    return f"gpuport: {where} {key} removed: a label no {target.name} node carries"


def _values_holding(
    label: ModelLabel, models: tuple[str, ...], demand: PodDemand, problems: list[str], note: str = ""
) -> tuple[str, ...]:
    """The label values naming `models` whose nodes hold the pod's GPUs (an 8-GPU pod never gets a
    1-GPU instance type) joined as its nodes had them: a multi-GPU pod written for sxm nodes (NVLink,
    NVSwitch) never gets PCIe cards, whose collectives go through the host. A one-GPU pod has no peer
    to reach, so it keeps every value. `note`: why these models (" (no A10G here)"), for a refusal."""
    gpus = demand.gpus_on_one_node
    values = _values(label, models)
    counts = label.gpus  # ModelLabel.holds, without a call per value
    holding = tuple(v for v in values if counts.get(v, gpus) >= gpus)
    if values and not holding:
        most = max(label.gpus.get(v, 0) for v in values)
        # The fix: fewer per pod (a Ray worker group's or a Job's pods are often sized freely).
        problems.append(
            f"asks for {gpus} GPUs on one node; no {label.label} with {' or '.join(models)}{note} has "
            f"more than {most} ({', '.join(values)}): ask for at most {most} per pod"
        )
    if demand.selection.interconnect == "sxm" and gpus > 1 and holding:
        joined = tuple(v for v in holding if label.interconnect.get(v) != "pcie")
        if not joined:
            problems.append(
                f"asks for {gpus} GPUs on one node joined by NVLink/NVSwitch (SXM), as its node "
                f"selector's nodes have them; every {label.label} with {' or '.join(models)} that holds "
                f"{gpus} has PCIe cards ({', '.join(holding)})"
            )
        holding = joined
    return holding


def _target_models(
    demand: PodDemand, target: CloudMap, declared: CloudMap, dialects: Dialects, problems: list[str]
) -> tuple[tuple[str, ...], str]:
    """The GPU models the pod may land on in the target, and a note when one was substituted: first
    among the models present, then among those the map offers. A substitute has the same vendor, at
    least the memory and, unless the map's policy says `any`, the same class (training/inference)."""
    wanted = demand.selection.models
    if not wanted:
        return (), ""
    any_class = target.substitution == "any"
    catalogue = dialects.catalogue
    for cloud_map in (target, declared):  # declared's only when needed
        kept = tuple(sorted(wanted & dialects.offered(cloud_map)))
        if kept:
            return kept, ""
        offered = dialects.models_offered(cloud_map)
        substitutes = {
            m.id for w in sorted(wanted) if (m := catalogue.equivalent(w, offered, any_class)) is not None
        }
        if substitutes:
            return tuple(sorted(substitutes)), f" (no {' or '.join(sorted(wanted))} here)"
    vendors = {catalogue.models[m].vendor for m in wanted}
    if vendors.isdisjoint(target.vendors) and any(a.vendor in vendors for a in demand.asks):
        # The ask itself is refused in fewer words ("gke offers NVIDIA GPUs only", translate_ask): a
        # list of the other vendor's models as what is offered instead would say nothing to act on.
        return (), ""
    problems.append(
        _no_substitute(sorted(wanted), target, dialects.models_offered(declared), dialects, any_class)
    )
    return (), ""


def _no_substitute(
    wanted: list[str], target: CloudMap, offered: tuple[str, ...], dialects: Dialects, any_class: bool
) -> str:
    """Why no offered model stands in for the wanted ones, with the figures compared (memory as sold)."""
    catalogue = dialects.catalogue
    least = min(wanted, key=lambda m: catalogue.models[m].memory_gb)
    need = catalogue.models[least]
    # On a platform with two vendors' GPUs, only the wanted one's could stand in (the code is CUDA or ROCm).
    vendors = {catalogue.models[m].vendor for m in wanted}
    offered = tuple(m for m in offered if catalogue.models[m].vendor in vendors) or offered
    kind = "" if any_class else f" {need.gpu_class}" if need.gpu_class else ""
    # A substitute keeps the vendor (its software stack): say so, or an AMD map's larger GPU would
    # read as a contradiction of "no GPU with at least 80 GB".
    vendor = {"nvidia": " NVIDIA", "amd": " AMD"}.get(need.vendor, f" {need.vendor}")
    # So does the hosts' CPU (the image's architecture): say it where it is what rules one out.
    host = (
        f" on {need.host_cpu or 'x86-64'} hosts"
        if any(catalogue.models[m].host_cpu != need.host_cpu for m in offered)
        else ""
    )
    return (
        f"asks for {' or '.join(_sold(catalogue.models[m]) for m in wanted)}; {target.name} "
        f"offers no{vendor}{kind} GPU with at least {need.memory_gb} GB{host} "
        f"(it offers {', '.join(_sold(catalogue.models[m]) for m in offered) or 'none'})"
    )


def _sold(model: GpuModel) -> str:
    """A model with its memory as sold, its class and a host CPU other than x86-64: "A10 (24 GB,
    inference)", "GB200 (186 GB, training, arm64)"."""
    words = ", ".join(w for w in (f"{model.memory_gb} GB", model.gpu_class, model.host_cpu) if w)
    return f"{model.id} ({words})"


def _values(label: ModelLabel, models: tuple[str, ...]) -> list[str]:
    values: list[str] = []
    for model in models:
        for value in label.values.get(model, ()):
            if value not in values:
                values.append(value)
    return values
