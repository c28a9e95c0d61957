"""The admission routes' plain-WSGI path: how a body is read, and what every failure answers."""

import io
import json

import pytest

from tests.helpers import fixture
from webhook.adapters.http.admission_wsgi import AdmissionWSGI, Answer, text
from webhook.adapters.http.server import ServerState, create_app
from webhook.core.deciding.review import MAX_BODY_BYTES


def call(app, environ):
    """(status line, headers, body) of one WSGI call."""
    seen = {}

    def start_response(status, headers, exc_info=None):
        seen["status"], seen["headers"] = status, dict(headers)

    body = b"".join(app(environ, start_response))
    return seen["status"], seen["headers"], body


def environ(path="/mutate", body=b"", method="POST", length=True, terminated=False, stream=None):
    env = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "SERVER_NAME": "localhost",
        "SERVER_PORT": "8443",
        "wsgi.url_scheme": "https",
        "wsgi.input": stream or io.BytesIO(body),
        "wsgi.errors": io.StringIO(),
    }
    if length:
        env["CONTENT_LENGTH"] = str(len(body))
    if terminated:
        env["wsgi.input_terminated"] = True
    return env


@pytest.fixture
def app(generic_context):
    return create_app(ServerState(context=generic_context))


REVIEW = json.dumps(fixture("pod-create-gpu-limit-1.json")).encode()


def test_a_review_is_answered_as_json_with_its_length(app):
    status, headers, body = call(app, environ(body=REVIEW))
    assert status == "200 OK"
    assert headers["Content-Type"] == "application/json"
    assert headers["Content-Length"] == str(len(body))
    assert json.loads(body)["response"]["allowed"] is True


def test_a_chunked_body_is_read_to_its_end_when_the_server_says_it_ends(app):
    # gunicorn decodes chunked bodies and sets wsgi.input_terminated; no Content-Length comes.
    status, _, body = call(app, environ(body=REVIEW, length=False, terminated=True))
    assert status == "200 OK" and json.loads(body)["response"]["allowed"] is True
    too_large = b" " * (MAX_BODY_BYTES + 1)
    status, _, body = call(app, environ(body=too_large, length=False, terminated=True))
    assert status == "413 Request Entity Too Large"
    assert body == f"request body is larger than {MAX_BODY_BYTES} bytes\n".encode()


def test_without_a_length_or_an_end_there_is_no_body(app):
    # As werkzeug reads it: a stream that may never end is not read.
    status, _, body = call(app, environ(body=REVIEW, length=False))
    assert status == "400 Bad Request"
    assert body.startswith(b"malformed AdmissionReview: body is not JSON")


def test_a_body_that_cannot_be_read_is_a_400_naming_why(app):
    class Broken(io.RawIOBase):
        def read(self, size=-1):
            raise OSError("connection reset")

    env = environ(body=REVIEW, stream=Broken())
    status, headers, body = call(app, env)
    assert status == "400 Bad Request"
    assert headers["Content-Type"] == "text/plain; charset=utf-8"
    assert body == b"request body could not be read: OSError\n"


def test_a_body_shorter_than_its_length_is_unreadable_not_malformed(app):
    env = environ(body=REVIEW[:100])
    env["CONTENT_LENGTH"] = str(len(REVIEW))
    status, _, body = call(app, env)
    assert (status, body) == ("400 Bad Request", b"request body could not be read: EOFError\n")


def test_a_length_announced_past_the_limit_is_refused_unread(app):
    class Unread(io.BytesIO):
        def read(self, size=-1):
            raise AssertionError("the body was read")

    env = environ(stream=Unread())
    env["CONTENT_LENGTH"] = str(MAX_BODY_BYTES + 1)
    status, _, _ = call(app, env)
    assert status == "413 Request Entity Too Large"


def test_a_route_that_fails_answers_one_line_never_a_traceback(caplog):
    def broken(body):
        raise RuntimeError("secret detail")

    refused = []
    wsgi = AdmissionWSGI(lambda env, start: [], {"/mutate": broken}, lambda *a: refused.append(a))
    status, _, body = call(wsgi, environ(body=b"{}"))
    assert status == "500 Internal Server Error"
    assert body == b"internal error (details are in the server log)\n"
    assert "secret detail" in caplog.text  # in the log, not the answer


def test_other_paths_and_methods_are_the_fallbacks(app):
    routes = {"/mutate": lambda body: Answer(200, b"{}")}
    fallback_calls = []

    def fallback(env, start):
        fallback_calls.append(env["PATH_INFO"])
        start("204 No Content", [])
        return []

    wsgi = AdmissionWSGI(fallback, routes, lambda *a: None)
    assert call(wsgi, environ(path="/healthz", method="GET"))[0] == "204 No Content"
    assert fallback_calls == ["/healthz"]
    status, _, body = call(wsgi, environ(method="GET"))
    assert (status, body) == ("405 Method Not Allowed", b"Method Not Allowed\n")
    assert text(400, "x") == Answer(400, b"x\n", "text/plain; charset=utf-8")


def test_flask_and_the_admission_path_answer_errors_in_one_format(generic_context):
    # Readiness (Flask) and a malformed review (plain WSGI): one line, the same content type.
    state = ServerState(context=generic_context)
    client = create_app(state).test_client()
    state.draining.set()
    flask_answer = client.get("/readyz")
    wsgi_answer = client.post("/mutate", data=b"{not json")
    assert (flask_answer.status_code, wsgi_answer.status_code) == (503, 400)
    assert flask_answer.content_type == wsgi_answer.content_type == "text/plain; charset=utf-8"
    assert flask_answer.get_data() == b"shutting down\n"
    assert wsgi_answer.get_data().count(b"\n") == 1 and wsgi_answer.get_data().endswith(b"\n")
