"""The MIG geometry (webhook/config/geometry/mig.yaml) as values, checked against the catalogue;
every problem at its file:line.

It ships with the package rather than in cloudmaps/: placements are facts of NVIDIA's silicon, the
same on every cluster, which no admin tunes and the admission server never reads; a ConfigMap copy
would only be one more place for them to go stale. A catalogue from --cloudmap-dir that drops a
model plans that model no more; one that renames a profile is refused here, at the profile's line.
"""

from importlib import resources
from pathlib import Path

import yaml

from webhook.config.cloudmap import CloudMapError
from webhook.config.yamlsource import duplicate_keys, error_line, line_of
from webhook.core.planning.geometry import MigGeometry, parse_geometry
from webhook.core.planning.layouts import check_layout
from webhook.core.vocabulary.catalogue import Catalogue

GEOMETRY_FILE = "geometry/mig.yaml"


def shipped_geometry_path() -> Path:
    return Path(str(resources.files("webhook.config").joinpath(GEOMETRY_FILE)))


def parse_geometry_text(text: str, source: Path | str, catalogue: Catalogue) -> dict[str, MigGeometry]:
    """Every model's geometry; the first problem raises CloudMapError at its line."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        raise CloudMapError(source, error_line(exc), f"not valid YAML: {exc.problem}") from None
    for key_node in duplicate_keys(node):
        raise CloudMapError(source, key_node.start_mark.line + 1, f"duplicate key {key_node.value!r}")
    if not isinstance(data, dict):
        raise CloudMapError(source, 1, "the MIG geometry must be a YAML mapping with a 'models' key")
    geometries, problems = parse_geometry(data, catalogue)
    if problems:
        first = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise CloudMapError(source, line_of(node, list(first.path)), first.problem + more)
    for model, geometry in geometries.items():
        verdict = check_layout(geometry, geometry.balanced or {})
        if not verdict.fits:
            where = line_of(node, ["models", model, "balanced"])
            raise CloudMapError(source, where, f"{model}: balanced does not fit: {verdict.reason}")
    return geometries


def load_geometry(catalogue: Catalogue, path: Path | None = None) -> dict[str, MigGeometry]:
    where = path or shipped_geometry_path()
    try:
        text = where.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CloudMapError(where, None, f"cannot read: {exc}") from None
    try:
        return parse_geometry_text(text, where, catalogue)
    except yaml.YAMLError as exc:  # a marked error is said at its line above; any other here
        raise CloudMapError(where, None, f"not valid YAML: {exc}") from None
