"""The Events gpuport records on the pods it rewrote: one per owner and rewrite with a count, a lone pod's
own under its namespace's rate limit, under names the API server takes, and never more memory or
waiting than bounded."""

import re
import time

import pytest
from kubernetes.client.exceptions import ApiException

from webhook.adapters.kube.event_series import BURST, UPDATE_SECONDS, SeriesTable, TokenBuckets
from webhook.adapters.kube.events import PodEvents, event_name

DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
MERGE_PATCH = "application/merge-patch+json"


def test_a_review_sent_twice_names_one_event_and_a_pod_made_again_its_own():
    first = event_name("web-0", "0b6f3a0e-5c1d-4c8e-9a57-2f1e8d7c6b5a")
    assert first == event_name("web-0", "0b6f3a0e-5c1d-4c8e-9a57-2f1e8d7c6b5a")
    assert first != event_name("web-0", "7d2e4c1b-0a9f-4e3d-8c6b-5a4f3e2d1c0b")


def test_the_longest_pod_names_still_make_a_valid_event_name():
    uid = "0b6f3a0e-5c1d-4c8e-9a57-2f1e8d7c6b5a"
    for pod in ("a" * 253, "a" * 206 + ".b" * 20, "x" * 207 + "-" + "y" * 45):
        name = event_name(pod, uid)
        assert len(name) <= 253 and DNS_SUBDOMAIN.match(name), name
        assert name.endswith(uid)


class _Answer:
    def read(self):
        return b"{}"

    def release_conn(self):
        pass


class EventsApi:
    """The core API's Events as the API server keeps them: a name taken answers 409, a patch of a missing
    Event 404, a patch that is not a merge patch of a dict 415 (what the API server answers a dict sent
    as a JSON Patch), an involvedObject in another namespace 422."""

    def __init__(self):
        self.events: dict[tuple[str, str], dict] = {}
        self.calls: list[str] = []

    def create_namespaced_event(self, namespace, body, _request_timeout=None, _preload_content=True):
        self.calls.append("create")
        name = body["metadata"]["name"]
        assert _request_timeout, "every call has a deadline"
        if len(name) > 253 or not DNS_SUBDOMAIN.match(name):
            raise ApiException(status=422, reason="Unprocessable Entity")
        if body["involvedObject"].get("namespace") != namespace:
            raise ApiException(status=422, reason="Unprocessable Entity")
        if (namespace, name) in self.events:
            raise ApiException(status=409, reason="Conflict")
        self.events[(namespace, name)] = body
        return _Answer()

    def patch_namespaced_event(
        self, name, namespace, body, _content_type=None, _request_timeout=None, _preload_content=True
    ):
        self.calls.append("patch")
        if _content_type != MERGE_PATCH or not isinstance(body, dict):
            raise ApiException(status=415, reason="Unsupported Media Type")
        if (namespace, name) not in self.events:
            raise ApiException(status=404, reason="Not Found")
        self.events[(namespace, name)] = {**self.events[(namespace, name)], **body}
        return _Answer()

    def about(self, kind: str) -> list[dict]:
        return [e for e in self.events.values() if e["involvedObject"]["kind"] == kind]


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def recorder(**kwargs):
    clock = Clock()
    outcomes: list[str] = []
    events = PodEvents(None, start=False, clock=clock, outcome=outcomes.append, **kwargs)
    events.core = api = EventsApi()
    return events, api, clock, outcomes


def owned_by(kind: str, name: str, uid: str) -> list[dict]:
    """metadata.ownerReferences as the ReplicaSet and Job controllers write them on their pods."""
    api_version = "apps/v1" if kind == "ReplicaSet" else "batch/v1"
    return [
        {
            "apiVersion": api_version,
            "kind": kind,
            "name": name,
            "uid": uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


def drained(events: PodEvents) -> list:
    records = []
    while not events._queue.empty():
        records.append(events._queue.get_nowait())
    return records


SAID = "node selector nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3"
RS = owned_by("ReplicaSet", "trainer-7c9f8d", "5b1e0c4a-6f0e-4d8b-9a51-0f3c2e7d9b11")


def test_the_pods_of_one_replicaset_are_one_event_on_it_whose_count_follows_them():
    events, api, clock, outcomes = recorder()
    for n in range(30):
        events.rewritten("team-a", f"trainer-7c9f8d-{n}", f"uid-{n}", SAID, RS)
    events.step(drained(events))
    assert api.about("Pod") == []
    [event] = api.about("ReplicaSet")
    assert event["count"] == 30 and event["reason"] == "Translated"
    assert event["involvedObject"] == {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": "trainer-7c9f8d",
        "uid": "5b1e0c4a-6f0e-4d8b-9a51-0f3c2e7d9b11",
        "namespace": "team-a",
    }
    assert event["message"].endswith(f"the GPU asks of this ReplicaSet's pods for this cluster: {SAID}")
    # More pods within the update interval: counted, not yet written (no write per pod).
    clock.now += 1
    for n in range(30, 45):
        events.rewritten("team-a", f"trainer-7c9f8d-{n}", f"uid-{n}", SAID, RS)
    events.step(drained(events))
    assert api.calls == ["create"] and event["count"] == 30
    assert events.table.next_due(clock.now) == pytest.approx(UPDATE_SECONDS - 1)
    clock.now += UPDATE_SECONDS
    events.step([])
    [event] = api.about("ReplicaSet")
    assert api.calls == ["create", "patch"] and event["count"] == 45
    assert outcomes.count("aggregated") == 45 and outcomes.count("created") == 1
    assert outcomes.count("updated") == 1


def test_pods_of_one_owner_rewritten_differently_are_said_apart():
    events, api, _, _ = recorder()
    events.rewritten("team-a", "trainer-1", "uid-1", SAID, RS)
    events.rewritten("team-a", "trainer-2", "uid-2", "spot capacity cloud.google.com/gke-spot → …", RS)
    events.step(drained(events))
    assert sorted(e["count"] for e in api.about("ReplicaSet")) == [1, 1]
    assert all(DNS_SUBDOMAIN.match(name) for _, name in api.events)


def test_pods_no_controller_owns_get_their_own_event_under_their_namespace_s_rate_limit():
    events, api, clock, outcomes = recorder()
    for n in range(BURST + 15):
        events.rewritten("team-a", f"bare-{n}", f"uid-{n}", SAID)
    for n in range(3):
        events.rewritten("team-b", f"bare-{n}", f"uid-b{n}", SAID)
    events.step(drained(events))
    pods = api.about("Pod")
    assert sum(e["metadata"]["namespace"] == "team-a" for e in pods) == BURST
    assert sum(e["metadata"]["namespace"] == "team-b" for e in pods) == 3
    assert outcomes.count("rate-limited") == 15
    assert all(e["count"] == 1 and e["message"].endswith(SAID) for e in pods)
    # The bucket refills one a second: five seconds later, five more.
    clock.now += 5
    for n in range(100, 110):
        events.rewritten("team-a", f"bare-{n}", f"uid-{n}", SAID)
    events.step(drained(events))
    assert sum(e["metadata"]["namespace"] == "team-a" for e in api.about("Pod")) == BURST + 5


def test_an_owner_s_event_waits_for_its_namespace_s_token_and_then_says_every_pod():
    events, api, clock, _ = recorder()
    for n in range(BURST):
        events.rewritten("team-a", f"bare-{n}", f"uid-{n}", SAID)
    for n in range(4):
        events.rewritten("team-a", f"trainer-{n}", f"t-{n}", SAID, RS)
    events.step(drained(events))
    assert api.about("ReplicaSet") == []  # no token left: the series waits, counting
    assert events.table.next_due(clock.now) == pytest.approx(1.0)
    clock.now += 1
    events.step([])
    [event] = api.about("ReplicaSet")
    assert event["count"] == 4


def test_an_owner_s_event_gone_from_the_api_server_is_made_again_with_every_pod():
    events, api, clock, _ = recorder()
    events.rewritten("team-a", "trainer-1", "uid-1", SAID, RS)
    events.step(drained(events))
    api.events.clear()  # the API server's event TTL (an hour by default) passed
    clock.now += UPDATE_SECONDS
    events.rewritten("team-a", "trainer-2", "uid-2", SAID, RS)
    events.step(drained(events))
    clock.now += 0.1
    events.step([])
    [event] = api.about("ReplicaSet")
    assert event["count"] == 2


def test_the_queue_is_bounded_and_what_overflows_is_dropped_and_counted_without_waiting():
    events, _, _, outcomes = recorder(capacity=10)
    for n in range(25):
        events.rewritten("team-a", f"trainer-{n}", f"uid-{n}", SAID, RS)  # the writer is not running
    assert events._queue.qsize() == 10 and outcomes.count("dropped") == 15


def test_the_series_table_is_bounded_forgetting_idle_series_first():
    table = SeriesTable(instance="gpuport-0", most=2)
    from webhook.adapters.kube.event_series import Involved

    owners = [Involved("batch/v1", "Job", f"job-{n}", f"uid-{n}") for n in range(3)]
    first = table.count("team-a", owners[0], SAID, 0.0, "t")
    assert table.count("team-a", owners[1], SAID, 0.0, "t") is not None
    assert table.count("team-a", owners[2], SAID, 0.0, "t") is None  # both still to be written
    table.written_now(first, 0.0)
    assert table.count("team-a", owners[2], SAID, 0.0, "t") is not None and len(table) == 2
    assert [s.owner.name for s in table.due(0.0)] == ["job-1", "job-2"]


def test_idle_series_are_forgotten_after_the_window():
    from webhook.adapters.kube.event_series import WINDOW_SECONDS, Involved

    table = SeriesTable(instance="gpuport-0")
    series = table.count("team-a", Involved("batch/v1", "Job", "j", "u"), SAID, 0.0, "t")
    table.written_now(series, 0.0)
    table.expire(WINDOW_SECONDS - 1)
    assert len(table) == 1
    table.expire(WINDOW_SECONDS)
    assert len(table) == 0


def test_a_bucket_holds_burst_tokens_and_refills_at_its_rate():
    buckets = TokenBuckets(burst=3, per_second=0.5, most=2)
    assert [buckets.take("a", 0.0) for _ in range(4)] == [True, True, True, False]
    assert buckets.take("a", 1.0) is False and buckets.take("a", 2.0) is True
    buckets.take("b", 2.0)
    buckets.take("c", 2.0)  # past `most`: the least recently used bucket, a's, is forgotten
    assert buckets.take("a", 2.0) is True


def test_events_the_rbac_refuses_are_said_once_not_for_every_rewritten_pod(caplog):
    class Refusing:
        def __init__(self):
            self.asked = 0

        def create_namespaced_event(self, *args, **kwargs):
            self.asked += 1
            raise ApiException(status=403, reason="Forbidden")

    events = PodEvents(None)
    events.core = core = Refusing()
    with caplog.at_level("INFO", logger="gpuport"):
        for n in range(20):
            events.rewritten("team-a", f"web-{n}", f"uid-{n}", "translated")
        deadline = time.monotonic() + 5
        while core.asked < 20 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)
    said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert core.asked == 20 and len(said) == 1 and "403 Forbidden" in said[0], said
    assert events.capabilities.summary() == "create events unavailable: 403 Forbidden"


def test_an_owner_that_is_not_the_pod_s_controller_leaves_it_a_pod_of_its_own():
    events, api, _, _ = recorder()
    not_controlling = [{**RS[0], "controller": False}]
    events.rewritten("team-a", "adopted", "uid-1", SAID, not_controlling)
    events.rewritten("team-a", "half-written", "uid-2", SAID, [{"kind": "ReplicaSet", "controller": True}])
    events.step(drained(events))
    assert [e["involvedObject"]["name"] for e in api.about("Pod")] == ["adopted", "half-written"]
    assert api.about("ReplicaSet") == []
