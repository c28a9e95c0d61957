"""GPU limits on the admission path: gpuport's namespace limits, real LimitRanges read in
GPU-equivalents, and the LimitRanger default-injection trap. Runs on /mutate (so users see this
message before the built-in one) and again on /validate (which fails closed)."""

import logging

from webhook.core.asks.demand import PodDemand
from webhook.core.asks.unread import unread_refusal
from webhook.core.budget.limits import (
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

    def admit(self, request: AdmissionRequest, context: Context, demand: PodDemand) -> Decision | None:
        """A denial, or None when no GPU limit stands against this pod create."""
        pod = request.object or {}
        namespace = self.view.namespace(request.namespace)
        subject = f'pods "{request.name}"' if request.name else "pods"
        pairs = injected(pod, context.dialects)
        if pairs and namespace["labels"].get(OPT_IN_LABEL) != "true":
            names = [
                lr["metadata"]["name"]
                for lr in self.view.limitranges_in(request.namespace)
                if from_limitrange(lr, context.dialects)
            ]
            return deny("limitrange-injected-gpu", f"{subject} is forbidden: {trap_message(pairs, names)}")
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
