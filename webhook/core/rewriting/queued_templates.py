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
from webhook.core.vocabulary.workloads import mapping_at

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# Where Kueue reads the queue name of a kind it admits by its pod template, of those gpuport opens: a Job's
# own labels (Kueue's Job integration), a CronJob's jobTemplate's (its Jobs carry them). A Deployment's or
# StatefulSet's pods are admitted one by one (Kueue's pod integration), as gpuport has rewritten them.
_QUEUED_BY = {("batch", "Job"): ("metadata",), ("batch", "CronJob"): ("spec", "jobTemplate", "metadata")}


def queued_as_written(
    group: str,
    kind: str,
    workload: Mapping[str, Any],
    template: Mapping[str, Any],
    demand: PodDemand,
    patch: list[dict[str, Any]],
) -> list[str]:
    """The warning for a workload Kueue queues by its pod `template` (a Job or CronJob carrying the queue
    label where Kueue reads it) whose pods will ask for other resources than the template does (`patch`
    is what gpuport will make of its pods: another name or amount in a container's resources, or other
    claims); none otherwise."""
    path = _QUEUED_BY.get((group, kind))
    metadata = mapping_at(workload, path) if path else None
    labels = metadata.get("labels") if metadata is not None else None
    if not isinstance(labels, Mapping) or not labels.get(QUEUE_LABEL) or not demand.asks or not patch:
        return []
    if _asked(template) == _asked(apply(template, patch)):
        return []  # only node selectors, tolerations or annotations change: Kueue counts the same
    asked = list(dict.fromkeys(a.describe() for a in demand.asks))
    written = asked[0] + (f" (+{len(asked) - 1})" if len(asked) > 1 else "")
    subject = "this Job as its" if kind == "Job" else f"this {kind}'s Jobs as their"
    # Two lines: kubectl shows a warning's first 120 characters, and each fits whole there.
    return [
        f"gpuport: Kueue queues {subject} template asks ({written}), not as the pods will ask here",
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
