"""Right-sizing a cluster: its running GPU pods grouped into workloads, each sized from its pods' usage
(recommend.py), and the MIG slices the right-sized fleet asks for, to plan its layout (`plan mig`)."""

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from webhook.core.asks.demand import read_demand
from webhook.core.deciding.context import Context
from webhook.core.sizing.history import PodUsage, joined
from webhook.core.sizing.owners import workload_of
from webhook.core.sizing.recommend import Options, Sizing, size_workload
from webhook.core.vocabulary.inventory import BoundPod, Inventory, Node, labelled_models


@dataclass(frozen=True)
class FleetSizing:
    sizings: tuple[Sizing, ...]
    problems: tuple[str, ...]

    @property
    def freed(self) -> Fraction:
        """GPU-equivalents the proposals free, every workload together."""
        return sum((s.saved for s in self.sizings), Fraction(0))


def node_models(node: Node, context: Context) -> frozenset[str]:
    """The GPU models a node has: its agent's record, else its labels."""
    catalogue = context.dialects.catalogue
    recorded = {g.get("model") for g in node.capability.get("gpus") or () if isinstance(g, Mapping)}
    found = {m for m in recorded if isinstance(m, str) and m in catalogue.models}
    return frozenset(found or labelled_models(node.labels, context.dialects))


def size_fleet(
    inventory: Inventory, usage: Mapping[str, PodUsage], context: Context, options: Options
) -> FleetSizing:
    """Every workload with a running GPU pod, sized; pods are matched to usage by their UID."""
    models_of = {node.name: node_models(node, context) for node in inventory.nodes}
    cluster_models = frozenset().union(*models_of.values()) if models_of else frozenset()
    by_workload: dict[str, list[BoundPod]] = {}
    for pod in inventory.pods:
        by_workload.setdefault(workload_of(pod.manifest), []).append(pod)
    sizings = []
    for workload, pods in sorted(by_workload.items()):
        pods.sort(key=lambda p: p.name)
        first = pods[0].manifest
        ran_on = frozenset().union(*(models_of.get(p.node, frozenset()) for p in pods))
        allowed = read_demand(first, context.dialects).selection.models
        could = cluster_models if allowed is None else cluster_models & allowed
        vendors = {context.dialects.catalogue.models[m].vendor for m in ran_on}
        others = frozenset(
            m for m in could - ran_on if context.dialects.catalogue.models[m].vendor in vendors
        )
        measured = [usage[uid] for uid in (_uid(p) for p in pods) if uid in usage]
        sizing = size_workload(workload, first, len(pods), ran_on, others, joined(measured), context, options)
        if sizing is not None:
            sizings.append(sizing)
    return FleetSizing(tuple(sizings), inventory.problems)


def _uid(pod: BoundPod) -> str:
    return str((pod.manifest.get("metadata") or {}).get("uid") or "")
