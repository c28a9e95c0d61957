"""The comment of a node-selector entry translation replaced by a node-affinity expression (a model
label several products now answer, `In` them; a capacity type said as `NotIn` the others) moves onto that
expression's `key:` line: the author's note on why the pod goes there still applies to the line that now
says it. Only the comments of entries that said something of the GPU or the capacity move (`said_again`),
each to an expression saying the same kind of thing; another removed entry's comment goes with it."""

import re
from collections.abc import Iterator
from typing import Any

from ruamel.yaml.comments import CommentedMap

from webhook.adapters.files.mapedit import Keys, pairs
from webhook.adapters.files.yamlstyle import Edit, trailing_comment


def carry_selector_comments(
    before: Any, after: Any, edits: list[Edit], newline: str, said_again: Keys = None
) -> list[Edit]:
    """`edits` with the comments of the template's removed (not said again) node-selector entries put
    on the `key:` lines of the `In` expressions the edits write for the first time, in order."""
    comments = _left_behind(before, after, said_again)
    keys = [k for k in _expression_keys(after) if k not in _expression_keys(before)]
    # Each new expression takes the first comment left of an entry that said the same kind of thing.
    placed: dict[str, str] = {}
    for key in keys:
        role = said_again.get(key, "") if said_again is not None else ""
        found = next((c for c in comments if c[0] == role), None)
        if found is not None and key not in placed:
            placed[key] = found[1]
            comments.remove(found)
    if not placed:
        return edits
    carried = []
    for start, end, new in edits:
        new = list(new)
        for index, line in enumerate(new):
            written = re.fullmatch(r"\s*(?:- )?key: (\S+)", line.rstrip("\r\n"))
            if written is not None and written[1] in placed:
                new[index] = line.rstrip("\r\n") + "  " + placed.pop(written[1]) + newline
        carried.append((start, end, new))
    return carried


def carry_in_document(
    original: Any, edited: Any, edits: list[Edit], newline: str, said_again: Keys = None
) -> list[Edit]:
    """The same for every pod spec written inline in a document (an Argo step, a KServe component):
    each mapping that holds a node selector."""
    for old, new in _selector_holders(original, edited):
        edits = carry_selector_comments({"spec": old}, {"spec": new}, edits, newline, said_again)
    return edits


def _selector_holders(old: Any, new: Any) -> Iterator[tuple[Any, Any]]:
    if isinstance(old, CommentedMap) and isinstance(new, dict):
        if "nodeSelector" in old:
            yield old, new
        for key in old:
            if key in new:
                yield from _selector_holders(old[key], new[key])
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for was, now in zip(old, new, strict=True):
            yield from _selector_holders(was, now)


def _left_behind(before: Any, after: Any, said_again: Keys) -> list[tuple[str, str]]:
    """(what it said, its comment) of each removed node-selector entry no added entry says again."""
    old = _spec(before).get("nodeSelector")
    new = _spec(after).get("nodeSelector") or {}
    if not isinstance(old, CommentedMap) or not hasattr(new, "get"):
        return []
    removed = [k for k in old if k not in new and (said_again is None or k in said_again)]
    paired = pairs(old, new, removed, [k for k in new if k not in old], said_again)
    comments = []
    for key in removed:
        if key not in paired and key in (old.lc.data or {}):
            found = trailing_comment(old, key, old.lc.key(key)[0])
            if found is not None:
                comments.append((said_again.get(str(key), "") if said_again is not None else "", found[1]))
    return comments


def _expression_keys(template: Any) -> list[str]:
    """The keys of the required node-affinity's `In` and `NotIn` expressions, in order."""
    affinity = _spec(template).get("affinity") or {}
    node_affinity = affinity.get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    return [
        str(expression.get("key"))
        for term in required.get("nodeSelectorTerms") or []
        for expression in term.get("matchExpressions") or []
        if expression.get("operator") in ("In", "NotIn")
    ]


def _spec(template: Any) -> Any:
    spec = template.get("spec") if hasattr(template, "get") else None
    return spec if hasattr(spec, "get") else {}
