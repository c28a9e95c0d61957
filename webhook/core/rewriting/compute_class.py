"""GKE custom compute classes: a pod selecting one gets the GPU its class names, not one it names.

A GKE pod may select `cloud.google.com/compute-class: <name>` and name no GPU model: GKE makes its
nodes from the ComputeClass's `spec.priorities`, whose `gpu: {type, count}` chooses the model (GKE
"About custom compute classes"; the class is a `cloud.google.com/v1` ComputeClass). Moved off GKE the
selector goes (no other platform's node carries it) and the pod asks any GPU: the model the author
meant is lost. That is said where the selector is dropped (`class_removed`); where the file holds the
ComputeClass too, its GPUs are named with the target's model label to pin them by (`class_gpus`).
"""

from collections.abc import Mapping
from typing import Any

from webhook.core.vocabulary.dialects import Dialects
from webhook.core.vocabulary.platform import CloudMap

__all__ = ["COMPUTE_CLASS", "class_gpus", "class_removed", "is_compute_class"]

COMPUTE_CLASS = "cloud.google.com/compute-class"


def class_removed(values: tuple[str, ...], target: CloudMap, where: str = "node selector") -> str:
    """What is said instead of "a label no <target> node carries", for a GPU pod naming no model."""
    named = "|".join(values)
    return (
        f"gpuport: {where} {COMPUTE_CLASS}={named} removed: the class chose the GPU model; "
        f"any {target.name} GPU now"
    )


def is_compute_class(doc: Mapping[str, Any]) -> bool:
    return doc.get("kind") == "ComputeClass" and str(doc.get("apiVersion", "")).startswith(
        "cloud.google.com/"
    )


def class_gpus(doc: Mapping[str, Any], target: CloudMap, dialects: Dialects) -> list[str]:
    """Said of a ComputeClass in a file translated off GKE: the GPUs its priorities give, in the
    catalogue's words, and the target's label to pin them by. Nothing where the target speaks the class
    (GKE) or its priorities name no GPU."""
    if target.node_labels.owns(COMPUTE_CLASS):
        return []
    spec = doc.get("spec")
    priorities = spec.get("priorities") if isinstance(spec, Mapping) else None
    asked: dict[str, set[str]] = {}  # GPU type → counts per node, in priority order
    for priority in priorities if isinstance(priorities, list) else ():
        gpu = priority.get("gpu") if isinstance(priority, Mapping) else None
        if isinstance(gpu, Mapping) and isinstance(gpu.get("type"), str):
            asked.setdefault(gpu["type"], set()).add(str(gpu.get("count", "?")))
    if not asked:
        return []
    words = []
    for gpu_type, counts in asked.items():
        # GKE's accelerator values (nvidia-l4) are the model label values of the maps that own the class.
        models = {
            m
            for cloud in dialects.maps
            if cloud.node_labels.owns(COMPUTE_CLASS)
            for label in cloud.model_labels
            for m in label.models_for(gpu_type)
        }
        words.append(f"{'|'.join(sorted(models)) or gpu_type} ×{'|'.join(sorted(counts))}")
    # Kept: an object of GKE's, which the target cannot store (kubectl says so); its GPUs are what is lost.
    if target.model_labels:
        pin = f"pin it by {target.model_labels[0].label}"
    else:
        pin = "pin it in the claim" if target.dra is not None else "pin it there"
    return [f"gpuport: GKE's, kept: its pods got {', '.join(words)} per node; on {target.name} {pin}"]
