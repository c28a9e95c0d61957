"""GPU-equivalents for every form, quota messages, scopes, and race-free reservations (no API server)."""

import json
import threading
from decimal import Decimal
from fractions import Fraction

import pytest

from tests.helpers import context, parsed, review_of
from tests.translation_cases import SOURCES, pod
from webhook.adapters.kube.ledger import LeaseLedger, MemoryLedger, Reservation, decode, encode
from webhook.adapters.kube.quota_gate import QuotaGate
from webhook.core.asks.demand import read_demand
from webhook.core.budget.equivalents import pod_use, show
from webhook.core.budget.quota import GPU_MEMORY, PodFacts, Quota, applies, exceeded, pod_facts
from webhook.core.vocabulary.gpu_use import GpuUse


def use(obj, cloud="generic"):
    ctx = context(cloud)
    return pod_use(read_demand(obj, ctx.dialects), ctx.target, ctx.dialects.catalogue)


@pytest.mark.parametrize(
    ("resources", "selector", "expected"),
    [
        ({"nvidia.com/gpu": "1"}, None, Fraction(1)),
        ({"amd.com/gpu": "2"}, None, Fraction(2)),
        (
            {"nvidia.com/mig-1g.10gb": "1"},
            {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            Fraction(1, 7),
        ),
        ({"nvidia.com/mig-3g.40gb": "2"}, None, Fraction(6, 7)),
        ({"nvidia.com/mig-1g.6gb": "1"}, None, Fraction(1, 4)),  # an A30 slice: 4 slices per GPU
        ({"nvidia.com/mig-2g.48gb": "1"}, None, Fraction(1, 2)),  # RTX PRO 6000: 4 slices
        (
            {"aliyun.com/gpu-mem": "20"},
            {"aliyun.accelerator/nvidia_name": "NVIDIA-A100-SXM4-40GB"},
            Fraction(1, 2),
        ),
        ({"tke.cloud.tencent.com/qgpu-core": "25"}, None, Fraction(1, 4)),
        (
            {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "8192", "nvidia.com/gpucores": "50"},
            {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"},
            Fraction(1, 2),
        ),  # max(8/40, 50%)
        ({"nvidia.com/gpu.shared": "1"}, None, Fraction(1)),  # replicas unknown: a whole GPU
    ],
)
def test_gpu_equivalents_of_every_form(resources, selector, expected):
    assert use(pod(resources, selector)).equivalents == expected


def test_shared_slot_counts_one_over_the_maps_replicas():
    from dataclasses import replace

    ctx = context("generic")
    target = replace(ctx.target, shared=replace(ctx.target.shared, replicas_per_gpu=4))
    obj = pod({"nvidia.com/gpu.shared": "1"})
    assert pod_use(read_demand(obj, ctx.dialects), target, ctx.dialects.catalogue).equivalents == Fraction(
        1, 4
    )


def test_seven_slices_make_exactly_one_gpu():
    total = sum((use(pod({"nvidia.com/mig-1g.10gb": "1"})).equivalents for _ in range(7)), Fraction(0))
    assert total == 1


def test_pod_total_follows_the_effective_request_rule():
    obj = pod({"nvidia.com/gpu": "1"})
    obj["spec"]["containers"].append({"name": "b", "resources": {"limits": {"nvidia.com/gpu": "2"}}})
    obj["spec"]["initContainers"] = [
        {"name": "setup", "resources": {"limits": {"nvidia.com/gpu": "4"}}},  # runs alone: max with the rest
        {"name": "sidecar", "restartPolicy": "Always", "resources": {"limits": {"nvidia.com/gpu": "1"}}},
    ]
    assert use(obj).equivalents == 4  # max(4, 1 + 2 + 1)
    obj["spec"]["initContainers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "3"
    assert use(obj).equivalents == 4  # max(3, 1 + 2 + 1 sidecar)


def test_an_init_container_after_a_sidecar_runs_beside_it():
    # KEP-753: a plain init container starting after a sidecar holds its GPUs while the sidecar's run.
    obj = pod({"nvidia.com/gpu": "1"})
    obj["spec"]["initContainers"] = [
        {"name": "proxy", "restartPolicy": "Always", "resources": {"limits": {"nvidia.com/gpu": "1"}}},
        {"name": "warmup", "resources": {"limits": {"nvidia.com/gpu": "3"}}},
    ]
    assert use(obj).equivalents == 4  # max(1 sidecar + 3, 1 app + 1 sidecar)
    obj["spec"]["initContainers"].reverse()  # the warm-up now runs before the sidecar starts
    assert use(obj).equivalents == 3  # max(3, 1 + 1)


def test_a_pods_compute_peak_and_memory_peak_are_each_kept():
    # The init container holds all of a GPU's compute with 1000 MiB of its memory; the app a 1g.10gb
    # slice: the pod's peak is the init's compute and the app's memory, neither undercounted.
    obj = pod({"nvidia.com/mig-1g.10gb": "1"})
    hami_share = {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "100", "nvidia.com/gpumem": "1000"}
    obj["spec"]["initContainers"] = [{"name": "setup", "resources": {"limits": hami_share}}]
    assert use(obj) == GpuUse(Fraction(1), 10240)


def test_show_prints_whole_numbers_plainly():
    assert show(Fraction(3)) == "3" and show(Fraction(3, 7)) == "0.429" and show(Fraction(1, 2)) == "0.5"


QUOTA = Quota("gpus", {"requests.nvidia.com/gpu": Decimal(8)})


def test_quota_message_mirrors_the_builtin_format():
    asked = use(pod({"nvidia.com/gpu": "3"}))
    assert exceeded(QUOTA, asked, GpuUse(Fraction(5)), "nvidia.com/gpu") is None  # exactly at the limit
    message = exceeded(QUOTA, asked, GpuUse(Fraction(6)), "nvidia.com/gpu")
    assert message.startswith(
        "exceeded quota: gpus, requested: requests.nvidia.com/gpu=3, "
        "used: requests.nvidia.com/gpu=6, limited: requests.nvidia.com/gpu=8 "
    )
    assert "MIG slices their share of the GPU's compute" in message


def test_gpu_memory_budget():
    quota = Quota("mem", {GPU_MEMORY: Decimal(80 * 1024**3)})
    asked = use(pod({"nvidia.com/mig-3g.40gb": "1"}))
    assert exceeded(quota, asked, GpuUse(Fraction(0), 40 * 1024), "nvidia.com/gpu") is None
    message = exceeded(quota, asked, GpuUse(Fraction(0), 41 * 1024), "nvidia.com/gpu")
    assert (
        "requested: requests.gpuport.io/gpu-memory=40960Mi, used: requests.gpuport.io/gpu-memory=41984Mi"
        in message
    )


@pytest.mark.parametrize(
    ("scopes", "selector", "facts", "expected"),
    [
        (("Terminating",), (), PodFacts(True, False, ""), True),
        (("Terminating",), (), PodFacts(False, False, ""), False),
        (("NotTerminating",), (), PodFacts(False, False, ""), True),
        (("BestEffort",), (), PodFacts(False, True, ""), True),
        (("NotBestEffort",), (), PodFacts(False, True, ""), False),
        (
            (),
            ({"scopeName": "PriorityClass", "operator": "In", "values": ["high"]},),
            PodFacts(False, False, "high"),
            True,
        ),
        (
            (),
            ({"scopeName": "PriorityClass", "operator": "In", "values": ["high"]},),
            PodFacts(False, False, "low"),
            False,
        ),
        ((), ({"scopeName": "PriorityClass", "operator": "Exists"},), PodFacts(False, False, ""), False),
    ],
)
def test_quota_scopes(scopes, selector, facts, expected):
    assert applies(Quota("q", {}, scopes, selector), facts) is expected


def test_pod_facts():
    obj = pod({"nvidia.com/gpu": "1"})
    assert pod_facts(obj) == PodFacts(False, True, "")  # GPUs alone do not change the QoS class
    obj["spec"]["activeDeadlineSeconds"] = 60
    obj["spec"]["priorityClassName"] = "high"
    obj["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "1"
    assert pod_facts(obj) == PodFacts(True, False, "high")


def test_reservations_round_trip_exactly():
    reservations = [Reservation("u1", GpuUse(Fraction(3, 7), 10240), ("gpus",), 100.0)]
    assert decode(encode(reservations)) == reservations


class FakeView:
    def __init__(self, quotas=(), pods=()):
        self.quotas = list(quotas)
        self.pods = list(pods)
        self.listed = {"pods", "resourcequotas", "namespaces", "limitranges", "nodes"}

    @property
    def synced(self):
        return len(self.listed) == 5

    def has_synced(self, *names):
        return set(names) <= self.listed

    def quotas_in(self, namespace):
        return self.quotas

    def pods_version(self, namespace):
        return tuple(id(p) for p in self.pods)  # changes whenever a test adds or removes a pod

    read_through = 0  # how far this view has read the pods stream; 0: it cannot say

    def pods_read_through(self):
        return self.read_through

    def pod_first_seen(self, namespace, uid):
        return next((p.get("firstSeen") for p in self.pods if p["metadata"].get("uid") == uid), None)

    def pods_in(self, namespace):
        return self.pods

    def has_pod(self, uid):
        return any(p["metadata"].get("uid") == uid for p in self.pods)


def admit(gate, request, ctx):
    """A gate's answer as the pipeline asks for it: with the pod's demand read once, by the caller."""
    return gate.admit(request, ctx, read_demand(request.object or {}, ctx.dialects))


def request_for(obj, uid, dry_run=False):
    obj = dict(obj, metadata={**obj["metadata"], "uid": uid})
    return parsed(review_of(obj, dry_run=dry_run, uid=f"req-{uid}"))


def test_gate_admits_up_to_the_limit_counting_running_pods_and_reservations():
    running = dict(
        pod({"nvidia.com/mig-3g.40gb": "7"}), metadata={"name": "r", "namespace": "team-a", "uid": "r"}
    )
    gate = QuotaGate(FakeView([QUOTA], [running]), MemoryLedger(), clock=lambda: 1000.0)
    ctx = context("generic")
    assert admit(gate, request_for(pod({"nvidia.com/gpu": "4"}), "a"), ctx) is None  # 3 + 4 ≤ 8
    denied = admit(gate, request_for(pod({"nvidia.com/gpu": "2"}), "b"), ctx)  # 3 + 4 (reserved) + 2 > 8
    assert denied.reason == "quota-exceeded"
    assert (
        'pods "work" is forbidden: exceeded quota: gpus, requested: requests.nvidia.com/gpu=2, '
        "used: requests.nvidia.com/gpu=7" in denied.message
    )
    assert admit(gate, request_for(pod({"nvidia.com/gpu": "1"}), "c"), ctx) is None  # exactly 8


def test_reservations_expire_and_are_dropped_once_the_pod_is_in_the_view():
    ledger = MemoryLedger()
    clock = [1000.0]
    view = FakeView([Quota("gpus", {"requests.nvidia.com/gpu": Decimal(1)})])
    gate = QuotaGate(view, ledger, clock=lambda: clock[0])
    ctx = context("generic")
    assert admit(gate, request_for(pod({"nvidia.com/gpu": "1"}), "a"), ctx) is None
    assert admit(gate, request_for(pod({"nvidia.com/gpu": "1"}), "b"), ctx) is not None
    clock[0] += 31  # the first pod never appeared (a later step refused it): its reservation lapses
    assert admit(gate, request_for(pod({"nvidia.com/gpu": "1"}), "c"), ctx) is None
    view.pods.append(
        dict(pod({"nvidia.com/gpu": "1"}), metadata={"name": "c", "namespace": "team-a", "uid": "c"})
    )
    assert (
        admit(gate, request_for(pod({"nvidia.com/gpu": "1"}), "d"), ctx) is not None
    )  # c counted once, from the view, not twice
    # c stays in the store for its TTL (another replica's view may lag behind):
    assert [r.key for r in ledger.reservations("team-a")] == ["c"]
    view.pods.clear()  # c finished
    clock[0] += 31
    assert admit(gate, request_for(pod({"nvidia.com/gpu": "1"}), "e"), ctx) is None


def test_dry_run_decides_but_reserves_nothing():
    ledger = MemoryLedger()
    gate = QuotaGate(FakeView([QUOTA]), ledger, clock=lambda: 0.0)
    assert (
        admit(gate, request_for(pod({"nvidia.com/gpu": "8"}), "a", dry_run=True), context("generic")) is None
    )
    assert ledger.reservations("team-a") == []
    assert (
        admit(gate, request_for(pod({"nvidia.com/gpu": "9"}), "b", dry_run=True), context("generic"))
        is not None
    )


def test_pods_without_gpus_or_quota_never_touch_the_store():
    class Exploding(MemoryLedger):
        def reserve(self, *args, **kwargs):
            raise AssertionError("no round trip expected")

    ctx = context("generic")
    assert admit(QuotaGate(FakeView([QUOTA]), Exploding()), request_for(pod({"cpu": "1"}), "a"), ctx) is None
    assert (
        admit(QuotaGate(FakeView([]), Exploding()), request_for(pod({"nvidia.com/gpu": "1"}), "b"), ctx)
        is None
    )


def test_every_gpu_form_draws_from_one_budget():
    gate = QuotaGate(
        FakeView([Quota("gpus", {"requests.nvidia.com/gpu": Decimal(1)})]), MemoryLedger(), clock=lambda: 0.0
    )
    ctx = context("generic")
    assert admit(gate, request_for(pod({"nvidia.com/mig-3g.40gb": "1"}), "a"), ctx) is None  # 3/7
    assert admit(gate, request_for(SOURCES["hami-shared"][1], "b"), ctx) is None  # 8 GiB of the smallest GPU
    denied = admit(gate, request_for(pod({"nvidia.com/gpu": "1"}), "c"), ctx)
    assert denied is not None


def test_fifty_threads_never_overshoot_the_quota():
    gate = QuotaGate(FakeView([QUOTA]), MemoryLedger(), clock=lambda: 0.0)
    ctx = context("generic")
    admitted = []

    def create(n):
        if admit(gate, request_for(pod({"nvidia.com/gpu": "1"}), f"p{n}"), ctx) is None:
            admitted.append(n)

    threads = [threading.Thread(target=create, args=(n,)) for n in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(admitted) == 8


class FakeCoordination:
    """Leases with resourceVersion checks, as the API server does them; answers raw JSON, as the client
    does when asked not to build its models (`_preload_content=False`)."""

    def __init__(self, conflicts=0):
        self.leases = {}
        self.conflicts = conflicts
        self.timeouts = []  # the _request_timeout of every call
        self.calls = []  # (verb, name) of every call

    def _answer(self, name):
        from types import SimpleNamespace

        version, annotations = self.leases[name]
        body = {"metadata": {"name": name, "resourceVersion": str(version), "annotations": annotations}}
        return SimpleNamespace(data=json.dumps(body).encode())

    def read_namespaced_lease(self, name, namespace, _request_timeout=None, _preload_content=True):
        self.timeouts.append(_request_timeout)
        self.calls.append(("read", name))
        from kubernetes.client.exceptions import ApiException

        if name not in self.leases:
            raise ApiException(status=404)
        return self._answer(name)

    def create_namespaced_lease(self, namespace, body, _request_timeout=None, _preload_content=True):
        from kubernetes.client.exceptions import ApiException

        self.timeouts.append(_request_timeout)
        self.calls.append(("create", body["metadata"]["name"]))
        if body["metadata"]["name"] in self.leases:
            raise ApiException(status=409)
        self.leases[body["metadata"]["name"]] = (1, body["metadata"]["annotations"])
        return self._answer(body["metadata"]["name"])

    def replace_namespaced_lease(self, name, namespace, body, _request_timeout=None, _preload_content=True):
        from kubernetes.client.exceptions import ApiException

        self.timeouts.append(_request_timeout)
        self.calls.append(("replace", name))
        if name not in self.leases:
            raise ApiException(status=404)
        version, _ = self.leases[name]
        if self.conflicts:
            self.conflicts -= 1
            self.leases[name] = (version + 1, self.leases[name][1])  # someone else wrote meanwhile
            raise ApiException(status=409)
        if body["metadata"]["resourceVersion"] != str(version):
            raise ApiException(status=409)
        self.leases[name] = (version + 1, body["metadata"]["annotations"])
        return self._answer(name)


def test_lease_ledger_retries_on_conflict_and_keeps_every_reservation():
    api = FakeCoordination(conflicts=2)
    ledger = LeaseLedger(api, "gpuport-system")
    for key in ("a", "b"):
        reservation = Reservation(key, GpuUse(Fraction(1)), ("gpus",), 100.0)
        assert ledger.reserve("team-a", reservation, lambda current: None, 0.0, lambda uid: False) is None
    _, annotations = api.leases["gpuport-quota-team-a"]
    assert [r.key for r in decode(annotations["gpuport.io/reservations"])] == ["a", "b"]


def test_lease_ledger_unreachable_is_reported_not_swallowed():
    from kubernetes.client.exceptions import ApiException

    from webhook.adapters.kube.ledger import LedgerUnavailable

    class Down:
        def read_namespaced_lease(self, name, namespace, _request_timeout=None, _preload_content=True):
            raise ApiException(status=503, reason="Service Unavailable")

    with pytest.raises(LedgerUnavailable, match="503"):
        LeaseLedger(Down(), "gpuport-system").reserve(
            "team-a",
            Reservation("a", GpuUse(Fraction(1)), ("gpus",), 1.0),
            lambda c: None,
            0.0,
            lambda u: False,
        )
    gate = QuotaGate(FakeView([QUOTA]), LeaseLedger(Down(), "gpuport-system"))
    denied = admit(gate, request_for(pod({"nvidia.com/gpu": "1"}), "x"), context("generic"))
    assert denied.reason == "quota-unavailable"


def test_running_pods_are_recounted_when_the_maps_change():
    from dataclasses import replace

    running = dict(
        pod({"nvidia.com/gpu.shared": "1"}), metadata={"name": "r", "namespace": "team-a", "uid": "r"}
    )
    gate = QuotaGate(
        FakeView([Quota("gpus", {"requests.nvidia.com/gpu": Decimal(1)})], [running]),
        MemoryLedger(),
        clock=lambda: 0.0,
    )
    before = context("generic")
    assert (
        admit(gate, request_for(pod({"nvidia.com/mig-3g.40gb": "1"}), "a", dry_run=True), before) is not None
    )
    target = replace(before.target, shared=replace(before.target.shared, replicas_per_gpu=4))
    after = replace(before, target=target)  # an admin set replicas_per_gpu: the slot now counts 1/4
    assert admit(gate, request_for(pod({"nvidia.com/mig-3g.40gb": "1"}), "b", dry_run=True), after) is None


def test_quota_is_never_decided_on_a_view_still_loading():
    running = dict(pod({"nvidia.com/gpu": "8"}), metadata={"name": "r", "namespace": "team-a", "uid": "r"})
    view = FakeView([QUOTA], [running])
    gate = QuotaGate(view, MemoryLedger(), clock=lambda: 1000.0)
    ctx = context("generic")
    view.listed = set()  # a worker just started: it knows neither quotas nor pods
    refused = admit(gate, request_for(pod({"nvidia.com/gpu": "1"}), "a"), ctx)
    assert refused.reason == "quota-view-loading"
    assert "still loading its view of the cluster" in refused.message and "retry shortly" in refused.message
    view.listed = {"resourcequotas"}  # quotas known, pods not yet: an empty view would admit over quota
    assert admit(gate, request_for(pod({"nvidia.com/gpu": "1"}), "b"), ctx).reason == "quota-view-loading"
    no_quota = QuotaGate(FakeView([], []), MemoryLedger(), clock=lambda: 1000.0)
    no_quota.view.listed = {"resourcequotas"}
    assert admit(no_quota, request_for(pod({"nvidia.com/gpu": "1"}), "c"), ctx) is None  # no GPU quota here
    view.listed |= {"pods"}
    assert admit(gate, request_for(pod({"nvidia.com/gpu": "1"}), "d"), ctx).reason == "quota-exceeded"
    assert admit(gate, request_for(pod({"cpu": "1"}), "e"), ctx) is None  # never for pods asking no GPU


def test_every_reservation_call_has_a_deadline_inside_the_webhook_timeout():
    from webhook.adapters.kube.lease_store import CALL_TIMEOUT
    from webhook.adapters.kube.ledger import DEADLINE_SECONDS

    api = FakeCoordination(conflicts=1)
    ledger = LeaseLedger(api, "gpuport-system")
    for key in ("a", "b"):
        ledger.reserve(
            "team-a", Reservation(key, GpuUse(Fraction(1)), ("gpus",), 100.0), lambda c: None, 0.0, str
        )
    assert api.timeouts and all(t == CALL_TIMEOUT for t in api.timeouts)
    assert sum(CALL_TIMEOUT) <= DEADLINE_SECONDS < 5  # the API server's limit for a webhook call


def test_a_frozen_api_server_gets_a_quick_refusal_not_a_late_admission(monkeypatch):
    import threading

    from webhook.adapters.kube import ledger as ledger_module

    monkeypatch.setattr(ledger_module, "DEADLINE_SECONDS", 0.3)
    thawed = threading.Event()

    class Frozen(FakeCoordination):
        def read_namespaced_lease(self, name, namespace, _request_timeout=None, _preload_content=True):
            thawed.wait(0.5)  # the first call hangs past the deadline (a real one would time out)
            return super().read_namespaced_lease(name, namespace, _request_timeout, _preload_content)

    gate = QuotaGate(FakeView([QUOTA]), LeaseLedger(Frozen(), "gpuport-system"))
    denied = admit(gate, request_for(pod({"nvidia.com/gpu": "1"}), "x"), context("generic"))
    assert denied is not None and denied.reason == "quota-unavailable"
    assert "retry shortly" in denied.message


def test_admissions_waiting_on_the_api_server_never_take_every_thread():
    import threading

    release = threading.Event()
    entered = threading.Semaphore(0)

    class Slow(MemoryLedger):
        def reserve(self, *args, **kwargs):
            entered.release()
            release.wait(5)
            return super().reserve(*args, **kwargs)

    gate = QuotaGate(FakeView([QUOTA]), Slow(), clock=lambda: 0.0, max_waiting=2, wait_for_slot=0.05)
    ctx = context("generic")
    waiting = [
        threading.Thread(target=admit, args=(gate, request_for(pod({"nvidia.com/gpu": "1"}), f"w{n}"), ctx))
        for n in range(2)
    ]
    for thread in waiting:
        thread.start()
    assert entered.acquire(timeout=5) and entered.acquire(timeout=5)
    busy = admit(gate, request_for(pod({"nvidia.com/gpu": "1"}), "third"), ctx)
    assert busy.reason == "quota-busy"
    assert "retry shortly" in busy.message
    no_quota = QuotaGate(FakeView([]), Slow(), max_waiting=2)
    assert admit(no_quota, request_for(pod({"nvidia.com/gpu": "1"}), "elsewhere"), ctx) is None
    release.set()
    for thread in waiting:
        thread.join(5)


def test_a_namespace_s_usage_is_summed_once_until_its_pods_change():
    running = [
        dict(pod({"nvidia.com/gpu": "1"}), metadata={"name": f"r{n}", "namespace": "team-a", "uid": f"r{n}"})
        for n in range(3)
    ]
    view = FakeView([QUOTA], running)
    reads = []
    view.pods_in = lambda namespace: reads.append(namespace) or view.pods
    gate = QuotaGate(view, MemoryLedger(), clock=lambda: 1000.0)
    ctx = context("generic")
    for n in range(3):
        assert admit(gate, request_for(pod({"nvidia.com/gpu": "1"}), f"a{n}", dry_run=True), ctx) is None
    assert len(reads) == 1
    view.pods.append(
        dict(pod({"nvidia.com/gpu": "4"}), metadata={"name": "big", "namespace": "team-a", "uid": "big"})
    )
    denied = admit(gate, request_for(pod({"nvidia.com/gpu": "2"}), "b", dry_run=True), ctx)
    assert len(reads) == 2 and denied.reason == "quota-exceeded"  # 3 + 4 + 2 > 8: the new pod counted


def test_a_burst_in_one_namespace_is_written_in_groups_and_exactly_the_quota_passes():
    import threading
    import time

    api = FakeCoordination()
    writes = []
    original_replace, original_create = api.replace_namespaced_lease, api.create_namespaced_lease

    def counting_replace(*args, **kwargs):
        writes.append("replace")
        return original_replace(*args, **kwargs)

    def counting_create(*args, **kwargs):
        writes.append("create")
        return original_create(*args, **kwargs)

    original_read = api.read_namespaced_lease

    def slow_read(*args, **kwargs):
        time.sleep(0.02)  # a real round trip: admissions arriving meanwhile wait for the next group
        return original_read(*args, **kwargs)

    api.replace_namespaced_lease, api.create_namespaced_lease = counting_replace, counting_create
    api.read_namespaced_lease = slow_read
    ledger = LeaseLedger(api, "gpuport-system")

    def at_most_ten(current):
        return "over" if sum(r.usage.equivalents for r in current) >= 10 else None

    results = []

    def admit(n):
        reservation = Reservation(f"u{n}", GpuUse(Fraction(1)), ("gpus",), 100.0)
        results.append(ledger.reserve("team-a", reservation, at_most_ten, 0.0, lambda uid: False))

    threads = [threading.Thread(target=admit, args=(n,)) for n in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results.count(None) == 10 and results.count("over") == 30
    _, annotations = api.leases["gpuport-quota-team-a"]
    assert len(decode(annotations["gpuport.io/reservations"])) == 10
    assert len(writes) < 10  # groups, not one write per admission


def test_reservations_of_pods_every_deciding_view_holds_leave_the_lease():
    from webhook.adapters.kube.ledger import SETTLED_THROUGH, LedgerUnavailable, ViewMark

    api = FakeCoordination()
    replica_a, replica_b = LeaseLedger(api, "gpuport-system"), LeaseLedger(api, "gpuport-system")

    def reserve(ledger, key, mark, settled=lambda uid: False, now=1000.0):
        reservation = Reservation(key, GpuUse(Fraction(1)), ("gpus",), now + 30)
        return ledger.reserve("team-a", reservation, lambda current: None, now, settled, mark=mark)

    assert reserve(replica_a, "u1", ViewMark(90, lambda uid: None)) is None
    # Replica A's view now holds u1's pod (first seen at version 100) and has read to 120.
    a_sees_u1 = ViewMark(120, {"u1": 100}.get)
    assert reserve(replica_a, "u2", a_sees_u1, settled=lambda uid: uid == "u1", now=1001.0) is None
    _, annotations = api.leases["gpuport-quota-team-a"]
    assert len(decode(annotations["gpuport.io/reservations"])) == 2  # seen, but only a second ago
    assert reserve(replica_a, "u2", a_sees_u1, settled=lambda uid: uid == "u1", now=1005.0) is None
    _, annotations = api.leases["gpuport-quota-team-a"]
    assert [r.key for r in decode(annotations["gpuport.io/reservations"])] == ["u2"]
    assert annotations[SETTLED_THROUGH] == "100"
    # Replica B has read only to 90: it might not count u1's pod, so it must not decide.
    with pytest.raises(LedgerUnavailable, match="not caught up"):
        reserve(replica_b, "u3", ViewMark(90, lambda uid: None))
    with pytest.raises(LedgerUnavailable, match="not caught up"):
        reserve(replica_b, "u3", None)
    assert reserve(replica_b, "u3", ViewMark(130, lambda uid: None)) is None  # caught up: decides


def test_a_burst_keeps_the_lease_small_once_views_hold_the_pods():
    from webhook.adapters.kube.ledger import ViewMark

    api = FakeCoordination()
    ledger = LeaseLedger(api, "gpuport-system")
    for n in range(200):  # one admission a second, every earlier pod already in this view
        seen = {f"u{k}": 1000 + k for k in range(n)}
        mark = ViewMark(2000, seen.get)
        reservation = Reservation(f"u{n}", GpuUse(Fraction(1)), ("gpus",), n + 30.0)
        decision = ledger.reserve(
            "team-a", reservation, lambda c: None, float(n), seen.__contains__, mark=mark
        )
        assert decision is None
    _, annotations = api.leases["gpuport-quota-team-a"]
    assert len(annotations["gpuport.io/reservations"]) < 16 * 1024
    # What stays: the reservations younger than SETTLE_AFTER, whatever the view holds.
    assert [r.key for r in decode(annotations["gpuport.io/reservations"])] == ["u198", "u199"]


def test_a_replica_a_moment_behind_waits_for_its_view_instead_of_refusing():
    import threading

    from webhook.adapters.kube.ledger import SETTLED_THROUGH

    api = FakeCoordination()
    api.leases["gpuport-quota-team-a"] = (1, {SETTLED_THROUGH: "100"})  # another replica settled up to 100
    view = FakeView([QUOTA])
    view.read_through = 90
    gate = QuotaGate(view, LeaseLedger(api, "gpuport-system"), clock=lambda: 0.0)
    threading.Timer(0.1, lambda: setattr(view, "read_through", 120)).start()  # the watch delivers
    assert admit(gate, request_for(pod({"nvidia.com/gpu": "1"}), "x"), context("generic")) is None
    view.read_through = 50
    lagging = admit(gate, request_for(pod({"nvidia.com/gpu": "1"}), "y"), context("generic"))
    assert lagging.reason == "quota-unavailable" and "not caught up" in lagging.message


def test_a_ledger_writes_on_its_own_last_write_without_reading_it_again():
    api = FakeCoordination()
    ledger = LeaseLedger(api, "gpuport-system")
    for n in range(5):
        reservation = Reservation(f"u{n}", GpuUse(Fraction(1)), ("gpus",), 100.0)
        assert ledger.reserve("team-a", reservation, lambda current: None, 0.0, lambda uid: False) is None
    verbs = [verb for verb, _ in api.calls]
    assert verbs == ["read", "create", "replace", "replace", "replace", "replace"]
    _, annotations = api.leases["gpuport-quota-team-a"]
    assert [r.key for r in decode(annotations["gpuport.io/reservations"])] == [f"u{n}" for n in range(5)]


def two_replicas_with_quota(gpus):
    """A shared fake API server, two replicas' ledgers, and a reserve(ledger, key) of one GPU under a
    quota of `gpus`."""
    api = FakeCoordination()

    def within_quota(current):
        return "over" if sum(r.usage.equivalents for r in current) >= gpus else None

    def reserve(ledger, key):
        reservation = Reservation(key, GpuUse(Fraction(1)), ("gpus",), 100.0)
        return ledger.reserve("team-a", reservation, within_quota, 0.0, lambda uid: False)

    return api, LeaseLedger(api, "gpuport-system"), LeaseLedger(api, "gpuport-system"), reserve


def test_a_kept_copy_another_replica_changed_is_decided_again_on_a_fresh_read():
    api, replica_a, replica_b, reserve = two_replicas_with_quota(2)

    assert reserve(replica_a, "a1") is None  # A keeps the Lease holding a1
    assert reserve(replica_b, "b1") is None  # B writes meanwhile: A's copy is now stale
    api.calls.clear()
    assert reserve(replica_a, "a2") == "over"  # on its stale copy A would have admitted a2 ...
    assert [verb for verb, _ in api.calls] == ["replace", "read"]  # ... but the server refused that write
    _, annotations = api.leases["gpuport-quota-team-a"]
    assert sorted(r.key for r in decode(annotations["gpuport.io/reservations"])) == ["a1", "b1"]
    api.calls.clear()
    assert reserve(replica_b, "b2") == "over"  # a denial writes nothing: it is only decided on a fresh read
    assert [verb for verb, _ in api.calls] == ["read"]


def test_an_admission_on_a_stale_kept_copy_is_refused_by_the_server_and_redecided():
    api, replica_a, replica_b, reserve = two_replicas_with_quota(3)

    assert reserve(replica_a, "a1") is None
    assert reserve(replica_b, "b1") is None
    api.calls.clear()
    assert reserve(replica_a, "a2") is None  # 3rd of 3: the stale write fails, the fresh one passes
    assert [verb for verb, _ in api.calls] == ["replace", "read", "replace"]
    assert reserve(replica_b, "b2") == "over"


def ledger_holding(n):
    """A fake API server and a ledger that reserved u0..u<n-1> (1 GPU each) at t=1000."""
    api = FakeCoordination()
    ledger = LeaseLedger(api, "gpuport-system")
    for k in range(n):
        reservation = Reservation(f"u{k}", GpuUse(Fraction(1)), ("gpus",), 1000.0 + 30)
        ledger.reserve("team-a", reservation, lambda c: None, 1000.0, lambda uid: False)
    return api, ledger


def test_a_full_quota_still_drops_settled_reservations_but_a_dry_run_writes_nothing():
    from webhook.adapters.kube.ledger import ViewMark

    api, ledger = ledger_holding(4)
    everything_seen = ViewMark(2000, lambda uid: 1500)

    def full(current):
        return "over"

    dry = Reservation("dry", GpuUse(Fraction(1)), ("gpus",), 1010.0 + 30)
    assert ledger.reserve("team-a", dry, full, 1010.0, bool, write=False, mark=everything_seen) == "over"
    _, annotations = api.leases["gpuport-quota-team-a"]
    assert len(decode(annotations["gpuport.io/reservations"])) == 4  # dryRun: no side effect at all
    late = Reservation("late", GpuUse(Fraction(1)), ("gpus",), 1010.0 + 30)
    assert ledger.reserve("team-a", late, full, 1010.0, bool, mark=everything_seen) == "over"
    _, annotations = api.leases["gpuport-quota-team-a"]
    assert decode(annotations["gpuport.io/reservations"]) == []  # every pod is in the views: settled
    assert annotations["gpuport.io/settled-through"] == "1500"


def test_a_full_quota_rewrites_the_lease_only_when_settling_drops_a_quarter_of_it():
    from webhook.adapters.kube.ledger import ViewMark

    api, ledger = ledger_holding(8)
    one_seen = ViewMark(2000, {"u0": 1500}.get)
    late = Reservation("late", GpuUse(Fraction(1)), ("gpus",), 1010.0 + 30)
    api.calls.clear()
    assert (
        ledger.reserve("team-a", late, lambda c: "over", 1010.0, {"u0"}.__contains__, mark=one_seen) == "over"
    )
    assert [verb for verb, _ in api.calls] == ["read"]  # 1 of 8 settled: not worth a write
    two_seen = ViewMark(2000, {"u0": 1500, "u1": 1501}.get)
    assert ledger.reserve("team-a", late, lambda c: "over", 1010.0, {"u0", "u1"}.__contains__, mark=two_seen)
    _, annotations = api.leases["gpuport-quota-team-a"]
    assert [r.key for r in decode(annotations["gpuport.io/reservations"])] == [f"u{n}" for n in range(2, 8)]


def test_a_burst_sums_only_the_pods_added_since_the_last_decision():
    def running(uid, gpus="1"):
        return dict(pod({"nvidia.com/gpu": gpus}), metadata={"name": uid, "namespace": "team-a", "uid": uid})

    view = FakeView([QUOTA], [running(f"r{n}") for n in range(3)])
    gate = QuotaGate(view, MemoryLedger(), clock=lambda: 1000.0)
    summed = []
    original = gate._counted
    gate._counted = lambda other, ctx: summed.append(other["metadata"]["uid"]) or original(other, ctx)
    ctx = context("generic")
    assert admit(gate, request_for(pod({"nvidia.com/gpu": "1"}), "a", dry_run=True), ctx) is None
    assert sorted(summed) == ["r0", "r1", "r2"]
    summed.clear()
    view.pods.append(running("r3", "4"))
    assert admit(gate, request_for(pod({"nvidia.com/gpu": "1"}), "b", dry_run=True), ctx) is None  # 7 + 1
    assert summed == ["r3"]
    assert admit(gate, request_for(pod({"nvidia.com/gpu": "2"}), "c", dry_run=True), ctx).reason == (
        "quota-exceeded"
    )
    summed.clear()
    view.pods[:] = [p for p in view.pods if p["metadata"]["uid"] != "r3"]  # the big pod finished
    assert admit(gate, request_for(pod({"nvidia.com/gpu": "2"}), "d", dry_run=True), ctx) is None  # 3 + 2
    assert sorted(summed) == ["r0", "r1", "r2"]  # a pod left: summed afresh, never subtracted


def test_a_kept_copy_of_a_lease_someone_deleted_is_created_again():
    api = FakeCoordination()
    ledger = LeaseLedger(api, "gpuport-system")

    def reserve(key):
        reservation = Reservation(key, GpuUse(Fraction(1)), ("gpus",), 100.0)
        return ledger.reserve("team-a", reservation, lambda current: None, 0.0, lambda uid: False)

    assert reserve("u1") is None
    del api.leases["gpuport-quota-team-a"]  # an admin cleaned up gpuport's namespace
    api.calls.clear()
    assert reserve("u2") is None
    assert [verb for verb, _ in api.calls] == ["replace", "read", "create"]
    _, annotations = api.leases["gpuport-quota-team-a"]
    assert [r.key for r in decode(annotations["gpuport.io/reservations"])] == ["u2"]


def test_every_wait_of_a_quota_check_ends_inside_one_admission_budget(monkeypatch):
    """A slow API server (each call as slow as its timeout lets it be) and a view behind another
    replica's (catch-up, then a second attempt) still end in a refusal inside ADMISSION_SECONDS: every
    call is given only what is left of the one budget, never a fresh deadline of its own."""
    from webhook.adapters.kube import ledger as ledger_module
    from webhook.adapters.kube import quota_gate as gate_module

    clock = [100.0]
    monkeypatch.setattr(ledger_module.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(gate_module.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(gate_module.time, "sleep", lambda seconds: clock.__setitem__(0, clock[0] + seconds))
    ends = []

    class Slow(FakeCoordination):
        def _spend(self, timeout):
            clock[0] += sum(timeout)  # connect and read, each to its limit
            ends.append(clock[0])

        def read_namespaced_lease(self, name, namespace, _request_timeout=None, _preload_content=True):
            self._spend(_request_timeout)
            # Another replica settled pods this view has not read: the first answer sends it to catch up.
            self.leases[name] = (7, {ledger_module.SETTLED_THROUGH: "500"})
            return super().read_namespaced_lease(name, namespace, _request_timeout, _preload_content)

    view = FakeView([QUOTA])
    view.read_through = 10  # never reaches 500: the catch-up times out too
    start = clock[0]
    denied = admit(
        QuotaGate(view, LeaseLedger(Slow(), "gpuport-system")),
        request_for(pod({"nvidia.com/gpu": "1"}), "x"),
        context("generic"),
    )
    assert denied is not None and denied.reason == "quota-unavailable"
    budget = start + gate_module.ADMISSION_SECONDS
    assert ends and all(end <= budget for end in ends)
    assert clock[0] <= budget + 0.011  # the catch-up looks every 10 ms
