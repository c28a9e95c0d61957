import base64
import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.helpers import all_fixtures, fixture
from webhook.core.deciding.decision import allow, clean_warning, deny
from webhook.core.deciding.review import ReviewError, build_response, parse_review


@pytest.mark.parametrize("name", all_fixtures())
def test_every_captured_review_parses(name):
    raw = fixture(name)
    request = parse_review(json.dumps(raw).encode())
    assert request.uid == raw["request"]["uid"]
    assert request.kind == "Pod"
    assert request.operation == raw["request"]["operation"]
    assert request.object["metadata"] == raw["request"]["object"]["metadata"]


def test_dry_run_and_generate_name_are_read_from_the_captures():
    assert parse_review(json.dumps(fixture("pod-create-dryrun.json")).encode()).dry_run is True
    generated = parse_review(json.dumps(fixture("pod-create-generatename-no-labels.json")).encode())
    assert generated.name == ""
    update = parse_review(json.dumps(fixture("pod-update-labels.json")).encode())
    assert update.old_object is not None


def _broken(mutate):
    review = fixture("pod-create-gpu-limit-1.json")
    mutate(review)
    return json.dumps(review).encode()


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"not json", "body is not JSON"),
        (b"\xff\xfe", "body is not JSON"),
        (b"[1, 2]", "not a JSON object"),
        (_broken(lambda r: r.update(apiVersion="admission.k8s.io/v1beta1")), "apiVersion must be"),
        (_broken(lambda r: r.update(kind="Pod")), "kind must be 'AdmissionReview'"),
        (_broken(lambda r: r.pop("request")), "request is missing"),
        (_broken(lambda r: r["request"].pop("uid")), "request.uid is missing"),
        (_broken(lambda r: r["request"].update(uid="")), "request.uid is missing"),
        (_broken(lambda r: r["request"].pop("object")), "request.object is required on CREATE"),
        (_broken(lambda r: r["request"].update(object="pod")), "request.object must be an object"),
        (_broken(lambda r: r["request"].update(operation="PATCH")), "request.operation must be one of"),
        (_broken(lambda r: r["request"].pop("kind")), "request.kind.kind is missing"),
        (_broken(lambda r: r["request"].update(dryRun="yes")), "dryRun must be a boolean"),
    ],
)
def test_malformed_reviews_are_rejected_with_a_reason(body, reason):
    with pytest.raises(ReviewError, match=reason):
        parse_review(body)


def test_delete_needs_no_object():
    body = _broken(lambda r: (r["request"].update(operation="DELETE"), r["request"].pop("object")))
    assert parse_review(body).object is None


def test_response_echoes_uid_and_encodes_the_patch():
    ops = [{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}]
    response = build_response("u-1", allow("mutated", patch=ops, warnings=["gpuport: changed"]))
    assert response["apiVersion"] == "admission.k8s.io/v1"
    assert response["kind"] == "AdmissionReview"
    body = response["response"]
    assert body["uid"] == "u-1"
    assert body["allowed"] is True
    assert body["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(body["patch"])) == ops
    assert body["warnings"] == ["gpuport: changed"]
    assert "status" not in body


def test_denial_carries_a_403_status_and_no_patch():
    body = build_response("u-2", deny("fractional-gpu", "no halves"))["response"]
    assert body["allowed"] is False
    assert body["status"] == {"code": 403, "reason": "Forbidden", "message": "no halves"}
    assert "patch" not in body and "patchType" not in body


def test_warnings_are_one_line_and_short():
    long = "gpuport: " + "x" * 300 + "\nsecond line"
    cleaned = clean_warning(long)
    assert "\n" not in cleaned
    assert len(cleaned) == 120
    assert cleaned.endswith("…")
    assert clean_warning("a\nb") == "a b"


def _flattened(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= 120 else flat[:119] + "…"


@settings(max_examples=400)
@given(
    st.text(
        alphabet=st.sampled_from("ab \t\n\r\x0b\x0c\x1c\x1f\x85\xa0\u1680\u2000\u2028\u3000\u180e…é"),
        max_size=130,
    )
)
@example("a" * 120)
@example("a" * 121)
@example(" a")
@example("a ")
@example("a  b")
@example("a\u2000b")
@example("a\x1cb")
def test_a_warning_left_as_written_is_the_one_split_and_joined(text):
    # The shortcut for warnings already on one line must agree with splitting and joining on every text:
    # Unicode has spaces (NBSP, the em quad, the ideographic space...) that str.split() splits on.
    assert clean_warning(text) == _flattened(text)
