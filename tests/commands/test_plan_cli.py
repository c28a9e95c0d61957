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


def _write(tmp_path, name, documents):
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(documents), encoding="utf-8")
    return str(path)


def test_the_shipped_example_is_planned_into_valid_layouts_that_hold_every_slice(capsys):
    code, out, err = _plan(capsys, EXAMPLE, "--from", "gke", "--to", "eks", "--inventory", EKS)
    assert (code, err) == (0, "")
    config, patches = [d for d in yaml.safe_load_all(out) if d is not None]
    assert config["version"] == "v1"
    capacity: dict[str, int] = {}
    for node in patches["items"]:
        assert (patches["apiVersion"], patches["kind"], node["kind"]) == ("v1", "List", "Node")
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
    assert with_from[0] == 0 and "mig-configs: {}" not in with_from[1]


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
    (pools,) = [d for d in yaml.safe_load_all(out) if d is not None]
    # 1g.5gb: seven to an A100 40GB, so ten take two GPUs of a 1g.5gb pool.
    assert pools == {"nodePools": [{"model": "A100-40GB", "migProfile": "1g.5gb", "gpus": 2, "slices": 10}]}


def test_an_aks_target_gets_pools_to_create_with_its_instance_profile_and_no_node_label(capsys):
    # AKS sets MIG per node pool at creation (--gpu-instance-profile): no mig-parted configuration, no
    # nvidia.com/mig.config patch, which nothing on AKS would act on.
    aks = str(ROOT / "examples/inventories/aks.yaml")
    code, out, err = _plan(capsys, EXAMPLE, "--from", "gke", "--to", "aks", "--inventory", aks)
    assert (code, err) == (0, "")
    assert "mig.config" not in out and "mig-configs" not in out
    (pools,) = [d for d in yaml.safe_load_all(out) if d is not None]
    # 9 × 1g.5gb: seven to a GPU; 3 × 2g.10gb: three; 4 × 3g.20gb: two.
    assert pools == {
        "nodePools": [
            {"model": "A100-40GB", "migProfile": "1g.5gb", "gpus": 2, "slices": 9},
            {"model": "A100-40GB", "migProfile": "2g.10gb", "gpus": 1, "slices": 3},
            {"model": "A100-40GB", "migProfile": "3g.20gb", "gpus": 2, "slices": 4},
        ]
    }
    assert "#   A100-40GB 3g.20gb, 2 GPU(s): a node pool created with --gpu-instance-profile MIG3g" in (
        out.splitlines()
    )


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
    (pools,) = [d for d in yaml.safe_load_all(out) if d is not None]
    assert pools == {"nodePools": [{"model": "A100-40GB", "migProfile": "2g.10gb", "gpus": 1, "slices": 3}]}


def test_a_dynamic_mig_target_needs_no_layout(tmp_path, capsys):
    manifest = _write(
        tmp_path, "small.yaml", [_deployment("small", {"limits": {"nvidia.com/mig-1g.5gb": 1}}, 3)]
    )
    hami = str(ROOT / "examples/inventories/hami.yaml")
    code, out, _ = _plan(capsys, manifest, "--from", "eks", "--to", "hami", "--inventory", hami)
    assert code == 0
    assert [d for d in yaml.safe_load_all(out) if d is not None] == []
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
    config, patches = [d for d in yaml.safe_load_all(out) if d is not None]
    # The two running 1g.5gb pods fit a100-a's layout today, left alone; the four 3g.20gb take two
    # GPUs of the node where nothing runs, so nothing is drained.
    assert [n["metadata"]["name"] for n in patches["items"]] == ["a100-b"]
    entries = config["mig-configs"][patches["items"][0]["metadata"]["labels"]["nvidia.com/mig.config"]]
    assert [(e["devices"], e["mig-devices"]) for e in entries] == [
        ([0, 1], {"3g.20gb": 2}),
        ([2, 3, 4, 5, 6, 7], {"1g.5gb": 7}),  # as today: the label said all-1g.5gb
    ]
    assert "#   a100-b: drain no GPU pods" in out.splitlines()


def test_a_node_that_must_change_says_its_pods_to_drain_and_a_workload_it_would_take_down(tmp_path, capsys):
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(textwrap.dedent(INVENTORY_WITH_PODS), encoding="utf-8")
    manifest = _write(
        tmp_path, "m.yaml", [_deployment("train", {"limits": {"nvidia.com/mig-3g.20gb": 1}}, 30)]
    )
    code, out, _ = _plan(capsys, manifest, "--from", "eks", "--to", "eks", "--inventory", str(inventory))
    assert code == 0  # 30 × 3g.20gb take 15 GPUs, a100-a's among them; one GPU left holds the 1g.5gb
    comments = out.splitlines()
    assert "#   a100-a: drain team/web-7d9-a1, team/web-7d9-x2" in comments
    warning = "every running replica of ReplicaSet/team/web-7d9 is on a100-a: scale it out before draining"
    assert f"#     warning: {warning}" in comments


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
