"""Which running pods must leave a node before its GPUs are repartitioned, and in what order.

The GPU Operator's MIG manager does not evict user pods before it repartitions; a pod left on a GPU
being cut loses its device. So each changed node is drained first, one node at a time (the nodes with
the fewest GPU pods first, so the first repartitions come soonest), and a workload whose every
running replica is on one node is said: draining that node takes it down, so it is scaled out first.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.core.planning.rendering import NodeChange
from webhook.core.vocabulary.inventory import BoundPod


@dataclass(frozen=True)
class Drain:
    node: str
    pods: tuple[str, ...]  # namespace/name, in the order to evict them
    warnings: tuple[str, ...] = ()


def drain_order(changes: list[NodeChange], pods: tuple[BoundPod, ...]) -> list[Drain]:
    on_gpus = [p for p in pods if _holds_gpu(p.manifest)]
    replicas: dict[str, set[str]] = {}
    for pod in on_gpus:
        replicas.setdefault(_owner(pod), set()).add(pod.node)
    by_node: dict[str, list[BoundPod]] = {}
    for pod in on_gpus:
        by_node.setdefault(pod.node, []).append(pod)
    drains = []
    for change in changes:
        here = sorted(by_node.get(change.node, ()), key=lambda p: (_owner(p), p.name))
        warnings = sorted(
            {
                f"every running replica of {owner} is on {change.node}: scale it out before draining"
                for owner in map(_owner, here)
                if replicas[owner] == {change.node} and not owner.startswith("Pod/")
            }
        )
        drains.append(Drain(change.node, tuple(f"{p.namespace}/{p.name}" for p in here), tuple(warnings)))
    return sorted(drains, key=lambda d: (len(d.pods), d.node))


def _owner(pod: BoundPod) -> str:
    """The workload a pod is a replica of (its first owner), or the pod itself."""
    owners = (pod.manifest.get("metadata") or {}).get("ownerReferences") or []
    first = owners[0] if owners and isinstance(owners[0], Mapping) else None
    if first is None:
        return f"Pod/{pod.namespace}/{pod.name}"
    return f"{first.get('kind')}/{pod.namespace}/{first.get('name')}"


def _holds_gpu(manifest: Mapping[str, Any]) -> bool:
    spec = manifest.get("spec") or {}
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        resources = (container or {}).get("resources") or {}
        for part in ("limits", "requests"):
            if any(str(name).startswith("nvidia.com/") for name in (resources.get(part) or {})):
                return True
    return False
