"""The package as users install it: a wheel built from this tree, installed into a fresh virtualenv
and run from a folder outside the repository, carries its cloud maps, GPU catalogue and MIG
placements: translate, lint, plan mig and serve (to readiness) work with no checkout beside them."""

import shutil
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.server_process import free_port

REPO = Path(__file__).resolve().parents[2]


def run(*command, cwd, timeout=300):
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def test_the_wheel_installs_and_works_outside_the_repository(tmp_path):
    wheels = tmp_path / "wheels"
    built = run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--quiet",
        "--no-deps",
        "-w",
        str(wheels),
        str(REPO),
        cwd=tmp_path,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = wheels.glob("gpuport-*.whl")
    venv = tmp_path / "venv"
    assert run(sys.executable, "-m", "venv", str(venv), cwd=tmp_path).returncode == 0
    installed = run(str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel), cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr
    gpuport = str(venv / "bin" / "gpuport")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(REPO / "tests" / "manifests" / "gke-l4-vllm-spot.yaml", elsewhere / "gke.yaml")

    translated = run(gpuport, "translate", "--to", "eks", "gke.yaml", cwd=elsewhere)
    assert translated.returncode == 0, translated.stderr
    assert "node.kubernetes.io/instance-type" in translated.stdout

    # The shipped maps are in the package, not beside it: lint one copied out of it.
    listing = run(
        str(venv / "bin" / "python"),
        "-c",
        "from webhook.config.cloudmap import default_directory; print(default_directory())",
        cwd=elsewhere,
    )
    shipped = Path(listing.stdout.strip())
    assert shipped.is_relative_to(venv) and (shipped / "gpus.yaml").is_file()
    shutil.copy(shipped / "eks.yaml", elsewhere / "eks.yaml")
    linted = run(gpuport, "lint", "eks.yaml", cwd=elsewhere)
    assert linted.returncode == 0, linted.stdout + linted.stderr

    # The MIG placements are package data too: a plan needs no checkout.
    shutil.copy(REPO / "examples" / "manifests" / "mig-inference.yaml", elsewhere / "mig.yaml")
    shutil.copy(REPO / "examples" / "inventories" / "eks.yaml", elsewhere / "nodes.yaml")
    planned = run(
        gpuport,
        "plan",
        "mig",
        "--from",
        "gke",
        "--to",
        "eks",
        "--inventory",
        "nodes.yaml",
        "mig.yaml",
        cwd=elsewhere,
    )
    assert planned.returncode == 0, planned.stderr
    assert "mig-configs:" in planned.stdout

    certs = run(gpuport, "certs", "--out", "tls", "--dns", "localhost", "--ip", "127.0.0.1", cwd=elsewhere)
    assert certs.returncode == 0, certs.stderr
    port = free_port()
    server = subprocess.Popen(
        [gpuport, "serve", "--bind", f"127.0.0.1:{port}", "--cert-dir", "tls", "--workers", "1"],
        cwd=elsewhere,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        context = ssl.create_default_context(cafile=str(elsewhere / "tls" / "ca.crt"))
        deadline, answer = time.monotonic() + 60, None
        while time.monotonic() < deadline and answer is None:
            try:
                with urllib.request.urlopen(
                    f"https://127.0.0.1:{port}/readyz", context=context, timeout=2
                ) as r:
                    answer = (r.status, r.read().decode().strip())
            except OSError:
                time.sleep(0.3)
        assert answer == (200, "ok"), server.stdout.read1().decode() if server.stdout else ""
    finally:
        server.terminate()
        server.wait(20)
