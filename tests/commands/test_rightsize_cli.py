"""`gpuport rightsize` end to end on files: the shipped example (made by the node agent from a public
nvidia-smi capture), the README kept true, manifests with only their asks changed, and bad input."""

import json

import pytest

from tests.helpers import REPO
from webhook.commands.cli import main

EXAMPLE = "examples/inventories/generic-rightsize.yaml"
AT = "2026-12-01T00:00:00Z"


def run(args, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    capsys.readouterr()
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_shipped_example_is_what_the_agent_writes_sampling_the_recorded_machine():
    from tests.rightsize_example import example_cluster

    assert (REPO / EXAMPLE).read_text() == example_cluster()


def test_the_readme_shows_what_the_shipped_example_prints(capsys, monkeypatch):
    command = f"gpuport rightsize --inventory {EXAMPLE} --at {AT} --plan"
    code, printed, _ = run(command.split()[1:], capsys, monkeypatch)
    assert code == 0
    assert f"```\n$ {command}\n{printed}```\n" in (REPO / "README.md").read_text()


def test_the_example_right_sizes_both_triton_pods_to_slices_that_hold_their_peaks(capsys, monkeypatch):
    code, printed, _ = run(
        ["rightsize", "--inventory", EXAMPLE, "--at", AT, "-o", "json"], capsys, monkeypatch
    )
    assert code == 0
    found = {w["workload"]: w for w in json.loads(printed)["workloads"]}
    large, small = found["Deployment/serving/triton-large"], found["Deployment/serving/triton-small"]
    # The capture: 14972 and 2730 MiB of the tritonserver processes, GPU-Util 0 %, measured all week.
    assert (large["peak_memory_mib"], large["compute_gpus"], large["memory_covered_s"]) == (14972, 0, 604800)
    assert large["proposal"]["resources"] == {"nvidia.com/mig-1g.20gb": "1"}
    assert large["proposal"]["memory_mib"] >= 14972 * 1.2
    assert small["proposal"]["resources"] == {"nvidia.com/mig-1g.10gb": "1"}


def test_a_window_the_history_does_not_cover_proposes_nothing_and_says_so(capsys, monkeypatch):
    late = ["rightsize", "--inventory", EXAMPLE, "--at", "2026-12-06T00:00:00Z", "-o", "json"]
    code, printed, _ = run(late, capsys, monkeypatch)
    assert code == 0
    for workload in json.loads(printed)["workloads"]:
        assert workload["proposal"] is None
        assert workload["reason"].startswith("too little history: memory measured for 2.0 d of 7.0 d")


def test_yaml_prints_the_manifests_with_only_the_asks_changed(capsys, monkeypatch):
    args = [
        "rightsize",
        "--inventory",
        EXAMPLE,
        "--at",
        AT,
        "-o",
        "yaml",
        "examples/manifests/triton-serving.yaml",
    ]
    code, printed, said = run(args, capsys, monkeypatch)
    assert code == 0
    original = (REPO / "examples/manifests/triton-serving.yaml").read_text().splitlines()
    changed = [(a, b) for a, b in zip(original, printed.splitlines(), strict=True) if a != b]
    assert [b.strip() for _, b in changed] == [
        "nvidia.com/mig-1g.20gb: 1  # one A100 80GB",  # the author's two spaces kept
        "nvidia.com/mig-1g.10gb: 1",
    ]
    assert "Deployment/serving/triton-large: triton: nvidia.com/gpu: 1 → nvidia.com/mig-1g.20gb: 1" in said


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--window", "7x"], "is not a duration such as 90m, 36h, 7d or 2w"),
        (["--headroom", "lots"], "is not a number such as 0.2 or 20%"),
        (["--at", "yesterday"], "is not a time such as 2026-12-01T00:00:00Z"),
    ],
)
def test_bad_options_are_said_by_name(args, said, capsys, monkeypatch):
    with pytest.raises(SystemExit) as exit_:
        run(["rightsize", "--inventory", EXAMPLE, *args], capsys, monkeypatch)
    assert exit_.value.code == 2
    assert said in capsys.readouterr().err


def test_yaml_without_manifests_and_an_unreachable_prometheus_are_bad_input(capsys, monkeypatch):
    code, _, said = run(["rightsize", "--inventory", EXAMPLE, "-o", "yaml"], capsys, monkeypatch)
    assert code == 2 and "-o yaml prints the workloads' manifests: name them" in said
    args = ["rightsize", "--inventory", EXAMPLE, "--prometheus", "http://127.0.0.1:9"]
    code, _, said = run(args, capsys, monkeypatch)
    assert code == 2 and said.startswith("gpuport rightsize: Prometheus: http://127.0.0.1:9/api/v1/query:")
