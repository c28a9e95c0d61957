"""Best-fit-decreasing placement of pod replicas onto nodes: what fits, where, and what stays Pending."""

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal

from webhook.core.checks import is_extended_resource
from webhook.core.inventory import Node


@dataclass(frozen=True)
class Replica:
    workload: str
    index: int
    size: Decimal  # GPU-equivalents: the sort key, largest first
    resources: Mapping[str, Decimal]  # extended resources one replica asks for
    requires: Mapping[str, tuple[str, ...]]  # node label → acceptable values
    tolerations: tuple[Mapping[str, str], ...] = ()
    excludes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # label → refused values; (): any


@dataclass(frozen=True)
class Packing:
    placed: Mapping[tuple[str, int], str]  # (workload, replica index) → node name
    pending: tuple[Replica, ...]


def tolerates(tolerations: tuple[Mapping[str, str], ...], taint: Mapping[str, str]) -> bool:
    for toleration in tolerations:
        operator = toleration.get("operator", "Equal")
        key_ok = toleration.get("key") == taint.get("key") or (
            operator == "Exists" and not toleration.get("key")
        )
        value_ok = operator == "Exists" or toleration.get("value", "") == taint.get("value", "")
        effect_ok = not toleration.get("effect") or toleration.get("effect") == taint.get("effect")
        if key_ok and value_ok and effect_ok:
            return True
    return False


def feasible(replica: Replica, node: Node, free: Mapping[str, Decimal]) -> bool:
    if any(node.labels.get(key) not in values for key, values in replica.requires.items()):
        return False
    for key, refused in replica.excludes.items():
        if key in node.labels and (not refused or node.labels[key] in refused):
            return False
    for taint in node.taints:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(replica.tolerations, taint):
            return False
    return all(free.get(name, Decimal(0)) >= amount for name, amount in replica.resources.items())


def pack(replicas: list[Replica], nodes: tuple[Node, ...]) -> Packing:
    """Largest GPU ask first; each onto the feasible node with the least GPU left after placing it."""
    free = {node.name: dict(node.allocatable) for node in nodes}
    placed: dict[tuple[str, int], str] = {}
    pending: list[Replica] = []
    for replica in sorted(replicas, key=lambda r: (-r.size, r.workload, r.index)):
        candidates = [n for n in nodes if feasible(replica, n, free[n.name])]
        if not candidates:
            pending.append(replica)
            continue

        best = min(candidates, key=lambda node: (_left_after(free[node.name], replica), node.name))
        for name, amount in replica.resources.items():
            free[best.name][name] -= amount
        placed[(replica.workload, replica.index)] = best.name
    return Packing(placed, tuple(pending))


def _left_after(free: Mapping[str, Decimal], replica: Replica) -> Decimal:
    """Extended resources a node would still have free once the replica is placed on it."""
    return sum(
        (
            amount - replica.resources.get(name, Decimal(0))
            for name, amount in free.items()
            if is_extended_resource(name)
        ),
        Decimal(0),
    )
