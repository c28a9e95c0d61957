"""A ResourceClaim made under a name pods already hold is refused where there is a GPU budget (issue 45:
a claim a gated pod names, deleted and made again asking 8, was allocated 8 GPUs under a quota of 1)."""

from decimal import Decimal

from tests.helpers import context, parsed, review_of
from tests.quota_fakes import FakeView
from webhook.adapters.kube.claim_gate import ClaimCreateGate
from webhook.core.budget.quota import Quota
from webhook.core.deciding import pipeline

CTX = context("dra-nvidia")
GPU_QUOTA = Quota("gpus", {"requests.nvidia.com/gpu": Decimal(1)})


class View(FakeView):
    def limitranges_in(self, namespace):
        return []

    def namespace(self, namespace):
        return {"labels": {}, "annotations": {}}


def claim(name, count=8):
    return {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {
            "devices": {"requests": [{"name": "gpu", "deviceClassName": "gpu.nvidia.com", "count": count}]}
        },
    }


def waiting(name, entry, status=None):
    return {
        "metadata": {"name": name, "namespace": "team-a", "uid": f"uid-{name}"},
        "spec": {"resourceClaims": [{"name": "gpus", **entry}], "schedulingGates": [{"name": "wait"}]},
        "status": {"phase": "Pending", **(status or {})},
    }


def validate(view, body):
    review = review_of(body, kind="ResourceClaim", group="resource.k8s.io", name=body["metadata"]["name"])
    return pipeline.validate(parsed(review), CTX, pipeline.Gates(claim_creates=ClaimCreateGate(view)))


def test_a_claim_a_waiting_pod_names_made_again_is_refused():
    view = View([GPU_QUOTA], pods=[waiting("gated", {"resourceClaimName": "team-gpus"})])
    refused = validate(view, claim("team-gpus"))
    assert (refused.allowed, refused.reason) == (False, "claim-named-by-pods")
    assert refused.message.startswith(
        'resourceclaims "team-gpus" is forbidden: namespace team-a has a GPU budget, and pod(s) gated '
        "already name this claim"
    )


def test_a_claim_the_controller_made_for_a_pod_made_again_is_refused():
    made = {"resourceClaimStatuses": [{"name": "gpus", "resourceClaimName": "holder-gpus-x7k2p"}]}
    view = View([GPU_QUOTA], pods=[waiting("holder", {"resourceClaimTemplateName": "one"}, made)])
    assert validate(view, claim("holder-gpus-x7k2p")).reason == "claim-named-by-pods"


def test_new_names_claims_no_pod_holds_and_namespaces_without_a_budget_pass():
    view = View([GPU_QUOTA], pods=[waiting("gated", {"resourceClaimName": "team-gpus"})])
    assert validate(view, claim("other")).allowed  # made ahead: charged when a pod naming it is admitted
    assert validate(View(pods=view.pods), claim("team-gpus")).allowed  # no GPU budget here
    assert validate(View([GPU_QUOTA], pods=[]), claim("team-gpus")).allowed  # no pod holds the name


def test_a_view_still_loading_refuses_in_words():
    view = View([GPU_QUOTA])
    view.listed.discard("pods")
    assert validate(view, claim("team-gpus")).reason == "claim-view-loading"


def test_a_claim_only_finished_pods_name_may_be_made_again():
    # A Job's pod that completed holds no devices: its claim name is free to be made again.
    done = waiting("done", {"resourceClaimName": "team-gpus"})
    done["status"]["phase"] = "Succeeded"
    assert validate(View([GPU_QUOTA], pods=[done]), claim("team-gpus")).allowed
    failed = dict(done, status={"phase": "Failed"})
    assert validate(View([GPU_QUOTA], pods=[failed]), claim("team-gpus")).allowed
