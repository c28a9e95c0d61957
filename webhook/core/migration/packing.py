"""Best-fit-decreasing placement of pod replicas onto nodes: what fits, where, and what stays Pending."""

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal

from webhook.core.asks.checks import is_extended_resource
from webhook.core.vocabulary.inventory import Node


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
    # (workload, replica index) → why no node takes it: the first thing every node lacks
    why_pending: Mapping[tuple[str, int], str] = field(default_factory=dict)


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


def pack(
    replicas: list[Replica],
    nodes: tuple[Node, ...],
    held: Mapping[str, Mapping[str, Decimal]] | None = None,
) -> Packing:
    """Largest GPU ask first; each onto the feasible node with the least GPU left after placing it.
    `held`: node → what the pods already running there hold, which no replica can have."""
    free = {node.name: dict(node.allocatable) for node in nodes}
    for node_name, holding in (held or {}).items():
        if node_name in free:
            left = free[node_name]
            for name, amount in holding.items():
                left[name] = max(left.get(name, Decimal(0)) - amount, Decimal(0))
    placed: dict[tuple[str, int], str] = {}
    pending: list[Replica] = []
    why: dict[tuple[str, int], str] = {}
    for replica in sorted(replicas, key=lambda r: (-r.size, r.workload, r.index)):
        candidates = [n for n in nodes if feasible(replica, n, free[n.name])]
        if not candidates:
            pending.append(replica)
            why[(replica.workload, replica.index)] = why_no_node(replica, nodes, free)
            continue

        best = min(candidates, key=lambda node: (_left_after(free[node.name], replica), node.name))
        for name, amount in replica.resources.items():
            free[best.name][name] -= amount
        placed[(replica.workload, replica.index)] = best.name
    return Packing(placed, tuple(pending), why)


def why_no_node(replica: Replica, nodes: tuple[Node, ...], free: Mapping[str, Mapping[str, Decimal]]) -> str:
    """What stops the replica everywhere, in the order a user fixes it: no node carries the labels it
    requires, then the ones it refuses, then taints it does not tolerate, then room on those left."""
    if not nodes:
        return "the inventory has no node"
    left = list(nodes)
    for key, values in replica.requires.items():
        matching = [n for n in left if n.labels.get(key) in values]
        if not matching:
            seen = sorted({n.labels[key] for n in left if key in n.labels})
            having = f" (nodes have {', '.join(seen)})" if seen else " (no node has the label)"
            return f"no node labelled {key}={'|'.join(values)}{having}"
        left = matching
    for key, refused in replica.excludes.items():
        left = [n for n in left if key not in n.labels or (refused and n.labels[key] not in refused)]
        if not left:
            return f"every node that fits is labelled {key}{'=' + '|'.join(refused) if refused else ''}"
    tolerated = [
        n
        for n in left
        if all(
            t.get("effect") not in ("NoSchedule", "NoExecute") or tolerates(replica.tolerations, t)
            for t in n.taints
        )
    ]
    if not tolerated:
        taints = sorted({f"{t.get('key')}:{t.get('effect')}" for n in left for t in n.taints})
        return f"the pod does not tolerate the taint {', '.join(taints)} of every node it fits"
    for name, amount in sorted(replica.resources.items()):
        most = max((free[n.name].get(name, Decimal(0)) for n in tolerated), default=Decimal(0))
        if most < amount:
            return f"it asks for {amount} {name} on one node; the most free on a node it fits is {most}"
    return "no node holds all it asks for at once"


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
