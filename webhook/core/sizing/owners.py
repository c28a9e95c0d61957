"""Which workload a running pod belongs to, read from its owner references and the labels controllers
set, so pods replaced by a rollout or a retry are sized together as the workload whose ask changes.

A ReplicaSet's pods belong to its Deployment (the pod-template-hash label names the ReplicaSet's
suffix); a StatefulSet's to a LeaderWorkerSet when the LWS label says so; a Job's to the Job (its
CronJob is not visible from the pod); anything else to its controller, or to the pod itself.
"""

from collections.abc import Mapping
from typing import Any

from webhook.core.rewriting.topology_terms import LWS_NAME

TEMPLATE_HASH = "pod-template-hash"


def workload_of(pod: Mapping[str, Any]) -> str:
    """Kind/namespace/name of the workload that owns `pod`."""
    metadata = pod.get("metadata") or {}
    namespace = str(metadata.get("namespace") or "default")
    labels = metadata.get("labels") or {}
    owners = [o for o in metadata.get("ownerReferences") or [] if isinstance(o, Mapping)]
    owner = next((o for o in owners if o.get("controller")), owners[0] if owners else None)
    if owner is None:
        return f"Pod/{namespace}/{metadata.get('name', '?')}"
    kind, name = str(owner.get("kind", "?")), str(owner.get("name", "?"))
    suffix = f"-{labels.get(TEMPLATE_HASH)}"
    if kind == "ReplicaSet" and TEMPLATE_HASH in labels and name.endswith(suffix):
        return f"Deployment/{namespace}/{name.removesuffix(suffix)}"
    if kind == "StatefulSet" and labels.get(LWS_NAME):
        return f"LeaderWorkerSet/{namespace}/{labels[LWS_NAME]}"
    return f"{kind}/{namespace}/{name}"
