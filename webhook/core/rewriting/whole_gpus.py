"""A whole GPU stays whole where the cluster's whole-GPU resource also names slices.

On GKE, the nodes of a MIG-partitioned pool (`cloud.google.com/gke-gpu-partition-size`) and of a
time-sharing pool (`cloud.google.com/gke-gpu-sharing-strategy`) advertise `nvidia.com/gpu` once per
slice; on a MIG-single cluster every MIG instance is an `nvidia.com/gpu`, told apart only by the
product label's `-MIG-<profile>` suffix. A pod that asks for the whole-GPU resource and does not
select slices itself (the device plugin's, Kubeflow's and Ray's samples are written so) means whole
GPUs: it is kept off slice nodes by a required node-affinity expression.

With a view of the nodes, the expression is added only where whole-GPU nodes stand beside slice
nodes; where every node gives slices it is said instead (the expression would leave the pod Pending),
and where none does nothing is needed. Without a view, the map says such nodes may exist: the
expression is added, and said.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal

from webhook.core.asks.demand import PodDemand
from webhook.core.rewriting.podedits import PodEdit, RequireExpression, RequireLabel
from webhook.core.vocabulary.catalogue import Catalogue
from webhook.core.vocabulary.dialects import Dialects
from webhook.core.vocabulary.platform import CloudMap

MIG_SUFFIX = "-MIG-"
# What whole-GPU nodes are told apart by when their GPU counts differ (every cloud sets it).
NODE_KIND = "node.kubernetes.io/instance-type"


@dataclass(frozen=True)
class SliceMarker:
    """A node label that tells slice nodes apart on a platform whose whole-GPU resource names slices."""

    key: str
    slices: str  # what such nodes give per whole-GPU unit, in words
    one: str  # one of them
    by_value: bool = False  # MIG-single: the product label is on every GPU node; slices end in -MIG-

    def marks(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        if value is None:
            return False
        return MIG_SUFFIX in value if self.by_value else True


def slice_markers(target: CloudMap) -> tuple[SliceMarker, ...]:
    markers = []
    if target.mig.form == "partition-label":
        markers.append(SliceMarker(target.mig.label, "MIG partitions", "a MIG partition"))
    if target.mig.form == "single":
        markers.append(
            SliceMarker(target.mig.product_label, "MIG instances", "a MIG instance", by_value=True)
        )
    if target.shared.node_label:
        markers.append(SliceMarker(target.shared.label, "shared GPUs", "a shared GPU"))
    return tuple(markers)


@dataclass(frozen=True)
class SliceNodes:
    """What the nodes that offer the whole-GPU resource show: the slice markers some of them carry,
    and whether some carry none (whole GPUs)."""

    marked: frozenset[str]
    # GPUs each whole-GPU node offers, by node kind (NODE_KIND's value; the node's name without it).
    whole_counts: tuple[tuple[str, frozenset[int]], ...] = ()

    @property
    def whole(self) -> bool:
        """Whether some node offering the whole-GPU resource carries no slice marker."""
        return bool(self.whole_counts)


def slice_nodes(
    nodes: Iterable[tuple[str, Mapping[str, str], Mapping[str, Decimal]]], target: CloudMap
) -> SliceNodes:
    """From each node's (name, labels, allocatable)."""
    markers = slice_markers(target)
    marked: set[str] = set()
    counts: dict[str, set[int]] = {}
    for name, labels, allocatable in nodes:
        gpus = allocatable.get(target.whole_gpu, Decimal(0))
        if gpus <= 0:
            continue
        carried = {m.key for m in markers if m.marks(labels)}
        marked |= carried
        if not carried:
            counts.setdefault(labels.get(NODE_KIND, name), set()).add(int(gpus))
    return SliceNodes(frozenset(marked), tuple((k, frozenset(v)) for k, v in sorted(counts.items())))


def whole_only(
    demand: PodDemand, target: CloudMap, nodes: SliceNodes | None, catalogue: Catalogue
) -> tuple[tuple[SliceMarker, ...], tuple[SliceMarker, ...]]:
    """(markers to keep the pod off, markers every node carries: said, not required) for a pod in the
    target's words asking for its whole-GPU resource without selecting slices itself. A MIG marker
    only where the pod's models (any the map offers, when it names none) can be sliced there."""
    markers = slice_markers(target)
    if not target.slices_any(demand.selection.models, catalogue):
        markers = tuple(m for m in markers if m.key != target.mig.label and not m.by_value)
    if not markers or not any(a.kind == "whole" and target.whole_gpu in a.written for a in demand.asks):
        return (), ()
    selected = {key for key, _, _ in demand.constraints}
    mine = tuple(m for m in markers if m.key not in selected)
    if nodes is None:
        return mine, ()
    there = tuple(m for m in mine if m.key in nodes.marked)
    return (there, ()) if nodes.whole else ((), there)


def keep_whole(
    demand: PodDemand,
    target: CloudMap,
    dialects: Dialects,
    off: tuple[SliceMarker, ...],
    seen: bool,
) -> list[PodEdit]:
    """The edits that keep the pod on whole GPUs, off the nodes `off` marks, each with its words.
    `seen`: the nodes were looked at (else the map's word is all there is)."""
    edits: list[PodEdit] = []
    where = "some here" if seen else f"{target.name}: they"
    for marker in off:
        if marker.by_value:
            chosen = demand.selection.models
            models = sorted(chosen) if chosen else dialects.models_offered(target)
            vendors = {a.vendor for a in demand.asks}
            catalogue = dialects.catalogue.models
            plain = tuple(n for m in models if catalogue[m].vendor in vendors for n in catalogue[m].names)
            said = f"{marker.key} a whole-GPU name (-MIG- nodes give {marker.slices})"
            if plain:
                edits.append(RequireLabel(marker.key, plain, f"gpuport: whole GPUs only: {said}"))
        else:
            said = f"nodes without {marker.key} ({where} give {marker.slices})"
            expression = {"key": marker.key, "operator": "DoesNotExist"}
            edits.append(RequireExpression(expression, f"gpuport: whole GPUs only: {said}"))
    return edits


def slices_only(only: tuple[SliceMarker, ...], target: CloudMap) -> list[str]:
    return [
        f"gpuport: every {target.whole_gpu} node here has {marker.key}: the pod gets {marker.one}"
        for marker in only
    ]
