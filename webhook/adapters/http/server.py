"""The HTTP adapter: turns bodies into AdmissionRequests and Decisions into AdmissionReview responses.
Everything it decides, it asks the core. The admission routes answer through admission_wsgi (no
Flask on the path the API server waits on); health, readiness and metrics are a Flask app behind it."""

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

from webhook.adapters.http import metrics
from webhook.adapters.http.admission_wsgi import AdmissionWSGI, Answer, Route, text
from webhook.adapters.http.memo import DecisionMemo
from webhook.config.loading import ClusterDra
from webhook.core.deciding import pipeline
from webhook.core.deciding.context import REWRITES, Context
from webhook.core.deciding.decision import Decision, allow, deny
from webhook.core.deciding.review import (
    MAX_BODY_BYTES,
    AdmissionRequest,
    ReviewError,
    build_response,
    parse_review,
)

log = logging.getLogger("gpuport.server")

DecideReview = Callable[[AdmissionRequest, Context], Decision]


@dataclass
class ServerState:
    """What the routes read. `context` is replaced whole (never edited) when cloud maps reload."""

    context: Context
    draining: threading.Event = field(default_factory=threading.Event)
    reload_error: str = ""  # the last failed cloud-map reload; the previous maps are still serving
    maps_signature: tuple = ()  # the cloud-map files the context was built from
    # The gates pod creates pass (the pipeline decides which runs where), and the cluster view they
    # read, which the server starts and reports ready; both from adapters.kube when there is a cluster.
    gates: pipeline.Gates = pipeline.NO_GATES
    view: Any = None
    # Every worker's view, not only this one's (readiness.WorkerReadiness.ready); None: one process.
    all_workers_ready: Callable[[], tuple[bool, str]] | None = None
    # Decisions of recent pod creates: the replicas of one workload pay for one translation.
    memo: DecisionMemo = field(default_factory=DecisionMemo)
    # What /validate read of recent pod creates (the pods as mutated): their replicas are read once too.
    validate_memo: DecisionMemo = field(default_factory=lambda: DecisionMemo(counted=False))
    # Creates the ResourceClaimTemplates translated pods need on a DRA cluster (adapters.kube).
    claim_templates: pipeline.ClaimTemplates | None = None
    # What a DRA cluster says of itself (API version, device classes), asked again on every reload.
    cluster_dra: Callable[[], ClusterDra] | None = None
    # Registers gpuport's webhook configurations and policy once ready (adapters.kube); started per worker.
    registrar: Any = None
    # Each GPU-quota namespace's budget beside what it holds, for /metrics and the overshoot log
    # (adapters.kube.budget_watch; started per worker).
    budgets: Any = None
    # Records the Events saying which pods gpuport rewrote, once the API server has named them
    # (adapters.kube.events: one per owner and rewrite, a lone pod's own under a rate limit).
    events: Any = None
    # What gpuport goes without because the RBAC or the cluster refuses it, in words ("" when nothing):
    # logged once where it is found missing (adapters.kube), and shown in /readyz's body till it is back.
    unavailable: Callable[[], str] | None = None

    def readiness(self) -> tuple[bool, str]:
        if self.draining.is_set():
            return False, "shutting down"
        if self.view is not None and not self.view.synced:
            return False, "cluster view not synced yet"
        if self.view is not None and self.all_workers_ready is not None:
            ready, why = self.all_workers_ready()
            if not ready:
                return False, why
        said = ["ok"]
        if self.reload_error:
            # Still ready: the last good maps serve. Say why the new ones are not in force.
            said.append(f"cloud maps not reloaded: {self.reload_error}")
        if self.unavailable is not None and (missing := self.unavailable()):
            said.append(missing)  # still ready: gpuport decides without it, as it says
        return True, "; ".join(said)


def create_app(state: ServerState) -> Flask:
    app = Flask("gpuport")
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES  # for any body Flask itself would read

    def admission_route(route: str, decide: DecideReview, on_error: Callable[[], Decision]) -> Route:
        # The metrics' children, looked up once each: labels() takes a lock and builds its key on every
        # call, twice a review on the path the API server waits on.
        latency = metrics.LATENCY.labels(route)
        counters: dict[tuple[str, str], Any] = {}

        def count(result: str, reason: str) -> None:
            counter = counters.get((result, reason))
            if counter is None:
                counter = counters.setdefault(
                    (result, reason), metrics.REQUESTS.labels(route, result, reason)
                )
            counter.inc()

        def answer(body: bytes) -> Answer:
            started = time.perf_counter()
            try:
                review = parse_review(body)
            except ReviewError as exc:
                count("bad-request", "malformed-review")
                return text(400, f"malformed AdmissionReview: {exc}")
            try:
                decision = decide(review, state.context)
                result = "allowed" if decision.allowed else "denied"
            except RecursionError:
                # Nesting Python's reader accepted but the decision's own walk cannot: still the
                # client's malformed input, not gpuport's failure.
                count("bad-request", "malformed-review")
                return text(400, "malformed AdmissionReview: the object is nested too deeply")
            except Exception:
                # Never a 500: the API server would show the user an opaque failure (or, with a
                # Fail policy, block every pod). Answer the review and leave the trace in the log.
                log.exception(
                    "decision failed for %s %s/%s uid=%s",
                    review.kind,
                    review.namespace,
                    review.name,
                    review.uid,
                )
                decision, result = on_error(), "error"
            body_out = orjson.dumps(build_response(review.uid, decision))
            count(result, decision.reason)
            latency.observe(time.perf_counter() - started)
            return Answer(200, body_out)

        return answer

    def mutate_with_limits(review: AdmissionRequest, context: Context) -> Decision:
        return pipeline.mutate(review, context, state.gates, state.memo, state.claim_templates)

    def validate_with_quota(review: AdmissionRequest, context: Context) -> Decision:
        decision = pipeline.validate(review, context, state.gates, state.claim_templates, state.validate_memo)
        if state.events is not None and decision.allowed and review.is_pod_create and not review.dry_run:
            _record_rewrites(state.events, review)
        return decision

    routes: dict[str, Route] = {
        # Fail open on the mutating path: the validating path and the in-server policy still hold.
        "/mutate": admission_route(
            "mutate",
            mutate_with_limits,
            lambda: allow("internal-error", warnings=["gpuport: internal error, pod admitted unchanged"]),
        ),
        "/validate": admission_route(
            "validate",
            validate_with_quota,
            lambda: deny("internal-error", "gpuport could not check this object (internal error); retry"),
        ),
    }

    @app.get("/healthz")
    def healthz() -> Response:
        return _text(200, "ok")

    @app.get("/readyz")
    def readyz() -> Response:
        ready, why = state.readiness()
        return _text(200 if ready else 503, why)

    @app.get("/metrics")
    def metrics_route() -> Response:
        budgets = state.budgets.figures if state.budgets is not None else None
        payload, content_type = metrics.exposition(budgets)
        return Response(payload, status=200, content_type=content_type)

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> Response:
        return _text(exc.code or 500, f"{exc.name}")

    @app.errorhandler(Exception)
    def unexpected(exc: Exception) -> Response:
        log.exception("unhandled error on %s %s", request.method, request.path)
        return _text(500, "internal error (details are in the server log)")

    def refused(path: str, reason: str) -> None:
        route = path.strip("/") if path in ("/mutate", "/validate") else "other"
        metrics.REQUESTS.labels(route, "bad-request", reason).inc()

    # Flask's own way to put middleware in front of an app (its docs: app.wsgi_app = Middleware(...)).
    app.wsgi_app = AdmissionWSGI(app.wsgi_app, routes, refused)  # type: ignore[method-assign]
    return app


def _record_rewrites(events: Any, review: AdmissionRequest) -> None:
    """The pod as it will be stored says what gpuport changed (its gpuport.io/rewrites annotation)."""
    metadata = (review.object or {}).get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    said = annotations.get(REWRITES) if isinstance(annotations, dict) else None
    if isinstance(said, str) and said and review.name and isinstance(metadata, dict):
        uid = str(metadata.get("uid") or "")
        events.rewritten(review.namespace, review.name, uid, said, metadata.get("ownerReferences"))


def _text(status: int, message: str) -> Response:
    """The admission routes' one-line text answer (admission_wsgi.text), as a Flask response."""
    answer = text(status, message)
    return Response(answer.body, status=answer.status, content_type=answer.content_type)
