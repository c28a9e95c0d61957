"""What a pod asks for that the nodes cannot give it: said, never changed.

A pod pinned to node kinds none of which holds the GPUs it needs on one node (by the map), or asking
for models or GPU resources no node has at the moment, is told so in a warning and left as it is:
the map may not know a node size, an autoscaler may add the node, and gpuport does not second-guess
a pod written for this cluster.
"""

from webhook.core.asks.demand import PodDemand
from webhook.core.vocabulary.platform import CloudMap


def too_small(demand: PodDemand, target: CloudMap) -> list[str]:
    """A pod in this cluster's words pinned to node kinds (instance types, VM sizes) none of which holds
    the GPUs it asks for on one node, by the map (the map may not know a size: then nothing is said)."""
    needed = 0
    warnings = []
    for key, operator, values in demand.constraints:
        label = next((m for m in target.model_labels if m.label == key and m.gpus), None)
        if label is None or operator != "In" or not values or not all(v in label.gpus for v in values):
            continue  # a size the map does not know may well hold it
        needed = needed or demand.gpus_on_one_node
        if not any(label.holds(v, needed) for v in values):
            most = max(label.gpus[v] for v in values)
            warnings.append(
                f"gpuport: no {key} named ({', '.join(values)}) holds {needed} GPUs (at most {most}): "
                "it stays Pending"
            )
    return warnings


def absent(
    chosen: frozenset[str] | None,
    names: frozenset[str],
    target: CloudMap,
    models_now: frozenset[str] | None,
    resources_now: frozenset[str] | None,
) -> list[str]:
    """The `chosen` models and the GPU resources among `names` (every resource the pod's containers
    name) that no node has now (`models_now`, `resources_now`: None when gpuport does not know)."""
    warnings = []
    if models_now is not None and chosen and not chosen & models_now:
        warnings.append(f"gpuport: no node has {' or '.join(sorted(chosen))} now; the pod waits for one")
    if resources_now is not None:
        for name in sorted(n for n in names if target.is_accelerator(n)):
            if name not in resources_now:
                warnings.append(f"gpuport: no node offers {name} now; the pod waits for one")
    return warnings
