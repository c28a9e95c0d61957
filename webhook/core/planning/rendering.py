"""A layouts plan in the GPU Operator's words: a mig-parted configuration (`version: v1`,
`mig-configs`) with one entry per distinct node layout, and the Node label patches that point each
changed node's `nvidia.com/mig.config` at its entry. Plain values; the command writes them as YAML."""

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.core.planning.mig_plan import MigPlan
from webhook.core.planning.planner import GpuLayout
from webhook.core.planning.target_gpus import MIG_CONFIG_LABEL
from webhook.core.vocabulary.catalogue import Catalogue

NVIDIA_VENDOR = "10DE"  # mig-parted's device-filter is the PCI device id followed by the vendor id


@dataclass(frozen=True)
class NodeChange:
    node: str
    config: str  # the mig-parted configuration's name the label is set to
    gpus: tuple[GpuLayout, ...]


def node_changes(
    plan: MigPlan, catalogue: Catalogue
) -> tuple[dict[str, list[dict[str, Any]]], list[NodeChange]]:
    """The mig-parted configurations and the nodes that change to them. A node changes when one of
    its GPUs serves slices with a layout other than today's; its other GPUs are written as they are
    today, or with MIG off when today is unknown (mig-parted configures every GPU of a node)."""
    by_node: dict[str, list[GpuLayout]] = {}
    for model_plan in plan.models:
        for planned in model_plan.gpus:
            by_node.setdefault(planned.gpu.node, []).append(planned)
    configs: dict[str, list[dict[str, Any]]] = {}
    changes: list[NodeChange] = []
    for node, on_node in sorted(by_node.items()):
        if all(p.kept or not p.serves for p in on_node):
            continue
        entries = _entries(on_node, catalogue)
        name = _config_name(on_node[0].gpu.model, entries)
        configs[name] = entries
        changes.append(NodeChange(node, name, tuple(on_node)))
    return configs, changes


def mig_parted_config(configs: Mapping[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return {"version": "v1", "mig-configs": dict(configs)}


def label_patches(changes: list[NodeChange]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": change.node, "labels": {MIG_CONFIG_LABEL: change.config}},
            }
            for change in changes
        ],
    }


def _entries(planned: list[GpuLayout], catalogue: Catalogue) -> list[dict[str, Any]]:
    groups: dict[str, tuple[dict[str, int], list[int], str]] = {}
    for gpu_plan in sorted(planned, key=lambda p: p.gpu.index):
        layout = {name: count for name, count in sorted(gpu_plan.layout.items()) if count}
        key = json.dumps([gpu_plan.gpu.model, layout])
        groups.setdefault(key, (layout, [], gpu_plan.gpu.model))[1].append(gpu_plan.gpu.index)
    entries = []
    for layout, devices, model_id in groups.values():
        model = catalogue.get(model_id)
        filters = [f"{pci}{NVIDIA_VENDOR}" for pci in (model.pci_ids if model else ())]
        entry: dict[str, Any] = {"device-filter": filters, "devices": devices, "mig-enabled": bool(layout)}
        if layout:
            entry["mig-devices"] = layout
        entries.append(entry)
    return entries


def _config_name(model: str, entries: list[dict[str, Any]]) -> str:
    """Named by model and content: nodes with the same layout share one entry, and a label value
    stays under Kubernetes' 63 characters."""
    digest = hashlib.sha256(json.dumps(entries, sort_keys=True).encode()).hexdigest()[:8]
    return f"gpuport-{model.lower()}-{digest}"
