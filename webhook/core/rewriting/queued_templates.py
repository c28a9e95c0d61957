"""Workloads Kueue admits by their pod template, before any of their pods reach gpuport.

Kueue holds a workload labelled with a queue name suspended until its ClusterQueue admits it, and admits it
by the resources its pod templates ask for (kueue.sigs.k8s.io, "Run A Kubernetes Job"; its troubleshooting
guide: a ClusterQueue must cover every resource a workload requests). gpuport rewrites pods when they are
created and never a workload's template (admission.mutation_after_checks), so a workload moved from another
platform is queued, charged and given a flavor for the GPUs as written there: a ClusterQueue covering only
this cluster's names never admits it (no pod is ever created), and one that covers the old name charges and
places what the pods will not ask for. Said where the webhook sees the workload; `gpuport translate` rewrites
the template itself, which is what Kueue then reads.
"""

from collections.abc import Mapping
from typing import Any

from webhook.core.asks.demand import PodDemand
from webhook.core.rewriting.patch import apply

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def queued_as_written(
    kind: str, metadata: Any, template: Mapping[str, Any], demand: PodDemand, patch: list[dict[str, Any]]
) -> list[str]:
    """The warning for a workload Kueue queues (its `metadata` carries the queue label) whose pods will ask
    for other resources than its `template` does (`patch` is what gpuport will make of its pods: another
    name or amount in a container's resources, or other claims); none otherwise."""
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    if not isinstance(labels, Mapping) or not labels.get(QUEUE_LABEL) or not demand.asks or not patch:
        return []
    if _asked(template) == _asked(apply(template, patch)):
        return []  # only node selectors, tolerations or annotations change: Kueue counts the same
    written = ", ".join(dict.fromkeys(a.describe() for a in demand.asks))
    # Two lines: kubectl shows a warning's first 120 characters, and each is said whole there.
    return [
        f"gpuport: Kueue queues this {kind} by its template's {written}, not by what its pods will ask here",
        "gpuport: apply it translated (gpuport translate) for Kueue to queue and charge what its pods ask",
    ]


def _asked(pod: Mapping[str, Any]) -> list[Any]:
    """What Kueue counts of a pod template: each container's resources, and the pod's claims."""
    spec = pod.get("spec")
    if not isinstance(spec, Mapping):
        return []
    found: list[Any] = [spec.get("resourceClaims")]
    for list_name in ("initContainers", "containers"):
        containers = spec.get(list_name)
        for container in containers if isinstance(containers, list) else ():
            found.append(container.get("resources") if isinstance(container, Mapping) else None)
    return found
