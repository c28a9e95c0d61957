"""The workloads' manifests with only their GPU asks changed to what `gpuport rightsize` proposes, edited
where they stand (the same surgical edits `translate` makes: comments and layout kept)."""

from collections.abc import Iterable
from typing import Any

from webhook.adapters.files.offline import Manifest
from webhook.core.sizing.recommend import Sizing
from webhook.core.vocabulary.templates import pod_templates


def resize_documents(manifest: Manifest, sizings: Iterable[Sizing]) -> list[str]:
    """Edit each document whose kind, namespace and name a proposal's workload names; return a line per
    workload edited, and per proposal whose workload none of the documents is."""
    proposals = {s.workload: s for s in sizings if s.proposal is not None}
    notes = []
    for document in manifest.documents:
        doc = document.edited
        if not hasattr(doc, "get"):
            continue
        metadata = doc.get("metadata") or {}
        key = f"{doc.get('kind')}/{metadata.get('namespace') or 'default'}/{metadata.get('name')}"
        sizing = proposals.get(key)
        if sizing is None:
            continue
        for path, template in pod_templates(doc):
            if _resize(template, sizing):
                document.changed.append(path)
                notes.append(f"{key}: {sizing.container}: {sizing.today} → {_said(sizing)}")
    return notes


def _said(sizing: Sizing) -> str:
    assert sizing.proposal is not None
    return ", ".join(f"{k}: {v}" for k, v in sizing.proposal.resources.items())


def _resize(template: Any, sizing: Sizing) -> bool:
    assert sizing.proposal is not None
    spec = template.get("spec") or {}
    for container in spec.get("containers") or ():
        if container.get("name") != sizing.container:
            continue
        resources = container.setdefault("resources", {})
        for part in ("limits", "requests"):
            entries = resources.get(part)
            if entries is None or not any(name in entries for name in sizing.written):
                continue
            for name in sizing.written:
                entries.pop(name, None)
            for name, value in sizing.proposal.resources.items():
                entries[name] = int(value) if value.isdigit() else value
        if sizing.proposal.node_selector:
            selector = spec.setdefault("nodeSelector", {})
            selector.update(sizing.proposal.node_selector)
        return True
    return False
