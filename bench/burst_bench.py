"""A burst of GPU pod creates in one quota'd namespace through a real kube-apiserver, with two gpuport
replicas behind one address (as a Service spreads them): how many are admitted (exactly the quota,
never more), how fast, and how large the reservation Lease is at the end.

A quota far above the burst (`--quota 1000000 --rate 46 --creates 3000 --other-pods 5000`, issue 37)
measures what quota costs when it never binds: every refusal then is a false one (gpuport's own, not
the quota's), and the latency of each tenth of the burst shows whether the reservation record grows
with it. `--simultaneous 200` then sends 200 /validate reviews for one quota'd namespace at the same moment,
to gpuport and to the allow-all route of the same server.

`--never-created` (issue 49) gives each burst's namespace a built-in quota on CPU already used up (its
status filled in as the quota controller would) and has every pod ask for CPU: gpuport admits each pod
and the API server refuses it after, as a Job retrying against a full CPU quota meets it. No pod is ever
created, so each reservation lives until its API server can no longer create the pod; a refusal by
gpuport is then a false one, and the Lease's size shows whether the record grows with the burst.

The same burst also runs with the webhooks pointed at the servers' allow-all route (same processes,
TLS and API server, no decision), in a namespace whose built-in ResourceQuota admits as many pods as
gpuport's quota: the API server stores the same number of pods and refuses the same number, so the two
figures differ by gpuport's decisions alone. The rounds alternate which runs first (a warmer API
server and etcd favour the second), and the medians are reported.

    KUBEBUILDER_ASSETS=/path/to/bin .venv/bin/python bench/burst_bench.py [--creates 1000] [--quota 500]
        [--rate 46] [--other-pods 5000] [--simultaneous 200] [--workers 2] [--never-created]
"""

import argparse
import json
import ssl
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kubernetes import client  # noqa: E402
from kubernetes.client.exceptions import ApiException  # noqa: E402

from tests.helpers import review_of  # noqa: E402
from tests.integration.conftest import ApiServer, RoundRobinProxy, kubeconfig, register_webhooks  # noqa: E402
from tests.server_process import RunningServer, make_certs  # noqa: E402
from tests.translation_cases import pod  # noqa: E402
from webhook.adapters.http.settings import Settings  # noqa: E402

SETTLE_SECONDS = 3  # a reservation leaves the Lease once its pod is in the views and 2 s old


@dataclass
class Burst:
    outcomes: list[str] = field(default_factory=list)
    others: list[str] = field(default_factory=list)
    admitted_at: list[float] = field(default_factory=list)
    latencies: list[tuple[int, float]] = field(default_factory=list)  # (create's number, seconds)
    elapsed: float = 0.0

    def admitted(self) -> int:
        return self.outcomes.count("created")

    def reviews_per_second(self) -> float:
        return len(self.outcomes) / self.elapsed

    def admissions_per_second(self) -> float:
        """Pods admitted per second until the last admission (once the quota is full, refusals follow)."""
        return self.admitted() / (max(self.admitted_at) if self.admitted_at else self.elapsed)

    def tenths(self) -> list[float]:
        """The median latency (ms) of each tenth of the burst, in the order the creates were sent."""
        ordered = [seconds for _, seconds in sorted(self.latencies)]
        size = max(len(ordered) // 10, 1)
        return [1000 * statistics.median(ordered[k : k + size]) for k in range(0, size * 10, size)]


def burst(
    pods, namespace: str, creates: int, clients: int, prefix: str, rate: float = 0.0, cpu: bool = False
) -> Burst:
    """`creates` pod creates from `clients` threads; with `rate`, create n is sent no earlier than
    n/rate seconds after the start (a steady stream), else as fast as the clients go. `cpu`: each pod
    asks for CPU too, and one refused by the built-in quota after the webhooks (not by gpuport) is
    counted "after"."""
    result = Burst()

    def create(n: int) -> None:
        asks = {"nvidia.com/gpu": "1", **({"cpu": "100m"} if cpu else {})}
        body = pod(asks, name=f"{prefix}{n}")
        body["metadata"].pop("namespace")
        if rate:
            time.sleep(max(started + n / rate - time.perf_counter(), 0.0))
        sent = time.perf_counter()
        try:
            pods.create_namespaced_pod(namespace, body)
            result.outcomes.append("created")
            result.admitted_at.append(time.perf_counter() - started)
        except ApiException as exc:
            message = json.loads(exc.body).get("message", "")
            if cpu and "admission webhook" not in message and "exceeded quota: cpu" in message:
                result.outcomes.append("after")
            else:
                result.outcomes.append("quota" if "exceeded quota" in message else "other")
                if "exceeded quota" not in message:
                    result.others.append(message[-150:])
        result.latencies.append((n, time.perf_counter() - sent))

    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(create, range(creates)))
    result.elapsed = time.perf_counter() - started
    return result


def quota_namespace(core, name: str, quota: int, builtin: bool, cpu_full: bool = False) -> None:
    """A namespace with a GPU quota: gpuport's (requests.nvidia.com/gpu) or, for the baseline, the
    built-in one on the same key, its status filled in as the quota controller would (none runs here).
    `cpu_full`: also a built-in quota on CPU, used up, that refuses every pod asking for CPU."""
    core.create_namespace({"metadata": {"name": name}})
    core.create_namespaced_service_account(name, {"metadata": {"name": "default"}})
    hard = {"requests.nvidia.com/gpu": str(quota)}
    core.create_namespaced_resource_quota(name, {"metadata": {"name": "gpus"}, "spec": {"hard": hard}})
    if builtin:
        core.patch_namespaced_resource_quota_status(
            "gpus", name, {"status": {"hard": hard, "used": {"requests.nvidia.com/gpu": "0"}}}
        )
    if cpu_full:
        cpu = {"requests.cpu": "1"}
        core.create_namespaced_resource_quota(name, {"metadata": {"name": "cpu"}, "spec": {"hard": cpu}})
        core.patch_namespaced_resource_quota_status("cpu", name, {"status": {"hard": cpu, "used": cpu}})


def reviews_at_once(url: str, ca_file: Path, namespace: str, count: int) -> Burst:
    """`count` one-GPU /validate reviews sent to the webhook at the same moment (each thread with its
    own connection, released together): what the API server does when a Job's pods arrive at once,
    without the API server's own queueing in the figures."""
    context = ssl.create_default_context(cafile=str(ca_file))
    result, start = Burst(), threading.Barrier(count)

    def review(n: int) -> None:
        uid = uuid.uuid4().hex
        body = dict(
            pod({"nvidia.com/gpu": "1"}), metadata={"name": f"s{n}", "namespace": namespace, "uid": uid}
        )
        envelope = review_of(body, uid=uid)
        envelope["request"]["namespace"] = namespace
        data = json.dumps(envelope).encode()
        # With the API server's own `timeout` in the URL, as it calls a webhook of timeoutSeconds 5.
        request = urllib.request.Request(
            f"{url}?timeout=5s", data=data, headers={"Content-Type": "application/json"}
        )
        start.wait()
        sent = time.perf_counter()
        try:
            with urllib.request.urlopen(request, context=context, timeout=6) as response:
                answer = json.loads(response.read())["response"]
            message = (answer.get("status") or {}).get("message", "")
            outcome = "created" if answer["allowed"] else "quota" if "exceeded quota" in message else "other"
        except OSError as exc:
            outcome, message = "other", f"no answer: {exc}"
        result.outcomes.append(outcome)
        if outcome == "other":
            result.others.append(message[-150:])
        result.latencies.append((n, time.perf_counter() - sent))

    threads = [threading.Thread(target=review, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return result


def other_pods(core, count: int, clients: int) -> None:
    """`count` GPU pods in a namespace without quota: the cluster view holds them, as on a busy cluster."""
    core.create_namespace({"metadata": {"name": "others"}})
    core.create_namespaced_service_account("others", {"metadata": {"name": "default"}})

    def create(n: int) -> None:
        body = pod({"nvidia.com/gpu": "1"}, name=f"o{n}")
        body["metadata"].pop("namespace")
        core.create_namespaced_pod("others", body)

    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(create, range(count)))


def lease_bytes(leases, namespace: str) -> int:
    try:
        lease = leases.read_namespaced_lease(f"gpuport-quota-{namespace}", "gpuport-system")
    except ApiException as exc:
        if exc.status == 404:
            return 0
        raise
    return len((lease.metadata.annotations or {}).get("gpuport.io/reservations", ""))


def report_latency(label: str, result: Burst) -> None:
    tenths = result.tenths()
    seconds = [s for _, s in result.latencies]
    print(
        f"  {label}: median by tenth (ms) {' '.join(f'{t:.0f}' for t in tenths)}; "
        f"last/first {tenths[-1] / tenths[0]:.2f}x; max {1000 * max(seconds):.0f} ms; "
        f"{result.outcomes.count('other')} refused not by the quota"
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--creates", type=int, default=1000)
    parser.add_argument("--quota", type=int, default=500)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--workers", type=int, default=Settings().workers)
    parser.add_argument("--threads", type=int, default=Settings().threads)
    parser.add_argument("--rounds", type=int, default=2, help="each runs both; odd rounds gpuport first")
    parser.add_argument("--rate", type=float, default=0.0, help="creates per second (0: as fast as possible)")
    parser.add_argument("--other-pods", type=int, default=0, help="GPU pods elsewhere in the cluster first")
    parser.add_argument("--simultaneous", type=int, default=0, help="then this many creates at once")
    parser.add_argument(
        "--never-created", action="store_true", help="a used-up CPU quota refuses every pod after gpuport"
    )
    args = parser.parse_args()
    baselines, measured, results = [], [], []
    at_once: dict[str, Burst] = {}
    at_once_lease = 0
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for folder in ("apiserver", "tls"):
            (work / folder).mkdir()
        api = ApiServer(work / "apiserver")
        servers = []
        try:
            core = client.CoreV1Api(api.client())
            core.create_namespace({"metadata": {"name": "gpuport-system"}})
            make_certs(work / "tls")
            env = {
                "GPUPORT_CLUSTER": str(kubeconfig(api, work / "kubeconfig")),
                "GPUPORT_NAMESPACE": "gpuport-system",
            }
            servers = [
                RunningServer(
                    work / "tls",
                    workers=args.workers,
                    threads=args.threads,
                    extra_env=env,
                    baselines=True,
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
            leases = client.CoordinationV1Api(api.client())
            if args.other_pods:
                other_pods(pods, args.other_pods, args.clients)
            for round_ in range(args.rounds):
                order = ("baseline", "gpuport") if round_ % 2 == 0 else ("gpuport", "baseline")
                for which in order:
                    namespace = f"{which}-{round_}"
                    quota_namespace(core, namespace, args.quota, which == "baseline", args.never_created)
                    cpu = args.never_created
                    if which == "baseline":
                        register_webhooks(api.client(), url, ca, route="/bench/allow-all")
                        baselines.append(
                            burst(pods, namespace, args.creates, args.clients, "a", args.rate, cpu)
                        )
                        continue
                    register_webhooks(api.client(), url, ca)
                    time.sleep(2)  # every worker's view has the new namespace's quota
                    result = burst(pods, namespace, args.creates, args.clients, "b", args.rate, cpu)
                    at_end = lease_bytes(leases, namespace)
                    stored = len(core.list_namespaced_pod(namespace).items)
                    measured.append(result)
                    results.append((result, stored, at_end))
            if args.simultaneous:
                quota_namespace(core, "at-once", args.quota, builtin=False)
                time.sleep(2)  # every worker's view has the quota
                for which, route in (("baseline", "/bench/allow-all"), ("gpuport", "/validate")):
                    at_once[which] = reviews_at_once(
                        url + route, work / "tls" / "ca.crt", "at-once", args.simultaneous
                    )
                at_once_lease = lease_bytes(leases, "at-once")
            base_stored = [len(core.list_namespaced_pod(f"baseline-{r}").items) for r in range(args.rounds)]
        finally:
            for server in servers:
                server.stop()
            api.stop()
    for result in [r for r, _, _ in results] + list(at_once.values()):
        for message, count in Counter(m.split(":")[-1].strip()[:90] for m in result.others).most_common(4):
            print(f"  {count:5} x {message}")
    base_rate = statistics.median(b.reviews_per_second() for b in baselines)
    rate = statistics.median(m.reviews_per_second() for m in measured)
    print(
        f"{args.creates} creates, {args.clients} at a time, {args.rounds} rounds (order alternated), "
        f"{args.replicas} replicas x {args.workers} workers x {args.threads} threads\n"
        f"  allow-all + the built-in quota of {args.quota}: {base_rate:.0f} creates/s (median), "
        f"stored {base_stored}"
    )
    for result, stored, at_end in results:
        print(
            f"  gpuport, quota {args.quota}: {result.admitted()} admitted ({stored} stored), "
            f"{result.outcomes.count('quota')} over quota, "
            f"{result.outcomes.count('other')} refused otherwise (fail closed), "
            f"{result.outcomes.count('after')} refused after gpuport (the CPU quota); "
            f"{result.reviews_per_second():.0f} reviews/s, "
            f"{result.admissions_per_second():.0f} admissions/s until the last one; "
            f"Lease at the end {at_end / 1024:.1f} KiB"
        )
    if args.rate:
        for n, baseline in enumerate(baselines):
            report_latency(f"baseline round {n}", baseline)
        for n, (result, _, _) in enumerate(results):
            report_latency(f"gpuport round {n}", result)
    for which, result in at_once.items():
        report_latency(f"{args.simultaneous} /validate reviews at once, {which}", result)
    if at_once:
        # No pod is created for these reviews: their reservations stay until their API server gives up.
        print(f"  {args.simultaneous} reviews at once: Lease at the end {at_once_lease / 1024:.1f} KiB")
    print(f"  gpuport / baseline, medians: {rate / base_rate:.2f}x")
    exact = all(r.admitted() <= args.quota and stored == r.admitted() for r, stored, _ in results)
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
