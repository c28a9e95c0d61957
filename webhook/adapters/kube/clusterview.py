"""The cluster view: a watch cache of what GPU decisions need, and nothing more.

List in pages, then watch from the list's resourceVersion; a watch that ends or breaks resumes from
the last version it saw, and only 410 Gone (that version is no longer kept) lists again; backoff while
the API server is away. Pods are kept only when they ask for an extended resource, and only the fields
quota needs; quotas, limit ranges and namespace labels are small already. A page is parsed, compacted
and dropped before the next is read, so a large cluster never sits in memory as JSON and no request
thread waits long on one parse. The decision code reads plain copies; it never calls the API.

Why one module of ~600 lines: the list/watch loop, the per-kind stores and the readers share one
lock and one resourceVersion per kind; split apart, the invariant "a reader sees one consistent
snapshot" would span files.
"""

import json
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from webhook.adapters.kube.capabilities import Capabilities, is_refusal, reason_of
from webhook.core.asks.checks import is_extended_resource
from webhook.core.asks.claims import CLASS_RESOURCE_PREFIX
from webhook.core.budget.limits import LIMITS_ANNOTATION
from webhook.core.budget.quota import Quota
from webhook.core.vocabulary import quantity
from webhook.core.vocabulary.topology import CAPABILITY_ANNOTATION

log = logging.getLogger("gpuport.clusterview")
TERMINAL = ("Succeeded", "Failed")
# A kept pod's resourceVersion when the view first had it: not part of what the record means, so a
# status heartbeat changes nothing held (see _same), but it tells when every view must have the pod.
FIRST_SEEN = "firstSeen"
PAGE_SIZE = 500
# The pod annotations that ask for a GPU share with no resource at all (the KAI scheduler's), as the
# webhooks' matchConditions name them (webhook/config/admission/): such a pod holds a GPU and is kept.
SHARE_ANNOTATIONS = frozenset({"gpu-fraction", "gpu-memory"})
# and KAI's per-container ones, nvidia.com/container.<name>.gpu-memory.request / .limit
SHARE_PREFIX, SHARE_SUFFIXES = "nvidia.com/container.", (".gpu-memory.request", ".gpu-memory.limit")
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
# (connect, read) seconds: a list page or a watch that stops answering is given up and resumed.
LIST_TIMEOUT = (5, 60)
WATCH_SECONDS = 240
# Changes remembered per namespace, so the quota sum reads only the pods changed since its last sum
# (a few per review in a burst) instead of every pod of the namespace; a reader further behind reads all.
JOURNAL_LENGTH = 4096
# Pods seen deleted, remembered per namespace (UIDs, newest kept) so that a reservation whose pod is gone
# frees its place at once; one forgotten sooner than its reservation's few seconds is merely counted on.
GONE_KEPT = 4096


def compact_pod(pod: dict[str, Any]) -> dict[str, Any] | None:
    spec = pod.get("spec") or {}

    def keep(container):
        resources = container.get("resources") or {}
        kept = {
            s: {k: v for k, v in (resources.get(s) or {}).items() if _kept(k) or k in ("cpu", "memory")}
            for s in ("requests", "limits")
        }
        if resources.get("claims"):
            kept["claims"] = resources["claims"]
        return {
            "name": container.get("name"),
            "resources": kept,
            "restartPolicy": container.get("restartPolicy"),
        }

    containers = [keep(c) for c in spec.get("containers") or []]
    init = [keep(c) for c in spec.get("initContainers") or []]
    claims = spec.get("resourceClaims") or []
    extended = any(
        _kept(k) for c in containers + init for s in ("requests", "limits") for k in c["resources"][s]
    )
    metadata = pod.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    shared = not annotations.keys().isdisjoint(SHARE_ANNOTATIONS) or any(
        k.startswith(SHARE_PREFIX) and k.endswith(SHARE_SUFFIXES) for k in annotations
    )
    if not extended and not claims and not shared:
        return None  # asks for no GPU: quota and placement never look at it
    return {
        FIRST_SEEN: as_version(metadata.get("resourceVersion")),
        "metadata": {
            **{k: metadata.get(k) for k in ("name", "namespace", "uid")},
            # A share asked by annotation (KAI's gpu-fraction), models chosen by annotation (HAMi's
            # use-gputype): a running pod's charge reads them as an admission does. All are kept, so
            # no padding of a value can push one out; kubectl's copy of the whole manifest is not.
            "annotations": {k: v for k, v in annotations.items() if k != LAST_APPLIED},
        },
        "spec": {
            "containers": containers,
            "initContainers": init,
            "resourceClaims": claims,  # what they ask for is in their templates (DRA)
            "nodeSelector": spec.get("nodeSelector") or {},
            "affinity": spec.get("affinity") or {},
            "activeDeadlineSeconds": spec.get("activeDeadlineSeconds"),
            "priorityClassName": spec.get("priorityClassName"),
            "schedulerName": spec.get("schedulerName"),  # annotation shares are read for its pods only
            # What the quota scopes read besides (pod_facts): the pod-level resources that decide the
            # QoS class where the status does not say it.
            **({"resources": pod_level} if (pod_level := _pod_level_qos(spec)) else {}),
        },
        "status": {
            "phase": (pod.get("status") or {}).get("phase"),
            # The QoS class as the API server wrote it at create: what the BestEffort scopes read.
            "qosClass": (pod.get("status") or {}).get("qosClass"),
            # The claims the cluster made from the pod's templates: what a running pod holds is read
            # from them (its template may since have been deleted or made anew).
            **(
                {"resourceClaimStatuses": made}
                if (made := (pod.get("status") or {}).get("resourceClaimStatuses"))
                else {}
            ),
        },
    }


def _pod_level_qos(spec: dict[str, Any]) -> dict[str, Any]:
    resources = spec.get("resources") or {}
    kept = {
        section: {
            k: v
            for k, v in (resources.get(section) or {}).items()
            if k in ("cpu", "memory") or k.startswith("hugepages-")
        }
        for section in ("requests", "limits")
    }
    return {section: amounts for section, amounts in kept.items() if amounts}


def _kept(resource: str) -> bool:
    """An extended resource (a GPU in some dialect, or a device class's, KEP-5004): quota may count it."""
    return is_extended_resource(resource) or resource.startswith(CLASS_RESOURCE_PREFIX)


def as_version(text: Any) -> int | None:
    """An API resourceVersion as a number (etcd's revision, which the API server hands out in
    increasing order), or None where it is not one: then nothing relies on comparing it."""
    return int(text) if isinstance(text, str) and text.isdigit() else None


def _same(a: Any, b: Any) -> bool:
    """Whether two held records mean the same, their first-seen versions aside."""
    if isinstance(a, dict) and isinstance(b, dict) and (FIRST_SEEN in a or FIRST_SEEN in b):
        return {k: v for k, v in a.items() if k != FIRST_SEEN} == {
            k: v for k, v in b.items() if k != FIRST_SEEN
        }
    return a == b


def _same_group(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    a, b = a or {}, b or {}
    return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)


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
    capability = _without_figures((metadata.get("annotations") or {}).get(CAPABILITY_ANNOTATION))
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


def _without_figures(capability: Any) -> Any:
    """The agent's record without its measured usage, which changes every few minutes on every node
    and which no decision reads (the overcommit guard reads the node's label): kept, it would rebuild
    the decision context on every report of every node."""
    if not isinstance(capability, str) or '"usage"' not in capability:
        return capability
    try:
        record = json.loads(capability)
    except ValueError:
        return capability  # said where the inventory is read
    if not isinstance(record, dict):
        return capability
    record.pop("usage", None)
    return json.dumps(record, sort_keys=True, separators=(",", ":"))


class _Store:
    """One resource kind, relisted whole then kept current by watch events, grouped by namespace
    ("" for cluster-scoped kinds) so a read touches one namespace only."""

    def __init__(self, keep: Callable[[dict[str, Any]], Any], key: str = "name"):
        self.keep = keep  # the compact value to hold, or None for objects not worth holding
        self.key = key  # the metadata field that names an object within its group
        self.groups: dict[str, dict[str, Any]] = {}
        self.version = 0  # bumped whenever what is held changes
        self.group_versions: dict[str, int] = {}  # likewise, per group (namespace)
        # Per group, (its version before the first entry, the key each later version changed): what
        # lets a reader that summed the group at one version read only what changed since.
        self.journals: dict[str, tuple[int, list[str]]] = {}

    def compact(self, items: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """A list's objects as the records this store would hold, grouped; holds nothing yet."""
        groups: dict[str, dict[str, Any]] = {}
        for item in items:
            value = self.keep(item)
            if value is not None:
                groups.setdefault(self._group(item), {})[item["metadata"][self.key]] = value
        return groups

    def apply(self, kind: str, obj: dict[str, Any]) -> None:
        """One watch event (ADDED, MODIFIED, DELETED)."""
        group = self.groups.setdefault(self._group(obj), {})
        name = obj["metadata"][self.key]
        value = self.keep(obj) if kind != "DELETED" else None
        held = group.get(name)
        if value is not None and held is not None and _same(held, value):
            return  # nothing it means changed; the record keeps its first-seen version
        if isinstance(value, dict) and isinstance(held, dict) and FIRST_SEEN in held:
            value[FIRST_SEEN] = held[FIRST_SEEN]
        changed = held != value
        if changed:
            key = self._group(obj)
            self.group_versions[key] = self.group_versions.get(key, 0) + 1
            self._journal(key, name)
        if value is None:
            group.pop(name, None)
        else:
            group[name] = value
        if changed:
            self.version += 1

    def replace(self, groups: dict[str, dict[str, Any]]) -> None:
        """Hold a fresh list's records; those already held keep their first-seen versions."""
        for group, records in groups.items():
            held = self.groups.get(group, {})
            for name, record in records.items():
                if isinstance(record, dict) and FIRST_SEEN in record and name in held:
                    record[FIRST_SEEN] = held[name].get(FIRST_SEEN)
        changed = False
        for group in set(groups) | set(self.groups):
            if not _same_group(groups.get(group), self.groups.get(group)):
                self.group_versions[group] = self.group_versions.get(group, 0) + 1
                self.journals[group] = (self.group_versions[group], [])  # earlier versions: read it all
                changed = True
        self.groups = groups
        if changed:
            self.version += 1

    def _journal(self, group: str, name: str) -> None:
        base, names = self.journals.setdefault(group, (self.group_versions[group] - 1, []))
        names.append(name)
        if len(names) > JOURNAL_LENGTH:
            dropped = len(names) // 2
            self.journals[group] = (base + dropped, names[dropped:])

    def changed_since(self, group: str, version: int) -> set[str] | None:
        """The names changed in the group after `version`, or None when the journal does not reach
        back that far (a relist since, or more changes than it keeps)."""
        base, names = self.journals.get(group, (self.group_versions.get(group, 0), []))
        if not base <= version <= base + len(names):
            return None
        return set(names[version - base :])

    def in_group(self, group: str) -> list[Any]:
        return list(self.groups.get(group, {}).values())

    @staticmethod
    def _group(obj: dict[str, Any]) -> str:
        return (obj.get("metadata") or {}).get("namespace") or ""


def keep_dra_object(obj: dict[str, Any]) -> dict[str, Any]:
    """A DeviceClass or ResourceSlice as the budget reads it: its spec, and the metadata that says
    which object it is (uid, resourceVersion) and which class is newest (creationTimestamp)."""
    metadata = obj.get("metadata") or {}
    kept = ("name", "uid", "resourceVersion", "creationTimestamp")
    return {"metadata": {k: metadata.get(k) for k in kept}, "spec": obj.get("spec") or {}}


# The DRA kinds the budget reads cluster-wide: watched only where the view is given a DRA client, and
# never part of readiness (a cluster without them, or RBAC without watch, reads them again instead).
DRA_KINDS = ("deviceclasses", "resourceslices")


def _cluster_list(custom: Any, group: str, version: str, plural: str) -> Callable:
    """A cluster-scoped custom kind's list call in the shape the list and watch loop calls it."""

    def list_objects(**kwargs: Any) -> Any:
        return custom.list_cluster_custom_object(group, version, plural, **kwargs)

    return list_objects


class ClusterView:
    def __init__(
        self,
        core_api,
        backoff_max: float = 30.0,
        dra: tuple[Any, str] | None = None,
        capabilities: Capabilities | None = None,
    ):
        # A watch the RBAC refuses (DeviceClasses without the DRA rules) is said once, not every retry.
        self.capabilities = capabilities or Capabilities()
        """`dra`: (CustomObjectsApi, resource.k8s.io version) to watch DeviceClasses and ResourceSlices."""
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
        self._dra_lists: dict[str, Callable] = {}
        if dra is not None:
            custom, api_version = dra
            group, version = api_version.split("/", 1)
            for name in DRA_KINDS:
                self._stores[name] = _Store(keep_dra_object)
                self._dra_lists[name] = _cluster_list(custom, group, version, name)
        self._synced = {name: threading.Event() for name in self._stores}
        self._read_through: dict[str, int] = {}  # kind → resourceVersion its stream has been applied to
        self._gone: dict[str, dict[str, None]] = {}  # namespace → UIDs of pods seen deleted, oldest first
        self._stop = threading.Event()

    # -- reads, for the admission path --------------------------------------------------------
    @property
    def synced(self) -> bool:
        return all(event.is_set() for name, event in self._synced.items() if name not in DRA_KINDS)

    def wait_synced(self, timeout: float | None = None) -> bool:
        """Block until every kind has been listed once (or the timeout passes); True when synced."""
        return all(event.wait(timeout) for name, event in self._synced.items() if name not in DRA_KINDS)

    def has_synced(self, *names: str) -> bool:
        """Whether these kinds have been listed at least once: before that, the view knows nothing."""
        return all(name in self._synced and self._synced[name].is_set() for name in names)

    def cluster_objects(self, name: str) -> tuple[int, list[Any]]:
        """(version, every object held) of a cluster-scoped kind; the version changes with them."""
        with self._lock:
            store = self._stores[name]
            return store.version, store.in_group("")

    def dra_version(self) -> tuple[int, ...] | None:
        """Changes whenever a DeviceClass or ResourceSlice does; None until both are listed (() on a
        view that watches none: then they are read again for every pod)."""
        if not self._dra_lists:
            return ()
        if not self.has_synced(*DRA_KINDS):
            return None
        with self._lock:
            return tuple(self._stores[name].version for name in DRA_KINDS)

    @property
    def nodes_version(self) -> int:
        """Changes whenever a node change the decisions would see arrives (not on heartbeats)."""
        return self._stores["nodes"].version

    def pods_read_through(self) -> int:
        """The resourceVersion the pods list and watch have been applied up to (0: not known): every
        pod created at or before it is in this view, unless it is gone."""
        return self._read_through.get("pods", 0)

    def pod_first_seen(self, namespace: str, uid: str) -> int | None:
        """The resourceVersion at which this view first held the pod, or None."""
        with self._lock:
            record = self._stores["pods"].groups.get(namespace, {}).get(uid)
        return record.get(FIRST_SEEN) if record else None

    def pod_gone(self, namespace: str, uid: str) -> bool:
        """Whether this view saw the pod deleted, or holds it finished: it uses no quota any more.
        Asked for every reservation a decision reads (hundreds a group commit), so without the lock:
        each read below is one dict lookup, atomic under the GIL; the watch loop swaps or updates the
        dicts but never changes a record once held, and a pod deleted or finished stays so."""
        if uid in self._gone.get(namespace, ()):
            return True
        record = self._stores["pods"].groups.get(namespace, {}).get(uid)
        return record is not None and record["status"]["phase"] in TERMINAL

    def _note_gone(self, namespace: str, uids: Iterable[str]) -> None:
        """Under the lock: these pods of the namespace were deleted."""
        gone = self._gone.setdefault(namespace, {})
        gone.update(dict.fromkeys(uids))
        if len(gone) > GONE_KEPT:
            self._gone[namespace] = dict.fromkeys(list(gone)[len(gone) - GONE_KEPT // 2 :])

    def pods_version(self, namespace: str) -> int:
        """Changes whenever a GPU pod of the namespace is added, changed or removed."""
        with self._lock:
            return self._stores["pods"].group_versions.get(namespace, 0)

    def pods_in(self, namespace: str) -> list[dict[str, Any]]:
        with self._lock:
            pods = self._stores["pods"].in_group(namespace)
        return [p for p in pods if p["status"]["phase"] not in TERMINAL]

    def pods_changed_since(self, namespace: str, version: int) -> tuple[int, dict[str, Any]] | None:
        """(the namespace's pods version now, each pod added, changed or removed after `version` by
        UID, as pods_in would hold it now: None where gone or finished), read at one moment; None
        when this view does not remember that far back: then read them all (pods_in)."""
        with self._lock:
            store = self._stores["pods"]
            changed = store.changed_since(namespace, version)
            if changed is None:
                return None
            group = store.groups.get(namespace, {})
            held = {uid: group.get(uid) for uid in changed}
            now = store.group_versions.get(namespace, 0)
        return now, {
            uid: p if p is not None and p["status"]["phase"] not in TERMINAL else None
            for uid, p in held.items()
        }

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

    def budget_namespaces(
        self, has_gpu_quota: Callable[[Quota], bool], has_gpu_limit: Callable[[Any], bool]
    ) -> set[str]:
        """The namespaces with a GPU budget to protect: a GPU quota, a LimitRange on a GPU resource, or
        gpuport's own limits annotation (set by whoever may edit the namespace, never by a pod)."""
        with self._lock:
            quotas = {ns: list(q.values()) for ns, q in self._stores["resourcequotas"].groups.items()}
            ranges = {ns: list(r.values()) for ns, r in self._stores["limitranges"].groups.items()}
            namespaces = dict(self._stores["namespaces"].groups.get("", {}))
        found = {ns for ns, held in quotas.items() if any(has_gpu_quota(q) for q in held)}
        found |= {ns for ns, held in ranges.items() if any(has_gpu_limit(r) for r in held)}
        found |= {ns for ns, held in namespaces.items() if LIMITS_ANNOTATION in held.get("annotations", {})}
        return found

    def inventory(self):
        """The nodes as an Inventory (labels, allocatable, taints, node-agent capability), or None."""
        from webhook.core.vocabulary.inventory import InventoryError, parse_inventory

        with self._lock:
            nodes = self._stores["nodes"].in_group("")
        try:
            inventory = parse_inventory(nodes) if nodes else None
        except InventoryError as exc:
            log.warning("node inventory not usable: %s", exc)
            return None
        for problem in inventory.problems if inventory is not None else ():
            log.warning("%s: that node is read without its record", problem)
        return inventory

    # -- the watch loops ------------------------------------------------------------------------
    def apply(self, name: str, kind: str, obj: dict[str, Any] | None = None, items=()) -> None:
        """One list result (kind RELIST) or watch event for the named resource kind."""
        store = self._stores[name]
        if kind == "RELIST":
            groups = store.compact(items)  # outside the lock, page by page; only the swap holds it
            # Pods deleted while the watch was down are gone all the same. Only this kind's watch loop
            # changes its store, so what the list drops is worked out before the lock too (thousands of
            # pods: milliseconds the admission path's reads would wait).
            gone = (
                {
                    namespace: held.keys() - groups.get(namespace, {}).keys()
                    for namespace, held in store.groups.items()
                }
                if name == "pods"
                else {}
            )
            with self._lock:
                for namespace, uids in gone.items():
                    self._note_gone(namespace, uids)
                store.replace(groups)
            return
        if obj is None:
            raise ValueError(f"a {kind} event carries an object")
        with self._lock:
            store.apply(kind, obj)
            if name == "pods" and kind == "DELETED":
                metadata = obj.get("metadata") or {}
                self._note_gone(metadata.get("namespace") or "", [str(metadata.get("uid"))])

    def start(self) -> None:
        lists = {
            "pods": self.core.list_pod_for_all_namespaces,
            "resourcequotas": self.core.list_resource_quota_for_all_namespaces,
            "namespaces": self.core.list_namespace,
            "limitranges": self.core.list_limit_range_for_all_namespaces,
            "nodes": self.core.list_node,
            **self._dra_lists,
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
        version: str | None = None
        while not self._stop.is_set():
            try:
                if version is None:
                    listing = _Listing(list_fn)
                    self.apply(name, "RELIST", items=listing.items())
                    self._synced[name].set()
                    version = listing.version
                    self._note_read_through(name, version)
                    backoff = 0.5
                stream = watch.Watch().stream(
                    list_fn,
                    resource_version=version,
                    timeout_seconds=WATCH_SECONDS,
                    allow_watch_bookmarks=True,
                    deserialize=False,
                    _request_timeout=(LIST_TIMEOUT[0], WATCH_SECONDS + 30),
                )
                for event in stream:
                    # Both verbs answered (a list alone may be granted without the watch): the
                    # capability is back, said once; while it holds, this costs a lookup per event.
                    self.capabilities.available(f"list and watch {name}")
                    obj = event["object"]
                    version = (obj.get("metadata") or {}).get("resourceVersion", version)
                    if event["type"] != "BOOKMARK":
                        self.apply(name, event["type"], obj)
                    self._note_read_through(name, version)
                self.capabilities.available(f"list and watch {name}")
                backoff = 0.5
                continue  # the server ended the watch on time: resume from where it stood
            except KeyError as exc:
                # kubernetes' Watch with deserialize=False reads an ERROR event (410 Gone: the version is
                # too old) under a key raw JSON does not have; either way the answer is to list again.
                log.info("%s watch ended with an error event (%s): listing again", name, exc)
                version = None
            except ApiException as exc:
                if exc.status == 410:
                    log.info("%s watch expired (410 Gone): listing again", name)
                    version = None
                    continue
                if is_refusal(exc):
                    self.capabilities.missing(f"list and watch {name}", reason_of(exc))
                else:
                    log.warning(
                        "%s watch failed (%s %s); retrying in %.1fs", name, exc.status, exc.reason, backoff
                    )
            except Exception as exc:  # a broken stream or an unreachable API server
                log.warning("%s watch broke (%s); resuming in %.1fs", name, exc, backoff)
            self._stop.wait(backoff)
            backoff = min(backoff * 2, self.backoff_max)

    def _note_read_through(self, name: str, version: str | None) -> None:
        number = as_version(version)
        if number is not None:
            self._read_through[name] = max(number, self._read_through.get(name, 0))


class _Listing:
    """A list in pages of PAGE_SIZE, as raw JSON (not the client's typed models, which cost seconds
    and memory for every pod of a large cluster); `version` is the list's resourceVersion once all
    pages are read."""

    def __init__(self, list_fn: Callable):
        self.list_fn = list_fn
        self.version = ""

    def items(self) -> Iterator[dict[str, Any]]:
        token = None
        while True:
            page = json.loads(
                self.list_fn(
                    limit=PAGE_SIZE,
                    _continue=token,
                    _preload_content=False,
                    _request_timeout=LIST_TIMEOUT,
                ).data
            )
            yield from page.get("items") or []
            metadata = page.get("metadata") or {}
            token = metadata.get("continue")
            if not token:
                self.version = metadata["resourceVersion"]
                return
