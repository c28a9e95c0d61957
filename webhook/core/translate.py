"""Translation: canonical demand → the active cloud map's vocabulary, as edits on a Pod-shaped view.

Only what carries GPU meaning changes: GPU resource names and amounts, GPU node-selector keys and
required node-affinity expressions, tolerations and the scheduler the map asks for. Everything else
is kept. A pod already written in the target's words is left alone byte for byte.
"""

import copy
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from webhook.core.catalogue import Catalogue, GpuModel, MigProfile, smallest_model_fit
from webhook.core.demand import (
    ContainerAsk,
    PodDemand,
    SharedAsk,
    node_constraints,
    selector_constraints,
)
from webhook.core.platform import CloudMap, Dialects
from webhook.core.quantity import MIB

TRANSLATED_FROM = "gpuport.io/translated-from"


class Untranslatable(Exception):
    """The pod asks for something the target cannot give; the messages say what it offers instead."""

    def __init__(self, messages: list[str]):
        self.messages = messages
        super().__init__("; ".join(messages))


@dataclass(frozen=True)
class Placement:
    """The target-side answer for one container: resources, plus labels the node must carry."""

    resources: dict[str, str]
    node_labels: dict[str, tuple[str, ...]]  # label → acceptable values
    models: tuple[str, ...]  # the GPU models this ask now needs (empty: any the resource implies)
    note: str  # what changed, for the warning
    annotations: Mapping[str, str] = field(default_factory=dict)  # pod annotations the form needs


def foreign_keys(
    spec: Mapping[str, Any], demand: PodDemand, target: CloudMap, dialects: Dialects
) -> frozenset[str]:
    """GPU label keys the target does not speak, or speaks with other values: EKS and AKS both name the
    model by instance type, but p4d.24xlarge means nothing on AKS. A value no loaded map knows (a GPU
    newer than the catalogue) on the target's own key is the user's business and stays."""
    foreign = set(demand.selection.keys - target.selector_keys())
    for model_label in target.model_labels:
        for key, values in selector_constraints(spec, frozenset({model_label.label})):
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
    spec: Mapping[str, Any], target: CloudMap, dialects: Dialects
) -> dict[str, tuple[str, ...]]:
    """Non-GPU node labels only another platform's nodes carry (GKE's gke-spot, Karpenter's
    instance-gpu-name...): no node of the target has them, so the pod would never schedule."""
    gpu_keys = dialects.selector_keys()
    others = [m for m in dialects.maps if m.name != target.name]
    found: dict[str, tuple[str, ...]] = {}
    for key, _, values in node_constraints(spec):
        if key in gpu_keys or _speaks(target, key):
            continue
        if any(_speaks(m, key) for m in others):
            found[key] = found.get(key, ()) + values
    return found


def _speaks(cloud_map: CloudMap, key: str) -> bool:
    return cloud_map.node_labels.owns(key) or any(k == key for k, _ in cloud_map.node_labels.spot)


def foreign_scheduler(spec: Mapping[str, Any], target: CloudMap, dialects: Dialects) -> str:
    """The schedulerName of another platform's scheduler layer (volcano, hami-scheduler...), if any."""
    name = spec.get("schedulerName")
    if not name or name == target.scheduler_name:
        return ""
    return str(name) if any(m.scheduler_name == name for m in dialects.maps) else ""


def foreign_annotations(demand: PodDemand, target: CloudMap) -> frozenset[str]:
    return demand.selection.annotations - target.annotation_keys()


def is_native(spec: Mapping[str, Any], demand: PodDemand, target: CloudMap, dialects: Dialects) -> bool:
    """Written in the target's words and satisfiable as written: nothing to translate."""
    catalogue = dialects.catalogue
    if foreign_keys(spec, demand, target, dialects) or foreign_node_labels(spec, target, dialects):
        return False
    if foreign_scheduler(spec, target, dialects) or foreign_annotations(demand, target):
        return False
    offered = target.models_offered(catalogue)
    if demand.selection.models is not None and not demand.selection.models & set(offered):
        return False
    models = tuple(sorted(demand.selection.models & set(offered))) if demand.selection.models else ()
    for ask in demand.asks:
        written_here = (target.is_accelerator(n) or n in target.annotation_keys() for n in ask.written)
        if ask.kind == "fraction" or not all(written_here):
            return False
        if ask.kind == "mig" and not any(
            ask.profile.name in m.profiles for m in _candidates(models, target, catalogue)
        ):
            return False
    return True


def translate_pod(
    view: dict[str, Any],
    demand: PodDemand,
    target: CloudMap,
    dialects: Dialects,
    declared: CloudMap | None = None,
) -> list[str]:
    """Edit `view` (metadata + the editable spec fields) in place; return one warning per change.
    The caller has found the pod not native (is_native), so there is something to translate.
    `target` may be narrowed to what the cluster's nodes have now; `declared` is the map as written,
    the fallback when no node has what the pod asks for (an autoscaler may add one)."""
    catalogue = dialects.catalogue
    declared = declared or target
    problems = list(demand.problems)
    if demand.selection.unknown:
        problems.append(
            f"node selector names no GPU model gpuport knows: {', '.join(demand.selection.unknown)}"
        )
    models, model_note = _target_models(demand, target, declared, catalogue, problems)
    placements: dict[tuple[str, int], Placement] = {}
    for ask in demand.asks:
        try:
            placements[(ask.list_name, ask.index)] = _place(ask, models, demand, target, catalogue)
        except Untranslatable as exc:
            problems.extend(f"{ask.label} {m}" for m in exc.messages)
    needed = {m for p in placements.values() for m in p.models}
    if len(needed) > 1 and target.mig.form in ("single", "partition-label"):
        problems.append(f"containers need different GPU models on one node ({', '.join(sorted(needed))})")

    node_labels: dict[str, tuple[str, ...]] = {}
    for placement in placements.values():
        node_labels.update(placement.node_labels)
    chosen = tuple(sorted(needed)) or models
    model_key = target.model_labels[0].label if target.model_labels else ""
    model_note = model_note if chosen else ""
    foreign = foreign_keys(view["spec"], demand, target, dialects)
    rewrite_model = bool(model_note) or model_key in foreign or model_key not in demand.selection.keys
    if model_key and chosen and model_key not in node_labels and rewrite_model:
        values = _values_holding(target.model_labels[0], chosen, _gpus_on_one_node(demand), problems)
        if values:
            node_labels[model_key] = values
    whole = any(a.kind == "whole" for a in demand.asks)
    avoided: tuple[str, ...] = ()
    if model_key and not chosen and demand.selection.avoid:
        avoided = tuple(_values(target.model_labels[0], tuple(sorted(demand.selection.avoid))))
    if whole and target.mig.form == "single" and target.mig.product_label not in node_labels:
        # Slices are nvidia.com/gpu there too: only a plain product name keeps a whole GPU whole.
        plain = chosen or target.models_offered(catalogue)
        node_labels[target.mig.product_label] = tuple(n for m in plain for n in catalogue.models[m].names)
    if problems:
        raise Untranslatable(problems)

    warnings: list[str] = []
    original: dict[str, Any] = {}
    spec = view["spec"]
    for ask in demand.asks:
        placement = placements[(ask.list_name, ask.index)]
        _rewrite_resources(spec, ask, placement.resources)
        original[ask.label] = dict(ask.written)
        if placement.resources != dict(ask.written):
            warnings.append(
                f"gpuport: {ask.label} {ask.describe()} → {_describe(placement.resources)}{placement.note}"
            )
    # Foreign GPU keys go, and so do our own keys that are about to be written anew.
    leaving = foreign_node_labels(spec, target, dialects)
    stale = foreign | set(leaving) | (demand.selection.keys & set(node_labels))
    original.update(_remove_selectors(spec, frozenset(stale)))
    carried = dict(node_labels)
    warnings += _carry_spot(spec, leaving, target, dialects, node_labels)
    if model_note and model_key in node_labels:
        warnings.append(f"gpuport: {model_note.strip(' ()')}: using {' or '.join(chosen)}")
    for key, values in node_labels.items():
        # A carried spot label was said already, with where it came from.
        if _require_label(spec, key, values) and key in carried:
            warnings.append(f"gpuport: node selector {key}={'|'.join(values)}")
    if (
        model_key
        and avoided
        and _require_expression(spec, {"key": model_key, "operator": "NotIn", "values": list(avoided)})
    ):
        warnings.append(f"gpuport: node selector {model_key} not in {'|'.join(avoided)}")
    if whole:
        # Partitions and shared GPUs are plain whole-GPU resources there, told apart only by a label.
        for key in (target.mig.label if target.mig.form == "partition-label" else "", _sharing_label(target)):
            if (
                key
                and key not in node_labels
                and _require_expression(spec, {"key": key, "operator": "DoesNotExist"})
            ):
                warnings.append(f"gpuport: whole GPUs only: nodes without {key}")
    warnings += add_tolerations(spec, target.tolerations)
    scheduler = foreign_scheduler(spec, target, dialects)
    if scheduler:
        original["schedulerName"] = scheduler
    if target.scheduler_name and spec.get("schedulerName") != target.scheduler_name:
        spec["schedulerName"] = target.scheduler_name
        warnings.append(f"gpuport: schedulerName → {target.scheduler_name}")
    elif scheduler:
        del spec["schedulerName"]
        warnings.append(f"gpuport: schedulerName {scheduler} removed: {target.name} does not run it")
    annotations = view["metadata"].setdefault("annotations", {})
    for key in sorted(foreign_annotations(demand, target)):
        original.setdefault("annotations", {})[key] = annotations.pop(key, None)
        warnings.append(f"gpuport: annotation {key} removed: {target.name} does not read it")
    for placement in placements.values():
        for key, value in placement.annotations.items():
            if annotations.get(key) != value:
                annotations[key] = value
                warnings.append(f"gpuport: annotation {key}={value}")
    annotations[TRANSLATED_FROM] = json.dumps(original, sort_keys=True, separators=(",", ":"))
    return warnings


def add_tolerations(spec: dict[str, Any], tolerations) -> list[str]:
    """The map's tolerations for its GPU nodes' taints, each added once; one warning per addition."""
    warnings = []
    for toleration in tolerations:
        present = spec.setdefault("tolerations", [])
        if dict(toleration) not in present:
            present.append(dict(toleration))
            warnings.append(f"gpuport: toleration {toleration.get('key')} added")
    return warnings


def missing_tolerations(spec: Mapping[str, Any], target: CloudMap) -> bool:
    present = spec.get("tolerations") if isinstance(spec.get("tolerations"), list) else []
    return any(dict(t) not in present for t in target.tolerations)


def _sharing_label(target: CloudMap) -> str:
    return target.shared.label if target.shared.form == "label" else ""


def _carry_spot(spec, leaving, target: CloudMap, dialects: Dialects, node_labels) -> list[str]:
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


def _gpus_on_one_node(demand: PodDemand) -> int:
    """GPUs (or slices, or shares) one pod needs on its node: app containers add up, init containers
    run one at a time."""
    app = sum(a.count for a in demand.asks if a.list_name == "containers")
    init = max((a.count for a in demand.asks if a.list_name == "initContainers"), default=0)
    return max(app, init, 1)


def _values_holding(label, models: tuple[str, ...], gpus: int, problems: list[str]) -> tuple[str, ...]:
    """The label values naming `models` whose nodes hold `gpus` GPUs (an 8-GPU pod never gets a
    1-GPU instance type)."""
    values = _values(label, models)
    holding = tuple(v for v in values if label.holds(v, gpus))
    if values and not holding:
        most = max(label.gpus.get(v, 0) for v in values)
        problems.append(
            f"asks for {gpus} GPUs on one node; no {label.label} with {' or '.join(models)} has more "
            f"than {most} ({', '.join(values)})"
        )
    return holding


def _target_models(
    demand: PodDemand, target: CloudMap, declared: CloudMap, catalogue: Catalogue, problems: list[str]
):
    """The GPU models the pod may land on in the target, and a note when one was substituted: first
    among the models present, then among those the map offers. A substitute has the same vendor, at
    least the memory and, unless the map's policy says `any`, the same class (training/inference)."""
    wanted = demand.selection.models
    if not wanted:
        return (), ""
    any_class = target.substitution == "any"
    offers = [target.models_offered(catalogue), declared.models_offered(catalogue)]
    for offered in offers:
        kept = tuple(sorted(m for m in wanted if m in offered))
        if kept:
            return kept, ""
        substitutes = {
            m.id for w in sorted(wanted) if (m := catalogue.equivalent(w, offered, any_class)) is not None
        }
        if substitutes:
            return tuple(sorted(substitutes)), f" (no {' or '.join(sorted(wanted))} here)"
    kind = "" if any_class else " of the same class"
    problems.append(
        f"asks for {' or '.join(sorted(wanted))}; {target.name} offers no GPU{kind} with as much memory "
        f"(it offers {', '.join(offers[1]) or 'none'})"
    )
    return (), ""


def _place(
    ask: ContainerAsk, models: tuple[str, ...], demand: PodDemand, target: CloudMap, catalogue: Catalogue
) -> Placement:
    if ask.vendor != target.vendor:
        raise Untranslatable(
            [
                f"asks for an {ask.vendor.upper()} GPU ({ask.describe()}); "
                f"{target.name} offers {target.vendor.upper()} GPUs only"
            ]
        )
    if ask.kind == "whole":
        return Placement({target.whole_gpu: str(ask.count)}, {}, (), "")
    if ask.kind == "mig":
        return _place_mig(ask, ask.profile, models, target, catalogue)
    if ask.kind == "shared":
        return _place_shared(ask, models, target, catalogue)
    return _place_fraction(ask, models, target, catalogue)


def _candidates(models: tuple[str, ...], target: CloudMap, catalogue: Catalogue) -> list[GpuModel]:
    """MIG-capable models to place a slice on, each limited to the profiles the cluster has set up
    (`offered_profiles`, from the map or the inventory) when it has any of them."""
    ids = models or target.models_offered(catalogue)
    found = []
    for model in (catalogue.models[m] for m in ids if catalogue.models[m].mig_capable):
        if target.offered_profiles:
            present = {p: n for p, n in model.profiles.items() if p in target.offered_profiles}
            model = replace(model, profiles=present) if present else model
        found.append(model)
    return found


def _place_mig(ask, wanted: MigProfile, models, target: CloudMap, catalogue: Catalogue) -> Placement:
    if target.mig.form == "by-memory":
        return _place_mig_by_memory(ask, wanted, target)
    if target.mig.form == "none":
        if target.mig_to_whole == "allow":
            return Placement(
                {target.whole_gpu: str(ask.count)}, {}, (), " (no MIG here: whole GPUs, by policy)"
            )
        raise Untranslatable(
            [f"asks for MIG {wanted.name}; {target.name} offers no MIG slices. {_offer(target)}"]
        )
    candidates = _candidates(models, target, catalogue)
    fit = smallest_model_fit(candidates, wanted)
    if fit is None:
        offered = sorted(
            {p.name for g in candidates for p in g.mig_profiles()}, key=lambda n: MigProfile.parse(n)
        )
        raise Untranslatable(
            [
                f"asks for MIG {wanted.name}; no {target.name} GPU has a slice with ≥ {wanted.compute}g and "
                f"≥ {wanted.memory_gb}gb (offered: {', '.join(offered) or 'none'})"
            ]
        )
    model, profile = fit
    note = ""
    if profile != wanted:
        more = "; more compute" if profile.compute > wanted.compute else ""
        note = f" ({model.id} has no {wanted.name}{more})"
    if target.mig.form == "mixed":
        return Placement({target.mig.resource_for(profile): str(ask.count)}, {}, (), note)
    if target.mig.form == "single":
        # The product label names model and slice at once: NVIDIA-H100-80GB-HBM3-MIG-1g.10gb.
        products = tuple(f"{name}-MIG-{profile.name}" for name in model.names)
        return Placement({target.whole_gpu: str(ask.count)}, {target.mig.product_label: products}, (), note)
    return Placement(
        {target.whole_gpu: str(ask.count)}, {target.mig.label: (profile.name,)}, (model.id,), note
    )


def _place_mig_by_memory(ask, wanted: MigProfile, target: CloudMap) -> Placement:
    """HAMi's dynamic MIG: the layer cuts a MIG instance with at least the memory asked for, so the
    slice is written as a share of that memory (and of the compute, where the layer takes cores)."""
    form = target.shared
    resources = {form.memory_resource: _memory_quantity(wanted.memory_gb * 1024, form.memory_unit_bytes)}
    if form.count_resource:
        resources[form.count_resource] = str(ask.count)
    note = f" (MIG {wanted.name}: {target.name} cuts an instance with at least this memory)"
    return Placement(resources, {}, (), note, dict(target.mig.annotations))


def _place_shared(ask, models, target: CloudMap, catalogue: Catalogue) -> Placement:
    share = ask.share
    form = target.shared
    if form.form == "none":
        raise Untranslatable(
            [f"asks for a shared GPU; {target.name} offers no GPU sharing. {_offer(target)}"]
        )
    lost = " (memory limit not enforced by time-slicing)" if share.memory_mib or share.memory_percent else ""
    if form.form == "resource":
        return Placement({form.resource: str(ask.count)}, {}, (), lost)
    if form.form == "annotation":
        return _place_annotation_share(ask, share, target)
    if form.form == "label":
        if form.max_per_container and ask.count > form.max_per_container:
            raise Untranslatable(
                [
                    f"asks for {ask.count} shared GPUs in one container; {target.name} allows at most "
                    f"{form.max_per_container} {target.whole_gpu} per container on shared GPUs. "
                    "Ask for whole GPUs, or split the work over containers"
                ]
            )
        return Placement({target.whole_gpu: str(ask.count)}, {form.label: (form.values[0],)}, (), lost)
    if share.memory_percent is not None and form.memory_percent_resource and share.memory_mib is None:
        resources = {form.memory_percent_resource: str(share.memory_percent)}
    else:
        memory = _share_memory_mib(share, models, catalogue)
        if memory is None:
            raise Untranslatable([f"{_share_words(share, models)}; {_memory_advice(target)}"])
        resources = {form.memory_resource: _memory_quantity(memory, form.memory_unit_bytes)}
    if form.count_resource and (ask.count != 1 or not form.count_optional):
        resources[form.count_resource] = str(ask.count)
    if form.core_resource and share.core_percent is not None:
        resources[form.core_resource] = str(math.ceil(share.core_percent * form.core_per_gpu / 100))
    return Placement(resources, {}, (), "")


def _place_annotation_share(ask, share: SharedAsk, target: CloudMap) -> Placement:
    """KAI: one share of a GPU per pod, for its first container, by annotation; no GPU resource."""
    form = target.shared
    if ask.count != 1 or ask.list_name != "containers":
        raise Untranslatable(
            [
                f"asks for {ask.count} shared GPUs; {target.name} gives one share per pod, "
                "to its first container"
            ]
        )
    if share.memory_mib is not None:
        annotation = {form.memory_annotation: str(share.memory_mib)}
    elif (percent := share.memory_percent or share.core_percent) is not None:
        annotation = {form.fraction_annotation: f"{percent / 100:g}"}
    else:
        raise Untranslatable(
            [
                f"asks for a shared GPU without a size; {target.name} shares GPUs by "
                f"{form.fraction_annotation} or {form.memory_annotation} (MiB): ask with one of them"
            ]
        )
    return Placement({}, {}, (), "", annotation)


def _share_memory_mib(share: SharedAsk, models, catalogue: Catalogue) -> int | None:
    """MiB of GPU memory a share means: as asked, or its percentage of the one model it is pinned to."""
    if share.memory_mib is not None:
        return share.memory_mib
    percent = share.memory_percent if share.memory_percent is not None else share.core_percent
    if percent is None or len(models) != 1:
        return None
    return catalogue.models[models[0]].memory_gb * 1024 * percent // 100


def _share_words(share: SharedAsk, models: tuple[str, ...]) -> str:
    which = f"on one of {' or '.join(models)}" if models else "on no particular GPU model"
    if share.memory_percent is not None:
        return f"asks for {share.memory_percent}% of a GPU's memory {which}"
    if share.core_percent is not None:
        return f"asks for {share.core_percent}% of a GPU's cores {which}"
    return "asks for a shared GPU without a memory size"


def _memory_advice(target: CloudMap) -> str:
    form = target.shared
    return (
        f"{target.name} shares GPUs by memory ({form.memory_resource}): name one GPU model in a node "
        f"selector so gpuport can size the share, or ask for {form.memory_resource} directly"
    )


def _place_fraction(ask, models, target: CloudMap, catalogue: Catalogue) -> Placement:
    amount = ask.fraction
    if target.fractional_policy == "shared" and amount < 1:
        shared = ContainerAsk(
            ask.list_name,
            ask.index,
            ask.name,
            "shared",
            1,
            ask.vendor,
            written=ask.written,
            share=_fraction_share(amount, models, catalogue),
        )
        return _place_shared(shared, models, target, catalogue)
    if target.fractional_policy == "mig" and amount < 1:
        if len(models) != 1 or not catalogue.models[models[0]].mig_capable:
            raise Untranslatable(
                [
                    f"asks for {float(amount):g} GPU; name one MIG-capable GPU model in a node selector "
                    "so gpuport can size the slice"
                ]
            )
        model = catalogue.models[models[0]]
        wanted = MigProfile(math.ceil(amount * model.compute_slices), math.ceil(amount * model.memory_gb))
        return _place_mig(replace(ask, count=1), wanted, models, target, catalogue)
    raise Untranslatable([f"asks for {float(amount):g} GPU; GPUs are whole units"])


def _fraction_share(amount, models, catalogue):
    if len(models) == 1:
        return SharedAsk(
            memory_mib=math.ceil(catalogue.models[models[0]].memory_gb * 1024 * amount),
            core_percent=math.ceil(amount * 100),
        )
    return SharedAsk(core_percent=math.ceil(amount * 100))


def _memory_quantity(mib: int, unit_bytes: int) -> str:
    if unit_bytes == 1:
        return f"{mib}Mi"
    return str(math.ceil(mib * MIB / unit_bytes))


def _offer(target: CloudMap) -> str:
    options = [f"whole GPUs ({target.whole_gpu})", *target.partial_gpu_options()]
    return f"{target.name} offers: {'; '.join(options)}"


def _rewrite_resources(spec: dict[str, Any], ask: ContainerAsk, new: dict[str, str]) -> None:
    container = spec[ask.list_name][ask.index]
    resources = container.setdefault("resources", {})
    if new and not any(
        isinstance(resources.get(s), dict) and any(n in resources[s] for n in ask.written)
        for s in ("limits", "requests")
    ):
        # Asked by annotation (KAI): the resources are new, and limits alone ask for them.
        resources.setdefault("limits", {}).update(new)
        return
    for section in ("limits", "requests"):
        values = resources.get(section)
        if not isinstance(values, dict) or not any(name in values for name in ask.written):
            continue
        for name in ask.written:
            if name not in new:
                values.pop(name, None)
        if not values and not new:
            del resources[section]  # the ask moved to annotations (KAI): no empty section left
        for name, amount in new.items():
            # Keep the value as written when it means the same (a YAML 1 stays 1, not "1").
            if str(values.get(name)) != amount:
                values[name] = amount
    if not new and not resources:
        del container["resources"]


def _remove_selectors(spec: dict[str, Any], keys: frozenset[str]) -> dict[str, Any]:
    removed: dict[str, Any] = {}
    selector = spec.get("nodeSelector")
    if isinstance(selector, dict):
        dropped = {k: selector.pop(k) for k in sorted(keys) if k in selector}
        if dropped:
            removed["nodeSelector"] = dropped
        if not selector:
            del spec["nodeSelector"]
    affinity = spec.get("affinity")
    terms = _required_terms(spec)
    if terms is not None:
        dropped_expressions = []
        kept_terms = []
        for term in terms:
            expressions = term.get("matchExpressions") or []
            keep = [e for e in expressions if e.get("key") not in keys]
            dropped_expressions += [e for e in expressions if e.get("key") in keys]
            if keep or term.get("matchFields"):
                if keep:
                    term["matchExpressions"] = keep
                else:
                    term.pop("matchExpressions", None)
                kept_terms.append(term)
            elif not expressions:
                kept_terms.append(term)
        if dropped_expressions:
            removed["nodeAffinity"] = dropped_expressions
            node_affinity = affinity["nodeAffinity"]
            if kept_terms:
                node_affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] = (
                    kept_terms
                )
            else:
                # An empty term matches no node: drop the requirement rather than keep an empty one.
                del node_affinity["requiredDuringSchedulingIgnoredDuringExecution"]
                if not node_affinity:
                    del affinity["nodeAffinity"]
                if not affinity:
                    del spec["affinity"]
    return removed


def _required_terms(spec: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    affinity = spec.get("affinity")
    if not isinstance(affinity, dict):
        return None
    required = (affinity.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if not isinstance(required, dict) or not isinstance(required.get("nodeSelectorTerms"), list):
        return None
    return required["nodeSelectorTerms"]


def _values(label, models: tuple[str, ...]) -> list[str]:
    values: list[str] = []
    for model in models:
        for value in label.values.get(model, ()):
            if value not in values:
                values.append(value)
    return values


def _require_label(spec: dict[str, Any], key: str, values: tuple[str, ...]) -> bool:
    """Require a node label value: nodeSelector for one value, required node affinity for several.
    Returns False when the pod already says exactly that."""
    if len(values) == 1:
        selector = spec.setdefault("nodeSelector", {})
        if selector.get(key) == values[0]:
            return False
        selector[key] = values[0]
        return True
    return _require_expression(spec, {"key": key, "operator": "In", "values": list(values)})


def _require_expression(spec: dict[str, Any], expression: dict[str, Any]) -> bool:
    """Add a required node-affinity expression to every term (terms are ORed: it must hold in each).
    Returns False when every term already has it."""
    terms = _required_terms(spec)
    if terms:
        if all(expression in (term.get("matchExpressions") or []) for term in terms):
            return False
        for term in terms:
            term.setdefault("matchExpressions", []).append(copy.deepcopy(expression))
        return True
    node_affinity = spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
        "nodeSelectorTerms": [{"matchExpressions": [expression]}]
    }
    return True


def _describe(resources: Mapping[str, str]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted(resources.items()))
