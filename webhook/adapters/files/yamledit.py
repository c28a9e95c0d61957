"""Print a translated manifest as its author wrote it: only the entries whose meaning changed are
rewritten, in the style around them; everything else stays byte for byte.

Manifests live in Git and their translations are reviewed as pull requests, so a translation must
read as a small diff. Translation only ever touches a few entries of a pod template (see `units`):
each changed entry is cut out of the original text by the round-trip parser's line/column positions
and rendered again alone, at its own column, with the indentation its author used there; a block
mapping is edited entry by entry, so comments stay with their lines (see `mapedit`). The result is
parsed again and compared with the intended object; when a splice cannot be made safely the document
is re-dumped whole instead (and checked the same way), never printed wrong.

Why one module: the two splices (a template's units; a document whose pod specs are written inline,
from its root) and the re-dump are three tries at one result, sharing its check, its quoting and the
order edits are made in; where an entry lies and how it is written again are `yamlstyle`'s and
`mapedit`'s.
"""

import copy
import io
import itertools
import re
from collections.abc import Iterator
from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError
from ruamel.yaml.scalarstring import DoubleQuotedScalarString, ScalarString, SingleQuotedScalarString

from webhook.adapters.files.carried import carry_in_document, carry_selector_comments
from webhook.adapters.files.mapedit import Keys, entry_edits, root_edits
from webhook.adapters.files.yamlstyle import (
    MARKER,
    CannotSplice,
    Edit,
    entry_span,
    guess_indent,
    merged,
    plain,
    render_entry,
    round_trip,
    set_indent,
)

BOM = "\ufeff"
MISSING = object()


class Unfaithful(Exception):
    """Even a whole re-dump would not parse back to the intended object."""


def split_documents(text: str) -> list[str]:
    """The text of each YAML document, its `---` line included, so that joining them gives the
    input back exactly. A leading part with only comments or directives is a chunk of its own."""
    chunks: list[list[str]] = [[]]
    for line in text.splitlines(keepends=True):
        if MARKER.match(line) and any(not _blank_or_comment(x) for x in chunks[-1]):
            chunks.append([])
        chunks[-1].append(line)
    return ["".join(chunk) for chunk in chunks if chunk]


def _blank_or_comment(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith("#") or stripped.startswith("%")


def newline_of(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


# The entries of a pod template that translation may change, relative to the template. A pod's
# containers are never added or removed, so their indices are stable.
SPEC_KEYS = ("nodeSelector", "affinity", "tolerations", "schedulerName", "resourceClaims")


def units(template: Any) -> Iterator[tuple[str | int, ...]]:
    metadata = template.get("metadata") if hasattr(template, "get") else None
    yield ("metadata", "annotations") if isinstance(metadata, CommentedMap) else ("metadata",)
    spec = template.get("spec") if hasattr(template, "get") else None
    for key in SPEC_KEYS:
        yield ("spec", key)
    for list_name in ("initContainers", "containers"):
        items = spec.get(list_name) if isinstance(spec, CommentedMap) else None
        for index in range(len(items) if isinstance(items, CommentedSeq) else 0):
            yield ("spec", list_name, index, "resources")


def set_units(template: Any, wanted: dict) -> None:
    """Make each translatable entry of a round-trip template equal to `wanted`'s, by assignment.
    For templates whose nodes are shared through anchors, where patching in place edits an alias
    twice; an entry that came from a merge key becomes the template's own."""
    for unit in units(template):
        value = _get(wanted, unit)
        parent = _get(template, unit[:-1])
        if parent is MISSING:
            continue
        if value is MISSING:
            if isinstance(parent, dict) and unit[-1] in parent:
                del parent[unit[-1]]
        elif plain(_get(template, unit)) != value:
            parent[unit[-1]] = copy.deepcopy(value)
    if plain(template) != wanted:
        raise Unfaithful("the translated template could not be written back")


def edit_document(
    text: str, original: Any, edited: Any, templates: list[str], said_again: Keys = None
) -> str:
    """`text` with each changed unit of the given templates (JSON Pointers) rewritten; else, for a pod
    spec written inline (a KServe component, an Argo step), each changed entry of the document; verified.
    `said_again`: the node-label keys a translation says again in other words (mapedit; None: any)."""
    for splice in (_splice, _tree_splice):
        try:
            result = splice(text, original, edited, templates, said_again)
            if _parses_to(result, edited):
                return result
        except CannotSplice:
            pass
    return redump(text, edited)


def _tree_splice(text: str, original: Any, edited: Any, templates: list[str], said_again: Keys) -> str:
    """Every changed entry of the document edited where it stands, from its root down, so that what
    translation did not touch (a plain scalar folded over lines, a comment) stays byte for byte. For
    views of a pod spec, whose entries `units` cannot name."""
    if not isinstance(original, CommentedMap) or not isinstance(edited, dict):
        raise CannotSplice("the document is not a block mapping")
    lines = text.splitlines(keepends=True)
    _quote_like_the_author(edited, _quote_of(text))
    newline = newline_of(text)
    edits = root_edits(lines, original, edited, newline, said_again)
    edits = carry_in_document(original, edited, edits, newline, said_again)
    return _made(lines, edits)


def redump(text: str, edited: Any) -> str:
    """The fallback: the whole document dumped again, with the author's indentation where it can be
    guessed, its `---` line and leading comments kept; checked to parse back to the intended object."""
    newline = newline_of(text)
    # The `---` that opened the document; comments before its first node ruamel prints itself.
    first = next((line for line in text.splitlines() if not _blank_or_comment(line)), "")
    marker = "---" + newline if first.strip() == "---" else ""
    yaml = round_trip()
    set_indent(yaml, guess_indent(text))
    out = io.StringIO()
    yaml.dump(edited, out)
    result = marker + out.getvalue().replace("\n", newline)
    if not _parses_to(result, edited):
        raise Unfaithful("the re-dumped document does not parse back to the translated object")
    return result


def _parses_to(text: str, edited: Any) -> bool:
    try:
        return plain(round_trip().load(text)) == plain(edited)
    except YAMLError:
        return False


def _splice(text: str, original: Any, edited: Any, templates: list[str], said_again: Keys) -> str:
    lines = text.splitlines(keepends=True)
    newline = newline_of(text)
    for pointer in templates:
        _quote_like_the_author(_resolve(edited, pointer), _quote_of(text))
    edits: list[Edit] = []
    for pointer in templates:
        before, after = _resolve(original, pointer), _resolve(edited, pointer)
        made: list[Edit] = []
        for unit in units(before):
            made += _unit_edit(lines, before, after, unit, newline, said_again)
        edits += carry_selector_comments(before, after, made, newline, said_again)
    return _made(lines, edits)


def _made(lines: list[str], edits: list[Edit]) -> str:
    if _overlap(edits):
        raise CannotSplice("two edits touch the same lines")
    for start, end, new in _in_order(edits):
        lines[start:end] = new
    return "".join(lines)


def _quote_of(text: str) -> type:
    return DoubleQuotedScalarString if text.count(': "') >= text.count(": '") else SingleQuotedScalarString


_NEEDS_QUOTES = re.compile(r"^([-+]?[0-9][0-9_.eE+-]*|true|false|yes|no|on|off|null|~|)$", re.IGNORECASE)


def _quote_like_the_author(node: Any, quote: type) -> None:
    """Values translation wrote that YAML must quote ("1", "true") get the author's quote marks."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in list(items):
        if isinstance(value, str) and not isinstance(value, ScalarString) and _NEEDS_QUOTES.match(value):
            node[key] = quote(value)
        else:
            _quote_like_the_author(value, quote)


def _overlap(edits: list[Edit]) -> bool:
    """Two edits of the same lines, or one edit made twice (a node reached through an alias too)."""
    spans = sorted((s, e) for s, e, _ in edits if e > s)
    twice = len({(s, e, tuple(new)) for s, e, new in edits}) < len(edits)
    return twice or any(a_end > b_start for (_, a_end), (b_start, _) in itertools.pairwise(spans))


def _in_order(edits: list[Edit]) -> list[Edit]:
    """The edits from the last line up, so that each one's positions still hold. Of insertions at one
    line the deeper one ends up first in the text (it ends the block a shallower one follows); of two at
    one depth, the one made later."""

    def place(numbered: tuple[int, Edit]) -> tuple[int, int, int, int]:
        index, (start, end, new) = numbered
        depth = len(new[0]) - len(new[0].lstrip(" ")) if new else 0
        return start, end, -depth, -index

    return [edit for _, edit in sorted(enumerate(edits), key=place, reverse=True)]


def _resolve(node: Any, pointer: str) -> Any:
    for part in filter(None, pointer.split("/")):
        key = part.replace("~1", "/").replace("~0", "~")
        node = node[int(key)] if isinstance(node, list) else node[key]
    return node


def _get(node: Any, path: tuple) -> Any:
    for part in path:
        in_list = isinstance(node, list) and isinstance(part, int) and part < len(node)
        if in_list or (isinstance(node, dict) and part in node):
            node = node[part]
        else:
            return MISSING
    return node


def _unit_edit(lines, before, after, unit: tuple, newline: str, said_again: Keys = None) -> list[Edit]:
    old, new = _get(before, unit), _get(after, unit)
    if old is new is MISSING or (MISSING not in (old, new) and plain(old) == plain(new)):
        return []
    parent_path, key = unit[:-1], unit[-1]
    parent = _get(before, parent_path)
    if _in_flow(before, unit):
        # A flow collection is rewritten whole: from the nearest block entry or item holding it.
        while _in_flow(before, unit):
            unit = unit[:-1]
        return _unit_edit(lines, before, after, unit, newline, said_again)
    if isinstance(parent, CommentedSeq):
        return _item_edit(lines, parent, key, new, newline)
    if not isinstance(parent, CommentedMap):
        raise CannotSplice(f"{'/'.join(map(str, unit))} has no mapping to go in")
    if old is not MISSING and key not in parent.keys() - merged(parent):
        raise CannotSplice(f"{key} comes from a merge key")
    if old is not MISSING and new is MISSING:
        start, end = entry_span(lines, parent, key)
        return [(start, end, [])]
    if old is not MISSING:
        return entry_edits(lines, parent, key, new, newline, said_again)
    if new is MISSING or not parent:
        raise CannotSplice(f"cannot place {key}")
    first = next(iter(parent))
    column = parent.lc.key(first)[1]
    after_parent = _get(after, parent_path)
    gone = [k for k in parent if k in SPEC_KEYS and k not in after_parent]
    spec_line = parent.lc.key("spec")[0] if key == "metadata" and "spec" in parent else None
    if spec_line is not None and not lines[spec_line][:column].strip():
        at = spec_line  # where a reader expects it: before the spec
    elif spec_line is not None:
        # The spec opens a sequence item ("- spec:", Seldon's componentSpecs): the dash line stays.
        at = entry_span(lines, parent, list(parent)[-1])[1]
    elif key in SPEC_KEYS and gone:
        at = parent.lc.key(gone[0])[0]  # where the selector it replaces stood
    else:
        at = entry_span(lines, parent, list(parent)[-1])[1]
    style = guess_indent("".join(lines))
    return [(at, at, render_entry(key, new, column, style, newline))]


def _in_flow(root: Any, unit: tuple) -> bool:
    """Whether `unit` is written inside a flow collection ({...} or [...]), at any depth."""
    node = root
    for part in unit[:-1]:
        node = _get(node, (part,))
        if isinstance(node, CommentedMap | CommentedSeq) and node.fa.flow_style():
            return True
    return False


def _item_edit(lines, sequence: CommentedSeq, index: int, new: Any, newline: str):
    """Rewrite one item of a block sequence (its content is a flow collection)."""
    if new is MISSING:
        raise CannotSplice("an item translation removed")
    start, content_column = sequence.lc.item(index)
    dash = lines[start].rfind("-", 0, content_column)
    if dash < 0 or lines[start][:dash].strip():
        raise CannotSplice("the item does not start its line")
    end = start + 1
    while end < len(lines) and (
        not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip(" ")) > dash
    ):
        end += 1
    while end > start + 1 and (not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#")):
        end -= 1
    item = CommentedSeq([new])
    yaml = round_trip()
    set_indent(yaml, (2, 0))
    out = io.StringIO()
    yaml.dump(item, out)
    pad = " " * dash
    return [
        (
            start,
            end,
            [(pad + line if line.strip() else line) + newline for line in out.getvalue().splitlines()],
        )
    ]
