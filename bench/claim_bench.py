"""What counting DRA claims against a GPU quota costs per pod now that nothing read is remembered
(issue 35): the quota step of /validate (the pod's claims read, then the namespace's usage and the
decision) against a real kube-apiserver with DRA on, for

- a pod whose claim is made from a template (the template is read again for every pod), and one
  carrying the template's uid as /mutate records it (charged by that uid, from memory),
- a pod sharing a claim made ahead with 20 pods already in the namespace (the claim is read again for
  every decision),
- a device-plugin pod (`nvidia.com/gpu: 1`), which is now read against the cluster's DeviceClasses
  too (from the watch-fed view: no round trip),

each against the same gate reading through a store that remembers every answer (what gpuport did
before: a minute's memory), rounds alternated in one run, as ratios. Dry runs: no reservation is
written, so what is measured is the reading and the decision.

    KUBEBUILDER_ASSETS=/path/to/bin .venv/bin/python bench/claim_bench.py [--rounds N] [--pods N]
"""

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kubernetes import client  # noqa: E402

from tests.helpers import context, device_class, parsed, review_of  # noqa: E402
from tests.integration.conftest import DRA_GATES, ApiServer  # noqa: E402
from webhook.adapters.kube.claim_templates import ClaimTemplateStore  # noqa: E402
from webhook.adapters.kube.clusterview import ClusterView  # noqa: E402
from webhook.adapters.kube.ledger import LeaseLedger  # noqa: E402
from webhook.adapters.kube.quota_gate import QuotaGate  # noqa: E402
from webhook.core.asks.charged_templates import CLAIM_TEMPLATES  # noqa: E402
from webhook.core.deciding.pipeline import read_pod_demand  # noqa: E402
from webhook.core.vocabulary.workloads import read_pod  # noqa: E402

GROUP, VERSION = "resource.k8s.io", "v1beta1"
NS = "bench"
DRIVER = "gpu.nvidia.com"


class Remembering:
    """The store's answers, remembered for good: the best case of a memory of every object read."""

    def __init__(self, store):
        self.store, self.known = store, {}

    def ensure(self, namespace, templates):
        return self.store.ensure(namespace, templates)

    def charged_uids(self, namespace, names, context):
        return self.store.charged_uids(namespace, names, context)

    def referenced(self, namespace, pod, uids=None):
        spec = pod.get("spec") or {}
        key = (namespace, repr(spec.get("resourceClaims")), repr(pod.get("status") or {}), repr(uids))
        if key not in self.known:
            self.known[key] = self.store.referenced(namespace, pod, uids)
        return self.known[key]


def setup(api) -> None:
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    for name in (NS, "gpuport-system"):
        core.create_namespace({"metadata": {"name": name}})
        core.create_namespaced_service_account(name, {"metadata": {"name": "default"}})
    core.create_namespaced_resource_quota(
        NS, {"metadata": {"name": "gpus"}, "spec": {"hard": {"requests.nvidia.com/gpu": "100000"}}}
    )
    for name, kind in ((DRIVER, "gpu"), ("mig.nvidia.com", "mig")):
        expression = f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == '{kind}'"
        body = device_class(name, expression)
        body["apiVersion"] = f"{GROUP}/{VERSION}"
        custom.create_cluster_custom_object(GROUP, VERSION, "deviceclasses", body)
    request = {"name": "gpu", "deviceClassName": DRIVER, "count": 1}
    custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        NS,
        "resourceclaimtemplates",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "t"},
            "spec": {"spec": {"devices": {"requests": [request]}}},
        },
    )
    custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        NS,
        "resourceclaims",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ResourceClaim",
            "metadata": {"name": "shared"},
            "spec": {"devices": {"requests": [request]}},
        },
    )


def claimed(name, entry):
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "resourceClaims": [{"name": "gpus", **entry}],
            "containers": [{"name": "main", "image": "x", "resources": {"claims": [{"name": "gpus"}]}}],
        },
    }


def plugin(name):
    limits = {"nvidia.com/gpu": "1"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"containers": [{"name": "main", "image": "x", "resources": {"limits": limits}}]},
    }


def recorded(n):
    """A template pod as /mutate leaves it in a budget namespace: the template's uid recorded on it, so
    the quota step charges the template of that uid from memory (issue 45)."""
    body = claimed(f"r{n}", {"resourceClaimTemplateName": "t"})
    body["metadata"]["annotations"] = {CLAIM_TEMPLATES: json.dumps({"t": RECORDED["t"]})}
    return body


RECORDED: dict[str, str] = {}  # the template's uid, read once the API server has it

SHAPES = {
    "template claim": lambda n: claimed(f"t{n}", {"resourceClaimTemplateName": "t"}),
    "template claim, uid recorded": recorded,
    "shared claim, 20 pods": lambda n: claimed(f"s{n}", {"resourceClaimName": "shared"}),
    "device-plugin pod": plugin,
}


def one(gate, store, ctx, body, n) -> float:
    body = {**body, "metadata": {**body["metadata"], "uid": f"u{n}"}}
    request = parsed(review_of(body, uid=f"r{n}", dry_run=True))
    started = time.perf_counter()
    demand = read_pod_demand(read_pod(body), NS, ctx, store, charged=True)
    decision = gate.admit(request, ctx, demand)
    elapsed = time.perf_counter() - started
    assert decision is None, decision
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--pods", type=int, default=20, help="pods per shape and store in a round")
    args = parser.parse_args()
    ctx = context("dra-nvidia")
    with tempfile.TemporaryDirectory() as tmp:
        server = ApiServer(
            Path(tmp),
            extra_args=(f"--feature-gates={DRA_GATES}", "--runtime-config=resource.k8s.io/v1beta1=true"),
        )
        try:
            api = server.client()
            setup(api)
            core = client.CoreV1Api(api)
            for n in range(20):  # running pods that share the claim made ahead
                core.create_namespaced_pod(NS, claimed(f"holder{n}", {"resourceClaimName": "shared"}))
            view = ClusterView(core, dra=(client.CustomObjectsApi(api), f"{GROUP}/{VERSION}"))
            view.start()
            assert view.wait_synced(30) and _wait(lambda: view.dra_version() is not None)
            store = ClaimTemplateStore(api, f"{GROUP}/{VERSION}", view=view)
            RECORDED.update(store.charged_uids(NS, ["t"], ctx))  # as /mutate records it
            ledger = LeaseLedger(client.CoordinationV1Api(api), "gpuport-system")
            now_gate = QuotaGate(view, ledger, templates=store)
            remembered = Remembering(store)
            old_gate = QuotaGate(view, ledger, templates=remembered)
            times = {(shape, which): [] for shape in SHAPES for which in ("now", "remembered")}
            n = 0
            for _ in range(args.rounds):
                for shape, make in SHAPES.items():
                    for which, gate, reads in (
                        ("now", now_gate, store),
                        ("remembered", old_gate, remembered),
                    ):
                        for _ in range(args.pods):
                            n += 1
                            times[(shape, which)].append(one(gate, reads, ctx, make(n), n))
            view.stop()
        finally:
            server.stop()
    print(f"{'pod':24} {'read now p50':>14} {'remembered p50':>16} {'ratio':>7}")
    for shape in SHAPES:
        now = statistics.median(times[(shape, "now")]) * 1000
        before = statistics.median(times[(shape, "remembered")]) * 1000
        print(f"{shape:24} {now:11.2f} ms {before:13.2f} ms {now / before:6.2f}×")
    return 0


def _wait(check, seconds: float = 30) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return False


if __name__ == "__main__":
    raise SystemExit(main())
