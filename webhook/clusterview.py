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


class ClusterView:
    def __init__(self, core_api, backoff_max: float = 30.0):
        self.core = core_api
        self.backoff_max = backoff_max
        self._lock = threading.Lock()
        self._pods: dict[str, dict[str, dict[str, Any]]] = {}  # namespace → uid → compact pod
        self._quotas: dict[tuple[str, str], Quota] = {}
        self._namespaces: dict[str, dict[str, dict[str, str]]] = {}
        self._limitranges: dict[tuple[str, str], dict[str, Any]] = {}
        self._nodes: dict[str, dict[str, Any]] = {}
        self.nodes_version = 0  # bumped on every node change the decisions care about
        self._synced = {
            name: threading.Event()
            for name in ("pods", "resourcequotas", "namespaces", "limitranges", "nodes")
        }
        self._stop = threading.Event()

    # -- reads, for the admission path --------------------------------------------------------
    @property
    def synced(self) -> bool:
        return all(event.is_set() for event in self._synced.values())

    def pods_in(self, namespace: str) -> list[dict[str, Any]]:
        with self._lock:
            return [p for p in self._pods.get(namespace, {}).values() if p["status"]["phase"] not in TERMINAL]

    def quotas_in(self, namespace: str) -> list[Quota]:
        with self._lock:
            return [q for (ns, _), q in self._quotas.items() if ns == namespace]

    def namespace(self, namespace: str) -> dict[str, dict[str, str]]:
        """Labels and annotations of a namespace (set by its admins, never by a pod)."""
        with self._lock:
            found = self._namespaces.get(namespace, {})
            return {
                "labels": dict(found.get("labels", {})),
                "annotations": dict(found.get("annotations", {})),
            }

    def inventory(self):
        """The nodes as an Inventory (labels, allocatable, taints, node-agent capability), or None."""
        from webhook.inventory import InventoryError, parse_inventory

        with self._lock:
            nodes = list(self._nodes.values())
        try:
            return parse_inventory(nodes) if nodes else None
        except InventoryError as exc:
            log.warning("node inventory not usable: %s", exc)
            return None

    def limitranges_in(self, namespace: str) -> list[dict[str, Any]]:
        with self._lock:
            return [lr for (ns, _), lr in self._limitranges.items() if ns == namespace]

    # -- the watch loops ------------------------------------------------------------------------
    def start(self) -> None:
        loops = (
            ("pods", self.core.list_pod_for_all_namespaces, self._apply_pod),
            ("resourcequotas", self.core.list_resource_quota_for_all_namespaces, self._apply_quota),
            ("namespaces", self.core.list_namespace, self._apply_namespace),
            ("limitranges", self.core.list_limit_range_for_all_namespaces, self._apply_limitrange),
            ("nodes", self.core.list_node, self._apply_node),
        )
        for name, list_fn, apply in loops:
            threading.Thread(
                target=self._run, args=(name, list_fn, apply), name=f"watch-{name}", daemon=True
            ).start()

    def stop(self) -> None:
        self._stop.set()

    def _run(
        self, name: str, list_fn: Callable, apply: Callable[[str, dict[str, Any] | None, dict], None]
    ) -> None:
        from kubernetes import watch
        from kubernetes.client.exceptions import ApiException

        backoff = 0.5
        while not self._stop.is_set():
            try:
                # Raw JSON, not the client's typed models: a relist of every pod in a large cluster
                # through the models costs seconds and memory in every worker.
                listed = json.loads(list_fn(_preload_content=False).data)
                apply("RELIST", None, {"items": listed.get("items") or []})
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
                            apply(event["type"], obj, {})
            except KeyError as exc:
                # kubernetes' Watch with deserialize=False reads an ERROR event (410 Gone: the version is
                # too old) under a key raw JSON does not have; either way the answer is to list again.
                log.info("%s watch ended with an error event (%s): listing again", name, exc)
                continue
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

    def _apply_pod(self, kind: str, obj, listed) -> None:
        with self._lock:
            if kind == "RELIST":
                self._pods = {}
                for compact in filter(None, map(compact_pod, listed["items"])):
                    self._pods.setdefault(compact["metadata"]["namespace"], {})[
                        compact["metadata"]["uid"]
                    ] = compact
                return
            metadata = obj["metadata"]
            in_namespace = self._pods.setdefault(metadata.get("namespace"), {})
            compact = compact_pod(obj) if kind != "DELETED" else None
            if compact is None:
                in_namespace.pop(metadata["uid"], None)
            else:
                in_namespace[metadata["uid"]] = compact

    def _apply_quota(self, kind: str, obj, listed) -> None:
        with self._lock:
            if kind == "RELIST":
                self._quotas = {
                    (o["metadata"]["namespace"], o["metadata"]["name"]): to_quota(o) for o in listed["items"]
                }
                return
            key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
            if kind == "DELETED":
                self._quotas.pop(key, None)
            else:
                self._quotas[key] = to_quota(obj)

    def _apply_namespace(self, kind: str, obj, listed) -> None:
        def keep(o):
            metadata = o.get("metadata") or {}
            return {"labels": metadata.get("labels") or {}, "annotations": metadata.get("annotations") or {}}

        with self._lock:
            if kind == "RELIST":
                self._namespaces = {o["metadata"]["name"]: keep(o) for o in listed["items"]}
            elif kind == "DELETED":
                self._namespaces.pop(obj["metadata"]["name"], None)
            else:
                self._namespaces[obj["metadata"]["name"]] = keep(obj)

    def _apply_node(self, kind: str, obj, listed) -> None:
        def keep(o):
            metadata = o.get("metadata") or {}
            capability = (metadata.get("annotations") or {}).get(CAPABILITY_ANNOTATION)
            return {
                "kind": "Node",
                "metadata": {
                    "name": metadata.get("name"),
                    "labels": metadata.get("labels") or {},
                    "annotations": {CAPABILITY_ANNOTATION: capability} if capability else {},
                },
                "status": {"allocatable": (o.get("status") or {}).get("allocatable") or {}},
                "spec": {"taints": (o.get("spec") or {}).get("taints") or []},
            }

        with self._lock:
            before = dict(self._nodes)
            if kind == "RELIST":
                self._nodes = {o["metadata"]["name"]: keep(o) for o in listed["items"]}
            elif kind == "DELETED":
                self._nodes.pop(obj["metadata"]["name"], None)
            else:
                self._nodes[obj["metadata"]["name"]] = keep(obj)
            if self._nodes != before:  # heartbeats change nothing kept: no rebuild for them
                self.nodes_version += 1

    def _apply_limitrange(self, kind: str, obj, listed) -> None:
        def keep(o):
            return {
                "metadata": {k: o["metadata"].get(k) for k in ("name", "namespace")},
                "spec": o.get("spec") or {},
            }

        with self._lock:
            if kind == "RELIST":
                self._limitranges = {
                    (o["metadata"]["namespace"], o["metadata"]["name"]): keep(o) for o in listed["items"]
                }
                return
            key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
            if kind == "DELETED":
                self._limitranges.pop(key, None)
            else:
                self._limitranges[key] = keep(obj)
