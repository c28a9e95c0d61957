"""A ResourceClaim marked as a pod's own (pure): where there is a GPU budget, it must be what the pod's
template makes.

Before the resourceclaim controller makes the claim of a pod's template entry, it looks for one the pod
already has: a claim whose controlling ownerReference is the pod (v1 Pod, the pod's uid) and whose
annotation resource.kubernetes.io/pod-claim-name names the entry. It takes such a claim as the pod's,
whoever made it, and writes it into the pod's status; the scheduler then allocates what that claim
asks. The pod was charged its template when it was admitted, so a user who may write claims could make
one asking 8 GPUs under a new name (no pod names it yet, so replaced_claims lets it by), marked as a
1-GPU pod's, and delete the controller's claim: the pod was allocated 8 GPUs and charged 1. Where there
is a GPU budget, a claim carrying both marks (at its create, or by an update that changes either) is
refused unless its spec is exactly what the owning pod's entry's ResourceClaimTemplate makes, and that
template was not written after the pod was created (nor, where the pod records the uid it was charged
by in gpuport.io/claim-templates, made again before it was stored): the controller's own claims pass
whoever makes them, and nothing depends on who asks.

One mark alone makes no claim a pod's template claim, and passes: the annotation alone puts it under no
pod (the controller finds a pod's claims through the reference; the garbage collector orphaning a claim
takes the reference off and leaves the annotation), and since 1.28 the controller takes no claim without
the annotation (a v1.32 controller left a claim named <pod>-<entry>, the names of 1.27, alone). The
claims the scheduler makes for extended resources a DeviceClass stands for (KEP-5004, 1.34) are
controlled by their pod and carry another annotation: they are not template claims either.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.core.asks.charged_templates import recorded_uids, remade_reason

POD_CLAIM = "resource.kubernetes.io/pod-claim-name"  # the controller's annotation: which entry it is


@dataclass(frozen=True)
class Marks:
    """What makes a claim a pod's in the controller's eyes: its controlling Pod ownerReference (name,
    uid) and its pod-claim-name annotation (None where absent)."""

    owner: tuple[str, str] | None
    entry: str | None

    @property
    def adoptable(self) -> bool:
        """Whether the resourceclaim controller could take it as a pod's template claim: both marks."""
        return self.owner is not None and self.entry is not None


def marks_of(claim: Mapping[str, Any] | None) -> Marks:
    metadata = (claim or {}).get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    owner = None
    for ref in metadata.get("ownerReferences") or ():
        # The controller indexes a claim under a pod only through this reference (claimPodOwnerIndex).
        if not isinstance(ref, Mapping) or ref.get("controller") is not True:
            continue
        if (ref.get("apiVersion"), ref.get("kind")) == ("v1", "Pod"):
            owner = (str(ref.get("name") or ""), str(ref.get("uid") or ""))
    annotations = metadata.get("annotations")
    entry = annotations.get(POD_CLAIM) if isinstance(annotations, Mapping) else None
    return Marks(owner, None if entry is None else str(entry))


def _entry(marks: Marks, pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The pod's spec.resourceClaims entry the annotation names: the one the controller takes it for."""
    for entry in (pod.get("spec") or {}).get("resourceClaims") or ():
        if isinstance(entry, Mapping) and marks.entry is not None and entry.get("name") == marks.entry:
            return entry
    return None


def template_named(claim: Mapping[str, Any], pod: Mapping[str, Any] | None) -> str | None:
    """The ResourceClaimTemplate the owning pod's entry names for the marked claim, if any: what the
    adapter reads before asking adoption_problem."""
    entry = _entry(marks_of(claim), pod) if pod is not None else None
    found = entry.get("resourceClaimTemplateName") if entry is not None else None
    return found if isinstance(found, str) and found else None


def adoption_problem(
    claim: Mapping[str, Any],
    pod: Mapping[str, Any] | None,
    template: Mapping[str, Any] | None,
    pod_version: int | None = None,
) -> str | None:
    """Why the marked claim is not what its owning pod's template makes; None when it is.
    `pod` is the pod its ownerReference names (None: no pod of that name and uid was read); `template`
    the ResourceClaimTemplate the pod's entry names (template_named), read in the claim's own API
    version, so that both carry the same defaults (None: missing or unread); `pod_version` the
    resourceVersion the pod was first seen at (its create, where the watch saw it made), if known."""
    marks = marks_of(claim)
    if marks.owner is None or not marks.adoptable:
        return None  # no controller takes it as a pod's template claim
    owner, uid = marks.owner
    if pod is None:
        return f"its controller, pod {owner} (uid {uid}), is not in this namespace as gpuport reads it"
    entry = _entry(marks, pod)
    if entry is None:
        return f"pod {owner} has no claim {marks.entry} in spec.resourceClaims"
    template_name = template_named(claim, pod)
    if template_name is None:
        return f"pod {owner}'s claim {entry.get('name')} names no ResourceClaimTemplate"
    if template is None:
        return f"gpuport could not read ResourceClaimTemplate {template_name}, which pod {owner} names; retry"
    if (claim.get("spec") or {}) != ((template.get("spec") or {}).get("spec") or {}):
        return f"its spec is not what its ResourceClaimTemplate {template_name} makes"
    # A template's spec cannot change, but its owner may delete it and make it again under the same name
    # after the pod was admitted (before the controller makes the pod's claim): the pod was charged the
    # template admission read, which existed before the pod did. One written after the pod was stored
    # (a larger revision) is not the one charged.
    made = str((template.get("metadata") or {}).get("resourceVersion") or "")
    if pod_version is not None and made.isdigit() and int(made) > pod_version:
        return (
            f"ResourceClaimTemplate {template_name} was made or changed after pod {owner} was created "
            f"(resourceVersion {made} > {pod_version}), and the pod was charged the template it was "
            "admitted with (delete the pod and create it again to be charged this one)"
        )
    # The template the pod was charged, by the uid /mutate recorded (charged_templates): one made again
    # since, even before the pod was stored (older than the pod: the check above passes it), is not it.
    # A claim made from it would hold what was not charged; the pod is to be made again.
    recorded = (recorded_uids(pod) or {}).get(template_name)
    now = (template.get("metadata") or {}).get("uid")
    if recorded is not None and now != recorded:
        return remade_reason(template_name, recorded, str(now or "") or None)
    return None


def adoption_message(claim: str, namespace: str, problem: str) -> str:
    subject = f'resourceclaims "{claim}"' if claim else "resourceclaims"
    return (
        f"{subject} is forbidden: namespace {namespace} has a GPU budget, and this claim is marked as a "
        f"pod's own (a controlling ownerReference to the pod and the annotation {POD_CLAIM}), which the "
        "resourceclaim controller takes as the pod's claim instead of making it from the pod's template, "
        f"while the pod was charged that template when admitted; {problem}. Leave the claims of a "
        "template to the controller: to ask other devices, make a claim without those marks and name it "
        "in a new pod's resourceClaimName, or change the template and create the pod again"
    )
