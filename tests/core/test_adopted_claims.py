"""A claim marked as a pod's own must be what the pod's template makes (issue 45: a claim of 8 GPUs made
under a new name with a 1-GPU pod as its controller and the pod-claim-name annotation was adopted by the
resourceclaim controller, and the pod was allocated 8 GPUs charged 1)."""

import copy

from webhook.core.budget.adopted_claims import (
    POD_CLAIM,
    Marks,
    adoption_message,
    adoption_problem,
    marks_of,
    template_named,
)

ONE = {"devices": {"requests": [{"name": "gpu", "deviceClassName": "gpu.nvidia.com", "count": 1}]}}
EIGHT = {"devices": {"requests": [{"name": "gpu", "deviceClassName": "gpu.nvidia.com", "count": 8}]}}
TEMPLATE = {"metadata": {"name": "one"}, "spec": {"metadata": {"labels": {"a": "b"}}, "spec": ONE}}
POD = {
    "metadata": {"name": "holder", "uid": "uid-1"},
    "spec": {
        "resourceClaims": [
            {"name": "gpus", "resourceClaimTemplateName": "one"},
            {"name": "shared", "resourceClaimName": "team-gpus"},
        ]
    },
}
OWNER = {"apiVersion": "v1", "kind": "Pod", "name": "holder", "uid": "uid-1", "controller": True}


def claim(spec=ONE, owner=OWNER, entry="gpus"):
    """A claim as the controller makes it from the template (owner and annotation), by default."""
    metadata = {"name": "holder-gpus-x7k2p"}
    if owner is not None:
        metadata["ownerReferences"] = [owner]
    if entry is not None:
        metadata["annotations"] = {POD_CLAIM: entry}
    return {"metadata": metadata, "spec": copy.deepcopy(spec)}


def problem(body, pod=POD, template=TEMPLATE):
    return adoption_problem(body, pod, template)


def test_the_claim_the_controller_makes_from_the_template_passes():
    assert template_named(claim(), POD) == "one"
    assert problem(claim()) is None


def test_a_marked_claim_asking_more_than_the_template_is_refused():
    assert problem(claim(EIGHT)) == "its spec is not what its ResourceClaimTemplate one makes"
    # Any difference counts, not only a larger count: the charge was read from the template.
    other = copy.deepcopy(ONE)
    other["devices"]["requests"][0]["selectors"] = [{"cel": {"expression": "true"}}]
    assert problem(claim(other)) == "its spec is not what its ResourceClaimTemplate one makes"


def test_a_claim_is_a_pods_template_claim_through_both_marks():
    assert marks_of(claim()) == Marks(("holder", "uid-1"), "gpus") and marks_of(claim()).adoptable
    # The annotation alone puts it under no pod (the controller finds a pod's claims by reference; the
    # garbage collector orphaning a claim leaves the annotation); without the annotation the controller
    # takes no claim as a template entry's since 1.28 (not even one named <pod>-<entry>), and the
    # scheduler's claims for extended resources (KEP-5004) are controlled by the pod without it.
    assert marks_of(claim(owner=None)) == Marks(None, "gpus")
    assert not marks_of(claim(owner=None)).adoptable
    assert not marks_of(claim(entry=None)).adoptable
    extended = claim(EIGHT, entry=None)
    extended["metadata"]["annotations"] = {"resource.kubernetes.io/extended-resource-claim": "true"}
    assert problem(extended) is None and problem(claim(EIGHT, owner=None)) is None
    # An owner that is not the controller, or not a v1 Pod, is not the controller's index key.
    assert not marks_of(claim(owner={**OWNER, "controller": False})).adoptable
    assert not marks_of(claim(owner={**OWNER, "kind": "Job", "apiVersion": "batch/v1"})).adoptable
    assert not marks_of({"metadata": {"name": "plain"}, "spec": EIGHT}).adoptable
    # An empty annotation is a mark: present, it names no entry, which the controller tells apart.
    assert marks_of(claim(entry="")).adoptable
    assert problem(claim(entry="")) == "pod holder has no claim  in spec.resourceClaims"


def test_marks_that_name_no_pod_entry_or_template_are_refused_saying_which():
    assert problem(claim(), pod=None) == (
        "its controller, pod holder (uid uid-1), is not in this namespace as gpuport reads it"
    )
    assert problem(claim(entry="other")) == "pod holder has no claim other in spec.resourceClaims"
    assert problem(claim(entry="shared")) == "pod holder's claim shared names no ResourceClaimTemplate"
    assert problem(claim(), template=None) == (
        "gpuport could not read ResourceClaimTemplate one, which pod holder names; retry"
    )


def test_the_refusal_names_the_claim_the_namespace_and_what_to_do():
    message = adoption_message(
        "holder-mine", "team-a", "its spec is not what its ResourceClaimTemplate one makes"
    )
    assert message.startswith(
        'resourceclaims "holder-mine" is forbidden: namespace team-a has a GPU budget, and this claim is '
        "marked as a pod's own"
    )
    assert (
        "its spec is not what its ResourceClaimTemplate one makes. Leave the claims of a template" in message
    )
    assert "name it in a new pod's resourceClaimName" in message


def test_a_template_made_again_after_the_pod_was_created_is_not_the_one_it_was_charged():
    # Its owner deleted it and made it again under the same name before the controller made the
    # pod's claim: the claim is what the template makes now, not what the pod was charged.
    remade = copy.deepcopy(TEMPLATE)
    remade["metadata"]["resourceVersion"] = "120"
    assert adoption_problem(claim(), POD, remade, pod_version=100) == (
        "ResourceClaimTemplate one was made or changed after pod holder was created (resourceVersion "
        "120 > 100), and the pod was charged the template it was admitted with (delete the pod and "
        "create it again to be charged this one)"
    )
    assert adoption_problem(claim(), POD, remade, pod_version=130) is None
    assert adoption_problem(claim(), POD, remade) is None  # the pod's version unknown


def test_a_template_made_again_before_the_pod_was_stored_is_not_the_one_its_record_names():
    """Issue 45: made again (larger) after gpuport read it and before the pod was stored, the template is
    older than the pod (resourceVersion 9 < 100) and the claim is its spec: only the uid gpuport
    recorded on the pod (gpuport.io/claim-templates) says it is not the template charged."""
    remade = {"metadata": {"name": "one", "uid": "t-2", "resourceVersion": "9"}, "spec": {"spec": EIGHT}}
    recorded = copy.deepcopy(POD)
    recorded["metadata"]["annotations"] = {"gpuport.io/claim-templates": '{"one": "t-1"}'}
    problem = adoption_problem(claim(EIGHT), recorded, remade, 100)
    assert problem is not None and "ResourceClaimTemplate one was deleted and made again" in problem
    assert "records uid t-1; it is uid t-2 now" in problem
    charged = dict(remade, metadata={**remade["metadata"], "uid": "t-1"})
    assert adoption_problem(claim(EIGHT), recorded, charged, 100) is None  # the one it was charged
    assert adoption_problem(claim(EIGHT), POD, remade, 100) is None  # no record: the older checks alone
