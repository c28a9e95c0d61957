"""What of a pod only another platform speaks, and whether anything is left to translate.

Read once per decision, before any choice is made: the GPU label keys and values the target does not
speak, node labels only another platform's nodes carry, another platform's scheduler and annotations
(`read_foreign`), and from these and the asks whether the pod is already in the target's words
(`is_native`). translate.py then rewrites exactly what this found.
"""

from collections.abc import Mapping
from typing import Any, NamedTuple

from webhook.core.asks.demand import PodDemand, node_constraints
from webhook.core.rewriting.translate_ask import mig_candidates
from webhook.core.vocabulary.dialects import Dialects
from webhook.core.vocabulary.platform import CloudMap

__all__ = ["Foreign", "gpu_labels_elsewhere", "is_native", "read_foreign", "value_elsewhere"]


def foreign_keys(demand: PodDemand, target: CloudMap, dialects: Dialects) -> frozenset[str]:
    """GPU label keys the target does not speak, or speaks with other values: EKS and AKS both name the
    model by instance type, but p4d.24xlarge means nothing on AKS. A value no loaded map knows (a GPU
    newer than the catalogue) on the target's own key is the user's business and stays."""
    foreign = set(demand.selection.keys - target.selector_keys())
    ours, gpu = target.selector_keys(), dialects.selector_keys()
    for key, operator, values in demand.constraints:
        if operator == "Exists" and key in gpu and key not in ours:
            # "Any GPU node" in another platform's words (GKE's accelerator label Exists): no node here
            # carries the key, so as written the pod runs nowhere.
            foreign.add(key)
        if operator == "In" and any(m.label == key for m in target.model_labels):
            for value in values:
                if value_elsewhere(target, key, value, dialects):
                    foreign.add(key)
    return frozenset(foreign)


def value_elsewhere(target: CloudMap, key: str, value: str, dialects: Dialects) -> bool:
    """Whether `value` of a model label the target reads too names a GPU only another platform's nodes
    carry (an OCI shape in node.kubernetes.io/instance-type, sent to EKS)."""
    return not _understands(target, key, value, dialects) and any(
        _understands(m, key, value, dialects) for m in dialects.maps
    )


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
    return cloud_map.node_labels.owns(key) or key in cloud_map.node_labels.capacity_keys()


def gpu_labels_elsewhere(spec: Mapping[str, Any], target: CloudMap, dialects: Dialects) -> tuple[str, ...]:
    """Another platform's GPU label keys (model, partition, sharing) that the pod's node selector or
    required node affinity names and the target does not speak. A pod asking no GPU is not translated
    (a GPU node's metrics exporter, on GKE's accelerator label Exists): on the target it runs on no node,
    and a DaemonSet's pods are simply never made."""
    ours = target.selector_keys()
    gpu = dialects.selector_keys()
    keys = (key for key, _, _ in node_constraints(spec))
    return tuple(dict.fromkeys(key for key in keys if key in gpu and key not in ours))


def foreign_scheduler(spec: Mapping[str, Any], target: CloudMap, dialects: Dialects) -> str:
    """The schedulerName of another platform's scheduler layer (volcano, hami-scheduler...), if any."""
    name = spec.get("schedulerName")
    if not isinstance(name, str) or not name:
        return ""  # a non-string the API server would refuse: no scheduler gpuport knows
    if name == target.scheduler_name or name in target.other_schedulers:
        return ""  # one the target runs
    return str(name) if name in dialects.scheduler_names else ""


def foreign_annotations(demand: PodDemand, target: CloudMap) -> frozenset[str]:
    return frozenset(k for k in demand.selection.annotations if not target.speaks_annotation(k))


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
    if len(target.vendors) > 1 and any(
        catalogue.models[m].vendor != a.vendor for m in models for a in demand.asks
    ):
        return False  # nodes of one vendor's GPUs selected for another's: translate_ask says so
    for ask in demand.asks:
        written_here = (target.is_accelerator(n) or target.speaks_annotation(n) for n in ask.written)
        if ask.kind == "fraction" or not all(written_here):
            return False
        if ask.kind == "mig" and not any(
            ask.mig_profile.name in m.profiles for m in mig_candidates(models, target, catalogue)
        ):
            return False
    return True
