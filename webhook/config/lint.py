"""`gpuport lint`: check cloud maps, the GPU catalogue and ResourceQuota manifests; report file:line."""

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import yaml

from webhook.config.cloudmap import (
    CATALOGUE_FILE,
    CloudMapError,
    catalogue_problems,
    default_directory,
    load_directory,
    map_problems,
    parse_catalogue_text,
)
from webhook.config.yamlsource import error_line, line_of
from webhook.core.asks.checks import is_extended_resource
from webhook.core.vocabulary.catalogue import Catalogue


@dataclass(frozen=True)
class Finding:
    path: str
    line: int | None
    problem: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.problem}" if self.line else f"{self.path}: {self.problem}"


@dataclass(frozen=True)
class FileReport:
    """What a file is, as lint read it, and what is wrong with it."""

    path: str
    what: str  # "cloud map eks", "GPU catalogue (25 models)", "2 ResourceQuotas", "nothing gpuport lints"
    findings: list[Finding]
    linted: bool = True  # False: not a kind of file gpuport checks (said, not passed as "ok")


def lint_files(paths: list[Path]) -> list[FileReport]:
    reports: list[FileReport] = []
    names: dict[str, Path] = {}
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reports.append(
                FileReport(str(path), "unreadable", [Finding(str(path), None, f"cannot read: {exc}")])
            )
            continue
        try:
            reports.append(_lint_text(path, text, names))
        except CloudMapError as exc:
            reports.append(FileReport(str(path), "GPU catalogue", [Finding(exc.path, exc.line, exc.problem)]))
    return reports


def _lint_text(path: Path, text: str, names: dict[str, Path]) -> FileReport:
    if path.name == CATALOGUE_FILE:
        problems = catalogue_problems(text, path)
        if problems:
            return FileReport(
                str(path), "GPU catalogue", [Finding(p.path, p.line, p.problem) for p in problems]
            )
        catalogue = parse_catalogue_text(text, path)
        return FileReport(str(path), f"GPU catalogue ({len(catalogue.models)} models)", [])
    try:
        nodes = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
        docs = list(yaml.safe_load_all(text))
    except yaml.MarkedYAMLError as exc:
        return FileReport(
            str(path),
            "not valid YAML",
            [Finding(str(path), error_line(exc), f"not valid YAML: {exc.problem}")],
        )
    if len(docs) == 1 and isinstance(docs[0], dict) and "resources" in docs[0] and "kind" not in docs[0]:
        name = docs[0].get("name", "?")
        # Every kind of problem at once: one run of lint says all there is to fix in the file.
        problems = map_problems(text, path, _catalogue_for(path))
        findings = [Finding(p.path, p.line, p.problem) for p in problems]
        findings += _node_count_findings(path, nodes[0], docs[0])
        if name in names:
            findings.append(Finding(str(path), 1, f"map name {name!r} is already used by {names[name]}"))
        names.setdefault(str(name), path)
        return FileReport(str(path), f"cloud map {name}", findings)
    findings = []
    kinds: Counter[str] = Counter()
    for node, doc in zip(nodes, docs, strict=True):
        kind = doc.get("kind") if isinstance(doc, dict) else None
        if kind == "ResourceQuota":
            findings += _quota_findings(path, node, doc)
        elif kind == "LimitRange":
            findings += _limitrange_findings(path, node, doc)
        else:
            continue
        kinds[kind] += 1
    if not kinds:
        seen = sorted({str(d.get("kind")) for d in docs if isinstance(d, dict) and d.get("kind")})
        what = (
            f"nothing gpuport lints ({', '.join(seen) or 'no Kubernetes object'}; it lints cloud maps, "
            "the GPU catalogue, ResourceQuotas and LimitRanges)"
        )
        return FileReport(str(path), what, [], linted=False)
    return FileReport(
        str(path), ", ".join(f"{n} {k}{'s' if n > 1 else ''}" for k, n in sorted(kinds.items())), findings
    )


def _node_count_findings(path: Path, node: yaml.Node, doc: dict) -> list[Finding]:
    """A node kind a model label pins must say how many GPUs it holds, once: a pod is sent only to
    kinds whose count holds it, and a kind with no count (or two) may take a pod it cannot hold."""
    findings = []
    counted: dict[tuple[str, str], tuple[int, int]] = {}  # (label, value) → (GPUs, entry it was said in)
    entries = doc.get("model_labels")
    for index, entry in enumerate(entries if isinstance(entries, list) else []):
        # A part of the wrong shape is the schema's to say (map_problems): passed over here.
        gpus = entry.get("gpus") if isinstance(entry, dict) else None
        if not isinstance(gpus, dict) or not isinstance(entry.get("label"), str):
            continue
        for value, count in gpus.items():
            if not isinstance(count, int):
                continue
            said = counted.setdefault((entry["label"], value), (count, index))
            if said[0] != count:
                findings.append(
                    Finding(
                        str(path),
                        line_of(node, ["model_labels", index, "gpus", value]),
                        f"{entry['label']}={value} holds {count} GPUs here but {said[0]} in model_labels "
                        f"entry {said[1] + 1}: a pod may be sent to a node that cannot hold it",
                    )
                )
        values = entry.get("values")
        if not gpus or not isinstance(values, dict):
            continue
        for model, pinned in values.items():
            for value in pinned if isinstance(pinned, list) else [pinned]:
                if not isinstance(value, (dict, list)) and value not in gpus:
                    findings.append(
                        Finding(
                            str(path),
                            line_of(node, ["model_labels", index, "values", model]),
                            f"{entry['label']}={value} pins {model} but says no GPU count, though its "
                            "label counts others: a pod needing more GPUs than it holds may be sent there",
                        )
                    )
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
