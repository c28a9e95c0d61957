"""Invariants over random pods: a valid AdmissionReview always comes back, patches apply, and the
webhook applied to its own output changes nothing."""

import base64
import copy
import json
from dataclasses import replace

import jsonpatch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import parsed, review_of
from tests.translation_cases import SOURCES, TARGETS
from webhook.adapters.http.server import ServerState, create_app
from webhook.core.asks.checks import is_extended_resource
from webhook.core.deciding import pipeline
from webhook.core.deciding.review import build_response

RESOURCES = st.sampled_from(
    [
        "nvidia.com/gpu",
        "nvidia.com/mig-1g.10gb",
        "nvidia.com/gpu.shared",
        "amd.com/gpu",
        "aliyun.com/gpu-mem",
        "example.com/widget",
        "cpu",
        "memory",
    ]
)
QUANTITIES = st.one_of(
    st.integers(min_value=0, max_value=16).map(str),
    st.sampled_from(["500m", "0.5", "1.5", "250m", "1k", "2e0", "1Gi", "bad", ""]),
    st.integers(min_value=0, max_value=8),
)
SECTION = st.dictionaries(RESOURCES, QUANTITIES, max_size=3)
RESOURCES_BLOCK = st.fixed_dictionaries({}, optional={"limits": SECTION, "requests": SECTION})
LABELS = st.dictionaries(
    st.sampled_from(["app", "gpuport.io/x", "a/b~c", "team"]), st.text(max_size=5), max_size=3
)


@st.composite
def pods(draw, odd_metadata=False):
    """Pods as the API server sends them; with `odd_metadata`, some with metadata null or absent."""

    def container(prefix, index):
        return {"name": f"{prefix}{index}", "image": "img", "resources": draw(RESOURCES_BLOCK)}

    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "team-a"},
        "spec": {"containers": [container("c", i) for i in range(draw(st.integers(1, 3)))]},
    }
    if draw(st.booleans()):
        pod["spec"]["initContainers"] = [container("i", i) for i in range(draw(st.integers(1, 2)))]
    labels = draw(st.one_of(st.none(), LABELS))
    if labels is not None:
        pod["metadata"]["labels"] = labels
    metadata = draw(st.sampled_from(["as written", "null", "absent"] if odd_metadata else ["as written"]))
    if metadata == "null":
        pod["metadata"] = None  # a patch into it would not apply: it must be added whole
    elif metadata == "absent":
        del pod["metadata"]
    if draw(st.booleans()):
        pod["spec"]["tolerations"] = [{"key": "k", "operator": "Exists"}]
    if draw(st.booleans()):
        pod["spec"]["nodeSelector"] = {"cloud.google.com/gke-accelerator": "nvidia-tesla-a100", "x": "y"}
    return pod


def rewrite_like_translation(view, pod):
    """A stand-in mutation exercising every kind of edit translation makes."""
    changes = []
    for container in view["spec"].get("containers", []):
        for section in ("limits", "requests"):
            values = container.get("resources", {}).get(section, {})
            if "amd.com/gpu" in values:
                values["nvidia.com/gpu"] = values.pop("amd.com/gpu")
                changes.append("renamed")
    selector = view["spec"].get("nodeSelector")
    if selector and selector.pop("cloud.google.com/gke-accelerator", None):
        changes.append("selector")
    view["metadata"].setdefault("labels", {})["gpuport.io/translated"] = "true"
    wanted = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    tolerations = view["spec"].setdefault("tolerations", [])
    if wanted not in tolerations:
        tolerations.append(wanted)
    return changes


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(pod=pods(odd_metadata=True))
def test_patch_applies_and_reapplying_changes_nothing(generic_context, pod):
    context = replace(generic_context, mutations=(rewrite_like_translation,))
    decision = pipeline.decide(parsed(review_of(pod)), context)
    response = build_response("uid", decision)
    json.dumps(response)  # serialisable
    assert response["response"]["uid"] == "uid"
    if not decision.allowed:
        assert decision.patch == ()
        return
    once = jsonpatch.apply_patch(pod, list(decision.patch))
    again = pipeline.decide(parsed(review_of(once)), context)
    assert again.allowed
    assert again.patch == ()


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(pod=pods())
def test_denials_are_exactly_what_kubernetes_would_refuse(generic_context, pod):
    """Never stricter than the API server: deny iff some extended resource breaks its rules."""
    from kubernetes.utils import parse_quantity

    def invalid(container):
        limits = container["resources"].get("limits", {})
        requests = container["resources"].get("requests", {})
        for name in set(limits) | set(requests):
            if not is_extended_resource(name):
                continue
            values = {}
            for section, source in (("l", limits), ("r", requests)):
                if name in source:
                    try:
                        values[section] = parse_quantity(source[name])
                    except ValueError:
                        return True
            if any(v != v.to_integral_value() for v in values.values()):
                return True
            if "r" in values and ("l" not in values or values["r"] != values["l"]):
                return True
        return False

    containers = pod["spec"]["containers"] + pod["spec"].get("initContainers", [])
    expected_denied = any(invalid(c) for c in containers)
    assert pipeline.validate(parsed(review_of(pod)), generic_context).allowed is (not expected_denied)


@settings(max_examples=150, deadline=None)
@given(
    body=st.one_of(
        st.binary(max_size=200),
        st.recursive(
            st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8)),
            lambda children: st.one_of(
                st.lists(children, max_size=3), st.dictionaries(st.text(max_size=8), children, max_size=3)
            ),
            max_leaves=12,
        ).map(
            lambda v: json.dumps(
                {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": v}
            ).encode()
        ),
    )
)
def test_any_body_gets_a_200_review_or_a_400_never_a_500(body):
    from tests.helpers import context

    client = create_app(ServerState(context=context())).test_client()
    for route in ("/mutate", "/validate"):
        response = client.post(route, data=body, content_type="application/json")
        assert response.status_code in (200, 400), response.get_data(as_text=True)
        if response.status_code == 200:
            assert response.get_json()["kind"] == "AdmissionReview"


JSONISH = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=6)),
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(
            st.sampled_from(
                [
                    "containers",
                    "resources",
                    "limits",
                    "requests",
                    "nvidia.com/gpu",
                    "labels",
                    "name",
                    "template",
                    "spec",
                    "schedulerName",
                    "nodeSelector",
                    "annotations",
                ]
            ),
            children,
            max_size=3,
        ),
    ),
    max_leaves=15,
)


@settings(max_examples=600, deadline=None)
@given(metadata=JSONISH, spec=JSONISH, kind=st.sampled_from([("", "Pod"), ("apps", "Deployment")]))
def test_garbage_inside_a_well_formed_review_never_gives_a_500(metadata, spec, kind):
    from tests.helpers import context

    client = create_app(ServerState(context=context())).test_client()
    obj = {"apiVersion": "v1", "kind": kind[1], "metadata": metadata, "spec": spec}
    body = json.dumps(review_of(obj, kind=kind[1], group=kind[0], name="x"))
    for route in ("/mutate", "/validate"):
        response = client.post(route, data=body, content_type="application/json")
        if response.status_code == 400:  # a shape no API server sends, said as such
            assert "request.object.metadata" in response.get_data(as_text=True) or (
                "request.object.spec" in response.get_data(as_text=True)
            )
            continue
        assert response.status_code == 200, response.get_data(as_text=True)
        answer = response.get_json()["response"]
        assert answer["uid"] == "test-uid"
        assert "internal error" not in json.dumps(answer)  # the core coped, the safety net was not needed
        if "patch" in answer:  # and never a patch the API server could not apply
            jsonpatch.apply_patch(obj, json.loads(base64.b64decode(answer["patch"])))


@settings(max_examples=300, deadline=None)
@given(
    source=st.sampled_from(sorted(SOURCES)),
    target=st.sampled_from(TARGETS),
    extra_selector=st.dictionaries(
        st.sampled_from(["team", "zone", "pool"]), st.sampled_from(["a", "b"]), max_size=2
    ),
    labels=st.one_of(st.none(), LABELS),
    tolerations=st.booleans(),
)
def test_translation_from_any_dialect_applies_and_is_idempotent(
    source, target, extra_selector, labels, tolerations
):
    from tests.helpers import context

    pod = copy.deepcopy(SOURCES[source][1])
    pod["spec"].setdefault("nodeSelector", {}).update(extra_selector)
    if not pod["spec"]["nodeSelector"]:
        del pod["spec"]["nodeSelector"]
    if labels is not None:
        pod["metadata"]["labels"] = labels
    if tolerations:
        pod["spec"]["tolerations"] = [
            {"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}
        ]
    decision = pipeline.decide(parsed(review_of(pod)), context(target))
    if not decision.allowed:
        assert decision.patch == () and decision.message
        return
    once = jsonpatch.apply_patch(pod, list(decision.patch))
    for key, value in extra_selector.items():
        assert once["spec"]["nodeSelector"][key] == value  # selectors that are not about GPUs survive
    assert once["metadata"].get("labels") == pod["metadata"].get("labels")
    again = pipeline.decide(parsed(review_of(once)), context(target))
    assert again.allowed and again.patch == ()
