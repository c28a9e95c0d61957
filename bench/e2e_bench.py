"""Pod-create latency through a real kube-apiserver: with no webhook, with bare pairs on gpuport's own
stack, and with gpuport, for a native and a translated pod, interleaved create by create in one run.

    KUBEBUILDER_ASSETS=$(python3 ../shared/bin/assets.py) .venv/bin/python bench/e2e_bench.py [--creates 200]

The webhook configurations are the shipped ones (manifests/), pointed at one gpuport server with the
shipped workers and threads, watching the cluster as a deployment does. The bare pairs are the same
configurations aimed at that server's bench routes (same processes, TLS and API server, no decision):
allow-all answers "allowed"; label-once adds one label on the mutating call, so it costs the API
server what any mutating webhook's patch costs (decode, apply, decode the pod again). Each backend's
pair is registered at once for a namespace of its own (one more namespaceSelector term), and "none"
has a namespace no webhook matches, so the backends take turns create by create, in an order that
rotates with every create: each sees the machine's load as it is at that moment (the build machines
are shared; measured case after case, a backend run later saw a busier machine and more stored pods).
Creates are one at a time over a kept-alive connection, with generateName as a ReplicaSet sends them;
"new name" pods differ by their container's name (another workload asking alike: the memo answers
them, core.deciding.remembered); "new shape" pods each tolerate a taint of their own, a field the
decision reads, so each is decided afresh (a pod unlike any before it); "indexed Job" pods differ by
their completion index (label and annotation), which no decision reads; "StatefulSet" pods arrive named
(bench-web-0, bench-web-1...) with their ordinal labels, which no decision reads either (the memo
leaves the pod's name out where the decision says none). The native and repeated pods name a ReplicaSet
as their controller, the indexed-Job pods a Job and the StatefulSet's pods a StatefulSet, as those
controllers write them (gpuport records one Event per owner, with a count); "new name" and "new shape"
pods name no owner (each gets its own Event, under the namespace's rate limit). Each case reports its
median create over the rounds; ratios are against the bare pairs with the same pod.
"""

import argparse
import http.client
import json
import ssl
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kubernetes import client  # noqa: E402

from tests.integration.conftest import ApiServer, kubeconfig  # noqa: E402
from tests.server_process import RunningServer, make_certs  # noqa: E402
from webhook.adapters.http.settings import Settings  # noqa: E402
from webhook.config.registration import Endpoint, webhook_configurations  # noqa: E402

BACKEND_LABEL = "bench.gpuport.io/backend"
# Which route the shipped webhook configurations call (None: their own, /mutate and /validate).
BACKENDS = {"none": "", "allow-all": "/bench/allow-all", "label-once": "/bench/label-once", "gpuport": None}
NATIVE = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
GKE = {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}


# The controllers the repeated and indexed-Job pods come from, as the pods' ownerReferences name them
# (the API server does not look the owner up; no controller manager runs here to collect the pods).
REPLICA_SET = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "bench-7c9f8d"}
JOB = {"apiVersion": "batch/v1", "kind": "Job", "name": "bench-job"}
STATEFUL_SET = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "bench-web"}


def owned(owner: dict, uid: str) -> list[dict]:
    return [{**owner, "uid": uid, "controller": True, "blockOwnerDeletion": True}]


def gpu_pod(
    selector: dict[str, str],
    gpus: str,
    seq: int | None = None,
    index: int | None = None,
    owner: dict | None = None,
    own_taint: int | None = None,
    ordinal: int | None = None,
) -> dict:
    # A StatefulSet names its pods before admission (bench-web-0, bench-web-1); the others are named after.
    metadata: dict = {"generateName": "bench-"} if ordinal is None else {"name": f"bench-web-{ordinal}"}
    if owner is not None:
        metadata["ownerReferences"] = owned(owner, BENCH_UIDS[owner["kind"]])
    if index is not None:  # as the Job controller writes an indexed Job's pods
        metadata["labels"] = {"batch.kubernetes.io/job-completion-index": str(index)}
        metadata["annotations"] = {"batch.kubernetes.io/job-completion-index": str(index)}
    if ordinal is not None:  # as the StatefulSet controller writes its pods
        metadata["labels"] = {
            "apps.kubernetes.io/pod-index": str(ordinal),
            "statefulset.kubernetes.io/pod-name": metadata["name"],
        }
    container = {
        "name": "main" if seq is None else f"main-{seq}",
        "image": "nvcr.io/nvidia/pytorch:24.05-py3",
        "resources": {"limits": {"nvidia.com/gpu": gpus}},
    }
    spec = {"containers": [container], "nodeSelector": selector}
    if own_taint is not None:  # as a job scheduled onto nodes tainted for it alone
        spec["tolerations"] = [{"key": f"example.com/job-{own_taint}", "operator": "Exists"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


# One uid per owner for the whole run, as one ReplicaSet or Job makes all its pods.
BENCH_UIDS = {"ReplicaSet": str(uuid.uuid4()), "Job": str(uuid.uuid4()), "StatefulSet": str(uuid.uuid4())}

PODS = {
    "native": lambda seq: gpu_pod(NATIVE, "1", owner=REPLICA_SET),
    "GKE 4×H100, repeated": lambda seq: gpu_pod(GKE, "4", owner=REPLICA_SET),
    "GKE 4×H100, new name": lambda seq: gpu_pod(GKE, "4", seq),
    "GKE 4×H100, new shape": lambda seq: gpu_pod(GKE, "4", seq, own_taint=seq),
    "GKE 4×H100, indexed Job": lambda seq: gpu_pod(GKE, "4", index=seq, owner=JOB),
    "GKE 4×H100, StatefulSet": lambda seq: gpu_pod(GKE, "4", ordinal=seq, owner=STATEFUL_SET),
}


class Creator:
    """POSTs pods over one kept-alive TLS connection: the harness adds as little as it can."""

    def __init__(self, api: ApiServer):
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # the test API server's self-signed certificate, on loopback
        self.conn = http.client.HTTPSConnection("127.0.0.1", api.port, context=context)
        self.headers = {"Authorization": f"Bearer {api.token}", "Content-Type": "application/json"}
        self.seq = 0

    def create(self, make, namespace: str) -> float:
        self.seq += 1
        body = json.dumps(make(self.seq))
        started = time.perf_counter()
        self.conn.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=body, headers=self.headers)
        response = self.conn.getresponse()
        answer = response.read()
        elapsed = time.perf_counter() - started
        if response.status != 201:
            raise RuntimeError(f"create answered {response.status}: {answer[:300]!r}")
        return elapsed


def server_counts(server: RunningServer, ca_file: Path) -> dict[str, float]:
    """Reviews gpuport answered per route, the seconds it spent on them, and its memo's hits and misses
    (its own /metrics)."""
    context = ssl.create_default_context(cafile=str(ca_file))
    context.check_hostname = False
    conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=context)
    conn.request("GET", "/metrics")
    counts: dict[str, float] = {}
    for line in conn.getresponse().read().decode().splitlines():
        for route in ("mutate", "validate"):
            for metric in ("_count", "_sum"):
                if line.startswith(f'gpuport_admission_duration_seconds{metric}{{route="{route}"}}'):
                    counts[route + metric] = float(line.rsplit(" ", 1)[1])
        for result in ("hit", "miss"):
            if line.startswith(f'gpuport_decision_memo_total{{result="{result}"}}'):
                counts["memo_" + result] = float(line.rsplit(" ", 1)[1])
        if line.startswith('gpuport_events_total{outcome="'):
            counts["events " + line.split('"')[1]] = float(line.rsplit(" ", 1)[1])
    return counts


def namespace_of(backend: str) -> str:
    return f"bench-{backend}"


def register_backends(api_client, url: str, ca_bundle: bytes) -> None:
    """gpuport's webhook configurations as it registers them, once per backend (aimed at its route),
    each for its backend's namespace alone; "none" gets none."""
    admission = client.AdmissionregistrationV1Api(api_client)
    create = {
        "MutatingWebhookConfiguration": admission.create_mutating_webhook_configuration,
        "ValidatingWebhookConfiguration": admission.create_validating_webhook_configuration,
    }
    for backend, route in BACKENDS.items():
        if backend == "none":
            continue
        for body in webhook_configurations(Endpoint(url=url), ca_bundle, ()):
            body["metadata"]["name"] = f"bench-{backend}"
            for hook in body["webhooks"]:
                if route:
                    hook["clientConfig"]["url"] = f"{url}{route}"
                only = {"key": BACKEND_LABEL, "operator": "In", "values": [backend]}
                hook["namespaceSelector"]["matchExpressions"].append(only)
            create[body["kind"]](body)
    time.sleep(1.5)  # the API server picks up webhook configurations asynchronously


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--creates", type=int, default=200, help="per case and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=Settings().workers)
    parser.add_argument("--threads", type=int, default=Settings().threads)
    args = parser.parse_args()
    runs: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for folder in ("apiserver", "tls"):
            (work / folder).mkdir()
        api = ApiServer(work / "apiserver")
        server = None
        try:
            core = client.CoreV1Api(api.client())
            for name in [namespace_of(b) for b in BACKENDS] + ["gpuport-system"]:
                labels = {BACKEND_LABEL: name.removeprefix("bench-")}
                core.create_namespace({"metadata": {"name": name, "labels": labels}})
                core.create_namespaced_service_account(name, {"metadata": {"name": "default"}})
            make_certs(work / "tls")
            env = {
                "GPUPORT_CLUSTER": str(kubeconfig(api, work / "kubeconfig")),
                "GPUPORT_NAMESPACE": "gpuport-system",
            }
            server = RunningServer(
                work / "tls", workers=args.workers, threads=args.threads, extra_env=env, baselines=True
            )
            url, ca = f"https://127.0.0.1:{server.port}", (work / "tls" / "ca.crt").read_bytes()
            register_backends(api.client(), url, ca)
            creator = Creator(api)
            backends = list(BACKENDS)
            for _ in range(args.rounds):
                for pod_name, make in PODS.items():
                    for backend in backends:  # the connection and caches warm, not measured
                        for _ in range(10):
                            creator.create(make, namespace_of(backend))
                    latencies: dict[str, list[float]] = {b: [] for b in backends}
                    for turn in range(args.creates):
                        for backend in backends[turn % len(backends) :] + backends[: turn % len(backends)]:
                            latencies[backend].append(creator.create(make, namespace_of(backend)))
                    for backend, measured in latencies.items():
                        runs.setdefault((backend, pod_name), []).append(statistics.median(measured))
            stored = sum(len(core.list_namespaced_pod(namespace_of(b)).items) for b in BACKENDS)
            reviews = server_counts(server, work / "tls" / "ca.crt")
        finally:
            if server is not None:
                server.stop()
            api.stop()
    medians = {key: statistics.median(values) * 1000 for key, values in runs.items()}
    print(
        f"pod creates through a real kube-apiserver, {args.creates} per case × {args.rounds} rounds "
        f"(median ms), gpuport {args.workers} worker(s) × {args.threads} threads; {stored} pods stored"
    )
    print(
        f"{'pod':24} {'none':>6} {'allow-all':>10} {'label-once':>11} {'gpuport':>8} "
        f"{'÷ allow-all':>12} {'÷ label-once':>13}"
    )
    for pod_name in PODS:
        none, bare, labelled, ours = (medians[(b, pod_name)] for b in BACKENDS)
        print(
            f"{pod_name:24} {none:6.2f} {bare:10.2f} {labelled:11.2f} {ours:8.2f} "
            f"{ours / bare:12.2f} {ours / labelled:13.2f}"
        )
    for route in ("mutate", "validate"):
        count, total = reviews.get(route + "_count", 0), reviews.get(route + "_sum", 0)
        print(f"gpuport /{route}: {count:.0f} reviews, {total / max(count, 1) * 1000:.2f} ms each in gpuport")
    # A new shape is a miss; the other pods after their first are hits.
    print(f"gpuport memo: {reviews.get('memo_hit', 0):.0f} hits, {reviews.get('memo_miss', 0):.0f} misses")
    said = {k.removeprefix("events "): v for k, v in reviews.items() if k.startswith("events ")}
    print("gpuport Events: " + (", ".join(f"{v:.0f} {k}" for k, v in sorted(said.items())) or "none counted"))
    out = REPO / "bench" / "results"
    out.mkdir(exist_ok=True)
    rows = {f"{b} / {p}": v for (b, p), v in medians.items()}
    (out / "e2e.json").write_text(json.dumps({"args": vars(args), "median_ms": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
