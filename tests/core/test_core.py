from dataclasses import replace

from tests.helpers import fixture, gpu, parsed, pod_with_resources, review_of
from webhook.core.deciding import pipeline


def test_kinds_gpuport_does_not_look_at_are_allowed_unchanged(generic_context):
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "0.5"}}
    decision = pipeline.decide(parsed(review_of(config_map)), generic_context)
    assert decision.allowed and decision.reason == "kind-ignored" and decision.patch == ()


def test_a_pod_named_like_a_workload_kind_in_another_group_is_ignored(generic_context):
    custom = {
        "apiVersion": "example.com/v1",
        "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {"template": {"spec": pod_with_resources(gpu("0.5", "0.5"))["spec"]}},
    }
    decision = pipeline.decide(parsed(review_of(custom)), generic_context)
    assert decision.allowed and decision.reason == "kind-ignored"


def test_delete_and_connect_are_allowed(generic_context):
    for operation in ("DELETE", "CONNECT"):
        review = review_of(pod_with_resources(gpu("0.5", "0.5")), operation=operation)
        assert pipeline.decide(parsed(review), generic_context).reason == "operation-ignored"
        assert pipeline.validate(parsed(review), generic_context).allowed


def test_pod_updates_are_checked_but_never_rewritten(generic_context):
    def label(view, pod):
        view["metadata"].setdefault("labels", {})["x"] = "y"
        return ["labelled"]

    context = replace(generic_context, mutations=(label,))
    update = pipeline.decide(parsed(fixture("pod-update-labels.json")), context)
    assert update.allowed and update.patch == ()
    create = pipeline.decide(parsed(fixture("pod-create-gpu-limit-1.json")), context)
    assert create.patch == ({"op": "add", "path": "/metadata/labels/x", "value": "y"},)
    assert create.warnings == ("labelled",)


def test_dry_run_gets_the_same_decision(generic_context):
    dry = pipeline.decide(parsed(fixture("pod-create-dryrun.json")), generic_context)
    real = pipeline.decide(parsed(fixture("pod-create-gpu-limit-1.json")), generic_context)
    assert (dry.allowed, dry.patch, dry.reason) == (real.allowed, real.patch, real.reason)


def test_workload_template_is_never_patched_even_with_mutations(generic_context):
    def label(view, pod):
        view["metadata"].setdefault("labels", {})["x"] = "y"
        return ["labelled"]

    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {"template": {"spec": pod_with_resources(gpu("1"))["spec"]}},
    }
    decision = pipeline.decide(parsed(review_of(deployment)), replace(generic_context, mutations=(label,)))
    assert decision.allowed and decision.patch == ()


def test_labels_and_annotations_cannot_switch_the_checks_off(generic_context):
    pod = pod_with_resources(gpu("0.5", "0.5"))
    pod["metadata"]["labels"] = {"gpuport.io/skip": "true", "gpuport.io/ignore": "true"}
    pod["metadata"]["annotations"] = {"gpuport.io/policy": "allow", "gpuport.io/fractional": "mig"}
    assert not pipeline.decide(parsed(review_of(pod)), generic_context).allowed
    assert not pipeline.validate(parsed(review_of(pod)), generic_context).allowed


def test_decisions_are_deterministic(generic_context):
    review = parsed(fixture("pod-create-fractional-gpu-500m-before-validation.json"))
    assert pipeline.decide(review, generic_context) == pipeline.decide(review, generic_context)


def test_a_workload_is_told_how_its_pods_will_be_rewritten_and_its_template_stays_as_written():
    from tests.helpers import context, parsed, review_of
    from webhook.core.deciding import pipeline

    def deployment(resources, selector):
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "team-a"},
            "spec": {
                "template": {
                    "spec": {
                        "nodeSelector": selector,
                        "containers": [{"name": "c", "image": "x", "resources": {"limits": resources}}],
                    }
                }
            },
        }

    gke = deployment({"nvidia.com/gpu": "1"}, {"cloud.google.com/gke-accelerator": "nvidia-l4"})
    decision = pipeline.decide(parsed(review_of(gke)), context("eks"))
    assert decision.allowed and decision.patch == ()
    assert decision.warnings[0].startswith(
        "gpuport: pods: node selector cloud.google.com/gke-accelerator → required affinity "
        "node.kubernetes.io/instance-type in "
    )
    amd = deployment({"amd.com/gpu": "1"}, {})
    refused = pipeline.decide(parsed(review_of(amd)), context("gke"))  # EKS sells AMD GPUs (g4ad)
    assert refused.allowed and refused.warnings == (
        "gpuport: pods will be refused: containers[0] asks for an AMD GPU (amd.com/gpu: 1); "
        "gke offers NVIDIA GPUs only",
    )
    # A ReplicaSet its Deployment's controller made: previewed with its owner, not again.
    owned = deployment({"nvidia.com/gpu": "1"}, {"cloud.google.com/gke-accelerator": "nvidia-l4"})
    owned.update(apiVersion="apps/v1", kind="ReplicaSet")
    owned["metadata"]["ownerReferences"] = [{"kind": "Deployment", "name": "d", "controller": True}]
    assert pipeline.decide(parsed(review_of(owned)), context("eks")).warnings == ()
    owned["metadata"]["ownerReferences"][0]["controller"] = False  # merely owned: still previewed
    assert pipeline.decide(parsed(review_of(owned)), context("eks")).warnings


def test_a_translated_pod_says_what_was_changed_on_itself():
    import jsonpatch

    from tests.helpers import context, parsed, review_of
    from tests.translation_cases import pod
    from webhook.core.deciding import pipeline
    from webhook.core.deciding.context import REWRITES

    gke = pod({"nvidia.com/gpu": "1"}, {"cloud.google.com/gke-accelerator": "nvidia-l4"})
    decision = pipeline.decide(parsed(review_of(gke)), context("eks"))
    after = jsonpatch.apply_patch(gke, list(decision.patch))
    recorded = after["metadata"]["annotations"][REWRITES]
    # Whole on the pod; kubectl's warning lines are clipped at 120 characters, so they say it in brief.
    assert recorded.startswith(
        "node selector cloud.google.com/gke-accelerator=nvidia-l4 replaced by required node affinity "
        "node.kubernetes.io/instance-type in g6.xlarge|g6.2xlarge|"
    )
    assert decision.warnings[0] == (
        "gpuport: cloud.google.com/gke-accelerator → required affinity "
        "node.kubernetes.io/instance-type in 10 values"  # g6 and gr6 sizes; never cut mid-word
    )
    assert all(len(w) <= 120 for w in decision.warnings)
    native = pod({"nvidia.com/gpu": "1"})
    assert pipeline.decide(parsed(review_of(native)), context("eks")).patch == ()


def test_a_pod_cannot_bring_gpuport_s_record_of_rewrites_itself():
    import jsonpatch

    from tests.helpers import context, parsed, review_of
    from tests.translation_cases import pod
    from webhook.core.deciding import pipeline
    from webhook.core.deciding.context import REWRITES

    # A native pod, and one gpuport translates, each claiming a rewrite gpuport did not make: the
    # claim would become an Event in gpuport's name.
    forged = "node selector moved to the admin's reserved nodes"
    for written, target in (({}, "generic"), ({"cloud.google.com/gke-accelerator": "nvidia-l4"}, "eks")):
        sent = pod({"nvidia.com/gpu": "1"}, written)
        sent["metadata"]["annotations"] = {REWRITES: forged, "team": "vision"}
        decision = pipeline.decide(parsed(review_of(sent)), context(target))
        after = jsonpatch.apply_patch(sent, list(decision.patch))
        assert after["metadata"]["annotations"].get(REWRITES, "") != forged
        assert after["metadata"]["annotations"]["team"] == "vision"
