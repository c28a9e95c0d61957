"""A burst of GPU pod creates in one quota'd namespace through a real kube-apiserver, with two gpuport
replicas behind one address (as a Service spreads them): how many are admitted (exactly the quota,
never more), how fast, and how large the reservation Lease is at the end.

    KUBEBUILDER_ASSETS=/path/to/bin .venv/bin/python bench/burst_bench.py [--creates 1000] [--quota 500]
"""

import argparse
import json
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kubernetes import client  # noqa: E402
from kubernetes.client.exceptions import ApiException  # noqa: E402

from tests.integration.conftest import ApiServer, RoundRobinProxy, kubeconfig, register_webhooks  # noqa: E402
from tests.server_process import RunningServer, make_certs  # noqa: E402
from tests.translation_cases import pod  # noqa: E402

NAMESPACE = "burst"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--creates", type=int, default=1000)
    parser.add_argument("--quota", type=int, default=500)
    parser.add_argument("--clients", type=int, default=32)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for folder in ("apiserver", "tls"):
            (work / folder).mkdir()
        api = ApiServer(work / "apiserver")
        servers = []
        try:
            core = client.CoreV1Api(api.client())
            for name in (NAMESPACE, "gpuport-system"):
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
            }
            servers = [
                RunningServer(
                    work / "tls", workers=2, threads=8, extra_env=env, log_path=work / f"gpuport-{n}.log"
                )
                for n in range(2)
            ]
            proxy = RoundRobinProxy([s.port for s in servers])
            register_webhooks(
                api.client(), f"https://127.0.0.1:{proxy.port}", (work / "tls" / "ca.crt").read_bytes()
            )
            time.sleep(3)  # every worker's view synced (readyz would say so)
            outcomes: list[str] = []
            others: list[str] = []

            def create(n: int) -> None:
                body = pod({"nvidia.com/gpu": "1"}, name=f"b{n}")
                body["metadata"].pop("namespace")
                try:
                    client.CoreV1Api(api.client()).create_namespaced_pod(NAMESPACE, body)
                    outcomes.append("created")
                except ApiException as exc:
                    message = json.loads(exc.body).get("message", "")
                    outcomes.append("quota" if "exceeded quota" in message else "other")
                    if "exceeded quota" not in message:
                        others.append(message[-150:])

            started = time.perf_counter()
            with ThreadPoolExecutor(args.clients) as pool:
                list(pool.map(create, range(args.creates)))
            elapsed = time.perf_counter() - started
            lease = client.CoordinationV1Api(api.client()).read_namespaced_lease(
                f"gpuport-quota-{NAMESPACE}", "gpuport-system"
            )
            stored = len(core.list_namespaced_pod(NAMESPACE).items)
            annotation = (lease.metadata.annotations or {}).get("gpuport.io/reservations", "")
        finally:
            for server in servers:
                server.stop()
            api.stop()
    admitted = outcomes.count("created")
    from collections import Counter

    for message, count in Counter(m.split(":")[-1].strip()[:90] for m in others).most_common(4):
        print(f"  {count:5} x {message}")
    print(
        f"{args.creates} creates, {args.clients} at a time, quota {args.quota}: {admitted} admitted "
        f"({stored} stored), {outcomes.count('quota')} over quota, {outcomes.count('other')} refused "
        f"otherwise (fail closed); {args.creates / elapsed:.0f} reviews/s, {admitted / elapsed:.0f} "
        f"admissions/s; Lease annotation {len(annotation) / 1024:.1f} KiB"
    )
    return 0 if admitted <= args.quota and stored == admitted else 1


if __name__ == "__main__":
    sys.exit(main())
