"""A block mapping gpuport changes, edited entry by entry so that every comment it does not delete stays
with the line it belongs to, at its column.

- An entry left as it was is not touched: its line, comment included, stays byte for byte.
- An entry whose value changes is written again on its line, keeping its trailing comment; a mapping
  inside it is edited the same way, entry by entry.
- In a container's limits and requests and in a node selector (`SAID_AGAIN`) translation says an ask or
  a node label in other words: an added entry takes the line, the full-line comments above and the
  trailing comment of the removed one most like it (the same amount, else the closest name); in a node
  selector, only a removed label that said something of the GPU (`said_again`: model, partition,
  sharing and capacity labels) is said again; another (an old node pool's name) goes with its comment. Added
  entries with no ask to replace follow the last one rewritten in place, or the mapping's last entry;
  they have no comment. Elsewhere an added entry follows the one it follows in the new mapping.
- A removed entry goes, and so do its trailing comment and the full-line comments right above it.
"""

import itertools
from collections.abc import Mapping
from difflib import SequenceMatcher
from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from webhook.adapters.files.yamlstyle import (
    CannotSplice,
    Edit,
    combine,
    entry_span,
    guess_indent,
    merged,
    plain,
    render_entry,
    rewrite_entry,
    trailing_comment,
)

# Mappings whose removed entries are said again by added ones (an ask or a node label in the target's words).
SAID_AGAIN = ("limits", "requests", "nodeSelector")
# A node selector's keys a translation says again in other words, each with what it says ("gpu": model,
# partition or sharing; "capacity": spot, on-demand, reserved); None: any key, saying anything.
Keys = Mapping[str, str] | None
ASKS = ("limits", "requests")


def _in_place(node: Any) -> bool:
    """A block mapping written where it stands: no flow style, no merge key, no anchor (an alias of it
    elsewhere has the anchor's positions, so it is written again whole)."""
    if not isinstance(node, CommentedMap) or not node or node.fa.flow_style() or merged(node):
        return False
    return node.anchor.value is None


def entry_edits(
    lines: list[str], parent: CommentedMap, key: Any, value: Any, newline: str, said_again: Keys = None
) -> list[Edit]:
    """`key`'s entry in `parent` made to say `value`; `said_again`: the node-label keys translation says
    again in other words (None: any)."""
    old = parent[key]
    if plain(old) == plain(value):
        return []
    if _in_place(old) and isinstance(value, dict) and value:
        again = said_again if key == "nodeSelector" else None
        edits = map_edit(lines, old, value, newline, pair=key in SAID_AGAIN, said_again=again)
        return _gather_comments(lines, old, value, edits, newline) if key in ASKS else edits
    if _appended_to(old, value):
        return [_append_items(lines, parent, key, value[len(old) :], newline)]
    items = _item_edits(lines, old, value, newline, said_again)
    if items is not None:
        return items
    return [rewrite_entry(lines, parent, key, key, value, newline)]


def root_edits(
    lines: list[str], root: CommentedMap, new: dict, newline: str, said_again: Keys = None
) -> list[Edit]:
    """The edits that make a whole document (a block mapping) say `new`, entry by entry."""
    if not _in_place(root):
        raise CannotSplice("the document's mapping cannot be edited in place")
    return map_edit(lines, root, new, newline, pair=False, said_again=said_again)


def _item_edits(lines: list[str], old: Any, new: Any, newline: str, said_again: Keys) -> list[Edit] | None:
    """A block sequence of block mappings whose items stay as many, each changed item edited entry by
    entry (an Argo workflow's templates: one step changed, the others untouched); None otherwise, and
    when an item's first entry changes (it shares its line with the item's dash)."""
    if not isinstance(old, CommentedSeq) or old.fa.flow_style() or old.anchor.value is not None:
        return None
    if not isinstance(new, list) or len(new) != len(old):
        return None
    changed = [i for i, (was, now) in enumerate(zip(old, new, strict=True)) if plain(was) != plain(now)]
    if not all(_in_place(old[i]) and isinstance(new[i], dict) and new[i] for i in changed):
        return None
    for i in changed:
        first = next(iter(old[i]))
        if first not in new[i] or plain(old[i][first]) != plain(new[i][first]):
            return None
    return [
        edit
        for i in changed
        for edit in map_edit(lines, old[i], new[i], newline, pair=False, said_again=said_again)
    ]


def _appended_to(old: Any, new: Any) -> bool:
    """Whether `new` is the block sequence `old` with items added after its own (tolerations gained):
    then its items, and their comments, stay as they are."""
    if not isinstance(old, CommentedSeq) or not old or old.fa.flow_style() or old.anchor.value is not None:
        return False
    return isinstance(new, list) and len(new) > len(old) and plain(list(old)) == plain(new[: len(old)])


def _append_items(lines: list[str], parent: CommentedMap, key: Any, items: list, newline: str) -> Edit:
    """The new items written after the sequence's last line, their dashes at its items' column."""
    start, end = entry_span(lines, parent, key)
    column, dash = parent.lc.key(key)[1], parent[key].lc.col
    block = "".join(text[column:] if len(text) > column else text for text in lines[start:end])
    style = combine(guess_indent(block, None), guess_indent("".join(lines)))
    rendered = render_entry(key, items, 0, style, newline)[1:]  # without the key's line
    shift = " " * (dash - style[1])
    return end, end, [shift + line if line.strip() else line for line in rendered]


def map_edit(
    lines: list[str], old: CommentedMap, new: dict, newline: str, *, pair: bool, said_again: Keys = None
) -> list[Edit]:
    """The edits that make the block mapping `old` say `new` (see the module's rules); `said_again`, for a
    node selector: the removed keys an added one may stand for (None: any)."""
    removed = [k for k in old if k not in new and (said_again is None or k in said_again)]
    added = [k for k in new if k not in old]
    takes = (
        pairs(old, new, removed, added, said_again) if pair else {}
    )  # removed key -> added key on its line
    edits: list[Edit] = []
    for key in old:
        if key in takes:
            edits.append(rewrite_entry(lines, old, key, takes[key], new[takes[key]], newline))
        elif key not in new:
            start, end = entry_span(lines, old, key)
            column = old.lc.key(key)[1]
            while start > 0 and _comment_at(lines[start - 1], column):
                start -= 1
            edits.append((start, end, []))
        else:
            edits += entry_edits(lines, old, key, new[key], newline, said_again)
    rest = [k for k in added if k not in takes.values()]
    last = max(takes or old, key=lambda k: old.lc.key(k)[0])
    style = guess_indent("".join(lines))
    for after, keys in _places(old, new, rest, last, pair).items():
        at, column = entry_span(lines, old, after)[1], old.lc.key(after)[1]
        edits.append((at, at, [r for k in keys for r in render_entry(k, new[k], column, style, newline)]))
    return edits


def _gather_comments(
    lines: list[str], old: CommentedMap, new: dict, edits: list[Edit], newline: str
) -> list[Edit]:
    """Two asks said as one (a memory share and a count become one MIG slice, whose size says the
    memory): the trailing comment of an ask that went without a line of its own joins the slice's
    line, so the author's note on the amount is not lost with the line. Only into a slice: where a
    share becomes a whole or time-shared GPU its memory is not said again, and its note would mislead."""
    removed = [k for k in old if k not in new]
    takes = pairs(old, new, removed, [k for k in new if k not in old and "/mig-" in str(k)])
    if not takes:
        return edits
    notes = [trailing_comment(old, k, old.lc.key(k)[0]) for k in removed if k not in takes]
    extra = "".join("  " + note[1] for note in notes if note is not None)
    if not extra:
        return edits
    first = min(takes, key=lambda k: old.lc.key(k)[0])
    at = entry_span(lines, old, first)[0]
    gathered = []
    for start, end, written in edits:
        if start == at and end == at + 1 and len(written) == 1:
            written = [written[0].rstrip("\r\n") + extra + newline]
            extra = ""
        gathered.append((start, end, written))
    return gathered


def _places(old: CommentedMap, new: dict, rest: list, last: Any, pair: bool) -> dict[Any, list]:
    """The entry of `old` each added key is written after: `last` in a mapping whose entries are said
    again; elsewhere the entry it follows in `new` (Argo copies a step's metadata made after its name),
    `last` when it comes first."""
    places: dict[Any, list] = {}
    before = last
    for key in new:
        if key in old:
            before = key
        elif key in rest:
            places.setdefault(last if pair or before not in old else before, []).append(key)
    return places


def pairs(old: CommentedMap, new: dict, removed: list, added: list, roles: Keys = None) -> dict:
    """Each removed entry with the added one most like it, most alike first: saying the same kind of
    thing (`roles`: a GPU model label for a GPU label, a capacity label for a capacity label), the
    same amount, then the closest name after the vendor's domain."""

    def likeness(pair: tuple) -> tuple[bool, bool, float]:
        was, now = pair
        role = roles is not None and roles.get(str(was), "") == roles.get(str(now), None)
        same = str(plain(old[was])) == str(plain(new[now]))
        name = SequenceMatcher(None, str(was).rpartition("/")[2], str(now).rpartition("/")[2]).ratio()
        return role, same, name

    takes: dict = {}
    for was, now in sorted(itertools.product(removed, added), key=likeness, reverse=True):
        if was not in takes and now not in takes.values():
            takes[was] = now
    return takes


def _comment_at(line: str, column: int) -> bool:
    """A full-line comment at `column`: it speaks of the entry below it."""
    return line.strip().startswith("#") and len(line) - len(line.lstrip(" ")) == column
