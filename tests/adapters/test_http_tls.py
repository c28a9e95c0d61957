"""The real server: gunicorn gthread over TLS on loopback, called the way the API server calls it."""

import json
import signal
import socket
import ssl
import time

import pytest

from certs.files import write_bundle
from certs.issue import issue_bundle, service_dns_names
from tests.helpers import VerifyingHTTPSConnection, all_fixtures, fixture, post
from tests.server_process import SERVICE_NAME, RunningServer, make_certs
from webhook.core.deciding.review import MAX_BODY_BYTES


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    cert_dir = tmp_path_factory.mktemp("tls")
    make_certs(cert_dir)
    running = RunningServer(cert_dir)
    yield running
    running.stop()


def connect(server, name=SERVICE_NAME):
    return VerifyingHTTPSConnection("127.0.0.1", server.port, server_name=name, cafile=server.ca_file)


def test_chain_and_service_name_verify_like_the_api_server(server):
    conn = connect(server)
    status, body, _ = post(conn, "/mutate", json.dumps(fixture("pod-create-gpu-limit-1.json")).encode())
    assert status == 200
    assert json.loads(body)["response"]["allowed"] is True
    assert conn.sock.selected_alpn_protocol() == "http/1.1"  # never h2: the API server would break
    assert conn.sock.version() in ("TLSv1.2", "TLSv1.3")


def test_a_name_not_in_the_certificate_is_refused(server):
    conn = connect(server, name="evil.example.com")
    with pytest.raises(ssl.SSLCertVerificationError):
        conn.request("GET", "/healthz")


def test_server_context_refuses_tls_below_1_2(tmp_path):
    from webhook.adapters.http.tls import server_ssl_context

    make_certs(tmp_path)
    context = server_ssl_context(tmp_path / "tls.crt", tmp_path / "tls.key")
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2


def test_a_client_offering_only_h2_is_never_answered_with_h2(server):
    context = ssl.create_default_context(cafile=str(server.ca_file))
    context.set_alpn_protocols(["h2"])
    with (
        socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock,
        context.wrap_socket(sock, server_hostname=SERVICE_NAME) as tls,
    ):
        assert tls.selected_alpn_protocol() is None  # no h2 agreed: the client falls back to HTTP/1.1


def test_a_client_limited_to_tls_1_2_still_connects(server):
    context = ssl.create_default_context(cafile=str(server.ca_file))
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    with (
        socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock,
        context.wrap_socket(sock, server_hostname=SERVICE_NAME) as tls,
    ):
        assert tls.version() == "TLSv1.2"


def test_every_captured_review_is_answered_on_one_kept_alive_connection(server):
    conn = connect(server)
    socket_ids = set()
    for name in all_fixtures():
        route = "/validate" if name.startswith("validate-") else "/mutate"
        raw = fixture(name)
        status, body, _ = post(conn, route, json.dumps(raw).encode())
        assert status == 200, body
        review = json.loads(body)
        assert review["apiVersion"] == "admission.k8s.io/v1"
        assert review["kind"] == "AdmissionReview"
        assert review["response"]["uid"] == raw["request"]["uid"]
        socket_ids.add(id(conn.sock))
    assert len(socket_ids) == 1  # the same TLS connection carried every call


def test_fractional_pod_is_denied_over_https(server):
    conn = connect(server)
    body = fixture("pod-create-fractional-gpu-500m-before-validation.json")
    status, raw, _ = post(conn, "/mutate", json.dumps(body).encode())
    response = json.loads(raw)["response"]
    assert status == 200
    assert response["allowed"] is False
    assert response["status"]["message"].startswith(
        'Pod "wh-gpu-frac": containers[0] "main": nvidia.com/gpu is 500m (0.5)'
    )


def test_malformed_and_oversized_bodies_are_refused_and_the_server_keeps_serving(server):
    conn = connect(server)
    status, body, _ = post(conn, "/mutate", b'{"apiVersion": "admission.k8s.io/v1"}')
    assert status == 400
    assert body == b"malformed AdmissionReview: kind must be 'AdmissionReview', got None\n"
    # Announce an oversized body and send none of it: the server must refuse on the header alone.
    big = connect(server)
    big.putrequest("POST", "/validate")
    big.putheader("Content-Type", "application/json")
    big.putheader("Content-Length", str(MAX_BODY_BYTES + 10))
    big.endheaders()
    response = big.getresponse()
    assert response.status == 413
    assert response.read() == b"request body is larger than 3145728 bytes\n"
    fresh = connect(server)
    status, _, _ = post(fresh, "/mutate", json.dumps(fixture("pod-create-gpu-limit-1.json")).encode())
    assert status == 200


def test_metrics_sum_over_all_workers(server):
    conn = connect(server)
    for _ in range(20):  # new connections spread over both workers
        fresh = connect(server)
        post(fresh, "/mutate", json.dumps(fixture("pod-create-gpu-limit-1.json")).encode())
        fresh.close()
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    line = next(
        row
        for row in text.splitlines()
        if row.startswith("gpuport_admission_requests_total{")
        and 'reason="unchanged"' in row
        and 'route="mutate"' in row
    )
    assert float(line.rsplit(" ", 1)[1]) >= 20


def test_certificates_are_reloaded_without_a_restart(tmp_path):
    make_certs(tmp_path)
    running = RunningServer(tmp_path, workers=1, threads=2)
    try:
        old_ca = tmp_path / "old-ca.crt"
        old_ca.write_bytes((tmp_path / "ca.crt").read_bytes())
        status, _, _ = post(
            VerifyingHTTPSConnection("127.0.0.1", running.port, server_name=SERVICE_NAME, cafile=old_ca),
            "/mutate",
            json.dumps(fixture("pod-create-gpu-limit-1.json")).encode(),
        )
        assert status == 200
        kept_alive = VerifyingHTTPSConnection(
            "127.0.0.1", running.port, server_name=SERVICE_NAME, cafile=old_ca
        )
        kept_alive.request("GET", "/healthz")
        assert kept_alive.getresponse().read() == b"ok\n"

        # A brand-new CA, as a rotated Secret would bring: nothing in common with the old one.
        time.sleep(0.01)
        write_bundle(tmp_path, issue_bundle(service_dns_names("gpuport", "gpuport-system"), ["127.0.0.1"]))
        new_ca = tmp_path / "ca.crt"
        conn = VerifyingHTTPSConnection("127.0.0.1", running.port, server_name=SERVICE_NAME, cafile=new_ca)
        conn.request("GET", "/healthz")
        assert conn.getresponse().status == 200
        with pytest.raises(ssl.SSLCertVerificationError):
            VerifyingHTTPSConnection(
                "127.0.0.1", running.port, server_name=SERVICE_NAME, cafile=old_ca
            ).request("GET", "/healthz")
        # The connection opened before the rotation keeps working: no request is dropped.
        kept_alive.request("GET", "/healthz")
        assert kept_alive.getresponse().status == 200
    finally:
        running.stop()


def test_a_broken_certificate_edit_keeps_the_last_good_one(tmp_path):
    make_certs(tmp_path)
    running = RunningServer(tmp_path, workers=1, threads=2)
    try:
        (tmp_path / "tls.crt").write_bytes(
            b"-----BEGIN CERTIFICATE-----\nbroken\n-----END CERTIFICATE-----\n"
        )
        conn = VerifyingHTTPSConnection(
            "127.0.0.1", running.port, server_name=SERVICE_NAME, cafile=tmp_path / "ca.crt"
        )
        conn.request("GET", "/healthz")
        assert conn.getresponse().status == 200
    finally:
        running.stop()
    assert "keeping the previous one" in running.log()


def test_sigterm_turns_readiness_off_then_exits_cleanly(tmp_path):
    make_certs(tmp_path)
    running = RunningServer(tmp_path, workers=1, threads=2)
    conn = VerifyingHTTPSConnection(
        "127.0.0.1", running.port, server_name=SERVICE_NAME, cafile=tmp_path / "ca.crt"
    )
    conn.request("GET", "/readyz")
    assert conn.getresponse().read() == b"ok\n"
    started = time.monotonic()
    running.process.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    # gunicorn answers a request on a kept-alive connection while it drains; readiness is off by then.
    conn.request("GET", "/readyz")
    response = conn.getresponse()
    assert (response.status, response.read()) == (503, b"shutting down\n")
    assert response.getheader("Connection") == "close"
    code = running.stop(signal.SIGTERM)
    assert code == 0
    assert time.monotonic() - started < 15  # idle kept-alive connections did not hold shutdown
    assert "Traceback" not in running.log()


def test_a_gke_pod_is_translated_over_https_exactly_as_the_cli_does(tmp_path, capsys):
    import base64

    import jsonpatch
    import yaml

    from tests.helpers import review_of
    from tests.translation_cases import SOURCES
    from webhook.commands.cli import main

    make_certs(tmp_path)
    running = RunningServer(tmp_path, workers=1, threads=2, cloud="eks")
    try:
        source = SOURCES["gke-8"][1]
        conn = VerifyingHTTPSConnection(
            "127.0.0.1", running.port, server_name=SERVICE_NAME, cafile=tmp_path / "ca.crt"
        )
        status, body, _ = post(conn, "/mutate", json.dumps(review_of(source)).encode())
    finally:
        running.stop()
    assert status == 200
    response = json.loads(body)["response"]
    assert response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    over_https = jsonpatch.apply_patch(source, json.loads(base64.b64decode(response["patch"])))
    assert over_https["spec"]["nodeSelector"] == {"node.kubernetes.io/instance-type": "p5.48xlarge"}
    assert response["warnings"] == ["gpuport: node selector node.kubernetes.io/instance-type=p5.48xlarge"]
    # On the cluster the pod also says what was changed, for `kubectl describe` and its Event; a
    # manifest translated for a pull request says it on stderr instead.
    annotations = over_https["metadata"]["annotations"]
    assert (
        annotations.pop("gpuport.io/rewrites") == "node selector node.kubernetes.io/instance-type=p5.48xlarge"
    )
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(source))
    capsys.readouterr()
    assert main(["translate", "--to", "eks", str(tmp_path / "pod.yaml")]) == 0
    assert yaml.safe_load(capsys.readouterr().out) == over_https
