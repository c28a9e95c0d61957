"""Planned edits: the rewriting steps plan them without touching the pod, and apply_edits makes them,
in order, saying only those that changed something."""

import copy

from tests.helpers import context
from tests.translation_cases import SOURCES, TARGETS
from webhook.core.asks.demand import read_demand
from webhook.core.rewriting.foreign import is_native, read_foreign
from webhook.core.rewriting.podedits import (
    AddTolerations,
    DropAnnotation,
    DropSelectors,
    RecordOriginal,
    RequireExpression,
    RequireLabel,
    Say,
    SetAnnotation,
    apply_edits,
)
from webhook.core.rewriting.translate import Untranslatable, translate_pod
from webhook.core.vocabulary.workloads import read_pod

TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def view(spec=None, annotations=None):
    return {"metadata": {"annotations": dict(annotations or {})}, "spec": copy.deepcopy(spec or {})}


def test_an_edit_the_pod_already_says_changes_nothing_and_says_nothing():
    whole = {"key": "cloud.google.com/gke-gpu-partition-size", "operator": "DoesNotExist"}
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [whole]}]
            }
        }
    }
    pod = view(
        {"nodeSelector": {"zone": "a"}, "tolerations": [TOLERATION], "affinity": affinity}, {"team": "ml"}
    )
    before = copy.deepcopy(pod)
    said = apply_edits(
        pod,
        [
            RequireLabel("zone", ("a",), "gpuport: zone=a"),
            RequireExpression(whole, "gpuport: whole GPUs only"),
            SetAnnotation("team", "ml", "gpuport: team=ml"),
            AddTolerations([TOLERATION]),
        ],
    )
    assert said == []
    assert pod == before


def test_edits_are_made_and_said_in_the_order_planned():
    pod = view()
    said = apply_edits(
        pod,
        [
            Say("gpuport: first"),
            RequireLabel("zone", ("a",), "gpuport: zone=a"),
            AddTolerations([TOLERATION]),
            RequireLabel("rack", ("r1",)),  # planned without words: made, not said
            Say("gpuport: last"),
        ],
    )
    assert said == [
        "gpuport: first",
        "gpuport: zone=a",
        "gpuport: toleration nvidia.com/gpu added",
        "gpuport: last",
    ]
    assert pod["spec"] == {"nodeSelector": {"zone": "a", "rack": "r1"}, "tolerations": [TOLERATION]}


def test_the_record_holds_what_was_written_and_what_the_edits_before_it_took():
    pod = view(
        {"nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-tesla-a100", "zone": "a"}}, {"old": "x"}
    )
    apply_edits(
        pod,
        [
            DropSelectors(frozenset({"cloud.google.com/gke-accelerator"})),
            DropAnnotation("old", "gpuport: annotation old removed"),
            RecordOriginal("gpuport.io/translated-from", {"containers[0]": {"nvidia.com/gpu": "1"}}),
        ],
    )
    assert pod["spec"] == {"nodeSelector": {"zone": "a"}}
    assert pod["metadata"]["annotations"] == {
        "gpuport.io/translated-from": '{"annotations":{"old":"x"},"containers[0]":{"nvidia.com/gpu":"1"},'
        '"nodeSelector":{"cloud.google.com/gke-accelerator":"nvidia-tesla-a100"}}'
    }


def test_translating_plans_edits_and_never_touches_the_pod():
    planned = 0
    for source, target in ((s, t) for s in SOURCES for t in TARGETS):
        ctx = context(target)
        obj = copy.deepcopy(SOURCES[source][1])
        before = copy.deepcopy(obj)
        demand = read_demand(read_pod(obj), ctx.dialects)
        foreign = read_foreign(obj["spec"], demand, ctx.as_declared, ctx.dialects)
        if not demand.asks or is_native(demand, ctx.as_declared, ctx.dialects, foreign):
            continue
        try:
            edits, _ = translate_pod(obj["spec"], demand, ctx.target, ctx.dialects, ctx.as_declared, foreign)
        except Untranslatable:
            assert obj == before, f"{source} -> {target}"
            continue
        assert obj == before, f"{source} -> {target}"
        assert isinstance(edits[-1], RecordOriginal)
        planned += 1
    assert planned > len(SOURCES)  # most pairs translate: the loop above checked something
