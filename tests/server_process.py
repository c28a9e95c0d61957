"""Start the real `gpuport serve` (gunicorn, gthread, TLS) on a free loopback port, for tests and bench."""

import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from certs.files import write_bundle
from certs.issue import issue_bundle, service_dns_names

SERVICE_NAME = "gpuport.gpuport-system.svc"
REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def make_certs(directory: Path) -> None:
    write_bundle(directory, issue_bundle(service_dns_names("gpuport", "gpuport-system"), ["127.0.0.1"]))


class RunningServer:
    def __init__(
        self,
        cert_dir: Path,
        *,
        workers: int = 2,
        threads: int = 4,
        cloud: str = "generic",
        log_path: Path | None = None,
        extra_env: dict | None = None,
        cloudmap_dir: Path | None = None,
        baselines: bool = False,
    ):
        self.cert_dir = cert_dir
        self.port = free_port()
        self.log_path = log_path or cert_dir / "server.log"
        # "{port}" in a value is the port this server listens on (GPUPORT_WEBHOOK_URL, say).
        own = {k: str(v).replace("{port}", str(self.port)) for k, v in (extra_env or {}).items()}
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **own}
        env.pop("PROMETHEUS_MULTIPROC_DIR", None)
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [
                sys.executable,
                # The benches' baselines beside the admission routes (bench/baseline_app.py).
                *([str(REPO / "bench" / "baseline_app.py")] if baselines else ["-m", "webhook"]),
                "serve",
                "--bind",
                f"127.0.0.1:{self.port}",
                "--cert-dir",
                str(cert_dir),
                "--workers",
                str(workers),
                "--threads",
                str(threads),
                "--cloud",
                cloud,
                *(["--cloudmap-dir", str(cloudmap_dir)] if cloudmap_dir else []),
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        self._wait_healthy()

    @property
    def ca_file(self) -> Path:
        return self.cert_dir / "ca.crt"

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def _wait_healthy(self, timeout: float = 30) -> None:
        context = ssl.create_default_context(cafile=str(self.ca_file))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"gpuport serve exited {self.process.returncode}:\n{self.log()}")
            try:
                with urllib.request.urlopen(self.url("/healthz"), context=context, timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"gpuport serve did not become healthy:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        return self.process.returncode
