"""The quota gate: what it admits and refuses against a cluster view, under threads, with a frozen API
server, and what it sums once."""

import threading
from decimal import Decimal
from fractions import Fraction

import pytest

from tests.helpers import context
from tests.quota_fakes import QUOTA, FakeCoordination, FakeView, admit, request_for
from tests.translation_cases import SOURCES, pod
from webhook.adapters.kube.ledger import LeaseLedger, MemoryLedger, Reservation
from webhook.adapters.kube.quota_gate import QuotaGate
from webhook.core.budget.quota import Quota
from webhook.core.vocabulary.gpu_use import GpuUse


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


def test_a_burst_sums_only_the_pods_added_since_the_last_decision():
    def running(uid, gpus="1"):
        return dict(pod({"nvidia.com/gpu": gpus}), metadata={"name": uid, "namespace": "team-a", "uid": uid})

    view = FakeView([QUOTA], [running(f"r{n}") for n in range(3)])
    gate = QuotaGate(view, MemoryLedger(), clock=lambda: 1000.0)
    summed = []
    original = gate.running_pod_use
    gate.running_pod_use = lambda other, ctx: summed.append(other["metadata"]["uid"]) or original(other, ctx)
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


@pytest.mark.parametrize("name", ["gpu.intel.com/i915", "gpu.intel.com/xe", "example.com/vgpu-slot"])
def test_a_gpu_name_no_map_reads_is_refused_in_a_budget_namespace_naming_it(name):
    ctx = context("generic")
    one = Quota("gpus", {"requests.nvidia.com/gpu": Decimal(1)})
    denied = admit(QuotaGate(FakeView([one]), MemoryLedger()), request_for(pod({name: "8"}), "a"), ctx)
    assert denied is not None and denied.reason == "quota-gpu-name-unread"
    assert name in denied.message and "cloud map" in denied.message and "nvidia.com/gpu" in denied.message
    # Outside any GPU budget the name is nobody's business but the device plugin's.
    assert admit(QuotaGate(FakeView([]), MemoryLedger()), request_for(pod({name: "8"}), "b"), ctx) is None


def test_devices_that_are_not_gpus_pass_a_budget_namespace_as_they_did():
    ctx = context("generic")
    one = Quota("gpus", {"requests.nvidia.com/gpu": Decimal(1)})
    for name in ("vpc.amazonaws.com/efa", "rdma/rdma_shared_device_a", "example.com/fpga"):
        assert (
            admit(QuotaGate(FakeView([one]), MemoryLedger()), request_for(pod({name: "4"}), name), ctx)
            is None
        )


def test_kai_shares_of_running_pods_are_counted_from_the_view_not_only_while_reserved():
    from tests.translation_cases import kai_pod
    from webhook.adapters.kube.clusterview import compact_pod

    ctx = context("kai")
    one = Quota("gpus", {"requests.nvidia.com/gpu": Decimal(1)})

    def running(uid, annotations):
        obj = kai_pod(annotations)
        obj["metadata"]["uid"] = uid
        obj["status"] = {"phase": "Running"}
        return compact_pod(obj)  # what the watch keeps of it

    # Its reservation long gone (the clock is past every TTL): the view alone must count the 0.9.
    view = FakeView([one], [running("r", {"gpu-fraction": "0.9"})])
    gate = QuotaGate(view, MemoryLedger(), clock=lambda: 10_000.0)
    denied = admit(gate, request_for(kai_pod({"gpu-fraction": "0.9"}), "a"), ctx)
    assert denied is not None and denied.reason == "quota-exceeded"
    several = kai_pod({"gpu-fraction": "0.9", "gpu-fraction-num-devices": "8"})
    empty = QuotaGate(FakeView([one]), MemoryLedger(), clock=lambda: 0.0)
    assert admit(empty, request_for(several, "b"), ctx).reason == "quota-exceeded"
