"""What an operator takes from gpuport beside the server: alert rules and a dashboard whose every metric
the server really exposes, a shell completion script that completes, and help texts written from the
tables the code reads."""

import json
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from tests.helpers import REPO

OPTIONAL = REPO / "manifests" / "optional"


def exposed_metrics() -> set[str]:
    """The metric families a fresh server's /metrics lists (histograms with their _bucket/_sum/_count)."""
    from tests.helpers import context
    from webhook.adapters.http.server import ServerState, create_app

    app = create_app(ServerState(context=context()))
    text = app.test_client().get("/metrics").get_data(as_text=True)
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            name, kind = line.split()[2:4]
            names.add(name)
            if kind == "histogram":
                names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
            if kind == "counter":
                names.add(f"{name}_total" if not name.endswith("_total") else name)
    return names


def named_metrics(text: str) -> set[str]:
    return set(re.findall(r"\bgpuport_[a-z_]+\b", text))


def test_every_metric_the_alerts_and_the_dashboard_name_is_one_the_server_exposes():
    rules = yaml.safe_load((OPTIONAL / "prometheus-rules.yaml").read_text())
    expressions = [r["expr"] for group in rules["spec"]["groups"] for r in group["rules"]]
    dashboard = json.loads(
        yaml.safe_load((OPTIONAL / "grafana-dashboard.yaml").read_text())["data"]["gpuport.json"]
    )
    queries = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    used = named_metrics(" ".join(expressions + queries))
    assert used, "the rules name no metric"
    assert used <= exposed_metrics(), used - exposed_metrics()
    reasons = set(re.findall(r"quota-[a-z-]+", " ".join(expressions)))
    from pathlib import Path

    source = " ".join(p.read_text() for p in Path(REPO / "webhook" / "adapters" / "kube").glob("*.py"))
    assert reasons and all(f'"{reason}"' in source for reason in reasons), (
        "an alert names a reason never given"
    )


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash on this machine")
def test_the_bash_completion_script_completes_commands_flags_and_cloud_names():
    from webhook.commands.cli import main

    script = subprocess.run(
        [sys.executable, "-m", "webhook", "completion", "bash"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
    ).stdout
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0

    def complete(*words):
        line = " ".join(f'"{w}"' for w in words)
        probe = (
            f'{script}\nCOMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; _gpuport; echo "${{COMPREPLY[@]}}"'
        )
        return subprocess.run(
            ["bash", "-c", probe], capture_output=True, text=True, check=True
        ).stdout.split()

    assert complete("gpuport", "tr") == ["translate"]
    assert complete("gpuport", "translate", "--to", "ek") == ["eks"]
    assert "--dra-api-version" in complete("gpuport", "translate", "--dr")
    assert main(["completion", "zsh"]) == 0


def test_translate_s_help_lists_every_kind_the_table_reads():
    from webhook.core.vocabulary.templates import TEMPLATE_PATHS

    help_text = subprocess.run(
        [sys.executable, "-m", "webhook", "translate", "--help"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
    ).stdout
    flat = " ".join(help_text.split())
    assert all(kind in flat for _, kind in TEMPLATE_PATHS)
    assert "Job (batch.volcano.sh)" in flat
