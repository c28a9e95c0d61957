"""Build the decision context from the cloud-map directory and, optionally, a node inventory
(at startup and on every reload)."""

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from webhook.config.cloudmap import CloudMapError, LoadedMaps, load_directory
from webhook.config.manifest_text import UnreadableText, documents
from webhook.config.mig_parted import MigConfigError, mig_configs_in
from webhook.core.asks.claims import read_device_class, standing_classes
from webhook.core.deciding.context import Context
from webhook.core.rewriting.placement import PlacementHints
from webhook.core.rewriting.sharing_guard import SharedMemoryGuard
from webhook.core.rewriting.whole_gpus import SliceNodes, slice_nodes
from webhook.core.vocabulary import dra_api
from webhook.core.vocabulary.dialects import Dialects
from webhook.core.vocabulary.inventory import Inventory, InventoryError, models_present, parse_inventory
from webhook.core.vocabulary.platform import CloudMap
from webhook.core.vocabulary.topology import SHARED_MEMORY_FULL


class StartupError(RuntimeError):
    pass


@dataclass(frozen=True)
class ClusterDra:
    """What a DRA cluster says of itself: the newest resource.k8s.io version its API server serves
    (what `api_version: auto` becomes) and its DeviceClasses (those with an extendedResourceName let
    pods asking for that resource run as written, KEP-5004)."""

    # Where no API server can be asked (translate, preflight): what every Kubernetes from 1.34 serves.
    api_version: dra_api.Version = dra_api.NEWEST
    device_classes: tuple[Mapping[str, Any], ...] = ()


def build_context(
    cloudmap_dir: Path,
    cloud: str,
    inventory_file: Path | None = None,
    inventory: Inventory | None = None,
    read_as: str | None = None,
    cluster_dra: ClusterDra | None = None,
) -> Context:
    """The decision context; nodes come from `inventory_file`, else `inventory` (the cluster view).
    `read_as` restricts the dialects asks are read in to that one map (and the target's): the
    offline commands' --from, for labels two clouds share with different meanings. `cluster_dra`
    resolves a DRA target's `api_version: auto` (offline: resource.k8s.io/v1)."""
    try:
        loaded = load_directory(cloudmap_dir)
    except CloudMapError as exc:
        raise StartupError(f"cloud map error: {exc}") from None
    for name in filter(None, (cloud, read_as)):
        if name not in loaded.maps:
            known = ", ".join(sorted(loaded.maps)) or "none"
            raise StartupError(f"no cloud map named {name!r} in {cloudmap_dir} (found: {known})")
    loaded.maps[cloud] = with_cluster_dra(loaded.maps[cloud], cluster_dra or ClusterDra(), loaded)
    readable = [loaded.maps[read_as], loaded.maps[cloud]] if read_as else list(loaded.maps.values())
    dialects = Dialects(tuple({m.name: m for m in readable}.values()), loaded.catalogue)
    target = loaded.maps[cloud]
    if inventory_file is not None:
        inventory = load_inventory(inventory_file)
    if inventory is None:
        return Context(target=target, dialects=dialects)
    declared = target
    present = models_present(inventory, dialects)
    offered = tuple(m for m in target.models_offered(loaded.catalogue) if m in present)
    if offered:
        # Translation picks among the models the cluster really has, not all the cloud sells.
        target = replace(target, offered_models=offered)
    profiles = profiles_present(inventory, target)
    if profiles:
        target = replace(target, offered_profiles=tuple(sorted(profiles)))
    slices = slice_nodes(((n.name, n.labels, n.allocatable) for n in inventory.nodes), declared)
    return Context(
        target=target,
        dialects=dialects,
        mutations=(PlacementHints(target, inventory), *_sharing_guard(target, inventory, slices)),
        present_models=frozenset(present),
        present_resources=resources_present(inventory),
        declared=declared,
        slice_nodes=slices,
    )


def _sharing_guard(
    target: CloudMap, inventory: Inventory, slices: SliceNodes
) -> tuple[SharedMemoryGuard, ...]:
    """The overcommit guard, where the node agent labels nodes (elsewhere nothing reports a GPU full),
    counting the nodes that offer shares: a whole-GPU node full of one training job is not one."""
    if not any(SHARED_MEMORY_FULL in n.labels for n in inventory.nodes):
        return ()
    form = target.shared
    names = form.resource_names() - {target.whole_gpu}
    said = [
        n.labels[SHARED_MEMORY_FULL]
        for n in inventory.nodes
        if SHARED_MEMORY_FULL in n.labels
        and (
            any(name in n.allocatable for name in names) or (form.node_label and form.node_label in n.labels)
        )
    ]
    all_full = bool(said) and all(value == "true" for value in said)
    every_node_shares = bool(form.node_label) and form.node_label in slices.marked and not slices.whole
    return (SharedMemoryGuard(target, all_full, every_node_shares),)


def with_cluster_dra(target: CloudMap, cluster: ClusterDra, loaded: LoadedMaps) -> CloudMap:
    """The target map as this cluster runs it: its DRA API version resolved, and the device classes
    whose extendedResourceName a pod may ask for as written."""
    form = target.dra
    if form is None:
        return target
    version = cluster.api_version if form.api_version == dra_api.AUTO else form.api_version
    extended: dict[str, tuple[str, str]] = {}
    maps = tuple(loaded.maps.values())
    # A name several classes give stands for the one the scheduler picks (the newest), whatever it is.
    winners = set(standing_classes(cluster.device_classes).values())
    for device_class in cluster.device_classes:
        metadata = device_class.get("metadata") if isinstance(device_class, Mapping) else None
        name = metadata.get("name") if isinstance(metadata, Mapping) else None
        spec = device_class.get("spec") if isinstance(device_class, Mapping) else None
        if not isinstance(name, str) or not isinstance(spec, Mapping) or name not in winners:
            continue  # only a class that stands for a resource changes a decision here
        meaning = read_device_class(name, spec, maps, loaded.catalogue)
        own = meaning.map_name == target.name and meaning.parsed and not meaning.inexact
        if meaning.extended_resource and own and meaning.kind in ("whole", "mig"):
            if meaning.kind == "mig" and meaning.profile is None:
                continue
            profile = meaning.profile.name if meaning.profile is not None else ""
            extended[meaning.extended_resource] = (meaning.kind, profile)
    return replace(target, dra=replace(form, api_version=version, extended_resources=extended))


def load_inventory(path: Path) -> Inventory:
    """A file the user gave: every problem in it is theirs to fix, so the first one is an error."""
    try:
        read = documents(path.read_text(encoding="utf-8"), str(path))
        inventory = replace(parse_inventory(read), mig_configs=mig_configs_in(read))
    except UnreadableText as exc:
        raise StartupError(f"inventory {exc}") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError, InventoryError, MigConfigError) as exc:
        raise StartupError(f"inventory {path}: {exc}") from None
    if inventory.problems:
        raise StartupError(f"inventory {path}: {inventory.problems[0]}")
    return inventory


def profiles_present(inventory: Inventory, target: CloudMap) -> set[str]:
    """MIG profiles some node offers now, in the target's own words (resource, product or partition label)."""
    found: set[str] = set()
    for node in inventory.nodes:
        for resource, amount in node.allocatable.items():
            profile = target.mig.profile_of(resource)
            if profile is not None and amount > 0:
                found.add(profile.name)
        if target.mig.form == "single" and "-MIG-" in node.labels.get(target.mig.product_label, ""):
            found.add(node.labels[target.mig.product_label].rpartition("-MIG-")[2])
        if target.mig.form == "partition-label" and node.labels.get(target.mig.label):
            found.add(node.labels[target.mig.label])
    return found


def resources_present(inventory: Inventory) -> frozenset[str]:
    """Extended resources some node has allocatable now (MIG slices, shared GPUs, whole GPUs)."""
    return frozenset(name for node in inventory.nodes for name, n in node.allocatable.items() if n > 0)
