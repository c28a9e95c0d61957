"""The target's MIG-capable GPUs, one by one, with the layout each has today when a node says it."""

from collections.abc import Mapping
from typing import Any

from webhook.core.planning.geometry import MigGeometry
from webhook.core.planning.planner import Gpu
from webhook.core.vocabulary.dialects import Dialects
from webhook.core.vocabulary.inventory import Inventory, Node, labelled_gpu_count, labelled_models

MIG_CONFIG_LABEL = "nvidia.com/mig.config"  # the GPU Operator's MIG manager applies the config it names
ALL_DISABLED = "all-disabled"
ALL_ENABLED = "all-enabled"
ALL_BALANCED = "all-balanced"


def target_gpus(inventory: Inventory, dialects: Dialects, geometries: Mapping[str, MigGeometry]) -> list[Gpu]:
    """Every GPU of a model with known geometry, node by node (nodes by name, GPUs by index), with its
    layout today where the node's mig.config says it (or its agent says MIG is off) and whether a
    running pod on the node holds GPUs (changing such a node stops it)."""
    busy = {pod.node for pod in inventory.pods if _holds_gpus(pod.manifest)}
    gpus: list[Gpu] = []
    for node in sorted(inventory.nodes, key=lambda n: n.name):
        model, count, agent = _model_and_count(node, dialects)
        if model is None or model not in geometries:
            continue
        model_entry = dialects.catalogue.get(model)
        pci_ids = model_entry.pci_ids if model_entry else ()
        config = node.labels.get(MIG_CONFIG_LABEL, "")
        for index in range(count):
            current = gpu_layout(config, index, geometries[model], pci_ids, inventory.mig_configs)
            if current is None and index < len(agent) and _mig_mode(agent[index]) == "disabled":
                current = {}
            gpus.append(Gpu(node.name, index, model, current, busy=node.name in busy))
    return gpus


def gpu_layout(
    config: str,
    index: int,
    geometry: MigGeometry,
    pci_ids: tuple[str, ...] = (),
    configs: Mapping[str, tuple[Mapping[str, Any], ...]] | None = None,
) -> dict[str, int] | None:
    """GPU `index`'s layout under the mig-parted configuration `config`: read from the configuration
    itself where the inventory lists it (gpuport's own gpuport-<hash> and any custom one), else from
    what the GPU Operator's default configuration means by the name: `all-disabled`, `all-enabled`
    (MIG on, nothing cut), `all-balanced` (per model, geometry data) and `all-<profile>` (every GPU
    full of one profile; `.me` is the file's spelling of `+me`). None: not known from here."""
    if configs and config in configs:
        return _from_entries(configs[config], index, geometry, pci_ids)
    if config in (ALL_DISABLED, ALL_ENABLED):
        return {}
    if config == ALL_BALANCED:
        return dict(geometry.balanced) if geometry.balanced is not None else None
    if not config.startswith("all-"):
        return None
    name = config.removeprefix("all-")
    profile = geometry.profile(name.removesuffix(".me") + "+me" if name.endswith(".me") else name)
    return {profile: geometry.most[profile]} if profile in geometry.most else None


def current_layout(config: str, geometry: MigGeometry) -> dict[str, int] | None:
    """Every GPU's layout under a configuration named for the GPU Operator's defaults (see gpu_layout)."""
    return gpu_layout(config, 0, geometry)


def _from_entries(
    entries: tuple[Mapping[str, Any], ...], index: int, geometry: MigGeometry, pci_ids: tuple[str, ...]
) -> dict[str, int] | None:
    """The first entry that applies to the GPU (its device-filter names the model's PCI id, or there is
    none; its devices are `all` or list the index), as mig-parted picks it; None when none applies or
    it names a profile the model lacks."""
    for entry in entries:
        filters = entry.get("device-filter")
        wanted = [filters] if isinstance(filters, str) else list(filters or [])
        if wanted and not any(str(f)[:6].upper().replace("0X", "0x") in pci_ids for f in wanted):
            continue
        devices = entry.get("devices", "all")
        if devices != "all" and not (isinstance(devices, list) and index in devices):
            continue
        if not entry.get("mig-enabled"):
            return {}
        layout: dict[str, int] = {}
        for name, count in (entry.get("mig-devices") or {}).items():
            profile = geometry.profile(str(name))
            if profile not in geometry.placements or not isinstance(count, int):
                return None
            layout[profile] = layout.get(profile, 0) + count
        return {name: count for name, count in layout.items() if count > 0}
    return None


def _holds_gpus(pod: Mapping[str, Any]) -> bool:
    """Whether a running pod's containers ask for any NVIDIA device (whole GPUs or slices)."""
    spec = pod.get("spec")
    if not isinstance(spec, Mapping):
        return False
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        resources = container.get("resources") if isinstance(container, Mapping) else None
        for part in ("requests", "limits"):
            asked = resources.get(part) if isinstance(resources, Mapping) else None
            if isinstance(asked, Mapping) and any(str(name).startswith("nvidia.com/") for name in asked):
                return True
    return False


def _model_and_count(node: Node, dialects: Dialects) -> tuple[str | None, int, list[Mapping[str, Any]]]:
    agent = [g for g in (node.capability.get("gpus") or []) if isinstance(g, Mapping)]
    models = {g.get("model") for g in agent if isinstance(g.get("model"), str)}
    if not models:
        models = set(labelled_models(node.labels, dialects))
    if len(models) != 1:
        return None, 0, agent
    model = str(next(iter(models)))
    count = len(agent) or labelled_gpu_count(node.labels, dialects) or _allocatable_gpus(node)
    return model, count, agent


def _mig_mode(gpu: Mapping[str, Any]) -> str:
    mig = gpu.get("mig")
    return str(mig.get("mode", "")) if isinstance(mig, Mapping) else ""


def _allocatable_gpus(node: Node) -> int:
    """Whole GPUs the node advertises, when no label counts them (a node with MIG off)."""
    return int(node.allocatable.get("nvidia.com/gpu", 0))
