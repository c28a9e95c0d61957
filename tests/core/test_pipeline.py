"""The admission pipeline's order: which steps run, for which requests, and who wins."""

import copy

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.core.test_properties import pods
from tests.helpers import context, parsed, review_of
from tests.translation_cases import SOURCES, TARGETS, pod
from webhook.adapters.kube.claim_templates import ClaimTemplateStore
from webhook.core.asks.demand import read_demand, reads_claims
from webhook.core.deciding import pipeline
from webhook.core.deciding.decision import deny
from webhook.core.vocabulary.workloads import read_pod

CTX = context("generic")


class Recording:
    """A gate that remembers what it was asked with, and refuses when told to."""

    def __init__(self, refuse: bool = False):
        self.calls = []
        self.refuse = refuse

    def admit(self, request, context, demand):
        self.calls.append((request.uid, demand))
        return deny("test-refusal", "refused by a test gate") if self.refuse else None


def gpu_pod(operation="CREATE"):
    return parsed(review_of(pod({"nvidia.com/gpu": "1"}), operation=operation, uid=operation.lower()))


def test_gates_see_pod_creates_only_with_the_demand_read_once():
    limits, quota = Recording(), Recording()
    assert pipeline.validate(gpu_pod(), CTX, pipeline.Gates(limits, quota)).allowed
    assert len(limits.calls) == len(quota.calls) == 1
    assert limits.calls[0][1] is quota.calls[0][1]  # one read of the pod's asks, shared
    assert limits.calls[0][1].asks[0].count == 1
    assert pipeline.validate(gpu_pod("UPDATE"), CTX, pipeline.Gates(limits, quota)).allowed
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "team-a"},
        "spec": {"template": {"spec": pod({"nvidia.com/gpu": "1"})["spec"]}},
    }
    assert pipeline.validate(parsed(review_of(deployment)), CTX, pipeline.Gates(limits, quota)).allowed
    assert pipeline.mutate(gpu_pod("UPDATE"), CTX, pipeline.Gates(limits)).allowed
    assert len(limits.calls) == len(quota.calls) == 1  # no update, no workload template


class Unconcerned(Recording):
    """A gate with nothing to say where the pod is made (no GPU budget there), as it says up front."""

    def concerns(self, request, context):
        return False


def test_a_gate_with_nothing_to_say_is_not_asked_and_validate_reads_no_asks(monkeypatch):
    reads = []
    real = pipeline.read_pod_demand
    monkeypatch.setattr(pipeline, "read_pod_demand", lambda *a, **kw: reads.append(a) or real(*a, **kw))
    idle, quota = Unconcerned(refuse=True), Recording()
    assert pipeline.validate(gpu_pod(), CTX, pipeline.Gates(idle, Unconcerned(refuse=True))).allowed
    assert reads == [] and idle.calls == []
    assert pipeline.mutate(gpu_pod(), CTX, pipeline.Gates(idle)).allowed and idle.calls == []
    # One gate concerned: it is asked, with the asks read once, and still refuses as before.
    assert pipeline.validate(gpu_pod(), CTX, pipeline.Gates(idle, quota)).allowed
    assert len(quota.calls) == 1 and idle.calls == []
    fractional = parsed(review_of(pod({"nvidia.com/gpu": "500m"})))
    assert pipeline.validate(fractional, CTX, pipeline.Gates(idle, idle)).reason == "fractional-gpu"


def test_the_first_refusal_wins_and_later_gates_are_not_asked():
    limits, quota = Recording(refuse=True), Recording()
    refused = pipeline.validate(gpu_pod(), CTX, pipeline.Gates(limits, quota))
    assert refused.reason == "test-refusal" and quota.calls == []
    mutated = pipeline.mutate(gpu_pod(), CTX, pipeline.Gates(limits))
    assert mutated.reason == "test-refusal"


def test_a_pod_the_checks_deny_never_reaches_a_gate():
    quota = Recording()
    fractional = parsed(review_of(pod({"nvidia.com/gpu": "500m"})))
    assert not pipeline.validate(fractional, CTX, pipeline.Gates(quota=quota)).allowed
    assert quota.calls == []


def test_the_checks_answer_before_any_gate_on_both_routes():
    # A namespace whose GPU limits would refuse the pod: the user still hears what to ask for
    # instead of half a GPU, on /mutate as on /validate.
    limits, quota = Recording(refuse=True), Recording(refuse=True)
    fractional = parsed(review_of(pod({"nvidia.com/gpu": "500m"})))
    gates = pipeline.Gates(limits, quota)
    for decided in (pipeline.mutate(fractional, CTX, gates), pipeline.validate(fractional, CTX, gates)):
        assert not decided.allowed and "GPUs are whole units" in decided.message
    assert limits.calls == quota.calls == []


def test_the_limits_run_on_mutate_and_both_gates_on_validate_limits_first():
    limits, quota = Recording(), Recording()
    gates = pipeline.Gates(limits, quota)
    assert gates.on_mutate == (limits,) and gates.on_validate == (limits, quota)
    assert pipeline.Gates(quota=quota).on_mutate == ()


def test_a_workload_a_controller_made_is_checked_without_reading_its_asks(monkeypatch):
    asked = []
    real = pipeline.read_pod_demand

    def reading(*args):
        asked.append(args[0])
        return real(*args)

    monkeypatch.setattr(pipeline, "read_pod_demand", reading)
    # A shared-GPU ask generic cannot give: said when its owner applies it, never again after.
    template = {"spec": pod({"aliyun.com/gpu-mem": "8"})["spec"]}
    replicaset = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "d-1", "namespace": "team-a"},
        "spec": {"template": template},
    }
    applied = pipeline.mutate(parsed(review_of(replicaset)), CTX)
    assert applied.warnings and len(asked) == 1
    replicaset["metadata"]["ownerReferences"] = [{"kind": "Deployment", "name": "d", "controller": True}]
    made = pipeline.mutate(parsed(review_of(replicaset)), CTX)
    assert (made.allowed, made.reason, made.warnings) == (True, "checked", ())
    assert len(asked) == 1  # the controller's copy: checked, its asks never read


class RecordingUpdates(Recording):
    """A quota gate that also reviews pod updates."""

    def admit_update(self, request, context, demand, before):
        self.calls.append((request.uid, demand, before))
        return deny("test-refusal", "refused by a test gate") if self.refuse else None


def test_a_pod_update_goes_to_the_update_gates_with_both_versions_read():
    limits, quota = Recording(), RecordingUpdates(refuse=True)
    review = review_of(pod({"nvidia.com/gpu": "2"}), operation="UPDATE", uid="update")
    review["request"]["oldObject"] = pod({"nvidia.com/gpu": "1"})
    refused = pipeline.validate(parsed(review), CTX, pipeline.Gates(limits, quota))
    assert refused.reason == "test-refusal" and limits.calls == []
    ((_, after, before),) = quota.calls
    assert (after.asks[0].count, before.asks[0].count) == (2, 1)
    assert pipeline.Gates(limits).on_pod_update == ()  # a gate without admit_update is never asked


class NotServing:
    """A cluster whose API server serves no resource.k8s.io, counting what it is asked."""

    served = False

    def __init__(self):
        self.store = ClaimTemplateStore(None, "resource.k8s.io/v1", served=False)
        self.asked = 0

    def ensure(self, namespace, templates):
        return None

    def referenced(self, namespace, pod):
        self.asked += 1
        return self.store.referenced(namespace, pod)


def test_without_dra_served_a_gpu_pod_is_read_without_asking_for_device_classes():
    cluster = NotServing()
    pipeline.read_pod_demand(
        read_pod(copy.deepcopy(SOURCES["gke-whole"][1])), "team-a", context("generic"), cluster
    )
    assert cluster.asked == 0


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    drawn=st.one_of(pods(), st.sampled_from(sorted(SOURCES)).map(lambda s: copy.deepcopy(SOURCES[s][1]))),
    target=st.sampled_from(TARGETS),
)
def test_without_dra_served_a_pod_reads_as_it_did_with_the_class_lookup(drawn, target):
    ctx = context(target)
    read = read_pod(drawn)
    assume(not reads_claims(read, ctx.dialects))  # a pod naming claims asks the cluster either way
    cluster = NotServing()
    looked_up = read_demand(read, ctx.dialects, ctx.claim_objects(cluster.store.referenced("team-a", drawn)))
    assert pipeline.read_pod_demand(read, "team-a", ctx, cluster) == looked_up
