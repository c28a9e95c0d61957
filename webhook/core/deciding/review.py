"""The AdmissionReview v1 envelope: parse and check a request, build a response.

Two error channels, never mixed: a malformed review raises ReviewError (HTTP 400 with the reason);
a policy "no" is a Decision with allowed=False inside a well-formed response.
"""

import base64
import json
from collections.abc import Mapping
from typing import Any, NamedTuple

import orjson

from webhook.core.deciding.decision import Decision
from webhook.core.vocabulary.errors import BadInput

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"
OPERATIONS = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT"})
# Large enough for any real Pod or workload (the API server caps objects near 1.5 MiB in etcd),
# small enough that a hostile body cannot tie up a worker.
MAX_BODY_BYTES = 3 * 1024 * 1024
# A Pod is about a dozen levels deep (affinity is the deepest part); far deeper is not a Pod.
MAX_DEPTH = 100


class ReviewError(BadInput):
    """The body is not a usable AdmissionReview request; the message is the one-line reason."""


class AdmissionRequest(NamedTuple):
    """Immutable, and a NamedTuple rather than a frozen dataclass: one is built for every review."""

    uid: str
    group: str
    version: str
    kind: str
    operation: str
    namespace: str
    name: str
    dry_run: bool
    object: Mapping[str, Any] | None
    old_object: Mapping[str, Any] | None

    @property
    def is_pod_create(self) -> bool:
        """The only request gpuport rewrites, reserves quota for, or limits."""
        return self.kind == "Pod" and self.group == "" and self.operation == "CREATE"

    @property
    def is_pod_update(self) -> bool:
        """A change to a pod that exists: reviewed for quota only (its asks were decided at create)."""
        return self.kind == "Pod" and self.group == "" and self.operation == "UPDATE"


def parse_review(body: bytes) -> AdmissionRequest:
    try:
        review = orjson.loads(body)
    except orjson.JSONDecodeError:
        # What orjson refuses, the standard reader decides as it always has (it takes NaN and
        # Infinity, lone surrogates, integers past 64 bits; it fails deeper nesting differently):
        # a faster codec changes no answer, and only bodies no API server sends pay for two reads.
        review = _read_with_the_standard_library(body)
    # Only a body with more brackets than the limit can be nested past it: counting them is C-speed,
    # so ordinary reviews pay nothing for the walk.
    if body.count(b"[") + body.count(b"{") > MAX_DEPTH and _deeper_than(review, MAX_DEPTH):
        raise ReviewError(f"body is nested deeper than {MAX_DEPTH} levels")
    if not isinstance(review, dict):
        raise ReviewError("body is not a JSON object")
    if review.get("apiVersion") != API_VERSION:
        raise ReviewError(f"apiVersion must be {API_VERSION!r}, got {review.get('apiVersion')!r}")
    if review.get("kind") != KIND:
        raise ReviewError(f"kind must be {KIND!r}, got {review.get('kind')!r}")
    request = review.get("request")
    if not isinstance(request, dict):
        raise ReviewError("request is missing or not an object")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise ReviewError("request.uid is missing or empty")
    kind = request.get("kind")
    if not isinstance(kind, dict) or not isinstance(kind.get("kind"), str) or not kind["kind"]:
        raise ReviewError("request.kind.kind is missing")
    operation = request.get("operation")
    if operation not in OPERATIONS:
        raise ReviewError(f"request.operation must be one of {sorted(OPERATIONS)}, got {operation!r}")
    obj = _optional_object(request, "object")
    old = _optional_object(request, "oldObject")
    for name, value in (("object", obj), ("oldObject", old)):
        _check_object_shape(name, value)
    if operation in ("CREATE", "UPDATE") and obj is None:
        raise ReviewError(f"request.object is required on {operation}")
    dry_run = request.get("dryRun", False)
    if not isinstance(dry_run, bool):
        raise ReviewError("request.dryRun must be a boolean")
    return AdmissionRequest(
        uid=uid,
        group=_text(kind.get("group")),
        version=_text(kind.get("version")),
        kind=kind["kind"],
        operation=operation,
        namespace=_text(request.get("namespace")),
        name=_text(request.get("name")),
        dry_run=dry_run,
        object=obj,
        old_object=old,
    )


def build_response(uid: str, decision: Decision) -> dict[str, Any]:
    response: dict[str, Any] = {"uid": uid, "allowed": decision.allowed}
    if not decision.allowed:
        response["status"] = {"code": 403, "reason": "Forbidden", "message": decision.message}
    if decision.patch:
        encoded = orjson.dumps(list(decision.patch))
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(encoded).decode("ascii")
    if decision.warnings:
        response["warnings"] = list(decision.warnings)
    if decision.audit_annotations:
        response["auditAnnotations"] = dict(decision.audit_annotations)
    return {"apiVersion": API_VERSION, "kind": KIND, "response": response}


def _read_with_the_standard_library(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReviewError(f"body is not JSON: {exc}") from None
    except ValueError as exc:  # an integer longer than Python converts (4,300 digits)
        raise ReviewError(f"body holds a number too large to read: {str(exc)[:80]}") from None
    except RecursionError:
        raise ReviewError("body is nested too deeply to read") from None


def _deeper_than(value: Any, limit: int) -> bool:
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(node, dict):
            stack.extend((child, depth + 1) for child in node.values())
        elif isinstance(node, list):
            stack.extend((child, depth + 1) for child in node)
    return False


def _check_object_shape(name: str, obj: Mapping[str, Any] | None) -> None:
    """The API server decodes objects into their types before calling webhooks, so metadata is an
    object and labels and annotations map strings to strings; a body where they are not did not come
    from it, and gpuport would compute edits for a shape no API server would apply them to."""
    if obj is None:
        return
    metadata = obj.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise ReviewError(f"request.{name}.metadata must be an object")
    for field in ("labels", "annotations"):
        values = (metadata or {}).get(field)
        if values is not None and not (
            isinstance(values, dict) and all(isinstance(v, str) for v in values.values())
        ):
            raise ReviewError(f"request.{name}.metadata.{field} must map strings to strings")
    if obj.get("spec") is not None and not isinstance(obj["spec"], dict):
        raise ReviewError(f"request.{name}.spec must be an object")


def _optional_object(request: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    value = request.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ReviewError(f"request.{key} must be an object")
    return value


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""
