"""A claim the resourceclaim controller adopts is held to the pod's template, on a real control plane
(kube-apiserver, controller manager and scheduler v1.32 with DRA on; gpuport serving dra-nvidia).

Before it makes a template claim's ResourceClaim, the controller looks for one of its own: a claim
controlled by the pod (ownerReference, controller: true, the pod's uid) annotated
resource.kubernetes.io/pod-claim-name: <the pod's entry> is taken as the pod's and written into its
status. A namespace user who may write claims (the `edit` role from Kubernetes 1.33) could make such a
claim asking 8 GPUs for a pod admitted with a 1-GPU template, under a new name no pod names yet (or
mark a claim made ahead so by an update), then delete the controller's claim: the controller adopted
it and the scheduler allocated 8 devices to a pod charged 1. Such a claim is refused now in a budget
namespace unless its spec is what the pod's template makes; the controller's own claims pass.
"""

import base64
import json
import os
import signal

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.integration.conftest import new_namespace
from tests.integration.test_dra import GROUP, VERSION, add_node, allocated_devices, gpu, wait_for
from tests.integration.test_dra_budget import (
    claimed_pod,
    quota_namespace,
    template,
    wait_until_quota_is_watched,
)
from tests.integration.test_dra_budget import cluster as cluster

POD_CLAIM = "resource.kubernetes.io/pod-claim-name"  # the controller's annotation (v1.32)


def editor(cluster, namespace):
    """A client acting as a user holding the built-in `edit` ClusterRole in `namespace` only, with the
    ResourceClaim rules Kubernetes 1.33 adds to `edit` (kubernetes/kubernetes#130738; this 1.32 control
    plane's `edit` has no resource.k8s.io rule)."""
    user = f"editor-{namespace}"
    rbac = client.RbacAuthorizationV1Api(cluster.client())
    writes = ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]
    rbac.create_namespaced_role(
        namespace,
        {
            "metadata": {"name": "dra-edit-1.33"},
            "rules": [
                {
                    "apiGroups": [GROUP],
                    "resources": ["resourceclaims", "resourceclaimtemplates"],
                    "verbs": writes,
                },
                {
                    "apiGroups": [GROUP],
                    "resources": ["resourceclaims/status"],
                    "verbs": ["get", "list", "watch"],
                },
            ],
        },
    )
    for kind, role in (("ClusterRole", "edit"), ("Role", "dra-edit-1.33")):
        rbac.create_namespaced_role_binding(
            namespace,
            {
                "metadata": {"name": role},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
            },
        )
    api = cluster.client()
    api.set_default_header("Impersonate-User", user)
    return api


def claim_body(name, count, owner=None, annotations=None):
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ResourceClaim",
        "metadata": {
            "name": name,
            **({"ownerReferences": [owner]} if owner else {}),
            **({"annotations": annotations} if annotations else {}),
        },
        "spec": {
            "devices": {"requests": [{"name": "gpu", "deviceClassName": "gpu.nvidia.com", "count": count}]}
        },
    }


def made_claim(core, namespace, pod):
    statuses = core.read_namespaced_pod(pod, namespace).status.resource_claim_statuses
    return statuses[0].resource_claim_name if statuses else None


# How the claim is marked as the pod's: added at its create, or by an update of a claim made ahead.
WAYS = {"at-create": False, "by-update": True}


def assert_no_claim_for_holder(core, custom, namespace: str, log, said: str) -> None:
    """The resourceclaim controller never makes pod holder's claim: its create is refused in `said` words
    (the controller logs the API server's refusal and tries again), and no claim exists."""

    def refused():
        return any(
            namespace in line and said in line for line in log.read_text(errors="replace").splitlines()
        )

    outcome = wait_for(lambda: made_claim(core, namespace, "holder") or refused(), timeout=60)
    assert outcome is True, f"the controller made the holder claim {outcome} from the template made again"
    claims = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims")["items"]
    assert claims == []


@pytest.mark.parametrize("way", list(WAYS))
def test_a_claim_marked_as_a_pods_own_cannot_be_adopted_past_its_template(cluster, way):
    namespace = quota_namespace(cluster, 1)
    wait_until_quota_is_watched(cluster, namespace, 1)
    add_node(cluster, namespace, [gpu(f"gpu-{i}", "NVIDIA H100 80GB HBM3", "81559Mi") for i in range(8)])
    template(cluster, namespace, "one", {"deviceClassName": "gpu.nvidia.com", "count": 1})
    user = editor(cluster, namespace)
    core, custom = client.CoreV1Api(user), client.CustomObjectsApi(user)
    body = claimed_pod("holder", {"resourceClaimTemplateName": "one"})
    body["spec"]["nodeSelector"] = {"kubernetes.io/hostname": namespace}
    body["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
    holder = core.create_namespaced_pod(namespace, body)  # admitted, charged its template's 1 GPU
    # The controller's own claim passes gpuport's review of claim creates.
    first = wait_for(lambda: made_claim(core, namespace, "holder"), timeout=30)
    assert first, "the controller made no claim for the holder"

    owner = {"apiVersion": "v1", "kind": "Pod", "name": "holder", "uid": holder.metadata.uid}
    marks = {"ownerReferences": [owner | {"controller": True}], "annotations": {POD_CLAIM: "gpus"}}
    refused = None
    try:
        if WAYS[way]:
            # Made ahead, under a name no pod names: charged when a pod naming it is admitted.
            custom.create_namespaced_custom_object(
                GROUP, VERSION, namespace, "resourceclaims", claim_body("holder-mine", 8)
            )
            custom.patch_namespaced_custom_object(
                GROUP, VERSION, namespace, "resourceclaims", "holder-mine", {"metadata": marks}
            )
        else:
            body = claim_body("holder-mine", 8)
            body["metadata"] |= marks
            custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", body)
    except ApiException as exc:
        refused = exc
    else:
        # The controller's claim deleted (its user may, while it is not allocated), the controller
        # takes the marked one as the pod's: it looks for a claim of its own before making one.
        custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", first)
        assert wait_for(lambda: made_claim(core, namespace, "holder") == "holder-mine", timeout=30)
    core.patch_namespaced_pod("holder", namespace, {"spec": {"schedulingGates": None}})
    devices = wait_for(lambda: allocated_devices(cluster, namespace, "holder"), timeout=60)
    assert len(devices or ()) == 1, f"the holder, charged 1 GPU, was allocated {devices}"
    assert refused is not None and refused.status == 403, refused
    message = json.loads(refused.body)["message"]
    assert f'resourceclaims "holder-mine" is forbidden: namespace {namespace} has a GPU budget' in message
    assert "its spec is not what its ResourceClaimTemplate one makes" in message, message


def test_a_template_made_again_larger_after_the_pod_was_admitted_gives_it_no_claim(cluster):
    """The template a pod was charged at its admission, deleted and made again asking 8 before the
    controller made the pod's claim (the controller manager paused here; a user deleting it right after
    the create races the controller, which retries a missing template): the claim the controller then
    makes from it is refused, so the pod is never allocated what it was not charged."""
    namespace = quota_namespace(cluster, 1)
    wait_until_quota_is_watched(cluster, namespace, 1)
    template(cluster, namespace, "one", {"deviceClassName": "gpu.nvidia.com", "count": 1})
    user = editor(cluster, namespace)
    core, custom = client.CoreV1Api(user), client.CustomObjectsApi(user)
    controller = cluster.components.processes[0].pid  # kube-controller-manager
    log = cluster.workdir / "controller-manager.log"
    os.kill(controller, signal.SIGSTOP)
    try:
        body = claimed_pod("holder", {"resourceClaimTemplateName": "one"})
        body["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
        core.create_namespaced_pod(namespace, body)  # admitted, charged 1 GPU
        custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaimtemplates", "one")
        remade = {"name": "gpu", "deviceClassName": "gpu.nvidia.com", "count": 8}
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one"},
        }
        body["spec"] = {"spec": {"devices": {"requests": [remade]}}}
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaimtemplates", body)
    finally:
        os.kill(controller, signal.SIGCONT)

    assert_no_claim_for_holder(
        core,
        custom,
        namespace,
        log,
        "ResourceClaimTemplate one was made or changed after pod holder was created",
    )


def test_the_owner_of_a_claim_is_read_by_name_where_the_view_has_not_seen_it(cluster):
    """What the claim gate reads when its view lags the controller: the pod as the API server holds it
    (raw JSON, as the view keeps pods), or None where there is none; never an exception."""
    from webhook.adapters.kube.claim_gate import pod_reader

    namespace = new_namespace(cluster)  # no budget: a pod naming a claim not made yet is admitted
    created = client.CoreV1Api(cluster.client()).create_namespaced_pod(
        namespace, claimed_pod("holder", {"resourceClaimName": "absent"})
    )
    read = pod_reader(cluster.client())
    found = read(namespace, "holder")
    assert found["metadata"]["uid"] == created.metadata.uid
    assert found["spec"]["resourceClaims"] == [{"name": "gpus", "resourceClaimName": "absent"}]
    assert read(namespace, "missing") is None


class _Remaking:
    """Another validating webhook on the pod's create, as a cluster may run (policy engines take up to
    30 s): while it answers, after gpuport's review of the pod has read its template, the template's
    owner deletes it and makes it again asking 8. The pod is stored after; so the template made again
    is older than the pod, and its spec is what the controller's claim will hold."""

    def __init__(self, cluster, cert_dir, namespace):
        import http.server
        import ssl
        import threading
        import time

        custom = client.CustomObjectsApi(cluster.client())
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                request = review["request"]
                if request["namespace"] == namespace and not outer.remade:
                    time.sleep(2)  # gpuport's own review (called at once, beside this one) has read it
                    custom.delete_namespaced_custom_object(
                        GROUP, VERSION, namespace, "resourceclaimtemplates", "one"
                    )
                    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceClaimTemplate"}
                    body["metadata"] = {"name": "one"}
                    remade = {"name": "gpu", "deviceClassName": "gpu.nvidia.com", "count": 8}
                    body["spec"] = {"spec": {"devices": {"requests": [remade]}}}
                    custom.create_namespaced_custom_object(
                        GROUP, VERSION, namespace, "resourceclaimtemplates", body
                    )
                    outer.remade = True
                answer = {
                    "apiVersion": "admission.k8s.io/v1",
                    "kind": "AdmissionReview",
                    "response": {"uid": request["uid"], "allowed": True},
                }
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.remade = False
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert_dir / "tls.crt", cert_dir / "tls.key")
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.name = f"remake-{namespace}"
        client.AdmissionregistrationV1Api(cluster.client()).create_validating_webhook_configuration(
            {
                "metadata": {"name": self.name},
                "webhooks": [
                    {
                        "name": "remake.example.com",
                        "admissionReviewVersions": ["v1"],
                        "sideEffects": "None",
                        "timeoutSeconds": 15,
                        "failurePolicy": "Fail",
                        "clientConfig": {
                            "url": f"https://127.0.0.1:{self.server.server_address[1]}/",
                            "caBundle": base64.b64encode((cert_dir / "ca.crt").read_bytes()).decode(),
                        },
                        "rules": [
                            {
                                "apiGroups": [""],
                                "apiVersions": ["v1"],
                                "resources": ["pods"],
                                "operations": ["CREATE"],
                            }
                        ],
                        "namespaceSelector": {
                            "matchLabels": {"kubernetes.io/metadata.name": namespace},
                        },
                    }
                ],
            }
        )

    def stop(self, cluster):
        client.AdmissionregistrationV1Api(cluster.client()).delete_validating_webhook_configuration(self.name)
        self.server.shutdown()


def test_a_template_made_again_larger_while_the_pod_is_admitted_gives_it_no_claim(cluster, tmp_path):
    """Issue 45: the template deleted and made again asking 8 after gpuport's review of the pod read it
    and before the pod was stored (another webhook's time): the made-again template is older than the
    pod, so only the uid gpuport recorded on the pod tells them apart. The controller's claim from it is
    refused: never 8 devices for a pod charged 1 under a quota of 1."""
    from tests.server_process import make_certs

    namespace = quota_namespace(cluster, 1)
    wait_until_quota_is_watched(cluster, namespace, 1)
    template(cluster, namespace, "one", {"deviceClassName": "gpu.nvidia.com", "count": 1})
    make_certs(tmp_path)
    other = _Remaking(cluster, tmp_path, namespace)
    core, custom = client.CoreV1Api(cluster.client()), client.CustomObjectsApi(cluster.client())
    log = cluster.workdir / "controller-manager.log"
    try:
        body = claimed_pod("holder", {"resourceClaimTemplateName": "one"})
        body["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
        core.create_namespaced_pod(namespace, body)  # admitted, charged the template it was read as: 1
    finally:
        other.stop(cluster)
    assert other.remade
    stored = core.read_namespaced_pod("holder", namespace).metadata.annotations or {}
    assert "gpuport.io/claim-templates" in stored, stored

    assert_no_claim_for_holder(
        core, custom, namespace, log, "ResourceClaimTemplate one was deleted and made again"
    )
