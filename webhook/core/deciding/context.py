"""The read-only context of a decision: this cluster's map, every loaded dialect, the nodes' models and
resources as far as gpuport sees them, and the mutations after translation (placement hints)."""

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.core.asks.claims import ClaimObjects, per_node_answer
from webhook.core.deciding.decision_key import MetadataKeys
from webhook.core.rewriting.inert_annotations import INERT_ANNOTATIONS
from webhook.core.rewriting.topology_terms import EXCLUSIVE_ANNOTATIONS, JOBSET_NAME, KAI_TOPOLOGY, LWS_NAME
from webhook.core.rewriting.translate import TRANSLATED_FROM
from webhook.core.rewriting.whole_gpus import SliceNodes
from webhook.core.vocabulary.dialects import Dialects
from webhook.core.vocabulary.platform import CloudMap

# What gpuport changed in a pod it translated, in words: an annotation on the pod (and an Event).
REWRITES = "gpuport.io/rewrites"
REWRITES_CHARS = 2048

# A mutation edits the editable view of a Pod in place and returns one warning line per change.
# It also receives the whole original Pod, read-only, for context it may not edit. One that says
# which pod labels and annotations it reads or writes (`label_keys`, `annotation_keys`: frozensets)
# lets the memo key on those alone; one that does not makes it key on all of them.
Mutation = Callable[[dict[str, Any], Mapping[str, Any]], list[str]]


@dataclass(frozen=True)
class Context:
    target: CloudMap
    dialects: Dialects
    # Extra rewrites after translation (placement hints plug in here).
    mutations: tuple[Mutation, ...] = ()
    # GPU models some node has now (from the inventory); None when gpuport has no view of the cluster.
    present_models: frozenset[str] | None = None
    # Extended resources some node has allocatable now; None without a view of the cluster.
    present_resources: frozenset[str] | None = None
    # The map as written, when `target` was narrowed to what the nodes have: whether a pod is
    # already in this cluster's words is decided on it, never on the nodes of the moment.
    declared: CloudMap | None = None
    # Whether the nodes offering the whole-GPU resource give slices of it (GKE partition and sharing
    # pools, MIG-single); None without a view of the cluster.
    slice_nodes: SliceNodes | None = None

    @property
    def as_declared(self) -> CloudMap:
        return self.declared or self.target

    @functools.cached_property
    def _per_node(self) -> tuple[Mapping[str, Any], frozenset[str]] | None:
        counts = self.slice_nodes.whole_counts if self.slice_nodes is not None else ()
        return per_node_answer(counts, self.dialects.maps)

    def claim_objects(self, objects: ClaimObjects) -> ClaimObjects:
        """The claim objects a pod's claims are read from, with how many devices a node holds answered
        from this view of the nodes where the objects cannot say (allocationMode: All). The one place
        the webhook, translate, preflight and explain make this answer; worked out once per context."""
        found = self._per_node
        if found is None:
            return objects
        answer, keys = found

        def answering(key: str) -> Mapping[str, Any] | None:
            found = objects(key)
            return answer if found is None and key in keys else found

        return answering

    @functools.cached_property
    def metadata_keys(self) -> MetadataKeys | None:
        """The pod labels and annotations a mutation decision reads or writes here: every loaded
        dialect's GPU annotations (read as asks, removed as foreign, written for the target), the
        translated-from record, and what each mutation declares. None when a mutation declares
        nothing (it may read any). Worked out once per context (frozen: a change builds a new one)."""
        # JOBSET_NAME, LWS_NAME: a placement the pod copies from its JobSet or LeaderWorkerSet is refused
        # naming that workload.
        labels: set[str] = {LWS_NAME}
        # KAI_TOPOLOGY: named where KAI's levels are renamed, removed where no KAI runs.
        annotations = {
            TRANSLATED_FROM,
            REWRITES,
            JOBSET_NAME,
            KAI_TOPOLOGY,
            *EXCLUSIVE_ANNOTATIONS,
            *INERT_ANNOTATIONS,
        }
        for cloud_map in (*self.dialects.maps, self.target, self.as_declared):
            annotations |= cloud_map.annotation_keys()
        for mutation in self.mutations:
            label_keys = getattr(mutation, "label_keys", None)
            annotation_keys = getattr(mutation, "annotation_keys", None)
            if label_keys is None or annotation_keys is None:
                return None
            labels |= label_keys
            annotations |= annotation_keys
        every_map = (*self.dialects.maps, self.target, self.as_declared)
        prefixes = {m.shared.container_memory_prefix for m in every_map if m.shared.container_memory_prefix}
        naming = {m.shared.container_annotation for m in every_map if m.shared.container_annotation}
        return MetadataKeys(
            frozenset(labels), frozenset(annotations), tuple(sorted(prefixes)), frozenset(naming)
        )
