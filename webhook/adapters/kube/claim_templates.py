"""Creates the ResourceClaimTemplates a translated pod refers to, in the pod's namespace, before the
API server stores the pod (on a DRA cluster a pod whose template is missing never gets its claim).

Templates are content-addressed (webhook.core.dra), so creating one that exists is success, and one
created by this process a moment ago needs no second call. A template of that name with other
content (made by hand) is refused, never overwritten: gpuport only creates and reads templates.
"""

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

log = logging.getLogger("gpuport.dra")

PLURAL = "resourceclaimtemplates"
KNOWN_KEPT = 4096  # (namespace, name) pairs remembered as existing
KNOWN_FOR_SECONDS = 60.0  # then checked again: someone may have deleted one
TIMEOUT = (2, 3)  # connect, read: well inside the webhook's own deadline


class ClaimTemplateWriter:
    def __init__(self, api_client: Any, clock: Callable[[], float] = time.monotonic):
        from kubernetes import client

        self.api = client.CustomObjectsApi(api_client)
        self.clock = clock
        self._known: OrderedDict[tuple[str, str], float] = OrderedDict()
        self._lock = threading.Lock()

    def ensure(self, namespace: str, templates: Sequence[Mapping[str, Any]]) -> str | None:
        """None when every template exists in `namespace` with this content; else why not."""
        for template in templates:
            name = template["metadata"]["name"]
            if self._recently_seen(namespace, name):
                continue
            problem = self._create(namespace, template)
            if problem:
                return problem
            with self._lock:
                self._known[(namespace, name)] = self.clock()
                self._known.move_to_end((namespace, name))
                while len(self._known) > KNOWN_KEPT:
                    self._known.popitem(last=False)
        return None

    def _recently_seen(self, namespace: str, name: str) -> bool:
        with self._lock:
            seen = self._known.get((namespace, name))
        return seen is not None and self.clock() - seen < KNOWN_FOR_SECONDS

    def _create(self, namespace: str, template: Mapping[str, Any]) -> str | None:
        from kubernetes.client.exceptions import ApiException

        group, version = template["apiVersion"].split("/")
        name = template["metadata"]["name"]
        where = f"ResourceClaimTemplate {namespace}/{name}"
        try:
            self.api.create_namespaced_custom_object(
                group, version, namespace, PLURAL, dict(template), _request_timeout=TIMEOUT
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
                group, version, namespace, PLURAL, template["metadata"]["name"], _request_timeout=TIMEOUT
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
