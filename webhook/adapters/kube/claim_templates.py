"""The ResourceClaimTemplates of a DRA cluster, as gpuport needs them: created for the pods it
translates, and read for the pods whose claims it counts or translates back.

Creating: before the API server stores a translated pod (a pod whose template is missing never gets
its claim). Templates gpuport writes are content-addressed (webhook.core.dra), so creating one that
exists is success, and one made by this process a moment ago needs no second call. A template of
that name with other content (made by hand) is refused, never overwritten.

Reading: the templates a pod's claims name, each fetched once and remembered for a minute (a
template's spec cannot change, but it may be deleted and made again). One that cannot be read is
reported as unread, never guessed: quota then refuses the pod rather than count it as nothing.
"""

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from webhook.core.pod_claims import STANDALONE, TemplateLookup

log = logging.getLogger("gpuport.dra")

TEMPLATES = "resourceclaimtemplates"
CLAIMS = "resourceclaims"  # made ahead, named by a pod's resourceClaimName: read only
KEPT = 4096  # (namespace, name) pairs remembered
FOR_SECONDS = 60.0  # then checked again: someone may have deleted one
TIMEOUT = (2, 3)  # connect, read: well inside the webhook's own deadline
ABSENT = object()  # remembered: there is no such template


class ClaimTemplateStore:
    def __init__(
        self,
        api_client: Any,
        api_version: str = "resource.k8s.io/v1beta1",
        clock: Callable[[], float] = time.monotonic,
    ):
        from kubernetes import client

        self.api = client.CustomObjectsApi(api_client)
        self.api_version = api_version  # what referenced() reads templates as
        self.clock = clock
        self._known: OrderedDict[tuple[str, str], tuple[float, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def ensure(self, namespace: str, templates: Sequence[Mapping[str, Any]]) -> str | None:
        """None when every template exists in `namespace` with this content; else why not."""
        for template in templates:
            name = template["metadata"]["name"]
            if self._recall(namespace, name) not in (None, ABSENT):
                continue  # made (or seen) within the minute
            problem = self._create(namespace, template)
            if problem:
                return problem
            self._remember(namespace, name, template)
        return None

    def referenced(self, namespace: str, pod: Mapping[str, Any]) -> TemplateLookup:
        """The templates the pod's claims name, read now: a lookup the pure core can call."""
        spec = pod.get("spec")
        entries = spec.get("resourceClaims") if isinstance(spec, Mapping) else None
        found: dict[str, Mapping[str, Any]] = {}
        for entry in entries if isinstance(entries, list) else ():
            if not isinstance(entry, Mapping):
                continue
            template_name, claim_name = entry.get("resourceClaimTemplateName"), entry.get("resourceClaimName")
            if isinstance(template_name, str) and template_name not in found:
                template = self._read(namespace, template_name, TEMPLATES)
                if template is not None:
                    found[template_name] = template
            elif isinstance(claim_name, str) and STANDALONE + claim_name not in found:
                claim = self._read(namespace, claim_name, CLAIMS)
                if claim is not None:  # in a template's shape, as the core reads it
                    found[STANDALONE + claim_name] = {"spec": {"spec": claim.get("spec") or {}}}
        return found.get

    def _recall(self, namespace: str, name: str) -> Any:
        with self._lock:
            remembered = self._known.get((namespace, name))
        if remembered is None or self.clock() - remembered[0] >= FOR_SECONDS:
            return None
        return remembered[1]

    def _remember(self, namespace: str, name: str, template: Any) -> None:
        with self._lock:
            self._known[(namespace, name)] = (self.clock(), template)
            self._known.move_to_end((namespace, name))
            while len(self._known) > KEPT:
                self._known.popitem(last=False)

    def _read(self, namespace: str, name: str, plural: str) -> Mapping[str, Any] | None:
        key = name if plural == TEMPLATES else STANDALONE + name
        remembered = self._recall(namespace, key)
        if remembered is not None:
            return None if remembered is ABSENT else remembered
        from kubernetes.client.exceptions import ApiException

        group, version = self.api_version.split("/")
        try:
            found = self.api.get_namespaced_custom_object(
                group, version, namespace, plural, name, _request_timeout=TIMEOUT
            )
        except ApiException as exc:
            if exc.status == 404:
                self._remember(namespace, key, ABSENT)
            else:
                log.warning("%s %s/%s not read: %s %s", plural, namespace, name, exc.status, exc.reason)
            return None
        except Exception as exc:  # unreachable, a timeout: unread, and said
            log.warning("%s %s/%s not read: %s", plural, namespace, name, type(exc).__name__)
            return None
        if not isinstance(found, Mapping):
            return None
        self._remember(namespace, key, found)
        return found

    def _create(self, namespace: str, template: Mapping[str, Any]) -> str | None:
        from kubernetes.client.exceptions import ApiException

        group, version = template["apiVersion"].split("/")
        name = template["metadata"]["name"]
        where = f"ResourceClaimTemplate {namespace}/{name}"
        try:
            self.api.create_namespaced_custom_object(
                group, version, namespace, TEMPLATES, dict(template), _request_timeout=TIMEOUT
            )
            log.info("created %s", where)
            return None
        except ApiException as exc:
            if exc.status != 409:
                return f"gpuport could not create {where}: {exc.status} {exc.reason}"
        except Exception as exc:  # the API server unreachable, a timeout: say so, never a 500
            return f"gpuport could not create {where}: {type(exc).__name__}"
        return self._same_content(group, version, namespace, template, where)

    def _same_content(
        self, group: str, version: str, namespace: str, template: Mapping[str, Any], where: str
    ) -> str | None:
        from kubernetes.client.exceptions import ApiException

        try:
            found = self.api.get_namespaced_custom_object(
                group, version, namespace, TEMPLATES, template["metadata"]["name"], _request_timeout=TIMEOUT
            )
        except ApiException as exc:
            return f"gpuport could not read {where}: {exc.status} {exc.reason}"
        except Exception as exc:
            return f"gpuport could not read {where}: {type(exc).__name__}"
        if not isinstance(found, Mapping) or not _contains(found.get("spec"), template["spec"]):
            return f"{where} exists with content gpuport did not write; delete it or rename it"
        return None


def _contains(found: Any, written: Any) -> bool:
    """Whether `found` says everything `written` says: the API server may fill in defaults."""
    if isinstance(written, Mapping):
        return isinstance(found, Mapping) and all(
            k in found and _contains(found[k], v) for k, v in written.items()
        )
    if isinstance(written, list):
        return (
            isinstance(found, list)
            and len(found) == len(written)
            and all(_contains(f, w) for f, w in zip(found, written, strict=True))
        )
    return bool(found == written)
