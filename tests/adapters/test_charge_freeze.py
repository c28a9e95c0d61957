"""A pod's charge annotations are kept as its create set them where there is a GPU budget: an update
that adds, lowers, raises or removes one is refused there (issue 45: four 0.9 shares under a quota of
1 once their annotations were removed after binding; whole 80 GB GPUs re-charged at a T4's memory once
`nvidia.com/use-gputype` was added), and passes where there is none."""

import copy
import json
from decimal import Decimal

import pytest

from tests.helpers import context, parsed, review_of
from tests.quota_fakes import FakeView
from tests.translation_cases import kai_pod, pod
from webhook.adapters.kube.charge_freeze import ChargeFreeze
from webhook.adapters.kube.limit_gate import LimitGate
from webhook.core.budget.frozen import changed_charge_annotations, charge_annotations
from webhook.core.budget.quota import Quota
from webhook.core.deciding import pipeline

CTX = context("generic")
GPU_QUOTA = Quota("gpus", {"requests.nvidia.com/gpu": Decimal(1)})
CPU_QUOTA = Quota("cpu", {"requests.cpu": Decimal(8)})


class View(FakeView):
    def __init__(self, quotas=(), limitranges=(), annotations=None):
        super().__init__(quotas=quotas)
        self.ranges = list(limitranges)
        self.annotations = dict(annotations or {})

    def limitranges_in(self, namespace):
        return self.ranges

    def namespace(self, namespace):
        return {"labels": {}, "annotations": self.annotations}


def update(before, after):
    review = review_of(after, operation="UPDATE", uid="update")
    review["request"]["oldObject"] = before
    return parsed(review)


def bound(body):
    body = copy.deepcopy(body)
    body["spec"]["nodeName"] = "gpu-node-1"
    return body


def validate(view, before, after):
    gates = pipeline.Gates(LimitGate(view), None, ChargeFreeze(view))
    return pipeline.validate(update(before, after), CTX, gates)


SHARE = bound(kai_pod({"gpu-fraction": "0.9"}))


def without(body, key):
    body = copy.deepcopy(body)
    body["metadata"]["annotations"].pop(key)
    return body


def annotated(body, **annotations):
    body = copy.deepcopy(body)
    body["metadata"].setdefault("annotations", {}).update(annotations)
    return body


GPU_RANGE = {
    "metadata": {"name": "caps"},
    "spec": {"limits": [{"type": "Pod", "max": {"nvidia.com/gpu": "8"}}]},
}


@pytest.mark.parametrize(
    "view",
    [View([GPU_QUOTA]), View(limitranges=[GPU_RANGE]), View(annotations={"gpuport.io/gpu-limits": "[]"})],
    ids=["gpu-quota", "gpu-limitrange", "gpuport-limits"],
)
def test_a_share_removed_or_lowered_after_binding_is_refused_in_a_budget_namespace(view):
    for after in (without(SHARE, "gpu-fraction"), annotated(SHARE, **{"gpu-fraction": "0.1"})):
        refused = validate(view, SHARE, after)
        assert (refused.allowed, refused.reason) == (False, "gpu-charge-frozen")
        assert refused.message.startswith('pods "work" is forbidden: namespace team-a has a GPU budget')
        assert "gpu-fraction" in refused.message and "delete the pod and create it again" in refused.message


def test_a_model_annotation_added_to_a_whole_gpu_pod_is_refused():
    whole = bound(pod({"nvidia.com/gpu": "8"}))
    after = annotated(whole, **{"nvidia.com/use-gputype": "Tesla-T4"})
    refused = validate(View([GPU_QUOTA]), whole, after)
    assert (refused.reason, "nvidia.com/use-gputype" in refused.message) == ("gpu-charge-frozen", True)


def test_other_updates_and_namespaces_without_a_budget_pass():
    assert validate(View([GPU_QUOTA]), SHARE, annotated(SHARE, team="a")).allowed  # not a charge key
    assert validate(View([CPU_QUOTA]), SHARE, without(SHARE, "gpu-fraction")).allowed  # no GPU budget
    assert validate(View(), SHARE, without(SHARE, "gpu-fraction")).allowed


def test_a_view_still_loading_refuses_in_words():
    view = View([GPU_QUOTA])
    view.listed.discard("limitranges")
    refused = validate(view, SHARE, without(SHARE, "gpu-fraction"))
    assert (refused.allowed, refused.reason) == (False, "charge-view-loading")


def test_the_changed_keys_are_every_loaded_maps_ask_annotations():
    keys = charge_annotations(CTX.dialects.maps)
    assert {"gpu-fraction", "gpu-memory", "nvidia.com/use-gputype"} <= keys
    before, after = SHARE, annotated(without(SHARE, "gpu-fraction"), **{"gpu-memory": "1024", "x": "y"})
    assert changed_charge_annotations(before, after, keys) == ("gpu-fraction", "gpu-memory")
    assert changed_charge_annotations({"metadata": None}, {}, keys) == ()


def test_a_gated_share_raised_past_a_per_pod_max_is_refused_by_the_limits():
    """Issue 45: a gated share raised from 0.1 to 0.9 × 8 passed a per-pod max of 0.5; the limits run
    on every update gpuport reviews, before the charge rule (the refusal names the limit)."""
    limits = json.dumps([{"type": "Pod", "max": "0.5"}])
    view = View(annotations={"gpuport.io/gpu-limits": limits})
    gated = kai_pod({"gpu-fraction": "0.1", "gpu-fraction-num-devices": "8"})
    gated["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
    raised = annotated(gated, **{"gpu-fraction": "0.9"})
    refused = validate(view, gated, raised)
    assert (refused.allowed, refused.reason) == (False, "gpu-limit")
    assert "maximum nvidia.com/gpu usage per Pod is 0.5, but limit is 7.2" in refused.message
    # The limits gate alone, as a server without the charge rule has it: the same refusal.
    alone = pipeline.validate(update(gated, raised), CTX, pipeline.Gates(LimitGate(view)))
    assert alone.reason == "gpu-limit"


def test_a_limit_the_pod_broke_before_the_update_is_not_the_updates_doing():
    limits = json.dumps([{"type": "Pod", "max": "0.5"}])
    view = View(annotations={"gpuport.io/gpu-limits": limits})
    big = kai_pod({"gpu-fraction": "0.9"})  # admitted before the limits were set
    deadline = copy.deepcopy(big)
    deadline["spec"]["activeDeadlineSeconds"] = 60
    assert pipeline.validate(update(big, deadline), CTX, pipeline.Gates(LimitGate(view))).allowed


def test_a_kai_per_container_memory_key_added_changed_or_removed_is_a_charge_change():
    # KAI's nvidia.com/container.<name>.gpu-memory.request / .limit are named by a pattern, not listed:
    # an update touching one changes what the container is charged, as gpu-fraction does.
    from webhook.core.budget.frozen import per_container_charge

    key = "nvidia.com/container.vllm.gpu-memory.limit"
    maps = context("kai").dialects.maps
    keys, per_container = charge_annotations(maps), per_container_charge(maps)
    with_key = {"metadata": {"annotations": {key: "40Gi"}}}
    raised = {"metadata": {"annotations": {key: "80Gi"}}}
    bare = {"metadata": {"annotations": {"team": "ml"}}}
    assert changed_charge_annotations(bare, with_key, keys, per_container) == (key,)
    assert changed_charge_annotations(with_key, raised, keys, per_container) == (key,)
    assert changed_charge_annotations(with_key, bare, keys, per_container) == (key,)
    assert changed_charge_annotations(with_key, with_key, keys, per_container) == ()
    # Only KAI's own pattern: a look-alike key is no charge.
    other = {"metadata": {"annotations": {"nvidia.com/container.vllm.note": "x"}}}
    assert changed_charge_annotations(bare, other, keys, per_container) == ()


def test_the_recorded_claim_template_uids_cannot_be_changed_where_there_is_a_budget():
    """Issue 45: gpuport.io/claim-templates names the templates a pod was charged; the claim gate holds
    its claims to them. An update may not add, change or remove it in a budget namespace."""
    key = "gpuport.io/claim-templates"
    pod = bound(kai_pod({"gpu-fraction": "0.5", key: '{"one": "uid-1"}'}))
    for after in (without(pod, key), annotated(pod, **{key: '{"one": "uid-2"}'})):
        refused = validate(View([GPU_QUOTA]), pod, after)
        assert (refused.allowed, refused.reason, key in refused.message) == (False, "gpu-charge-frozen", True)
    assert validate(View([CPU_QUOTA]), pod, without(pod, key)).allowed  # no GPU budget
