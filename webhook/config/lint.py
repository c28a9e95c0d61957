"""`gpuport lint`: check cloud maps, the GPU catalogue and ResourceQuota manifests; report file:line."""

from dataclasses import dataclass
from pathlib import Path

import yaml

from webhook.config.cloudmap import (
    CATALOGUE_FILE,
    CloudMapError,
    default_directory,
    load_directory,
    parse_catalogue_text,
    parse_cloud_map,
)
from webhook.config.yamlsource import error_line, line_of
from webhook.core.catalogue import Catalogue
from webhook.core.checks import is_extended_resource


@dataclass(frozen=True)
class Finding:
    path: str
    line: int | None
    problem: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.problem}" if self.line else f"{self.path}: {self.problem}"


def lint_files(paths: list[Path]) -> list[Finding]:
    findings: list[Finding] = []
    names: dict[str, Path] = {}
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            findings.append(Finding(str(path), None, f"cannot read: {exc}"))
            continue
        try:
            findings += _lint_text(path, text, names)
        except CloudMapError as exc:
            findings.append(Finding(exc.path, exc.line, exc.problem))
    return findings


def _lint_text(path: Path, text: str, names: dict[str, Path]) -> list[Finding]:
    if path.name == CATALOGUE_FILE:
        parse_catalogue_text(text, path)
        return []
    try:
        nodes = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
        docs = list(yaml.safe_load_all(text))
    except yaml.MarkedYAMLError as exc:
        return [Finding(str(path), error_line(exc), f"not valid YAML: {exc.problem}")]
    if len(docs) == 1 and isinstance(docs[0], dict) and "resources" in docs[0] and "kind" not in docs[0]:
        cloud_map = parse_cloud_map(text, path, _catalogue_for(path))
        if cloud_map.name in names:
            return [
                Finding(
                    str(path), 1, f"map name {cloud_map.name!r} is already used by {names[cloud_map.name]}"
                )
            ]
        names[cloud_map.name] = path
        return []
    findings = []
    for node, doc in zip(nodes, docs, strict=True):
        if isinstance(doc, dict) and doc.get("kind") == "ResourceQuota":
            findings += _quota_findings(path, node, doc)
        if isinstance(doc, dict) and doc.get("kind") == "LimitRange":
            findings += _limitrange_findings(path, node, doc)
    return findings


def _quota_findings(path: Path, node: yaml.Node, doc: dict) -> list[Finding]:
    """Kubernetes tracks extended resources only as requests.<name>: a limits.<name> entry counts nothing."""
    findings = []
    hard = ((doc.get("spec") or {}).get("hard")) or {}
    for key in hard:
        if key.startswith("limits.") and is_extended_resource(key.removeprefix("limits.")):
            resource = key.removeprefix("limits.")
            findings.append(
                Finding(
                    str(path),
                    line_of(node, ["spec", "hard", key]),
                    f"{key} is never counted for extended resources; use requests.{resource}",
                )
            )
    return findings


def _limitrange_findings(path: Path, node: yaml.Node, doc: dict) -> list[Finding]:
    """A GPU max without a GPU default makes Kubernetes default every container, CPU-only ones too, to
    the max; a GPU min on type Pod refuses every CPU-only pod."""
    findings = []
    for index, item in enumerate((doc.get("spec") or {}).get("limits") or []):
        for resource in item.get("max") or {}:
            if is_extended_resource(resource) and resource not in (item.get("default") or {}):
                findings.append(
                    Finding(
                        str(path),
                        line_of(node, ["spec", "limits", index]),
                        f"{resource} max without a default: every container gets {item['max'][resource]} "
                        f"GPUs by default; add default: {{{resource}: 0}} (or use gpuport.io/gpu-limits)",
                    )
                )
        for resource in item.get("min") or {}:
            if is_extended_resource(resource) and item.get("type") == "Pod":
                findings.append(
                    Finding(
                        str(path),
                        line_of(node, ["spec", "limits", index]),
                        f"{resource} min on type Pod refuses every CPU-only pod; "
                        "use gpuport.io/gpu-limits instead",
                    )
                )
    return findings


def _catalogue_for(path: Path) -> Catalogue:
    sibling = path.parent / CATALOGUE_FILE
    if sibling.is_file():
        return parse_catalogue_text(sibling.read_text(encoding="utf-8"), sibling)
    return load_directory(default_directory()).catalogue
