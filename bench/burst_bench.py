"""A burst of GPU pod creates in one quota'd namespace through a real kube-apiserver, with two gpuport
replicas behind one address (as a Service spreads them): how many are admitted (exactly the quota,
never more), how fast, and how large the reservation Lease is at the end.

The same burst first runs with the webhooks pointed at the servers' allow-all route (same processes,
TLS and API server, no decision, in a namespace without quota): the ceiling this machine allows, which
the gpuport figures are read against.

    KUBEBUILDER_ASSETS=/path/to/bin .venv/bin/python bench/burst_bench.py [--creates 1000] [--quota 500]
"""

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kubernetes import client  # noqa: E402
from kubernetes.client.exceptions import ApiException  # noqa: E402

from tests.integration.conftest import ApiServer, RoundRobinProxy, kubeconfig, register_webhooks  # noqa: E402
from tests.server_process import RunningServer, make_certs  # noqa: E402
from tests.translation_cases import pod  # noqa: E402
from webhook.adapters.http.settings import Settings  # noqa: E402

NAMESPACE = "burst"
BASELINE_NAMESPACE = "baseline"
SETTLE_SECONDS = 3  # a reservation leaves the Lease once its pod is in the views and 2 s old


@dataclass
class Burst:
    outcomes: list[str] = field(default_factory=list)
    others: list[str] = field(default_factory=list)
    admitted_at: list[float] = field(default_factory=list)
    elapsed: float = 0.0

    def admitted(self) -> int:
        return self.outcomes.count("created")

    def reviews_per_second(self) -> float:
        return len(self.outcomes) / self.elapsed

    def admissions_per_second(self) -> float:
        """Pods admitted per second until the last admission (once the quota is full, refusals follow)."""
        return self.admitted() / (max(self.admitted_at) if self.admitted_at else self.elapsed)


def burst(pods, namespace: str, creates: int, clients: int, prefix: str) -> Burst:
    result = Burst()

    def create(n: int) -> None:
        body = pod({"nvidia.com/gpu": "1"}, name=f"{prefix}{n}")
        body["metadata"].pop("namespace")
        try:
            pods.create_namespaced_pod(namespace, body)
            result.outcomes.append("created")
            result.admitted_at.append(time.perf_counter() - started)
        except ApiException as exc:
            message = json.loads(exc.body).get("message", "")
            result.outcomes.append("quota" if "exceeded quota" in message else "other")
            if "exceeded quota" not in message:
                result.others.append(message[-150:])

    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(create, range(creates)))
    result.elapsed = time.perf_counter() - started
    return result


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--creates", type=int, default=1000)
    parser.add_argument("--quota", type=int, default=500)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--workers", type=int, default=Settings().workers)
    parser.add_argument("--threads", type=int, default=Settings().threads)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for folder in ("apiserver", "tls"):
            (work / folder).mkdir()
        api = ApiServer(work / "apiserver")
        servers = []
        try:
            core = client.CoreV1Api(api.client())
            for name in (NAMESPACE, BASELINE_NAMESPACE, "gpuport-system"):
                core.create_namespace({"metadata": {"name": name}})
                core.create_namespaced_service_account(name, {"metadata": {"name": "default"}})
            core.create_namespaced_resource_quota(
                NAMESPACE,
                {
                    "metadata": {"name": "gpus"},
                    "spec": {"hard": {"requests.nvidia.com/gpu": str(args.quota)}},
                },
            )
            make_certs(work / "tls")
            env = {
                "GPUPORT_CLUSTER": str(kubeconfig(api, work / "kubeconfig")),
                "GPUPORT_NAMESPACE": "gpuport-system",
                "GPUPORT_BENCH_BASELINE": "1",
            }
            servers = [
                RunningServer(
                    work / "tls",
                    workers=args.workers,
                    threads=args.threads,
                    extra_env=env,
                    log_path=work / f"gpuport-{n}.log",
                )
                for n in range(args.replicas)
            ]
            # One replica is called directly; several share an address through a proxy, as a Service.
            port = RoundRobinProxy([s.port for s in servers]).port if len(servers) > 1 else servers[0].port
            url, ca = f"https://127.0.0.1:{port}", (work / "tls" / "ca.crt").read_bytes()
            # One client with a pool as wide as the burst: a new client per create costs a TLS handshake
            # each and caps this harness near 24 creates/s with no webhook at all.
            configuration = api.client().configuration
            configuration.connection_pool_maxsize = args.clients
            pods = client.CoreV1Api(client.ApiClient(configuration))

            register_webhooks(api.client(), url, ca, route="/bench/allow-all")
            baseline = burst(pods, BASELINE_NAMESPACE, args.creates, args.clients, "a")
            register_webhooks(api.client(), url, ca)
            time.sleep(2)  # every worker's view synced (readyz would say so)
            measured = burst(pods, NAMESPACE, args.creates, args.clients, "b")
            leases = client.CoordinationV1Api(api.client())
            lease_name = f"gpuport-quota-{NAMESPACE}"
            at_end = leases.read_namespaced_lease(lease_name, "gpuport-system")
            stored = len(core.list_namespaced_pod(NAMESPACE).items)
        finally:
            for server in servers:
                server.stop()
            api.stop()
    annotation = (at_end.metadata.annotations or {}).get("gpuport.io/reservations", "")
    for message, count in Counter(m.split(":")[-1].strip()[:90] for m in measured.others).most_common(4):
        print(f"  {count:5} x {message}")
    admitted = measured.admitted()
    print(
        f"{args.creates} creates, {args.clients} at a time, "
        f"{args.replicas} replicas x {args.workers} workers x {args.threads} threads\n"
        f"  allow-all baseline: {baseline.reviews_per_second():.0f} creates/s "
        f"({baseline.admitted()} created)\n"
        f"  gpuport, quota {args.quota}: {admitted} admitted ({stored} stored), "
        f"{measured.outcomes.count('quota')} over quota, "
        f"{measured.outcomes.count('other')} refused otherwise (fail closed)\n"
        f"    {measured.reviews_per_second():.0f} reviews/s "
        f"({measured.reviews_per_second() / baseline.reviews_per_second():.2f}x baseline), "
        f"{measured.admissions_per_second():.0f} admissions/s until the last one\n"
        f"    Lease annotation at the end: {len(annotation) / 1024:.1f} KiB"
    )
    return 0 if admitted <= args.quota and stored == admitted else 1


if __name__ == "__main__":
    sys.exit(main())
