"""Shared test helpers: real captured reviews, review builders, a TLS client like the API server's."""

import copy
import functools
import http.client
import json
import socket
import ssl
from pathlib import Path

from webhook.config.cloudmap import default_directory
from webhook.config.loading import build_context
from webhook.core.deciding.review import parse_review

FIXTURES = Path(__file__).parent / "fixtures" / "admission"
REPO = Path(__file__).resolve().parent.parent


def fixture(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def all_fixtures() -> list[str]:
    return sorted(p.name for p in FIXTURES.glob("*.json"))


@functools.cache
def context(cloud: str = "generic"):
    """The shipped maps with `cloud` active (a frozen value, so one load serves every test)."""
    return build_context(default_directory(), cloud)


def review_of(
    obj: dict,
    *,
    kind: str | None = None,
    group: str | None = None,
    operation: str = "CREATE",
    name: str | None = None,
    dry_run: bool = False,
    uid: str = "test-uid",
) -> dict:
    """A review built the way the API server sends one, starting from a captured request."""
    review = fixture("pod-create-gpu-limit-1.json")
    request = review["request"]
    kind = kind or obj.get("kind", "Pod")
    if group is None:
        group = obj.get("apiVersion", "v1").rpartition("/")[0] if "/" in obj.get("apiVersion", "v1") else ""
    request["uid"] = uid
    request["kind"] = {"group": group, "version": "v1", "kind": kind}
    request["requestKind"] = copy.deepcopy(request["kind"])
    request["operation"] = operation
    request["dryRun"] = dry_run
    request["object"] = obj
    name = name if name is not None else (obj.get("metadata") or {}).get("name")
    if name:
        request["name"] = name
    else:
        request.pop("name", None)
    return review


def parsed(review: dict):
    return parse_review(json.dumps(review).encode())


def pod_with_resources(*containers: dict, init: tuple[dict, ...] = (), name: str = "p") -> dict:
    """A minimal Pod whose containers have the given resources sections."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {
            "containers": [{"name": f"c{i}", "image": "x", "resources": r} for i, r in enumerate(containers)]
        },
    }
    if init:
        pod["spec"]["initContainers"] = [
            {"name": f"init{i}", "image": "x", "resources": r} for i, r in enumerate(init)
        ]
    return pod


def gpu(limit=None, request=None, resource="nvidia.com/gpu") -> dict:
    section = {}
    if limit is not None:
        section["limits"] = {resource: limit}
    if request is not None:
        section["requests"] = {resource: request}
    return section


class VerifyingHTTPSConnection(http.client.HTTPSConnection):
    """Connects to an address but checks the certificate against a service DNS name, as the API server
    does when it calls https://<service>.<namespace>.svc through the caBundle."""

    def __init__(self, host: str, port: int, *, server_name: str, cafile: Path, timeout: float = 10, **kw):
        context = ssl.create_default_context(cafile=str(cafile))
        context.set_alpn_protocols(["h2", "http/1.1"])  # the API server offers h2 too
        super().__init__(host, port, context=context, timeout=timeout, **kw)
        self._server_name = server_name
        self._ctx = context

    def connect(self):
        sock = socket.create_connection((self.host, self.port), self.timeout)
        # Go's net package, and so the API server, disables Nagle's algorithm on every connection.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = self._ctx.wrap_socket(sock, server_hostname=self._server_name)


def post(conn: http.client.HTTPConnection, path: str, body: bytes) -> tuple[int, bytes, dict]:
    conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    return response.status, response.read(), dict(response.getheaders())


def device_class(name, expression, extended=None):
    """A DeviceClass as a DRA driver installs one: a CEL selector, and an extended resource name
    (KEP-5004) when it stands for one."""
    spec = {"selectors": [{"cel": {"expression": expression}}]}
    if extended:
        spec["extendedResourceName"] = extended
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": spec,
    }
