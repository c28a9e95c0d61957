"""JSON Patch between a Pod and its mutated form, computed over the only subtrees the core may edit.

Copying and diffing a whole captured Pod (managedFields, volumes...) costs more than the rest of the
request, so the mutator works on a Pod-shaped document that holds only the editable subtrees. The paths
jsonpatch emits on it are therefore already rooted like the Pod's. Every patch is verified by applying
it to the same starting subset; if it does not reproduce the edit (python-json-patch has shipped such
bugs), the changed subtrees are replaced whole instead.
"""

import copy
from collections.abc import Callable, Mapping
from typing import Any

import jsonpatch

# (parent, key): the parts of a Pod that translation and placement may rewrite.
EDITABLE_FIELDS: tuple[tuple[str, str], ...] = (
    ("metadata", "labels"),
    ("metadata", "annotations"),
    ("spec", "containers"),
    ("spec", "initContainers"),
    ("spec", "nodeSelector"),
    ("spec", "affinity"),
    ("spec", "tolerations"),
    ("spec", "schedulerName"),
)

Mutator = Callable[[dict[str, Any]], None]


class PatchError(RuntimeError):
    """The patch could not be built even by replacing whole subtrees."""


def editable_view(pod: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of only the editable subtrees, in the Pod's own shape."""
    view: dict[str, Any] = {"metadata": {}, "spec": {}}
    for parent, key in EDITABLE_FIELDS:
        section = pod.get(parent)
        if isinstance(section, Mapping) and key in section:
            view[parent][key] = copy.deepcopy(section[key])
    return view


def diff_mutation(pod: Mapping[str, Any], mutate: Mutator) -> list[dict[str, Any]]:
    """Run `mutate` on an editable view of `pod` and return the JSON Patch from pod to the result."""
    before = editable_view(pod)
    after = copy.deepcopy(before)
    mutate(after)
    _reject_edits_outside(after)
    if after == before:
        return []
    ops = jsonpatch.make_patch(before, after).patch
    if _reproduces(before, ops, after):
        return ops
    fallback = _replace_changed_subtrees(before, after)
    if not _reproduces(before, fallback, after):
        raise PatchError("no JSON Patch reproduces the mutation")
    return fallback


def apply(pod: Mapping[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    patched: dict[str, Any] = jsonpatch.apply_patch(pod, ops, in_place=False)
    return patched


def _reproduces(before: dict[str, Any], ops: list[dict[str, Any]], after: dict[str, Any]) -> bool:
    try:
        patched: dict[str, Any] = jsonpatch.apply_patch(before, ops, in_place=False)
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError, KeyError, IndexError):
        return False
    return patched == after


def _replace_changed_subtrees(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, Any]]:
    ops: list[dict[str, Any]] = []
    for parent, key in EDITABLE_FIELDS:
        old, new = before[parent], after[parent]
        path = f"/{parent}/{_escape(key)}"
        if key in old and key not in new:
            ops.append({"op": "remove", "path": path})
        elif key not in old and key in new:
            ops.append({"op": "add", "path": path, "value": new[key]})
        elif key in old and old[key] != new[key]:
            ops.append({"op": "replace", "path": path, "value": new[key]})
    return ops


def _reject_edits_outside(view: dict[str, Any]) -> None:
    allowed = {parent: {k for p, k in EDITABLE_FIELDS if p == parent} for parent, _ in EDITABLE_FIELDS}
    if set(view) != set(allowed):
        raise PatchError(f"mutation touched top-level fields {sorted(set(view) - set(allowed))}")
    for parent, keys in allowed.items():
        extra = set(view[parent]) - keys
        if extra:
            raise PatchError(f"mutation touched {parent}.{sorted(extra)}, which is not editable")


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")
