"""Which ResourceClaimTemplate a pod was charged (pure): the uid of each template it names, recorded by
/mutate in the pod's gpuport.io/claim-templates annotation where there is a GPU budget.

A template's spec cannot change, but its owner may delete it and make it again under the same name,
larger, between gpuport's reading and the pod being stored (the other webhooks' time), or before the
resourceclaim controller makes the pod's claim. A uid names one object forever, and that object's spec
forever, so everything keyed by it agrees: /validate charges the template with the recorded uid (a
remembered copy is exact, no read needed), and the claim gate lets the controller's claim be made only
from the template of that uid. A value the user wrote instead (forged, or mutate skipped and the user's
own kept) changes nothing: it is charged exactly what it names, and the claim must come from it.

The key is the template's name (not the pod's entry): a uid is a fact about a template, and a later
webhook pointing an entry at another template cannot make the recorded uid stand for it.
"""

import json
from collections.abc import Mapping, Sequence
from typing import Any

CLAIM_TEMPLATES = "gpuport.io/claim-templates"


def recorded_uids(pod: Mapping[str, Any] | None) -> dict[str, str] | None:
    """{template name: uid} as the pod's annotation records them; None where it carries none. A value
    that is not a JSON object of strings records nothing ({}): those templates are read as today."""
    metadata = (pod or {}).get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    text = annotations.get(CLAIM_TEMPLATES) if isinstance(annotations, Mapping) else None
    if text is None:
        return None
    try:
        found = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return {}
    if not isinstance(found, dict):
        return {}
    return {k: v for k, v in found.items() if isinstance(k, str) and isinstance(v, str) and v}


def named_templates(pod: Mapping[str, Any], made: Sequence[Mapping[str, Any]] = ()) -> tuple[str, ...]:
    """The ResourceClaimTemplates a pod's entries name, and those gpuport makes for it (`made`, the
    decision's): the pod as stored names some of them."""
    spec = pod.get("spec")
    entries = spec.get("resourceClaims") if isinstance(spec, Mapping) else None
    names = [
        e["resourceClaimTemplateName"]
        for e in (entries if isinstance(entries, list) else ())
        if isinstance(e, Mapping) and isinstance(e.get("resourceClaimTemplateName"), str)
    ]
    for template in made:
        metadata = template.get("metadata")
        name = metadata.get("name") if isinstance(metadata, Mapping) else None
        if isinstance(name, str):
            names.append(name)
    return tuple(dict.fromkeys(n for n in names if n))


def recording_patch(
    pod: Mapping[str, Any], patch: Sequence[Mapping[str, Any]], uids: Mapping[str, str]
) -> tuple[Mapping[str, Any], ...]:
    """`patch` with the annotation recording `uids` set (a value the pod came with replaced): one op,
    onto the annotations the pod has or the patch makes, else with the annotations made for it."""
    value = json.dumps(dict(sorted(uids.items())), separators=(",", ":"))
    metadata = pod.get("metadata")
    has = isinstance(metadata, Mapping) and isinstance(metadata.get("annotations"), Mapping)
    made = any(
        op.get("path") == "/metadata/annotations" and op.get("op") in ("add", "replace") for op in patch
    )
    if has or made:
        op: Mapping[str, Any] = {
            "op": "add",
            "path": "/metadata/annotations/gpuport.io~1claim-templates",
            "value": value,
        }
    elif isinstance(metadata, Mapping):
        op = {"op": "add", "path": "/metadata/annotations", "value": {CLAIM_TEMPLATES: value}}
    else:
        op = {"op": "add", "path": "/metadata", "value": {"annotations": {CLAIM_TEMPLATES: value}}}
    return (*patch, op)


def remade_reason(name: str, recorded: str, now: str | None) -> str:
    """Why a pod cannot be charged (or given a claim from) the template it names: not the one recorded."""
    found = f"it is uid {now} now" if now else "none of that name exists now"
    return (
        f"ResourceClaimTemplate {name} was deleted and made again since this pod was admitted "
        f"({CLAIM_TEMPLATES} records uid {recorded}; {found}): the pod was charged the template it was "
        "admitted with, so delete the pod and create it again to be charged this one"
    )
