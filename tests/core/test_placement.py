"""Topology and NUMA hints from node-agent records, inventory-aware translation, and `gpuport explain`."""

import copy
import tempfile
from dataclasses import replace
from pathlib import Path

import jsonpatch
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core.test_properties import pods as random_pods
from tests.helpers import context, parsed, review_of
from tests.inventories import agent_node, mixed_cluster, write_inventory
from tests.translation_cases import SOURCES, pod
from webhook.config.cloudmap import default_directory
from webhook.config.loading import build_context
from webhook.core.deciding import pipeline
from webhook.core.rewriting.placement import NUMA_HINT, PlacementHints, cost_table, node_classes
from webhook.core.vocabulary.inventory import parse_inventory

CATALOGUE = context().dialects.catalogue


def admit(obj, ctx):
    decision = pipeline.decide(parsed(review_of(obj)), ctx)
    assert decision.allowed, decision.message
    return jsonpatch.apply_patch(obj, list(decision.patch)), decision


def test_node_classes_and_cost_table(tmp_path):
    inventory = parse_inventory(list(yaml.safe_load_all(mixed_cluster(tmp_path).read_text())))
    classes = node_classes(inventory)
    assert [(c.model, c.nvlink_domain_size, c.gpus_per_numa_node, c.nodes) for c in classes] == [
        ("A100-40GB", 0, 4, ("a100-a",)),
        ("H100-80GB", 8, 4, ("h100-a", "h100-b")),
    ]
    rows = cost_table(classes, 8)
    assert [(r.node_class.model, r.cost) for r in rows] == [("H100-80GB", 28), ("A100-40GB", 96)]


def test_an_8_gpu_pod_is_steered_to_the_nvswitch_class(tmp_path):
    ctx = build_context(default_directory(), "generic", mixed_cluster(tmp_path))
    result, decision = admit(pod({"nvidia.com/gpu": "8"}), ctx)
    preferred = result["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert preferred == [
        {
            "weight": 100,
            "preference": {
                "matchExpressions": [
                    {"key": "gpuport.io/nvlink-domain-size", "operator": "Gt", "values": ["7"]}
                ]
            },
        }
    ]
    assert any("NVLink domain ≥ 8" in w for w in decision.warnings)
    assert NUMA_HINT not in result["metadata"].get("annotations", {})  # 8 GPUs span both NUMA nodes
    again = pipeline.decide(parsed(review_of(result)), ctx)
    assert again.patch == ()


def test_a_2_gpu_pod_on_the_pcie_class_gets_the_numa_hint(tmp_path):
    inventory = write_inventory(tmp_path, agent_node("a100-a", "a100-pcie-8-two-numa"))
    ctx = build_context(default_directory(), "generic", inventory)
    result, decision = admit(pod({"nvidia.com/gpu": "2"}), ctx)
    assert result["metadata"]["annotations"][NUMA_HINT] == "single-numa-node"
    preferred = result["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert preferred[0]["preference"]["matchExpressions"] == [
        {"key": "gpuport.io/nvlink-domain-size", "operator": "In", "values": ["0"]}
    ]
    assert (
        "gpuport: pod is not Guaranteed QoS, so the kubelet will not align its CPUs and GPUs"
        in decision.warnings
    )


def test_numa_hint_names_the_maps_numa_scheduler_and_guaranteed_pods_get_no_warning(tmp_path):
    inventory = parse_inventory(
        list(
            yaml.safe_load_all(write_inventory(tmp_path, agent_node("a", "a100-pcie-8-two-numa")).read_text())
        )
    )
    target = replace(context("volcano").target, numa_scheduler="volcano")
    hints = PlacementHints(target, inventory)
    guaranteed = pod({"nvidia.com/gpu": "2", "cpu": "8", "memory": "32Gi"})
    view = {"metadata": {}, "spec": guaranteed["spec"]}
    warnings = hints(view, guaranteed)
    assert view["metadata"]["annotations"]["volcano.sh/numa-topology-policy"] == "single-numa-node"
    assert warnings == [
        "gpuport: preferred node affinity gpuport.io/nvlink-domain-size In ['0'] "
        "(lowest GPU-pair cost 2 for 2 GPUs)",
        "gpuport: 2 GPUs fit one NUMA node: NUMA hint added",
    ]


def test_gpus_asked_by_limits_alone_count_for_the_hint(tmp_path):
    # The API server defaults an extended resource's request to its limit, so most pods write limits only.
    ctx = build_context(default_directory(), "generic", mixed_cluster(tmp_path))
    source = pod({"nvidia.com/gpu": "8"})
    del source["spec"]["containers"][0]["resources"]["requests"]
    result, decision = admit(source, ctx)
    assert any("NVLink domain ≥ 8" in w for w in decision.warnings)
    assert "preferredDuringSchedulingIgnoredDuringExecution" in result["spec"]["affinity"]["nodeAffinity"]


def test_an_init_container_without_cpu_limits_makes_the_pod_not_guaranteed(tmp_path):
    inventory = parse_inventory(
        list(
            yaml.safe_load_all(write_inventory(tmp_path, agent_node("a", "a100-pcie-8-two-numa")).read_text())
        )
    )
    hints = PlacementHints(context("generic").target, inventory)
    source = pod({"nvidia.com/gpu": "2", "cpu": "8", "memory": "32Gi"})
    source["spec"]["initContainers"] = [{"name": "fetch", "image": "busybox"}]
    view = {"metadata": {}, "spec": source["spec"]}
    assert "gpuport: pod is not Guaranteed QoS, so the kubelet will not align its CPUs and GPUs" in hints(
        view, source
    )


@pytest.mark.parametrize("policy", ["preferred", "required"])
def test_hints_fill_fields_that_are_null_as_if_absent(tmp_path, policy):
    inventory = parse_inventory(
        list(
            yaml.safe_load_all(write_inventory(tmp_path, agent_node("a", "a100-pcie-8-two-numa")).read_text())
        )
    )
    hints = PlacementHints(replace(context("generic").target, topology_policy=policy), inventory)
    source = pod({"nvidia.com/gpu": "2"})
    source["metadata"].update(labels={"batch.kubernetes.io/job-name": "train"}, annotations=None)
    view = {"metadata": {"annotations": None}, "spec": {**source["spec"], "affinity": None}}
    hints(view, source)
    assert view["metadata"]["annotations"][NUMA_HINT] == "single-numa-node"
    assert set(view["spec"]["affinity"]) == {"nodeAffinity", "podAffinity"}


def test_a_required_term_that_is_not_a_map_is_named_not_edited(tmp_path):
    from webhook.core.rewriting.podedits import MalformedField

    inventory = parse_inventory(list(yaml.safe_load_all(mixed_cluster(tmp_path).read_text())))
    hints = PlacementHints(replace(context("generic").target, topology_policy="required"), inventory)
    source = pod({"nvidia.com/gpu": "8"})
    required = {"nodeSelectorTerms": ["gpu-nodes"]}
    view = {
        "metadata": {},
        "spec": {
            **source["spec"],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}},
        },
    }
    with pytest.raises(MalformedField, match="nodeSelectorTerms holds the str 'gpu-nodes'"):
        hints(view, source)
    assert required == {"nodeSelectorTerms": ["gpu-nodes"]}  # left as written


def test_required_topology_policy_makes_it_a_requirement(tmp_path):
    inventory = parse_inventory(list(yaml.safe_load_all(mixed_cluster(tmp_path).read_text())))
    hints = PlacementHints(replace(context("generic").target, topology_policy="required"), inventory)
    source = pod({"nvidia.com/gpu": "8"})
    view = {"metadata": {}, "spec": source["spec"]}
    hints(view, source)
    terms = view["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms == {
        "nodeSelectorTerms": [
            {
                "matchExpressions": [
                    {"key": "gpuport.io/nvlink-domain-size", "operator": "Gt", "values": ["7"]}
                ]
            }
        ]
    }


def test_a_required_hint_joins_every_term_the_pod_already_has_once(tmp_path):
    # Terms are ORed: the NVLink requirement must hold in each, as translation's own requirements do.
    inventory = parse_inventory(list(yaml.safe_load_all(mixed_cluster(tmp_path).read_text())))
    hints = PlacementHints(replace(context("generic").target, topology_policy="required"), inventory)
    source = pod({"nvidia.com/gpu": "8"})
    zones = [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": [z]} for z in ("a", "b")]
    required = {"nodeSelectorTerms": [{"matchExpressions": [zone]} for zone in copy.deepcopy(zones)]}
    view = {
        "metadata": {},
        "spec": {
            **source["spec"],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}},
        },
    }
    nvlink = {"key": "gpuport.io/nvlink-domain-size", "operator": "Gt", "values": ["7"]}
    assert any("required node affinity" in w for w in hints(view, source))
    assert required == {"nodeSelectorTerms": [{"matchExpressions": [zone, nvlink]} for zone in zones]}
    assert not any("required node affinity" in w for w in hints(view, source))  # already there
    assert required == {"nodeSelectorTerms": [{"matchExpressions": [zone, nvlink]} for zone in zones]}


def test_pods_of_one_job_prefer_one_topology_block():
    target = context("eks").target
    hints = PlacementHints(target, None)
    source = pod({"nvidia.com/gpu": "8"})
    source["metadata"]["labels"] = {"training.kubeflow.org/job-name": "llm"}
    assert hints.wants(source)
    view = {"metadata": {}, "spec": source["spec"]}
    assert hints(view, source) == [
        "gpuport: pods of training.kubeflow.org/job-name=llm prefer one topology.k8s.aws/network-node-layer-3"
    ]
    term = view["spec"]["affinity"]["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["podAffinityTerm"] == {
        "labelSelector": {"matchLabels": {"training.kubeflow.org/job-name": "llm"}},
        "topologyKey": "topology.k8s.aws/network-node-layer-3",
    }
    assert not hints.wants(pod({"nvidia.com/gpu": "8"}))  # no job label, no inventory: no copy at all


def test_translation_picks_the_models_the_cluster_has(tmp_path):
    inventory = write_inventory(tmp_path, agent_node("h100-a", "h100-sxm-8-nvswitch"))
    ctx = build_context(default_directory(), "generic", inventory)
    assert ctx.target.offered_models == ("H100-80GB",)
    written_for_gke = pod(
        {"nvidia.com/gpu": "1"},
        {
            "cloud.google.com/gke-accelerator": "nvidia-tesla-a100",
            "cloud.google.com/gke-gpu-partition-size": "1g.5gb",
        },
    )
    result, decision = admit(written_for_gke, ctx)
    assert result["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/mig-1g.10gb": "1"}
    assert "gpuport: no A100-40GB here: using H100-80GB" in decision.warnings


def test_a_pod_already_in_this_cluster_s_words_is_never_changed_by_node_data(tmp_path):
    # An A100 slice written for this very cluster, which has only H100 nodes now: said, not moved
    # (an autoscaler may add the A100 node; a silent move to other hardware would defeat it).
    inventory = write_inventory(tmp_path, agent_node("h100-a", "h100-sxm-8-nvswitch"))
    ctx = build_context(default_directory(), "generic", inventory)
    native = pod({"nvidia.com/mig-1g.5gb": "1"}, {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"})
    decision = pipeline.decide(parsed(review_of(native)), ctx)
    assert decision.allowed and decision.patch == ()
    assert decision.warnings == (
        "gpuport: no node has A100-40GB now; the pod waits for one",
        "gpuport: no node offers nvidia.com/mig-1g.5gb now; the pod waits for one",
    )


def test_a_slice_no_node_offers_is_said_for_a_translated_init_container_too(tmp_path):
    ctx = build_context(
        default_directory(), "generic", write_inventory(tmp_path, agent_node("h100-a", "h100-sxm-8-nvswitch"))
    )
    source = pod(
        {"cpu": "1"},
        {
            "cloud.google.com/gke-accelerator": "nvidia-tesla-a100",
            "cloud.google.com/gke-gpu-partition-size": "1g.5gb",
        },
    )
    source["spec"]["initContainers"] = [
        {"name": "prep", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    ]
    result, decision = admit(source, ctx)
    assert result["spec"]["initContainers"][0]["resources"]["limits"] == {"nvidia.com/mig-1g.10gb": "1"}
    assert "gpuport: no node offers nvidia.com/mig-1g.10gb now; the pod waits for one" in decision.warnings


def test_a_model_no_node_has_is_still_translated_with_a_warning(tmp_path):
    inventory = write_inventory(
        tmp_path,
        {"kind": "Node", "metadata": {"name": "cpu", "labels": {}}, "status": {"allocatable": {"cpu": "8"}}},
    )
    ctx = build_context(default_directory(), "eks", inventory)
    source = pod({"nvidia.com/gpu": "1"}, {"cloud.google.com/gke-accelerator": "nvidia-tesla-a100"})
    _, decision = admit(source, ctx)
    assert "gpuport: no node has A100-40GB now; the pod waits for one" in decision.warnings


def test_explain_prints_the_cost_table(tmp_path, capsys):
    from webhook.commands.cli import main

    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(pod({"nvidia.com/gpu": "4"})))
    assert main(["explain", "--inventory", str(mixed_cluster(tmp_path)), str(tmp_path / "pod.yaml")]) == 0
    out = capsys.readouterr().out
    assert "Pod/work: 4 whole GPU(s)" in out
    assert "8×H100-80GB, NVLink domain 8, 4 GPUs/NUMA" in out and "cost 6 on GPUs [0, 1, 2, 3]" in out
    assert "8×A100-40GB, NVLink domain 0, 4 GPUs/NUMA" in out and "cost 16 on GPUs [0, 1, 2, 3]" in out


def test_translation_uses_the_mig_profiles_the_nodes_offer(tmp_path):
    # The H100 nodes are cut into 2g.20gb slices only: a 1g.10gb ask gets the smallest slice they have.
    node = agent_node("h100-mig", "h100-sxm-8-nvswitch")
    node["status"]["allocatable"] = {"nvidia.com/mig-2g.20gb": "24"}
    ctx = build_context(default_directory(), "generic", write_inventory(tmp_path, node))
    assert ctx.target.offered_profiles == ("2g.20gb",)
    written_for_eks = pod(
        {"nvidia.com/mig-1g.10gb": "1"}, {"node.kubernetes.io/instance-type": "p5.48xlarge"}
    )
    result, decision = admit(written_for_eks, ctx)
    assert result["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/mig-2g.20gb": "1"}
    assert "(H100-80GB has no 1g.10gb; more compute)" in decision.warnings[0]
    # Written for this cluster, the same ask stays as it is, with the reason it may wait.
    _, native = admit(pod({"nvidia.com/mig-1g.10gb": "1"}), ctx)
    assert native.patch == ()
    assert native.warnings == ("gpuport: no node offers nvidia.com/mig-1g.10gb now; the pod waits for one",)


def test_hints_skip_the_copy_for_pods_that_cannot_ask_for_several_gpus(tmp_path):
    inventory = parse_inventory(list(yaml.safe_load_all(mixed_cluster(tmp_path).read_text())))
    hints = PlacementHints(context("generic").target, inventory)
    assert not hints.wants(pod({"nvidia.com/gpu": "1"}))
    assert hints.wants(pod({"nvidia.com/gpu": "2"}))
    two_containers = pod({"nvidia.com/gpu": "1"})
    two_containers["spec"]["containers"].append(
        {"name": "b", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    )
    assert hints.wants(two_containers)
    assert hints.wants(pod({"cloud.google.com/gke-accelerator": "x", "nvidia.com/gpu": "8"}))


def test_an_inventory_edit_reloads_the_context(tmp_path):
    import shutil

    from webhook.adapters.http.reload import CloudMapReloader
    from webhook.adapters.http.server import ServerState
    from webhook.config.cloudmap import directory_signature

    maps = tmp_path / "maps"
    shutil.copytree(default_directory(), maps)
    path = write_inventory(tmp_path, agent_node("a100-a", "a100-pcie-8-two-numa"))
    state = ServerState(
        context=build_context(maps, "generic", path), maps_signature=(directory_signature(maps, path), 0)
    )
    assert state.context.target.offered_models == ("A100-40GB",)
    reloader = CloudMapReloader(state, maps, "generic", inventory=path)
    assert reloader.check_once() is False
    write_inventory(tmp_path, agent_node("h100-a", "h100-sxm-8-nvswitch"))
    assert reloader.check_once() is True
    assert state.context.target.offered_models == ("H100-80GB",)


def test_topology_plans_are_kept_per_gpu_count_only_up_to_the_largest_node(tmp_path, monkeypatch):
    # The plan per k is worked out once per context; a pod naming an absurd count must not grow it.
    from webhook.core.rewriting import placement

    planned: list[int] = []
    plans: list = []

    def topology_plan(table, k, target):
        planned.append(k)
        plans.append(original(table, k, target))
        return plans[-1]

    original = placement.topology_plan
    monkeypatch.setattr(placement, "topology_plan", topology_plan)
    ctx = build_context(default_directory(), "generic", mixed_cluster(tmp_path))
    admit(pod({"nvidia.com/gpu": "8"}), ctx)
    first = plans[0]
    for _ in range(2):
        decision = pipeline.decide(parsed(review_of(pod({"nvidia.com/gpu": "100000"}))), ctx)
        assert any("no node has 100000 healthy GPUs" in w for w in decision.warnings)
    assert planned == [8, 100000, 100000]  # past the largest node: worked out each time, never kept
    _, second = admit(pod({"nvidia.com/gpu": "8"}), ctx)
    assert planned == [8, 100000, 100000]  # the second 8-GPU pod read the kept plan
    # ...and got an expression of its own: an edit of one pod's patch can never reach another's.
    _, third = admit(pod({"nvidia.com/gpu": "8"}), ctx)
    ours, theirs = (_expressions(op["value"] for op in d.patch) for d in (second, third))
    assert ours == theirs == [first.expression()]
    assert ours[0] is not theirs[0] and ours[0]["values"] is not theirs[0]["values"]


def _expressions(values):
    found = []
    for value in values:
        if isinstance(value, dict):
            if "operator" in value:
                found.append(value)
            found += _expressions(value.values())
        elif isinstance(value, list):
            found += _expressions(value)
    return found


def _hinted_contexts():
    with tempfile.TemporaryDirectory() as tmp:
        inventory = mixed_cluster(Path(tmp))
        return {
            t: build_context(default_directory(), t, inventory) for t in ("generic", "gke", "eks", "hami")
        }


HINTED = _hinted_contexts()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pod=st.one_of(
        random_pods(), st.sampled_from(sorted(SOURCES)).map(lambda s: copy.deepcopy(SOURCES[s][1]))
    ),
    target=st.sampled_from(sorted(HINTED)),
    gpus=st.integers(1, 4),
)
def test_asking_the_hints_whether_they_want_a_pod_never_changes_its_decision(pod, target, gpus):
    # `wants` only spares pods the copy: answering from the demand must skip no pod the hints change.
    for container in pod["spec"].get("containers") or []:
        for section in ((container.get("resources") or {}).get(s) or {} for s in ("limits", "requests")):
            if "nvidia.com/gpu" in section:
                section["nvidia.com/gpu"] = str(gpus)
    ctx = HINTED[target]
    always = replace(ctx, mutations=tuple(AlwaysWanted(m) for m in ctx.mutations))
    review = parsed(review_of(pod))
    assert pipeline.decide(review, ctx) == pipeline.decide(review, always)


class AlwaysWanted:
    """The same mutation, without a `wants`: the core then copies and asks it every time."""

    def __init__(self, mutation):
        self.mutation = mutation

    def __call__(self, view, pod):
        return self.mutation(view, pod)


@pytest.mark.parametrize("target", sorted(HINTED))
def test_what_a_pod_says_in_foreign_words_is_the_same_for_the_map_as_declared_and_as_narrowed(target):
    # rewrite_pod reads it once on the declared map and hands it to translation on the narrowed one.
    from webhook.core.asks.demand import read_demand
    from webhook.core.rewriting.foreign import read_foreign

    ctx = HINTED[target]
    assert ctx.target is not ctx.as_declared, "the inventory narrows the map"
    for _, source, _ in SOURCES.values():
        demand = read_demand(source, ctx.dialects)
        spec = source["spec"]
        assert read_foreign(spec, demand, ctx.target, ctx.dialects) == read_foreign(
            spec, demand, ctx.as_declared, ctx.dialects
        )


def test_explain_says_why_it_has_no_table(tmp_path, capsys):
    from webhook.commands.cli import main

    bare = write_inventory(tmp_path, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}})
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(pod({"nvidia.com/gpu": "4"})))
    assert main(["explain", "--inventory", str(bare), str(tmp_path / "pod.yaml")]) == 0
    out = capsys.readouterr().out
    assert "no cost table: no node of" in out and "carries gpuport.io/capability" in out
    (tmp_path / "one.yaml").write_text(yaml.safe_dump(pod({"nvidia.com/gpu": "1"})))
    assert main(["explain", "--inventory", str(bare), str(tmp_path / "one.yaml")]) == 0
    assert "no topology hint: a pod needs at least 2 whole GPUs" in capsys.readouterr().out


def test_explain_decides_as_the_webhook_does_checks_first(tmp_path, capsys):
    from webhook.commands.cli import main

    # Half a GPU is refused by the checks before any translation: explain says the same words.
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(pod({"nvidia.com/gpu": "500m"})))
    assert main(["explain", "--inventory", str(mixed_cluster(tmp_path)), str(tmp_path / "pod.yaml")]) == 0
    out = capsys.readouterr().out
    assert "Pod/work: refused: " in out and "GPUs are whole units" in out


def template_of_every_kind(spec, metadata):
    """A document of every kind the table reads, each template holding `spec` (and `metadata`)."""
    from webhook.core.vocabulary.templates import TEMPLATE_PATHS

    template = {"spec": spec} if metadata is None else {"metadata": metadata, "spec": spec}
    docs = []
    for (group, kind), paths in sorted(TEMPLATE_PATHS.items()):
        doc = {"apiVersion": f"{group}/v1" if group else "v1", "kind": kind, "metadata": {"name": "w"}}
        for path in paths:
            node = doc
            for at, step in enumerate(path[:-1]):
                if path[at + 1] == "*":  # replica types are a map, worker groups and tasks a list
                    entry: dict = {}
                    node[step] = {"Worker": entry} if step.endswith("ReplicaSpecs") else [entry]
                    node = entry
                elif step != "*":
                    node = node.setdefault(step, {})
            node[path[-1]] = copy.deepcopy(template)
        docs.append(doc)
    return docs


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pod=random_pods(), with_metadata=st.booleans())
def test_explain_and_preflight_answer_every_kind_the_table_reads_without_a_traceback(
    tmp_path, capsys, pod, with_metadata
):
    from webhook.commands.cli import main

    metadata = pod.get("metadata") if with_metadata else None
    docs = template_of_every_kind(pod["spec"], metadata)
    path = tmp_path / "all.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    inventory = mixed_cluster(tmp_path)
    assert main(["explain", "--inventory", str(inventory), str(path)]) == 0
    assert main(["preflight", "--from", "gke", "--to", "eks", "--inventory", str(inventory), str(path)]) in (
        0,
        1,
    )
    assert main(["translate", "--to", "eks", str(path)]) in (0, 1)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
