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


# A claim marked as a pod's own (issue 45: adopted by the resourceclaim controller past the budget).

TEMPLATE = {
    "apiVersion": "resource.k8s.io/v1beta1",
    "metadata": {"name": "one"},
    "spec": {"spec": claim("x", 1)["spec"]},
}


class Templates:
    """The template store as the gate asks it: the version each template was read in is recorded."""

    def __init__(self, templates=None):
        self.templates = {"one": TEMPLATE} if templates is None else templates
        self.reads = []

    def template_as(self, namespace, name, api_version):
        self.reads.append((namespace, name, api_version))
        return self.templates.get(name)


HOLDER = waiting("holder", {"resourceClaimTemplateName": "one"})


def marked(name, count, owner_uid="uid-holder", entry="gpus"):
    body = claim(name, count)
    body["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "Pod", "name": "holder", "uid": owner_uid, "controller": True}
    ]
    if entry is not None:
        body["metadata"]["annotations"] = {"resource.kubernetes.io/pod-claim-name": entry}
    return body


def validate_with(view, body, templates=None, read_pod=None, old=None):
    gate = ClaimCreateGate(view, templates if templates is not None else Templates(), read_pod)
    operation = "CREATE" if old is None else "UPDATE"
    review = review_of(body, kind="ResourceClaim", group="resource.k8s.io", operation=operation)
    if old is not None:
        review["request"]["oldObject"] = old
    return pipeline.validate(parsed(review), CTX, pipeline.Gates(claim_creates=gate))


def test_a_claim_marked_as_a_pods_own_asking_more_than_its_template_is_refused():
    templates = Templates()
    refused = validate_with(View([GPU_QUOTA], pods=[HOLDER]), marked("holder-mine", 8), templates)
    assert (refused.allowed, refused.reason) == (False, "claim-marked-as-a-pods")
    assert refused.message.startswith('resourceclaims "holder-mine" is forbidden: namespace team-a has a GPU')
    assert "its spec is not what its ResourceClaimTemplate one makes" in refused.message
    # Read in the claim's own version: both then carry that version's defaults.
    assert templates.reads == [("team-a", "one", "resource.k8s.io/v1beta1")]


def test_the_controllers_own_claim_passes_and_no_budget_reads_nothing():
    view = View([GPU_QUOTA], pods=[HOLDER])
    assert validate_with(view, marked("holder-gpus-x7k2p", 1)).allowed
    templates = Templates()
    assert validate_with(View(pods=[HOLDER]), marked("holder-mine", 8), templates).allowed  # no budget
    assert templates.reads == []


def test_an_update_that_marks_a_claim_as_a_pods_is_refused_and_other_updates_read_nothing():
    view = View([GPU_QUOTA], pods=[HOLDER])
    plain = claim("holder-mine")
    refused = validate_with(view, marked("holder-mine", 8), old=plain)
    assert refused.reason == "claim-marked-as-a-pods"
    # The scheduler's finalizer, a label: the marks stay as they were, nothing is read or refused.
    templates = Templates()
    finalized = marked("holder-mine", 8)
    finalized["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    assert validate_with(view, finalized, templates, old=marked("holder-mine", 8)).allowed
    assert validate_with(
        view, dict(plain, metadata={**plain["metadata"], "labels": {"a": "b"}}), old=plain
    ).allowed
    # Marks taken off: the claim is no pod's any more (the garbage collector orphaning it keeps the
    # annotation); an annotation alone puts a claim under no pod.
    assert validate_with(view, plain, templates, old=marked("holder-mine", 8)).allowed
    orphaned = marked("holder-mine", 8)
    orphaned["metadata"]["ownerReferences"] = []
    assert validate_with(view, orphaned, templates, old=marked("holder-mine", 8)).allowed
    assert validate_with(view, orphaned, templates).allowed
    assert templates.reads == []
    # The reference added to an annotated claim makes it the pod's: reviewed.
    assert validate_with(view, marked("holder-mine", 8), old=orphaned).reason == "claim-marked-as-a-pods"


def test_the_owner_is_found_by_its_uid_and_read_where_the_view_has_not_seen_it_yet():
    asked = []

    def read_pod(namespace, name):
        asked.append((namespace, name))
        return HOLDER

    assert validate_with(
        View([GPU_QUOTA], pods=[]), marked("holder-gpus-x7k2p", 1), read_pod=read_pod
    ).allowed
    assert asked == [("team-a", "holder")]
    # A pod of that name with another uid (made again since) is not the claim's controller.
    refused = validate_with(
        View([GPU_QUOTA], pods=[HOLDER]), marked("holder-x", 1, "uid-old"), read_pod=read_pod
    )
    assert "its controller, pod holder (uid uid-old), is not in this namespace" in refused.message
    missing = validate_with(View([GPU_QUOTA], pods=[]), marked("holder-x", 1), read_pod=lambda ns, n: None)
    assert missing.reason == "claim-marked-as-a-pods"


def test_a_template_gpuport_cannot_read_refuses_the_marked_claim_asking_to_retry():
    refused = validate_with(View([GPU_QUOTA], pods=[HOLDER]), marked("holder-gpus-x7k2p", 1), Templates({}))
    assert (
        "gpuport could not read ResourceClaimTemplate one, which pod holder names; retry" in refused.message
    )


def test_a_template_made_again_after_its_pod_refuses_the_claim_the_controller_makes_from_it():
    holder = {**HOLDER, "firstSeen": 100}
    remade = {**TEMPLATE, "metadata": {"name": "one", "resourceVersion": "120"}}
    refused = validate_with(
        View([GPU_QUOTA], pods=[holder]), marked("holder-gpus-x7k2p", 1), Templates({"one": remade})
    )
    assert refused.reason == "claim-marked-as-a-pods"
    assert "ResourceClaimTemplate one was made or changed after pod holder was created" in refused.message
    older = {**TEMPLATE, "metadata": {"name": "one", "resourceVersion": "90"}}
    assert validate_with(
        View([GPU_QUOTA], pods=[holder]), marked("holder-gpus-x7k2p", 1), Templates({"one": older})
    ).allowed


def test_a_claim_its_pod_controls_without_the_controllers_annotation_is_no_template_claim():
    # The scheduler's claim for extended resources a DeviceClass stands for (KEP-5004): controlled by
    # its pod, annotated otherwise, made under a generated name. The controller never takes it.
    extended = marked("", 2, entry=None)
    extended["metadata"]["annotations"] = {"resource.kubernetes.io/extended-resource-claim": "true"}
    templates = Templates()
    assert validate_with(View([GPU_QUOTA], pods=[HOLDER]), extended, templates).allowed
    assert templates.reads == []
