"""`gpuport translate`: the admission core, run offline over multi-document YAML manifests.

Each pod template is checked and translated exactly as the webhook would translate a Pod made from it;
the resulting JSON Patch is applied to the round-trip YAML so comments and key order survive.
"""

import difflib
import io
import json
from dataclasses import asdict, dataclass, field
from typing import Any

import jsonpatch
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from webhook.checks import check_pod_spec
from webhook.core import Context, rewrite_pod
from webhook.templates import pod_templates
from webhook.translate import Untranslatable


class ManifestError(ValueError):
    pass


@dataclass
class TemplateResult:
    document: int
    kind: str
    name: str
    path: str
    allowed: bool
    messages: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    patch: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Manifest:
    """Parsed documents and the indentation the author used, so the output reads like the input."""

    docs: list[Any]
    mapping_indent: int = 2
    sequence_dash_offset: int = 0


def _yaml(manifest: Manifest | None = None) -> YAML:
    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = 4096
    if manifest is not None:
        offset = manifest.sequence_dash_offset
        yaml.indent(mapping=manifest.mapping_indent, sequence=manifest.mapping_indent + offset, offset=offset)
    return yaml


def load_documents(text: str, source: str) -> Manifest:
    try:
        docs = [d for d in _yaml().load_all(text) if d is not None]
    except YAMLError as exc:
        raise ManifestError(f"{source}: not valid YAML: {exc}") from None
    return Manifest(docs, *_guess_indent(text))


def dump_documents(manifest: Manifest) -> str:
    out = io.StringIO()
    _yaml(manifest).dump_all(manifest.docs, out)
    return out.getvalue()


def _guess_indent(text: str) -> tuple[int, int]:
    """(mapping indent, offset of "- " under its parent key) from the first nested lines."""
    mapping, offset = 2, 0
    previous = None
    for line in text.splitlines():
        stripped = line.lstrip()
        if not stripped or stripped.startswith("#") or stripped.startswith("---"):
            continue
        indent = len(line) - len(stripped)
        if previous is not None and previous[1].endswith(":") and indent > previous[0]:
            if stripped.startswith("- "):
                offset = indent - previous[0]
                break
            mapping = indent - previous[0]
        previous = (indent, stripped.split("#")[0].rstrip())
    return mapping, offset


def translate_documents(manifest: Manifest, context: Context) -> list[TemplateResult]:
    """Translate every pod template in place; return what was decided for each."""
    results = []
    for number, doc in enumerate(manifest.docs):
        if not hasattr(doc, "get"):
            continue
        kind = str(doc.get("kind", "?"))
        name = str((doc.get("metadata") or {}).get("name", ""))
        for path, template in list(pod_templates(doc)):
            if template.get("metadata") is None:
                # Where a reader expects it: before the spec.
                if hasattr(template, "insert"):
                    template.insert(0, "metadata", {})
                else:
                    template["metadata"] = {}
            plain = json.loads(json.dumps(template, default=str))
            result = TemplateResult(number, kind, name, path or "/", allowed=True)
            violations = check_pod_spec(plain["spec"], ("spec",), context.target, context.dialects)
            if violations:
                result.allowed = False
                result.messages = [v.message for v in violations]
            else:
                try:
                    result.patch, result.warnings = rewrite_pod(plain, context)
                except Untranslatable as exc:
                    result.allowed = False
                    result.messages = list(exc.messages)
                if result.patch:
                    jsonpatch.apply_patch(template, result.patch, in_place=True)
            results.append(result)
    return results


def unified_diff(before: str, after: str, source: str) -> str:
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            f"{source} (as written)",
            f"{source} (translated)",
        )
    )


def results_json(results: list[TemplateResult]) -> str:
    return json.dumps([asdict(r) for r in results], indent=2, ensure_ascii=False)
