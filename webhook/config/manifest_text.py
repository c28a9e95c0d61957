"""Users' manifests and inventories as documents, read fast: `kubectl get -o yaml` of 1,000 nodes and
10,000 pods took PyYAML's pure-Python loader 8-29 s of CPU. libyaml's parser (CSafeLoader) scans and
parses in C, but PyYAML then still builds every value in Python, node by node, resolving each scalar's
type by regular expression: half the time left. So the values are built here straight from the parser's
events, each plain scalar typed by the same resolvers and constructors as `yaml.safe_load` (remembered
per text: a listing repeats the same keys and values thousands of times), and anything rarer (an anchor,
an alias, a tag, a merge key) is read again by the safe loader itself. `-o json` output is read by
orjson. The pure-Python loader is the fallback where PyYAML was built without libyaml. A problem is said
as `FILE:LINE:COLUMN: what` with either (both mark where they stopped), so bad input still points at the
line to fix."""

import json
import re
from collections.abc import Iterator
from typing import Any

import orjson
import yaml

LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_RESOLVERS = yaml.SafeLoader.yaml_implicit_resolvers
_CONSTRUCTORS = yaml.SafeLoader.yaml_constructors
_STR = "tag:yaml.org,2002:str"
_RARE = ("tag:yaml.org,2002:merge", "tag:yaml.org,2002:value")
_LONG_NUMBER = re.compile(r"\d{19}")  # 19 digits or more: maybe past a 64-bit integer


class _Rare(Exception):
    """Something the fast path leaves to PyYAML's own safe loader."""


class UnreadableText(yaml.YAMLError):
    """A file that is not YAML (or JSON), said with the file and the line where reading stopped."""


def documents(text: str, source: str) -> list[Any]:
    """Every document of `text` (None for an empty one, as PyYAML gives it), `source` naming it in errors."""
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            pass  # YAML flow style, or JSON with a mistake: the YAML reader says where
        else:
            # orjson reads an integer past 64 bits as a float; Python's json keeps it whole, as the
            # safe loader does (found by the property test in tests/config/test_manifest_text.py).
            return [json.loads(text) if _LONG_NUMBER.search(text) else value]
    try:
        return list(_load_all(text))
    except yaml.MarkedYAMLError as exc:
        raise UnreadableText(f"{source}:{_where(exc)} {_what(exc)}") from None
    except yaml.YAMLError as exc:
        raise UnreadableText(f"{source}: {exc}") from None


def _load_all(text: str) -> list[Any]:
    if LOADER is not yaml.SafeLoader:
        try:
            return _from_events(LOADER(text))
        except _Rare:
            pass
    return list(_safe_load_all(text))


def _safe_load_all(text: str) -> Iterator[Any]:
    loader = LOADER(text)
    try:
        while loader.check_data():
            yield loader.get_data()
    finally:
        loader.dispose()


def _from_events(parser: Any) -> list[Any]:
    """The documents `yaml.safe_load_all` gives, built from the C parser's events."""
    get = parser.get_event
    scalars: dict[str, Any] = {}
    typer = yaml.SafeLoader("")  # the safe constructors' `self`: they read only the node given
    found: list[Any] = []
    stack: list[Any] = []  # the open mappings and sequences
    keys: list[Any] = []  # per open mapping: the key waiting for its value (_NO_KEY when none); _SEQ
    try:
        while True:
            event = get()
            kind = type(event)
            if kind is yaml.ScalarEvent:
                if event.anchor is not None:
                    raise _Rare
                if event.implicit[0]:
                    value = scalars.get(event.value, _NO_KEY)
                    if value is _NO_KEY:
                        value = scalars[event.value] = _plain(event.value, typer)
                elif (event.implicit[1] and event.tag is None) or event.tag in (_STR, "!"):
                    value = event.value  # quoted, or tagged a string
                else:
                    raise _Rare
            elif kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
                if event.anchor is not None or not (event.implicit or event.tag is None):
                    raise _Rare
                if kind is yaml.MappingStartEvent:
                    stack.append({})
                    keys.append(_NO_KEY)
                else:
                    stack.append([])
                    keys.append(_SEQ)
                continue
            elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
                value = stack.pop()
                keys.pop()
            elif kind in (yaml.DocumentStartEvent, yaml.DocumentEndEvent, yaml.StreamStartEvent):
                continue
            elif kind is yaml.StreamEndEvent:
                return found
            else:  # an alias
                raise _Rare
            if not stack:
                found.append(value)
            elif keys[-1] is _SEQ:
                stack[-1].append(value)
            elif keys[-1] is _NO_KEY:
                if isinstance(value, list | dict):
                    raise _Rare  # a key that is a collection: the safe loader says what it says of it
                keys[-1] = value
            else:
                stack[-1][keys[-1]] = value
                keys[-1] = _NO_KEY
    finally:
        parser.dispose()


_NO_KEY: Any = object()
_SEQ: Any = object()


def _plain(text: str, typer: Any) -> Any:
    """A plain scalar typed as the safe loader types it (int, float, bool, null, timestamp, str)."""
    for tag, pattern in _RESOLVERS.get(text[:1], ()):
        if pattern.match(text):
            if tag in _RARE:
                raise _Rare
            return _CONSTRUCTORS[tag](typer, yaml.ScalarNode(tag, text))
    return text


def _where(exc: yaml.MarkedYAMLError) -> str:
    mark = exc.problem_mark or exc.context_mark
    return f"{mark.line + 1}:{mark.column + 1}:" if mark else ""


def _what(exc: yaml.MarkedYAMLError) -> str:
    """The loader's words without its marks (the file:line is said once, in front)."""
    parts = [exc.context, exc.problem]
    return ": ".join(p for p in parts if p) or "not valid YAML"
