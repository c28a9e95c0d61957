"""The GPU budget judged by a model of the device-plugin world (issue 45): whatever one node's scheduler
and kubelet give a pod asking for GPUs by extended resource name, gpuport charges at least that much
against a GPU quota, or refuses the pod as one it cannot count.

Pods are generated with init containers, sidecars (restartable init containers, in any order among
them) and app containers asking whole GPUs, MIG slices of every profile the geometry places, and names
under a GPU vendor's domain that no map reads; some pin a GPU model by GFD's product label. The judge
is tests/reference_kubelet.py (the per-name arithmetic of the scheduler and the device manager, and the
catalogue's compute and memory slices). gpuport is asked as a quota'd pod create asks it: the quota
gate decides against a quota just below what the judge found, and must refuse.
"""

import json
from decimal import Decimal
from fractions import Fraction

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.helpers import context, parsed, review_of
from tests.quota_fakes import FakeView
from tests.reference_kubelet import GEOMETRY, mig_profiles, most_held, product_names
from webhook.adapters.kube.ledger import MemoryLedger
from webhook.adapters.kube.quota_gate import QuotaGate
from webhook.core.asks.demand import read_demand
from webhook.core.budget.equivalents import pod_use
from webhook.core.budget.quota import Quota

CONTEXT = context("generic")
PRODUCTS = product_names(sorted(GEOMETRY))
# Whole GPUs, every placed MIG slice (mixed strategy), and names under a GPU vendor's domain that no map
# reads: NVIDIA's KubeVirt passthrough naming, a renamed device plugin, Intel's plugin.
NAMES = (
    "nvidia.com/gpu",
    "amd.com/gpu",
    *(f"nvidia.com/mig-{p}" for p in mig_profiles()),
    "nvidia.com/GA100_A100_PCIE_40GB",
    "nvidia.com/h100",
    "gpu.intel.com/i915",
)


@st.composite
def pods(draw):
    containers = draw(
        st.lists(
            st.tuples(
                st.sampled_from(("init", "sidecar", "app")),
                st.dictionaries(st.sampled_from(NAMES), st.integers(1, 8), min_size=1, max_size=2),
            ),
            min_size=1,
            max_size=5,
        )
    )
    if not any(kind == "app" for kind, _ in containers):
        containers.append(("app", {}))
    pinned = draw(st.none() | st.sampled_from(sorted(PRODUCTS)))
    return containers, pinned


def the_pod(containers, pinned) -> dict:
    def container(n, kind, asks):
        found = {
            "name": f"{kind}-{n}",
            "image": "x",
            "resources": {"limits": {k: str(v) for k, v in asks.items()}},
        }
        if kind == "sidecar":
            found["restartPolicy"] = "Always"
        return found

    spec: dict = {
        "containers": [container(n, k, a) for n, (k, a) in enumerate(containers) if k == "app"],
    }
    inits = [container(n, k, a) for n, (k, a) in enumerate(containers) if k != "app"]
    if inits:
        spec["initContainers"] = inits
    if pinned is not None:
        spec["nodeSelector"] = {"nvidia.com/gpu.product": PRODUCTS[pinned]}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "team-a", "uid": "p"},
        "spec": spec,
    }


def quota_just_below(most: Fraction) -> Decimal:
    thousandths = -((-most * 1000) // 1) - 1  # ceil(most × 1000) − 1
    return Decimal(int(thousandths)) / 1000


# Issue 45's cases, always tried.
SPLIT_ACROSS_INIT_AND_APP = (
    [
        ("init", {"nvidia.com/gpu": 1}),
        ("init", {"nvidia.com/mig-3g.40gb": 2}),
        ("init", {"nvidia.com/mig-2g.20gb": 3}),
        ("init", {"nvidia.com/mig-1g.10gb": 7}),
        ("app", {"nvidia.com/mig-7g.80gb": 1}),
    ],
    "H100-80GB",
)
MEMORY_HEAVY_SLICES = ([("app", {"nvidia.com/mig-1g.20gb": 7})], "H100-80GB")
PASSTHROUGH_NAME = ([("app", {"nvidia.com/GA100_A100_PCIE_40GB": 8})], None)
TWO_KINDS_IN_ONE_INIT = (
    [("init", {"nvidia.com/mig-7g.80gb": 4, "nvidia.com/mig-1g.10gb": 1}), ("app", {"nvidia.com/gpu": 1})],
    "H100-80GB",
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pods())
@example(SPLIT_ACROSS_INIT_AND_APP)
@example(MEMORY_HEAVY_SLICES)
@example(PASSTHROUGH_NAME)
@example(TWO_KINDS_IN_ONE_INIT)
def test_the_budget_charges_at_least_what_the_kubelet_gives_the_pod(case):
    containers, pinned = case
    most = most_held(containers, pinned)
    if most <= 0:
        return
    pod = the_pod(containers, pinned)
    demand = read_demand(pod, CONTEXT.dialects)
    hard = quota_just_below(most)
    view = FakeView([Quota("gpus", {f"requests.{CONTEXT.target.whole_gpu}": hard})])
    refused = QuotaGate(view, MemoryLedger(), clock=lambda: 0.0).admit(
        parsed(review_of(pod)), CONTEXT, demand
    )
    charged = pod_use(demand, CONTEXT.target, CONTEXT.dialects.catalogue).equivalents
    assert refused is not None and refused.reason in ("quota-exceeded", "quota-gpu-name-unread"), (
        f"a node gives the pod {most} GPUs ({float(most):.3f}); gpuport charged {charged} "
        f"({float(charged):.3f}) and admitted it under a quota of {hard}: {json.dumps(pod['spec'])}"
    )
