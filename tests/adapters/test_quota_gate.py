"""The quota gate: what it admits and refuses against a cluster view, under threads, with a frozen API
server, and what it sums once."""

import threading
import time
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
        # Six 3g.40gb slices hold 3 GPUs: each takes half its GPU's memory slices (4 of 8).
        pod({"nvidia.com/mig-3g.40gb": "6"}),
        metadata={"name": "r", "namespace": "team-a", "uid": "r"},
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
    clock[0] += 41  # the first pod never appeared (a later step refused it): its reservation lapses
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
    clock[0] += 41
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
    assert admit(gate, request_for(pod({"nvidia.com/mig-2g.20gb": "1"}), "a"), ctx) is None  # 2/7
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
            Reservation("a", GpuUse(Fraction(1)), ("gpus",), 1.0, 0.0),
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


def test_a_burst_waits_for_a_slot_while_the_store_keeps_answering():
    """Every slot busy with a store that answers (a burst, not a frozen API server): the next admission
    waits past wait_for_slot for a slot and is decided, never refused as busy."""
    import threading
    import time

    release, entered = threading.Event(), threading.Event()

    class Busy(MemoryLedger):
        def reserve(self, namespace, reservation, *args, **kwargs):
            if reservation.key == "held":
                entered.set()
                release.wait(5)
            return super().reserve(namespace, reservation, *args, **kwargs)

    gate = QuotaGate(FakeView([QUOTA]), Busy(), clock=lambda: 0.0, max_waiting=1, wait_for_slot=0.05)
    ctx = context("generic")
    assert admit(gate, request_for(pod({"nvidia.com/gpu": "1"}), "first"), ctx) is None  # it answers
    holder = threading.Thread(
        target=admit, args=(gate, request_for(pod({"nvidia.com/gpu": "1"}), "held"), ctx)
    )
    holder.start()
    assert entered.wait(5)
    answers = []
    waiter = threading.Thread(
        target=lambda: answers.append(admit(gate, request_for(pod({"nvidia.com/gpu": "1"}), "next"), ctx))
    )
    waiter.start()
    time.sleep(0.3)  # past wait_for_slot: a fixed slot wait would have refused it by now
    release.set()
    holder.join()
    waiter.join()
    assert answers == [None]


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


def test_a_replica_behind_twice_in_a_fast_burst_catches_up_twice_instead_of_refusing():
    """In a fast burst the record's settled-through moves on while a replica catches up: the second
    time its view is behind, it waited for nothing and refused "not caught up" (no quota's refusal)."""
    import threading

    from webhook.adapters.kube.ledger import SETTLED_THROUGH

    api = FakeCoordination()
    api.leases["gpuport-quota-team-a"] = (1, {SETTLED_THROUGH: "100"})
    view = FakeView([QUOTA])
    view.read_through = 90

    def another_replica_settles_then_the_watch_delivers():
        with api.atomic:  # the record moves on before this view reaches where it was
            version, annotations = api.leases["gpuport-quota-team-a"]
            api.leases["gpuport-quota-team-a"] = (version + 1, {**annotations, SETTLED_THROUGH: "200"})
        view.read_through = 120
        threading.Timer(0.1, lambda: setattr(view, "read_through", 210)).start()

    first_read = api.read_namespaced_lease
    started = threading.Event()

    def read(*args, **kwargs):  # the burst goes on from the gate's first read of the record
        if not started.is_set():
            started.set()
            threading.Timer(0.05, another_replica_settles_then_the_watch_delivers).start()
        return first_read(*args, **kwargs)

    api.read_namespaced_lease = read
    gate, ctx = QuotaGate(view, LeaseLedger(api, "gpuport-system"), clock=lambda: 0.0), context("generic")
    assert admit(gate, request_for(pod({"nvidia.com/gpu": "1"}), "x"), ctx) is None
    assert view.read_through == 210  # admitted once its view had read as far as the record said, twice


def test_a_review_queued_behind_one_catching_up_its_view_waits_instead_of_being_refused_busy():
    """The store answered the review holding the only slot (its view is behind the record): the one
    queued for the slot keeps waiting, as behind any review the store answers. It was refused "waiting on
    the API server" after `wait_for_slot` (4 of 1,000 in a burst on a loaded machine)."""
    from webhook.adapters.kube.ledger import SETTLED_THROUGH

    api = FakeCoordination()
    api.leases["gpuport-quota-team-a"] = (1, {SETTLED_THROUGH: "100"})
    view = FakeView([QUOTA])
    view.read_through = 90
    gate = QuotaGate(
        view, LeaseLedger(api, "gpuport-system"), clock=lambda: 0.0, max_waiting=1, wait_for_slot=0.05
    )
    ctx = context("generic")
    first: list = []
    holder = threading.Thread(
        target=lambda: first.append(admit(gate, request_for(pod({"nvidia.com/gpu": "1"}), "a"), ctx))
    )
    holder.start()
    threading.Timer(0.4, lambda: setattr(view, "read_through", 120)).start()  # the watch delivers
    time.sleep(0.1)  # the first review holds the slot, catching up
    assert admit(gate, request_for(pod({"nvidia.com/gpu": "1"}), "b"), ctx) is None
    holder.join()
    assert first == [None]


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


@pytest.mark.parametrize(
    "name",
    [
        "gpu.intel.com/i915",
        "gpu.intel.com/xe",
        "example.com/vgpu-slot",
        # No GPU word, under a GPU vendor's domain: NVIDIA's KubeVirt passthrough names a GPU by its PCI
        # device; a device plugin config may rename nvidia.com/gpu to anything; AMD's likewise.
        "nvidia.com/GA100_A100_PCIE_40GB",
        "nvidia.com/h100",
        "amd.com/mi300x",
    ],
)
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


def test_a_name_under_a_gpu_vendor_s_domain_that_a_map_declares_no_gpu_stays_as_declared():
    from dataclasses import replace

    from webhook.core.vocabulary.platform import CloudDevice

    generic = context("generic")
    one = Quota("gpus", {"requests.nvidia.com/gpu": Decimal(1)})
    nic = pod({"nvidia.com/hostdev": "2"})  # the Network Operator's SR-IOV NICs, as some admins name them
    denied = admit(QuotaGate(FakeView([one]), MemoryLedger()), request_for(nic, "a"), generic)
    assert denied is not None and denied.reason == "quota-gpu-name-unread"
    assert "if it gives no GPU, under devices" in denied.message
    declared = CloudDevice("nvidia.com/hostdev", "rdma-network", "ConnectX NICs by SR-IOV")
    maps = tuple(replace(m, devices=(declared,)) if m.name == "generic" else m for m in generic.dialects.maps)
    ctx = replace(
        generic,
        target=next(m for m in maps if m.name == "generic"),
        dialects=replace(generic.dialects, maps=maps),
    )
    assert admit(QuotaGate(FakeView([one]), MemoryLedger()), request_for(nic, "b"), ctx) is None
    # Intel's other device plugins give no GPUs: their domains are not a GPU vendor's.
    assert (
        admit(
            QuotaGate(FakeView([one]), MemoryLedger()), request_for(pod({"sgx.intel.com/epc": "1"}), "c"), ctx
        )
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


# Pod updates. The built-in pod evaluator does not look at them (pods.go: Handles takes creates and
# resizes), so a scope flipped by an update moved GPUs between quotas unchecked; gpuport charges them
# by the resourcequota admission plugin's rule for updates (CheckRequest in
# staging/src/k8s.io/apiserver/pkg/admission/plugin/resourcequota/controller.go).

TERMINATING = Quota("short", {"requests.nvidia.com/gpu": Decimal(1)}, ("Terminating",))
NOT_TERMINATING = Quota("long", {"requests.nvidia.com/gpu": Decimal(1)}, ("NotTerminating",))


def running(uid, resources=None, **spec):
    obj = pod({"nvidia.com/gpu": "1"} if resources is None else resources)
    obj["metadata"] = {"name": uid, "namespace": "team-a", "uid": uid, "resourceVersion": "10"}
    obj["spec"].update(spec)
    obj["status"] = {"phase": "Running", "qosClass": "BestEffort"}
    return obj


def update_review(old, new, dry_run=False):
    from tests.helpers import parsed, review_of

    review = review_of(new, operation="UPDATE", dry_run=dry_run, uid=f"req-{new['metadata']['uid']}")
    review["request"]["oldObject"] = old
    return parsed(review)


def given_a_deadline(old, seconds=600):
    import copy

    new = copy.deepcopy(old)
    new["spec"]["activeDeadlineSeconds"] = seconds
    return new


def validate_update(gate, old, new, ctx=None, dry_run=False):
    from webhook.core.deciding.pipeline import Gates, validate

    return validate(update_review(old, new, dry_run), ctx or context("generic"), Gates(quota=gate))


def test_an_update_that_sets_a_deadline_is_charged_to_the_terminating_quota_it_enters():
    """Four pods admitted under NotTerminating quotas must not hold more than 1 GPU under a Terminating
    quota of 1 by being given activeDeadlineSeconds (isTerminating, pods.go) one by one."""
    a, b = running("a"), running("b")
    view = FakeView(
        [Quota("long", {"requests.nvidia.com/gpu": Decimal(8)}, ("NotTerminating",)), TERMINATING]
    )
    view.pods = [a, b]
    gate = QuotaGate(view, MemoryLedger(), clock=lambda: 1000.0)
    assert validate_update(gate, a, given_a_deadline(a)).allowed  # 0 + 1 ≤ 1
    refused = validate_update(gate, b, given_a_deadline(b))  # 1 (a, reserved) + 1 > 1
    assert not refused.allowed and refused.reason == "quota-exceeded"
    assert (
        'pods "b" is forbidden: exceeded quota: short, requested: requests.nvidia.com/gpu=1, '
        "used: requests.nvidia.com/gpu=1, limited: requests.nvidia.com/gpu=1" in refused.message
    )


def test_an_update_that_moves_no_gpu_into_a_quota_is_not_charged():
    """CheckRequest: an update that raises no quota's usage passes, even past a full quota; a
    deadline made shorter keeps the pod where it was, and a pod asking no GPU brings none."""

    class Exploding(MemoryLedger):
        def reserve(self, *args, **kwargs):
            raise AssertionError("no round trip expected")

    full = running("full", activeDeadlineSeconds=600)
    view = FakeView([TERMINATING, NOT_TERMINATING], [full, running("other", activeDeadlineSeconds=300)])
    gate = QuotaGate(view, Exploding(), clock=lambda: 1000.0)
    assert validate_update(gate, full, given_a_deadline(full, 60)).allowed
    cpu = running("cpu", {"cpu": "1"})
    assert validate_update(gate, cpu, given_a_deadline(cpu)).allowed


def test_an_update_is_checked_against_the_quota_it_enters_not_the_one_it_leaves():
    """generic.Matches on the pod after the update: it leaves NotTerminating (full) and enters Terminating."""
    a = running("a")
    view = FakeView([NOT_TERMINATING, TERMINATING], [a])  # a fills "long"
    gate = QuotaGate(view, MemoryLedger(), clock=lambda: 1000.0)
    assert validate_update(gate, a, given_a_deadline(a)).allowed


def test_a_dry_run_update_decides_and_reserves_nothing():
    a = running("a")
    ledger = MemoryLedger()
    gate = QuotaGate(FakeView([TERMINATING], [a, running("t", activeDeadlineSeconds=5)]), ledger)
    assert not validate_update(gate, a, given_a_deadline(a), dry_run=True).allowed
    gate = QuotaGate(FakeView([TERMINATING], [a]), ledger)
    assert validate_update(gate, a, given_a_deadline(a), dry_run=True).allowed
    assert ledger.reservations("team-a") == []


def test_an_update_s_reservation_counts_until_the_view_holds_the_pod_as_updated_then_once():
    """A replica whose view still holds the pod as it was counts the reservation; once the view holds
    the updated pod, the pod counts from the view alone (never twice)."""
    a = running("a")
    view = FakeView([Quota("short", {"requests.nvidia.com/gpu": Decimal(2)}, ("Terminating",))], [a])
    gate = QuotaGate(view, MemoryLedger(), clock=lambda: 1000.0)
    updated = given_a_deadline(a)
    assert validate_update(gate, a, updated).allowed
    two = running("two", {"nvidia.com/gpu": "2"}, activeDeadlineSeconds=60)
    assert admit(gate, request_for(two, "two", dry_run=True), context("generic")).reason == "quota-exceeded"
    view.pods = [updated]  # the watch delivers the update
    one = running("one", activeDeadlineSeconds=60)
    assert admit(gate, request_for(one, "one", dry_run=True), context("generic")) is None  # 1 + 1 ≤ 2
    assert admit(gate, request_for(two, "two", dry_run=True), context("generic")).reason == "quota-exceeded"


def test_a_running_pod_changed_in_place_is_counted_as_it_is_now():
    """The view's copy of a running pod changes when an update lands: the namespace's sum must read it
    again (it was read once per pod UID, and a pod given a deadline stayed NotTerminating)."""
    a = running("a")
    view = FakeView([TERMINATING], [a])
    gate = QuotaGate(view, MemoryLedger(), clock=lambda: 1000.0)
    one = running("one", activeDeadlineSeconds=60)
    assert admit(gate, request_for(one, "one", dry_run=True), context("generic")) is None
    view.pods = [given_a_deadline(a)]
    refused = admit(gate, request_for(one, "one", dry_run=True), context("generic"))
    assert refused is not None and refused.reason == "quota-exceeded"


def kai_pod(uid, fraction):
    obj = running(uid, {}, schedulerName="kai-scheduler")
    obj["metadata"]["annotations"] = {"gpu-fraction": fraction}
    return obj


def test_an_update_that_raises_a_gpu_share_is_charged_the_rise():
    """CheckRequest on an update the quota matched before and after: only the increase is charged,
    against a usage that already holds the pod's old share (the new charge replaces the old one)."""
    import copy

    ctx = context("kai")
    x, y = kai_pod("x", "0.5"), kai_pod("y", "0.25")
    gate = QuotaGate(
        FakeView([Quota("gpus", {"requests.nvidia.com/gpu": Decimal(1)})], [x, y]), MemoryLedger()
    )
    larger = copy.deepcopy(y)
    larger["metadata"]["annotations"]["gpu-fraction"] = "0.5"
    assert validate_update(gate, y, larger, ctx, dry_run=True).allowed  # 0.75 + 0.25 ≤ 1
    larger["metadata"]["annotations"]["gpu-fraction"] = "0.75"
    refused = validate_update(gate, y, larger, ctx, dry_run=True)  # 0.75 + 0.5 > 1
    assert not refused.allowed
    assert "requested: requests.nvidia.com/gpu=0.5, used: requests.nvidia.com/gpu=0.75" in refused.message


def test_a_share_given_by_an_update_to_a_pod_created_without_one_is_charged():
    """A pod created with a scheduling gate and no GPU, then given gpu-fraction by an update, never
    reached gpuport: the share must be charged in full (the view counts nothing of it)."""
    import copy

    ctx = context("kai")
    gated = running("g", {}, schedulerName="kai-scheduler", schedulingGates=[{"name": "wait"}])
    view = FakeView([Quota("gpus", {"requests.nvidia.com/gpu": Decimal(1)})], [kai_pod("x", "0.75")])
    gate = QuotaGate(view, MemoryLedger())
    shared = copy.deepcopy(gated)
    shared["metadata"]["annotations"] = {"gpu-fraction": "0.5"}
    refused = validate_update(gate, gated, shared, ctx, dry_run=True)
    assert not refused.allowed and "requested: requests.nvidia.com/gpu=0.5" in refused.message


def test_an_update_that_writes_a_share_gpuport_cannot_read_is_refused_under_a_gpu_quota():
    """Read as nothing, an unreadable share would leave the quota while its scheduler may still read it."""
    import copy

    ctx = context("kai")
    x = kai_pod("x", "0.5")
    gate = QuotaGate(FakeView([Quota("gpus", {"requests.nvidia.com/gpu": Decimal(1)})], [x]), MemoryLedger())
    odd = copy.deepcopy(x)
    odd["metadata"]["annotations"]["gpu-fraction"] = "1.5"
    refused = validate_update(gate, x, odd, ctx, dry_run=True)
    assert not refused.allowed and refused.reason == "quota-share-unreadable"
    assert "gpu-fraction is 1.5" in refused.message
    no_quota = QuotaGate(FakeView([], [x]), MemoryLedger())
    assert validate_update(no_quota, x, odd, ctx, dry_run=True).allowed


def test_a_pod_update_is_not_checked_again_only_charged():
    """The containers of a pod cannot change: an update is never refused for what its create was told."""
    from webhook.core.deciding.pipeline import validate

    odd = running("odd", {"nvidia.com/gpu": "500m"})  # a fraction the checks refuse at create
    assert validate(update_review(odd, given_a_deadline(odd)), context("generic")).allowed


def test_an_update_s_reservation_settles_against_the_view_s_compact_record_too():
    """The real view holds compact records (clusterview.compact_pod), not whole pods: the updated pod
    must be recognised in that form as well, or it is counted twice for the reservation's life."""
    from webhook.adapters.kube.clusterview import compact_pod

    a = running("a")
    a["spec"]["resources"] = {"requests": {"cpu": "1"}}
    a["status"]["qosClass"] = "Burstable"
    view = FakeView(
        [Quota("short", {"requests.nvidia.com/gpu": Decimal(2)}, ("Terminating",))], [compact_pod(a)]
    )
    gate = QuotaGate(view, MemoryLedger(), clock=lambda: 1000.0)
    updated = given_a_deadline(a)
    assert validate_update(gate, a, updated).allowed
    view.pods = [compact_pod(updated)]
    one = running("one", activeDeadlineSeconds=60)
    assert admit(gate, request_for(one, "one", dry_run=True), context("generic")) is None  # 1 + 1 ≤ 2


CPU_ONLY = Quota("cpu", {"requests.cpu": Decimal(8)})


@pytest.mark.parametrize(
    "quotas, listed, concerned",
    [
        ([], True, False),
        ([CPU_ONLY], True, False),
        ([QUOTA], True, True),
        ([CPU_ONLY, QUOTA], True, True),
        ([], False, True),  # not listed yet: its GPU pods wait (quota-view-loading)
    ],
)
def test_a_quota_gate_is_concerned_where_a_gpu_quota_may_count_the_pod(quotas, listed, concerned):
    view = FakeView(quotas)
    if not listed:
        view.listed = set()
    gate, ctx = QuotaGate(view, MemoryLedger(), clock=lambda: 0.0), context("generic")
    asks = [{"nvidia.com/gpu": "8"}, {"nvidia.com/gpu": "9"}, {"aliyun.com/gpu-count": "12"}, {"cpu": "1"}]
    for n, resources in enumerate(asks):
        request = request_for(pod(resources), f"p{n}")
        assert gate.concerns(request, ctx) is concerned
        if not concerned:  # what /validate skips would have admitted the pod anyway
            assert admit(gate, request, ctx) is None
