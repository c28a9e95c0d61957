"""The decision memo: a pod create equal in everything the decision reads to a recent one gets the same
decision, remembered; anything else, and any new context, is decided afresh."""

import copy
import tempfile
from dataclasses import replace
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core.test_properties import pods
from tests.helpers import context, parsed, review_of
from tests.inventories import agent_node, write_inventory
from tests.translation_cases import SOURCES, TARGETS
from webhook.adapters.http.memo import DecisionMemo
from webhook.config.cloudmap import default_directory
from webhook.config.loading import build_context
from webhook.core.asks.demand import read_demand
from webhook.core.deciding import pipeline
from webhook.core.deciding.decision_key import decision_key


class TemplatesExist:
    """A DRA cluster where every claim template a decision needs is there already."""

    def ensure(self, namespace, templates):
        return None

    def referenced(self, namespace, pod):
        return {}.get  # no template, claim or device class beyond those the decision makes

    def charged_uids(self, namespace, names, context):
        return {}  # a namespace without a GPU budget: nothing recorded


TEMPLATES_EXIST = TemplatesExist()


def request_for(pod):
    return parsed(review_of(pod))


# Labels and annotations of each replica's own (an indexed Job's completion index, the pod-name and
# pod-index labels a StatefulSet's controller writes...) and others no decision reads.
PER_POD_KEYS = st.dictionaries(
    st.sampled_from(
        [
            "batch.kubernetes.io/job-completion-index",
            "apps.kubernetes.io/pod-index",
            "statefulset.kubernetes.io/pod-name",
            "pod-template-hash",
            "controller-revision-hash",
            "kubectl.kubernetes.io/restartedAt",
            "example.com/owner",
        ]
    ),
    st.text(max_size=4),
    max_size=3,
)

# Fields the API server fills in per replica, and parts of a pod the decision never reads.
NOISE = st.fixed_dictionaries(
    {},
    optional={
        "labels": PER_POD_KEYS,
        "annotations": PER_POD_KEYS,
        "uid": st.uuids().map(str),
        "generateName": st.sampled_from(["web-7d9f-", "train-"]),
        "creationTimestamp": st.sampled_from(["2026-11-30T08:00:00Z", "2026-11-30T08:00:01Z"]),
        "ownerReferences": st.lists(
            st.fixed_dictionaries({"kind": st.just("ReplicaSet"), "uid": st.uuids().map(str)}), max_size=1
        ),
        "image": st.sampled_from(["img:1", "img:2", "nvcr.io/nvidia/pytorch:24.05-py3"]),
        "env": st.lists(
            st.fixed_dictionaries({"name": st.sampled_from(["A", "B"]), "value": st.text(max_size=3)}),
            max_size=2,
        ),
        "volumes": st.lists(
            st.fixed_dictionaries({"name": st.sampled_from(["data", "shm"]), "emptyDir": st.just({})}),
            max_size=2,
        ),
        "serviceAccountName": st.sampled_from(["default", "trainer"]),
        "priority": st.integers(0, 1000),
        "hostname": st.text(min_size=1, max_size=5),
    },
)


def with_noise(pod, noise):
    """The same pod as another replica would arrive: what differs is only what the decision ignores."""
    pod = copy.deepcopy(pod)
    metadata, spec = pod["metadata"], pod["spec"]
    for key in ("uid", "generateName", "creationTimestamp", "ownerReferences"):
        if key in noise:
            metadata[key] = noise[key]
    for key in ("labels", "annotations"):
        if key in noise and isinstance(metadata.get(key), dict):  # present or absent, as the pod was
            metadata[key] = {**metadata[key], **noise[key]}
    for key in ("volumes", "serviceAccountName", "priority", "hostname"):
        if key in noise:
            spec[key] = noise[key]
    for container in spec.get("containers", []):
        for key in ("image", "env"):
            if key in noise:
                container[key] = noise[key]
    return pod


def translation_pod(source):
    return copy.deepcopy(SOURCES[source][1])


def with_maps(pod, present):
    """The pod with empty labels and annotations maps where `present` says (edits add into them)."""
    for key in present:
        pod["metadata"].setdefault(key, {})
    return pod


ANY_POD = st.builds(
    with_maps,
    st.one_of(pods(), st.sampled_from(sorted(SOURCES)).map(translation_pod)),
    st.sets(st.sampled_from(["labels", "annotations"])),
)


def nodes_with(*records):
    with tempfile.TemporaryDirectory() as tmp:
        path = write_inventory(Path(tmp), *(agent_node(f"n{i}", r) for i, r in enumerate(records)))
        return build_context(default_directory(), "generic", path)


# A context with placement hints, which read the job labels and write the NUMA annotations.
WITH_HINTS = nodes_with("a100-pcie-8-two-numa", "h100-sxm-8-nvswitch")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pod=ANY_POD, noise=NOISE, target=st.sampled_from([*TARGETS, "with hints"]))
def test_a_replica_gets_from_the_memo_exactly_what_a_fresh_decision_gives(pod, noise, target):
    ctx = WITH_HINTS if target == "with hints" else context(target)
    memo = DecisionMemo()
    first = pipeline.mutate(request_for(pod), ctx, pipeline.NO_GATES, memo, TEMPLATES_EXIST)
    replica = request_for(with_noise(pod, noise))
    assert decision_key(replica, ctx.metadata_keys) == decision_key(request_for(pod), ctx.metadata_keys)
    assert len(memo) == 1
    assert (
        pipeline.mutate(replica, ctx, pipeline.NO_GATES, memo, TEMPLATES_EXIST)
        == pipeline.decide(replica, ctx)
        == first
    )


KEYED_EDITS = [
    lambda p: (
        p["spec"]["containers"][0]
        .setdefault("resources", {})
        .setdefault("limits", {})
        .update({"nvidia.com/gpu": "2"})
    ),
    lambda p: (
        p["spec"].setdefault("nodeSelector", {}).update({"cloud.google.com/gke-accelerator": "nvidia-l4"})
    ),
    lambda p: p["spec"].setdefault("tolerations", []).append({"key": "x", "operator": "Exists"}),
    lambda p: p["metadata"].setdefault("annotations", {}).update({"nvidia.com/use-gputype": "H100"}),
    lambda p: p["metadata"].setdefault("labels", {}).update({"batch.kubernetes.io/job-name": "j"}),
    lambda p: p["metadata"].setdefault("annotations", {}).update({"gpuport.io/translated-from": "{}"}),
    lambda p: p["metadata"].setdefault("annotations", {}).update({"gpuport.io/numa-hint": "none"}),
    lambda p: p["metadata"].setdefault("annotations", {}).update({"gpu-fraction": "0.5"}),
    lambda p: p["metadata"].setdefault("annotations", {}),  # present, empty: edits add into it
    lambda p: p["spec"].update(schedulerName="hami-scheduler"),
    lambda p: p["spec"]["containers"].append({"name": "side", "image": "x"}),
]


@settings(max_examples=200, deadline=None)
@given(pod=ANY_POD, edit=st.sampled_from(range(len(KEYED_EDITS))))
def test_a_change_the_decision_reads_is_decided_afresh(pod, edit):
    changed = copy.deepcopy(pod)
    KEYED_EDITS[edit](changed)
    original, other = request_for(pod), request_for(changed)
    if other.object == original.object:
        return  # the edit changed nothing (the value was already there)
    ctx = WITH_HINTS
    assert decision_key(other, ctx.metadata_keys) != decision_key(original, ctx.metadata_keys)
    memo = DecisionMemo()
    pipeline.mutate(original, ctx, pipeline.NO_GATES, memo, TEMPLATES_EXIST)
    assert pipeline.mutate(other, ctx, pipeline.NO_GATES, memo, TEMPLATES_EXIST) == pipeline.decide(
        other, ctx
    )


CONTEXTS = {
    "generic": lambda: context("generic"),
    "generic reloaded": lambda: build_context(default_directory(), "generic"),
    "gke": lambda: context("gke"),
    "nodes: H100 NVSwitch": lambda: nodes_with("h100-sxm-8-nvswitch"),
    "nodes: A100 PCIe": lambda: nodes_with("a100-pcie-8-two-numa", "a100-pcie-8-two-numa"),
    "shared map, narrowed": lambda: replace(
        context("generic"), target=replace(context("generic").target, offered_models=("H100-80GB",))
    ),
}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(st.tuples(st.sampled_from(sorted(CONTEXTS)), ANY_POD, NOISE), min_size=1, max_size=8))
def test_memoized_decisions_equal_fresh_ones_across_reloads_and_node_changes(steps):
    # Each step may arrive under a new context (a reload of the same files, another map, the node
    # view changed): a decision remembered under an earlier context must never answer it.
    memo = DecisionMemo(size=4)
    for name, pod, noise in steps:
        ctx = CONTEXTS[name]()
        for candidate in (pod, with_noise(pod, noise)):
            review = request_for(candidate)
            assert pipeline.mutate(review, ctx, pipeline.NO_GATES, memo, TEMPLATES_EXIST) == pipeline.decide(
                review, ctx
            )


def test_the_gate_still_sees_every_replica_with_the_remembered_demand():
    class Counting:
        def __init__(self):
            self.demands = []

        def admit(self, request, ctx, demand):
            self.demands.append(demand)
            return None

    ctx = context("generic")
    pod = translation_pod("gke-whole")
    gate, memo = Counting(), DecisionMemo()
    for uid in ("a", "b", "c"):
        pipeline.mutate(request_for(with_noise(pod, {"uid": uid})), ctx, pipeline.Gates(gate), memo)
    assert len(gate.demands) == 3
    assert all(d == read_demand(pod, ctx.dialects) for d in gate.demands)


def test_the_memo_is_bounded_and_forgets_a_replaced_context():
    ctx = context("generic")
    memo = DecisionMemo(size=2)
    for n in range(3):  # three keys: each tolerates a taint of its own
        pod = copy.deepcopy(SOURCES["generic-whole"][1])
        pod["spec"]["tolerations"] = [{"key": f"example.com/job-{n}", "operator": "Exists"}]
        pipeline.mutate(request_for(pod), ctx, pipeline.NO_GATES, memo)
    assert len(memo) == 2
    pipeline.mutate(request_for(SOURCES["gke-whole"][1]), context("gke"), pipeline.NO_GATES, memo)
    assert len(memo) == 1


def test_only_pod_creates_are_memoized():
    review = review_of(SOURCES["gke-whole"][1], operation="UPDATE")
    assert decision_key(parsed(review), context("gke").metadata_keys) is None


def test_the_pods_of_an_indexed_job_share_one_decision():
    # 1,000 completions of one indexed Job differ in their index label and annotation and in their
    # generateName, none of which gpuport reads: the first pays for the translation, the rest are
    # remembered.
    memo = DecisionMemo()
    template = with_maps(translation_pod("gke-whole"), ["labels", "annotations"])
    template["metadata"]["labels"]["batch.kubernetes.io/job-name"] = "train"
    answers = []
    for index in range(5):
        pod = copy.deepcopy(template)
        pod["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] = str(index)
        pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] = str(index)
        # The Job controller sends generateName; the API server names the pod after admission.
        del pod["metadata"]["name"]
        pod["metadata"]["generateName"] = f"train-{index}-"
        review = request_for(pod)
        answers.append(pipeline.mutate(review, WITH_HINTS, pipeline.NO_GATES, memo))
        assert answers[-1] == pipeline.decide(review, WITH_HINTS)
    assert len(memo) == 1
    assert answers[0].patch and any("prefer one" in w for w in answers[0].warnings)  # the job's own hint


def test_the_keys_name_what_translation_and_the_hints_read_and_write():
    keys = WITH_HINTS.metadata_keys
    assert keys.labels == {
        "batch.kubernetes.io/job-name",
        "training.kubeflow.org/job-name",
        "jobset.sigs.k8s.io/jobset-name",
        "leaderworkerset.sigs.k8s.io/name",  # a refused LeaderWorkerSet placement names it
    }
    assert {
        "gpuport.io/translated-from",
        "gpuport.io/numa-hint",
        "volcano.sh/numa-topology-policy",
        "nvidia.com/use-gputype",
        "nvidia.com/nouse-gputype",
        "gpu-fraction",
        "gpu-memory",
        "jobset.sigs.k8s.io/jobset-name",  # a refused JobSet placement names the JobSet
    } <= keys.annotations
    # No hints without a node view: the one label read names a LeaderWorkerSet whose placement is refused.
    assert context("generic").metadata_keys.labels == {"leaderworkerset.sigs.k8s.io/name"}


def test_a_mutation_that_says_nothing_of_what_it_reads_keys_every_label():
    ctx = replace(context("generic"), mutations=(lambda view, pod: [],))
    assert ctx.metadata_keys is None
    pod = with_maps(translation_pod("gke-whole"), ["labels"])
    other = copy.deepcopy(pod)
    other["metadata"]["labels"]["anything"] = "x"
    assert decision_key(request_for(pod), None) != decision_key(request_for(other), None)
    assert decision_key(request_for(pod), WITH_HINTS.metadata_keys) == decision_key(
        request_for(other), WITH_HINTS.metadata_keys
    )


def reduced_to_its_key(pod, keys):
    """The pod with nothing but what decision_key reads: if a decision reads anything else, the pod and
    this reduction decide differently, and a replica differing there would get a wrong decision."""
    from webhook.core.deciding.decision_key import CONTAINER_FIELDS, POD_FIELDS
    from webhook.core.vocabulary.workloads import CONTAINER_LISTS

    metadata, spec = pod["metadata"], pod["spec"]
    reduced_metadata = {k: metadata[k] for k in ("name", "namespace") if k in metadata}
    for field, wanted in (("labels", keys.labels), ("annotations", keys.annotations)):
        if field in metadata:
            values = metadata[field]
            reduced_metadata[field] = (
                {k: v for k, v in values.items() if k in wanted} if isinstance(values, dict) else values
            )
    reduced_spec = {k: spec[k] for k in POD_FIELDS if k in spec}
    for list_name in CONTAINER_LISTS:
        if list_name in spec:
            items = spec[list_name]
            # The names stay: the key leaves them out, remembered.py says when that may be.
            fields = (*CONTAINER_FIELDS, "name")
            reduced_spec[list_name] = (
                [{f: c[f] for f in fields if f in c} if isinstance(c, dict) else c for c in items]
                if isinstance(items, list)
                else items
            )
    return {
        "apiVersion": pod.get("apiVersion"),
        "kind": pod.get("kind"),
        "metadata": reduced_metadata,
        "spec": reduced_spec,
    }


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pod=ANY_POD, noise=NOISE, target=st.sampled_from([*TARGETS, "with hints"]))
def test_a_pod_and_the_pod_reduced_to_its_key_decide_the_same(pod, noise, target):
    # Not an allow-list of fields that may vary: everything outside the key is taken away, so a
    # decision that starts reading a field the key leaves out fails here.
    ctx = WITH_HINTS if target == "with hints" else context(target)
    full = request_for(with_noise(pod, noise))
    reduced = request_for(reduced_to_its_key(with_noise(pod, noise), ctx.metadata_keys))
    assert decision_key(full, ctx.metadata_keys) == decision_key(reduced, ctx.metadata_keys)
    assert pipeline.decide(full, ctx) == pipeline.decide(reduced, ctx)


class Recording:
    """A gate that admits every pod and keeps the demand it was shown."""

    def __init__(self):
        self.demands = []

    def admit(self, request, ctx, demand):
        self.demands.append(demand)
        return None


def named(pod, name):
    """The pod as /validate sees it: the API server has named it (generateName resolved)."""
    pod = copy.deepcopy(pod)
    pod["metadata"]["name"] = name
    return parsed(review_of(pod))


def test_the_named_replicas_of_one_replicaset_are_read_once_at_validation(monkeypatch):
    # By /validate the API server has named each pod: the name, which a refusal quotes, is left out of
    # the key; a refusal is never remembered. The gates see every replica, with the demand read once.
    reads = []
    real = pipeline.read_pod_demand
    monkeypatch.setattr(
        pipeline, "read_pod_demand", lambda *args, **kw: reads.append(args) or real(*args, **kw)
    )
    ctx = context("generic")
    pod = translation_pod("gke-whole")
    gate, memo = Recording(), DecisionMemo(counted=False)
    for uid in ("a1b2c", "d3e4f", "g5h6i"):
        replica = named(with_noise(pod, {"uid": uid}), f"web-7d9f-{uid}")
        assert pipeline.validate(replica, ctx, pipeline.Gates(gate), None, memo).allowed
    assert len(reads) == 1 and len(gate.demands) == 3 and all(d == gate.demands[0] for d in gate.demands)
    refused = with_maps(translation_pod("gke-whole"), [])
    refused["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "500m"}}
    for name in ("web-1", "web-2"):  # each refusal quotes its own pod
        answer = pipeline.validate(named(refused, name), ctx, pipeline.Gates(gate), None, memo)
        assert not answer.allowed and f'"{name}"' in answer.message


# --- Pods whose containers are named otherwise (remembered.py) ---

# Names a workload may give its containers: ordinary ones, ones that appear in what decisions say
# ("gpu" in nvidia.com/gpu), ones the API server refuses (upper case, underscore, too long) and repeats.
NAMES = st.sampled_from(
    ["main", "c0", "c1", "i0", "worker", "cuda", "gpu", "nvidia", "a", "Main", "x_y", "p" * 64]
)


def kai_named_pod(container_first: bool, named: str, memory_key: bool):
    """KAI's shapes that name a container: the share goes to the container an annotation names."""
    annotations = {"gpu-fraction": "0.5", "gpu-fraction-container-name": named}
    if memory_key:
        annotations = {f"nvidia.com/container.{named}.gpu-memory.request": "4Gi"}
    containers = [{"name": "sidecar", "image": "busybox"}, {"name": "cuda", "image": "cuda"}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "team-a", "annotations": annotations},
        "spec": {
            "containers": containers if container_first else containers[::-1],
            "schedulerName": "kai-scheduler",
        },
    }


NAMED_POD = st.one_of(
    ANY_POD,
    st.builds(kai_named_pod, st.booleans(), st.sampled_from(["sidecar", "cuda"]), st.booleans()),
)


def renamed(pod, draw_names):
    """The pod with its containers named `draw_names` in order (init containers first), or swapped."""
    pod = copy.deepcopy(pod)
    spec = pod["spec"]
    every = [c for list_name in ("initContainers", "containers") for c in spec.get(list_name, [])]
    for container, name in zip(every, draw_names, strict=False):  # a pod has at most four
        container["name"] = name
    return pod


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pod=NAMED_POD,
    names=st.one_of(st.lists(NAMES, min_size=4, max_size=4), st.just("swap")),
    target=st.sampled_from([*TARGETS, "with hints"]),
)
def test_a_pod_named_otherwise_gets_from_the_memo_exactly_what_a_fresh_decision_gives(pod, names, target):
    ctx = WITH_HINTS if target == "with hints" else context(target)
    if names == "swap":  # the same names, given to other containers
        every = [c["name"] for at in ("initContainers", "containers") for c in pod["spec"].get(at, [])]
        names = every[::-1]
    other = renamed(pod, names)
    memo = DecisionMemo()
    pipeline.mutate(request_for(pod), ctx, pipeline.NO_GATES, memo, TEMPLATES_EXIST)
    gate, fresh = Recording(), Recording()
    answer = pipeline.mutate(request_for(other), ctx, pipeline.Gates(gate), memo, TEMPLATES_EXIST)
    assert answer == pipeline.mutate(request_for(other), ctx, pipeline.Gates(fresh), None, TEMPLATES_EXIST)
    assert gate.demands == fresh.demands  # the asks the gates read name the pod's own containers


# Pod names: a StatefulSet's, ones that appear in what decisions say ("gpu", "nvidia", "a", "main"), a
# dotted one, ones the API server refuses (upper case, underscore, too long), and none (generateName).
POD_NAMES = st.sampled_from(
    ["web-0", "web-1", "train-worker-3", "gpu", "nvidia", "a", "main", "web.0", "Web_0", "w" * 254, ""]
)


def pod_named(pod, name):
    pod = copy.deepcopy(pod)
    if name:
        pod["metadata"]["name"] = name
    else:
        pod["metadata"].pop("name", None)
    return pod


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pod=NAMED_POD, first=POD_NAMES, then=POD_NAMES, target=st.sampled_from([*TARGETS, "with hints"]))
def test_a_pod_of_another_name_gets_from_the_memo_exactly_what_a_fresh_decision_gives(
    pod, first, then, target
):
    # A StatefulSet's next pod (web-0, then web-1): the name is left out of the key; a refusal quoting it
    # answers only its own pod.
    ctx = WITH_HINTS if target == "with hints" else context(target)
    memo = DecisionMemo()
    pipeline.mutate(request_for(pod_named(pod, first)), ctx, pipeline.NO_GATES, memo, TEMPLATES_EXIST)
    other = request_for(pod_named(pod, then))
    gate, fresh = Recording(), Recording()
    answer = pipeline.mutate(other, ctx, pipeline.Gates(gate), memo, TEMPLATES_EXIST)
    assert answer == pipeline.mutate(other, ctx, pipeline.Gates(fresh), None, TEMPLATES_EXIST)
    assert gate.demands == fresh.demands


def counted_translations(monkeypatch) -> list:
    """The translations the pipeline makes from now on (one entry each), as a list that grows."""
    translations: list = []
    real = pipeline.mutation_after_checks
    monkeypatch.setattr(pipeline, "mutation_after_checks", lambda *a: translations.append(a) or real(*a))
    return translations


def test_the_pods_of_a_statefulset_share_one_translation(monkeypatch):
    # Named web-0, web-1, ... by the StatefulSet controller before admission: decided once, each answered
    # exactly as afresh; a refusal quotes each pod's own name.
    translations = counted_translations(monkeypatch)
    ctx, memo = context("generic"), DecisionMemo()
    pod = translation_pod("gke-8")
    pod["metadata"]["labels"] = {"apps.kubernetes.io/pod-index": "0"}
    answers = []
    for n in range(3):
        replica = pod_named(pod, f"web-{n}")
        replica["metadata"]["labels"] = {"apps.kubernetes.io/pod-index": str(n)}
        answers.append(pipeline.mutate(request_for(replica), ctx, pipeline.NO_GATES, memo))
    assert len(translations) == 1 and answers[0].patch and answers[1:] == answers[:1] * 2
    fractional = translation_pod("generic-whole")
    fractional["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "500m"}}
    for name in ("web-0", "web-1"):
        answer = pipeline.mutate(request_for(pod_named(fractional, name)), ctx, pipeline.NO_GATES, memo)
        assert not answer.allowed and f'"{name}"' in answer.message


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pod=NAMED_POD,
    noise=NOISE,
    names=st.one_of(st.none(), st.lists(NAMES, min_size=4, max_size=4)),
    target=st.sampled_from([*TARGETS, "with hints"]),
)
def test_a_replica_or_a_pod_named_otherwise_is_validated_from_the_memo_as_afresh(pod, noise, names, target):
    # The next replica (named by now, differing where no decision reads) or another workload's pod.
    ctx = WITH_HINTS if target == "with hints" else context(target)
    memo = DecisionMemo(counted=False)
    remembered, fresh = Recording(), Recording()
    pipeline.validate(named(pod, "web-7d9f-a1b2c"), ctx, pipeline.Gates(remembered), TEMPLATES_EXIST, memo)
    other = named(with_noise(renamed(pod, names) if names else pod, noise), "web-7d9f-x9y8z")
    answer = pipeline.validate(other, ctx, pipeline.Gates(remembered), TEMPLATES_EXIST, memo)
    assert answer == pipeline.validate(other, ctx, pipeline.Gates(fresh), TEMPLATES_EXIST)
    assert remembered.demands[1:] == fresh.demands  # refused by the checks: no gate ran, either way


def test_pods_of_two_workloads_that_ask_alike_share_one_translation(monkeypatch):
    # A notebook's pod and a script's ask for the same GPUs on the same nodes and name their containers
    # otherwise: the second is not translated again, and each is told about its own containers.
    translations = counted_translations(monkeypatch)
    ctx, memo = context("generic"), DecisionMemo()
    pod = translation_pod("gke-8")
    answers = [
        pipeline.mutate(request_for(renamed(pod, [name])), ctx, pipeline.NO_GATES, memo)
        for name in ("notebook", "train", "eval")
    ]
    assert len(translations) == 1 and len(memo) == 1
    assert answers[0].patch and answers[1:] == answers[:1] * 2


def test_a_decision_that_says_a_name_answers_only_that_name_and_each_keeps_its_own(monkeypatch):
    # A refusal quotes its container; a KAI share is given to a container by name: neither answers pods
    # named otherwise, and two such workloads arriving in turn are each decided once.
    kai = context("hami")  # KAI's pods moved to HAMi: the share goes to the container KAI gives it to
    kai_pods = {first: kai_named_pod(first, "cuda", memory_key=False) for first in (True, False)}
    fresh = {first: pipeline.decide(request_for(pod), kai) for first, pod in kai_pods.items()}
    assert fresh[True] != fresh[False]  # the share goes to the second container, then to the first
    decided = []
    real = pipeline.check_request
    monkeypatch.setattr(pipeline, "check_request", lambda *a: decided.append(a) or real(*a))
    ctx, memo = context("generic"), DecisionMemo()
    fractional = translation_pod("generic-whole")
    fractional["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "500m"}}
    for _ in range(2):
        for name in ("alpha", "beta"):
            answer = pipeline.mutate(request_for(renamed(fractional, [name])), ctx, pipeline.NO_GATES, memo)
            assert not answer.allowed and name in answer.message
    assert len(decided) == 2
    for _ in range(2):
        for first, pod in kai_pods.items():
            assert pipeline.mutate(request_for(pod), kai, pipeline.NO_GATES, memo) == fresh[first]
    assert len(decided) == 4
