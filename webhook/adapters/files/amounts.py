"""A GPU count translation writes comes out as the author writes counts: `1`, or `"1"` where the author
quoted them.

The webhook's patch carries every amount as a Kubernetes quantity string; in a manifest `1` and `"1"`
are the same quantity, but a reviewer reads `nvidia.com/gpu: "1"` as a change the author did not make.
"""

import re
from collections.abc import Mapping
from typing import Any

from ruamel.yaml.scalarstring import ScalarString

from webhook.core.vocabulary.workloads import container_specs, resource_section

INTEGER = re.compile(r"^[0-9]+$")
SECTIONS = ("limits", "requests")


Style = tuple[bool, dict[Any, Any]]  # whether the author quotes counts there; the amounts written


def quoting(template: Any) -> list[Style]:
    """For each container's limits and requests, in order: whether its author quotes counts (some
    count is quoted and none is bare), and its amounts as written."""
    styles = []
    for container in container_specs(_spec(template)):
        for section in SECTIONS:
            written = dict(resource_section(container, section))
            values = list(written.values())
            bare = any(isinstance(v, int) and not isinstance(v, bool) for v in values)
            quoted = any(isinstance(v, ScalarString) and INTEGER.match(v) for v in values)
            styles.append((quoted and not bare, written))
    return styles


def write_counts(template: Any, styles: list[Style]) -> None:
    """Make each whole count the patch wrote (a plain string) a number, except in the sections whose
    author quotes counts (`styles`, read before the patch); an amount the patch left as it was is put
    back as the author wrote it."""
    at = 0
    for container in container_specs(_spec(template)):
        for section in SECTIONS:
            values = resource_section(container, section)
            author_quotes, written = styles[at] if at < len(styles) else (False, {})
            at += 1
            for name, value in list(values.items()):
                if type(value) is not str or not INTEGER.match(value):
                    continue
                if name in written and str(written[name]) == value:
                    values[name] = written[name]  # type: ignore[index]
                elif not author_quotes:
                    values[name] = int(value)  # type: ignore[index]


def _spec(template: Any) -> Mapping[str, Any]:
    spec = template.get("spec") if hasattr(template, "get") else None
    return spec if isinstance(spec, Mapping) else {}
