"""The Flask adapter, in process: status codes, error channels, readiness and metrics."""

import base64
import json

import pytest

from tests.helpers import fixture
from webhook.adapters.http.server import ServerState, create_app
from webhook.core.deciding import pipeline
from webhook.core.deciding.review import MAX_BODY_BYTES


@pytest.fixture
def state(generic_context):
    return ServerState(context=generic_context)


@pytest.fixture
def client(state):
    return create_app(state).test_client()


def post_fixture(client, route, name):
    return client.post(route, data=json.dumps(fixture(name)), content_type="application/json")


def test_mutate_denies_half_a_gpu(client):
    response = post_fixture(client, "/mutate", "pod-create-fractional-gpu-500m-before-validation.json")
    assert response.status_code == 200
    body = response.get_json()
    assert body["response"]["uid"] == "025feffe-8424-49d4-bfea-b8fc2b2b5fbd"
    assert body["response"]["allowed"] is False
    assert "nvidia.com/gpu is 500m (0.5)" in body["response"]["status"]["message"]


@pytest.mark.parametrize("route", ["/mutate", "/validate"])
def test_whole_gpu_is_allowed_on_both_routes(client, route):
    body = post_fixture(client, route, "pod-create-gpu-limit-1.json").get_json()
    assert body["response"]["allowed"] is True
    assert "patch" not in body["response"]


@pytest.mark.parametrize("route", ["/mutate", "/validate"])
def test_malformed_body_is_a_400_with_a_one_line_reason(client, route):
    response = client.post(route, data=b"{not json", content_type="application/json")
    assert response.status_code == 400
    text = response.get_data(as_text=True)
    assert text.startswith("malformed AdmissionReview: body is not JSON")
    assert text.count("\n") == 1
    assert "Traceback" not in text


def test_body_over_the_limit_is_a_413(client):
    body = b" " * (MAX_BODY_BYTES + 1)
    response = client.post("/mutate", data=body, content_type="application/json")
    assert response.status_code == 413
    assert "larger than 3145728 bytes" in response.get_data(as_text=True)


def test_get_on_an_admission_route_is_405_without_html(client):
    response = client.get("/mutate")
    assert response.status_code == 405
    assert response.get_data(as_text=True) == "Method Not Allowed\n"


def test_unexpected_error_on_mutate_admits_unchanged_with_a_warning(client, monkeypatch):
    def explode(request, context):
        raise RuntimeError("boom")

    monkeypatch.setattr(pipeline, "check_request", explode)
    app_client = create_app(ServerState(context=None)).test_client()
    body = post_fixture(app_client, "/mutate", "pod-create-gpu-limit-1.json")
    assert body.status_code == 200
    response = body.get_json()["response"]
    assert response["allowed"] is True
    assert response["warnings"] == ["gpuport: internal error, pod admitted unchanged"]
    assert "boom" not in body.get_data(as_text=True)


def test_unexpected_error_on_validate_denies_without_a_traceback(monkeypatch):
    def explode(request, context):
        raise KeyError("boom")

    monkeypatch.setattr(pipeline, "check_request", explode)
    app_client = create_app(ServerState(context=None)).test_client()
    response = post_fixture(app_client, "/validate", "validate-pod-create-gpu-8.json")
    assert response.status_code == 200
    body = response.get_json()["response"]
    assert body["allowed"] is False
    assert body["status"]["message"] == "gpuport could not check this object (internal error); retry"


def test_health_and_readiness(client, state):
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code == 200
    state.draining.set()
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.get_data(as_text=True) == "shutting down\n"
    assert client.get("/healthz").status_code == 200


def test_metrics_count_results_by_route_and_reason(client):
    def count(text, labels):
        for line in text.splitlines():
            if line.startswith("gpuport_admission_requests_total{") and all(
                label in line for label in labels
            ):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    labels = ('route="mutate"', 'result="denied"', 'reason="fractional-gpu"')
    before = count(client.get("/metrics").get_data(as_text=True), labels)
    post_fixture(client, "/mutate", "pod-create-fractional-gpu-500m-before-validation.json")
    after_text = client.get("/metrics").get_data(as_text=True)
    assert count(after_text, labels) == before + 1
    assert "gpuport_admission_duration_seconds_bucket" in after_text


def test_response_patch_is_base64_json_patch(client, generic_context, monkeypatch):
    # A context with one real mutation, to see the patch travel through the HTTP layer.
    from dataclasses import replace

    def label(view, pod):
        view["metadata"].setdefault("labels", {})["gpuport.io/seen"] = "true"
        return ["gpuport: labelled"]

    mutated = create_app(ServerState(context=replace(generic_context, mutations=(label,)))).test_client()
    body = post_fixture(mutated, "/mutate", "pod-create-generatename-no-labels.json").get_json()["response"]
    assert body["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(body["patch"])) == [
        {"op": "add", "path": "/metadata/labels", "value": {"gpuport.io/seen": "true"}}
    ]
    assert body["warnings"] == ["gpuport: labelled"]


def _review_with(obj_text: str) -> bytes:
    return (
        '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u",'
        '"kind":{"group":"","version":"v1","kind":"Pod"},"operation":"CREATE","object":' + obj_text + "}}"
    ).encode()


@pytest.mark.parametrize(
    ("obj_text", "reason"),
    [
        ('{"metadata":{},"spec":{"containers":' + "[" * 500 + "]" * 500 + "}}", "nested deeper than 100"),
        ('{"metadata":{},"spec":{"containers":' + "[" * 990 + "]" * 990 + "}}", "nested"),
        ('{"metadata":{"name":"x"},"spec":' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
        ('{"metadata":{"name":"x"},"spec":{"priority":' + "9" * 100_000 + "}}", "number too large"),
        ('{"metadata":[],"spec":{}}', "request.object.metadata must be an object"),
        ('{"metadata":{"annotations":{"a":1}},"spec":{}}', "annotations must map strings to strings"),
        ('{"metadata":{},"spec":"x"}', "request.object.spec must be an object"),
    ],
    ids=[
        "500-levels",
        "990-levels",
        "100k-levels",
        "100k-digits",
        "metadata-list",
        "annotation-int",
        "spec-string",
    ],
)
def test_malformed_but_parseable_reviews_are_400_never_500(client, obj_text, reason):
    for route in ("/mutate", "/validate"):
        response = client.post(route, data=_review_with(obj_text), content_type="application/json")
        assert response.status_code == 400, response.get_data(as_text=True)
        assert reason in response.get_data(as_text=True)


def test_metrics_count_decisions_answered_from_the_memo(client):
    def count(result):
        for line in client.get("/metrics").get_data(as_text=True).splitlines():
            if line.startswith(f'gpuport_decision_memo_total{{result="{result}"}}'):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    hits, misses = count("hit"), count("miss")
    for _ in range(3):  # the same pod three times, as three replicas arrive
        assert post_fixture(client, "/mutate", "pod-create-gpu-limit-1.json").status_code == 200
    assert (count("hit"), count("miss")) == (hits + 2, misses + 1)
