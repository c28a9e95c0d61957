"""Slow, idle and lying clients against the real server: none of them may hold the threads that answer
the API server. One worker with two threads, so that two stuck connections would be enough to starve
everyone if the server let them."""

import json
import socket
import ssl
import threading
import time

import pytest

from tests.helpers import VerifyingHTTPSConnection, fixture, post
from tests.server_process import SERVICE_NAME, RunningServer, make_certs

BODY = json.dumps(fixture("pod-create-gpu-limit-1.json")).encode()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    cert_dir = tmp_path_factory.mktemp("tls")
    make_certs(cert_dir)
    running = RunningServer(cert_dir, workers=1, threads=2)
    yield running
    running.stop()


def tls_socket(server) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=str(server.ca_file))
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    return context.wrap_socket(raw, server_hostname=SERVICE_NAME)


def closed_by_server(sock, within: float) -> bool:
    """Whether the server closes (or resets) the connection within `within` seconds."""
    sock.settimeout(within)
    try:
        while True:
            data = sock.recv(4096)
            if not data:
                return True
            if data.startswith(b"HTTP/1.1 4"):
                return True  # refused with a 4xx is fine too
    except (ConnectionResetError, ssl.SSLError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def answered(server) -> bool:
    conn = VerifyingHTTPSConnection("127.0.0.1", server.port, server_name=SERVICE_NAME, cafile=server.ca_file)
    conn.timeout = 10
    status, body, _ = post(conn, "/mutate", BODY)
    return status == 200 and json.loads(body)["response"]["allowed"] is True


def test_clients_that_stall_mid_request_are_cut_off_and_others_are_served(server):
    stuck = []
    for _ in range(6):  # three times the threads
        sock = tls_socket(server)
        sock.sendall(b"POST /mutate HTTP/1.1\r\nHost: gpuport\r\nContent-Type: application/json\r\n")
        stuck.append(sock)
    for _ in range(6):  # idle TCP connections that never even start TLS
        stuck.append(socket.create_connection(("127.0.0.1", server.port)))
    assert answered(server)
    assert all(closed_by_server(sock, within=5) for sock in stuck[:6])
    for sock in stuck:
        sock.close()


def test_a_body_shorter_than_announced_does_not_hold_a_thread(server):
    liars = []
    for _ in range(4):
        sock = tls_socket(server)
        sock.sendall(
            b"POST /mutate HTTP/1.1\r\nHost: gpuport\r\nContent-Type: application/json\r\n"
            b"Content-Length: 5000\r\n\r\n" + BODY[:10]
        )
        liars.append(sock)
    assert answered(server)
    assert all(closed_by_server(sock, within=5) for sock in liars)


def test_a_body_trickled_a_byte_at_a_time_is_cut_off(server):
    sock = tls_socket(server)
    sock.sendall(
        b"POST /mutate HTTP/1.1\r\nHost: gpuport\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(BODY)}\r\n\r\n".encode()
    )
    stop = threading.Event()

    def trickle():
        for byte in BODY:
            if stop.is_set():
                return
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                return
            time.sleep(0.2)

    threading.Thread(target=trickle, daemon=True).start()
    try:
        assert closed_by_server(sock, within=5)
        assert answered(server)
    finally:
        stop.set()
        sock.close()
