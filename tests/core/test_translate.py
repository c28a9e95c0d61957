"""Every dialect × every target map, checked field by field against hand-written expectations."""

import copy
import json
from dataclasses import replace

import jsonpatch
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.helpers import context, parsed, review_of
from tests.translation_cases import EXPECTED, EXPECTED_FOR_SOURCE, SOURCES, TARGETS, pod, summarize
from webhook.core.asks.demand import read_demand, read_selection
from webhook.core.deciding import pipeline
from webhook.core.rewriting.podedits import compact_json
from webhook.core.rewriting.translate import TRANSLATED_FROM

CONTEXTS = {name: context(name) for name in TARGETS}


def admit(obj, target, **map_overrides):
    ctx = CONTEXTS[target]
    if map_overrides:
        ctx = replace(ctx, target=replace(ctx.target, **map_overrides))
    return pipeline.decide(parsed(review_of(obj)), ctx), ctx


def translated(obj, target, **map_overrides):
    decision, ctx = admit(obj, target, **map_overrides)
    assert decision.allowed, decision.message
    return jsonpatch.apply_patch(obj, list(decision.patch)), decision, ctx


MATRIX = [(source, target) for source in SOURCES for target in TARGETS]
# What a native whole-GPU pod gains where the whole-GPU resource also names slices (GKE's partition
# and time-sharing pools), with no view of the nodes: the map says such nodes may exist.
WHOLE_ONLY = {
    "gke": [
        {"key": "cloud.google.com/gke-gpu-partition-size", "operator": "DoesNotExist"},
        {"key": "cloud.google.com/gke-gpu-sharing-strategy", "operator": "DoesNotExist"},
    ]
}


@pytest.mark.parametrize(("source", "target"), MATRIX, ids=[f"{s}->{t}" for s, t in MATRIX])
def test_dialect_to_target(source, target):
    ask_class, source_pod, native_on = SOURCES[source]
    expected = EXPECTED_FOR_SOURCE.get((source, target), EXPECTED[ask_class][target])
    decision, _ = admit(source_pod, target)
    if target in native_on:
        assert decision.allowed
        tolerations = [dict(t) for t in CONTEXTS[target].target.tolerations]
        whole_only = WHOLE_ONLY.get(target) if ask_class.startswith("W") else None
        if not tolerations and not whole_only:
            assert decision.patch == (), "a native pod must be left byte-for-byte alone"
            return
        # Only what it needs to schedule at all (the map's tolerations for its GPU nodes' taints), and
        # to get the whole GPUs it asks for where the same resource also names slices.
        expected = copy.deepcopy(source_pod)
        if tolerations:
            expected["spec"]["tolerations"] = tolerations
        if whole_only:
            terms = [{"matchExpressions": whole_only}]
            expected["spec"]["affinity"] = {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
                }
            }
        assert jsonpatch.apply_patch(source_pod, list(decision.patch)) == expected
        return
    if "denied" in expected:
        assert not decision.allowed
        assert expected["denied"] in decision.message
        return
    assert decision.allowed, decision.message
    result = jsonpatch.apply_patch(source_pod, list(decision.patch))
    assert summarize(result, decision.claim_templates) == expected
    assert TRANSLATED_FROM in result["metadata"]["annotations"]
    assert decision.warnings and all(w.startswith("gpuport: ") and len(w) <= 120 for w in decision.warnings)
    again, _ = admit(result, target)
    assert again.allowed and again.patch == (), "translation must be idempotent"


def canonical(obj, target="generic"):
    demand = read_demand(obj, CONTEXTS[target].dialects)
    return [(a.kind, a.count, a.profile, a.share) for a in demand.asks], demand.selection.models


@pytest.mark.parametrize(
    ("source", "kind", "count", "profile", "memory", "models"),
    [
        ("generic-whole", "whole", 1, None, None, {"A100-40GB"}),
        ("gke-whole", "whole", 1, None, None, {"A100-40GB"}),
        ("eks-whole", "whole", 1, None, None, {"A100-40GB"}),
        ("aks-whole", "whole", 1, None, None, {"A100-40GB"}),
        ("generic-8", "whole", 8, None, None, {"H100-80GB"}),
        ("generic-mig", "mig", 1, "1g.10gb", None, {"H100-80GB"}),
        ("mig-single", "mig", 1, "1g.10gb", None, {"H100-80GB"}),
        ("gke-mig", "mig", 1, "1g.10gb", None, {"H100-80GB"}),
        ("gke-shared", "shared", 1, None, None, None),
        ("ack-shared", "shared", 1, None, 8192, None),
        ("tke-shared", "shared", 1, None, 8192, None),
        ("cce-shared", "shared", 1, None, 8192, None),
        ("hami-shared", "shared", 1, None, 8192, None),
        ("volcano-shared", "shared", 1, None, 8192, None),
        ("koordinator-shared", "shared", 1, None, 8192, None),
    ],
)
def test_every_dialect_reads_into_the_same_canonical_demand(source, kind, count, profile, memory, models):
    asks, selected = canonical(SOURCES[source][1])
    ((ask_kind, ask_count, ask_profile, ask_share),) = asks
    assert (ask_kind, ask_count) == (kind, count)
    assert (ask_profile.name if ask_profile else None) == profile
    assert (ask_share.memory_mib if ask_share else None) == memory
    assert (set(selected) if selected is not None else None) == models


def test_gke_a100_to_eks_gives_the_a100_instance_type():
    source = pod(
        {"nvidia.com/gpu": "1"}, {"cloud.google.com/gke-accelerator": "nvidia-tesla-a100", "team": "a"}
    )
    result, decision, _ = translated(source, "eks")
    assert result["spec"]["nodeSelector"] == {"team": "a", "node.kubernetes.io/instance-type": "p4d.24xlarge"}
    assert result["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert result["metadata"]["annotations"][TRANSLATED_FROM] == (
        '{"containers[0]":{"nvidia.com/gpu":"1"},"nodeSelector":{"cloud.google.com/gke-accelerator":"nvidia-tesla-a100"}}'
    )
    assert decision.warnings == ("gpuport: node selector node.kubernetes.io/instance-type=p4d.24xlarge",)


A100_MIG = pod({"nvidia.com/mig-1g.5gb": "1"}, {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"})


def test_a100_slice_on_a_generic_h100_cluster_becomes_1g_10gb():
    result, decision, _ = translated(A100_MIG, "generic", offered_models=("H100-80GB",))
    assert result["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/mig-1g.10gb": "1"}
    assert decision.warnings[0] == (
        "gpuport: containers[0] nvidia.com/mig-1g.5gb: 1 → nvidia.com/mig-1g.10gb: 1 "
        "(H100-80GB has no 1g.5gb)"
    )


def test_a100_slice_on_gke_h100_uses_the_partition_size_and_accelerator_labels():
    result, _, _ = translated(A100_MIG, "gke", offered_models=("H100-80GB",))
    assert summarize(result)["resources"] == {"nvidia.com/gpu": "1"}
    assert summarize(result)["requires"] == {
        "cloud.google.com/gke-gpu-partition-size": ["1g.10gb"],
        "cloud.google.com/gke-accelerator": ["nvidia-h100-80gb", "nvidia-h100-mega-80gb"],
    }


def test_a100_slice_on_mig_single_uses_the_product_label_form():
    result, _, _ = translated(A100_MIG, "generic-mig-single", offered_models=("H100-80GB",))
    assert summarize(result)["requires"] == {
        "nvidia.com/gpu.product": ["NVIDIA-H100-80GB-HBM3-MIG-1g.10gb", "NVIDIA-H100-PCIe-MIG-1g.10gb"]
    }


def test_more_compute_than_asked_is_said_in_the_warning():
    source = pod({"nvidia.com/mig-2g.20gb": "1"})  # an H100-80GB profile; no model pinned
    result, decision, _ = translated(source, "generic", offered_models=("A100-40GB",))
    assert result["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/mig-3g.20gb": "1"}
    assert decision.warnings[0].endswith(
        "→ nvidia.com/mig-3g.20gb: 1 (A100-40GB has no 2g.20gb; more compute)"
    )


def test_a_slice_no_target_gpu_can_cover_is_denied_with_what_is_offered():
    source = pod({"nvidia.com/mig-7g.80gb": "1"})
    decision, _ = admit(source, "generic", offered_models=("A100-40GB",))
    assert not decision.allowed
    assert (
        "no generic GPU has a slice with ≥ 7g and ≥ 80gb (offered: 1g.5gb, 1g.5gb+me, 1g.10gb,"
        in decision.message
    )


def test_a_model_the_target_lacks_is_replaced_by_one_with_as_much_memory():
    source = pod({"nvidia.com/gpu": "2"}, {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"})
    result, decision, _ = translated(source, "eks", offered_models=("A10G", "H100-80GB"))
    # An inference T4 becomes an inference A10G, never the training H100; and only the sizes that
    # hold two GPUs.
    assert summarize(result)["requires"]["node.kubernetes.io/instance-type"] == [
        "g5.12xlarge",
        "g5.24xlarge",
        "g5.48xlarge",
    ]
    assert "gpuport: no T4 here: using A10G" in decision.warnings


def test_a_slice_goes_only_to_partition_sizes_the_platform_sells():
    # GKE partitions an A100 40GB as 1g.5gb, 2g.10gb, 3g.20gb and 7g.40gb: never 1g.10gb.
    # Unpinned, it goes to every GPU GKE cuts 1g.10gb from (A100 80GB and H100 80GB), not the first.
    translated_pod, decision, _ = translated(pod({"nvidia.com/mig-1g.10gb": "1"}), "gke")
    assert translated_pod["spec"]["nodeSelector"] == {"cloud.google.com/gke-gpu-partition-size": "1g.10gb"}
    [term] = translated_pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [
        {
            "key": "cloud.google.com/gke-accelerator",
            "operator": "In",
            "values": ["nvidia-a100-80gb", "nvidia-h100-80gb", "nvidia-h100-mega-80gb"],
        }
    ]
    pinned = pod({"nvidia.com/mig-1g.10gb": "1"}, {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"})
    translated_pod, decision, _ = translated(pinned, "gke")
    assert translated_pod["spec"]["nodeSelector"]["cloud.google.com/gke-gpu-partition-size"] == "2g.10gb"
    assert any("(A100-40GB has no 1g.10gb; more compute)" in w for w in decision.warnings)


def test_a_model_with_no_equivalent_is_denied_listing_the_offer():
    source = pod({"nvidia.com/gpu": "8"}, {"cloud.google.com/gke-accelerator": "nvidia-b200"})
    decision, _ = admit(source, "aks")
    assert decision.message == (
        'Pod "work" cannot run on this cluster (aks): asks for B200 (180 GB, training); aks offers no '
        "NVIDIA training GPU with at least 180 GB on x86-64 hosts (it offers A100-40GB (40 GB, training), "
        "A100-80GB (80 GB, training), H100-80GB (80 GB, training), H100-94GB (94 GB, training), "
        "H200 (141 GB, training), GB200 (186 GB, training, arm64), A10 (24 GB, inference), "
        "T4 (16 GB, inference))"
    )


def test_an_unknown_model_label_value_is_denied_not_guessed():
    source = pod({"nvidia.com/gpu": "1"}, {"cloud.google.com/gke-accelerator": "nvidia-tesla-k80"})
    decision, _ = admit(source, "eks")
    assert not decision.allowed
    assert (
        "names no GPU model gpuport knows: cloud.google.com/gke-accelerator in ['nvidia-tesla-k80']"
        in decision.message
    )


def requiring(*expressions):
    """A pod whose required node affinity has one term with these expressions."""
    source = pod({"nvidia.com/gpu": "1"})
    source["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": list(expressions)}]
            }
        }
    }
    return source


def gke_accelerator(*values):
    return {"key": "cloud.google.com/gke-accelerator", "operator": "In", "values": list(values)}


def test_required_affinity_in_a_foreign_dialect_is_rewritten_and_other_terms_kept():
    zone = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z1"]}
    result, _, _ = translated(
        requiring(gke_accelerator("nvidia-tesla-a100", "nvidia-a100-80gb"), zone), "eks"
    )
    (term,) = result["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert term["matchExpressions"] == [
        zone,
        {
            "key": "node.kubernetes.io/instance-type",
            "operator": "In",
            "values": ["p4d.24xlarge", "p4de.24xlarge"],
        },
    ]


def test_affinity_that_only_named_the_gpu_is_removed_whole():
    result, _, _ = translated(requiring(gke_accelerator("nvidia-tesla-a100")), "eks")
    assert "affinity" not in result["spec"]
    assert result["spec"]["nodeSelector"] == {"node.kubernetes.io/instance-type": "p4d.24xlarge"}


@pytest.mark.parametrize(("source", "target"), MATRIX, ids=[f"{s}->{t}" for s, t in MATRIX])
def test_fields_written_as_null_are_read_as_absent(source, target):
    # YAML's `tolerations:` with nothing under it; the API server itself omits empty fields.
    from webhook.core.rewriting.patch import EDITABLE_FIELDS

    plain = copy.deepcopy(SOURCES[source][1])
    nulled = copy.deepcopy(plain)
    for parent, key in EDITABLE_FIELDS:
        nulled[parent].setdefault(key, None)
    as_plain, _ = admit(plain, target)
    as_nulled, _ = admit(nulled, target)
    assert (as_nulled.allowed, as_nulled.message, as_nulled.warnings) == (
        as_plain.allowed,
        as_plain.message,
        as_plain.warnings,
    )
    if as_plain.allowed:
        result = jsonpatch.apply_patch(nulled, list(as_nulled.patch))
        for parent, key in EDITABLE_FIELDS:
            if result[parent].get(key, "") is None:
                del result[parent][key]  # left null where nothing was added
        assert result == jsonpatch.apply_patch(plain, list(as_plain.patch))


def test_tolerations_written_as_a_map_are_refused_by_name_where_they_must_be_added():
    source = pod({"nvidia.com/gpu": "1"}, {"cloud.google.com/gke-accelerator": "nvidia-tesla-a100"})
    source["spec"]["tolerations"] = {"key": "sku"}  # one toleration, not in a list
    decision, _ = admit(source, "aks")  # whose GPU nodes are tainted: a toleration must be added
    assert not decision.allowed and decision.reason == "untranslatable"
    assert decision.message.endswith(
        "cannot edit the pod: tolerations is a map; Kubernetes reads a list there"
    )
    assert admit(source, "generic")[0].allowed  # nothing to add there: not gpuport's to refuse


def test_init_containers_are_translated_too():
    source = pod({"nvidia.com/gpu.shared": "1"})
    source["spec"]["initContainers"] = [
        {
            "name": "warm",
            "image": "x",
            "resources": {
                "limits": {"nvidia.com/gpu.shared": "1"},
                "requests": {"nvidia.com/gpu.shared": "1"},
            },
        }
    ]
    result, _, _ = translated(source, "gke")
    assert result["spec"]["initContainers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}


def test_init_containers_run_one_at_a_time_so_the_node_holds_the_largest_ask_not_their_sum():
    source = pod({"nvidia.com/gpu": "1"}, {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"})
    source["spec"]["initContainers"] = [
        {"name": f"prep-{n}", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "4"}}}
        for n in range(2)
    ]
    result, _, _ = translated(source, "eks")
    (term,) = result["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    # 4 GPUs at a time: the 4-GPU instance type stays, the 1-GPU ones go.
    assert term["matchExpressions"][0]["values"] == ["g4dn.12xlarge", "g4dn.metal"]


def test_fractional_policy_mig_turns_half_an_a100_into_a_slice():
    source = pod({"nvidia.com/gpu": "500m"}, {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"})
    decision, _ = admit(source, "generic")
    assert decision.reason == "fractional-gpu"
    result, _, _ = translated(source, "generic", fractional_policy="mig")
    # Half of 7 slices and 40 GB: at least 4 slices and 20 GB → 4g.20gb.
    assert result["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/mig-4g.20gb": "1"}


def test_fractional_policy_shared_turns_half_a_gpu_into_a_shared_one():
    result, _, _ = translated(pod({"nvidia.com/gpu": "0.5"}), "generic", fractional_policy="shared")
    assert result["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu.shared": "1"}


def test_fractional_above_one_stays_denied_under_any_policy():
    decision, _ = admit(pod({"nvidia.com/gpu": "1.5"}), "generic", fractional_policy="shared")
    assert not decision.allowed


def test_mig_to_whole_gpu_only_by_policy():
    source = pod({"nvidia.com/mig-3g.40gb": "1"})
    denied, _ = admit(source, "oke")
    assert "oke offers no MIG slices" in denied.message
    result, decision, _ = translated(source, "oke", mig_to_whole="allow")
    assert result["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert "whole GPUs, by policy" in decision.warnings[0]


@pytest.mark.parametrize("source", ["gke-whole", "gke-8", "gke-mig", "gke-shared"])
def test_gke_to_eks_to_gke_keeps_the_meaning(source):
    original = SOURCES[source][1]
    on_eks, _, _ = translated(copy.deepcopy(original), "eks")
    back, _, _ = translated(on_eks, "gke")
    assert canonical(back, "gke") == canonical(original, "gke")


def test_templates_are_checked_but_never_translated_by_the_webhook():
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {"template": {"metadata": {}, "spec": SOURCES["gke-whole"][1]["spec"]}},
    }
    decision, _ = admit(deployment, "eks")
    assert decision.allowed and decision.patch == ()


def test_a_gpu_newer_than_the_catalogue_on_the_targets_own_label_is_left_alone():
    source = pod({"nvidia.com/gpu": "1"}, {"nvidia.com/gpu.product": "NVIDIA-B300"})
    decision, _ = admit(source, "generic")
    assert decision.allowed and decision.patch == ()


def test_a_resource_asked_as_zero_beside_the_ask_agrees_in_requests_and_limits():
    # Found by the patch property: an ACK memory share beside nvidia.com/gpu.shared: "0" (asking
    # nothing) became gpu.shared 1 in limits but stayed "0" in requests, a pod the API server refuses.
    resources = {"nvidia.com/gpu.shared": "0", "aliyun.com/gpu-mem": "1"}
    ack = pod(resources)
    ack["spec"]["containers"][0]["resources"]["requests"] = {"nvidia.com/gpu.shared": "0"}
    decision = pipeline.decide(parsed(review_of(ack)), context("generic"))
    assert decision.allowed, decision.message
    translated = jsonpatch.apply_patch(ack, list(decision.patch))["spec"]["containers"][0]["resources"]
    assert translated == {
        "limits": {"nvidia.com/gpu.shared": "1"},
        "requests": {"nvidia.com/gpu.shared": "1"},
    }


def test_made_up_label_values_and_resource_names_cannot_grow_the_remembered_meanings():
    from webhook.core.vocabulary.dialects import MEANINGS_KEPT, Dialects

    shipped = context("generic").dialects
    dialects = Dialects(shipped.maps, shipped.catalogue)  # a fresh context's, not the shared one's
    key = "cloud.google.com/gke-accelerator"
    for n in range(MEANINGS_KEPT + 500):
        assert dialects.label_meaning(key, f"made-up-{n}").models == frozenset()
        assert not dialects.resource_meaning(f"example.com/made-up-{n}").accelerator
        assert read_selection({"nodeSelector": {key: f"made-up-{n}"}}, dialects).unknown
    assert dialects.meanings_remembered() == 2 * MEANINGS_KEPT  # as many labels as resource names
    assert len(dialects.selections) == MEANINGS_KEPT
    # Past the bound, answers are still worked out, and still right.
    assert dialects.label_meaning(key, "nvidia-tesla-a100").models == {"A100-40GB"}
    assert dialects.resource_meaning("nvidia.com/mig-1g.10gb").kind == "mig"
    assert read_selection({"nodeSelector": {key: "nvidia-tesla-a100"}}, dialects).models == {"A100-40GB"}


def test_a_remembered_selection_is_the_one_read_afresh():
    # Every platform's selectors, as written and as translated to every target: the shared contexts
    # have remembered each; a new Dialects works each out again.
    from webhook.core.vocabulary.dialects import Dialects

    for source, target in MATRIX:
        decision, ctx = admit(SOURCES[source][1], target)
        fresh = Dialects(ctx.dialects.maps, ctx.dialects.catalogue)
        specs = [SOURCES[source][1]["spec"]]
        if decision.allowed:
            specs.append(jsonpatch.apply_patch(SOURCES[source][1], list(decision.patch))["spec"])
        for spec in specs:
            assert read_selection(spec, ctx.dialects) == read_selection(spec, fresh), (source, target)


ANNOTATION_JSON = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=6),  # any Unicode: json.dumps escapes past ASCII, orjson does not
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=10,
)


@settings(max_examples=400, deadline=None)
@given(value=ANNOTATION_JSON)
@example(value={"a": "\x7f"})  # DEL: ASCII, yet escaped by json.dumps
@example(value={"é": "ü"})
@example(value=[1e16, float("nan"), 2**70])
def test_the_translated_from_annotation_is_the_standard_librarys_text_exactly(value):
    # Written in C when it can be; never a different byte from what json.dumps wrote before.
    assert compact_json(value) == json.dumps(value, sort_keys=True, separators=(",", ":"))
