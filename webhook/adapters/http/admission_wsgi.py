"""The admission routes as plain WSGI: a POST to /mutate or /validate is answered without Flask.

Flask's per-request machinery (request and app contexts, URL matching, a Request and a Response
object, its hooks) costs about 90 µs a request in process, measured against this module's path;
the worker spends roughly 650 µs of CPU on a whole review over TLS, so a seventh of it went to the
framework, on the one path the API server waits on. Here a review is: the body read (at most
MAX_BODY_BYTES), one function that returns the status and bytes, and the WSGI reply. Every other
request (health, readiness, metrics, any other path or method) goes on to the Flask app as before.
"""

import logging
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from webhook.core.deciding.review import MAX_BODY_BYTES

log = logging.getLogger("gpuport.server")

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
        answer = self._answer(path, route, environ)
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
