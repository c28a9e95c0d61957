"""mig-parted configurations listed in an inventory: a ConfigMap whose data holds a mig-parted file
(`version: v1`, `mig-configs`), as the GPU Operator's ClusterPolicy names it (its default
`default-mig-parted-config`, or a custom one such as the one `plan mig` writes). With it, a node's
`nvidia.com/mig.config` label, whatever the name, reads as the layout it sets."""

from collections.abc import Mapping
from typing import Any

import yaml

from webhook.core.vocabulary.inventory import inventory_items


class MigConfigError(ValueError):
    """A ConfigMap's mig-parted file that is not one: said with the ConfigMap and key."""


def mig_configs_in(documents: list[Any]) -> dict[str, tuple[Mapping[str, Any], ...]]:
    """Every configuration by name, from every ConfigMap in the documents (a List's items too) whose
    data holds a mig-parted file; other ConfigMaps are passed over."""
    found: dict[str, tuple[Mapping[str, Any], ...]] = {}
    for item in inventory_items(documents):
        if item.get("kind") != "ConfigMap":
            continue
        name = str((item.get("metadata") or {}).get("name", "?"))
        for key, text in (item.get("data") or {}).items():
            if not isinstance(text, str) or "mig-configs" not in text:
                continue
            try:
                parsed = yaml.safe_load(text)
            except yaml.YAMLError as exc:
                raise MigConfigError(f"ConfigMap {name}, {key}: not valid YAML: {exc}") from None
            configs = parsed.get("mig-configs") if isinstance(parsed, Mapping) else None
            if not isinstance(configs, Mapping):
                raise MigConfigError(f"ConfigMap {name}, {key}: mig-configs must be a mapping of names")
            for config, entries in configs.items():
                if not isinstance(entries, list) or not all(isinstance(e, Mapping) for e in entries):
                    raise MigConfigError(
                        f"ConfigMap {name}, {key}: mig-configs.{config} must be a list of entries"
                    )
                found[str(config)] = tuple(entries)
    return found
