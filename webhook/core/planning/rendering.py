"""A layouts plan in the GPU Operator's words: a mig-parted configuration (`version: v1`,
`mig-configs`) with one entry per distinct node layout, carried in the ConfigMap the ClusterPolicy's
`migManager.config.name` names (`default-mig-parted-config` in the operator's namespace unless changed;
key `config.yaml`), and, per changed node, the Node whose `nvidia.com/mig.config` label points at its
entry. `kubectl apply` writes a ConfigMap's data whole, so the configuration also carries every one the
listed nodes use today that gpuport can write (NVIDIA's `all-disabled` and `all-<profile>`, and gpuport's
own), and the plan names those it cannot, to be merged by hand. Plain values; the command writes YAML."""

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.core.planning.mig_plan import MigPlan
from webhook.core.planning.planner import GpuLayout
from webhook.core.planning.target_gpus import ALL_DISABLED, MIG_CONFIG_LABEL
from webhook.core.vocabulary.catalogue import Catalogue

NVIDIA_VENDOR = "10DE"  # mig-parted's device-filter is the PCI device id followed by the vendor id


DEFAULT_CONFIG_MAP = "default-mig-parted-config"  # the GPU Operator's, when migManager.config.name is unset
DEFAULT_NAMESPACE = "gpu-operator"  # where the GPU Operator's Helm chart is installed in NVIDIA's docs
CONFIG_KEY = "config.yaml"  # the ConfigMap key the MIG manager reads


@dataclass(frozen=True)
class Operator:
    """Where the GPU Operator's MIG manager reads its configuration."""

    config_map: str = DEFAULT_CONFIG_MAP
    namespace: str = DEFAULT_NAMESPACE


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
    """mig-parted's file; never with no configuration at all (mig-parted refuses `mig-configs: {}`)."""
    if not configs:
        raise ValueError("a mig-parted configuration needs at least one entry")
    return {"version": "v1", "mig-configs": dict(configs)}


def config_map(operator: Operator, text: str) -> dict[str, Any]:
    """The ConfigMap the MIG manager reads, holding the mig-parted configuration's text."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": operator.config_map, "namespace": operator.namespace},
        "data": {CONFIG_KEY: text},
    }


def node_label(change: NodeChange) -> dict[str, Any]:
    """The Node as `kubectl apply` takes it: only the label set (apply merges it into the node)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": change.node, "labels": {MIG_CONFIG_LABEL: change.config}},
    }


def in_use(
    plan: MigPlan, labels: Mapping[str, Mapping[str, str]], catalogue: Catalogue, changed: set[str]
) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    """The configurations the nodes not changing use today, written out where each GPU's layout is
    known from its name (`all-disabled`, `all-<profile>`, gpuport's own), and the names of those that
    are not (a custom or unknown one), which the ConfigMap this plan writes would drop."""
    by_node: dict[str, list[GpuLayout]] = {}
    for model_plan in plan.models:
        for planned in model_plan.gpus:
            by_node.setdefault(planned.gpu.node, []).append(planned)
    written: dict[str, list[dict[str, Any]]] = {}
    unknown: set[str] = set()
    for node, on_node in sorted(by_node.items()):
        name = labels.get(node, {}).get(MIG_CONFIG_LABEL, "")
        if not name or node in changed:
            continue
        if any(p.gpu.current is None for p in on_node):
            unknown.add(name)
        elif name == ALL_DISABLED:
            written[name] = [{"devices": "all", "mig-enabled": False}]
        elif name.startswith("all-"):  # one entry per model, its devices all: nodes differ in GPU count
            entries = written.setdefault(name, [])
            for model in sorted({p.gpu.model for p in on_node}):
                layout = next(p.gpu.current or {} for p in on_node if p.gpu.model == model)
                entry = _entry(model, layout, "all", catalogue)
                if entry not in entries:
                    entries.append(entry)
        else:
            kept = [GpuLayout(p.gpu, p.gpu.current or {}, {}) for p in on_node]
            written.setdefault(name, _entries(kept, catalogue))
    return written, sorted(unknown - set(written))


def _entries(planned: list[GpuLayout], catalogue: Catalogue) -> list[dict[str, Any]]:
    groups: dict[str, tuple[dict[str, int], list[int], str]] = {}
    for gpu_plan in sorted(planned, key=lambda p: p.gpu.index):
        layout = {name: count for name, count in sorted(gpu_plan.layout.items()) if count}
        key = json.dumps([gpu_plan.gpu.model, layout])
        groups.setdefault(key, (layout, [], gpu_plan.gpu.model))[1].append(gpu_plan.gpu.index)
    return [_entry(model_id, layout, devices, catalogue) for layout, devices, model_id in groups.values()]


def _entry(model_id: str, layout: Mapping[str, int], devices: Any, catalogue: Catalogue) -> dict[str, Any]:
    model = catalogue.get(model_id)
    filters = [f"{pci}{NVIDIA_VENDOR}" for pci in (model.pci_ids if model else ())]
    entry: dict[str, Any] = {"device-filter": filters, "devices": devices, "mig-enabled": bool(layout)}
    if layout:
        entry["mig-devices"] = dict(layout)
    return entry


def _config_name(model: str, entries: list[dict[str, Any]]) -> str:
    """Named by model and content: nodes with the same layout share one entry, and a label value
    stays under Kubernetes' 63 characters."""
    digest = hashlib.sha256(json.dumps(entries, sort_keys=True).encode()).hexdigest()[:8]
    return f"gpuport-{model.lower()}-{digest}"
