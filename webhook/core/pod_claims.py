"""A pod's DRA claims, container by container: which claims each container uses, what they are made
from (a ResourceClaimTemplate, or a ResourceClaim made ahead), and what each asks for (read by
claims.py). What the lookup cannot find is reported, never guessed.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.core.catalogue import Catalogue
from webhook.core.claims import ClaimedDevices, UnreadableClaim, dra_map_for, read_claim
from webhook.core.platform import CloudMap
from webhook.core.workloads import ContainerRef, containers, is_map, mapping_at

# A ResourceClaimTemplate of the pod's namespace by name; None when there is no such template. A
# ResourceClaim made ahead (a pod's resourceClaimName) is looked up as STANDALONE + its name, and
# answered in a template's shape: {"spec": {"spec": <the claim's spec>}}.
TemplateLookup = Callable[[str], Mapping[str, Any] | None]
STANDALONE = "ResourceClaim/"


@dataclass(frozen=True)
class ClaimUse:
    """A container's use of a GPU claim: which claim, made from which template, asking for what."""

    container: ContainerRef
    claim: str
    template: str
    devices: ClaimedDevices


def claim_uses(
    spec: Mapping[str, Any],
    templates: TemplateLookup,
    maps: tuple[CloudMap, ...],
    catalogue: Catalogue,
    problems: list[str],
) -> tuple[list[ClaimUse], tuple[str, ...]]:
    """Each container's GPU claims, and the templates the lookup did not have. A claim from a template
    asking for no device class a loaded map names is not a GPU claim: left alone. What cannot be
    read exactly is added to `problems`."""
    devices: dict[str, tuple[str, list[ClaimedDevices]]] = {}
    unread: list[str] = []
    entries = spec.get("resourceClaims")
    for entry in entries if isinstance(entries, list) else ():
        if not is_map(entry):
            continue  # the API server refuses such a pod; nothing to read
        name, source = entry.get("name"), _source(entry)
        if not isinstance(name, str) or source is None:
            continue
        made_from = (
            source.replace(STANDALONE, "ResourceClaim ")
            if source.startswith(STANDALONE)
            else (f"ResourceClaimTemplate {source}")
        )
        template = templates(source)
        if template is None:
            unread.append(made_from)
            continue
        claim_spec = mapping_at(template, ("spec", "spec"))
        if claim_spec is None or not _asks_for_gpus(claim_spec, maps):
            continue
        try:
            devices[name] = (source, read_claim(claim_spec, maps, catalogue))
        except UnreadableClaim as exc:
            problems.append(f"claim {name} ({made_from}): {exc}")
            continue
        if source.startswith(STANDALONE):
            # Counted (quota), but never turned into a device-plugin ask: several pods may share it.
            problems.append(
                f"claim {name} is {made_from}, made ahead and possibly shared by several pods; "
                "device plugins cannot share GPUs between pods: use a ResourceClaimTemplate"
            )
    uses: list[ClaimUse] = []
    users: dict[str, list[str]] = {}  # the containers running at once that use each claim
    for container in containers(spec, ("spec",)):
        for ref in (r for r in _claim_refs(container.spec) if r in devices):
            if container.list_name == "containers" or container.spec.get("restartPolicy") == "Always":
                users.setdefault(ref, []).append(container.label)
            # An init container that finishes first may use an app container's claim: device
            # plugins hand its GPUs on the same way, so it asks for them as well.
            template_name, requests = devices[ref]
            if len(requests) != 1:
                problems.append(
                    f"{container.label} uses claim {ref}, which asks for {len(requests)} kinds of device"
                )
                continue
            uses.append(ClaimUse(container, ref, template_name, requests[0]))
    for ref, labels in users.items():
        if len(labels) > 1:
            shared = " and ".join(labels)
            problems.append(
                f"claim {ref} is shared by {shared}; device plugins cannot share GPUs between containers"
            )
    return uses, tuple(unread)


def _source(entry: Mapping[str, Any]) -> str | None:
    """What a pod's claim entry is made from, as the lookup knows it."""
    template_name, made = entry.get("resourceClaimTemplateName"), entry.get("resourceClaimName")
    if isinstance(template_name, str) and template_name:
        return template_name
    if isinstance(made, str) and made:
        return STANDALONE + made
    return None


def _claim_refs(container: Mapping[str, Any]) -> list[str]:
    resources = container.get("resources")
    used = resources.get("claims") if is_map(resources) else None
    if not isinstance(used, list):
        return []
    return [c["name"] for c in used if is_map(c) and isinstance(c.get("name"), str)]


def _asks_for_gpus(claim_spec: Mapping[str, Any], maps: tuple[CloudMap, ...]) -> bool:
    devices = claim_spec.get("devices")
    requests = devices.get("requests") if is_map(devices) else None
    for request in requests if isinstance(requests, list) else ():
        exact = request.get("exactly", request) if is_map(request) else {}
        if is_map(exact) and dra_map_for(str(exact.get("deviceClassName")), maps) is not None:
            return True
    return False


class ClaimsBeside:
    """The ResourceClaimTemplates and ResourceClaims among a set of manifests, by namespace and name:
    a workload's claims are read from those written beside it (gpuport translate, preflight)."""

    def __init__(self, documents: list[Any]):
        self.found: dict[tuple[str, str], Mapping[str, Any]] = {}
        for doc in documents:
            key = claim_object_key(doc)
            if key is None:
                continue
            if doc.get("kind") == "ResourceClaim":  # in a template's shape, as the lookup answers
                self.found[key] = {"spec": {"spec": doc.get("spec") or {}}}
            else:
                self.found[key] = doc

    def lookup(self, namespace: str) -> TemplateLookup:
        return lambda name: self.found.get((namespace, name))


def namespace_of(doc: Any) -> str:
    metadata = doc.get("metadata") if is_map(doc) else None
    namespace = metadata.get("namespace") if is_map(metadata) else None
    return namespace if isinstance(namespace, str) else ""


def claim_object_key(doc: Any) -> tuple[str, str] | None:
    """(namespace, name as the lookup knows it) of a ResourceClaimTemplate or ResourceClaim; None for
    any other document."""
    if not is_map(doc) or not str(doc.get("apiVersion", "")).startswith("resource.k8s.io/"):
        return None
    metadata = doc.get("metadata")
    name = metadata.get("name") if is_map(metadata) else None
    if not isinstance(name, str) or doc.get("kind") not in ("ResourceClaimTemplate", "ResourceClaim"):
        return None
    return namespace_of(doc), (STANDALONE + name if doc.get("kind") == "ResourceClaim" else name)
