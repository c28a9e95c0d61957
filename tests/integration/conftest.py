"""A real kube-apiserver and etcd on loopback (the envtest convention), with gpuport registered by URL.

KUBEBUILDER_ASSETS names a folder holding `kube-apiserver` and `etcd`; without it these tests skip.
The API server runs with token authentication and no controller manager, so each test namespace gets
its `default` ServiceAccount from the fixture, and namespaces are fresh per test (deleted ones never
finish terminating here).
"""

import contextlib
import os
import shutil
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import yaml

from tests.server_process import RunningServer, free_port, make_certs

ASSETS = os.environ.get("KUBEBUILDER_ASSETS", "")
# Set by tests/e2e/kind.sh: run the same scenarios against a cluster where gpuport is installed.
E2E_KUBECONFIG = os.environ.get("GPUPORT_E2E_KUBECONFIG", "")
MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"


def _missing() -> str:
    if E2E_KUBECONFIG:
        return ""
    if not ASSETS:
        return (
            "KUBEBUILDER_ASSETS is not set: name a folder with kube-apiserver and etcd, e.g. "
            "`export KUBEBUILDER_ASSETS=$(python3 ../shared/bin/assets.py)`, or any envtest asset "
            "folder (setup-envtest use -p path)"
        )
    for binary in ("kube-apiserver", "etcd"):
        if not (Path(ASSETS) / binary).exists() and not shutil.which(binary):
            return f"KUBEBUILDER_ASSETS={ASSETS} has no {binary}"
    return ""


def pytest_collection_modifyitems(config, items):
    reason = _missing()
    if not reason:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if "tests/integration" in str(item.fspath):
            item.add_marker(skip)


def stop_processes(processes, logs) -> None:
    for process in processes:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
    for log in logs:
        log.close()


def _binary(name: str) -> str:
    local = Path(ASSETS) / name
    return str(local) if local.exists() else shutil.which(name)


def _wait_port(port: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")


class ApiServer:
    def __init__(self, workdir: Path, extra_args: tuple[str, ...] = ()):
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        self.workdir = workdir
        self.token = uuid.uuid4().hex
        etcd_port, peer_port, self.port = free_port(), free_port(), free_port()
        (workdir / "tokens.csv").write_text(f'{self.token},admin,admin-uid,"system:masters"\n')
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        (workdir / "sa.key").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        self.logs = [open(workdir / "etcd.log", "wb"), open(workdir / "apiserver.log", "wb")]  # noqa: SIM115
        self.etcd = subprocess.Popen(
            [
                _binary("etcd"),
                "--data-dir",
                str(workdir / "etcd"),
                "--listen-client-urls",
                f"http://127.0.0.1:{etcd_port}",
                "--advertise-client-urls",
                f"http://127.0.0.1:{etcd_port}",
                "--listen-peer-urls",
                f"http://127.0.0.1:{peer_port}",
                "--initial-advertise-peer-urls",
                f"http://127.0.0.1:{peer_port}",
                "--initial-cluster",
                f"default=http://127.0.0.1:{peer_port}",
            ],
            stdout=self.logs[0],
            stderr=subprocess.STDOUT,
        )
        _wait_port(etcd_port)
        self.apiserver = subprocess.Popen(
            [
                _binary("kube-apiserver"),
                "--etcd-servers",
                f"http://127.0.0.1:{etcd_port}",
                "--bind-address",
                "127.0.0.1",
                "--advertise-address",
                "127.0.0.1",
                "--secure-port",
                str(self.port),
                "--cert-dir",
                str(workdir / "apiserver-certs"),
                "--token-auth-file",
                str(workdir / "tokens.csv"),
                "--authorization-mode",
                "RBAC",
                "--service-cluster-ip-range",
                "10.0.0.0/24",
                "--service-account-issuer",
                "https://kubernetes.default.svc",
                "--service-account-key-file",
                str(workdir / "sa.key"),
                "--service-account-signing-key-file",
                str(workdir / "sa.key"),
                *extra_args,
            ],
            stdout=self.logs[1],
            stderr=subprocess.STDOUT,
        )
        self._wait_ready()

    def _wait_ready(self, timeout: float = 90) -> None:
        import ssl
        import urllib.request

        context = ssl._create_unverified_context()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.apiserver.poll() is not None:
                raise RuntimeError((self.workdir / "apiserver.log").read_text()[-3000:])
            request = urllib.request.Request(
                f"https://127.0.0.1:{self.port}/readyz", headers={"Authorization": f"Bearer {self.token}"}
            )
            try:
                with urllib.request.urlopen(request, context=context, timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.5)
        raise RuntimeError("kube-apiserver did not become ready")

    def client(self):
        from kubernetes import client

        configuration = client.Configuration()
        configuration.host = f"https://127.0.0.1:{self.port}"
        configuration.api_key = {"authorization": f"Bearer {self.token}"}
        configuration.verify_ssl = False  # the test server's self-signed certificate, on loopback
        import urllib3

        urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
        return client.ApiClient(configuration)

    def stop(self) -> None:
        stop_processes((self.apiserver, self.etcd), self.logs)


class ExistingCluster:
    """A cluster with gpuport installed (kind, via tests/e2e/kind.sh)."""

    def __init__(self, kubeconfig: str):
        self.kubeconfig = kubeconfig

    def client(self):
        from kubernetes import config

        return config.new_client_from_config(config_file=self.kubeconfig)


@pytest.fixture(scope="session")
def apiserver(tmp_path_factory):
    if E2E_KUBECONFIG:
        yield ExistingCluster(E2E_KUBECONFIG)
        return
    server = ApiServer(tmp_path_factory.mktemp("apiserver"))
    yield server
    server.stop()


def unregister_webhooks(api_client, name: str = "gpuport") -> None:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    admission = client.AdmissionregistrationV1Api(api_client)
    for delete in (
        admission.delete_mutating_webhook_configuration,
        admission.delete_validating_webhook_configuration,
    ):
        try:
            delete(name)
        except ApiException as exc:
            if exc.status != 404:
                raise


def register_webhooks(
    api_client,
    url: str,
    ca_bundle: bytes,
    name: str = "gpuport",
    route: str | None = None,
    budget: tuple[str, ...] = (),
) -> None:
    """gpuport's webhook configurations as it registers them itself (webhook/config/registration.py),
    pointed at a URL instead of the in-cluster Service (every hook at `route` instead of its own when
    given: bench/'s allow-all baseline); the quota webhook fails closed in the `budget` namespaces."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from webhook.config.registration import Endpoint, webhook_configurations

    admission = client.AdmissionregistrationV1Api(api_client)
    configs = webhook_configurations(Endpoint(url=url), ca_bundle, budget)
    calls = {
        "MutatingWebhookConfiguration": (
            admission.create_mutating_webhook_configuration,
            admission.delete_mutating_webhook_configuration,
        ),
        "ValidatingWebhookConfiguration": (
            admission.create_validating_webhook_configuration,
            admission.delete_validating_webhook_configuration,
        ),
    }
    for body in configs:
        create, delete = calls[body["kind"]]
        body["metadata"]["name"] = name
        if route:
            for hook in body["webhooks"]:
                hook["clientConfig"]["url"] = f"{url}{route}"
        try:
            delete(name)
        except ApiException as exc:
            if exc.status != 404:
                raise
        create(body)
    time.sleep(1.5)  # the API server picks up webhook configurations asynchronously


@pytest.fixture(scope="module")
def gpuport_eks(apiserver, tmp_path_factory):
    """gpuport serving as an EKS cluster's webhook (no cluster view), registered with the API server."""
    if E2E_KUBECONFIG:
        pytest.skip("the kind install serves the generic map with quota; these scenarios need an EKS gpuport")
    cert_dir = tmp_path_factory.mktemp("gpuport-tls")
    make_certs(cert_dir)
    server = RunningServer(cert_dir, workers=2, threads=4, cloud="eks")
    register_webhooks(
        apiserver.client(), f"https://127.0.0.1:{server.port}", (cert_dir / "ca.crt").read_bytes()
    )
    yield server
    unregister_webhooks(apiserver.client())
    server.stop()


def kubeconfig(apiserver, path: Path, token: str | None = None, user: str = "admin") -> Path:
    """A kubeconfig for this API server: the admin by default, or whoever `token` belongs to."""
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "test",
                "clusters": [
                    {
                        "name": "test",
                        "cluster": {
                            "server": f"https://127.0.0.1:{apiserver.port}",
                            # The certificate kube-apiserver made itself, with the CA that signed it:
                            # the commands under test verify the server as they would any cluster.
                            "certificate-authority": str(
                                apiserver.workdir / "apiserver-certs" / "apiserver.crt"
                            ),
                        },
                    }
                ],
                "users": [{"name": user, "user": {"token": token or apiserver.token}}],
                "contexts": [{"name": "test", "context": {"cluster": "test", "user": user}}],
            }
        )
    )
    return path


class RoundRobinProxy:
    """Spreads the API server's connections over several gpuport processes, as a Service would."""

    def __init__(self, ports: list[int]):
        import itertools
        import threading

        self.ports = itertools.cycle(ports)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.listener.settimeout(0.5)
        self.stopped = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import threading

        while not self.stopped.is_set():
            try:
                client_socket, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", next(self.ports)))
            for source, sink in ((client_socket, upstream), (upstream, client_socket)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pipe(source, sink) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)

    def stop(self) -> None:
        self.stopped.set()
        self.listener.close()


@pytest.fixture(scope="module")
def gpuport_quota(apiserver, tmp_path_factory):
    """Two gpuport processes watching the test cluster for quota, behind one address (on kind: the
    installed Deployment's two replicas behind its Service)."""
    if E2E_KUBECONFIG:
        yield []
        return
    with quota_servers(apiserver, tmp_path_factory.mktemp("gpuport-quota-tls")) as servers:
        yield servers


@contextlib.contextmanager
def quota_servers(apiserver, cert_dir: Path, extra_env: dict | None = None):
    """Two gpuport processes of two workers each watching `apiserver` for quota, registered behind one
    address, with `extra_env` in their environment."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    try:
        client.CoreV1Api(apiserver.client()).create_namespace({"metadata": {"name": "gpuport-system"}})
    except ApiException as exc:
        if exc.status != 409:
            raise
    make_certs(cert_dir)
    config = kubeconfig(apiserver, cert_dir / "kubeconfig")
    env = {"GPUPORT_CLUSTER": str(config), "GPUPORT_NAMESPACE": "gpuport-system", **(extra_env or {})}
    servers = [
        RunningServer(
            cert_dir,
            workers=2,
            threads=4,
            cloud="generic",
            extra_env=env,
            log_path=cert_dir / f"server-{n}.log",
        )
        for n in range(2)
    ]
    proxy = RoundRobinProxy([s.port for s in servers])
    register_webhooks(
        apiserver.client(), f"https://127.0.0.1:{proxy.port}", (cert_dir / "ca.crt").read_bytes()
    )
    try:
        yield servers
    finally:
        unregister_webhooks(apiserver.client())
        proxy.stop()
        for server in servers:
            server.stop()


@pytest.fixture
def namespace(apiserver):
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    api = client.CoreV1Api(apiserver.client())
    name = f"team-{uuid.uuid4().hex[:8]}"
    api.create_namespace({"metadata": {"name": name}})
    try:  # no controller manager here to create it; on kind it may already exist
        api.create_namespaced_service_account(name, {"metadata": {"name": "default"}})
    except ApiException as exc:
        if exc.status != 409:
            raise
    return name


def new_namespace(cluster) -> str:
    """A namespace of its own on `cluster`, named team-<random>, for one test."""
    import uuid

    from kubernetes import client

    name = f"team-{uuid.uuid4().hex[:8]}"
    client.CoreV1Api(cluster.client()).create_namespace({"metadata": {"name": name}})
    return name


DRA_GATES = "DynamicResourceAllocation=true"


class Scheduling:
    """kube-controller-manager and kube-scheduler beside an ApiServer: pods are really scheduled onto
    the Node objects a test creates (no kubelet: nothing runs), and ResourceClaims are made from
    templates and allocated from published ResourceSlices."""

    def __init__(self, apiserver: "ApiServer", feature_gates: str = DRA_GATES):
        workdir = apiserver.workdir
        config = kubeconfig(apiserver, workdir / "components.kubeconfig")
        self.logs = [open(workdir / f"{n}.log", "wb") for n in ("controller-manager", "scheduler")]  # noqa: SIM115
        self.processes = [
            subprocess.Popen(
                [
                    _binary("kube-controller-manager"),
                    "--kubeconfig",
                    str(config),
                    "--service-account-private-key-file",
                    str(workdir / "sa.key"),
                    "--root-ca-file",
                    str(workdir / "apiserver-certs" / "apiserver.crt"),
                    "--leader-elect=false",
                    "--secure-port=0",
                    "--controllers=*,-nodeipam,-nodelifecycle,-cloud-node-lifecycle,-route,-service",
                    f"--feature-gates={feature_gates}",
                ],
                stdout=self.logs[0],
                stderr=subprocess.STDOUT,
            ),
            subprocess.Popen(
                [
                    _binary("kube-scheduler"),
                    "--kubeconfig",
                    str(config),
                    "--leader-elect=false",
                    "--secure-port=0",
                    f"--feature-gates={feature_gates}",
                ],
                stdout=self.logs[1],
                stderr=subprocess.STDOUT,
            ),
        ]

    def stop(self) -> None:
        stop_processes(self.processes, self.logs)


@pytest.fixture(scope="module")
def dra_cluster(tmp_path_factory):
    """A control plane of its own with Dynamic Resource Allocation on (beta in 1.32: a feature gate on
    every component and the v1beta1 API turned on), a controller manager and a scheduler."""
    if E2E_KUBECONFIG:
        pytest.skip("the kind install is not a DRA cluster")
    for binary in ("kube-controller-manager", "kube-scheduler"):
        if not (Path(ASSETS) / binary).exists() and not shutil.which(binary):
            pytest.fail(f"KUBEBUILDER_ASSETS={ASSETS} has no {binary}: the DRA tests need it")
    server = ApiServer(
        tmp_path_factory.mktemp("dra-apiserver"),
        extra_args=(f"--feature-gates={DRA_GATES}", "--runtime-config=resource.k8s.io/v1beta1=true"),
    )
    components = Scheduling(server)
    server.components = components  # a test may pause the controller manager (SIGSTOP) for a while
    yield server
    components.stop()
    server.stop()


def serve_with_cluster_access(cluster, tmp_path_factory, cloud: str) -> "RunningServer":
    """gpuport serving `cloud` with the admin's access to `cluster` (its quota, limits and claim
    templates), registered as the cluster's webhooks; the caller unregisters and stops it."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    api = cluster.client()
    try:
        client.CoreV1Api(api).create_namespace({"metadata": {"name": "gpuport-system"}})
    except ApiException as exc:
        if exc.status != 409:
            raise
    cert_dir = tmp_path_factory.mktemp(f"gpuport-{cloud}-tls")
    make_certs(cert_dir)
    config = kubeconfig(cluster, cert_dir / "kubeconfig")
    env = {"GPUPORT_CLUSTER": str(config), "GPUPORT_NAMESPACE": "gpuport-system"}
    server = RunningServer(cert_dir, workers=1, threads=4, cloud=cloud, extra_env=env)
    register_webhooks(api, f"https://127.0.0.1:{server.port}", (cert_dir / "ca.crt").read_bytes())
    return server
