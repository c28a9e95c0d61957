"""Kinds that choose their GPU nodes by a node kind written in their own fields, with no pod template
gpuport could open: KAITO's Workspace (`resource.instanceType`, the VM size its node provisioner makes
nodes of; kaito-project/kaito, "Workspace" API). Moved to another cloud it would keep a node kind no
node there is, and its operator would wait for nodes nobody makes; gpuport cannot rewrite what it does
not open, so it says so, with the target's words for the same GPUs."""

from collections.abc import Mapping
from typing import Any

from webhook.core.vocabulary.dialects import Dialects
from webhook.core.vocabulary.platform import CloudMap
from webhook.core.vocabulary.templates import kind_key
from webhook.core.vocabulary.workloads import mapping_at

__all__ = ["node_kind_warning"]

# kind → (what the kind is, the path of the field naming a node kind)
NODE_KIND_FIELDS: dict[tuple[str, str], tuple[str, tuple[str, ...]]] = {
    ("kaito.sh", "Workspace"): ("a KAITO Workspace makes its nodes", ("resource", "instanceType")),
}


def node_kind_warning(doc: Mapping[str, Any], target: CloudMap, dialects: Dialects) -> str:
    """What to say of a document whose kind picks its nodes by a node kind another cloud sells ("" when
    the kind picks none, the target has that node kind, or no map knows it)."""
    found = NODE_KIND_FIELDS.get(kind_key(doc))
    if found is None:
        return ""
    what, path = found
    holder = mapping_at(doc, path[:-1])
    value = holder.get(path[-1]) if holder is not None else None
    if not isinstance(value, str) or _names(target, value):
        return ""
    owners = [m for m in dialects.maps if m.name != target.name and _names(m, value)]
    if not owners:
        return ""
    models = sorted({model for label in owners[0].model_labels for model in label.models_for(value)})
    here = ""
    if target.model_labels:
        label = target.model_labels[0]
        values = [v for model in models for v in label.values.get(model, ())]
        here = f"; the same GPUs are {label.label}: {', '.join(values)} there" if values else ""
    here = here or f"; {target.name} sells no {' or '.join(models)}"
    field = ".".join(path)
    return (
        f"not looked into: {what} of {field} {value} ({owners[0].name}'s {', '.join(models)}), which no "
        f"{target.name} node is{here}"
    )


def _names(cloud_map: CloudMap, value: str) -> bool:
    """Whether the map names `value` as a node kind (an instance type, VM size or shape)."""
    return any(value in label.gpus for label in cloud_map.model_labels)
