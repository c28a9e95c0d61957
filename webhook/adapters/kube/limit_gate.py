"""GPU limits on the admission path: gpuport's namespace limits, real LimitRanges read in
GPU-equivalents, and the LimitRanger default-injection trap. Runs on /mutate (so users see this
message before the built-in one) and again on /validate (which fails closed), and on the pod updates
gpuport reviews (a share annotation raised on a scheduling-gated pod is read again before it binds)."""

import logging
from collections.abc import Mapping
from typing import Any

from webhook.core.asks.demand import PodDemand
from webhook.core.asks.unread import unread_refusal
from webhook.core.budget.limits import (
    LIMIT_RANGER,
    LIMITS_ANNOTATION,
    OPT_IN_LABEL,
    LimitsError,
    from_annotation,
    from_limitrange,
    injected,
    trap_message,
    violations,
)
from webhook.core.deciding.context import Context
from webhook.core.deciding.decision import Decision, deny
from webhook.core.deciding.review import AdmissionRequest

log = logging.getLogger("gpuport.limits")


class LimitGate:
    def __init__(self, view):
        self.view = view

    def concerns(self, request: AdmissionRequest, context: Context) -> bool:
        """Whether a GPU limit may stand against this pod create, whatever it asks: its namespace has a
        LimitRange or gpuport's limits annotation, or the LimitRanger wrote defaults into it (the trap
        admit refuses, named even when the LimitRange is gone from the view)."""
        metadata = (request.object or {}).get("metadata")
        annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
        if isinstance(annotations, dict) and LIMIT_RANGER in annotations:
            return True
        if self.view.limitranges_in(request.namespace):
            return True
        return LIMITS_ANNOTATION in self.view.namespace(request.namespace)["annotations"]

    def admit(self, request: AdmissionRequest, context: Context, demand: PodDemand) -> Decision | None:
        """A denial, or None when no GPU limit stands against this pod create."""
        pod = request.object or {}
        subject = f'pods "{request.name}"' if request.name else "pods"
        pairs = injected(pod, context.dialects)
        # The namespace is read (a copy, under the view's lock) only for a pod the LimitRanger gave GPUs.
        if pairs and self.view.namespace(request.namespace)["labels"].get(OPT_IN_LABEL) != "true":
            names = [
                lr["metadata"]["name"]
                for lr in self.view.limitranges_in(request.namespace)
                if from_limitrange(lr, context.dialects)
            ]
            return deny("limitrange-injected-gpu", f"{subject} is forbidden: {trap_message(pairs, names)}")
        return self._check(request, context, demand, subject)

    def admit_update(
        self, request: AdmissionRequest, context: Context, demand: PodDemand, before: PodDemand
    ) -> Decision | None:
        """A denial of an update that takes the pod past a GPU limit it was within (its charge
        annotations changed: the pod is read after the update as a create is), or None. What the pod
        broke already, worded the same (a LimitRange made after it), is not the update's doing: the
        built-in LimitRanger does not look at pod updates either, and the pod's next create is checked."""
        subject = f'pods "{request.name}"' if request.name else "pods"
        refused = self._check(request, context, demand, subject)
        if refused is None:
            return None
        was = self._check(request, context, before, subject, request.old_object or {})
        return None if was is not None and was.message == refused.message else refused

    def _check(
        self,
        request: AdmissionRequest,
        context: Context,
        demand: PodDemand,
        subject: str,
        pod: Mapping[str, Any] | None = None,
    ) -> Decision | None:
        """The limits against `demand`, read from `pod` (the request's object when None)."""
        pod = request.object or {} if pod is None else pod
        namespace = self.view.namespace(request.namespace)
        if not demand.asks and not demand.claims.any and not demand.unread and not demand.unreadable:
            return None
        limits = []
        if LIMITS_ANNOTATION in namespace["annotations"]:
            try:
                limits += from_annotation(namespace["annotations"][LIMITS_ANNOTATION])
            except LimitsError as exc:
                log.error("namespace %s: %s", request.namespace, exc)  # a bad edit must not block pods
        for limitrange in self.view.limitranges_in(request.namespace):
            limits += from_limitrange(limitrange, context.dialects)
        if not limits:
            return None
        if demand.unread:
            refusal = unread_refusal(demand.unread, request.namespace, context.target.whole_gpu)
            return deny("gpu-limit-name-unread", f"{subject} is forbidden: {refusal}")
        if demand.unreadable:
            return deny(
                "gpu-limit-share-unreadable",
                f"{subject} is forbidden: gpuport cannot count this pod's GPU share against the GPU limits "
                f"of {request.namespace} as its scheduler reads it: {demand.unreadable}",
            )
        uncountable = demand.claims.blocking(request.dry_run)
        if uncountable:
            return deny(
                "gpu-limit-claims-uncountable",
                f"{subject} is forbidden: gpuport cannot count this pod's claims against the GPU limits of "
                f"{request.namespace}: " + "; ".join(uncountable),
            )
        found = violations(pod, demand, limits, context.target, context.dialects.catalogue)
        if not found:
            return None
        listed = found[0] if len(found) == 1 else "[" + ", ".join(found) + "]"
        return deny("gpu-limit", f"{subject} is forbidden: {listed}")
