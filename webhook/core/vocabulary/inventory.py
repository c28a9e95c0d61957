"""A target cluster's nodes and quotas, from `kubectl get nodes -o yaml` (or a list of Node documents)."""

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from webhook.core.vocabulary import quantity
from webhook.core.vocabulary.dialects import Dialects
from webhook.core.vocabulary.errors import BadInput
from webhook.core.vocabulary.topology import CAPABILITY_ANNOTATION

GFD_PRODUCT = "nvidia.com/gpu.product"
GFD_COUNT = "nvidia.com/gpu.count"
GFD_REPLICAS = "nvidia.com/gpu.replicas"  # a time-sliced or MPS GPU is advertised this many times


class InventoryError(BadInput):
    pass


@dataclass(frozen=True)
class Node:
    name: str
    labels: Mapping[str, str]
    allocatable: Mapping[str, Decimal]
    taints: tuple[Mapping[str, str], ...] = ()
    capability: Mapping[str, Any] = field(default_factory=dict)  # the node agent's annotation, if any


@dataclass(frozen=True)
class NamespaceQuota:
    """A namespace's ResourceQuota as an inventory lists it (preflight's input); the admission-time
    quota with scopes is core.budget.quota.Quota."""

    namespace: str
    name: str
    hard: Mapping[str, Decimal]


@dataclass(frozen=True)
class BoundPod:
    """A pod bound to a node and not finished: what it holds there is not free for anything moved in."""

    node: str
    namespace: str
    name: str
    manifest: Mapping[str, Any]  # the Pod as the API server serves it


@dataclass(frozen=True)
class Inventory:
    nodes: tuple[Node, ...]
    quotas: tuple[NamespaceQuota, ...] = ()
    problems: tuple[str, ...] = ()  # node-agent records that could not be read, each with why
    pods: tuple[BoundPod, ...] = ()  # running pods (a live read, or Pods listed beside the nodes)
    # mig-parted configurations by name (a ConfigMap listed beside the nodes: the one the ClusterPolicy
    # names), each a list of entries as mig-parted reads them: what a node's nvidia.com/mig.config means
    mig_configs: Mapping[str, tuple[Mapping[str, Any], ...]] = field(default_factory=dict)


def inventory_items(documents: list[Any]) -> list[Mapping[str, Any]]:
    """The objects of `kubectl get -o yaml` documents: Lists unwrapped, plain lists and single objects."""
    items: list[Mapping[str, Any]] = []
    for doc in documents:
        if isinstance(doc, Mapping) and doc.get("kind") == "List":
            items += [i for i in doc.get("items") or [] if isinstance(i, Mapping)]
        elif isinstance(doc, list):
            items += [i for i in doc if isinstance(i, Mapping)]
        elif isinstance(doc, Mapping):
            items.append(doc)
    return items


def parse_inventory(documents: list[Any]) -> Inventory:
    items = inventory_items(documents)
    nodes, quotas, problems, pods = [], [], [], []
    for item in items:
        kind = item.get("kind", "Node")
        metadata = item.get("metadata") or {}
        name = str(metadata.get("name", "?"))
        if kind == "Node":
            status = item.get("status") or {}
            resources = status.get("allocatable") or status.get("capacity") or {}
            annotations = metadata.get("annotations") or {}
            capability, problem = _capability(annotations.get(CAPABILITY_ANNOTATION))
            if problem:
                problems.append(f"node {name}: {CAPABILITY_ANNOTATION} {problem}")
            nodes.append(
                Node(
                    name=name,
                    labels={str(k): str(v) for k, v in (metadata.get("labels") or {}).items()},
                    allocatable={str(k): _amount(v, name, k) for k, v in resources.items()},
                    taints=tuple((item.get("spec") or {}).get("taints") or ()),
                    capability=capability,
                )
            )
        elif kind == "ResourceQuota":
            hard = ((item.get("spec") or {}).get("hard")) or {}
            quotas.append(
                NamespaceQuota(
                    str(metadata.get("namespace", "default")),
                    name,
                    {str(k): _amount(v, name, k) for k, v in hard.items()},
                )
            )
        elif kind == "Pod":
            bound = _bound_pod(item, name)
            if bound is not None:
                pods.append(bound)
    if not nodes:
        raise InventoryError("the inventory holds no Node objects (use `kubectl get nodes -o yaml`)")
    return Inventory(tuple(nodes), tuple(quotas), tuple(problems), tuple(pods))


def _bound_pod(item: Mapping[str, Any], name: str) -> BoundPod | None:
    """A Pod that holds its node's resources: bound (spec.nodeName) and not Succeeded or Failed, the
    pods the scheduler and the quota count; a pending or finished one holds nothing."""
    spec = item.get("spec")
    status = item.get("status")
    node = spec.get("nodeName") if isinstance(spec, Mapping) else None
    phase = status.get("phase") if isinstance(status, Mapping) else None
    if not isinstance(node, str) or not node or phase in ("Succeeded", "Failed"):
        return None
    namespace = str((item.get("metadata") or {}).get("namespace", "default"))
    return BoundPod(node, namespace, name, item)


def _capability(text: Any) -> tuple[dict[str, Any], str]:
    """A node agent's record, or ({}, why not). Anyone who may patch a Node may write the annotation:
    a record that is not one costs that node its record, never the view of every other node."""
    if text is None:
        return {}, ""
    try:
        record = json.loads(text)
    except (TypeError, ValueError) as exc:
        return {}, f"is not JSON ({exc})"
    if not isinstance(record, dict):
        return {}, "is not a JSON object"
    gpus = record.get("gpus")
    if gpus is not None and not (isinstance(gpus, list) and all(isinstance(g, dict) for g in gpus)):
        return {}, "has gpus that are not a list of objects"
    for key, kinds in _READ_FIELDS.items():
        if key in record and not isinstance(record[key], kinds):
            return {}, f"has {key} of the wrong type ({type(record[key]).__name__})"
    for gpu in gpus or ():
        for key, kinds in _READ_GPU_FIELDS.items():
            if key in gpu and not isinstance(gpu[key], kinds):
                return {}, f"has a GPU whose {key} is of the wrong type ({type(gpu[key]).__name__})"
    topology = record.get("topology")
    if topology is not None and not all(
        isinstance(row, list) and all(isinstance(link, str) for link in row) for row in topology
    ):
        return {}, "has a topology that is not a matrix of link names"
    return record, ""


# The fields of an agent's record that decisions read, and what each may hold (None: not measured).
_READ_FIELDS: dict[str, tuple[type, ...]] = {
    "healthy_gpu_count": (int,),
    "nvlink_domain_size": (int,),
    "gpus_per_numa_node": (int, type(None)),
    "topology": (list, type(None)),
}
_READ_GPU_FIELDS: dict[str, tuple[type, ...]] = {
    "model": (str, type(None)),
    "name": (str, type(None)),
    "health": (dict,),
    "mig": (dict, type(None)),
}


def _amount(value: Any, owner: str, key: str) -> Decimal:
    try:
        return quantity.parse(value)
    except quantity.QuantityError as exc:
        raise InventoryError(f"{owner}: {key}: {exc}") from None


def models_present(inventory: Inventory, dialects: Dialects) -> set[str]:
    """GPU models with at least one healthy GPU: from the node agent's record, else from every label
    form a node may carry: any platform's model labels, and GFD product names (MIG-single and
    shared products included: NVIDIA-A100-SXM4-40GB-MIG-1g.5gb is an A100-40GB)."""
    present: set[str] = set()
    for node in inventory.nodes:
        gpus = node.capability.get("gpus") if node.capability else None
        if gpus:
            present |= {
                g["model"] for g in gpus if isinstance(g.get("model"), str) and _healthy(g.get("health"))
            }
            continue
        present |= labelled_models(node.labels, dialects)
    return {m for m in present if m in dialects.catalogue.models}


def labelled_models(labels: Mapping[str, str], dialects: Dialects) -> set[str]:
    """The GPU models a node's labels name, without the node agent: any loaded platform's model labels
    (GPU names, instance types) and GFD's product name."""
    catalogue = dialects.catalogue
    found: set[str] = set()
    for label in (label for cloud_map in dialects.maps for label in cloud_map.model_labels):
        value = labels.get(label.label)
        if value is not None:
            found |= label.models_for(value)
    product = catalogue.by_product_name(labels.get(GFD_PRODUCT, ""))
    if product is not None:
        found.add(product[0].id)
    return {m for m in found if m in catalogue.models}


def labelled_gpu_count(labels: Mapping[str, str], dialects: Dialects) -> int | None:
    """The GPUs a node holds by its labels: GFD's count, else what a loaded map's instance-type table
    says a node with that label holds; None when no label says."""
    count = labels.get(GFD_COUNT, "")
    if count.isdigit():
        return int(count)
    for label in (label for cloud_map in dialects.maps for label in cloud_map.model_labels):
        value = labels.get(label.label)
        if value is not None and value in label.gpus:
            return label.gpus[value]
    return None


def _healthy(health: Any) -> bool:
    return not isinstance(health, Mapping) or health.get("healthy", True) is not False
