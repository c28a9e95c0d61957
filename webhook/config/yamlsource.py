"""Where in a YAML file a value was written: the 1-based line an admin's editor shows, read from
PyYAML's node tree, so every config error (cloud map, catalogue, lint finding) points at the same line."""

from collections.abc import Iterator
from typing import Any

import yaml


def error_line(exc: yaml.MarkedYAMLError) -> int | None:
    mark = exc.problem_mark or exc.context_mark
    return mark.line + 1 if mark else None


def duplicate_keys(node: yaml.Node | None) -> Iterator[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        seen = set()
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                if key_node.value in seen:
                    yield key_node
                seen.add(key_node.value)
            yield from duplicate_keys(value_node)
    elif isinstance(node, yaml.SequenceNode):
        for child in node.value:
            yield from duplicate_keys(child)


def line_of(node: yaml.Node | None, path: list[Any]) -> int | None:
    """1-based line of the deepest entry on `path` that exists (a mapping entry's key line)."""
    if node is None:
        return None
    line = node.start_mark.line + 1
    for key in path:
        found = None
        if isinstance(node, yaml.MappingNode):
            found = next(((k, v) for k, v in node.value if k.value == key), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            found = (node.value[key], node.value[key])
        if found is None:
            break
        key_node, node = found
        line = key_node.start_mark.line + 1
    return line
