"""Migration preflight: each check's score on hand-made workloads, packing, output and exit codes."""

import json
import subprocess
import sys
from dataclasses import replace
from decimal import Decimal

import pytest
import yaml

from tests.helpers import REPO, context
from tests.translation_cases import pod
from webhook.core.migration.packing import Replica, pack
from webhook.core.migration.preflight import DEFAULT_WEIGHTS, preflight
from webhook.core.vocabulary.cuda import container_cuda, driver_runs, max_cuda_for
from webhook.core.vocabulary.dialects import Dialects
from webhook.core.vocabulary.inventory import Inventory, NamespaceQuota, Node, parse_inventory

EXAMPLE = REPO / "examples" / "manifests" / "gke-training.yaml"


def run(docs, source="gke", target="eks", inventory=None, **kw):
    ctx = context(target)
    src = context(source).target
    maps = (src,) if src.name == target else (src, ctx.target)
    ctx = replace(ctx, dialects=Dialects(maps, ctx.dialects.catalogue))
    return preflight(docs, src, ctx, inventory, **kw)


def deployment(name, pod_spec, replicas=1, namespace="ml", annotations=None):
    meta = {"name": name, "namespace": namespace}
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {"replicas": replicas, "template": {"metadata": {}, "spec": pod_spec}},
    }


def checks(report, index=0):
    return {c.check: (c.compat, c.why) for c in report.workloads[index].checks}


def gpu_node(name, labels, allocatable, **kw):
    return Node(
        name,
        {"kubernetes.io/hostname": name, **labels},
        {k: Decimal(v) for k, v in allocatable.items()},
        **kw,
    )


P4D = {
    "node.kubernetes.io/instance-type": "p4d.24xlarge",
    "nvidia.com/cuda.runtime-version.major": "12",
    "nvidia.com/cuda.runtime-version.minor": "4",
}


@pytest.mark.parametrize(
    ("api_version", "kind", "template_at"),
    [
        ("kubeflow.org/v1", "TFJob", ("spec", "tfReplicaSpecs", "Worker", "template")),
        ("ray.io/v1", "RayJob", ("spec", "rayClusterSpec", "headGroupSpec", "template")),
        ("argoproj.io/v1alpha1", "Workflow", None),
    ],
)
def test_batch_kinds_move_with_the_training_wave_not_the_stateless_one(api_version, kind, template_at):
    spec = pod({"nvidia.com/gpu": "1"}, {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"})["spec"]
    doc = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "batch", "namespace": "ml"}}
    if template_at is None:  # an Argo step: its container and placement on the template itself
        step = {"name": "run", "nodeSelector": spec["nodeSelector"], "container": spec["containers"][0]}
        doc["spec"] = {"entrypoint": "run", "templates": [step]}
    else:
        node = doc
        for key in template_at[:-1]:
            node = node.setdefault(key, {})
        node[template_at[-1]] = {"spec": spec}
    (workload,) = run([doc]).workloads
    assert workload.category == "training"


def test_weights_add_up_to_one():
    assert sum(DEFAULT_WEIGHTS.values()) == pytest.approx(1.0)


def test_a_clean_move_scores_zero_risk_where_everything_is_known():
    spec = pod({"nvidia.com/gpu": "1"}, {"cloud.google.com/gke-accelerator": "nvidia-tesla-a100"})["spec"]
    spec["containers"][0]["image"] = "nvidia/cuda:12.2.0-base"
    inventory = Inventory((gpu_node("a", P4D, {"nvidia.com/gpu": "8"}),))
    report = run([deployment("d", spec)], inventory=inventory)
    assert {c: v[0] for c, v in checks(report).items()} == {
        "resource_names": 1.0,
        "gpu_model": 1.0,
        "gpu_memory": 1.0,
        "mig_sharing_mode": 1.0,
        "driver_cuda": 1.0,
        "topology": 1.0,
        "capacity": 1.0,
        "quota": 1.0,
    }
    assert report.workloads[0].risk == 0
    assert report.passed


def test_model_not_offered_gets_partial_credit_and_names_the_equivalent():
    spec = pod({"nvidia.com/gpu": "1"}, {"cloud.google.com/gke-accelerator": "nvidia-tesla-v100"})["spec"]
    report = run([deployment("d", spec)], target="aks")
    compat, why = checks(report)["gpu_model"]
    assert compat == 0.7
    assert why == "V100-16GB not offered; equivalent with ≥ memory: A100-40GB (40 GB)"


def test_model_with_no_equivalent_scores_zero_and_translation_fails():
    spec = pod({"nvidia.com/gpu": "8"}, {"cloud.google.com/gke-accelerator": "nvidia-b200"})["spec"]
    result = checks(run([deployment("d", spec)], target="aks"))
    assert result["gpu_model"][0] == 0.0
    assert result["resource_names"][0] == 0.0
    assert "aks offers no NVIDIA training GPU with at least 180 GB" in result["resource_names"][1]


def test_mig_on_a_cloud_without_mig_scores_zero_or_half_by_policy():
    spec = pod(
        {"nvidia.com/gpu": "1"},
        {
            "cloud.google.com/gke-accelerator": "nvidia-tesla-a100",
            "cloud.google.com/gke-gpu-partition-size": "3g.20gb",
        },
    )["spec"]
    result = checks(run([deployment("d", spec)], target="oke"))
    assert result["mig_sharing_mode"] == (0.0, "oke offers no MIG")
    assert result["resource_names"][0] == 0.0
    ctx_allow = replace(context("oke"), target=replace(context("oke").target, mig_to_whole="allow"))
    src = context("gke").target
    report = preflight(
        [deployment("d", spec)],
        src,
        replace(ctx_allow, dialects=Dialects((src, ctx_allow.target), ctx_allow.dialects.catalogue)),
        None,
    )
    result = checks(report)
    assert result["mig_sharing_mode"] == (0.5, "no MIG: whole GPUs by policy")
    assert result["resource_names"][0] == 0.5


def test_shared_memory_limit_becoming_time_slicing_is_half_credit():
    spec = pod({"aliyun.com/gpu-mem": "8"})["spec"]
    result = checks(run([deployment("d", spec)], source="ack", target="gke"))
    assert result["gpu_memory"] == (0.5, "8192 MiB becomes time-slicing: memory is no longer capped")
    assert result["mig_sharing_mode"][0] == 1.0


def test_a_memory_share_moved_to_kai_is_reserved_there_not_capped():
    # KAI's gpu-memory annotation is a reservation its scheduler keeps; nothing caps it at run time.
    spec = pod({"aliyun.com/gpu-mem": "8"})["spec"]
    result = checks(run([deployment("d", spec)], source="ack", target="kai"))
    assert result["gpu_memory"] == (
        0.5,
        "8192 MiB becomes a share the scheduler reserves: memory is not capped",
    )
    assert result["mig_sharing_mode"][0] == 1.0


def test_a_share_without_a_size_scores_zero_where_shares_are_sized():
    # Time-slicing (GKE's shared label) has no size to give; KAI and HAMi need one, as translate says.
    spec = pod(
        {"nvidia.com/gpu": "1"}, selector={"cloud.google.com/gke-gpu-sharing-strategy": "time-sharing"}
    )["spec"]
    for target in ("kai", "hami"):
        result = checks(run([deployment("d", spec)], source="gke", target=target))
        assert result["gpu_memory"][0] == 0.0, target
        assert "names none" in result["gpu_memory"][1]
    assert checks(run([deployment("d", spec)], source="gke", target="eks"))["gpu_memory"][0] == 1.0


@pytest.mark.parametrize(
    ("labels", "compat", "why_part"),
    [
        (
            {"nvidia.com/cuda.runtime-version.major": "12", "nvidia.com/cuda.runtime-version.minor": "4"},
            1.0,
            "runs CUDA ≤ 12.4",
        ),
        (
            {"nvidia.com/cuda.runtime-version.major": "12", "nvidia.com/cuda.runtime-version.minor": "2"},
            0.0,
            "runs CUDA ≤ 12.2",
        ),
        ({"nvidia.com/cuda.driver-version.full": "535.104.05"}, 0.5, "minor-version compatibility only"),
        ({"nvidia.com/cuda.driver-version.full": "550.54.15"}, 1.0, "driver 550.54.15 (CUDA ≤ 12.4)"),
        ({"nvidia.com/cuda.driver-version.full": "470.82.01"}, 0.0, "driver 470.82.01 (CUDA ≤ 11.4)"),
        ({}, 0.5, "target driver unknown"),
    ],
)
def test_driver_check_against_the_inventory(labels, compat, why_part):
    spec = pod({"nvidia.com/gpu": "1"})["spec"]
    spec["containers"][0]["image"] = "nvcr.io/nvidia/cuda:12.4.1-runtime-ubuntu22.04"
    inventory = Inventory((gpu_node("n", labels, {"nvidia.com/gpu": "1"}),))
    result = checks(run([deployment("d", spec)], target="generic", source="generic", inventory=inventory))
    assert result["driver_cuda"][0] == compat
    assert why_part in result["driver_cuda"][1]


def test_cuda_version_sources():
    template = {
        "metadata": {"annotations": {"gpuport.io/cuda": "11.8"}},
        "spec": {"containers": [{"image": "nvidia/cuda:12.4.0-base"}]},
    }
    assert container_cuda(template)[0] == (11, 8)
    template = {
        "spec": {"containers": [{"image": "x", "env": [{"name": "CUDA_VERSION", "value": "12.1.0"}]}]}
    }
    assert container_cuda(template)[0] == (12, 1)
    assert container_cuda(
        {"spec": {"containers": [{"image": "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime"}]}}
    )[0] == (12, 1)
    assert container_cuda({"spec": {"containers": [{"image": "busybox"}]}})[0] is None
    assert driver_runs((550, 54, 15), (12, 4)) == 1.0
    assert driver_runs((550, 54, 13), (12, 4)) == 0.5
    assert driver_runs((450, 36, 6), (12, 0)) == 0.0
    assert max_cuda_for((535, 54, 3)) == (12, 2)


def test_topology_needs_a_node_with_enough_gpus_and_nvlink():
    spec = pod({"nvidia.com/gpu": "8"})["spec"]
    small = Inventory((gpu_node("n", {}, {"nvidia.com/gpu": "4"}),))
    assert checks(run([deployment("d", spec)], "generic", "generic", small))["topology"] == (
        0.0,
        "8 GPUs per pod but the largest node has 4",
    )
    nvlink = Inventory((gpu_node("n", {}, {"nvidia.com/gpu": "8"}, capability={"nvlink_domain_size": 8}),))
    assert checks(run([deployment("d", spec)], "generic", "generic", nvlink))["topology"][0] == 1.0
    pcie = Inventory((gpu_node("n", {}, {"nvidia.com/gpu": "8"}, capability={"nvlink_domain_size": 1}),))
    assert checks(run([deployment("d", spec)], "generic", "generic", pcie))["topology"][0] == 0.5


def test_quota_in_gpu_equivalents_across_workloads_of_a_namespace():
    spec = pod({"nvidia.com/gpu": "4"})["spec"]
    docs = [deployment("a", spec, replicas=2), deployment("b", spec, replicas=1)]
    nodes = (gpu_node("n", {}, {"nvidia.com/gpu": "16"}),)
    over = Inventory(nodes, (NamespaceQuota("ml", "gpus", {"requests.nvidia.com/gpu": Decimal(8)}),))
    result = checks(run(docs, "generic", "generic", over))
    assert result["quota"] == (0.0, "ml would need 12 GPU-equivalents; quota allows 8")
    fine = Inventory(nodes, (NamespaceQuota("ml", "gpus", {"requests.nvidia.com/gpu": Decimal(12)}),))
    assert checks(run(docs, "generic", "generic", fine))["quota"][0] == 1.0


def replica(name, size, resource="nvidia.com/gpu", **kw):
    return Replica(
        name, 0, Decimal(size), {resource: Decimal(size)}, kw.get("requires", {}), kw.get("tol", ())
    )


def test_packing_largest_first_places_the_big_job_where_arrival_order_would_not():
    nodes = (gpu_node("eight", {}, {"nvidia.com/gpu": "8"}), gpu_node("four", {}, {"nvidia.com/gpu": "4"}))
    # In arrival order, best fit would put 3 on "four", then 4 on "eight", and 8 would not fit anywhere.
    packing = pack([replica("three", 3), replica("four", 4), replica("big", 8)], nodes)
    assert packing.placed == {("big", 0): "eight", ("four", 0): "four"}
    assert [r.workload for r in packing.pending] == ["three"]


def test_packing_prefers_the_node_left_fullest():
    nodes = (gpu_node("a", {}, {"nvidia.com/gpu": "8"}), gpu_node("b", {}, {"nvidia.com/gpu": "3"}))
    packing = pack([replica("x", 2)], nodes)
    assert packing.placed == {("x", 0): "b"}


def test_packing_honours_selectors_taints_and_mig_resources():
    tainted = gpu_node(
        "t",
        {"pool": "gpu"},
        {"nvidia.com/gpu": "8"},
        taints=({"key": "sku", "value": "gpu", "effect": "NoSchedule"},),
    )
    mig = gpu_node("m", {"pool": "gpu"}, {"nvidia.com/mig-1g.10gb": "7"})
    nodes = (tainted, mig)
    assert pack([replica("w", 1, requires={"pool": ("gpu",)})], nodes).pending  # taint not tolerated
    toleration = ({"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},)
    assert pack([replica("w", 1, tol=toleration)], nodes).placed == {("w", 0): "t"}
    slices = [
        Replica("s", i, Decimal("0.14"), {"nvidia.com/mig-1g.10gb": Decimal(1)}, {}, ()) for i in range(8)
    ]
    packing = pack(slices, nodes)
    assert len(packing.placed) == 7 and len(packing.pending) == 1


def test_done_when_gke_training_to_eks_with_the_sample_inventory():
    docs = list(yaml.safe_load_all(EXAMPLE.read_text()))
    inventory = parse_inventory(
        list(yaml.safe_load_all((REPO / "examples/inventories/eks.yaml").read_text()))
    )
    report = run(docs, inventory=inventory)
    train = next(w for w in report.workloads if w.name == "llm-train")
    assert train.translated == [
        "/spec/template: nvidia.com/gpu: 8, node.kubernetes.io/instance-type=p4d.24xlarge"
    ]
    assert train.placement == {"eks-gpu-0": 1, "eks-gpu-1": 1}
    assert train.category == "training"
    assert len(train.checks) == 8 and 0 <= train.risk <= report.max_risk
    # Stateless first, training after.
    assert report.waves == [["Deployment/ml/embedder", "Deployment/ml/llm-train"]]
    assert run(docs, inventory=inventory, wave_size=1).waves == [
        ["Deployment/ml/embedder"],
        ["Deployment/ml/llm-train"],
    ]
    assert report.passed


def test_done_when_a_too_small_inventory_reports_pending_replicas():
    docs = list(yaml.safe_load_all(EXAMPLE.read_text()))
    inventory = parse_inventory(
        list(yaml.safe_load_all((REPO / "examples/inventories/eks-small.yaml").read_text()))
    )
    report = run(docs, inventory=inventory)
    pending = {w.name: w.pending for w in report.workloads}
    assert pending == {"llm-train": 1, "embedder": 3}
    assert not report.passed


def cli(*args):
    result = subprocess.run(
        [sys.executable, "-m", "webhook", "preflight", *args], capture_output=True, text=True, check=False
    )
    return result.returncode, result.stdout, result.stderr


def test_cli_json_output_and_exit_codes():
    code, out, _ = cli(
        "--from",
        "gke",
        "--to",
        "eks",
        "--inventory",
        str(REPO / "examples/inventories/eks.yaml"),
        "-o",
        "json",
        str(EXAMPLE),
    )
    assert code == 0
    data = json.loads(out)
    assert set(data) == {
        "source",
        "target",
        "total_weight",
        "max_risk",
        "passed",
        "inventory_nodes",
        "unread",
        "mig_slices",
        "workloads",
        "pending",
        "refused",
        "held_by_running_pods",
        "waves",
    }
    workload = data["workloads"][0]
    assert set(workload) == {
        "workload",
        "category",
        "replicas",
        "risk",
        "translated",
        "placement",
        "pending",
        "refused",
        "checks",
    }
    assert set(workload["checks"][0]) == {"check", "compat", "weight", "contribution", "why"}
    code, _, _ = cli(
        "--from",
        "gke",
        "--to",
        "eks",
        "--inventory",
        str(REPO / "examples/inventories/eks-small.yaml"),
        str(EXAMPLE),
    )
    assert code == 1
    code, _, err = cli("--from", "gke", "--to", "mars", str(EXAMPLE))
    assert code == 2 and "no cloud map named 'mars'" in err
    code, _, err = cli("--from", "gke", "--to", "eks", "--max-risk", "0.0", str(EXAMPLE))
    assert code == 1


def test_cli_markdown_for_a_pull_request():
    code, out, _ = cli("--from", "gke", "--to", "eks", "-o", "markdown", str(EXAMPLE))
    assert code == 0
    assert out.startswith("### gpuport preflight: `gke` → `eks`")
    assert "| check | compat | weight | contribution | why |" in out
    assert "Capacity: not checked (no --inventory)." in out


def test_preflight_and_translate_agree_on_the_translated_form(tmp_path, capsys):
    from webhook.commands.cli import main

    main(["translate", "--from", "gke", "--to", "eks", str(EXAMPLE)])
    translated = list(yaml.safe_load_all(capsys.readouterr().out))
    report = run(list(yaml.safe_load_all(EXAMPLE.read_text())))
    train = next(w for w in report.workloads if w.name == "llm-train")
    spec = translated[0]["spec"]["template"]["spec"]
    assert train.translated == [
        f"/spec/template: nvidia.com/gpu: {spec['containers'][0]['resources']['limits']['nvidia.com/gpu']}, "
        f"node.kubernetes.io/instance-type={spec['nodeSelector']['node.kubernetes.io/instance-type']}"
    ]


@pytest.mark.parametrize(
    "path", sorted((REPO / "examples" / "inventories").glob("*.yaml")), ids=lambda p: p.stem
)
def test_every_sample_inventory_parses_and_names_models_its_map_knows(path):
    inventory = parse_inventory(list(yaml.safe_load_all(path.read_text())))
    name = path.stem.removesuffix("-small").removesuffix("-measured").removesuffix("-rightsize")
    cloud = context(name).target
    keys = {label.label for label in cloud.model_labels}
    catalogue = context(name).dialects.catalogue
    for node in inventory.nodes:
        values = [node.labels[k] for k in keys if k in node.labels]
        known = any(label.models_for(v) for label in cloud.model_labels for v in values)
        assert values and (known or any(catalogue.by_product_name(v) for v in values)), node.name


def test_bad_inventory_is_a_clear_error(tmp_path):
    from webhook.core.vocabulary.inventory import InventoryError

    with pytest.raises(InventoryError, match="no Node objects"):
        parse_inventory([{"kind": "ConfigMap"}])
    with pytest.raises(InventoryError, match=r"n: nvidia\.com/gpu: 'x' is not a quantity"):
        parse_inventory(
            [{"kind": "Node", "metadata": {"name": "n"}, "status": {"allocatable": {"nvidia.com/gpu": "x"}}}]
        )


def test_inventory_from_a_live_cluster_uses_the_same_parser():
    from types import SimpleNamespace

    from webhook.adapters.kube.inventory_reader import inventory_from_cluster

    node = {
        "apiVersion": "v1",
        "metadata": {"name": "n1", "labels": {"a": "b"}},
        "status": {"allocatable": {"nvidia.com/gpu": "8"}},
    }
    quota = {"metadata": {"name": "q", "namespace": "ml"}, "spec": {"hard": {"requests.nvidia.com/gpu": "4"}}}
    running = {"metadata": {"name": "r", "namespace": "ml"}, "spec": {"nodeName": "n1", "containers": []}}
    selectors = []

    def page(items):
        return SimpleNamespace(items=items, metadata=SimpleNamespace(_continue=None))

    class FakeCore:
        api_client = SimpleNamespace(sanitize_for_serialization=lambda obj: obj)

        def list_node(self, **_):
            return page([node])

        def list_pod_for_all_namespaces(self, field_selector, **_):
            selectors.append(field_selector)
            return page([running])

        def list_resource_quota_for_all_namespaces(self):
            return page([quota])

    inventory = inventory_from_cluster(FakeCore())
    assert [(n.name, n.allocatable["nvidia.com/gpu"]) for n in inventory.nodes] == [("n1", Decimal(8))]
    assert inventory.quotas[0].hard == {"requests.nvidia.com/gpu": Decimal(4)}
    # Only the pods that hold a node's resources are asked for: bound and not finished.
    assert [(p.node, p.namespace, p.name) for p in inventory.pods] == [("n1", "ml", "r")]
    assert selectors == ["spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"]


def running_pod(name, node, resources, namespace="other", phase="Running"):
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "image": "x", "resources": {"limits": resources}}],
        },
        "status": {"phase": phase},
    }


def p5_node(name):
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": {"node.kubernetes.io/instance-type": "p5.48xlarge"}},
        "status": {"allocatable": {"nvidia.com/gpu": "8"}},
    }


def test_free_capacity_is_allocatable_less_what_running_pods_hold():
    spec = pod({"nvidia.com/gpu": "8"}, {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"})["spec"]
    inventory = parse_inventory(
        [
            p5_node("a"),
            p5_node("b"),
            running_pod("one-gpu", "a", {"nvidia.com/gpu": "1"}),  # a has 7 free: no 8-GPU replica fits
            running_pod("done", "b", {"nvidia.com/gpu": "8"}, phase="Succeeded"),  # holds nothing
            {**running_pod("unbound", "b", {"nvidia.com/gpu": "8"}), "spec": {"containers": []}},
        ]
    )
    report = run([deployment("train", spec, replicas=2)], inventory=inventory)
    (workload,) = report.workloads
    assert workload.placement == {"b": 1} and workload.pending == 1
    compat, why = checks(report)["capacity"]
    assert compat == 0.5
    assert why.endswith("the most free on a node it fits is 7")
    assert report.held == {"a": 1}
    assert not report.passed


def test_running_pods_are_charged_to_their_namespace_s_quota_in_gpu_equivalents():
    spec = pod({"nvidia.com/gpu": "1"}, {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"})["spec"]
    inventory = parse_inventory(
        [
            p5_node("a"),
            # 7/4 GPU's worth: the pod pins no model, so each 1g.10gb is charged as on an A100 40GB (2 of
            # 8 memory slices), where the webhook would charge it so too.
            running_pod("slices", "a", {"nvidia.com/mig-1g.10gb": "7"}, namespace="ml"),
            {
                "kind": "ResourceQuota",
                "metadata": {"name": "q", "namespace": "ml"},
                "spec": {"hard": {"requests.nvidia.com/gpu": "2"}},
            },
        ]
    )
    compat, why = checks(run([deployment("serve", spec, replicas=2)], inventory=inventory))["quota"]
    assert (compat, why) == (
        0.0,
        "ml would need 3.75 GPU-equivalents (1.75 held by running pods); quota allows 2",
    )


def test_a_workload_translation_refuses_never_fits_and_the_summary_says_so():
    from webhook.commands.preflight_report import as_json, as_text

    # AKS offers nothing as large as a B200: translation refuses it.
    spec = pod({"nvidia.com/gpu": "8"}, {"cloud.google.com/gke-accelerator": "nvidia-b200"})["spec"]
    report = run(
        [deployment("odd", spec, replicas=2)], target="aks", inventory=parse_inventory([p5_node("a")])
    )
    (odd,) = report.workloads
    assert odd.translated == ["/spec/template: not translatable"]
    compat, why = checks(report)["capacity"]
    assert compat == 0.0 and why.startswith("0/2 replicas fit; 2 refused by translation")
    assert "(nowhere)" not in why
    assert odd.refused == 2 and not report.passed
    text = as_text(report)
    assert "Capacity: everything fits" not in text
    assert "Refused by translation (never created, so fitting nowhere):\n  Deployment/ml/odd: 2 of 2" in text
    assert "[FAIL] Deployment/ml/odd" in text
    assert json.loads(as_json(report))["refused"] == {"Deployment/ml/odd": 2}


def test_preflight_quota_counts_mig_slices_like_the_webhook():
    spec = pod({"nvidia.com/mig-1g.10gb": "1"})["spec"]
    nodes = (gpu_node("n", {}, {"nvidia.com/mig-1g.10gb": "56"}),)
    quota = NamespaceQuota("ml", "gpus", {"requests.nvidia.com/gpu": Decimal(1)})
    # No model pinned: each 1g.10gb is charged as on an A100 40GB, where it takes 2 of 8 memory slices.
    four = run([deployment("a", spec, replicas=4)], "generic", "generic", Inventory(nodes, (quota,)))
    assert checks(four)["quota"] == (1.0, "1 of 1 GPU-equivalents in ml")  # 4 × 1/4, exactly
    five = run([deployment("a", spec, replicas=5)], "generic", "generic", Inventory(nodes, (quota,)))
    assert checks(five)["quota"][0] == 0.0


def test_packing_counts_gpus_asked_in_limits_when_requests_name_only_cpu():
    # The API server defaults each missing request to its limit: a container that requests cpu but
    # limits nvidia.com/gpu: 8 still needs eight GPUs, so two such replicas cannot share one node.
    container = {
        "name": "train",
        "image": "trainer:1",
        "resources": {"requests": {"cpu": "4"}, "limits": {"cpu": "4", "nvidia.com/gpu": "8"}},
    }
    spec = {"containers": [container], "nodeSelector": {"node.kubernetes.io/instance-type": "p4d.24xlarge"}}
    inventory = Inventory((gpu_node("p4d-0", P4D, {"nvidia.com/gpu": "8"}),))
    report = run([deployment("train", spec, replicas=2)], source="eks", target="eks", inventory=inventory)
    assert report.workloads[0].pending == 1


def test_cli_reports_an_unreachable_cluster_as_bad_input(tmp_path):
    # Port 9 (discard) on loopback refuses at once: the read fails fast, and the user gets one line
    # naming what was being read, not a traceback.
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    code, _, err = cli("--from", "gke", "--to", "eks", "--kubeconfig", str(kubeconfig), str(EXAMPLE))
    assert code == 2
    assert err.startswith("gpuport preflight: reading the cluster's nodes and quotas:")
    assert "Traceback" not in err


def test_cli_reports_a_kubeconfig_it_cannot_load_as_bad_input(tmp_path):
    # The client library raises its own ConfigException on such a file, which escaped as a traceback.
    for text in ("not: a kubeconfig\n", "apiVersion: v1\nkind: Config\ncontexts: []\n"):
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(text)
        code, _, err = cli("--from", "gke", "--to", "eks", "--kubeconfig", str(kubeconfig), str(EXAMPLE))
        assert code == 2, err
        assert err.startswith(
            f"gpuport preflight: reading the cluster's nodes and quotas: kubeconfig {kubeconfig}:"
        )
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_replicas_that_fit_nowhere_are_said_with_what_every_node_lacks():
    spec = pod({"nvidia.com/gpu": "8"}, {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"})["spec"]
    # p5.48xlarge (H100) is what an H100 pod becomes on EKS; the inventory has only p4d nodes.
    report = run(
        [deployment("train", spec, replicas=3)],
        inventory=Inventory((gpu_node("a", P4D, {"nvidia.com/gpu": "8"}),)),
    )
    compat, why = checks(report)["capacity"]
    assert compat == 0.0
    assert why == (
        "0/3 replicas fit (nowhere); 3 stay Pending: no node labelled "
        "node.kubernetes.io/instance-type=p5.48xlarge (nodes have p4d.24xlarge)"
    )
    # Nodes of the right kind that are full say so.
    p5 = {**P4D, "node.kubernetes.io/instance-type": "p5.48xlarge"}
    full = Inventory((gpu_node("b", p5, {"nvidia.com/gpu": "4"}),))
    compat, why = checks(run([deployment("train", spec, replicas=1)], inventory=full))["capacity"]
    assert why.endswith("it asks for 8 nvidia.com/gpu on one node; the most free on a node it fits is 4")


def test_the_model_check_agrees_with_the_inventory():
    spec = pod({"nvidia.com/gpu": "1"}, {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"})["spec"]
    inventory = Inventory((gpu_node("a", P4D, {"nvidia.com/gpu": "8"}),))  # A100s only
    compat, why = checks(run([deployment("d", spec)], inventory=inventory))["gpu_model"]
    assert compat == 0.5
    assert why == "H100-80GB offered by eks, but no node of the inventory has it (it has A100-40GB)"
    assert checks(run([deployment("d", spec)]))["gpu_model"] == (1.0, "same model offered: H100-80GB")


def test_a_native_pod_pinned_to_an_instance_type_too_small_for_it_is_said():
    from tests.helpers import parsed, review_of
    from webhook.core.deciding import pipeline

    small = pod({"nvidia.com/gpu": "4"}, {"node.kubernetes.io/instance-type": "g5.xlarge"})
    decision = pipeline.decide(parsed(review_of(small)), context("eks"))
    assert decision.allowed and decision.patch == ()
    assert decision.warnings == (
        "gpuport: no node.kubernetes.io/instance-type named (g5.xlarge) holds 4 GPUs (at most 1): "
        "it stays Pending",
    )
    fits = pod({"nvidia.com/gpu": "4"}, {"node.kubernetes.io/instance-type": "g5.12xlarge"})
    assert pipeline.decide(parsed(review_of(fits)), context("eks")).warnings == ()
    # A sidecar's GPU runs beside the app's on the same node: 1 + 1 do not fit a 1-GPU instance type.
    beside = pod({"nvidia.com/gpu": "1"}, {"node.kubernetes.io/instance-type": "g5.xlarge"})
    beside["spec"]["initContainers"] = [
        {"name": "proxy", "restartPolicy": "Always", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    ]
    assert pipeline.decide(parsed(review_of(beside)), context("eks")).warnings == (
        "gpuport: no node.kubernetes.io/instance-type named (g5.xlarge) holds 2 GPUs (at most 1): "
        "it stays Pending",
    )
    beside["spec"]["initContainers"][0].pop("restartPolicy")  # a plain init container runs alone
    assert pipeline.decide(parsed(review_of(beside)), context("eks")).warnings == ()
