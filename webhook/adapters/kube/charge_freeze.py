"""The update gate that keeps a pod's charge annotations as they were at its create, in the namespaces
with a GPU budget (a GPU quota, a LimitRange on a GPU resource, or gpuport's limits annotation: the
namespaces where gpuport's webhook fails closed). The rule and its words are webhook.core.budget.frozen;
this adapter only asks the cluster view whether the namespace has a budget."""

from webhook.core.asks.demand import PodDemand
from webhook.core.budget.frozen import (
    changed_charge_annotations,
    charge_annotations,
    frozen_message,
    per_container_charge,
)
from webhook.core.budget.limits import LIMITS_ANNOTATION, from_limitrange
from webhook.core.budget.quota import gpu_quotas
from webhook.core.deciding.context import Context
from webhook.core.deciding.decision import Decision, deny
from webhook.core.deciding.review import AdmissionRequest

# What the view must have listed before it can say a namespace has no budget.
BUDGET_STORES = ("resourcequotas", "limitranges", "namespaces")


class ChargeFreeze:
    def __init__(self, view):
        self.view = view

    def admit(self, request: AdmissionRequest, context: Context, demand: PodDemand) -> Decision | None:
        return None  # a create sets the annotations its charge is read from: nothing to keep yet

    def admit_update(
        self, request: AdmissionRequest, context: Context, demand: PodDemand, before: PodDemand
    ) -> Decision | None:
        """A refusal of an update that adds, changes or removes a charge annotation in a namespace with
        a GPU budget; None otherwise."""
        maps = context.dialects.maps
        changed = changed_charge_annotations(
            request.old_object, request.object, charge_annotations(maps), per_container_charge(maps)
        )
        if not changed:
            return None
        if not self.view.has_synced(*BUDGET_STORES):
            # An empty view would say "no budget": refused in words until it has listed them.
            return deny(
                "charge-view-loading",
                f"gpuport is still loading its view of the cluster and cannot tell whether "
                f"{request.namespace} has a GPU budget; retry shortly",
            )
        if not has_gpu_budget(self.view, request.namespace, context):
            return None
        subject = f'pods "{request.name}"' if request.name else "pods"
        return deny("gpu-charge-frozen", frozen_message(subject, request.namespace, changed))


def has_gpu_budget(view, namespace: str, context: Context) -> bool:
    """A GPU quota, a LimitRange on a GPU resource, or gpuport's limits annotation (the fail-closed set)."""
    if gpu_quotas(view.quotas_in(namespace), context.target.whole_gpu):
        return True
    if any(from_limitrange(lr, context.dialects) for lr in view.limitranges_in(namespace)):
        return True
    return LIMITS_ANNOTATION in view.namespace(namespace)["annotations"]
