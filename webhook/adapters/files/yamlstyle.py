"""The author's text as the splice sees it: where an entry lies (by the round-trip parser's line/column
positions), which indentation the author used, and one entry written again at its column in that style."""

import io
import json
import re
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

MARKER = re.compile(r"^---(\s|$)")

Edit = tuple[int, int, list[str]]  # lines [start, end) of the text and the lines that replace them


class CannotSplice(Exception):
    """The change is not one the splice knows how to place; the caller re-dumps the document."""


def round_trip() -> YAML:
    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = 4096
    return yaml


def plain(node: Any) -> Any:
    return json.loads(json.dumps(node, default=str))


def merged(mapping: CommentedMap) -> set:
    """Keys a mapping only inherits through `<<:` (written elsewhere, so not splice-able here)."""
    return set(mapping) - set(mapping.lc.data or {})


def entry_span(lines: list[str], parent: CommentedMap, key: Any) -> tuple[int, int]:
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
        if not deeper or MARKER.match(line) or stripped.startswith("..."):
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
        if not stripped or stripped.startswith("#") or MARKER.match(stripped):
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


def set_indent(yaml: YAML, style: tuple[int, int]) -> None:
    mapping, offset = style
    # An item's content starts right after its "- ", wherever the dash sits.
    yaml.indent(mapping=mapping, sequence=offset + 2, offset=offset)


def render_entry(key: Any, value: Any, column: int, style: tuple[int, int], newline: str) -> list[str]:
    yaml = round_trip()
    set_indent(yaml, style)
    entry = CommentedMap()
    entry[key] = value
    out = io.StringIO()
    yaml.dump(entry, out)
    pad = " " * column
    return [(pad + line if line.strip() else line) + newline for line in out.getvalue().splitlines()]


def rewrite_entry(
    lines: list[str], parent: CommentedMap, key: Any, new_key: Any, value: Any, newline: str
) -> Edit:
    """`key`'s entry written again as `new_key: value`, at its column. A one-line entry keeps its trailing
    comment (at its column, or after a longer value by the author's own gap, the two spaces yamllint asks
    for kept two); a block is written in its own indentation."""
    start, end = entry_span(lines, parent, key)
    line, column = parent.lc.key(key)
    block = "".join(text[column:] if len(text) > column else text for text in lines[start:end])
    style = combine(guess_indent(block, None), guess_indent("".join(lines)))
    rendered = render_entry(new_key, value, column, style, newline)
    comment = trailing_comment(parent, key, line)
    if comment is not None and end == start + 1 and len(rendered) == 1:
        at, text = comment
        body = rendered[0].rstrip("\r\n").removesuffix(" " + text).rstrip(" ")  # flow prints its own
        gap = min(max(at - len(lines[start][:at].rstrip(" ")), 1), 2)
        rendered = [body + " " * max(at - len(body), gap) + text + newline]
    return start, end, rendered


def trailing_comment(mapping: CommentedMap, key: Any, line: int) -> tuple[int, str] | None:
    """(column, text) of the comment after `key`'s value on its own line, as the YAML reader found it
    (so a quoted value or a quote in the comment is no guess); None when there is none."""
    found = (mapping.ca.items.get(key) or [None, None, None, None])[2]
    if found is None or found.start_mark.line != line or not found.value.startswith("#"):
        return None
    return found.column, found.value.split("\n", 1)[0].rstrip("\r")
