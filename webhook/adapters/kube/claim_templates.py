"""The DRA objects gpuport needs on a cluster: ResourceClaimTemplates created for the pods it
translates; templates, claims and device classes read for the pods whose claims it counts or
translates back; ResourceSlices counted for `allocationMode: All`; and the newest resource.k8s.io
version the API server serves.

Creating: before the API server stores a translated pod (a pod whose template is missing never gets
its claim). Templates gpuport writes are content-addressed (webhook.core.rewriting.dra), so creating one that
exists is success, and one made by this process a moment ago needs no second call. A template of
that name with other content (made by hand) is refused, never overwritten.

Reading: everything a pod's claims need is fetched before the core decides (the core stays pure: it
gets a lookup of what was read), each object once and remembered for a minute (a template's spec
cannot change, but it may be deleted and made again; device classes and slices change rarely). What
cannot be read is reported as unread, never guessed: quota then refuses the pod rather than count it
as nothing.

Why one module of ~350 lines: every read shares one minute-long memory and one deadline, and what a
pod needs (its templates, then the classes they name, then the slices All counts) is read in order.
"""

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from webhook.adapters.kube.objects import says_all_written
from webhook.core.asks.claims import (
    CLASS_RESOURCE_PREFIX,
    DEVICES_PER_NODE,
    EXTENDED_RESOURCES,
    STANDALONE,
    class_key,
    devices_key,
)
from webhook.core.asks.pod_claims import TemplateLookup, claim_sources
from webhook.core.vocabulary import dra_api

log = logging.getLogger("gpuport.dra")

TEMPLATES = "resourceclaimtemplates"
CLAIMS = "resourceclaims"  # made ahead, named by a pod's resourceClaimName: read only
CLASSES = "deviceclasses"
SLICES = "resourceslices"
EVERY_CLASS = "DeviceClasses"  # the key the whole list of device classes is remembered under
KEPT = 4096  # (namespace, name) pairs remembered
FOR_SECONDS = 60.0  # then checked again: someone may have deleted one
TIMEOUT = (2, 3)  # connect, read: well inside the webhook's own deadline
ABSENT = object()  # remembered: there is no such template


class ClaimTemplateStore:
    def __init__(
        self,
        api_client: Any,
        api_version: str,
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
        """What the pod's claims need, read now: the templates and claims they name, the device
        classes those ask for that no map names, and for `allocationMode: All` the most devices a
        node publishes. A lookup the pure core can call."""
        found: dict[str, Mapping[str, Any]] = {}
        for source in claim_sources(pod):  # a running pod's claims are read as the cluster made them
            if source.key in found:
                continue
            if source.key.startswith(STANDALONE):
                claim = self._read(namespace, source.key.removeprefix(STANDALONE), CLAIMS)
                if claim is not None:  # in a template's shape, as the core reads it
                    found[source.key] = {"spec": {"spec": claim.get("spec") or {}}}
            else:
                template = self._read(namespace, source.key, TEMPLATES)
                if template is not None:
                    found[source.key] = template
        # The cluster's device classes (listed once a minute): those the claims ask for, and those that
        # stand for an extended resource the pod's containers may ask for (KEP-5004).
        listed = {
            c["metadata"]["name"]: c
            for c in self.device_classes()
            if isinstance(c.get("metadata"), Mapping) and isinstance(c["metadata"].get("name"), str)
        }
        classes, every_device = _asked_for(found.values())
        for name in classes:
            device_class = listed.get(name) or self._read("", name, CLASSES)
            if device_class is not None:
                found[class_key(name)] = device_class
        standing = {
            spec["extendedResourceName"]: name
            for name, c in listed.items()
            if isinstance(spec := c.get("spec"), Mapping)
            and isinstance(spec.get("extendedResourceName"), str)
        }
        found[EXTENDED_RESOURCES] = {"resources": standing}
        for name in {*standing.values(), *_class_resources(pod)}:
            if name in listed:
                found[class_key(name)] = listed[name]
        if every_device:
            found.update(self._devices_per_node())
        return found.get

    def device_classes(self) -> tuple[Mapping[str, Any], ...]:
        """Every DeviceClass of the cluster, listed at most once a minute; () when unreadable."""
        remembered = self._recall("", EVERY_CLASS)
        if remembered is not None:
            return tuple(remembered)
        group, version = dra_api.group_and_version(self.api_version)
        try:
            listed: Any = self.api.list_cluster_custom_object(
                group, version, CLASSES, _request_timeout=TIMEOUT
            )
        except Exception as exc:  # unreachable, forbidden, not served: no class is known
            log.warning("device classes not listed: %s", getattr(exc, "reason", type(exc).__name__))
            return ()
        items = tuple(i for i in (listed or {}).get("items") or () if isinstance(i, Mapping))
        self._remember("", EVERY_CLASS, items)
        return items

    def _devices_per_node(self) -> dict[str, Mapping[str, Any]]:
        """{devices_key(driver, type): {"count": n}}: the most devices of each driver (and type, "" for
        any) one node publishes, from every ResourceSlice (listed in pages, once a minute)."""
        remembered = self._recall("", DEVICES_PER_NODE)
        if remembered is not None:
            return dict(remembered)
        group, version = dra_api.group_and_version(self.api_version)
        counts = _DeviceCounts()
        token = None
        try:
            while True:
                page: Any = self.api.list_cluster_custom_object(
                    group, version, SLICES, limit=500, _continue=token, _request_timeout=TIMEOUT
                )
                for item in page.get("items") or ():
                    counts.add(item)
                token = (page.get("metadata") or {}).get("continue")
                if not token:
                    break
        except Exception as exc:  # unread: allocationMode All stays uncountable, and is refused
            log.warning("resource slices not listed: %s", getattr(exc, "reason", type(exc).__name__))
            return {}
        most = counts.most()
        self._remember("", DEVICES_PER_NODE, most)
        return most

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
        key = {TEMPLATES: name, CLAIMS: STANDALONE + name, CLASSES: class_key(name)}[plural]
        remembered = self._recall(namespace, key)
        if remembered is not None:
            return None if remembered is ABSENT else remembered
        from kubernetes.client.exceptions import ApiException

        group, version = dra_api.group_and_version(self.api_version)
        try:
            if plural == CLASSES:
                found = self.api.get_cluster_custom_object(
                    group, version, plural, name, _request_timeout=TIMEOUT
                )
            else:
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

        group, version = dra_api.group_and_version(template["apiVersion"])
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
        if not isinstance(found, Mapping) or not says_all_written(found.get("spec"), template["spec"]):
            return f"{where} exists with content gpuport did not write; delete it or rename it"
        return None


def _class_resources(pod: Mapping[str, Any]) -> set[str]:
    """The device classes a pod's containers name as deviceclass.resource.kubernetes.io/<class>."""
    spec = pod.get("spec")
    found = set()
    for key in ("initContainers", "containers"):
        for container in (spec.get(key) if isinstance(spec, Mapping) else None) or ():
            resources = container.get("resources") if isinstance(container, Mapping) else None
            for section in ("limits", "requests"):
                names = resources.get(section) if isinstance(resources, Mapping) else None
                found |= {
                    n.removeprefix(CLASS_RESOURCE_PREFIX)
                    for n in (names if isinstance(names, Mapping) else ())
                    if isinstance(n, str) and n.startswith(CLASS_RESOURCE_PREFIX)
                }
    return found


def _asked_for(objects: Any) -> tuple[set[str], bool]:
    """The device classes a set of claim specs ask for, and whether any request takes every device of
    a node (allocationMode: All), wherever the API version nests them (exactly, firstAvailable)."""
    classes: set[str] = set()
    every = False

    def walk(value: Any) -> None:
        nonlocal every
        if isinstance(value, Mapping):
            if isinstance(value.get("deviceClassName"), str):
                classes.add(value["deviceClassName"])
            every = every or value.get("allocationMode") == "All"
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for found in objects:
        walk(found.get("spec"))
    return classes, every


class _DeviceCounts:
    """How many devices of each driver (and type) one node can be given: its own slices' devices plus
    those of every slice not bound to one node (allNodes, a node selector), which any node may reach."""

    def __init__(self) -> None:
        self.per_node: dict[tuple[str, str, str], int] = {}
        self.everywhere: dict[tuple[str, str], int] = {}

    def add(self, resource_slice: Any) -> None:
        spec = resource_slice.get("spec") if isinstance(resource_slice, Mapping) else None
        if not isinstance(spec, Mapping):
            return
        driver = str(spec.get("driver", ""))
        node = spec.get("nodeName")
        for device in spec.get("devices") or ():
            if not isinstance(device, Mapping):
                continue
            attributes = dra_api.device_attributes(device)
            kind = attributes.get("type")
            device_type = str(kind.get("string", "")) if isinstance(kind, Mapping) else ""
            for key in {(driver, device_type), (driver, "")}:
                if isinstance(node, str) and node:
                    self.per_node[(*key, node)] = self.per_node.get((*key, node), 0) + 1
                else:
                    self.everywhere[key] = self.everywhere.get(key, 0) + 1

    def most(self) -> dict[str, Mapping[str, Any]]:
        """{devices_key(driver, type): {"count": n}}: the most devices of each one node can be given."""
        best: dict[tuple[str, str], int] = dict(self.everywhere)
        for (driver, device_type, _), count in self.per_node.items():
            key = (driver, device_type)
            best[key] = max(best.get(key, 0), count + self.everywhere.get(key, 0))
        return {devices_key(*key): {"count": count} for key, count in best.items()}


def newest_served(apis_api: Any) -> str | None:
    """The newest resource.k8s.io version the API server serves (discovery), or None when it serves
    none gpuport writes or cannot be asked."""
    try:
        groups = apis_api.get_api_versions(_request_timeout=TIMEOUT).groups or []
    except Exception as exc:
        log.warning("resource.k8s.io versions not discovered: %s", getattr(exc, "reason", type(exc).__name__))
        return None
    served = {v.group_version for g in groups if g.name == dra_api.GROUP for v in g.versions or []}
    return dra_api.newest_of(served)
