"""Translation: canonical demand → the active cloud map's vocabulary, as edits on a Pod-shaped view.

Only what carries GPU meaning changes: GPU resource names and amounts, GPU node-selector keys and
required node-affinity expressions, tolerations and the scheduler the map asks for. Everything else
is kept. A pod already written in the target's words is left alone byte for byte.

This module makes the pod-level choices (is it native, which models, which selectors go and come);
translate_ask.py answers for one container's ask, podedits.py makes the edits. Why one module of
~440 lines: the choices read each other's results (the model chosen decides the labels kept, which
decide the warnings), so they are one function's steps, not separate jobs.
"""

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson

from webhook.core.asks.demand import PodDemand
from webhook.core.rewriting.dra import ClaimPlan, plan_claims
from webhook.core.rewriting.podedits import (
    add_claim,
    add_tolerations,
    editable,
    remove_claim,
    remove_selectors,
    require_expression,
    require_label,
    rewrite_resources,
)
from webhook.core.rewriting.translate_ask import TargetAsk, Untranslatable, mig_candidates, translate_ask
from webhook.core.vocabulary.dialects import Dialects
from webhook.core.vocabulary.platform import CloudMap, ModelLabel
from webhook.core.vocabulary.workloads import held_at_once

__all__ = [
    "TRANSLATED_FROM",
    "Foreign",
    "Translation",
    "Untranslatable",
    "gpus_on_one_node",
    "is_native",
    "read_foreign",
    "translate_pod",
]

TRANSLATED_FROM = "gpuport.io/translated-from"


@dataclass
class Translation:
    """What translating a pod said, and the objects it refers to that must exist before it does
    (on a DRA cluster: the ResourceClaimTemplates its claims are made from)."""

    warnings: list[str]
    claim_templates: list[dict[str, Any]] = field(default_factory=list)


def foreign_keys(demand: PodDemand, target: CloudMap, dialects: Dialects) -> frozenset[str]:
    """GPU label keys the target does not speak, or speaks with other values: EKS and AKS both name the
    model by instance type, but p4d.24xlarge means nothing on AKS. A value no loaded map knows (a GPU
    newer than the catalogue) on the target's own key is the user's business and stays."""
    foreign = set(demand.selection.keys - target.selector_keys())
    for key, operator, values in demand.constraints:
        if operator == "In" and any(m.label == key for m in target.model_labels):
            for value in values:
                if not _understands(target, key, value, dialects) and any(
                    _understands(m, key, value, dialects) for m in dialects.maps
                ):
                    foreign.add(key)
    return frozenset(foreign)


def _understands(cloud_map: CloudMap, key: str, value: str, dialects: Dialects) -> bool:
    if any(label.label == key and label.models_for(value) for label in cloud_map.model_labels):
        return True
    # GFD product values with -MIG-<profile> are the words of the MIG "single" strategy only.
    return cloud_map.mig.product_label == key and dialects.catalogue.by_product_name(value) is not None


def foreign_node_labels(
    demand: PodDemand, target: CloudMap, dialects: Dialects
) -> dict[str, tuple[str, ...]]:
    """Non-GPU node labels only another platform's nodes carry (GKE's gke-spot, Karpenter's
    instance-gpu-name...): no node of the target has them, so the pod would never schedule."""
    gpu_keys = dialects.selector_keys()
    found: dict[str, tuple[str, ...]] = {}
    for key, _, values in demand.constraints:
        if key in gpu_keys or _speaks(target, key):
            continue
        if any(_speaks(m, key) for m in dialects.maps if m.name != target.name):
            found[key] = found.get(key, ()) + values
    return found


def _speaks(cloud_map: CloudMap, key: str) -> bool:
    return cloud_map.node_labels.owns(key) or any(k == key for k, _ in cloud_map.node_labels.spot)


def foreign_scheduler(spec: Mapping[str, Any], target: CloudMap, dialects: Dialects) -> str:
    """The schedulerName of another platform's scheduler layer (volcano, hami-scheduler...), if any."""
    name = spec.get("schedulerName")
    if not isinstance(name, str) or not name or name == target.scheduler_name:
        return ""  # a non-string the API server would refuse: no scheduler gpuport knows
    return str(name) if name in dialects.scheduler_names else ""


def foreign_annotations(demand: PodDemand, target: CloudMap) -> frozenset[str]:
    return demand.selection.annotations - target.annotation_keys()


class Foreign(NamedTuple):
    """What of a pod only another platform speaks: read once per decision, for is_native and then
    translate_pod. It depends on the target's vocabulary alone (label keys, node labels, scheduler,
    annotations), never on which models the nodes have now, so the map as declared and the map
    narrowed to the nodes give the same answer."""

    keys: frozenset[str]
    node_labels: dict[str, tuple[str, ...]]
    scheduler: str
    annotations: frozenset[str]

    def __bool__(self) -> bool:
        return bool(self.keys or self.node_labels or self.scheduler or self.annotations)


def read_foreign(spec: Mapping[str, Any], demand: PodDemand, target: CloudMap, dialects: Dialects) -> Foreign:
    return Foreign(
        foreign_keys(demand, target, dialects),
        foreign_node_labels(demand, target, dialects),
        foreign_scheduler(spec, target, dialects),
        foreign_annotations(demand, target),
    )


def is_native(demand: PodDemand, target: CloudMap, dialects: Dialects, foreign: Foreign) -> bool:
    """Written in the target's words and satisfiable as written: nothing to translate. `foreign` is
    read_foreign's answer for the pod, read once for this and for translate_pod."""
    if target.dra is not None:
        # A DRA cluster gives GPUs by claim: an extended-resource ask is foreign there, unless one of
        # its device classes stands for that resource (KEP-5004) and the pod pins no model.
        extended = target.dra.extended_resources
        return all(
            (a.claim and a.vendor == target.vendor)
            or (
                a.written
                and all(extended.get(n) == (a.kind, a.profile.name if a.profile else "") for n in a.written)
                and not foreign
                and demand.selection.models is None
                and not demand.selection.avoid
            )
            for a in demand.asks
        )
    catalogue = dialects.catalogue
    if foreign:
        return False
    offered = dialects.offered(target)
    if demand.selection.models is not None and not demand.selection.models & offered:
        return False
    models = tuple(sorted(demand.selection.models & offered)) if demand.selection.models else ()
    for ask in demand.asks:
        written_here = (target.is_accelerator(n) or n in target.annotation_keys() for n in ask.written)
        if ask.kind == "fraction" or not all(written_here):
            return False
        if ask.kind == "mig" and not any(
            ask.mig_profile.name in m.profiles for m in mig_candidates(models, target, catalogue)
        ):
            return False
    return True


def translate_pod(
    view: dict[str, Any],
    demand: PodDemand,
    target: CloudMap,
    dialects: Dialects,
    declared: CloudMap,
    foreign: Foreign,
) -> Translation:
    """Edit `view` (metadata + the editable spec fields) in place; return one warning per change.
    The caller has found the pod not native (is_native), so there is something to translate.
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
    if len(needed) > 1 and target.mig.form in ("single", "partition-label"):
        problems.append(f"containers need different GPU models on one node ({', '.join(sorted(needed))})")

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
        values = _values_holding(target.model_labels[0], chosen, gpus_on_one_node(demand), problems)
        if values:
            node_labels[model_key] = values
    whole = any(a.kind == "whole" for a in demand.asks)
    avoided: tuple[str, ...] = ()
    if model_key and not chosen and demand.selection.avoid:
        avoided = tuple(_values(target.model_labels[0], tuple(sorted(demand.selection.avoid))))
    if whole and target.mig.form == "single" and target.mig.product_label not in node_labels:
        # Slices are nvidia.com/gpu there too: only a plain product name keeps a whole GPU whole.
        plain = chosen or dialects.models_offered(target)
        node_labels[target.mig.product_label] = tuple(n for m in plain for n in catalogue.models[m].names)
    if problems:
        raise Untranslatable(problems)

    # Choices made reading the pod's claims (the firstAvailable alternative taken...), said once.
    warnings: list[str] = [f"gpuport: {note}" for note in demand.claims.notes]
    templates: dict[str, dict[str, Any]] = {}
    original: dict[str, Any] = {}
    spec = view["spec"]
    claims = _plan_claims(spec, demand, asked_there, target)
    for ask in demand.asks:
        there = asked_there[(ask.list_name, ask.index)]
        rewrite_resources(spec, ask, there.resources)
        original[ask.label] = dict(ask.written)
        if ask.claim:
            remove_claim(spec, ask.list_name, ask.index, ask.claim)
        plan = claims.get((ask.list_name, ask.index))
        if plan is not None and there.device is not None:
            name = plan.template["metadata"]["name"]
            templates[name] = plan.template
            add_claim(spec, ask.list_name, ask.index, plan.claim, name, plan.request)
            warnings.append(
                f"gpuport: {ask.label} {ask.describe()} → claim {plan.claim} ({plan.words}){there.note}"
            )
        elif there.resources != dict(ask.written):
            warnings.append(
                f"gpuport: {ask.label} {ask.describe()} → {_describe(there.resources)}{there.note}"
            )
    shared = target.shared
    if shared.requires and any(shared.resource in t.resources for t in asked_there.values()):
        warnings.append(f"gpuport: {shared.resource} exists only with {shared.requires}")
    # Foreign GPU keys go, and so do our own keys that are about to be written anew.
    leaving = foreign.node_labels
    stale = foreign.keys | set(leaving) | (demand.selection.keys & set(node_labels))
    original.update(remove_selectors(spec, frozenset(stale)))
    carried = dict(node_labels)
    warnings += _carry_spot(spec, leaving, target, dialects, node_labels)
    if model_note and model_key in node_labels:
        warnings.append(f"gpuport: {model_note.strip(' ()')}: using {' or '.join(chosen)}")
    for key, values in node_labels.items():
        # A carried spot label was said already, with where it came from.
        if require_label(spec, key, values) and key in carried:
            warnings.append(f"gpuport: node selector {key}={'|'.join(values)}")
    if (
        model_key
        and avoided
        and require_expression(spec, {"key": model_key, "operator": "NotIn", "values": list(avoided)})
    ):
        warnings.append(f"gpuport: node selector {model_key} not in {'|'.join(avoided)}")
    if whole:
        # Partitions and shared GPUs are plain whole-GPU resources there, told apart only by a label.
        for key in (
            target.mig.label if target.mig.form == "partition-label" else "",
            target.shared.node_label,
        ):
            if (
                key
                and key not in node_labels
                and require_expression(spec, {"key": key, "operator": "DoesNotExist"})
            ):
                warnings.append(f"gpuport: whole GPUs only: nodes without {key}")
    warnings += add_tolerations(spec, target.tolerations)
    scheduler = foreign.scheduler
    if scheduler:
        original["schedulerName"] = scheduler
    if target.scheduler_name and spec.get("schedulerName") != target.scheduler_name:
        spec["schedulerName"] = target.scheduler_name
        warnings.append(f"gpuport: schedulerName → {target.scheduler_name}")
    elif scheduler:
        del spec["schedulerName"]
        warnings.append(f"gpuport: schedulerName {scheduler} removed: {target.name} does not run it")
    annotations = editable(view["metadata"], "annotations", dict)
    for key in sorted(foreign.annotations):
        original.setdefault("annotations", {})[key] = annotations.pop(key, None)
        warnings.append(f"gpuport: annotation {key} removed: {target.name} does not read it")
    for there in asked_there.values():
        for key, value in there.annotations.items():
            if annotations.get(key) != value:
                annotations[key] = value
                warnings.append(f"gpuport: annotation {key}={value}")
    annotations[TRANSLATED_FROM] = compact_json(original)
    return Translation(warnings, list(templates.values()))


def compact_json(value: Any) -> str:
    """`json.dumps(value, sort_keys=True, separators=(",", ":"))`, the same text, in C when it can be:
    the standard encoder cost a translated pod more than any other step of its rewrite. orjson writes
    the same text for strings, integers, booleans and null under string keys when all of it is
    printable ASCII (json.dumps escapes the rest, DEL included); floats (1e+16 against 1e16, NaN) and
    anything else go to the standard library."""
    if _plain(value):
        try:
            text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
        except orjson.JSONEncodeError:  # an integer past 64 bits
            text = ""
        if text and text.isascii() and "\x7f" not in text:  # json.dumps escapes DEL too
            return text
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _plain(value: Any) -> bool:
    kind = type(value)
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or (type(item) not in _PLAIN_LEAVES and not _plain(item)):
                return False
        return True
    if kind is list:
        return all(type(item) in _PLAIN_LEAVES or _plain(item) for item in value)
    return kind in _PLAIN_LEAVES


_PLAIN_LEAVES = frozenset({str, int, bool, type(None)})


def _plan_claims(
    spec: Mapping[str, Any],
    demand: PodDemand,
    asked_there: Mapping[tuple[str, int], TargetAsk],
    target: CloudMap,
) -> dict[tuple[str, int], ClaimPlan]:
    if target.dra is None:
        return {}
    requests = [
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
    return plan_claims(target.dra, requests, sidecars, frozenset(taken))


def _carry_spot(
    spec: dict[str, Any],
    leaving: Mapping[str, tuple[str, ...]],
    target: CloudMap,
    dialects: Dialects,
    node_labels: dict[str, tuple[str, ...]],
) -> list[str]:
    """Spot capacity is a concept every cloud has under its own label: carry it over; every other
    label only the source's nodes carry is dropped, and each is said."""
    warnings = []
    for key, values in sorted(leaving.items()):
        spot = any(m.node_labels.is_spot(key, v) for m in dialects.maps for v in values)
        if spot and target.node_labels.spot:
            spot_key, spot_value = target.node_labels.spot[0]
            node_labels.setdefault(spot_key, (spot_value,))
            warnings.append(f"gpuport: spot capacity {key} → {spot_key}={spot_value}")
            warnings += add_tolerations(spec, target.node_labels.spot_tolerations)
        else:
            why = "spot capacity" if spot else "a label"
            warnings.append(f"gpuport: node selector {key} removed: {why} no {target.name} node carries")
    return warnings


def gpus_on_one_node(demand: PodDemand) -> int:
    """GPUs (or slices, or shares) one pod needs on its node, counted as Kubernetes counts a pod's
    requests (app containers and sidecars add up, init containers run one at a time)."""
    return max(held_at_once([(a, a.count) for a in demand.asks], 0, max), 1)


def _values_holding(
    label: ModelLabel, models: tuple[str, ...], gpus: int, problems: list[str]
) -> tuple[str, ...]:
    """The label values naming `models` whose nodes hold `gpus` GPUs (an 8-GPU pod never gets a
    1-GPU instance type)."""
    values = _values(label, models)
    counts = label.gpus  # ModelLabel.holds, without a call per value
    holding = tuple(v for v in values if counts.get(v, gpus) >= gpus)
    if values and not holding:
        most = max(label.gpus.get(v, 0) for v in values)
        problems.append(
            f"asks for {gpus} GPUs on one node; no {label.label} with {' or '.join(models)} has more "
            f"than {most} ({', '.join(values)})"
        )
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
    kind = "" if any_class else " of the same class"
    problems.append(
        f"asks for {' or '.join(sorted(wanted))}; {target.name} offers no GPU{kind} with as much memory "
        f"(it offers {', '.join(dialects.models_offered(declared)) or 'none'})"
    )
    return (), ""


def _values(label: ModelLabel, models: tuple[str, ...]) -> list[str]:
    values: list[str] = []
    for model in models:
        for value in label.values.get(model, ()):
            if value not in values:
                values.append(value)
    return values


def _describe(resources: Mapping[str, str]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted(resources.items()))
