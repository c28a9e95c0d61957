"""`gpuport usage`: the table built from hand-written agent records and pods, with every figure worked
out by hand below; the three output formats; a malformed record; a cluster that cannot be read."""

import json
import re
from fractions import Fraction

import pytest

from tests.helpers import context
from webhook.adapters.kube import kubeclient
from webhook.commands import usage as command
from webhook.commands.cli import main
from webhook.core.migration.usage import usage_report
from webhook.core.migration.usage_record import UsageRecordError, read_measured
from webhook.core.vocabulary.topology import CAPABILITY_ANNOTATION

GKE_SHARING = "cloud.google.com/gke-gpu-sharing-strategy"


def device(index, used, total, compute, processes=(), model="A100-80GB", mig=None, uuid=None):
    return {
        "index": index,
        "uuid": uuid or f"GPU-{index}-{mig or 'whole'}-{used}",
        "model": model,
        "mig_profile": mig,
        "memory_used_mib": used,
        "memory_total_mib": total,
        "compute_percent": compute,
        "processes": [{"pid": pid, "memory_mib": None, "pod_uid": uid} for pid, uid in processes],
    }


def capability(devices, gpus=(), compute=0.5, memory=0.5, full=False):
    """The agent's record: the keys it had before measuring, and `usage` as the agent writes it."""
    return {
        "gpu_count": len(gpus),
        "healthy_gpu_count": len(gpus),
        "gpus": [{"index": i, "model": m, "memory_mib": 81920} for i, m in enumerate(gpus)],
        "usage": {
            "memory_fill_limit": 0.9,
            "devices": devices,
            "util_eff": {"compute": compute, "memory": memory},
            "shared_memory_full": full,
        },
    }


def node(name, record=None, labels=None, allocatable=None):
    annotations = {}
    if record is not None:
        annotations[CAPABILITY_ANNOTATION] = record if isinstance(record, str) else json.dumps(record)
    return {
        "metadata": {"name": name, "labels": labels or {}, "annotations": annotations},
        "status": {"allocatable": allocatable or {}},
    }


def gpu_pod(name, uid, node_name, resource="nvidia.com/gpu", amount="1", phase="Running", namespace="ml"):
    return {
        "metadata": {"name": name, "namespace": namespace, "uid": uid},
        "spec": {
            "nodeName": node_name,
            "containers": [{"name": "c", "image": "x", "resources": {"limits": {resource: amount}}}],
        },
        "status": {"phase": phase},
    }


# gpu-a: GPU 0 whole; GPU 1 cut into two MIG 3g.40gb instances (each 3/7 of an A100).
GPU_A = capability(
    [
        device(0, 40960, 81920, 80, [(100, "uid-train")]),
        device(1, 10240, 40960, None, [(200, "uid-infer-1")], mig="3g.40gb"),
        device(1, 20480, 40960, 50, [(300, "uid-infer-2"), (301, None)], mig="3g.40gb"),
    ],
    gpus=["A100-80GB", "A100-80GB"],
    compute=0.6,
    memory=0.45,
)
# gpu-b: two L4; two pods share GPU 0 (time-slicing), GPU 1's used memory is unknown, its model only
# in the record's gpus list.
GPU_B = capability(
    [
        device(0, 6000, 24000, 40, [(10, "uid-web-1"), (11, "uid-web-2")], model="L4"),
        device(1, None, 24000, None, model=None),
    ],
    gpus=["L4", "L4"],
    compute=0.4,
    memory=0.25,
)
# gpu-c: a GKE time-sharing node; the one process belongs to a pod the API server does not list.
GPU_C = capability([device(0, 3000, 15000, 10, [(400, "abcdef1234567890")], model="T4")], gpus=["T4"])


def cluster():
    nodes = [
        node("gpu-a", GPU_A),
        node("gpu-b", GPU_B),
        node("gpu-c", GPU_C, labels={GKE_SHARING: "time-sharing"}),
        node("gpu-d", allocatable={"nvidia.com/gpu": "4"}),  # no agent here
        node("cpu-1", allocatable={"cpu": "16"}),  # neither GPUs nor an agent: not listed
        node(
            "gpu-e",
            {
                **GPU_C,
                "usage": {
                    **GPU_C["usage"],
                    "devices": [{**GPU_C["usage"]["devices"][0], "memory_used_mib": "lots"}],
                },
            },
        ),
    ]
    pods = [
        gpu_pod("train", "uid-train", "gpu-a"),
        gpu_pod("infer-1", "uid-infer-1", "gpu-a", "nvidia.com/mig-3g.40gb"),
        gpu_pod("infer-2", "uid-infer-2", "gpu-a", "nvidia.com/mig-3g.40gb", phase="Pending"),
        gpu_pod("done", "uid-done", "gpu-a", phase="Succeeded"),  # holds nothing any more
        gpu_pod("web-1", "uid-web-1", "gpu-b", "nvidia.com/gpu.shared"),
        gpu_pod("web-2", "uid-web-2", "gpu-b", "nvidia.com/gpu.shared"),
        gpu_pod("orphan", "uid-orphan", "gpu-d", amount="2"),
        gpu_pod("waiting", "uid-waiting", ""),  # not bound: on no node
    ]
    return nodes, pods


@pytest.fixture(scope="module")
def report():
    nodes, pods = cluster()
    return usage_report(nodes, pods, context("generic"))


def by_name(report):
    return {n.name: n for n in report.nodes}


def test_each_node_is_listed_once_with_its_state_and_cpu_nodes_are_not(report):
    assert [(n.name, n.state) for n in report.nodes] == [
        ("gpu-a", "measured"),
        ("gpu-b", "measured"),
        ("gpu-c", "measured"),
        ("gpu-d", "no agent data"),
        ("gpu-e", "bad agent data"),
    ]


def test_gpu_rows_modes_pods_and_per_gpu_util_eff(report):
    a, b, c = (by_name(report)[n] for n in ("gpu-a", "gpu-b", "gpu-c"))
    rows = [(g.index, g.model, g.mode, g.pods, g.compute, g.memory) for g in a.gpus]
    assert rows == [
        # 40960 / 81920 = 1/2; 80 % busy
        (0, "A100-80GB", "whole", ("ml/train",), Fraction(4, 5), Fraction(1, 2)),
        # MIG instances: 10240 / 40960 = 1/4 (compute unknown); 20480 / 40960 = 1/2, 50 % busy
        (1, "A100-80GB", "MIG 3g.40gb", ("ml/infer-1",), None, Fraction(1, 4)),
        (1, "A100-80GB", "MIG 3g.40gb", ("ml/infer-2",), Fraction(1, 2), Fraction(1, 2)),
    ]
    assert [g.weight for g in a.gpus] == [1, Fraction(3, 7), Fraction(3, 7)]
    # Two pods' processes on GPU 0; GPU 1 is shared because pods on the node ask for a share.
    assert [(g.mode, g.pods, g.model, g.memory) for g in b.gpus] == [
        ("shared", ("ml/web-1", "ml/web-2"), "L4", Fraction(1, 4)),
        ("shared", (), "L4", None),  # model from the record's gpus list; used memory unknown
    ]
    # The node's GKE sharing label; a pod UID the API server does not list is shown by its start.
    assert [(g.mode, g.pods) for g in c.gpus] == [("shared", ("uid abcdef12",))]


def test_node_rows_allocate_gpu_equivalents_as_the_quota_counts_them(report):
    nodes = by_name(report)
    # gpu-a: train 1 + infer-1 1/2 + infer-2 1/2 (Pending but bound) = 2; `done` has Succeeded. A
    # 3g.40gb holds 3 of 7 compute slices but 4 of 8 memory slices: the quota charges it 1/2, not 3/7.
    assert nodes["gpu-a"].pods == ("ml/infer-1", "ml/infer-2", "ml/train")
    assert nodes["gpu-a"].allocated == 2
    assert nodes["gpu-a"].capacity == 2  # GPU indexes 0 and 1
    # gpu-b: two time-sliced slots, each 1 (the generic map says no replicas_per_gpu).
    assert nodes["gpu-b"].allocated == 2
    assert nodes["gpu-c"].allocated == 0
    assert (nodes["gpu-d"].pods, nodes["gpu-d"].allocated) == (("ml/orphan",), 2)
    # The agent's own node figures, as published.
    assert (nodes["gpu-a"].util_eff_compute, nodes["gpu-a"].util_eff_memory) == (0.6, 0.45)
    assert (nodes["gpu-a"].memory_used_mib, nodes["gpu-a"].memory_total_mib) == (71680, 163840)
    assert (nodes["gpu-b"].memory_used_mib, nodes["gpu-b"].memory_total_mib) == (6000, 24000)


def test_cluster_totals_are_sum_used_over_sum_capacity(report):
    t = report.totals
    # gpu-a 2, gpu-b 2, gpu-c 1 measured; gpu-d's 4 as its device plugin advertises them; gpu-e's
    # record is broken and the cluster gives no count for it: left out.
    assert (t.nodes, t.advertised_nodes, t.gpus) == (3, 1, 9)
    # Allocated on the nodes counted: 2 + 2 + 0 + 2 = 6; over 9 GPUs: 6/9 = 0.667.
    assert t.allocated == 6
    assert t.allocation_ratio == Fraction(2, 3)
    # Memory over every GPU with both figures (gpu-b's GPU 1 is left out):
    # used 40960 + 10240 + 20480 + 6000 + 3000 = 80680; total 81920 + 2 × 40960 + 24000 + 15000 = 202840.
    assert (t.memory_used_mib, t.memory_total_mib) == (80680, 202840)
    assert t.memory == Fraction(80680, 202840)  # 0.398
    # Compute in GPU-equivalents, a 3g.40gb instance weighing 3/7:
    # (0.8 × 1 + 0.5 × 3/7 + 0.4 × 1 + 0.1 × 1) ÷ (1 + 3/7 + 1 + 1) = (53/35) ÷ (24/7) = 53/120 = 0.442.
    assert t.compute_capacity == Fraction(24, 7)
    assert t.compute == Fraction(53, 120)


def test_unknown_figures_malformed_records_and_left_out_nodes_are_said(report):
    notes = report.notes
    assert notes[0].startswith("gpu-e: gpuport.io/capability: usage.devices[0].memory_used_mib: ")
    assert (
        "unknown figures (-: the agent could not read them) are left out of every sum: memory of 1 GPU(s), "
        "compute of 2" in notes
    )
    assert "1 GPU process(es) carry no pod UID (not a pod's, or the agent could not tell)" in notes
    assert any(
        n.startswith("1 node(s) without usable agent data (gpu-d): their GPUs are counted") for n in notes
    )
    assert any(
        n.startswith("1 node(s) without usable agent data or a GPU count") and "0 GPU-equiv" in n
        for n in notes
    )
    assert "1 node(s) with no GPU, no GPU pod and no agent data are not listed" in notes


def test_text_output_is_an_aligned_table_with_the_totals():
    nodes, pods = cluster()
    text = command.usage_text(usage_report(nodes, pods, context("generic")))
    lines = text.splitlines()
    header = lines[0]
    assert header.split() == [
        "NODE",
        "GPU",
        "MODEL",
        "MODE",
        "PODS",
        "ALLOCATED",
        "MEMORY",
        "MiB",
        "UTIL_EFF",
        "COMPUTE",
        "UTIL_EFF",
        "MEMORY",
    ]
    table = lines[: lines.index("")]
    # Every cell starts where its header does.
    starts = [header.index(c) for c in ("GPU", "MODEL", "MODE", "PODS", "ALLOCATED", "MEMORY MiB")]
    for line in table[1:]:
        for start in starts:
            assert line[start - 2 : start] == "  ", line
    cells = {tuple(re.split(r"\s{2,}", line)[:2]): re.split(r"\s{2,}", line) for line in table[1:]}
    assert cells[("gpu-a", "all")] == [
        "gpu-a",
        "all",
        "ml/infer-1, ml/infer-2, ml/train",
        "2",
        "71680/163840",
        "60.0%",
        "45.0%",
    ]
    assert cells[("gpu-a", "0")] == [
        "gpu-a",
        "0",
        "A100-80GB",
        "whole",
        "ml/train",
        "40960/81920",
        "80.0%",
        "50.0%",
    ]
    assert ["gpu-b", "1", "L4", "shared", "-", "-", "-", "-"] in cells.values()
    needs = ["needs agent"] * 3
    assert cells[("gpu-d", "4 GPUs")] == ["gpu-d", "4 GPUs", "-", "no agent data", "ml/orphan", "2", *needs]
    assert cells[("TOTAL", "9 GPUs")] == [
        "TOTAL",
        "9 GPUs",
        "3 node(s) measured, 1 advertised",
        "6",
        "6",
        "80680/202840",
        "44.2%",
        "39.8%",
    ]
    assert "Allocation ratio (allocated ÷ GPU capacity): 6 ÷ 9 = 0.667" in lines
    assert any(
        line.startswith("Note: gpu-e: gpuport.io/capability: usage.devices[0].memory_used_mib")
        for line in lines
    )


def test_json_output_carries_the_same_figures():
    nodes, pods = cluster()
    document = json.loads(command.usage_json(usage_report(nodes, pods, context("generic"))))
    assert document["totals"] == {
        "nodes": 3,
        "gpus": 9,
        "allocated": 6.0,
        "allocation_ratio": 0.6667,
        "memory_used_mib": 80680,
        "memory_total_mib": 202840,
        "util_eff": {"compute": 0.4417, "memory": 0.3978},
        "compute_capacity": 3.4286,
        "advertised_nodes": 1,
    }
    a = document["nodes"][0]
    assert (a["node"], a["state"], a["allocated"], a["gpu_count"]) == ("gpu-a", "measured", 2.0, 2)
    assert a["gpus"][1] == {
        "index": 1,
        "uuid": "GPU-1-3g.40gb-10240",
        "model": "A100-80GB",
        "mode": "MIG 3g.40gb",
        "pods": ["ml/infer-1"],
        "processes_without_pod": 0,
        "memory_used_mib": 10240,
        "memory_total_mib": 40960,
        "util_eff": {"compute": None, "memory": 0.25},  # unknown is null, never 0
    }
    bad = document["nodes"][-1]
    assert (bad["state"], bad["gpus"], bad["gpu_count"]) == ("bad agent data", [], None)
    assert bad["problem"].startswith("gpuport.io/capability: usage.devices[0].memory_used_mib")


def test_markdown_output_is_a_pipe_table_with_a_bold_total():
    nodes, pods = cluster()
    text = command.usage_markdown(usage_report(nodes, pods, context("generic")))
    lines = text.splitlines()
    assert lines[0] == "### gpuport usage"
    table = [line for line in lines if line.startswith("|")]
    assert table[0] == (
        "| NODE | GPU | MODEL | MODE | PODS | ALLOCATED | MEMORY MiB | UTIL_EFF COMPUTE | UTIL_EFF MEMORY |"
    )
    assert table[1] == "|---|---|---|---|---|---:|---:|---:|---:|"
    assert all(line.count(" | ") == 8 for line in table[2:])
    assert table[-1] == (
        "| **TOTAL** | **9 GPUs** |  | **3 node(s) measured, 1 advertised** | **6** | **6** "
        "| **80680/202840** "
        "| **44.2%** | **39.8%** |"
    )
    assert "Allocation ratio (allocated ÷ GPU capacity): 6 ÷ 9 = 0.667." in lines
    assert "- 1 GPU process(es) carry no pod UID (not a pod's, or the agent could not tell)" in lines


def test_the_cli_prints_each_format_from_what_it_read(monkeypatch, capsys):
    monkeypatch.setattr(kubeclient, "read_cluster", lambda kubeconfig, read: cluster())
    assert main(["usage", "--kubeconfig", "unused", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["totals"]["gpus"] == 9
    assert main(["usage", "--kubeconfig", "unused", "-o", "markdown"]) == 0
    assert capsys.readouterr().out.startswith("### gpuport usage\n")
    assert main(["usage", "--kubeconfig", "unused"]) == 0
    assert capsys.readouterr().out.startswith("NODE ")


@pytest.mark.parametrize("annotation", ["{not json", "[1, 2]", '{"gpus": [1], "usage": 2}'])
def test_the_cli_prints_the_other_nodes_whatever_one_node_s_annotation_holds(monkeypatch, capsys, annotation):
    nodes, pods = cluster()
    nodes[0]["metadata"]["annotations"][CAPABILITY_ANNOTATION] = annotation
    monkeypatch.setattr(kubeclient, "read_cluster", lambda kubeconfig, read: (nodes, pods))
    assert main(["usage", "--kubeconfig", "unused"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^gpu-a +all +- +bad agent data +ml/infer-1, ml/infer-2, ml/train +2 ", out, re.M)
    assert re.search(r"^gpu-b +0 +L4 +shared ", out, re.M)
    assert "Note: gpu-a: gpuport.io/capability: " in out


def test_an_empty_cluster_has_no_ratio_rather_than_a_division_by_zero():
    report = usage_report([], [], context("generic"))
    assert (report.totals.gpus, report.totals.allocation_ratio, report.totals.memory) == (0, None, None)
    assert "= -" in command.usage_text(report)


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda r: "{not json", "not JSON"),
        (lambda r: "[1, 2]", "not a JSON object"),
        (lambda r: {**r, "usage": []}, "usage: [] is not an object"),
        (lambda r: {**r, "usage": {**r["usage"], "devices": {}}}, "usage.devices: {} is not a list"),
        (
            lambda r: _first_device(r, compute_percent=150),
            "usage.devices[0].compute_percent: 150 is over 100",
        ),
        (lambda r: _first_device(r, index=True), "usage.devices[0].index: true is not a whole number ≥ 0"),
        (
            lambda r: _first_device(r, memory_total_mib=-1),
            "memory_total_mib: -1 is not a whole number ≥ 0 or null",
        ),
        (lambda r: _first_device(r, uuid=7), "usage.devices[0].uuid: 7 is not a string or null"),
        (
            lambda r: _first_device(r, processes=[{"pid": 1, "pod_uid": None}]),
            "processes[0].memory_mib: missing",
        ),
        (
            lambda r: {**r, "usage": {**r["usage"], "util_eff": {"compute": 1.5, "memory": None}}},
            "usage.util_eff.compute: 1.5 is not between 0 and 1",
        ),
        (
            lambda r: {**r, "usage": {**r["usage"], "shared_memory_full": "no"}},
            'usage.shared_memory_full: "no" is not true or false',
        ),
        (
            lambda r: {**r, "usage": {**r["usage"], "memory_fill_limit": 0}},
            "usage.memory_fill_limit: 0.0 is not in (0, 1]",
        ),
    ],
)
def test_a_malformed_record_is_said_for_its_node_and_the_others_are_still_printed(change, said):
    record = change(GPU_C)
    text = record if isinstance(record, str) else json.dumps(record)
    with pytest.raises(UsageRecordError, match=re.escape(said)):
        read_measured(text)
    nodes = [node("bad", record), node("good", GPU_C)]
    report = usage_report(nodes, [], context("generic"))
    assert [(n.name, n.state) for n in report.nodes] == [("bad", "bad agent data"), ("good", "measured")]
    assert said in report.notes[0] and report.notes[0].startswith("bad: gpuport.io/capability: ")
    assert report.totals.gpus == 1


def test_an_agent_from_before_usage_is_said_not_refused():
    record = {k: v for k, v in GPU_C.items() if k != "usage"}
    assert read_measured(json.dumps(record)) is None
    report = usage_report([node("old", record)], [], context("generic"))
    assert [(n.name, n.state) for n in report.nodes] == [("old", "no usage data")]


def _first_device(record, **changes):
    usage = record["usage"]
    return {**record, "usage": {**usage, "devices": [{**usage["devices"][0], **changes}]}}


@pytest.mark.parametrize(
    ("kubeconfig", "said"),
    [
        ("missing", "Invalid kube-config file. No configuration found."),
        ("text", "TypeError"),
        ("broken", "ParserError"),
    ],
)
def test_a_bad_kubeconfig_is_one_line_and_exit_2(tmp_path, capsys, kubeconfig, said):
    files = {"text": "just text\n", "broken": "clusters: [\n"}
    path = tmp_path / kubeconfig
    if kubeconfig in files:
        path.write_text(files[kubeconfig])
    assert main(["usage", "--kubeconfig", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gpuport usage: kubeconfig {path}: ") and said in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_an_unreachable_cluster_is_one_line_and_exit_2(tmp_path, capsys):
    from tests.server_process import free_port

    port = free_port()  # nothing listens there
    path = tmp_path / "kubeconfig"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "t",
                "clusters": [{"name": "t", "cluster": {"server": f"https://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {"token": "x"}}],
                "contexts": [{"name": "t", "context": {"cluster": "t", "user": "u"}}],
            }
        )
    )
    assert main(["usage", "--kubeconfig", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gpuport usage: cannot reach https://127.0.0.1:{port}: ")
    assert "Connection refused" in err and err.count("\n") == 1


def test_the_default_kubeconfig_is_kubeconfig_from_the_environment(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "from-env"))
    assert main(["usage"]) == 2
    assert f"kubeconfig {tmp_path / 'from-env'}: " in capsys.readouterr().err


def test_the_readme_shows_the_table_the_command_prints():
    from tests.helpers import REPO

    readme = (REPO / "README.md").read_text()
    shown = (
        readme.split("### Measured usage: `gpuport usage`", 1)[1].split("```\nNODE", 1)[1].split("```", 1)[0]
    )
    nodes, pods = cluster()
    two = [p for p in pods if p["spec"]["nodeName"] in ("gpu-a", "gpu-b")]
    printed = command.usage_text(usage_report(nodes[:2], two, context("generic")))
    assert "NODE" + shown == printed.split("Util_eff:", 1)[0]


def test_a_compute_instance_weighs_its_own_slices_and_an_unknown_uuid_is_no_error():
    # go-nvlib names a compute instance of 1 slice in a 3g GPU instance "1c.3g.40gb": 3/7 × 1/3 = 1/7 of
    # an A100. An unparsable profile cannot be weighed: its compute is left out of the totals, and said.
    record = capability(
        [
            {**device(0, 1000, 10000, 70, mig="1c.3g.40gb"), "uuid": None},
            device(0, 1000, 10000, 30, mig="weird"),
        ],
        gpus=["A100-80GB"],
    )
    report = usage_report([node("mig", record)], [], context("generic"))
    assert [(g.mode, g.weight) for g in report.nodes[0].gpus] == [
        ("MIG 1c.3g.40gb", Fraction(1, 7)),
        ("MIG weird", None),
    ]
    assert (report.totals.compute_capacity, report.totals.compute) == (Fraction(1, 7), Fraction(7, 10))
    assert report.totals.memory == Fraction(2000, 20000)
    assert any("not a known MIG profile" in note for note in report.notes)


def test_without_agents_the_cluster_s_own_word_gives_gpus_and_models():
    """Day one, no node agent: the device plugin's allocatable and the labels the cluster carries."""
    instance = "node.kubernetes.io/instance-type"
    nodes = [
        node("p5", labels={instance: "p5.48xlarge"}, allocatable={"nvidia.com/gpu": "8"}),
        node("gfd", labels={"nvidia.com/gpu.product": "NVIDIA-L4"}, allocatable={"nvidia.com/gpu": "12"}),
        # time-slicing without renaming: 2 GPUs advertised 4 times each, as GFD says
        node(
            "sliced",
            labels={"nvidia.com/gpu.product": "Tesla-T4-SHARED", "nvidia.com/gpu.replicas": "4"},
            allocatable={"nvidia.com/gpu": "8"},
        ),
        # mixed MIG advertises slices only: the count is GFD's
        node(
            "mig",
            labels={"nvidia.com/gpu.count": "1"},
            allocatable={"nvidia.com/mig-3g.40gb": "2"},
        ),
    ]
    pods = [gpu_pod("train", "uid-train", "p5", amount="2")]
    report = usage_report(nodes, pods, context("generic"))
    rows = {n.name: (n.state, n.advertised, n.model, n.allocated) for n in report.nodes}
    assert rows == {
        "p5": ("no agent data", 8, "H100-80GB", 2),
        "gfd": ("no agent data", 12, "L4", 0),
        "sliced": ("no agent data", 2, "T4", 0),
        "mig": ("no agent data", 1, None, 0),
    }
    t = report.totals
    assert (t.nodes, t.advertised_nodes, t.gpus, t.allocated) == (0, 4, 23, 2)
    assert t.allocation_ratio == Fraction(2, 23)
    assert (t.memory, t.compute) == (None, None)  # only the agent measures these
    text = command.usage_text(report)
    assert re.search(
        r"^gfd +12 GPUs +L4 +no agent data +- +0 +needs agent +needs agent +needs agent$", text, re.M
    )
    assert re.search(r"^TOTAL +23 GPUs +0 node\(s\) measured, 4 advertised +1 +2 ", text, re.M)
    assert "need the node agent" in text


@pytest.mark.parametrize(
    "command",
    [
        "gpuport usage --inventory examples/inventories/generic-measured.yaml",
        "gpuport explain --inventory examples/inventories/generic-measured.yaml "
        "examples/manifests/multi-gpu.yaml",
    ],
)
def test_the_readme_shows_what_the_shipped_example_prints(command, monkeypatch, capsys):
    from tests.helpers import REPO

    monkeypatch.chdir(REPO)
    capsys.readouterr()
    assert main(command.split()[1:]) == 0
    printed = capsys.readouterr().out
    assert f"```\n$ {command}\n{printed}```\n" in (REPO / "README.md").read_text()


def test_the_shipped_measured_example_is_made_from_the_fixtures():
    from tests.inventories import MEASURED_EXAMPLE, measured_example_text

    assert MEASURED_EXAMPLE.read_text() == measured_example_text()


def test_usage_reads_nodes_and_pods_from_a_file(tmp_path, capsys):
    path = tmp_path / "dump.yaml"
    nodes, pods = cluster()
    for item in nodes:
        item["kind"] = "Node"
    for item in pods:
        item["kind"] = "Pod"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": nodes + pods}))
    assert main(["usage", "--inventory", str(path), "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["totals"]["gpus"] == 9
    assert main(["usage", "--inventory", str(tmp_path / "absent.yaml")]) == 2
    assert "gpuport usage: " in capsys.readouterr().err


def test_usage_shows_a_namespace_over_its_gpu_budget(tmp_path, capsys):
    """Issue 45: a quota made while gpuport was down (2.29 GPU-equivalents admitted against 1) was shown
    by nothing; `gpuport usage` lists each GPU quota beside what its pods hold, and says OVER."""
    path = tmp_path / "dump.yaml"
    nodes, _ = cluster()
    for item in nodes:
        item["kind"] = "Node"
    pods = [  # one not bound yet: the quota counts it all the same
        gpu_pod("a", "uid-a", "gpu-d", amount="2"),
        gpu_pod("b", "uid-b", "", "nvidia.com/mig-2g.20gb", phase="Pending"),
    ]
    for body in pods:
        body["kind"] = "Pod"
    quota = {
        "kind": "ResourceQuota",
        "metadata": {"name": "gpus", "namespace": "ml"},
        "spec": {"hard": {"requests.nvidia.com/gpu": "1"}},
    }
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [*nodes, *pods, quota]}))
    assert main(["usage", "--inventory", str(path)]) == 0
    text = capsys.readouterr().out
    assert "  ml/gpus  requests.nvidia.com/gpu  2.286 ÷ 1  OVER" in text
    assert "Warning: namespace ml is over its GPU budget: quota gpus allows requests.nvidia.com/gpu=1" in text
    assert main(["usage", "--inventory", str(path), "-o", "json"]) == 0
    (budget,) = json.loads(capsys.readouterr().out)["budgets"]
    assert (budget["namespace"], budget["used"], budget["limit"], budget["over"]) == ("ml", 2.2857, 1.0, True)
    assert main(["usage", "--inventory", str(path), "-o", "markdown"]) == 0
    assert "| ml | gpus | requests.nvidia.com/gpu | 2.286 | 1 | **OVER** |" in capsys.readouterr().out
