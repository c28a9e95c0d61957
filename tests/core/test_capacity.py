"""Capacity types (on-demand, spot, reserved) read in every cloud's words and written in the
target's, or refused: never dropped silently (webhook/core/rewriting/capacity.py)."""

import pytest

from tests.helpers import context
from webhook.core.rewriting.capacity import plan_capacity
from webhook.core.rewriting.podedits import AddTolerations, RequireExpression

DIALECTS = context("generic").dialects


def plan(target, *constraints):
    leaving = {key: values for key, _, values in constraints}
    return plan_capacity(constraints, leaving, context(target).target, DIALECTS)


def expressions(found):
    return [e.expression for e in found.edits if isinstance(e, RequireExpression)]


def tolerations(found):
    return [t for e in found.edits if isinstance(e, AddTolerations) for t in e.tolerations]


def test_karpenter_on_demand_on_gke_is_no_spot_or_preemptible_node():
    found = plan("gke", ("karpenter.sh/capacity-type", "In", ("on-demand",)))
    assert found.problems == [] and found.labels == {}
    assert expressions(found) == [
        {"key": "cloud.google.com/gke-spot", "operator": "NotIn", "values": ["true"]},
        {"key": "cloud.google.com/gke-preemptible", "operator": "NotIn", "values": ["true"]},
    ]
    assert tolerations(found) == []


def test_managed_node_group_on_demand_on_aks_is_no_spot_scale_set():
    found = plan("aks", ("eks.amazonaws.com/capacityType", "In", ("ON_DEMAND",)))
    assert expressions(found) == [
        {"key": "kubernetes.azure.com/scalesetpriority", "operator": "NotIn", "values": ["spot"]}
    ]
    assert tolerations(found) == []  # on-demand nodes carry no spot taint


@pytest.mark.parametrize(
    ("constraint", "excluded"),
    [
        (("kubernetes.azure.com/scalesetpriority", "NotIn", ("spot",)), {"spot"}),
        (("kubernetes.azure.com/scalesetpriority", "DoesNotExist", ()), {"spot"}),
        (("cloud.google.com/gke-spot", "In", ("true",)), {"on-demand", "reserved"}),
    ],
)
def test_aks_and_gke_capacity_is_said_on_both_eks_provisioners_labels(constraint, excluded):
    # An EKS cluster's nodes come from managed node groups, Karpenter or both, each with its own key;
    # an In on one would leave the pod Pending on the other's nodes (Karpenter refuses an In on a key
    # it does not set), so what is not admitted is excluded on both.
    found = plan("eks", constraint)
    assert found.problems == [] and found.labels == {}
    words = {
        "eks.amazonaws.com/capacityType": {
            "on-demand": "ON_DEMAND",
            "reserved": "CAPACITY_BLOCK",
            "spot": "SPOT",
        },
        "karpenter.sh/capacity-type": {"on-demand": "on-demand", "reserved": "reserved", "spot": "spot"},
    }
    assert expressions(found) == [
        {"key": key, "operator": "NotIn", "values": [said[c] for c in sorted(excluded)]}
        for key, said in words.items()
    ]
    assert tolerations(found) == []


def test_spot_on_eks_is_admitted_by_each_provisioner_s_spot_nodes_and_no_other():
    found = plan("eks", ("cloud.google.com/gke-spot", "In", ("true",)))

    def admits(node_labels):
        return all(node_labels.get(e["key"]) not in e["values"] for e in expressions(found))

    assert admits({"karpenter.sh/capacity-type": "spot"})
    assert admits({"eks.amazonaws.com/capacityType": "SPOT"})
    for on_demand in (
        {"karpenter.sh/capacity-type": "on-demand"},
        {"eks.amazonaws.com/capacityType": "ON_DEMAND"},
    ):
        assert not admits(on_demand)
    for reserved in (
        {"karpenter.sh/capacity-type": "reserved"},
        {"eks.amazonaws.com/capacityType": "CAPACITY_BLOCK"},
    ):
        assert not admits(reserved)


def test_spot_on_aks_brings_the_spot_taint_s_toleration():
    found = plan("aks", ("karpenter.sh/capacity-type", "In", ("spot",)))
    assert found.labels == {"kubernetes.azure.com/scalesetpriority": ("spot",)}
    assert tolerations(found) == [
        {
            "key": "kubernetes.azure.com/scalesetpriority",
            "operator": "Equal",
            "value": "spot",
            "effect": "NoSchedule",
        }
    ]


@pytest.mark.parametrize("target", ["gke", "aks"])
@pytest.mark.parametrize(
    "constraint",
    [
        ("karpenter.sh/capacity-type", "In", ("reserved",)),
        ("eks.amazonaws.com/capacityType", "In", ("CAPACITY_BLOCK",)),
    ],
)
def test_reserved_capacity_is_refused_where_the_target_has_no_word_for_it(target, constraint):
    found = plan(target, constraint)
    assert found.labels == {} and found.edits == []
    (problem,) = found.problems
    assert problem.startswith(
        f"asks for reserved capacity ({constraint[0]}={constraint[2][0]}); {target} has no word"
    )
    assert "on-demand: nodes without" in problem and "spot:" in problem


def test_either_of_what_the_target_offers_needs_no_selector_but_spot_s_toleration():
    found = plan("aks", ("karpenter.sh/capacity-type", "In", ("on-demand", "spot")))
    assert found.problems == [] and found.labels == {} and expressions(found) == []
    assert tolerations(found)  # it may land on spot nodes, which AKS taints
    assert any("removed: any aks node gives on-demand or spot" in getattr(e, "text", "") for e in found.edits)


def test_a_map_naming_no_capacity_type_says_the_selector_goes():
    found = plan("volcano", ("karpenter.sh/capacity-type", "In", ("on-demand",)))
    assert found.problems == [] and found.labels == {}
    assert [e.text for e in found.edits] == [
        "gpuport: capacity requirement karpenter.sh/capacity-type removed: the volcano map names no "
        "capacity type"
    ]
