"""Capacity type (on-demand, spot, reserved) kept in the target's words, or refused.

Every cloud says on a node what capacity it is, each with its own label: EKS managed node groups
eks.amazonaws.com/capacityType=ON_DEMAND, Karpenter karpenter.sh/capacity-type=on-demand, while AKS
and GKE label only spot nodes, so on-demand there is "without the spot label" (and on EKS, where either
provisioner may have made the nodes, every capacity type is "none of the others", on both keys).
A pod that selects a capacity type says what it may be interrupted by and what it costs: dropping
the selector would let an on-demand job land on spot capacity. So the capacity types a pod's
requirements admit are read in every loaded map's words and written in the target's; a capacity type
the target has no word for (reserved on GKE or AKS) is refused, naming what the target offers.
"""

from collections.abc import Iterable, Mapping
from typing import NamedTuple

from webhook.core.asks.demand import Constraint
from webhook.core.rewriting.podedits import AddTolerations, PodEdit, RequireExpression, Say
from webhook.core.vocabulary.dialects import Dialects
from webhook.core.vocabulary.platform import Capacity, CloudMap, NodeLabels

__all__ = ["CapacityPlan", "capacity_keys", "plan_capacity"]

EVERY: frozenset[Capacity] = frozenset(("on-demand", "spot", "reserved"))


class CapacityPlan(NamedTuple):
    labels: dict[str, tuple[str, ...]]  # node labels the pod must have (key → values)
    edits: list[PodEdit]  # what else is written (NotIn expressions, tolerations) and said
    problems: list[str]  # capacity the target has no word for


def capacity_keys(dialects: Dialects) -> frozenset[str]:
    return frozenset().union(*(m.node_labels.capacity_keys() for m in dialects.maps))


def plan_capacity(
    constraints: Iterable[Constraint],
    leaving: Mapping[str, tuple[str, ...]],
    target: CloudMap,
    dialects: Dialects,
) -> CapacityPlan:
    """The capacity the pod's requirements on the labels `leaving` (keys only another platform's
    nodes carry) admit, in the target's words."""
    wanted = EVERY
    read: list[str] = []  # the requirements, their capacity types said beside them
    exact: list[str] = []  # the requirements as written, where nothing is said beside them
    for key, operator, values in constraints:
        if key in leaving:
            wanted = wanted & _admitted(key, operator, values, dialects)
            read.append(_said(key, operator, values))
            exact.append(_said(key, operator, values, exact=True))
    if not read:
        return CapacityPlan({}, [], [])
    asked = " and ".join(read)
    words = _words(target.node_labels)
    if not words:
        # A scheduler layer's map, which does not say how its cloud labels capacity.
        said = f"gpuport: capacity requirement {asked} removed: the {target.name} map names no capacity type"
        return CapacityPlan({}, [Say(said)], [])
    kept = wanted & frozenset(words)
    if not kept:
        problem = (
            f"asks for {_capacity(wanted) or 'no'} capacity ({' and '.join(exact)}); {target.name} has no "
            f"word for it (it offers {'; '.join(f'{c}: {w}' for c, w in sorted(words.items()))})"
        )
        return CapacityPlan({}, [], [problem])
    tolerations: list[PodEdit] = []
    if "spot" in kept and target.node_labels.spot_tolerations:
        tolerations.append(AddTolerations(target.node_labels.spot_tolerations))
    if kept == frozenset(words):
        said = (
            f"gpuport: capacity requirement {asked} removed: any {target.name} node gives {_capacity(kept)}"
        )
        return CapacityPlan({}, [Say(said), *tolerations], [])
    return _write(kept, asked, target, tolerations)


def _write(
    kept: frozenset[Capacity], asked: str, target: CloudMap, tolerations: list[PodEdit]
) -> CapacityPlan:
    labels = target.node_labels
    keys = _keys_naming_every_type(labels) if labels.on_demand else {}
    if len(keys) > 1:
        return _exclude_on_every_key(kept, asked, keys, tolerations)
    # The map's first spot label is the one it writes; the other capacity labels in their order.
    for key in dict.fromkeys([k for k, _ in labels.spot] + [k for _, k, _ in labels.capacity_labels()]):
        values = tuple(
            v for c in sorted(kept) for c2, k, v in labels.capacity_labels() if k == key and c2 == c
        )
        if len({c for c, k, _ in labels.capacity_labels() if k == key} & kept) == len(kept):
            said = Say(f"gpuport: {_capacity(kept)} capacity {asked} → {key}={'|'.join(values)}")
            return CapacityPlan({key: values}, [said, *tolerations], [])
    if kept == {"on-demand"} and not labels.on_demand:
        # On-demand nodes here are those without a spot label: NotIn admits a node without the key.
        edits: list[PodEdit] = []
        for key in dict.fromkeys(k for k, _ in labels.spot):
            spot_values = [v for k, v in labels.spot if k == key]
            expression = {"key": key, "operator": "NotIn", "values": spot_values}
            edits.append(
                RequireExpression(
                    expression, f"gpuport: on-demand capacity {asked} → {key} not in {'|'.join(spot_values)}"
                )
            )
        return CapacityPlan({}, edits, [])
    problem = f"asks for {_capacity(kept)} capacity ({asked}); {target.name} cannot say that in one label"
    return CapacityPlan({}, [], [problem])


def _keys_naming_every_type(labels: NodeLabels) -> dict[str, dict[Capacity, list[str]]]:
    """The keys that each name every capacity type the platform labels, with their values per type."""
    named: dict[str, dict[Capacity, list[str]]] = {}
    for capacity, key, value in labels.capacity_labels():
        named.setdefault(key, {}).setdefault(capacity, []).append(value)
    types = {c for c, _, _ in labels.capacity_labels()}
    return {key: values for key, values in named.items() if set(values) == types}


def _exclude_on_every_key(
    kept: frozenset[Capacity],
    asked: str,
    keys: dict[str, dict[Capacity, list[str]]],
    tolerations: list[PodEdit],
) -> CapacityPlan:
    """Where two provisioners label capacity each with its own key (EKS: managed node groups
    eks.amazonaws.com/capacityType, Karpenter karpenter.sh/capacity-type), an In on one key leaves
    the pod Pending on the other's nodes, and Karpenter will not even provision for it ("label ...
    does not have known values"). A NotIn of the types not kept, on every key, says the same on
    either: a node without the key passes it, and Karpenter accepts NotIn on a key it does not set."""
    edits: list[PodEdit] = []
    for key, values in keys.items():
        excluded = [v for c in sorted(values) if c not in kept for v in values[c]]
        expression = {"key": key, "operator": "NotIn", "values": excluded}
        said = f"gpuport: {_capacity(kept)} capacity {asked} → {key} not in {'|'.join(excluded)}"
        edits.append(RequireExpression(expression, said))
    return CapacityPlan({}, [*edits, *tolerations], [])


def _admitted(key: str, operator: str, values: tuple[str, ...], dialects: Dialects) -> frozenset[Capacity]:
    """The capacity types a requirement on `key` admits, read in every map that labels capacity
    with it."""
    named: set[Capacity] = set()
    sayable: set[Capacity] = set()
    unlabelled_on_demand = False
    for cloud_map in dialects.maps:
        labels = cloud_map.node_labels
        for capacity, k, v in labels.capacity_labels():
            if k == key:
                sayable.add(capacity)
                if v in values:
                    named.add(capacity)
        if not labels.on_demand and any(k == key for k, _ in labels.spot):
            unlabelled_on_demand = True
    absent: frozenset[Capacity] = EVERY - {"spot"} if unlabelled_on_demand else frozenset()
    if operator == "In":
        return frozenset(named)
    if operator == "NotIn":
        return EVERY - named
    if operator == "Exists":
        return frozenset(sayable)
    if operator == "DoesNotExist":
        return absent
    return EVERY


def _words(labels: NodeLabels) -> dict[Capacity, str]:
    """Each capacity type the platform can select, and how."""
    words: dict[Capacity, str] = {}
    for capacity, key, value in labels.capacity_labels():
        words.setdefault(capacity, f"{key}={value}")
    if labels.spot and not labels.on_demand:
        words["on-demand"] = "nodes without " + ", ".join(f"{k}={v}" for k, v in labels.spot)
    return words


def _said(key: str, operator: str, values: tuple[str, ...], exact: bool = False) -> str:
    if operator == "In" and len(values) == 1:
        return f"{key}={values[0]}" if exact else key  # else the capacity type is said beside it
    return f"{key} {operator} {'|'.join(values)}".rstrip()


def _capacity(kept: frozenset[Capacity]) -> str:
    return " or ".join(sorted(kept))
