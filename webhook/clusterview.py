"""The cluster view: a watch cache of what GPU decisions need, and nothing more.

List, then watch from the list's resourceVersion; on 410 Gone or a broken stream, list again, with
backoff while the API server is away. Pods are kept only when they ask for an extended resource, and
only the fields quota needs; quotas, limit ranges and namespace labels are small already. The decision
code reads plain copies; it never calls the API.
"""

import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from webhook import quantity
from webhook.checks import is_extended_resource
from webhook.inventory import CAPABILITY_ANNOTATION
from webhook.quota import Quota

log = logging.getLogger("gpuport.clusterview")
TERMINAL = ("Succeeded", "Failed")


def compact_pod(pod: dict[str, Any]) -> dict[str, Any] | None:
    spec = pod.get("spec") or {}

    def keep(container):
        resources = container.get("resources") or {}
        kept = {
            s: {
                k: v
                for k, v in (resources.get(s) or {}).items()
                if is_extended_resource(k) or k in ("cpu", "memory")
            }
            for s in ("requests", "limits")
        }
        return {
            "name": container.get("name"),
            "resources": kept,
            "restartPolicy": container.get("restartPolicy"),
        }

    containers = [keep(c) for c in spec.get("containers") or []]
    init = [keep(c) for c in spec.get("initContainers") or []]
    if not any(
        is_extended_resource(k) for c in containers + init for s in c["resources"].values() for k in s
    ):
        return None
    metadata = pod.get("metadata") or {}
    return {
        "metadata": {k: metadata.get(k) for k in ("name", "namespace", "uid")},
        "spec": {
            "containers": containers,
            "initContainers": init,
            "nodeSelector": spec.get("nodeSelector") or {},
            "affinity": spec.get("affinity") or {},
            "activeDeadlineSeconds": spec.get("activeDeadlineSeconds"),
            "priorityClassName": spec.get("priorityClassName"),
        },
        "status": {"phase": (pod.get("status") or {}).get("phase")},
    }


def to_quota(obj: dict[str, Any]) -> Quota:
    spec = obj.get("spec") or {}
    return Quota(
        name=obj["metadata"]["name"],
        hard={k: quantity.parse(v) for k, v in (spec.get("hard") or {}).items()},
        scopes=tuple(spec.get("scopes") or ()),
        scope_selector=tuple((spec.get("scopeSelector") or {}).get("matchExpressions") or ()),
    )


def keep_namespace(obj: dict[str, Any]) -> dict[str, dict[str, str]]:
    metadata = obj.get("metadata") or {}
    return {"labels": metadata.get("labels") or {}, "annotations": metadata.get("annotations") or {}}


def keep_limitrange(obj: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {k: obj["metadata"].get(k) for k in ("name", "namespace")},
        "spec": obj.get("spec") or {},
    }


def keep_node(obj: dict[str, Any]) -> dict[str, Any]:
    """What placement reads: labels, allocatable, taints and the node agent's record; not the status
    conditions, so kubelet heartbeats change nothing kept."""
    metadata = obj.get("metadata") or {}
    capability = (metadata.get("annotations") or {}).get(CAPABILITY_ANNOTATION)
    return {
        "kind": "Node",
        "metadata": {
            "name": metadata.get("name"),
            "labels": metadata.get("labels") or {},
            "annotations": {CAPABILITY_ANNOTATION: capability} if capability else {},
        },
        "status": {"allocatable": (obj.get("status") or {}).get("allocatable") or {}},
        "spec": {"taints": (obj.get("spec") or {}).get("taints") or []},
    }


class _Store:
    """One resource kind, relisted whole then kept current by watch events, grouped by namespace
    ("" for cluster-scoped kinds) so a read touches one namespace only."""

    def __init__(self, keep: Callable[[dict[str, Any]], Any], key: str = "name"):
        self.keep = keep  # the compact value to hold, or None for objects not worth holding
        self.key = key  # the metadata field that names an object within its group
        self.groups: dict[str, dict[str, Any]] = {}
        self.version = 0  # bumped whenever what is held changes

    def apply(self, kind: str, obj: dict[str, Any] | None, items: list[dict[str, Any]]) -> None:
        if kind == "RELIST":
            groups: dict[str, dict[str, Any]] = {}
            for item in items:
                value = self.keep(item)
                if value is not None:
                    groups.setdefault(self._group(item), {})[item["metadata"][self.key]] = value
            changed, self.groups = groups != self.groups, groups
        else:
            group = self.groups.setdefault(self._group(obj), {})
            name = obj["metadata"][self.key]
            value = self.keep(obj) if kind != "DELETED" else None
            changed = group.get(name) != value
            if value is None:
                group.pop(name, None)
            else:
                group[name] = value
        if changed:
            self.version += 1

    def in_group(self, group: str) -> list[Any]:
        return list(self.groups.get(group, {}).values())

    @staticmethod
    def _group(obj: dict[str, Any]) -> str:
        return (obj.get("metadata") or {}).get("namespace") or ""


class ClusterView:
    def __init__(self, core_api, backoff_max: float = 30.0):
        self.core = core_api
        self.backoff_max = backoff_max
        self._lock = threading.Lock()
        self._stores = {
            "pods": _Store(compact_pod, key="uid"),
            "resourcequotas": _Store(to_quota),
            "namespaces": _Store(keep_namespace),
            "limitranges": _Store(keep_limitrange),
            "nodes": _Store(keep_node),
        }
        self._synced = {name: threading.Event() for name in self._stores}
        self._stop = threading.Event()

    # -- reads, for the admission path --------------------------------------------------------
    @property
    def synced(self) -> bool:
        return all(event.is_set() for event in self._synced.values())

    @property
    def nodes_version(self) -> int:
        """Changes whenever a node change the decisions would see arrives (not on heartbeats)."""
        return self._stores["nodes"].version

    def pods_in(self, namespace: str) -> list[dict[str, Any]]:
        with self._lock:
            pods = self._stores["pods"].in_group(namespace)
        return [p for p in pods if p["status"]["phase"] not in TERMINAL]

    def quotas_in(self, namespace: str) -> list[Quota]:
        with self._lock:
            return self._stores["resourcequotas"].in_group(namespace)

    def limitranges_in(self, namespace: str) -> list[dict[str, Any]]:
        with self._lock:
            return self._stores["limitranges"].in_group(namespace)

    def namespace(self, namespace: str) -> dict[str, dict[str, str]]:
        """Labels and annotations of a namespace (set by its admins, never by a pod)."""
        with self._lock:
            found = self._stores["namespaces"].groups.get("", {}).get(namespace, {})
            return {
                "labels": dict(found.get("labels", {})),
                "annotations": dict(found.get("annotations", {})),
            }

    def inventory(self):
        """The nodes as an Inventory (labels, allocatable, taints, node-agent capability), or None."""
        from webhook.inventory import InventoryError, parse_inventory

        with self._lock:
            nodes = self._stores["nodes"].in_group("")
        try:
            return parse_inventory(nodes) if nodes else None
        except InventoryError as exc:
            log.warning("node inventory not usable: %s", exc)
            return None

    # -- the watch loops ------------------------------------------------------------------------
    def apply(self, name: str, kind: str, obj: dict[str, Any] | None = None, items=()) -> None:
        """One list result (kind RELIST) or watch event for the named resource kind."""
        with self._lock:
            self._stores[name].apply(kind, obj, list(items))

    def start(self) -> None:
        lists = {
            "pods": self.core.list_pod_for_all_namespaces,
            "resourcequotas": self.core.list_resource_quota_for_all_namespaces,
            "namespaces": self.core.list_namespace,
            "limitranges": self.core.list_limit_range_for_all_namespaces,
            "nodes": self.core.list_node,
        }
        for name, list_fn in lists.items():
            threading.Thread(
                target=self._run, args=(name, list_fn), name=f"watch-{name}", daemon=True
            ).start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self, name: str, list_fn: Callable) -> None:
        from kubernetes import watch
        from kubernetes.client.exceptions import ApiException

        backoff = 0.5
        while not self._stop.is_set():
            try:
                # Raw JSON, not the client's typed models: a relist of every pod in a large cluster
                # through the models costs seconds and memory in every worker.
                listed = json.loads(list_fn(_preload_content=False).data)
                self.apply(name, "RELIST", items=listed.get("items") or [])
                self._synced[name].set()
                version = listed["metadata"]["resourceVersion"]
                backoff = 0.5
                while not self._stop.is_set():
                    stream = watch.Watch().stream(
                        list_fn,
                        resource_version=version,
                        timeout_seconds=240,
                        allow_watch_bookmarks=True,
                        deserialize=False,
                    )
                    for event in stream:
                        obj = event["object"]
                        version = (obj.get("metadata") or {}).get("resourceVersion", version)
                        if event["type"] != "BOOKMARK":
                            self.apply(name, event["type"], obj)
            except KeyError as exc:
                # kubernetes' Watch with deserialize=False reads an ERROR event (410 Gone: the version is
                # too old) under a key raw JSON does not have; either way the answer is to list again.
                log.info(
                    "%s watch ended with an error event (%s): listing again in %.1fs", name, exc, backoff
                )
            except ApiException as exc:
                if exc.status == 410:
                    log.info("%s watch expired (410 Gone): listing again", name)
                    continue
                log.warning(
                    "%s watch failed (%s %s); listing again in %.1fs", name, exc.status, exc.reason, backoff
                )
            except Exception as exc:  # a broken stream or an unreachable API server
                log.warning("%s watch broke (%s); listing again in %.1fs", name, exc, backoff)
            self._stop.wait(backoff)
            backoff = min(backoff * 2, self.backoff_max)
