"""The Event gpuport records on a pod it rewrote: one per pod object, under a name the API server takes."""

import re

from webhook.adapters.kube.events import event_name

DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


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


def test_events_the_rbac_refuses_are_said_once_not_for_every_rewritten_pod(caplog):
    import time

    from kubernetes.client.exceptions import ApiException

    from webhook.adapters.kube.events import PodEvents

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
