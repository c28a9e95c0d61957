"""Topology and NUMA hints for multi-GPU pods, and co-location for pods of one job (pure).

From the node agent's capability records it groups nodes into classes, computes for each the best
cost Σ_{i<j} D_ij × Hop_ij of k GPUs (uniform D, as for data-parallel training; Hop: NVLink 1, same PCIe
switch 2, host bridge / NUMA 3, cross-socket 4), and steers the pod toward nodes whose NVLink domain
holds k GPUs, or else toward the cheapest class.
"""

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.core.asks.demand import PodDemand
from webhook.core.rewriting.podedits import editable, require_expression
from webhook.core.vocabulary import quantity
from webhook.core.vocabulary.inventory import Inventory
from webhook.core.vocabulary.platform import CloudMap
from webhook.core.vocabulary.topology import best_cost
from webhook.core.vocabulary.workloads import (
    container_specs,
    mapping_at,
    resource_entries,
    resource_section,
)

JOB_LABELS = (
    "batch.kubernetes.io/job-name",
    "training.kubeflow.org/job-name",
    "jobset.sigs.k8s.io/jobset-name",
)
_JOB_LABEL_KEYS = frozenset(JOB_LABELS)
NVLINK_LABEL = "gpuport.io/nvlink-domain-size"
NUMA_HINT = "gpuport.io/numa-hint"
NUMA_ANNOTATIONS = {
    "volcano": ("volcano.sh/numa-topology-policy", "single-numa-node"),
    "koordinator": (
        "scheduling.koordinator.sh/numa-topology-spec",
        '{"numaTopologyPolicy":"SingleNUMANode"}',
    ),
}


@dataclass(frozen=True)
class NodeClass:
    model: str
    gpus: int
    nvlink_domain_size: int
    gpus_per_numa_node: int | None
    nodes: tuple[str, ...]
    topology: tuple[tuple[str, ...], ...]

    @property
    def label(self) -> str:
        numa = self.gpus_per_numa_node if self.gpus_per_numa_node is not None else "?"
        return f"{self.gpus}×{self.model}, NVLink domain {self.nvlink_domain_size}, {numa} GPUs/NUMA"


@dataclass(frozen=True)
class CostRow:
    node_class: NodeClass
    cost: int | None  # None: the class cannot hold k GPUs
    gpus: tuple[int, ...]


def node_classes(inventory: Inventory | None) -> list[NodeClass]:
    groups: dict[tuple[Any, ...], list[str]] = {}
    for node in inventory.nodes if inventory else ():
        capability = node.capability
        if not capability or not capability.get("gpus"):
            continue
        models = {g.get("model") or g.get("name") for g in capability["gpus"]}
        key = (
            "/".join(sorted(m for m in models if m)),
            capability.get("healthy_gpu_count", len(capability["gpus"])),
            capability.get("nvlink_domain_size", 0),
            capability.get("gpus_per_numa_node"),
            json.dumps(capability.get("topology")),
        )
        groups.setdefault(key, []).append(node.name)
    return [
        NodeClass(
            key[0], key[1], key[2], key[3], tuple(sorted(names)), tuple(map(tuple, json.loads(key[4]) or ()))
        )
        for key, names in sorted(groups.items(), key=lambda item: item[0][:4])
    ]


def cost_table(classes: list[NodeClass], k: int) -> list[CostRow]:
    rows = []
    for node_class in classes:
        if node_class.gpus < k or not node_class.topology:
            rows.append(CostRow(node_class, None, ()))
            continue
        cost, chosen = best_cost([list(r) for r in node_class.topology], k)
        rows.append(CostRow(node_class, cost, tuple(chosen)))
    return sorted(
        rows, key=lambda r: (r.cost is None, r.cost if r.cost is not None else 0, r.node_class.label)
    )


@dataclass(frozen=True)
class TopologyPlan:
    """The hint for every k-GPU pod of one context: the NVLink node-affinity requirement (no operator:
    no node has k healthy GPUs), the warning that says it, and whether k GPUs fit one NUMA node."""

    operator: str
    values: tuple[str, ...]
    said: str
    numa: bool

    def expression(self) -> dict[str, Any]:
        """A new one for each pod: a pod's patch never shares an object with what the context keeps."""
        return {"key": NVLINK_LABEL, "operator": self.operator, "values": list(self.values)}


def topology_plan(rows: list[CostRow], k: int, target: CloudMap) -> TopologyPlan:
    """Toward nodes whose NVLink domain holds k GPUs, or else toward the cheapest class."""
    feasible = [r for r in rows if r.cost is not None]
    if not feasible:
        return TopologyPlan("", (), f"gpuport: no node has {k} healthy GPUs now", False)
    values: tuple[str, ...]
    if any(r.node_class.nvlink_domain_size >= k for r in feasible):
        operator, values = "Gt", (str(k - 1),)
        why = f"NVLink domain ≥ {k}"
        chosen = [r for r in feasible if r.node_class.nvlink_domain_size >= k]
    else:
        best = feasible[0]
        chosen = [r for r in feasible if r.cost == best.cost]
        operator, values = "In", tuple(sorted({str(r.node_class.nvlink_domain_size) for r in chosen}))
        why = f"lowest GPU-pair cost {best.cost} for {k} GPUs"
    mode = "required" if target.topology_policy == "required" else "preferred"
    said = f"gpuport: {mode} node affinity {NVLINK_LABEL} {operator} {list(values)} ({why})"
    numa = [r.node_class.gpus_per_numa_node for r in chosen if r.node_class.gpus_per_numa_node]
    return TopologyPlan(operator, values, said, bool(numa) and k <= min(numa))


def whole_gpus(spec: Mapping[str, Any], target: CloudMap) -> int:
    """The whole GPUs the app containers' limits ask for (runs on every pod the hints may change, so it
    looks up the one name in each container rather than walking every entry)."""
    total = 0
    for container in container_specs(spec, ("containers",)):
        value = resource_section(container, "limits").get(target.whole_gpu)
        if value is None:
            continue
        try:
            total += int(quantity.parse(value))
        except (quantity.QuantityError, ValueError):
            continue
    return total


class PlacementHints:
    """A mutation (see core.deciding.context.Mutation) adding the hints; `wants` lets the core skip
    the copy."""

    # The pod labels and annotations the hints read or write, whatever the map: the memo keys on these.
    label_keys = _JOB_LABEL_KEYS
    annotation_keys = frozenset({NUMA_HINT, *(key for key, _ in NUMA_ANNOTATIONS.values())})

    def __init__(self, target: CloudMap, inventory: Inventory | None):
        self.target = target
        self.classes = node_classes(inventory)
        # The best k-GPU subset of each node class, and so the hint, depends on k alone while this
        # context lives (a node change builds a new context): worked out once per k, not once per pod.
        self._plans: dict[int, TopologyPlan] = {}

    def wants(self, pod: Mapping[str, Any], demand: PodDemand | None = None) -> bool:
        """Pods of a job, or pods that may ask for several GPUs (before translation, in any dialect).
        With the pod's demand (read already), from its asks: no translation turns asks counting fewer
        than 2 in the app containers into 2 whole GPUs."""
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if type(labels) is dict:  # a set test in C; other shapes (hand-written files) as they were
            if not _JOB_LABEL_KEYS.isdisjoint(labels):
                return True
        elif any(key in labels for key in JOB_LABELS):
            return True
        if not self.classes:
            return False
        if demand is not None and not demand.problems:
            return sum(a.count for a in demand.asks if a.list_name == "containers") >= 2
        return _asks_several(pod)

    def __call__(self, view: dict[str, Any], pod: Mapping[str, Any]) -> list[str]:
        warnings = self._job_affinity(view, pod)
        k = whole_gpus(view["spec"], self.target)
        if k >= 2 and self.classes:
            warnings += self._topology(view, k)
        return warnings

    def _topology(self, view: dict[str, Any], k: int) -> list[str]:
        plan = self._plans.get(k)
        if plan is None:
            plan = topology_plan(cost_table(self.classes, k), k, self.target)
            if k <= max(c.gpus for c in self.classes):  # a pod cannot grow the table past the nodes
                self._plans[k] = plan
        if not plan.operator:
            return [plan.said]
        warnings = [plan.said] if self._add_node_affinity(view["spec"], plan.expression()) else []
        if plan.numa:
            warnings += self._numa(view, k)
        return warnings

    def _add_node_affinity(self, spec: dict[str, Any], expression: dict[str, Any]) -> bool:
        if self.target.topology_policy == "required":
            return require_expression(spec, expression)  # into every term, as translation requires labels
        node_affinity = editable(editable(spec, "affinity", dict), "nodeAffinity", dict)
        preferred = editable(node_affinity, "preferredDuringSchedulingIgnoredDuringExecution", list)
        wanted = {"weight": 100, "preference": {"matchExpressions": [expression]}}
        if wanted in preferred:
            return False
        preferred.append(wanted)
        return True

    def _numa(self, view: dict[str, Any], k: int) -> list[str]:
        annotations = editable(view["metadata"], "annotations", dict)
        changed = annotations.get(NUMA_HINT) != "single-numa-node"
        annotations[NUMA_HINT] = "single-numa-node"
        if self.target.numa_scheduler in NUMA_ANNOTATIONS:
            key, value = NUMA_ANNOTATIONS[self.target.numa_scheduler]
            changed |= annotations.get(key) != value
            annotations[key] = value
        if not changed:
            return []
        warnings = [f"gpuport: {k} GPUs fit one NUMA node: NUMA hint added"]
        if not guaranteed_qos(view["spec"]):
            warnings.append(
                "gpuport: pod is not Guaranteed QoS, so the kubelet will not align its CPUs and GPUs"
            )
        return warnings

    def _job_affinity(self, view: dict[str, Any], pod: Mapping[str, Any]) -> list[str]:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        key = next((k for k in JOB_LABELS if k in labels), None)
        if key is None:
            return []
        # The nearest group of nodes the platform labels, above the node itself.
        topology = (
            self.target.topology_labels.get("subblock")
            or self.target.topology_labels.get("block")
            or self.target.topology_labels.get("zone")
            or "topology.kubernetes.io/zone"
        )
        term = {
            "weight": 100,
            "podAffinityTerm": {
                "labelSelector": {"matchLabels": {key: labels[key]}},
                "topologyKey": topology,
            },
        }
        affinity = editable(editable(view["spec"], "affinity", dict), "podAffinity", dict)
        preferred = editable(affinity, "preferredDuringSchedulingIgnoredDuringExecution", list)
        if term in preferred:
            return []
        preferred.append(term)
        return [f"gpuport: pods of {key}={labels[key]} prefer one {topology}"]


def _asks_several(pod: Mapping[str, Any]) -> bool:
    totals: dict[str, int] = {}
    spec = mapping_at(pod, ("spec",)) or {}
    for _, name, value in resource_entries(spec, "limits", ("containers",)):
        if "/" in name:
            try:
                totals[name] = totals.get(name, 0) + int(quantity.parse(value))
            except (quantity.QuantityError, ValueError, ArithmeticError):
                continue
    return any(total >= 2 for total in totals.values())


def guaranteed_qos(spec: Mapping[str, Any]) -> bool:
    """Every container has cpu and memory limits, and requests equal to them (or unset)."""
    for container in container_specs(spec):
        limits = resource_section(container, "limits")
        requests = resource_section(container, "requests")
        for name in ("cpu", "memory"):
            if name not in limits or requests.get(name, limits[name]) != limits[name]:
                return False
    return True
