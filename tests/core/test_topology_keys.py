"""Topology keys only the old cloud's nodes carry, in /mutate's decision on a pod
(webhook/core/rewriting/topology_keys.py): renamed to the target's key of the same role, removed with
a warning where the scheduler would ignore them or filter every node out, refused where they keep a
job's pods together. Pod shapes: tests/manifests/topology/README.md."""

import jsonpatch
import pytest

from tests.helpers import context, parsed, review_of
from webhook.core.deciding import pipeline

NODEPOOL = "cloud.google.com/gke-nodepool"
EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"


def gke_pod(affinity=None, spread=None, annotations=None):
    spec = {
        "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"},
        "containers": [{"name": "trainer", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "8"}}}],
    }
    if affinity:
        spec["affinity"] = affinity
    if spread:
        spec["topologySpreadConstraints"] = spread
    metadata = {"name": "trainer-0", "labels": {"job": "llama"}}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def together(key, kind="podAffinity", required=True):
    term = {"labelSelector": {"matchLabels": {"job": "llama"}}, "topologyKey": key}
    if required:
        return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    return {
        kind: {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "podAffinityTerm": term}]}
    }


def spread(key, when="DoNotSchedule"):
    selector = {"matchLabels": {"job": "llama"}}
    return [{"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": when, "labelSelector": selector}]


def decide(pod, target):
    decision = pipeline.decide(parsed(review_of(pod)), context(target))
    patched = jsonpatch.apply_patch(pod, list(decision.patch)) if decision.allowed else None
    return decision, patched


@pytest.mark.parametrize(
    "target, key", [("eks", "eks.amazonaws.com/nodegroup"), ("aks", "kubernetes.azure.com/agentpool")]
)
def test_a_required_pod_affinity_on_gke_s_node_pool_becomes_the_target_s_node_pool(target, key):
    decision, pod = decide(gke_pod(affinity=together(NODEPOOL)), target)
    assert decision.allowed
    terms = pod["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert [t["topologyKey"] for t in terms] == [key]
    assert f"gpuport: topology key {NODEPOOL} → {key} (node pool)" in decision.warnings


def test_jobset_s_exclusive_placement_on_a_pod_is_moved_to_the_target_s_node_pool():
    # JobSet copies the annotation to its pods, and its pod webhook turns it into pod affinity.
    decision, pod = decide(gke_pod(annotations={EXCLUSIVE: NODEPOOL}), "eks")
    assert decision.allowed
    assert pod["metadata"]["annotations"][EXCLUSIVE] == "eks.amazonaws.com/nodegroup"


def test_a_required_co_location_with_no_equivalent_is_refused_naming_the_fix():
    decision, _ = decide(gke_pod(affinity=together("cloud.google.com/gce-topology-subblock")), "aks")
    assert not decision.allowed
    assert decision.message == (
        'Pod "trainer-0" cannot run on this cluster (aks): keeps its pods together on one '
        "cloud.google.com/gce-topology-subblock (gke's sub-block; podAffinity required); no aks node carries "
        "it and the aks map names no equivalent: write a topology key its nodes carry "
        "(topology.kubernetes.io/zone, kubernetes.azure.com/agentpool, kubernetes.io/hostname) or add "
        "topology_labels.subblock to the aks map"
    )


def test_a_host_the_target_does_not_label_is_its_node_said_tighter_together_and_looser_apart():
    # GKE's physical host; EKS labels none (an instance is the node). Together on one host is together
    # on one node there (tighter: a group that fits no one node waits); apart by host is apart by node
    # (looser: two VMs may share a host), which keeps more than no key (the anti-affinity ignored).
    host = "cloud.google.com/gce-topology-host"
    affinity = {**together(host), **together(host, "podAntiAffinity")}
    decision, pod = decide(gke_pod(affinity=affinity, spread=spread(host)), "eks")
    assert decision.allowed
    required = "requiredDuringSchedulingIgnoredDuringExecution"
    assert pod["spec"]["affinity"]["podAffinity"][required][0]["topologyKey"] == "kubernetes.io/hostname"
    assert pod["spec"]["affinity"]["podAntiAffinity"][required][0]["topologyKey"] == "kubernetes.io/hostname"
    assert pod["spec"]["topologySpreadConstraints"][0]["topologyKey"] == "kubernetes.io/hostname"
    assert [w for w in decision.warnings if host in w] == [
        f"gpuport: topology key {host} → kubernetes.io/hostname: together on one node, not host",
        f"gpuport: topology key {host} → kubernetes.io/hostname: apart by node, not host",
    ]


def test_an_exclusive_placement_the_target_cannot_say_is_refused():
    decision, _ = decide(gke_pod(annotations={EXCLUSIVE: NODEPOOL}), "generic")
    assert not decision.allowed
    assert f"keeps its pods together on one {NODEPOOL} (gke's node pool; annotation {EXCLUSIVE})" in (
        decision.message
    )


def test_a_do_not_schedule_spread_on_gke_s_block_becomes_eks_s_layer_and_is_removed_on_aks():
    block = "cloud.google.com/gce-topology-block"
    decision, pod = decide(gke_pod(spread=spread(block)), "eks")
    assert decision.allowed
    assert (
        pod["spec"]["topologySpreadConstraints"][0]["topologyKey"] == "topology.k8s.aws/network-node-layer-2"
    )
    decision, pod = decide(gke_pod(spread=spread(block)), "aks")
    assert decision.allowed
    assert "topologySpreadConstraints" not in pod["spec"]
    assert f"gpuport: spread on {block} removed: no aks node has it, else Pending" in decision.warnings


def test_a_required_anti_affinity_and_preferred_terms_without_equivalent_are_removed_and_said():
    block = "cloud.google.com/gce-topology-block"
    affinity = {**together(block, "podAntiAffinity"), **together(block, required=False)}
    affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"].append(
        {"labelSelector": {"matchLabels": {"job": "llama"}}, "topologyKey": "kubernetes.io/hostname"}
    )
    decision, pod = decide(gke_pod(affinity=affinity), "aks")
    assert decision.allowed
    # The hostname term is every node's: kept. The block terms are gone, each said.
    assert pod["spec"]["affinity"] == {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"job": "llama"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    said = [w for w in decision.warnings if block in w]
    assert said == [
        f"gpuport: preferred affinity on {block} removed: no aks node has it, it only scored",
        f"gpuport: anti-affinity on {block} removed: no aks node has it",
    ]


def test_a_host_term_that_becomes_the_author_s_own_hostname_term_is_written_once():
    host = "cloud.google.com/gce-topology-host"
    affinity = together(host, "podAntiAffinity")
    terms = affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    terms.append(
        {"labelSelector": {"matchLabels": {"job": "llama"}}, "topologyKey": "kubernetes.io/hostname"}
    )
    terms.append(
        {"labelSelector": {"matchLabels": {"job": "other"}}, "topologyKey": "kubernetes.io/hostname"}
    )
    decision, pod = decide(gke_pod(affinity=affinity), "eks")
    assert decision.allowed
    kept = pod["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert kept == [
        {"labelSelector": {"matchLabels": {"job": "llama"}}, "topologyKey": "kubernetes.io/hostname"},
        {"labelSelector": {"matchLabels": {"job": "other"}}, "topologyKey": "kubernetes.io/hostname"},
    ]


def test_keys_every_node_carries_and_the_target_s_own_keys_are_untouched():
    affinity = together("topology.kubernetes.io/zone")
    affinity.update(together("kubernetes.io/hostname", "podAntiAffinity"))
    pod = gke_pod(affinity=affinity, spread=spread("rack.example.com/id"))
    decision, patched = decide(pod, "eks")
    assert decision.allowed
    assert patched["spec"]["affinity"] == pod["spec"]["affinity"]
    assert patched["spec"]["topologySpreadConstraints"] == pod["spec"]["topologySpreadConstraints"]
    assert not any("topology key" in w for w in decision.warnings)


def test_a_gke_pod_on_gke_keeps_its_keys_as_written():
    pod = gke_pod(affinity=together(NODEPOOL), annotations={EXCLUSIVE: NODEPOOL})
    decision, patched = decide(pod, "gke")
    assert decision.allowed
    assert patched["spec"]["affinity"]["podAffinity"] == pod["spec"]["affinity"]["podAffinity"]
    assert patched["metadata"]["annotations"] == pod["metadata"]["annotations"]


def test_an_eks_native_pod_with_gke_s_node_pool_key_is_translated_too():
    # nvidia.com/gpu on an EKS instance type is EKS's own words; only the topology key is GKE's.
    pod = gke_pod(affinity=together(NODEPOOL))
    pod["spec"]["nodeSelector"] = {"node.kubernetes.io/instance-type": "p5.48xlarge"}
    decision, patched = decide(pod, "eks")
    assert decision.allowed
    terms = patched["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms[0]["topologyKey"] == "eks.amazonaws.com/nodegroup"


def test_gke_s_network_annotations_and_hami_s_gpu_pins_are_said_where_nothing_reads_them():
    annotations = {
        "networking.gke.io/default-interface": "eth0",
        "networking.gke.io/interfaces": '[{"interfaceName":"eth0","network":"default"}]',
        "nvidia.com/use-gpuuuid": "GPU-7a1bc2de-0f3e-4c55-9b2a-1d2e3f4a5b6c",
    }
    decision, pod = decide(gke_pod(annotations=annotations), "generic")
    assert decision.allowed
    assert all(pod["metadata"]["annotations"][k] == v for k, v in annotations.items())  # kept
    said = [w for w in decision.warnings if w.startswith("gpuport: annotation")]
    assert said == [
        "gpuport: annotation networking.gke.io/interfaces kept, inert: GKE's extra NICs: none on generic",
        "gpuport: annotation networking.gke.io/default-interface kept, inert: GKE's multi-networking: not on "
        "generic",
        "gpuport: annotation nvidia.com/use-gpuuuid kept, inert: HAMi's pin to the old cluster's GPUs",
    ]
    decision, _ = decide(gke_pod(annotations=annotations), "gke")
    assert not any(w.startswith("gpuport: annotation networking") for w in decision.warnings)


def test_a_pod_that_asks_for_no_gpu_keeps_its_topology_keys_untouched_and_is_never_refused():
    # A CPU pod's required co-location on GKE's blocks is none of gpuport's business on AKS: it passes
    # as written (it was refused as a GPU job would be).
    cpu = gke_pod(affinity=together("cloud.google.com/gce-topology-block"))
    cpu["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "2"}}
    del cpu["spec"]["nodeSelector"]
    decision = pipeline.decide(parsed(review_of(cpu)), context("aks"))
    assert decision.allowed and decision.patch == () and decision.warnings == ()


def test_an_exclusive_placement_on_a_karpenter_node_pool_becomes_the_target_s_node_pool():
    # EKS nodes made by Karpenter carry karpenter.sh/nodepool, read as the eks map's node pool.
    pod = gke_pod(annotations={EXCLUSIVE: "karpenter.sh/nodepool"})
    pod["spec"]["nodeSelector"] = {"node.kubernetes.io/instance-type": "p5.48xlarge"}
    decision, patched = decide(pod, "gke")
    assert decision.allowed
    assert patched["metadata"]["annotations"][EXCLUSIVE] == NODEPOOL
    decision, patched = decide(pod, "eks")
    assert decision.allowed
    assert patched["metadata"]["annotations"][EXCLUSIVE] == "karpenter.sh/nodepool"


def test_terms_removed_beside_ones_kept_and_a_node_affinity_added_patch_to_exactly_that():
    # The topology edit runs after the translation's node affinity and before the record of the
    # original (admission.py splices it there): the patch must remove the right list items, keep the
    # others in order, keep the added node affinity, and say the removed keys in the record.
    block = "cloud.google.com/gce-topology-block"
    selector = {"matchLabels": {"job": "llama"}}
    affinity = together(block, "podAntiAffinity")
    affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"].append(
        {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}
    )
    spreads = [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": selector,
        },
        *spread(block),
        {
            "maxSkew": 2,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": selector,
        },
    ]
    pod = gke_pod(affinity=affinity, spread=spreads)
    pod["spec"]["nodeSelector"] = {"cloud.google.com/gke-accelerator": "nvidia-l4"}
    pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "1"
    decision, patched = decide(pod, "aks")
    assert decision.allowed
    spec = patched["spec"]
    assert spec["affinity"]["podAntiAffinity"] == {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}
        ]
    }
    assert "nodeAffinity" in spec["affinity"]  # the A10 sizes, added by the translation
    assert [c["topologyKey"] for c in spec["topologySpreadConstraints"]] == [
        "topology.kubernetes.io/zone",
        "kubernetes.io/hostname",
    ]
    assert (
        f'"topologyKeys":{{"{block}":null}}'
        in patched["metadata"]["annotations"]["gpuport.io/translated-from"]
    )
    again, _ = decide(patched, "aks")
    assert again.allowed and not again.patch  # its own output changes nothing


def jobset_pod(index="0"):
    """A pod as JobSet's controller makes it from tests/manifests/topology/gke-jobset-exclusive-nodepool.yaml
    (labelAndAnnotateObject: the JobSet's name, replicated job and job key as labels and annotations,
    the exclusive-placement annotation copied; the Job controller's completion index)."""
    pod = gke_pod(annotations={EXCLUSIVE: NODEPOOL})
    pod["metadata"]["generateName"] = "llama-pretrain-workers-0-0-"
    del pod["metadata"]["name"]
    names = {
        "jobset.sigs.k8s.io/jobset-name": "llama-pretrain",
        "jobset.sigs.k8s.io/replicatedjob-name": "workers",
        "jobset.sigs.k8s.io/job-index": "0",
        "jobset.sigs.k8s.io/job-key": "5f8a2c",
    }
    pod["metadata"]["labels"].update(names)
    pod["metadata"]["annotations"].update(names)
    pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] = index
    return pod


@pytest.mark.parametrize("index", ["0", "1"])
def test_a_jobset_pod_refused_for_its_exclusive_placement_names_the_jobset_to_fix(index):
    # JobSet is no kind gpuport registers: its pods are where the webhook sees the placement, and the
    # pod only copies the annotation. The fix named is the JobSet's, as `translate` names it there.
    decision, _ = decide(jobset_pod(index), "generic")
    assert not decision.allowed
    assert decision.message.endswith(
        "keeps its pods together on one cloud.google.com/gke-nodepool (gke's node pool; annotation "
        "alpha.jobset.sigs.k8s.io/exclusive-topology, copied from JobSet llama-pretrain); no generic node "
        "carries it and the generic map names no equivalent: set JobSet llama-pretrain's "
        "alpha.jobset.sigs.k8s.io/exclusive-topology to a topology key its nodes carry "
        "(kubernetes.io/hostname) or add topology_labels.nodepool to the generic map"
    )


def test_a_jobset_pod_s_exclusive_placement_moved_says_it_is_the_jobset_s():
    decision, pod = decide(jobset_pod(), "eks")
    assert decision.allowed
    assert pod["metadata"]["annotations"][EXCLUSIVE] == "eks.amazonaws.com/nodegroup"
    # In full on the pod (gpuport.io/rewrites) and in its Event; kubectl's line keeps the beginning.
    assert (
        f"topology key {NODEPOOL} → eks.amazonaws.com/nodegroup (node pool; JobSet llama-pretrain's "
        "exclusive placement)"
    ) in pod["metadata"]["annotations"]["gpuport.io/rewrites"]


def test_the_pods_of_two_jobsets_alike_but_for_the_name_are_not_answered_from_one_memo_entry():
    # A replica is answered from the memo by the fields its decision reads; the JobSet's name is one.
    from webhook.core.deciding.decision_key import decision_key

    other = jobset_pod()
    other["metadata"]["annotations"]["jobset.sigs.k8s.io/jobset-name"] = "mixtral-pretrain"
    keys = context("generic").metadata_keys
    assert decision_key(parsed(review_of(jobset_pod())), keys) != decision_key(parsed(review_of(other)), keys)


LWS_EXCLUSIVE = "leaderworkerset.sigs.k8s.io/exclusive-topology"


def lws_pod(name="vllm-405b"):
    """A worker pod as LeaderWorkerSet's controller makes it from tests/manifests/audit/lws-eks-p5.yaml's
    shape, on GKE (a worker StatefulSet's pod: the LWS's name, group index and worker index as labels, the
    group's exclusive-placement annotation copied, lws.sigs.k8s.io "Labels, Annotations and Environment
    Variables")."""
    pod = gke_pod(annotations={LWS_EXCLUSIVE: NODEPOOL, "leaderworkerset.sigs.k8s.io/size": "2"})
    pod["metadata"]["name"] = f"{name}-0-1"
    pod["metadata"]["labels"].update(
        {
            "leaderworkerset.sigs.k8s.io/name": name,
            "leaderworkerset.sigs.k8s.io/group-index": "0",
            "leaderworkerset.sigs.k8s.io/worker-index": "1",
        }
    )
    return pod


def test_a_leaderworkerset_pod_refused_for_its_exclusive_placement_names_the_leaderworkerset_to_fix():
    # Its pods are a StatefulSet's: the refusal shows in that StatefulSet's events, and the fix is the
    # LeaderWorkerSet's annotation, which the pod only copies.
    decision, _ = decide(lws_pod(), "generic")
    assert not decision.allowed
    assert (
        f"annotation {LWS_EXCLUSIVE}, copied from LeaderWorkerSet vllm-405b); no generic node carries it"
    ) in decision.message
    assert f"set LeaderWorkerSet vllm-405b's {LWS_EXCLUSIVE} to a topology key its nodes carry" in (
        decision.message
    )


def test_a_leaderworkerset_pod_s_exclusive_placement_moved_says_it_is_the_leaderworkerset_s():
    decision, pod = decide(lws_pod(), "eks")
    assert decision.allowed
    assert pod["metadata"]["annotations"][LWS_EXCLUSIVE] == "eks.amazonaws.com/nodegroup"
    assert (
        f"topology key {NODEPOOL} → eks.amazonaws.com/nodegroup (node pool; LeaderWorkerSet vllm-405b's "
        "exclusive placement)"
    ) in pod["metadata"]["annotations"]["gpuport.io/rewrites"]


def test_a_pod_naming_a_leaderworkerset_without_its_annotation_is_not_said_to_copy_it():
    # The label alone: the key is the pod's own (its affinity), the fix the pod's.
    pod = lws_pod()
    del pod["metadata"]["annotations"][LWS_EXCLUSIVE]
    pod["spec"]["affinity"] = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": NODEPOOL}
            ]
        }
    }
    decision, _ = decide(pod, "generic")
    assert not decision.allowed
    assert "LeaderWorkerSet" not in decision.message
    assert "write a topology key its nodes carry" in decision.message


def test_the_pods_of_two_leaderworkersets_alike_but_for_the_name_are_not_answered_from_one_memo_entry():
    from webhook.core.deciding.decision_key import decision_key

    keys = context("generic").metadata_keys
    first, other = lws_pod(), lws_pod("mixtral")
    first["metadata"]["name"] = other["metadata"]["name"] = "group-0-1"  # only the LWS label differs
    assert decision_key(parsed(review_of(first)), keys) != decision_key(parsed(review_of(other)), keys)


def kai_pod():
    """A pod no controller owns, for KAI Scheduler (its pod grouper reads the pod's own annotations then),
    placed within one GKE block (KAI's docs/topology)."""
    pod = gke_pod(
        annotations={
            "kai.scheduler/topology": "gke-a3-ultra",
            "kai.scheduler/topology-required-placement": "cloud.google.com/gce-topology-block",
        }
    )
    pod["spec"]["schedulerName"] = "kai-scheduler"
    return pod


def test_a_kai_pod_whose_required_level_no_node_carries_is_refused_through_the_webhook():
    decision, _ = decide(kai_pod(), "kai")
    assert not decision.allowed
    assert (
        "keeps its pods together on one cloud.google.com/gce-topology-block (gke's block; annotation "
        "kai.scheduler/topology-required-placement); no kai node carries it"
    ) in decision.message


def test_a_kai_pod_moved_where_no_kai_runs_loses_its_placement_annotations_said():
    decision, pod = decide(kai_pod(), "generic")
    assert decision.allowed
    annotations = pod["metadata"].get("annotations", {})
    assert "kai.scheduler/topology-required-placement" not in annotations
    assert "kai.scheduler/topology" not in annotations
    said = "annotation kai.scheduler/topology-required-placement removed: generic does not run KAI Scheduler"
    assert f"gpuport: {said}" in decision.warnings  # kubectl's line, brief
    # In full on the pod: the fix for a cluster that does run it.
    assert (
        f"{said} (a cluster that does lists kai-scheduler in its map's other_schedulers)"
        in (pod["metadata"]["annotations"]["gpuport.io/rewrites"])
    )


def test_two_kai_pods_naming_other_topologies_are_not_answered_from_one_memo_entry():
    # The Topology's name is in what the decision says (and removes): it is in the memo key.
    from webhook.core.deciding.decision_key import decision_key

    other = kai_pod()
    other["metadata"]["annotations"]["kai.scheduler/topology"] = "other-topology"
    keys = context("generic").metadata_keys
    assert decision_key(parsed(review_of(kai_pod())), keys) != decision_key(parsed(review_of(other)), keys)
