"""`gpuport serve` with the benches' baselines beside the admission routes: the same processes, TLS
connections and request handling (admission_wsgi), but no decision. What gpuport is measured against,
kept out of the production server.

    python bench/baseline_app.py serve ...   # any `gpuport serve` flags

- POST /bench/allow-all: allowed, through the admission routes' own WSGI path and JSON codec;
- POST /bench/label-once: allowed, adding one label the first time a pod is seen (the mutating call)
  and nothing after it: what the API server's own work on any mutating webhook's patch costs;
- POST /bench/allow-all-flask: allowed, as an ordinary Flask route (what a bare Flask webhook costs).
"""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import orjson  # noqa: E402
from flask import Flask, Response, request  # noqa: E402

from webhook.adapters.http.admission_wsgi import Answer  # noqa: E402
from webhook.core.deciding.decision import allow  # noqa: E402
from webhook.core.deciding.review import build_response  # noqa: E402

BENCH_LABEL = "bench.gpuport.io/seen"


def allow_all(body: bytes) -> Answer:
    uid = orjson.loads(body)["request"]["uid"]
    return Answer(200, orjson.dumps(build_response(uid, allow())))


def label_once(body: bytes) -> Answer:
    request_part = orjson.loads(body)["request"]
    labels = request_part["object"]["metadata"].get("labels")
    if labels is None:
        patch = [{"op": "add", "path": "/metadata/labels", "value": {BENCH_LABEL: "1"}}]
    elif BENCH_LABEL not in labels:
        patch = [{"op": "add", "path": "/metadata/labels/bench.gpuport.io~1seen", "value": "1"}]
    else:
        patch = []
    return Answer(200, orjson.dumps(build_response(request_part["uid"], allow(patch=patch))))


def add_baselines(app: Flask) -> Flask:
    """The baselines, on an app create_app built (its admission routes' WSGI layer in front)."""
    admission = app.wsgi_app
    admission.routes["/bench/allow-all"] = allow_all  # type: ignore[attr-defined]
    admission.routes["/bench/label-once"] = label_once  # type: ignore[attr-defined]

    def allow_all_on_flask() -> Response:
        return Response(allow_all(request.get_data(cache=False)).body, mimetype="application/json")

    app.add_url_rule("/bench/allow-all-flask", view_func=allow_all_on_flask, methods=["POST"])
    return app


def main(argv: list[str]) -> int:
    import os
    import tempfile

    # As `gpuport serve` does, but before the wiring below imports prometheus_client (which picks its
    # storage at import): otherwise each worker counts in its own memory and /metrics reports nothing.
    os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix="gpuport-metrics-"))
    from webhook.commands import app as wiring
    from webhook.commands.cli import main as gpuport

    build_app = wiring.build_app
    # serve's gunicorn application builds the app by this name in each worker (forked from here).
    wiring.build_app = lambda settings: add_baselines(build_app(settings))  # type: ignore[assignment]
    return gpuport(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
