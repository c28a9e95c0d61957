"""`gpuport rightsize --prometheus` against a real Prometheus server (Debian's `prometheus` package; CI
installs it, .ci/run says how): a week of the node agents' series is backfilled with `promtool`, the server
started on loopback on that data, and the adapter's figures compared with what was written, each worked out
here from the samples the way Prometheus defines its functions."""

import math
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from fractions import Fraction

import pytest

from webhook.adapters.prometheus.pod_usage import PrometheusUnreadable, read_pod_usage

WEEK = 7 * 86400
STEP = 60
P95 = Fraction(95, 100)
MIB = 2**20


def binary(name):
    folder = os.environ.get("PROMETHEUS_BIN_DIR")
    found = os.path.join(folder, name) if folder else shutil.which(name)
    if not found or not os.access(found, os.X_OK):
        pytest.skip(
            f"{name} not found: install Debian's prometheus package (apt-get install prometheus) or set "
            "PROMETHEUS_BIN_DIR; .ci/run installs it, so CI runs these tests"
        )
    return found


def prometheus_quantile(q, values):
    """quantile_over_time as Prometheus defines it: rank q·(n−1) over the sorted values, interpolated."""
    ordered = sorted(values)
    rank = q * (len(ordered) - 1)
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def series(at):
    """What the agents' /metrics gave, every STEP: u1 all week and an hour before it (one 15000 MiB spike),
    u2 the last day only, u3 on a MIG instance (memory, never compute)."""
    memory, compute = {}, {}
    for t in range(at - WEEK - 3600, at + 1, STEP):
        n = (t // STEP) % 97
        memory.setdefault("u1", []).append((t, (15000 if t == at - 3 * 86400 else 8000 + n) * MIB))
        compute.setdefault("u1", []).append((t, round(n / 240, 4)))
        memory.setdefault("u3", []).append((t, 4000 * MIB))
        if t > at - 86400:
            memory.setdefault("u2", []).append((t, 20000 * MIB))
            compute.setdefault("u2", []).append((t, 0.5))
    return memory, compute


def openmetrics(memory, compute):
    lines = []
    for name, per_pod in (
        ("gpuport_pod_gpu_memory_bytes", memory),
        ("gpuport_pod_gpu_compute_ratio", compute),
    ):
        lines.append(f"# TYPE {name} gauge")
        for uid, samples in sorted(per_pod.items()):
            lines += [f'{name}{{node="n1",pod_uid="{uid}"}} {v} {t}' for t, v in samples]
    return "\n".join(lines) + "\n# EOF\n"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    prometheus, promtool = binary("prometheus"), binary("promtool")
    folder = tmp_path_factory.mktemp("prometheus")
    at = int(time.time()) // STEP * STEP - 600
    memory, compute = series(at)
    (folder / "week.om").write_text(openmetrics(memory, compute))
    data = folder / "data"
    subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(folder / "week.om"), str(data)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (folder / "prometheus.yml").write_text("global:\n  scrape_interval: 1m\nscrape_configs: []\n")
    port = free_port()
    process = subprocess.Popen(
        [
            prometheus,
            f"--config.file={folder / 'prometheus.yml'}",
            f"--storage.tsdb.path={data}",
            "--storage.tsdb.retention.time=30d",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(folder / "prometheus.log", "w"),  # noqa: SIM115 (the server's life is the module's)
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as answer:
                if answer.status == 200:
                    break
        except OSError:
            pass
        if time.monotonic() > deadline or process.poll() is not None:
            process.kill()
            pytest.fail(f"prometheus did not become ready: {(folder / 'prometheus.log').read_text()[-2000:]}")
        time.sleep(0.2)
    yield url, at, memory, compute
    process.terminate()
    process.wait(timeout=30)


def test_peaks_percentiles_and_coverage_read_from_a_real_prometheus(server):
    url, at, _, compute = server
    usage = read_pod_usage(url, WEEK, P95, at)
    assert sorted(usage) == ["u1", "u2", "u3"]
    in_window = [v for t, v in compute["u1"] if at - WEEK < t <= at]
    u1 = usage["u1"]
    assert u1.peak_memory_mib == 15000
    assert float(u1.compute) == pytest.approx(prometheus_quantile(0.95, in_window), abs=1e-9)
    assert u1.memory_covered_s == u1.compute_covered_s == WEEK
    u2 = usage["u2"]
    assert (u2.peak_memory_mib, u2.compute) == (20000, Fraction(1, 2))
    assert 86400 <= u2.memory_covered_s <= 86400 + 300
    u3 = usage["u3"]
    assert (u3.peak_memory_mib, u3.compute, u3.compute_covered_s) == (4000, None, 0)
    # A shorter window leaves the spike three days back out.
    assert read_pod_usage(url, 2 * 86400, P95, at)["u1"].peak_memory_mib == 8000 + 96


def test_a_query_prometheus_refuses_is_said_with_its_reason(server):
    url, at, _, _ = server
    with pytest.raises(PrometheusUnreadable, match=r"HTTP 400: .*"):
        read_pod_usage(url, 0, P95, at)  # a zero-length range: Prometheus answers 400 with why
