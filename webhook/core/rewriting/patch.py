"""JSON Patch between a Pod and its mutated form, built from the edited subtrees alone.

The mutator edits a Pod-shaped view that holds copies of only the subtrees the core may edit, so
nothing else of a captured Pod (managedFields, volumes...) is copied or compared. The patch is built by
walking the edited subtrees against the Pod's own (a field that is the same JSON as before is skipped
at C speed): a map key becomes add/remove at that key, list items are walked index by index (appended
ones added, dropped ones removed from the end), and a value that changed type or value is replaced.
That is exact by construction (a property test applies every patch and compares), so no request pays
for a general-purpose diff or for applying the patch again to check it.
"""

from collections.abc import Callable, Mapping
from typing import Any

import jsonpatch
import orjson

from webhook.core.vocabulary.errors import Broken

# (parent, key): the parts of a Pod that translation and placement may rewrite.
EDITABLE_FIELDS: tuple[tuple[str, str], ...] = (
    ("metadata", "labels"),
    ("metadata", "annotations"),
    ("spec", "containers"),
    ("spec", "initContainers"),
    ("spec", "nodeSelector"),
    ("spec", "affinity"),
    ("spec", "topologySpreadConstraints"),
    ("spec", "tolerations"),
    ("spec", "schedulerName"),
    ("spec", "resourceClaims"),
)
_EDITABLE = {parent: {k for p, k in EDITABLE_FIELDS if p == parent} for parent, _ in EDITABLE_FIELDS}

Mutator = Callable[[dict[str, Any]], None]


class PatchError(Broken):
    """The mutation edited a part of the Pod the core may not edit."""


def editable_view(sections: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """A copy of only the editable subtrees of the pod's metadata and spec (`_sections`), in its
    shape. A container is copied one level deep, its resources in full: the rest of it (env, mounts,
    probes...) is the Pod's own, shared and never edited, so an edit may replace a container's field
    but change only its resources in place. Unchanged parts stay the very same objects, which the
    patch walk skips at once."""
    view: dict[str, Any] = {"metadata": {}, "spec": {}}
    for parent, key in EDITABLE_FIELDS:
        section = sections[parent]
        if key in section:
            value = section[key]
            if key in ("containers", "initContainers") and isinstance(value, list):
                view[parent][key] = [_container_copy(c) for c in value]
            else:
                view[parent][key] = json_copy(value)
    return view


def _sections(pod: Mapping[str, Any]) -> tuple[dict[str, Mapping[str, Any]], list[str]]:
    """The pod's metadata and spec, each {} when it is not a map; and which of them are not (null
    or absent: a path into one would not apply, so what the mutation puts there is added whole). The
    pod is parsed JSON or YAML, whose maps are dicts: a dict test is exact here, and one C check where
    the Mapping ABC's cost two calls per review."""
    found: dict[str, Mapping[str, Any]] = {}
    missing = []
    for parent in _EDITABLE:
        section = pod.get(parent)
        if isinstance(section, dict):
            found[parent] = section
        else:
            found[parent] = {}
            missing.append(parent)
    return found, missing


def _container_copy(container: Any) -> Any:
    if not isinstance(container, dict):
        return json_copy(container)
    copied = dict(container)
    if "resources" in copied:
        copied["resources"] = json_copy(copied["resources"])
    return copied


def diff_mutation(pod: Mapping[str, Any], mutate: Mutator) -> list[dict[str, Any]]:
    """Run `mutate` on an editable view of `pod` and return the JSON Patch from pod to the result."""
    sections, missing = _sections(pod)  # read once, for the copy and for the walk
    after = editable_view(sections)
    mutate(after)
    _reject_edits_outside(after)
    ops: list[dict[str, Any]] = [
        {"op": "add", "path": f"/{parent}", "value": after[parent]} for parent in missing if after[parent]
    ]
    for parent, key in EDITABLE_FIELDS:
        if parent in missing:
            continue  # added whole above
        old = sections[parent]
        new = after[parent]
        if key in old:
            if key not in new:
                ops.append({"op": "remove", "path": _PATHS[parent, key]})
            elif not (_same_containers if key in _CONTAINER_LISTS else _same_json)(old[key], new[key]):
                _diff(_PATHS[parent, key], old[key], new[key], ops)
        elif key in new:
            ops.append({"op": "add", "path": _PATHS[parent, key], "value": new[key]})
    return ops


_CONTAINER_LISTS = frozenset({"containers", "initContainers"})
_ABSENT = object()


def _same_containers(old: Any, new: Any) -> bool:
    """`_same_json` for a container list of the view: each container's fields but resources are the
    Pod's own objects (`_container_copy`), so a field still the same object is skipped without
    writing it out (env, mounts and probes are most of a container's text). False is always safe: the
    walk after it is exact, it only costs the walk."""
    if type(old) is not list or type(new) is not list or len(old) != len(new):
        return _same_json(old, new)
    for before, after in zip(old, new, strict=True):
        if type(before) is not dict or type(after) is not dict or len(before) != len(after):
            if not _same_json(before, after):
                return False
            continue
        for key, value in before.items():
            now = after.get(key, _ABSENT)
            if now is not value and (key != "resources" or not _same_json(value, now)):
                return False  # the walk, exact, says what changed (nothing, if only the object did)
    return True


def _same_json(old: Any, new: Any) -> bool:
    """Whether two parsed JSON values are the same JSON, decided in C: most editable fields come back
    from a mutation unchanged, and walking them in Python was most of the patch's cost. Python's ==
    calls 1, 1.0 and True equal and orjson writes NaN as null, so both must agree; a value orjson
    cannot write (an integer past 64 bits) is left to the walk. == goes first: a field the mutation
    changed is mostly told apart there, without writing either value out."""
    if old is new:
        return True
    try:
        return bool(old == new) and orjson.dumps(old) == orjson.dumps(new)
    except orjson.JSONEncodeError:
        return False


def apply(pod: Mapping[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    patched: dict[str, Any] = jsonpatch.apply_patch(pod, ops, in_place=False)
    return patched


def json_copy(value: Any) -> Any:
    """A deep copy of parsed JSON (dicts, lists, scalars): several times faster than copy.deepcopy,
    which handles every Python type and keeps a memo of shared objects JSON cannot have."""
    if isinstance(value, dict):
        return {k: v if type(v) in _LEAVES else json_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [v if type(v) in _LEAVES else json_copy(v) for v in value]
    return value


# JSON's scalars, shared rather than copied without a call each: most of a pod's values are leaves.
_LEAVES = frozenset({str, int, float, bool, type(None)})


def _diff(path: str, old: Any, new: Any, ops: list[dict[str, Any]]) -> None:
    """Ops turning `old` into `new`, walked in full: Python's == calls 1, 1.0 and True equal, JSON
    does not, so no subtree is skipped on == alone; one the view shares with the Pod is skipped."""
    if old is new:
        return
    if isinstance(old, dict) and isinstance(new, dict):
        for key in old:
            if key not in new:
                ops.append({"op": "remove", "path": f"{path}/{_escape(key)}"})
        for key, value in new.items():
            if key in old:
                _diff(f"{path}/{_escape(key)}", old[key], value, ops)
            else:
                ops.append({"op": "add", "path": f"{path}/{_escape(key)}", "value": value})
    elif isinstance(old, list) and isinstance(new, list):
        common = min(len(old), len(new))
        for index in range(common):
            _diff(f"{path}/{index}", old[index], new[index], ops)
        for index in range(common, len(new)):
            ops.append({"op": "add", "path": f"{path}/{index}", "value": new[index]})
        for index in range(len(old) - 1, common - 1, -1):  # from the end, so each index still holds
            ops.append({"op": "remove", "path": f"{path}/{index}"})
    elif type(old) is not type(new) or old != new:
        ops.append({"op": "replace", "path": path, "value": new})


def _reject_edits_outside(view: dict[str, Any]) -> None:
    if set(view) != set(_EDITABLE):
        raise PatchError(f"mutation touched top-level fields {sorted(set(view) - set(_EDITABLE))}")
    for parent, keys in _EDITABLE.items():
        extra = set(view[parent]) - keys
        if extra:
            raise PatchError(f"mutation touched {parent}.{sorted(extra)}, which is not editable")


def _escape(key: str) -> str:
    if "~" not in key and "/" not in key:
        return key
    return key.replace("~", "~0").replace("/", "~1")


# The JSON Pointer of each editable field, worked out once.
_PATHS = {(parent, key): f"/{parent}/{_escape(key)}" for parent, key in EDITABLE_FIELDS}
