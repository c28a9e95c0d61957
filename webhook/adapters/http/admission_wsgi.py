"""The admission routes as plain WSGI: a POST to /mutate or /validate is answered without Flask.

Flask's per-request machinery (request and app contexts, URL matching, a Request and a Response
object, its hooks) costs about 90 µs a request in process, measured against this module's path;
the worker spends roughly 650 µs of CPU on a whole review over TLS, so a seventh of it went to the
framework, on the one path the API server waits on. Here a review is: the body read (at most
MAX_BODY_BYTES), one function that returns the status and bytes, and the WSGI reply. Every other
request (health, readiness, metrics, any other path or method) goes on to the Flask app as before.
"""

import logging
import re
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple
from urllib.parse import parse_qs

from webhook.core.deciding.review import MAX_BODY_BYTES

log = logging.getLogger("gpuport.server")

# The API server names how long it waits for this call in the URL (`?timeout=5s`: the webhook's
# timeoutSeconds, or less when the request it admits has less left, rounded up to whole seconds).
# Without one (a caller that is not an API server), this: the v1 default of timeoutSeconds.
DEFAULT_CALL_SECONDS = 10.0
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_request = threading.local()  # the review this thread answers: when it arrived, how long its caller waits

JSON = "application/json"
TEXT = "text/plain; charset=utf-8"


class Answer(NamedTuple):
    status: int
    body: bytes
    content_type: str = JSON


def text(status: int, message: str) -> Answer:
    """One line of plain text, as every error the server gives is."""
    return Answer(status, (message + "\n").encode(), TEXT)


class BodyTooLarge(Exception):
    pass


# A route answers a request body with the status and bytes to send.
Route = Callable[[bytes], Answer]
WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

_REASONS = {
    200: "200 OK",
    400: "400 Bad Request",
    405: "405 Method Not Allowed",
    413: "413 Request Entity Too Large",
    500: "500 Internal Server Error",
}


class AdmissionWSGI:
    """WSGI middleware: the named POST routes here, everything else to `fallback` (the Flask app)."""

    def __init__(self, fallback: WSGIApp, routes: dict[str, Route], refused: Callable[[str, str], None]):
        self.fallback = fallback
        self.routes = routes
        self.refused = refused  # (path, reason) of a request refused before its route ran: for metrics

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        route = self.routes.get(path)
        if route is None:
            return self.fallback(environ, start_response)
        _request.seconds = call_seconds(environ.get("QUERY_STRING", ""))
        if getattr(_request, "arrived", None) is None:  # not under the deadline worker: from now
            _request.arrived = time.monotonic()
        try:
            answer = self._answer(path, route, environ)
        finally:
            _request.arrived = None
        start_response(
            _REASONS.get(answer.status, f"{answer.status} Error"),
            [("Content-Type", answer.content_type), ("Content-Length", str(len(answer.body)))],
        )
        return [answer.body]

    def _answer(self, path: str, route: Route, environ: dict[str, Any]) -> Answer:
        if environ.get("REQUEST_METHOD") != "POST":
            return text(405, "Method Not Allowed")
        try:
            body = read_body(environ)
        except BodyTooLarge:
            self.refused(path, "body-too-large")
            return text(413, f"request body is larger than {MAX_BODY_BYTES} bytes")
        except Exception as exc:  # a broken chunked encoding, a body shorter than announced
            self.refused(path, "unreadable-body")
            return text(400, f"request body could not be read: {type(exc).__name__}")
        try:
            return route(body)
        except Exception:
            # The routes answer every review themselves (fail open or closed); this is a bug in the
            # answering itself. Never a traceback to the caller.
            log.exception("unhandled error on POST %s", path)
            return text(500, "internal error (details are in the server log)")


def read_body(environ: dict[str, Any]) -> bytes:
    """The request body, at most MAX_BODY_BYTES (BodyTooLarge past it, before reading when the length
    is announced). Without a length, the server must say the stream ends (gunicorn does, for chunked
    bodies); otherwise there is no body, as werkzeug reads it."""
    stream = environ["wsgi.input"]
    announced = environ.get("CONTENT_LENGTH")
    if announced:
        length = int(announced)
        if length > MAX_BODY_BYTES:
            raise BodyTooLarge
        data = bytes(stream.read(length)) if length > 0 else b""
        if len(data) < length:
            raise EOFError(f"{len(data)} of {length} bytes")  # the client stopped short of its own length
        return data
    if not environ.get("wsgi.input_terminated"):
        return b""
    data = bytes(stream.read(MAX_BODY_BYTES + 1))
    if len(data) > MAX_BODY_BYTES:
        raise BodyTooLarge
    return data


def arrived(at: float) -> None:
    """Said by the server's worker as a request's headers arrive (time.monotonic()), in the thread that
    will answer it: a review that waited for a thread has that much less time left."""
    _request.arrived = at


def request_timing() -> tuple[float, float] | None:
    """(when the review this thread answers arrived, time.monotonic(); the seconds its API server waits
    for the answer from then), or None outside an admission route."""
    at = getattr(_request, "arrived", None)
    return None if at is None else (at, getattr(_request, "seconds", DEFAULT_CALL_SECONDS))


def call_seconds(query: str) -> float:
    """The `timeout` the API server put in the webhook call's URL, as seconds (a Go duration such as
    "5s" or "1m0s"); DEFAULT_CALL_SECONDS when absent or unreadable."""
    values = parse_qs(query).get("timeout")
    text = values[0] if values else ""
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return DEFAULT_CALL_SECONDS
    seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)
    return seconds if seconds > 0 else DEFAULT_CALL_SECONDS
