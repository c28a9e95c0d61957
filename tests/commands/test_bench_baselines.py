"""The benches' baselines (bench/baseline_app.py): answered beside the admission routes of a server the
bench starts, never by the production server."""

import base64
import json
import ssl
import urllib.request

import jsonpatch

from bench.baseline_app import add_baselines
from tests.helpers import fixture
from tests.server_process import RunningServer, make_certs
from webhook.adapters.http.server import ServerState, create_app

ROUTES = ("/bench/allow-all", "/bench/label-once", "/bench/allow-all-flask")


def test_the_production_server_has_no_baseline_route(generic_context):
    client = create_app(ServerState(context=generic_context)).test_client()
    body = json.dumps(fixture("pod-create-gpu-limit-1.json"))
    assert all(client.post(route, data=body).status_code == 404 for route in ROUTES)


def test_allow_all_answers_allowed_on_the_admission_path_and_on_flask(generic_context):
    bench = add_baselines(create_app(ServerState(context=generic_context))).test_client()
    body = json.dumps(fixture("pod-create-gpu-limit-1.json"))
    for route in ("/bench/allow-all", "/bench/allow-all-flask"):
        response = bench.post(route, data=body).get_json()["response"]
        assert response == {"uid": "04270726-6f33-46f6-9e65-8341217e7394", "allowed": True}


def test_label_once_patches_the_mutating_call_only(generic_context):
    bench = add_baselines(create_app(ServerState(context=generic_context))).test_client()
    for name in ("pod-create-gpu-limit-1.json", "pod-create-generatename-no-labels.json"):
        review = fixture(name)
        pod = review["request"]["object"]
        response = bench.post("/bench/label-once", data=json.dumps(review)).get_json()["response"]
        labelled = jsonpatch.apply_patch(pod, json.loads(base64.b64decode(response["patch"])))
        # The pod's own labels stay; the bench label is added beside them.
        assert labelled["metadata"]["labels"] == {
            **pod["metadata"].get("labels", {}),
            "bench.gpuport.io/seen": "1",
        }
        review["request"]["object"] = labelled  # the validating call sees the labelled pod: no patch
        again = bench.post("/bench/label-once", data=json.dumps(review)).get_json()["response"]
        assert again == {"uid": review["request"]["uid"], "allowed": True}


def test_a_server_the_bench_starts_answers_its_baselines_beside_the_admission_routes(tmp_path):
    make_certs(tmp_path)
    server = RunningServer(tmp_path, workers=1, threads=2, baselines=True)
    try:
        context = ssl.create_default_context(cafile=str(server.ca_file))
        body = json.dumps(fixture("pod-create-gpu-limit-1.json")).encode()
        for route in (*ROUTES, "/mutate"):
            sent = urllib.request.Request(
                f"https://127.0.0.1:{server.port}{route}",
                data=body,
                headers={"Content-Type": "application/json"},
            )
            with urllib.request.urlopen(sent, context=context, timeout=10) as answer:
                assert json.loads(answer.read())["response"]["allowed"] is True
    finally:
        server.stop()
