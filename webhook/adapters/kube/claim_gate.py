"""The review of ResourceClaim creates and of the updates that mark a claim as a pod's: in a namespace
with a GPU budget, a claim made under a name a not-finished pod already holds is refused
(webhook.core.budget.replaced_claims), and so is a claim marked as a pod's own whose spec is not what
that pod's template makes (webhook.core.budget.adopted_claims); those modules say why and in which
words. This adapter asks the cluster view for the namespace's budget and its pods, and reads the
owning pod (from the view, else from the API server where the view has not seen it yet) and its
template."""

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from webhook.adapters.kube.charge_freeze import BUDGET_STORES, has_gpu_budget
from webhook.adapters.kube.clusterview import as_version
from webhook.core.budget.adopted_claims import adoption_message, adoption_problem, marks_of, template_named
from webhook.core.budget.replaced_claims import pods_naming, replaced_message
from webhook.core.deciding.context import Context
from webhook.core.deciding.decision import Decision, deny
from webhook.core.deciding.review import AdmissionRequest

log = logging.getLogger("gpuport.claims")

_TIMEOUT = (2, 3)  # connect, read: well inside the webhook's own deadline
OwnerRead = Callable[[str, str], Mapping[str, Any] | None]  # (namespace, name) → the pod, or None


class ClaimCreateGate:
    def __init__(self, view, templates=None, read_pod: OwnerRead | None = None):
        self.view = view
        self.templates = templates  # ClaimTemplateStore: what a pod's template makes, read now
        self.read_pod = read_pod  # the pods the view has not seen yet (a claim made just after its pod)

    def admit_claim(self, request: AdmissionRequest, context: Context) -> Decision | None:
        """A refusal of a ResourceClaim create (or of an update that marks it as a pod's) in a budget
        namespace, else None."""
        claim_object = request.object or {}
        claim = request.name or str((claim_object.get("metadata") or {}).get("name") or "")
        marks = marks_of(claim_object)
        if request.operation == "UPDATE" and (not marks.adoptable or marks == marks_of(request.old_object)):
            return None  # only the marks make a claim that exists a pod's: the spec cannot change
        if not claim and not marks.adoptable:
            return None  # a generated name: no pod can name it yet
        if not self.view.has_synced("pods", *BUDGET_STORES):
            return deny(
                "claim-view-loading",
                f"gpuport is still loading its view of the cluster and cannot tell whether pods of "
                f"{request.namespace} already name this claim; retry shortly",
            )
        if not has_gpu_budget(self.view, request.namespace, context):
            return None
        if request.operation == "CREATE" and claim:
            pods = pods_naming(claim, self.view.pods_in(request.namespace))
            if pods:
                return deny("claim-named-by-pods", replaced_message(claim, request.namespace, pods))
        if not marks.adoptable:
            return None
        pod = self._owner(request.namespace, marks.owner)
        template = None
        template_name = template_named(claim_object, pod)
        if template_name is not None and self.templates is not None:
            version = str(claim_object.get("apiVersion") or f"{request.group}/{request.version}")
            template = self.templates.template_as(request.namespace, template_name, version)
        problem = adoption_problem(claim_object, pod, template, self._created_at(request.namespace, pod))
        if problem is None:
            return None
        return deny("claim-marked-as-a-pods", adoption_message(claim, request.namespace, problem))

    def _owner(self, namespace: str, owner: tuple[str, str] | None) -> Mapping[str, Any] | None:
        """The pod of the claim's controlling ownerReference, by its uid: from the view, else read."""
        if owner is None:
            return None
        name, uid = owner
        found = next((p for p in self.view.pods_in(namespace) if p["metadata"].get("uid") == uid), None)
        if found is None and self.read_pod is not None and name:
            found = self.read_pod(namespace, name)
        return found if found is not None and (found.get("metadata") or {}).get("uid") == uid else None

    def _created_at(self, namespace: str, pod: Mapping[str, Any] | None) -> int | None:
        """The resourceVersion the view first saw the pod at (its create, where the watch saw it made);
        for a pod read by name, the one it has now (later: the check is then only less strict)."""
        if pod is None:
            return None
        metadata = pod.get("metadata") or {}
        seen = self.view.pod_first_seen(namespace, str(metadata.get("uid")))
        return seen if seen is not None else as_version(metadata.get("resourceVersion"))


def pod_reader(api_client: Any) -> OwnerRead:
    """(namespace, name) → the pod as the API server holds it now; None when missing or unread."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    core = client.CoreV1Api(api_client)

    def read(namespace: str, name: str) -> Mapping[str, Any] | None:
        try:
            # Raw JSON (no model): the pod is read as the view and the core read pods, as a dict.
            found: Any = core.read_namespaced_pod(
                name, namespace, _preload_content=False, _request_timeout=_TIMEOUT
            )
            pod = json.loads(found.data)
        except ApiException as exc:
            if exc.status != 404:
                log.warning("pod %s/%s not read: %s %s", namespace, name, exc.status, exc.reason)
            return None
        except Exception as exc:  # unreachable, a timeout, not JSON: unread, and said
            log.warning("pod %s/%s not read: %s", namespace, name, type(exc).__name__)
            return None
        return pod if isinstance(pod, Mapping) else None

    return read
