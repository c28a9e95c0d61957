"""gpuport registers its own webhook configurations and safety-net policy, once it is ready, and keeps
them as they should be (the CA bundle through a rotation, the policy when the cloud map changes, the
namespaces whose quota webhook fails closed) — the way Kyverno does, so that installing gpuport can
never refuse a pod before gpuport has answered one.

Each object is read by name and written only when it says less than it should (the API server fills
in defaults, so "less" is "does not contain"); a conflict is left for the next round. The CA bundle
only grows by the CA of the certificate being served and loses only expired CAs: a replica that has
not yet seen a renewed Secret can never take the new CA back out. Everything registered names the
gpuport namespace as its owner, so the garbage collector removes it once the install is deleted
(`kubectl delete -k manifests/`). The install test proves the owner references, not the collection:
its control plane runs no controller manager.
"""

import base64
import copy
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from certs.issue import registered_ca_bundle
from webhook.adapters.kube.capabilities import Capabilities, is_refusal, reason_of
from webhook.adapters.kube.objects import says_all_written

log = logging.getLogger("gpuport.registrar")
REGISTERING = "register webhook configurations and policy"

_TIMEOUT = (2, 5)
# kind → the AdmissionregistrationV1Api methods that read, create and replace it by name.
_CALLS = {
    "MutatingWebhookConfiguration": "mutating_webhook_configuration",
    "ValidatingWebhookConfiguration": "validating_webhook_configuration",
    "ValidatingAdmissionPolicy": "validating_admission_policy",
    "ValidatingAdmissionPolicyBinding": "validating_admission_policy_binding",
}
_LABELS = {"app.kubernetes.io/part-of": "gpuport", "app.kubernetes.io/managed-by": "gpuport"}


class Registrar:
    def __init__(
        self,
        api_client: Any,
        desired: Callable[[], list[dict[str, Any]]],
        ready: Callable[[], bool],
        owner_namespace: str,
        interval: float = 10.0,
        capabilities: Capabilities | None = None,
    ):
        from kubernetes import client

        self.admission = client.AdmissionregistrationV1Api(api_client)
        self.core = client.CoreV1Api(api_client)
        self.desired = desired
        self.ready = ready
        self.owner_namespace = owner_namespace
        # The RBAC may not let gpuport register itself (GPUPORT_REGISTER on, the rules removed): said once.
        self.capabilities = capabilities or Capabilities()
        self.interval = interval
        self._owner: dict[str, Any] | None = None
        self._stop = threading.Event()

    def ensure(self) -> list[str]:
        """One round: every object as it should be. Returns what was created or updated."""
        owner = self._owner_reference()
        changed = []
        for wanted in self.desired():
            kind, name = wanted["kind"], wanted["metadata"]["name"]
            if self._ensure_one(wanted, owner):
                changed.append(f"{kind}/{name}")
        if changed:
            log.info("registered %s", ", ".join(changed))
        return changed

    def start(self) -> None:
        threading.Thread(target=self._run, name="registrar", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.ready():
                try:
                    self.ensure()
                    self.capabilities.available(REGISTERING)
                except Exception as exc:  # the API server away, a conflict: the next round tries again
                    if is_refusal(exc):
                        self.capabilities.missing(REGISTERING, reason_of(exc))
                    else:
                        log.warning("webhook registration not checked: %s", getattr(exc, "reason", exc))
            self._stop.wait(self.interval)

    def _ensure_one(self, wanted: dict[str, Any], owner: dict[str, Any] | None) -> bool:
        from kubernetes.client.exceptions import ApiException

        kind, name = wanted["kind"], wanted["metadata"]["name"]
        suffix = _CALLS[kind]
        body = copy.deepcopy(wanted)
        body["metadata"].setdefault("labels", {}).update(_LABELS)
        if owner is not None:
            body["metadata"]["ownerReferences"] = [owner]
        try:
            response = getattr(self.admission, f"read_{suffix}")(
                name, _preload_content=False, _request_timeout=_TIMEOUT
            )
            current = _json(response)
        except ApiException as exc:
            if exc.status != 404:
                raise
            create = getattr(self.admission, f"create_{suffix}")
            try:
                create(_with_bundle(body, b""), _request_timeout=_TIMEOUT)
            except ApiException as exc:
                if exc.status != 409:
                    raise
                return False  # another replica or worker made it first: the next round compares it
            return True
        body = _with_bundle(body, _bundle_of(current))
        if says_all_written(current, body):
            return False
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        getattr(self.admission, f"replace_{suffix}")(name, body, _request_timeout=_TIMEOUT)
        return True

    def _owner_reference(self) -> dict[str, Any] | None:
        """gpuport's namespace, as the owner of what it registers (cluster-scoped, as they are)."""
        if self._owner is None:
            try:
                namespace = self.core.read_namespace(self.owner_namespace, _request_timeout=_TIMEOUT)
            except Exception as exc:  # asked again each round: said once, with the reason
                self.capabilities.missing(f"get namespace {self.owner_namespace} (owner)", reason_of(exc))
                return None
            self._owner = {
                "apiVersion": "v1",
                "kind": "Namespace",
                "name": self.owner_namespace,
                "uid": _uid(namespace),
            }
        return self._owner


def _json(response: Any) -> dict[str, Any]:
    import json

    found: dict[str, Any] = json.loads(response.data)
    return found


def _bundle_of(config: Mapping[str, Any]) -> bytes:
    """The CA bundle a registered webhook configuration trusts now (its first webhook's)."""
    for hook in config.get("webhooks") or ():
        encoded = (hook.get("clientConfig") or {}).get("caBundle")
        if encoded:
            return base64.b64decode(encoded)
    return b""


def _with_bundle(body: dict[str, Any], current: bytes) -> dict[str, Any]:
    """Every webhook trusting the CAs gpuport's Secret holds, and any newer one it trusts now (a
    rotation this replica has not seen yet); expired and replaced CAs gone."""
    for hook in body.get("webhooks") or ():
        config = hook.get("clientConfig") or {}
        wanted = base64.b64decode(config["caBundle"]) if config.get("caBundle") else b""
        merged = registered_ca_bundle(wanted, current) if wanted else current
        if merged:
            config["caBundle"] = base64.b64encode(merged).decode()
    return body


def _uid(namespace: Any) -> str:
    return str(namespace.metadata.uid)
