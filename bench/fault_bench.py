"""Faults an operator meets, against a real kube-apiserver, with GPU quota in force: gpuport starting
while GPU pods arrive, a worker killed under load, the API server frozen, 40 slowloris clients.
Reviews are sent straight to gpuport's /validate (as the API server would), in a namespace whose GPU
quota is already full and in one without a quota. What must hold: no GPU pod admitted over the quota,
ever; pods without a quota answered within a second throughout.

    KUBEBUILDER_ASSETS=/path/to/bin .venv/bin/python bench/fault_bench.py [--seconds 6]
"""

import argparse
import json
import os
import signal
import ssl
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.helpers import review_of  # noqa: E402
from tests.integration.conftest import ApiServer, kubeconfig  # noqa: E402
from tests.server_process import RunningServer, make_certs  # noqa: E402
from tests.translation_cases import pod  # noqa: E402

FULL, FREE = "quota-full", "no-quota"


class Prober:
    """Sends GPU-pod reviews in a loop from a few threads; records answers and latencies."""

    def __init__(self, server: RunningServer, namespace: str, threads: int = 3):
        self.server, self.namespace = server, namespace
        self.context = ssl.create_default_context(cafile=str(server.ca_file))
        self.results: list[tuple[float, bool | None]] = []  # (seconds, allowed; None: no answer)
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._loop, daemon=True) for _ in range(threads)]

    def start(self):
        for thread in self._threads:
            thread.start()
        return self

    def stop(self):
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _loop(self):
        while not self._stop.is_set():
            uid = uuid.uuid4().hex
            body = dict(
                pod({"nvidia.com/gpu": "1"}),
                metadata={"name": uid[:12], "namespace": self.namespace, "uid": uid},
            )
            envelope = review_of(body, uid=uid)
            envelope["request"]["namespace"] = self.namespace
            review = json.dumps(envelope).encode()
            started = time.perf_counter()
            try:
                request = urllib.request.Request(
                    self.server.url("/validate"), data=review, headers={"Content-Type": "application/json"}
                )
                with urllib.request.urlopen(request, context=self.context, timeout=6) as response:
                    allowed = json.loads(response.read())["response"]["allowed"]
            except OSError:
                allowed = None
            self.results.append((time.perf_counter() - started, allowed))

    def summary(self) -> dict:
        seconds = sorted(s for s, _ in self.results) or [0.0]
        return {
            "reviews": len(self.results),
            "admitted": sum(1 for _, a in self.results if a is True),
            "refused": sum(1 for _, a in self.results if a is False),
            "unanswered": sum(1 for _, a in self.results if a is None),
            "p50_ms": round(statistics.median(seconds) * 1000, 1),
            "p99_ms": round(seconds[int(len(seconds) * 0.99) - 1 if len(seconds) > 1 else 0] * 1000, 1),
            "max_ms": round(seconds[-1] * 1000, 1),
        }


def prepare(api_client) -> None:
    from kubernetes import client

    core = client.CoreV1Api(api_client)
    for name in (FULL, FREE, "gpuport-system"):
        core.create_namespace({"metadata": {"name": name}})
        core.create_namespaced_service_account(name, {"metadata": {"name": "default"}})
    core.create_namespaced_resource_quota(
        FULL, {"metadata": {"name": "gpus"}, "spec": {"hard": {"requests.nvidia.com/gpu": "4"}}}
    )
    for n in range(4):  # the quota is used up before gpuport starts
        body = pod({"nvidia.com/gpu": "1"}, name=f"running-{n}")
        body["metadata"].pop("namespace")
        core.create_namespaced_pod(FULL, body)


class Slowloris:
    """Clients that open TLS connections and trickle a request's headers a byte at a time, forever,
    reconnecting whenever the server cuts them off."""

    def __init__(self, server: RunningServer, clients: int = 40):
        self.server, self.clients = server, clients
        self.context = ssl.create_default_context(cafile=str(server.ca_file))
        self._stop = threading.Event()
        self.cut_off = 0

    def start(self):
        for _ in range(self.clients):
            threading.Thread(target=self._client, daemon=True).start()
        return self

    def stop(self):
        self._stop.set()

    def _client(self):
        import socket

        request = b"POST /validate HTTP/1.1\r\nHost: gpuport\r\nContent-Type: application/json\r\n"
        while not self._stop.is_set():
            try:
                raw = socket.create_connection(("127.0.0.1", self.server.port), timeout=10)
                with self.context.wrap_socket(raw, server_hostname="gpuport.gpuport-system.svc") as tls:
                    for byte in request * 100:
                        if self._stop.is_set():
                            return
                        tls.sendall(bytes([byte]))
                        time.sleep(0.2)
            except OSError:
                self.cut_off += 1


def workers_of(master_pid: int) -> list[int]:
    children = Path(f"/proc/{master_pid}/task/{master_pid}/children").read_text().split()
    return [int(pid) for pid in children]


def run_scenario(name, server, seconds, during) -> dict:
    probes = {ns: Prober(server, ns).start() for ns in (FULL, FREE)}
    during()
    time.sleep(seconds)
    for prober in probes.values():
        prober.stop()
    return {"scenario": name, **{ns: p.summary() for ns, p in probes.items()}}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=6.0)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "apiserver").mkdir()
        (work / "tls").mkdir()
        api = ApiServer(work / "apiserver")
        server = None
        try:
            prepare(api.client())
            make_certs(work / "tls")
            env = {
                "GPUPORT_CLUSTER": str(kubeconfig(api, work / "kubeconfig")),
                "GPUPORT_NAMESPACE": "gpuport-system",
            }
            server = RunningServer(
                work / "tls", workers=2, threads=4, extra_env=env, log_path=work / "gpuport.log"
            )
            # Starting: probes race the views' first lists.
            rows.append(run_scenario("gpuport starting", server, args.seconds, lambda: None))
            victim = workers_of(server.process.pid)[0]
            rows.append(
                run_scenario(
                    "a worker SIGKILLed", server, args.seconds, lambda: os.kill(victim, signal.SIGKILL)
                )
            )

            def freeze():
                os.kill(api.apiserver.pid, signal.SIGSTOP)
                threading.Timer(args.seconds * 0.6, os.kill, (api.apiserver.pid, signal.SIGCONT)).start()

            rows.append(run_scenario("API server frozen", server, args.seconds, freeze))
            time.sleep(args.seconds)  # the API server back, and the quota slots free again
            loris = Slowloris(server)
            rows.append(run_scenario("40 slowloris clients", server, args.seconds, loris.start))
            loris.stop()
            print(f"slowloris connections cut off by the server: {loris.cut_off}", file=sys.stderr)
        finally:
            os.kill(api.apiserver.pid, signal.SIGCONT)
            if server is not None:
                server.stop()
            api.stop()
    print(
        f"{'scenario':22} {'namespace':11} {'reviews':>7} {'admitted':>8} {'refused':>7} {'no answer':>9} "
        f"{'p50 ms':>7} {'p99 ms':>7} {'max ms':>7}"
    )
    for row in rows:
        for ns in (FULL, FREE):
            s = row[ns]
            print(
                f"{row['scenario']:22} {ns:11} {s['reviews']:>7} {s['admitted']:>8} {s['refused']:>7} "
                f"{s['unanswered']:>9} {s['p50_ms']:>7} {s['p99_ms']:>7} {s['max_ms']:>7}"
            )
    over = sum(row[FULL]["admitted"] for row in rows)
    print(f"GPU pods admitted over the full quota: {over}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
