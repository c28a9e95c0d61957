"""The DRA objects gpuport needs on a cluster: ResourceClaimTemplates created for the pods it
translates; templates, claims and device classes read for the pods whose claims it counts or
translates back; ResourceSlices counted for `allocationMode: All`; and the newest resource.k8s.io
version the API server serves.

Creating: before the API server stores a translated pod (a pod whose template is missing never gets
its claim). Templates gpuport writes are content-addressed (webhook.core.rewriting.dra), so creating one that
exists is success, and one made by this process a moment ago needs no second call. A template of
that name with other content (made by hand) is refused, never overwritten.

Reading: everything a pod's claims need is fetched before the core decides (the core stays pure: it
gets a lookup of what was read). Nothing read decides a budget from memory: a template's spec cannot
change, but its owner may delete it and make it again under the same name, so templates and claims are
read again for every pod; device classes and slices come from the watch-fed view (ClusterView with its
DRA kinds) once it has listed them, else are listed again. What cannot be read is reported as unread,
never guessed: quota then refuses the pod rather than count it as nothing.

Why one module of ~350 lines: every read shares one deadline, and what a pod needs (its templates,
then the classes they name, then the slices All counts) is read in order.
"""

import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from webhook.adapters.kube.capabilities import Capabilities, is_refusal, reason_of
from webhook.adapters.kube.charge_freeze import BUDGET_STORES, has_gpu_budget
from webhook.adapters.kube.objects import says_all_written
from webhook.core.asks.charged_templates import remade_reason
from webhook.core.asks.claims import (
    CLASS_RESOURCE_PREFIX,
    EXTENDED_RESOURCES,
    STANDALONE,
    class_key,
    devices_key,
    standing_classes,
)
from webhook.core.asks.pod_claims import TemplateLookup, claim_sources
from webhook.core.vocabulary import dra_api

log = logging.getLogger("gpuport.dra")

TEMPLATES = "resourceclaimtemplates"
CLAIMS = "resourceclaims"  # made ahead, named by a pod's resourceClaimName: read only
CLASSES = "deviceclasses"
SLICES = "resourceslices"
KEPT = 4096  # (namespace, name) pairs of templates made remembered
FOR_SECONDS = 60.0  # then created again: someone may have deleted one
# A template read this long ago is the one a review records the uid of (mutate reads a pod's templates
# as it decides; a remembered decision reads none): later, it is read again.
SAME_READ = 1.0
TIMEOUT = (2, 3)  # connect, read: well inside the webhook's own deadline


class ClaimTemplateStore:
    def __init__(
        self,
        api_client: Any,
        api_version: str,
        clock: Callable[[], float] = time.monotonic,
        view: Any = None,
        served: bool = True,
        capabilities: Capabilities | None = None,
    ):
        from kubernetes import client

        self.api = client.CustomObjectsApi(api_client)
        self.api_version = api_version  # what referenced() reads templates as
        self.clock = clock
        # A watch-fed view of the cluster's DeviceClasses and ResourceSlices (ClusterView with its DRA
        # kinds), or None: then they are listed again for every pod that needs them.
        self.view = view
        self.served = served  # False: the API server serves no resource.k8s.io, so there are no classes
        # What the RBAC or the cluster refuses (no DRA rules granted): said once, tried on a back-off.
        self.capabilities = capabilities or Capabilities(clock)
        # Only the templates `ensure` made or found with its content: a create saved, never a budget
        # read (a pod's claims are read again each time: a template may be deleted and made anew).
        self._known: OrderedDict[tuple[str, str], float] = OrderedDict()
        self._lock = threading.Lock()
        # The templates read lately, by (namespace, name), with when: a budget charges one by the uid its
        # pod recorded (a uid's spec cannot change), so a copy of that uid is as good as a read.
        self._seen: OrderedDict[tuple[str, str], tuple[Mapping[str, Any], float]] = OrderedDict()
        self._counted: tuple[int, dict[str, Mapping[str, Any]]] | None = None  # slices, by view version

    def ensure(self, namespace: str, templates: Sequence[Mapping[str, Any]]) -> str | None:
        """None when every template exists in `namespace` with this content; else why not."""
        for template in templates:
            name = template["metadata"]["name"]
            if self._made_lately(namespace, name):
                continue  # made (or seen) within the minute
            problem = self._create(namespace, template)
            if problem:
                return problem
            self._remember(namespace, name)
        return None

    def referenced(
        self, namespace: str, pod: Mapping[str, Any], uids: Mapping[str, str] | None = None
    ) -> TemplateLookup:
        """What the pod's claims need, read now: the templates and claims they name, the device
        classes those ask for that no map names, and for `allocationMode: All` the most devices a
        node publishes. A lookup the pure core can call. `uids`: the template uids the pod was charged
        by (webhook.core.asks.charged_templates): each such template is the one of that uid, from
        memory where it was read before (its spec cannot change), else read and kept only if its uid
        is that one; another uid is said as the reason it cannot be counted."""
        found: dict[str, Mapping[str, Any]] = {}
        for source in claim_sources(pod):  # a running pod's claims are read as the cluster made them
            if source.key in found:
                continue
            if source.key.startswith(STANDALONE):
                claim = self._read(namespace, source.key.removeprefix(STANDALONE), CLAIMS)
                if claim is not None:  # in a template's shape, as the core reads it
                    found[source.key] = {"spec": {"spec": claim.get("spec") or {}}}
            elif uids and source.key in uids:
                template = self._with_uid(namespace, source.key, uids[source.key])
                if template is not None:
                    found[source.key] = template
            else:
                template = self._read(namespace, source.key, TEMPLATES)
                if template is not None:
                    found[source.key] = template
        # The cluster's device classes: those the claims ask for, and those that stand for an extended
        # resource the pod's containers may ask for (KEP-5004).
        every_class = self._device_classes()
        listed = {
            c["metadata"]["name"]: c
            for c in every_class or ()
            if isinstance(c.get("metadata"), Mapping) and isinstance(c["metadata"].get("name"), str)
        }
        classes, every_device = _asked_for(found.values())
        for name in classes:
            device_class = listed.get(name) if every_class is not None else self._read("", name, CLASSES)
            if device_class is not None:
                found[class_key(name)] = device_class
        standing = standing_classes(listed.values())
        found[EXTENDED_RESOURCES] = (
            {"resources": standing}
            if every_class is not None
            else {"resources": {}, "unread": "gpuport could not list the cluster's DeviceClasses"}
        )
        for name in {*standing.values(), *_class_resources(pod)}:
            if name in listed:
                found[class_key(name)] = listed[name]
            elif every_class is None and (device_class := self._read("", name, CLASSES)) is not None:
                found[class_key(name)] = device_class
        if every_device:
            found.update(self._devices_per_node())
        return found.get

    def charged_uids(self, namespace: str, names: Sequence[str], context: Any) -> dict[str, str]:
        """Where the namespace has a GPU budget (or the view cannot say yet), the uid of each template
        as this process read it within SAME_READ seconds (the read of this very review, as a rule),
        else as read now; templates missing or unread are left out. {} where there is no budget."""
        view = self.view
        if (
            view is not None
            and view.has_synced(*BUDGET_STORES)
            and not has_gpu_budget(view, namespace, context)
        ):
            return {}
        now = self.clock()
        found: dict[str, str] = {}
        for name in names:
            with self._lock:
                seen = self._seen.get((namespace, name))
            if seen is None or now - seen[1] > SAME_READ:
                template = self._read(namespace, name, TEMPLATES)
                seen = (template, now) if template is not None else None
            uid = _uid(seen[0]) if seen is not None else ""
            if uid:
                found[name] = uid
        return found

    def _with_uid(self, namespace: str, name: str, uid: str) -> Mapping[str, Any] | None:
        """The template `name` of `uid`: remembered (a uid's spec never changes), else read now; where
        the one of that name now has another uid, why it is not counted; None when unread or missing."""
        with self._lock:
            seen = self._seen.get((namespace, name))
        if seen is not None and _uid(seen[0]) == uid:
            return seen[0]
        template = self._read(namespace, name, TEMPLATES)
        if template is None or _uid(template) == uid:
            return template
        return {"unread": remade_reason(name, uid, _uid(template))}

    def template_as(self, namespace: str, name: str, api_version: str) -> Mapping[str, Any] | None:
        """A ResourceClaimTemplate as the API server holds it now, read in `api_version` (a claim's own:
        both then carry that version's defaults); None when missing or unread."""
        return self._read(namespace, name, TEMPLATES, api_version)

    def device_classes(self) -> tuple[Mapping[str, Any], ...]:
        """Every DeviceClass of the cluster, as now; () when unreadable."""
        return self._device_classes() or ()

    def _device_classes(self) -> tuple[Mapping[str, Any], ...] | None:
        """Every DeviceClass, from the watch-fed view once it has listed them, else listed now; None
        when they cannot be read."""
        if not self.served:
            return ()
        if self.view is not None and self.view.has_synced(CLASSES):
            return tuple(self.view.cluster_objects(CLASSES)[1])
        group, version = dra_api.group_and_version(self.api_version)
        capability = f"list {CLASSES}.{group}"
        if not self.capabilities.due(capability):
            return None  # refused lately: not asked again on every pod or reload until the back-off ends
        try:
            listed: Any = self.api.list_cluster_custom_object(
                group, version, CLASSES, _request_timeout=TIMEOUT
            )
        except Exception as exc:  # unreachable, forbidden, not served: no class is known
            self.capabilities.missing(capability, reason_of(exc))
            return None
        self.capabilities.available(capability)
        return tuple(i for i in (listed or {}).get("items") or () if isinstance(i, Mapping))

    def _devices_per_node(self) -> dict[str, Mapping[str, Any]]:
        """{devices_key(driver, type): {"count": n, "gpus": g}}: the most devices of each driver (and
        type, "" for any) one node publishes, from every ResourceSlice: counted again whenever the
        watch-fed view's slices change, else listed (in pages) for every pod that needs it."""
        if self.view is not None and self.view.has_synced(SLICES):
            version, slices = self.view.cluster_objects(SLICES)
            counted = self._counted
            if counted is not None and counted[0] == version:
                return dict(counted[1])
            counts = _DeviceCounts()
            for item in slices:
                counts.add(item)
            most = counts.most()
            self._counted = (version, most)
            return dict(most)
        group, version_name = dra_api.group_and_version(self.api_version)
        capability = f"list {SLICES}.{group}"
        if not self.capabilities.due(capability):
            return {}
        counts = _DeviceCounts()
        token = None
        try:
            while True:
                page: Any = self.api.list_cluster_custom_object(
                    group, version_name, SLICES, limit=500, _continue=token, _request_timeout=TIMEOUT
                )
                for item in page.get("items") or ():
                    counts.add(item)
                token = (page.get("metadata") or {}).get("continue")
                if not token:
                    break
        except Exception as exc:  # unread: allocationMode All stays uncountable, and is refused
            self.capabilities.missing(capability, reason_of(exc))
            return {}
        self.capabilities.available(capability)
        return counts.most()

    def _keep(self, namespace: str, name: str, template: Mapping[str, Any]) -> None:
        with self._lock:
            self._seen[(namespace, name)] = (template, self.clock())
            self._seen.move_to_end((namespace, name))
            while len(self._seen) > KEPT:
                self._seen.popitem(last=False)

    def _made_lately(self, namespace: str, name: str) -> bool:
        with self._lock:
            made = self._known.get((namespace, name))
        return made is not None and self.clock() - made < FOR_SECONDS

    def _remember(self, namespace: str, name: str) -> None:
        with self._lock:
            self._known[(namespace, name)] = self.clock()
            self._known.move_to_end((namespace, name))
            while len(self._known) > KEPT:
                self._known.popitem(last=False)

    def _read(
        self, namespace: str, name: str, plural: str, api_version: str | None = None
    ) -> Mapping[str, Any] | None:
        """The object as the API server holds it now; None when it is missing or cannot be read."""
        from kubernetes.client.exceptions import ApiException

        group, version = dra_api.group_and_version(api_version or self.api_version)
        # Raw JSON: read for every pod, and the client's own deserializing is a fifth of the call.
        try:
            if plural == CLASSES:
                found = self.api.get_cluster_custom_object(
                    group, version, plural, name, _preload_content=False, _request_timeout=TIMEOUT
                )
            else:
                found = self.api.get_namespaced_custom_object(
                    group, version, namespace, plural, name, _preload_content=False, _request_timeout=TIMEOUT
                )
            found = json.loads(found.data) if hasattr(found, "data") else found
            if plural == TEMPLATES and api_version in (None, self.api_version) and isinstance(found, Mapping):
                self._keep(namespace, name, found)
        except ApiException as exc:
            if is_refusal(exc) and exc.status != 404:  # the RBAC's no holds for every pod: said once
                self.capabilities.missing(f"get {plural}.{group}", reason_of(exc))
            elif exc.status != 404:
                log.warning("%s %s/%s not read: %s %s", plural, namespace, name, exc.status, exc.reason)
            return None
        except Exception as exc:  # unreachable, a timeout, not JSON: unread, and said
            log.warning("%s %s/%s not read: %s", plural, namespace, name, type(exc).__name__)
            return None
        return found if isinstance(found, Mapping) else None

    def _create(self, namespace: str, template: Mapping[str, Any]) -> str | None:
        from kubernetes.client.exceptions import ApiException

        group, version = dra_api.group_and_version(template["apiVersion"])
        name = template["metadata"]["name"]
        where = f"ResourceClaimTemplate {namespace}/{name}"
        try:
            created = self.api.create_namespaced_custom_object(
                group, version, namespace, TEMPLATES, dict(template), _request_timeout=TIMEOUT
            )
            if isinstance(created, Mapping) and template["apiVersion"] == self.api_version:
                self._keep(namespace, name, created)  # its uid: what the pod's annotation records
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


def _uid(template: Mapping[str, Any]) -> str:
    metadata = template.get("metadata")
    uid = metadata.get("uid") if isinstance(metadata, Mapping) else None
    return uid if isinstance(uid, str) else ""


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


# The standard attribute a driver gives every device of one PCI device: the parent GPU of a partition
# (AMD publishes a GPU not in SPX mode only as partitions, each with its parent's bus id).
PARENT = "resource.kubernetes.io/pciBusID"


class _DeviceCounts:
    """How many devices of each driver (and type) one node can be given, and on how many GPUs they are:
    its own slices' devices plus those of every slice not bound to one node (allNodes, a node
    selector), which any node may reach."""

    def __init__(self) -> None:
        self.per_node: dict[tuple[str, str, str], int] = {}
        self.everywhere: dict[tuple[str, str], int] = {}
        # (driver, type, node) → the parents its devices are on; a device of no parent is its own.
        self.parents: dict[tuple[str, str, str], set[object]] = {}

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
            bus = attributes.get(PARENT)
            parent = bus.get("string") if isinstance(bus, Mapping) else None
            for key in {(driver, device_type), (driver, "")}:
                if isinstance(node, str) and node:
                    self.per_node[(*key, node)] = self.per_node.get((*key, node), 0) + 1
                    self.parents.setdefault((*key, node), set()).add(
                        ("bus", parent) if isinstance(parent, str) and parent else object()
                    )
                else:
                    self.everywhere[key] = self.everywhere.get(key, 0) + 1

    def most(self) -> dict[str, Mapping[str, Any]]:
        """{devices_key(driver, type): {"count": n, "gpus": g}}: the most devices of each one node can
        be given, and the most GPUs such devices are on (a slice for every node: each device one)."""
        best: dict[tuple[str, str], int] = dict(self.everywhere)
        gpus: dict[tuple[str, str], Fraction] = {k: Fraction(n) for k, n in self.everywhere.items()}
        for (driver, device_type, node), count in self.per_node.items():
            key = (driver, device_type)
            best[key] = max(best.get(key, 0), count + self.everywhere.get(key, 0))
            on = len(self.parents.get((driver, device_type, node), ())) + self.everywhere.get(key, 0)
            gpus[key] = max(gpus.get(key, Fraction(0)), Fraction(on))
        return {devices_key(*key): {"count": count, "gpus": gpus[key]} for key, count in best.items()}


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
