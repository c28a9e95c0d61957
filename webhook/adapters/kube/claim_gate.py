"""The review of ResourceClaim creates: in a namespace with a GPU budget, a claim made under a name a
not-finished pod already holds is refused (webhook.core.budget.replaced_claims says why and in which
words); this adapter asks the cluster view for the namespace's budget and its pods."""

from webhook.adapters.kube.charge_freeze import BUDGET_STORES, has_gpu_budget
from webhook.core.budget.replaced_claims import pods_naming, replaced_message
from webhook.core.deciding.context import Context
from webhook.core.deciding.decision import Decision, deny
from webhook.core.deciding.review import AdmissionRequest


class ClaimCreateGate:
    def __init__(self, view):
        self.view = view

    def admit_claim(self, request: AdmissionRequest, context: Context) -> Decision | None:
        """A refusal of a ResourceClaim create that pods already name in a budget namespace, else None."""
        claim = request.name or str(((request.object or {}).get("metadata") or {}).get("name") or "")
        if not claim:
            return None  # a generated name: no pod can name it yet
        if not self.view.has_synced("pods", *BUDGET_STORES):
            return deny(
                "claim-view-loading",
                f"gpuport is still loading its view of the cluster and cannot tell whether pods of "
                f"{request.namespace} already name this claim; retry shortly",
            )
        if not has_gpu_budget(self.view, request.namespace, context):
            return None
        pods = pods_naming(claim, self.view.pods_in(request.namespace))
        if not pods:
            return None
        return deny("claim-named-by-pods", replaced_message(claim, request.namespace, pods))
