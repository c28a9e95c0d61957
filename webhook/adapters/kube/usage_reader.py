"""What `gpuport usage` reads from a cluster, read-only: the Nodes (their labels, allocatable and the
node agent's annotation) and the Pods bound to a node and not finished, in pages, as plain dicts in
the API server's own field names."""

import functools
from typing import Any

_PAGE = 500
_TIMEOUT = (5, 60)  # connect, read: an unreachable cluster is said within seconds, not minutes
_BOUND_AND_LIVE = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
_PENDING = "spec.nodeName=,status.phase=Pending"


def nodes_and_pods(core_api: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    nodes = _listed(core_api, core_api.list_node)
    pods = _listed(core_api, core_api.list_pod_for_all_namespaces, field_selector=_BOUND_AND_LIVE)
    return nodes, pods


_LIVE = "status.phase!=Succeeded,status.phase!=Failed"


def quotas_and_their_pods(core_api: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every ResourceQuota, and the not-finished pods (bound or not) of the namespaces that have one:
    what a namespace's budget holds."""
    quotas = _listed(core_api, core_api.list_resource_quota_for_all_namespaces)
    pods: list[dict[str, Any]] = []
    for namespace in sorted({str((q.get("metadata") or {}).get("namespace") or "") for q in quotas} - {""}):
        in_namespace = functools.partial(core_api.list_namespaced_pod, namespace)
        pods += _listed(core_api, in_namespace, field_selector=_LIVE)
    return quotas, pods


def pending_pods(core_api: Any) -> list[dict[str, Any]]:
    """Pods not yet bound to a node and not finished: what the scheduler still has to place."""
    return _listed(core_api, core_api.list_pod_for_all_namespaces, field_selector=_PENDING)


def _listed(core_api: Any, list_fn: Any, **selectors: str) -> list[dict[str, Any]]:
    serialize = core_api.api_client.sanitize_for_serialization
    found: list[dict[str, Any]] = []
    token = None
    while True:
        page = list_fn(limit=_PAGE, _continue=token, _request_timeout=_TIMEOUT, **selectors)
        found += [serialize(item) for item in page.items]
        token = page.metadata._continue if page.metadata is not None else None
        if not token:
            return found
