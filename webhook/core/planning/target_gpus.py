"""The target's MIG-capable GPUs, one by one, with the layout each has today when a node says it."""

from collections.abc import Mapping
from typing import Any

from webhook.core.planning.geometry import MigGeometry
from webhook.core.planning.planner import Gpu
from webhook.core.vocabulary.dialects import Dialects
from webhook.core.vocabulary.inventory import Inventory, Node, labelled_gpu_count, labelled_models

MIG_CONFIG_LABEL = "nvidia.com/mig.config"  # the GPU Operator's MIG manager applies the config it names
ALL_DISABLED = "all-disabled"


def target_gpus(inventory: Inventory, dialects: Dialects, geometries: Mapping[str, MigGeometry]) -> list[Gpu]:
    """Every GPU of a model with known geometry, node by node (nodes by name, GPUs by index)."""
    gpus: list[Gpu] = []
    for node in sorted(inventory.nodes, key=lambda n: n.name):
        model, count, agent = _model_and_count(node, dialects)
        if model is None or model not in geometries:
            continue
        today = current_layout(node.labels.get(MIG_CONFIG_LABEL, ""), geometries[model])
        for index in range(count):
            current = today
            if current is None and index < len(agent) and _mig_mode(agent[index]) == "disabled":
                current = {}
            gpus.append(Gpu(node.name, index, model, current))
    return gpus


def current_layout(config: str, geometry: MigGeometry) -> dict[str, int] | None:
    """Each GPU's layout as the node's mig.config label names it, when the name says it by itself: the
    GPU Operator's `all-disabled` and `all-<profile>` (every GPU full of one profile). Any other name
    (all-balanced, a custom one) is a configuration gpuport cannot see from here: None."""
    if config == ALL_DISABLED:
        return {}
    profile = config.removeprefix("all-")
    if config.startswith("all-") and profile in geometry.most:
        return {profile: geometry.most[profile]}
    return None


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
