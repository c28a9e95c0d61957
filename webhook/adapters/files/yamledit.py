"""Print a translated manifest as its author wrote it: only the entries whose meaning changed are
rewritten, in the style around them; everything else stays byte for byte.

Manifests live in Git and their translations are reviewed as pull requests, so a translation must
read as a small diff. Translation only ever touches a few entries of a pod template (see `UNITS`):
each changed entry is cut out of the original text by the round-trip parser's line/column positions
and rendered again alone, at its own column, with the indentation its author used there. The result is
parsed again and compared with the intended object; when a splice cannot be made safely the document
is re-dumped whole instead (and checked the same way), never printed wrong.

Why one module of ~340 lines: locating an entry by ruamel's positions, rendering it in the author's
style and verifying the spliced text are one algorithm over one set of positions; apart, each would
need the others' internals.
"""

import copy
import io
import itertools
import json
import re
from collections.abc import Iterator
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError
from ruamel.yaml.scalarstring import DoubleQuotedScalarString, ScalarString, SingleQuotedScalarString

BOM = "\ufeff"
_MARKER = re.compile(r"^---(\s|$)")
MISSING = object()


class CannotSplice(Exception):
    """The change is not one the splice knows how to place; the caller re-dumps the document."""


class Unfaithful(Exception):
    """Even a whole re-dump would not parse back to the intended object."""


def round_trip() -> YAML:
    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = 4096
    return yaml


def plain(node: Any) -> Any:
    return json.loads(json.dumps(node, default=str))


def split_documents(text: str) -> list[str]:
    """The text of each YAML document, its `---` line included, so that joining them gives the
    input back exactly. A leading part with only comments or directives is a chunk of its own."""
    chunks: list[list[str]] = [[]]
    for line in text.splitlines(keepends=True):
        if _MARKER.match(line) and any(not _blank_or_comment(x) for x in chunks[-1]):
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


def edit_document(text: str, original: Any, edited: Any, templates: list[str]) -> str:
    """`text` with each changed unit of the given templates (JSON Pointers) rewritten; verified."""
    try:
        result = _splice(text, original, edited, templates)
        if _parses_to(result, edited):
            return result
    except CannotSplice:
        pass
    return redump(text, edited)


def redump(text: str, edited: Any) -> str:
    """The fallback: the whole document dumped again, with the author's indentation where it can be
    guessed, its `---` line and leading comments kept; checked to parse back to the intended object."""
    newline = newline_of(text)
    # The `---` that opened the document; comments before its first node ruamel prints itself.
    first = next((line for line in text.splitlines() if not _blank_or_comment(line)), "")
    marker = "---" + newline if first.strip() == "---" else ""
    yaml = round_trip()
    _set_indent(yaml, guess_indent(text))
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


def _splice(text: str, original: Any, edited: Any, templates: list[str]) -> str:
    lines = text.splitlines(keepends=True)
    newline = newline_of(text)
    quote = DoubleQuotedScalarString if text.count(': "') >= text.count(": '") else SingleQuotedScalarString
    for pointer in templates:
        _quote_like_the_author(_resolve(edited, pointer), quote)
    edits: list[tuple[int, int, list[str]]] = []
    for pointer in templates:
        before, after = _resolve(original, pointer), _resolve(edited, pointer)
        for unit in units(before):
            edits += _unit_edit(lines, before, after, unit, newline)
    if _overlap(edits):
        raise CannotSplice("two edits touch the same lines")
    for start, end, new in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        lines[start:end] = new
    return "".join(lines)


_NEEDS_QUOTES = re.compile(r"^([-+]?[0-9][0-9_.eE+-]*|true|false|yes|no|on|off|null|~|)$", re.IGNORECASE)


def _quote_like_the_author(node: Any, quote: type) -> None:
    """Values translation wrote that YAML must quote ("1", "true") get the author's quote marks."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, value in list(items):
        if isinstance(value, str) and not isinstance(value, ScalarString) and _NEEDS_QUOTES.match(value):
            node[key] = quote(value)
        else:
            _quote_like_the_author(value, quote)


def _overlap(edits: list[tuple[int, int, list[str]]]) -> bool:
    spans = sorted((s, e) for s, e, _ in edits if e > s)
    return any(a_end > b_start for (_, a_end), (b_start, _) in itertools.pairwise(spans))


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


def _unit_edit(lines, before, after, unit: tuple, newline: str) -> list[tuple[int, int, list[str]]]:
    old, new = _get(before, unit), _get(after, unit)
    if old is new is MISSING or (MISSING not in (old, new) and plain(old) == plain(new)):
        return []
    parent_path, key = unit[:-1], unit[-1]
    parent = _get(before, parent_path)
    if _in_flow(before, unit):
        # A flow collection is rewritten whole: from the nearest block entry or item holding it.
        while _in_flow(before, unit):
            unit = unit[:-1]
        return _unit_edit(lines, before, after, unit, newline)
    if isinstance(parent, CommentedSeq):
        return _item_edit(lines, parent, key, new, newline)
    if not isinstance(parent, CommentedMap):
        raise CannotSplice(f"{'/'.join(map(str, unit))} has no mapping to go in")
    if old is not MISSING and key not in parent.keys() - _merged(parent):
        raise CannotSplice(f"{key} comes from a merge key")
    if old is not MISSING:
        if _scalar_map(old) and _scalar_map(new) and old:
            return _map_edit(lines, old, new, newline)
        start, end = _entry_span(lines, parent, key)
        if new is MISSING:
            return [(start, end, [])]
        column = parent.lc.key(key)[1]
        block = "".join(line[column:] if len(line) > column else line for line in lines[start:end])
        style = combine(guess_indent(block, None), guess_indent("".join(lines)))
        return [(start, end, render_entry(key, new, column, style, newline))]
    if new is MISSING or not parent:
        raise CannotSplice(f"cannot place {key}")
    first = next(iter(parent))
    column = parent.lc.key(first)[1]
    after_parent = _get(after, parent_path)
    gone = [k for k in parent if k in SPEC_KEYS and k not in after_parent]
    if key == "metadata" and "spec" in parent:
        at = parent.lc.key("spec")[0]  # where a reader expects it: before the spec
    elif key in SPEC_KEYS and gone:
        at = parent.lc.key(gone[0])[0]  # where the selector it replaces stood
    else:
        at = _entry_span(lines, parent, list(parent)[-1])[1]
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
    _set_indent(yaml, (2, 0))
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


def _scalar_map(value: Any) -> bool:
    """A block mapping of plain values (annotations, a node selector): edited entry by entry, so the
    author's comments stay with the lines they belong to."""
    if not isinstance(value, dict) or any(isinstance(v, dict | list) for v in value.values()):
        return False
    return not isinstance(value, CommentedMap) or not value.fa.flow_style()


def _map_edit(lines, old: CommentedMap, new: dict, newline: str) -> list[tuple[int, int, list[str]]]:
    """Each removed entry goes with the full-line comments right above it; each changed one is
    rewritten on its own line, its trailing comment kept at its column; new ones follow the last."""
    if _merged(old):
        raise CannotSplice("a mapping with merged keys")
    edits: dict[Any, tuple[int, int, list[str]]] = {}
    style = guess_indent("".join(lines))
    for key in old:
        start, end = _entry_span(lines, old, key)
        line, column = old.lc.key(key)
        if key not in new:
            while start > 0 and _comment_at(lines[start - 1], column):
                start -= 1
            edits[key] = (start, end, [])
        elif plain(old[key]) != plain(new[key]):
            [rendered] = render_entry(key, new[key], column, style, newline)
            comment = _trailing_comment(old, key, line)
            if comment is not None:
                at, text = comment
                body = rendered.rstrip("\r\n")
                rendered = body + " " * max(at - len(body), 1) + text + newline
            edits[key] = (start, end, [rendered])
    added = [k for k in new if k not in old]
    if added:
        # Written as part of the last entry's edit, not as an insertion at its end: another entry of the
        # pod may be inserted at that very line (the spec key after this mapping), and must follow.
        last = list(old)[-1]
        column = old.lc.key(last)[1]
        start, end = _entry_span(lines, old, last)
        kept = edits[last][2] if last in edits else lines[start:end]
        start = edits[last][0] if last in edits else start
        block = [r for k in added for r in render_entry(k, new[k], column, style, newline)]
        edits[last] = (start, end, [*kept, *block])
    return list(edits.values())


def _comment_at(line: str, column: int) -> bool:
    """A full-line comment at `column`: it speaks of the entry below it."""
    return line.strip().startswith("#") and len(line) - len(line.lstrip(" ")) == column


def _trailing_comment(mapping: CommentedMap, key: Any, line: int) -> tuple[int, str] | None:
    """(column, text) of the comment after `key`'s value on its own line, as the YAML reader found it
    (so a quoted value or a quote in the comment is no guess); None when there is none."""
    found = (mapping.ca.items.get(key) or [None, None, None, None])[2]
    if found is None or found.start_mark.line != line or not found.value.startswith("#"):
        return None
    return found.column, found.value.split("\n", 1)[0].rstrip("\r")


def _merged(mapping: CommentedMap) -> set:
    """Keys a mapping only inherits through `<<:` (written elsewhere, so not splice-able here)."""
    return set(mapping) - set(mapping.lc.data or {})


def _entry_span(lines: list[str], parent: CommentedMap, key: Any) -> tuple[int, int]:
    """Lines [start, end) of `key: value` in a block mapping: from the key's line to the last line
    indented deeper than the key (or a `- ` item at its column, for indentless sequences), without
    the blank and comment lines that trail it: those belong to what follows."""
    start, column = parent.lc.key(key)
    value = parent[key]
    end = start + 1
    last = start + 1
    while end < len(lines):
        line = lines[end]
        stripped = line.lstrip(" ")
        indent = len(line) - len(stripped)
        if stripped.strip() == "" or stripped.startswith("#"):
            end += 1
            continue
        deeper = indent > column or (
            indent == column and isinstance(value, CommentedSeq) and stripped.startswith("-")
        )
        if not deeper or _MARKER.match(line) or stripped.startswith("..."):
            break
        end += 1
        last = end
    return start, last


def combine(local: tuple, document: tuple) -> tuple[int, int]:
    """The block's own indentation where it shows it, the document's elsewhere."""
    return tuple(mine if mine is not None else theirs for mine, theirs in zip(local, document, strict=True))


def guess_indent(text: str, default: Any = ...) -> tuple:
    """(mapping indent, offset of "- " under its parent key) from the first nested lines; what the
    text does not show is `default` (2 and 0 unless given)."""
    mapping, offset = (2, 0) if default is ... else (default, default)
    found_mapping = found_offset = False
    previous = None
    for line in text.splitlines():
        stripped = line.lstrip()
        if not stripped or stripped.startswith("#") or _MARKER.match(stripped):
            continue
        indent = len(line) - len(stripped)
        if previous is not None and previous[1].endswith(":") and indent >= previous[0]:
            if stripped.startswith("- ") and not found_offset:
                offset, found_offset = indent - previous[0], True
            elif indent > previous[0] and not found_mapping and not previous[1].startswith("- "):
                mapping, found_mapping = indent - previous[0], True
        if found_mapping and found_offset:
            break
        previous = (indent, stripped.split(" #")[0].rstrip())
    return mapping, offset


def _set_indent(yaml: YAML, style: tuple[int, int]) -> None:
    mapping, offset = style
    # An item's content starts right after its "- ", wherever the dash sits.
    yaml.indent(mapping=mapping, sequence=offset + 2, offset=offset)


def render_entry(key: Any, value: Any, column: int, style: tuple[int, int], newline: str) -> list[str]:
    yaml = round_trip()
    _set_indent(yaml, style)
    entry = CommentedMap()
    entry[key] = value
    out = io.StringIO()
    yaml.dump(entry, out)
    pad = " " * column
    return [(pad + line if line.strip() else line) + newline for line in out.getvalue().splitlines()]
