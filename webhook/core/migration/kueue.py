"""Kueue's queue objects beside translated workloads: what they no longer cover, said exactly.

A ClusterQueue admits a workload only when its resourceGroups cover every resource the pods ask for;
a ResourceFlavor's nodeLabels become the admitted pods' node selector. Moved to another cloud with
their workloads, a queue still covering `nvidia.com/gpu` while the pods now ask for a MIG or shared
name admits nothing, and a flavor naming the old cloud's GPU labels sends every pod where no node is.
gpuport does not rewrite the queues (quotas per flavor are the admin's choice); it says what to change.
"""

from collections.abc import Iterable, Mapping
from typing import Any

from webhook.core.rewriting.foreign import value_elsewhere
from webhook.core.vocabulary.dialects import Dialects
from webhook.core.vocabulary.platform import CloudMap
from webhook.core.vocabulary.templates import kind_key
from webhook.core.vocabulary.workloads import is_map, mapping_at

KUEUE_GROUP = "kueue.x-k8s.io"


def is_kueue(doc: Mapping[str, Any], kind: str) -> bool:
    return kind_key(doc) == (KUEUE_GROUP, kind)


def queue_gaps(
    queue: Mapping[str, Any], asked: Iterable[str], target: CloudMap, dialects: Dialects
) -> list[str]:
    """What a ClusterQueue does not cover of the GPU resources the translated pods ask for, and the
    GPU resources it covers that no node of the target offers."""
    groups = _list((mapping_at(queue, ("spec",)) or {}).get("resourceGroups"))
    covered = {str(n) for g in groups if is_map(g) for n in _list(g.get("coveredResources"))}
    name = _name(queue)
    said = []
    missing = sorted(r for r in set(asked) if r not in covered)
    if missing:
        said.append(
            f"gpuport: ClusterQueue {name} does not cover {', '.join(missing)}, which the translated pods "
            "ask for: Kueue admits none of them until a resourceGroup covers it"
        )
    foreign = sorted(
        r for r in covered if dialects.resource_meaning(r).accelerator and not target.is_accelerator(r)
    )
    if foreign:
        offers = f"which no {target.name} node offers"
        said.append(f"gpuport: ClusterQueue {name} covers {', '.join(foreign)}, {offers}")
    return said


def flavor_gaps(flavor: Mapping[str, Any], target: CloudMap, dialects: Dialects) -> list[str]:
    """The GPU node labels of a ResourceFlavor that only another platform's nodes carry: a key the
    target does not read (GKE's accelerator label on EKS), or a value of one it reads that names
    another platform's hardware (an OCI shape in node.kubernetes.io/instance-type on EKS or AKS)."""
    labels = mapping_at(flavor, ("spec", "nodeLabels")) or {}
    name = _name(flavor)
    ours = target.selector_keys()
    gpu_keys = dialects.selector_keys()
    foreign = sorted(
        k
        for k in labels
        if k in gpu_keys and (k not in ours or value_elsewhere(target, k, str(labels[k]), dialects))
    )
    if not foreign:
        return []
    written = ", ".join(f"{k}={labels[k]}" for k in foreign)
    return [
        f"gpuport: ResourceFlavor {name} puts {written} on the pods it admits, which no {target.name} node "
        f"carries: they would stay Pending (use {_instead(labels, foreign, target, dialects)})"
    ]


def _instead(labels: Mapping[str, Any], foreign: list[str], target: CloudMap, dialects: Dialects) -> str:
    """The target's model label, with its values for the models the flavor's labels name."""
    if not target.model_labels:
        return "this cluster's GPU labels"
    label = target.model_labels[0]
    models = {m for k in foreign for m in dialects.label_meaning(k, str(labels[k])).models}
    values = sorted({v for m in models for v in label.values.get(m, ())})
    return f"{label.label}: {'|'.join(values)}" if values else label.label


def _name(doc: Mapping[str, Any]) -> str:
    return str((mapping_at(doc, ("metadata",)) or {}).get("name", "?"))


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
