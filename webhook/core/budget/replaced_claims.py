"""A ResourceClaim made under a name a pod already holds (pure): refused where there is a GPU budget.

Devices are chosen when the scheduler allocates, after the pod's admission. A pod is charged the claims
it names as they are when it is admitted; a user who may write claims could then delete one a waiting
(scheduling-gated) pod names, or the one the controller made from its template (named in the pod's
status), and make it again under that name asking more: the scheduler allocates what the claim asks
now, and the pod is bound holding more than it was charged. gpuport refuses such a create in the
namespaces with a GPU budget, at the create itself, so no pod is bound holding what was never charged.
The controller's own claims come under new generated names (no pod names them yet) and pass; a claim
made ahead, before any pod names it, passes and is charged when a pod naming it is admitted.
"""

from collections.abc import Iterable, Mapping
from typing import Any


def pods_naming(claim: str, pods: Iterable[Mapping[str, Any]]) -> list[str]:
    """The names of the not-finished pods that name `claim`: in spec.resourceClaims (resourceClaimName)
    or as a claim the cluster made for them (status.resourceClaimStatuses), sorted."""
    found = set()
    for pod in pods:
        spec, status = pod.get("spec") or {}, pod.get("status") or {}
        if status.get("phase") in ("Succeeded", "Failed"):
            continue  # a finished pod holds no devices: its claim may be made again
        named = [entry.get("resourceClaimName") for entry in spec.get("resourceClaims") or ()]
        named += [entry.get("resourceClaimName") for entry in status.get("resourceClaimStatuses") or ()]
        if claim in named:
            found.add(str((pod.get("metadata") or {}).get("name")))
    return sorted(found)


def replaced_message(claim: str, namespace: str, pods: list[str]) -> str:
    named = ", ".join(pods[:5]) + (f" and {len(pods) - 5} more" if len(pods) > 5 else "")
    return (
        f'resourceclaims "{claim}" is forbidden: namespace {namespace} has a GPU budget, and pod(s) {named} '
        "already name this claim: they were charged the claim they named when admitted, and the devices "
        "this one asks would be allocated to them uncharged (delete those pods and create them again, "
        "or make the claim under a new name)"
    )
