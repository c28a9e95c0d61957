"""`gpuport plan mig` on manifests and inventories written for these tests and the shipped examples:
the YAML it writes is a mig-parted configuration whose every GPU layout is valid and holds the slices
asked, and label patches that point each changed node at it."""

import json
import textwrap
from pathlib import Path

import pytest
import yaml

from webhook.commands.cli import main
from webhook.config.cloudmap import default_directory, load_directory
from webhook.config.mig_geometry import load_geometry
from webhook.core.planning.layouts import check_layout

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "examples/manifests/mig-inference.yaml")
EKS = str(ROOT / "examples/inventories/eks.yaml")
GEOMETRY = load_geometry(load_directory(default_directory()).catalogue)


def _plan(capsys, *args):
    code = main(["plan", "mig", *args])
    out, err = capsys.readouterr()
    return code, out, err


def _deployment(name, resources, replicas=1, node_selector=None):
    template = {"containers": [{"name": "main", "image": "example.com/app:1", "resources": resources}]}
    if node_selector:
        template["nodeSelector"] = node_selector
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "team"},
        "spec": {"replicas": replicas, "template": {"spec": template}},
    }


def _stream(out):
    """The documents of a plan: each one kubectl can apply (apiVersion and kind), the ConfigMap first,
    its mig-parted configuration read back, then the Nodes in the order to change them."""
    documents = [d for d in yaml.safe_load_all(out) if d is not None]
    assert all(d.get("apiVersion") and d.get("kind") for d in documents), documents
    if not documents:
        return None, []
    config_map, *nodes = documents
    assert (config_map["kind"], [n["kind"] for n in nodes]) == ("ConfigMap", ["Node"] * len(nodes))
    return yaml.safe_load(config_map["data"]["config.yaml"]), nodes


def _write(tmp_path, name, documents):
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(documents), encoding="utf-8")
    return str(path)


def test_the_shipped_example_is_planned_into_valid_layouts_that_hold_every_slice(capsys):
    code, out, err = _plan(capsys, EXAMPLE, "--from", "gke", "--to", "eks", "--inventory", EKS)
    assert (code, err) == (0, "")
    config, nodes = _stream(out)
    assert config["version"] == "v1"
    capacity: dict[str, int] = {}
    for node in nodes:
        entries = config["mig-configs"][node["metadata"]["labels"]["nvidia.com/mig.config"]]
        assert sorted(i for e in entries for i in e["devices"]) == list(range(8))  # every GPU of a p4d
        for entry in entries:
            assert "0x20B010DE" in entry["device-filter"]  # A100-SXM4-40GB
            layout = entry.get("mig-devices", {})
            assert entry["mig-enabled"] == bool(layout)
            assert check_layout(GEOMETRY["A100-40GB"], layout).fits
            for name, count in layout.items():
                capacity[name] = capacity.get(name, 0) + count * len(entry["devices"])
    asked = {"3g.20gb": 4, "1g.5gb": 9, "2g.10gb": 3}  # the example's replicas × slices
    assert all(capacity.get(name, 0) >= count for name, count in asked.items()), capacity


def test_without_from_asks_are_read_in_every_dialect_as_translate_reads_them(capsys):
    # The example is written for GKE partitions: without --from they are still slices, not whole GPUs.
    with_from = _plan(capsys, EXAMPLE, "--from", "gke", "--to", "eks", "--inventory", EKS)
    assert _plan(capsys, EXAMPLE, "--to", "eks", "--inventory", EKS) == with_from
    assert with_from[0] == 0 and _stream(with_from[1])[1]


def test_the_table_shows_demand_against_capacity_per_profile(capsys):
    code, out, _ = _plan(capsys, EXAMPLE, "--from", "gke", "--to", "eks", "--inventory", EKS, "-o", "table")
    assert code == 0
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.startswith("  ")}
    assert rows["3g.20gb"] == ["4", "4", "0"]
    assert rows["2g.10gb"] == ["3", "3", "0"]
    assert "A100-40GB: 4 of 32 GPUs serve slices (no plan needs fewer than 4), 8 repartitioned" in out


def test_slices_that_do_not_fit_are_said_in_gpus_of_the_model_and_exit_1(tmp_path, capsys):
    selector = {
        "cloud.google.com/gke-accelerator": "nvidia-tesla-a100",
        "cloud.google.com/gke-gpu-partition-size": "3g.20gb",
    }
    manifest = _write(
        tmp_path, "big.yaml", [_deployment("big", {"limits": {"nvidia.com/gpu": 1}}, 20, selector)]
    )
    small = str(ROOT / "examples/inventories/eks-small.yaml")
    code, out, err = _plan(capsys, manifest, "--from", "gke", "--to", "eks", "--inventory", small)
    assert code == 1
    said = "short on A100-40GB: 4 × 3g.20gb do not fit; it would take 2 more A100-40GB GPU(s)"
    assert f"gpuport plan mig: {said}" in err
    assert f"# not fitting: {said}" in out


def test_a_gke_target_gets_the_node_pools_to_create(tmp_path, capsys):
    manifest = _write(
        tmp_path, "small.yaml", [_deployment("small", {"limits": {"nvidia.com/mig-1g.5gb": 1}}, 10)]
    )
    gke = str(ROOT / "examples/inventories/gke.yaml")
    code, out, _ = _plan(capsys, manifest, "--from", "eks", "--to", "gke", "--inventory", gke)
    assert code == 0
    assert _stream(out) == (None, [])  # nothing for kubectl: GKE partitions a pool when it is created
    # 1g.5gb: seven to an A100 40GB, so ten take two GPUs: one a2-highgpu-8g node of a 1g.5gb pool.
    lines = out.splitlines()
    assert "#   A100-40GB 1g.5gb: 10 slice(s), 2 GPU(s), 1 node(s) of 8 GPUs" in lines
    command = (
        'gcloud container node-pools create mig-a100-40gb-1g-5gb --cluster "$CLUSTER" --location "$LOCATION" '
        "--machine-type a2-highgpu-8g --num-nodes 1 "
        "--accelerator type=nvidia-tesla-a100,count=8,gpu-partition-size=1g.5gb"
    )
    assert f"#     {command}" in lines
    code, script, _ = _plan(
        capsys, manifest, "--from", "eks", "--to", "gke", "--inventory", gke, "-o", "commands"
    )
    assert code == 0 and "..." not in script
    assert [line for line in script.splitlines() if not line.startswith("#")] == ["set -eu", command]


def test_an_aks_target_gets_pools_to_create_with_its_instance_profile_and_no_node_label(capsys):
    # AKS sets MIG per node pool at creation (--gpu-instance-profile): no mig-parted configuration, no
    # nvidia.com/mig.config patch, which nothing on AKS would act on.
    aks = str(ROOT / "examples/inventories/aks.yaml")
    code, out, err = _plan(capsys, EXAMPLE, "--from", "gke", "--to", "aks", "--inventory", aks)
    assert (code, err) == (0, "")
    assert "mig.config" not in out and "mig-configs" not in out and "..." not in out
    assert _stream(out) == (None, [])
    # 9 × 1g.5gb: seven to a GPU; 3 × 2g.10gb: three; 4 × 3g.20gb: two. A Standard_ND96asr_v4 holds 8
    # A100s: each pool is one node, not "2 GPUs".
    lines = out.splitlines()
    for profile, slices, gpus in (("1g.5gb", 9, 2), ("2g.10gb", 3, 1), ("3g.20gb", 4, 2)):
        assert f"#   A100-40GB {profile}: {slices} slice(s), {gpus} GPU(s), 1 node(s) of 8 GPUs" in lines
    assert (
        '#     az aks nodepool add --resource-group "$RESOURCE_GROUP" --cluster-name "$CLUSTER" '
        "--name mig3g20gb --node-vm-size Standard_ND96asr_v4 --node-count 1 --gpu-instance-profile MIG3g"
    ) in lines


def test_an_aks_pool_is_of_a_profile_aks_sells_for_the_model(tmp_path, capsys):
    # An A100 40GB has a 1g.10gb profile, but an AKS MIG1g pool cuts it into 1g.5gb: the ask is
    # translated to the smallest slice AKS sells that holds it, a MIG2g pool's 2g.10gb.
    selector = {"node.kubernetes.io/instance-type": "Standard_ND96asr_v4"}
    manifest = _write(
        tmp_path, "m.yaml", [_deployment("d", {"limits": {"nvidia.com/mig-1g.10gb": 1}}, 3, selector)]
    )
    aks = str(ROOT / "examples/inventories/aks.yaml")
    code, out, err = _plan(capsys, manifest, "--from", "aks", "--to", "aks", "--inventory", aks)
    assert (code, err) == (0, "")
    assert _stream(out) == (None, [])
    assert "#   A100-40GB 2g.10gb: 3 slice(s), 1 GPU(s), 1 node(s) of 8 GPUs" in out.splitlines()


def test_a_dynamic_mig_target_needs_no_layout(tmp_path, capsys):
    manifest = _write(
        tmp_path, "small.yaml", [_deployment("small", {"limits": {"nvidia.com/mig-1g.5gb": 1}}, 3)]
    )
    hami = str(ROOT / "examples/inventories/hami.yaml")
    code, out, _ = _plan(capsys, manifest, "--from", "eks", "--to", "hami", "--inventory", hami)
    assert code == 0
    assert _stream(out) == (None, [])
    assert "hami cuts MIG instances when pods arrive" in out


INVENTORY_WITH_PODS = """
apiVersion: v1
kind: List
items:
- kind: Node
  metadata:
    name: a100-a
    labels:
      node.kubernetes.io/instance-type: p4d.24xlarge
      nvidia.com/mig.config: all-1g.5gb
  status:
    allocatable: {nvidia.com/mig-1g.5gb: '56'}
- kind: Node
  metadata:
    name: a100-b
    labels:
      node.kubernetes.io/instance-type: p4d.24xlarge
      nvidia.com/mig.config: all-1g.5gb
  status:
    allocatable: {nvidia.com/mig-1g.5gb: '56'}
- kind: Pod
  metadata:
    name: web-7d9-x2
    namespace: team
    ownerReferences: [{kind: ReplicaSet, name: web-7d9}]
  spec:
    nodeName: a100-a
    containers:
    - name: main
      resources: {limits: {nvidia.com/mig-1g.5gb: 1}}
  status: {phase: Running}
- kind: Pod
  metadata:
    name: web-7d9-a1
    namespace: team
    ownerReferences: [{kind: ReplicaSet, name: web-7d9}]
  spec:
    nodeName: a100-a
    containers:
    - name: main
      resources: {limits: {nvidia.com/mig-1g.5gb: 1}}
  status: {phase: Running}
"""


def test_nodes_serving_today_are_kept_and_changed_ones_are_drained_first(tmp_path, capsys):
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(textwrap.dedent(INVENTORY_WITH_PODS), encoding="utf-8")
    manifest = _write(
        tmp_path, "m.yaml", [_deployment("train", {"limits": {"nvidia.com/mig-3g.20gb": 1}}, 4)]
    )
    code, out, _ = _plan(capsys, manifest, "--from", "eks", "--to", "eks", "--inventory", str(inventory))
    assert code == 0
    config, nodes = _stream(out)
    # The two running 1g.5gb pods fit a100-a's layout today, left alone; the four 3g.20gb take two
    # GPUs of the node where nothing runs, so nothing is drained.
    assert [n["metadata"]["name"] for n in nodes] == ["a100-b"]
    entries = config["mig-configs"][nodes[0]["metadata"]["labels"]["nvidia.com/mig.config"]]
    assert [(e["devices"], e["mig-devices"]) for e in entries] == [
        ([0, 1], {"3g.20gb": 2}),
        ([2, 3, 4, 5, 6, 7], {"1g.5gb": 7}),  # as today: the label said all-1g.5gb
    ]
    assert "# 1/1 a100-b: no GPU pods run here: cordon it, then apply its label" in out.splitlines()
    # a100-a keeps all-1g.5gb: the ConfigMap, which apply writes whole, still carries it.
    assert config["mig-configs"]["all-1g.5gb"] == [
        {
            "device-filter": ["0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"],
            "devices": "all",
            "mig-enabled": True,
            "mig-devices": {"1g.5gb": 7},
        }
    ]


def test_a_node_that_must_change_says_its_pods_to_drain_and_a_workload_it_would_take_down(tmp_path, capsys):
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(textwrap.dedent(INVENTORY_WITH_PODS), encoding="utf-8")
    manifest = _write(
        tmp_path, "m.yaml", [_deployment("train", {"limits": {"nvidia.com/mig-3g.20gb": 1}}, 30)]
    )
    code, out, _ = _plan(capsys, manifest, "--from", "eks", "--to", "eks", "--inventory", str(inventory))
    assert code == 0  # 30 × 3g.20gb take 15 GPUs, a100-a's among them; one GPU left holds the 1g.5gb
    comments = out.splitlines()
    assert (
        "# 2/2 a100-a: drain team/web-7d9-a1, team/web-7d9-x2 first (kubectl drain), then apply its label"
        in (comments)
    )
    warning = "every running replica of ReplicaSet/team/web-7d9 is on a100-a: scale it out before draining"
    assert f"#   warning: {warning}" in comments


def test_preflight_points_at_the_plan_when_slices_are_asked(capsys):
    main(["preflight", EXAMPLE, "--from", "gke", "--to", "eks", "--inventory", EKS])
    out = capsys.readouterr().out
    assert "MIG slices are asked by 3 workload(s)" in out
    assert "`gpuport plan mig FILE... --from gke --to eks --inventory NODES`" in out


def test_preflight_says_nothing_of_mig_when_only_whole_gpus_are_asked(tmp_path, capsys):
    manifest = _write(tmp_path, "whole.yaml", [_deployment("whole", {"limits": {"nvidia.com/gpu": 2}}, 2)])
    main(["preflight", manifest, "--from", "eks", "--to", "eks", "-o", "json"])
    report = json.loads(capsys.readouterr().out)
    assert report["workloads"] and report["mig_slices"] == []


@pytest.mark.parametrize(
    "command",
    [
        "gpuport plan mig --from gke --to eks --inventory examples/inventories/eks.yaml -o table "
        "examples/manifests/mig-inference.yaml",
        "gpuport plan mig --from gke --to eks --inventory examples/inventories/eks.yaml -o commands "
        "examples/manifests/mig-inference.yaml",
        "gpuport plan mig --from gke --to aks --inventory examples/inventories/aks.yaml "
        "examples/manifests/mig-inference.yaml",
    ],
)
def test_the_readme_shows_what_the_shipped_example_plans(monkeypatch, capsys, command):
    monkeypatch.chdir(ROOT)
    assert main(command.split()[1:]) == 0
    printed = capsys.readouterr().out
    assert f"```\n$ {command}\n{printed}```\n" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_table_says_per_wave_what_is_asked_and_the_first_wave_that_does_not_fit(tmp_path, capsys):
    serve = _deployment("serve", {"limits": {"nvidia.com/mig-3g.20gb": 1}}, 10)
    train = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "team"},
        "spec": {"parallelism": 10, "template": {"spec": serve["spec"]["template"]["spec"]}},
    }
    manifest = _write(tmp_path, "waves.yaml", [train, serve])
    small = str(ROOT / "examples/inventories/eks-small.yaml")  # one p4d: 8 GPUs, 16 × 3g.20gb at most
    code, out, _ = _plan(
        capsys,
        manifest,
        "--from",
        "eks",
        "--to",
        "eks",
        "--inventory",
        small,
        "--wave-size",
        "1",
        "-o",
        "table",
    )
    assert code == 1
    # Stateless first (the Deployment), then training: 10 slices fit, 20 do not.
    assert "  wave 1 (1 workload(s)): 3g.20gb ×10: fits" in out.splitlines()
    assert "  wave 2 (1 workload(s)): 3g.20gb ×20: does not fit" in out.splitlines()


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    empty = tmp_path / "nodes.yaml"
    empty.write_text("kind: List\nitems: []\n", encoding="utf-8")
    code, out, err = _plan(capsys, "--to", "eks", "--inventory", str(empty))
    assert (code, out) == (2, "")
    assert err == (
        f"gpuport plan mig: inventory {empty}: the inventory holds no Node objects "
        "(use `kubectl get nodes -o yaml`)\n"
    )
    code, _, err = _plan(capsys, "--to", "mars", "--inventory", EKS)
    assert code == 2 and err.startswith("gpuport plan mig: no cloud map named 'mars'")


def test_nothing_to_change_is_an_empty_plan_not_an_empty_mig_parted_file(tmp_path, capsys):
    # Two 1g.5gb pods fit a100-a's all-1g.5gb layout as it is: no document at all, and no
    # `mig-configs: {}`, which mig-parted refuses.
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(textwrap.dedent(INVENTORY_WITH_PODS), encoding="utf-8")
    manifest = _write(tmp_path, "m.yaml", [_deployment("web", {"limits": {"nvidia.com/mig-1g.5gb": 1}}, 2)])
    code, out, err = _plan(capsys, manifest, "--from", "eks", "--to", "eks", "--inventory", str(inventory))
    assert (code, err) == (0, "")
    assert _stream(out) == (None, []) and "mig-configs" not in out
    assert "# nothing to change: the nodes' MIG layouts hold what is asked as they are" in out.splitlines()


def test_the_plan_says_the_strategy_it_needs_and_the_configurations_it_cannot_carry(tmp_path, capsys):
    inventory = tmp_path / "inventory.yaml"
    text = textwrap.dedent(INVENTORY_WITH_PODS).replace(
        "    name: a100-b\n    labels:\n",
        "    name: a100-b\n    labels:\n      nvidia.com/mig.strategy: single\n",
    )
    # a100-a runs a configuration of the admin's own: gpuport cannot write it, so it is named.
    text = text.replace("nvidia.com/mig.config: all-1g.5gb", "nvidia.com/mig.config: team-custom", 1)
    inventory.write_text(text, encoding="utf-8")
    manifest = _write(tmp_path, "m.yaml", [_deployment("t", {"limits": {"nvidia.com/mig-3g.20gb": 1}}, 4)])
    args = ["--from", "eks", "--to", "eks", "--inventory", str(inventory), "--mig-config-name", "custom-mig"]
    code, out, _ = _plan(capsys, manifest, *args, "--gpu-operator-namespace", "nvidia-gpu-operator")
    assert code == 0
    lines = out.splitlines()
    assert any(
        line.startswith("# these layouts need the GPU Operator's MIG strategy mixed") for line in lines
    )
    assert "#   nodes reporting nvidia.com/mig.strategy=single today: a100-b" in lines
    assert any("ConfigMap nvidia-gpu-operator/custom-mig (the ClusterPolicy's" in line for line in lines)
    assert any(line.startswith("#   merge by hand before applying: nodes use team-custom,") for line in lines)
    documents = [d for d in yaml.safe_load_all(out) if d is not None]
    assert documents[0]["metadata"] == {"name": "custom-mig", "namespace": "nvidia-gpu-operator"}


def test_commands_change_one_node_at_a_time_in_drain_order(tmp_path, capsys):
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(textwrap.dedent(INVENTORY_WITH_PODS), encoding="utf-8")
    manifest = _write(
        tmp_path, "m.yaml", [_deployment("train", {"limits": {"nvidia.com/mig-3g.20gb": 1}}, 30)]
    )
    args = ["--from", "eks", "--to", "eks", "--inventory", str(inventory)]
    code, script, _ = _plan(capsys, manifest, *args, "-o", "commands")
    assert code == 0 and script.startswith("#!/bin/sh\n")
    commands = [line for line in script.splitlines() if line.startswith("kubectl")]
    assert commands[0] == "kubectl apply -f - <<'EOF'"
    name = yaml.safe_load(_plan(capsys, manifest, *args)[1].split("---")[-1])["metadata"]["labels"]
    config = name["nvidia.com/mig.config"]
    state = "'{.metadata.labels.nvidia\\.com/mig\\.config\\.state}'=success"
    # a100-b (nothing running) first, a100-a (two pods to drain) second; each node whole before the next.
    for node, at in (("a100-b", 1), ("a100-a", 6)):
        got = commands[at : at + 5]
        assert got[0] == f"kubectl cordon {node}"
        assert got[1] == f"kubectl drain {node} --ignore-daemonsets --delete-emptydir-data --timeout=15m"
        assert got[2].startswith(f"kubectl label node {node} --overwrite nvidia.com/mig.config=gpuport-")
        assert got[2].endswith(" nvidia.com/mig.config.state-")
        assert got[3] == f"kubectl wait node/{node} --for=jsonpath={state} --timeout=30m"
        assert got[4] == f"kubectl uncordon {node}"
    assert config in commands[8]
