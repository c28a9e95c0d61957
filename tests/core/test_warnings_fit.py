"""kubectl prints each admission warning cut at 120 characters: gpuport's warnings say the real change
within that, and the whole text goes on the pod (gpuport.io/rewrites) and into its Translated Event."""

import jsonpatch

from tests.helpers import context, parsed, review_of
from webhook.core.deciding import pipeline
from webhook.core.deciding.decision import MAX_WARNING_CHARS, allow, brief
from webhook.core.deciding.review import build_response

REWRITES = "gpuport.io/rewrites"
T4_ON_EKS = "g4dn.xlarge|g4dn.2xlarge|g4dn.4xlarge|g4dn.8xlarge|g4dn.16xlarge|g4dn.12xlarge|g4dn.metal"


def gke_t4_pod():
    """A pod pinned to GKE's T4 nodes by their accelerator label, as GKE's GPU pages write it."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "t4", "namespace": "team-a"},
        "spec": {
            "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"},
            "containers": [{"name": "main", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
        },
    }


def test_a_selector_replaced_by_a_required_affinity_is_said_so_in_brief_and_in_full_on_the_pod():
    pod = gke_t4_pod()
    decision = pipeline.decide(parsed(review_of(pod)), context("eks"))
    full = (
        "node selector cloud.google.com/gke-accelerator=nvidia-tesla-t4 replaced by required node affinity "
        f"node.kubernetes.io/instance-type in {T4_ON_EKS}"
    )
    replaced = "gpuport: node selector cloud.google.com/gke-accelerator → required affinity "
    assert decision.warnings[0] == replaced + "node.kubernetes.io/instance-type in 7 values"
    assert all(len(w) <= MAX_WARNING_CHARS for w in decision.warnings)
    assert all(len(w) <= MAX_WARNING_CHARS for w in build_response("uid", decision)["response"]["warnings"])
    rewritten = jsonpatch.apply_patch(pod, list(decision.patch))
    assert full in rewritten["metadata"]["annotations"][REWRITES]


def test_the_translated_event_carries_the_whole_text():
    from webhook.adapters.kube.events import PodEvents

    said = "node selector cloud.google.com/gke-accelerator=nvidia-tesla-t4 replaced by " + "x" * 300
    involved = {"apiVersion": "v1", "kind": "Pod", "name": "t4", "uid": "uid"}
    event = PodEvents(None, start=False)._event("team-a", "t4.uid", involved, said, 1)
    assert said in event["message"]


def test_a_short_warning_is_left_as_it_is_and_a_long_one_keeps_its_beginning():
    assert brief("gpuport: toleration sku added") == "gpuport: toleration sku added"
    long = "gpuport: claim gpus: " + "word " * 40
    assert len(brief(long)) == MAX_WARNING_CHARS and brief(long).startswith("gpuport: claim gpus: word")
    assert brief(long).endswith("…")


def test_every_warning_is_at_most_120_characters_in_the_response():
    decision = allow(warnings=["gpuport: " + "a|" * 200 + "b"])
    [warning] = build_response("uid", decision)["response"]["warnings"]
    assert len(warning) <= MAX_WARNING_CHARS
