"""Where the pod spec lives in each kind gpuport looks at, and how to walk its containers."""

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeGuard, TypeVar

# (API group, kind) → path from the object root to its pod spec.
POD_SPEC_PATHS: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "Pod"): ("spec",),
    ("apps", "Deployment"): ("spec", "template", "spec"),
    ("apps", "StatefulSet"): ("spec", "template", "spec"),
    ("apps", "DaemonSet"): ("spec", "template", "spec"),
    ("apps", "ReplicaSet"): ("spec", "template", "spec"),
    ("batch", "Job"): ("spec", "template", "spec"),
    ("batch", "CronJob"): ("spec", "jobTemplate", "spec", "template", "spec"),
}

CONTAINER_LISTS = ("initContainers", "containers")
# gpuport's record, on a pod it translated, of what the pod asked for before (written by the translation).
TRANSLATED_FROM = "gpuport.io/translated-from"
REQUIRED_NODE_AFFINITY = ("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")


# Not frozen: a frozen dataclass sets each field through object.__setattr__, four times the cost,
# and a decision builds several of these per container; nothing keeps them past the walk.
@dataclass(slots=True)
class ContainerRef:
    """One container of a pod spec, with the field path the API server would print for it."""

    list_name: str
    index: int
    name: str
    spec: Mapping[str, Any]
    spec_path: str
    # Its resources sections, read with it ({} when absent or not maps): every step reads them.
    limits: Mapping[str, Any]
    requests: Mapping[str, Any]

    @property
    def label(self) -> str:
        return f'{self.list_name}[{self.index}] "{self.name}"'

    @property
    def field(self) -> str:
        return f"{self.spec_path}.{self.list_name}[{self.index}]"

    @property
    def sidecar(self) -> bool:
        return is_sidecar(self.list_name, self.spec)

    @property
    def runs_beside_apps(self) -> bool:
        """An app container or a sidecar: it holds what it asks for while the app containers run."""
        return self.list_name == "containers" or self.sidecar


def is_sidecar(list_name: str, container: Mapping[str, Any]) -> bool:
    """A restartable init container (restartPolicy: Always, KEP-753): it starts in the init order and
    keeps running beside the app containers."""
    return list_name == "initContainers" and container.get("restartPolicy") == "Always"


class ContainerPlace(Protocol):
    """Where a container stands in the pod's start order: what `held_at_once` needs of each part."""

    @property
    def list_name(self) -> str: ...
    @property
    def index(self) -> int: ...
    @property
    def sidecar(self) -> bool: ...


class Amount(Protocol):
    def __add__(self, other: Any, /) -> Any: ...


A = TypeVar("A", bound=Amount)


def held_at_once(parts: Iterable[tuple[ContainerPlace, A]], zero: A, larger: Callable[[A, A], A]) -> A:
    """The most a pod holds at one time, as the scheduler and the kubelet count requests: init
    containers run one at a time in their order, each beside the sidecars started before it; then the
    app containers run beside every sidecar. So the pod holds the larger of (each plain init container
    plus the sidecars before it) and (the app containers plus all sidecars), never the sum of all.
    `larger` is taken apart so an amount of two measures (GPUs and their memory) takes the larger of each."""
    apps = zero
    inits: list[tuple[int, bool, A]] | None = None  # most pods have none: nothing to sort
    for place, amount in parts:
        if place.list_name == "containers":
            apps = apps + amount
        elif inits is None:
            inits = [(place.index, place.sidecar, amount)]
        else:
            inits.append((place.index, place.sidecar, amount))
    if inits is None:
        return apps
    sidecars, peak = zero, zero
    for _, sidecar, amount in sorted(inits, key=_first):
        if sidecar:
            sidecars = sidecars + amount
        else:
            peak = larger(peak, sidecars + amount)
    return larger(peak, apps + sidecars)


def _first(item: tuple[int, bool, Any]) -> int:
    return item[0]


def is_map(value: object) -> TypeGuard[Mapping[str, Any]]:
    """Mapping check for the hot walks: parsed JSON and YAML give dicts, for which this is one type
    comparison instead of the ABC machinery, and absent fields give None, which never reaches it
    either; any other Mapping still counts."""
    return type(value) is dict or (value is not None and isinstance(value, Mapping))


# The three walks below run on every container of every review: they test for a dict inline, as
# is_map does, without the call.


def mapping_at(obj: Mapping[str, Any], path: tuple[str, ...]) -> Mapping[str, Any] | None:
    node: Any = obj
    for key in path:
        if type(node) is not dict and (node is None or not isinstance(node, Mapping)):
            return None
        node = node.get(key)
    return node if type(node) is dict or (node is not None and isinstance(node, Mapping)) else None


def containers(
    pod_spec: Mapping[str, Any],
    spec_path: tuple[str, ...] = ("spec",),
    lists: tuple[str, ...] = CONTAINER_LISTS,
) -> list[ContainerRef]:
    """Every container of the pod spec, init containers first. A list, not a generator: every
    review walks them all, and a pod has a handful."""
    dotted = ".".join(spec_path)
    found = []
    for list_name in lists:
        items = pod_spec.get(list_name)
        if not isinstance(items, list):
            continue
        for index, container in enumerate(items):
            if type(container) is dict or isinstance(container, Mapping):
                name = container.get("name")
                found.append(
                    ContainerRef(
                        list_name,
                        index,
                        name if isinstance(name, str) else "?",
                        container,
                        dotted,
                        resource_section(container, "limits"),
                        resource_section(container, "requests"),
                    )
                )
    return found


@dataclass(slots=True)
class PodRead:
    """A pod (or pod template) read once for every step of a decision: the checks, the asks, the
    claims and the translation all walk these containers instead of the raw spec again."""

    pod: Mapping[str, Any]
    spec: Mapping[str, Any]  # {} when absent or not a map
    # Init containers first, each list in its order; the list containers() made, never changed
    # after (copying it to a tuple cost /validate 0.3 of its 6 µs).
    containers: Sequence[ContainerRef]
    # Worked out when first asked (a pod the checks refuse never needs them); slots, so a property
    # and not functools.cached_property, which needs an instance __dict__.
    _annotations: Mapping[str, Any] | None = None
    _names: frozenset[str] | None = None

    @property
    def annotations(self) -> Mapping[str, Any]:
        if self._annotations is None:
            metadata = self.pod.get("metadata")
            found = metadata.get("annotations") if is_map(metadata) else None
            self._annotations = found if is_map(found) else {}
        return self._annotations

    @property
    def labels(self) -> Mapping[str, Any]:
        """Read each time asked, not kept: two lookups, and few steps read labels."""
        metadata = self.pod.get("metadata")
        found = metadata.get("labels") if is_map(metadata) else None
        return found if is_map(found) else {}

    @property
    def resource_names(self) -> frozenset[str]:
        """Every name the containers' limits and requests write."""
        if self._names is None:
            names: set[str] = set()
            for ref in self.containers:
                names.update(ref.limits)
                names.update(ref.requests)
            self._names = frozenset(names)
        return self._names


def read_pod(pod: Mapping[str, Any]) -> PodRead:
    spec = pod.get("spec")
    spec = spec if is_map(spec) else {}
    return PodRead(pod, spec, containers(spec))


def read_at(obj: Mapping[str, Any], spec_path: tuple[str, ...]) -> PodRead | None:
    """The pod spec at `spec_path` in an object (POD_SPEC_PATHS: a Pod's own, a Deployment's
    template's), read with the map that holds it (the Pod, the template: its metadata is the pods');
    None where no map stands there. Its containers' fields are named from the object's root."""
    holder = mapping_at(obj, spec_path[:-1])
    if holder is None:
        return None
    spec = holder.get(spec_path[-1])
    return PodRead(holder, spec, containers(spec, spec_path)) if is_map(spec) else None


def container_specs(
    pod_spec: Mapping[str, Any], lists: tuple[str, ...] = CONTAINER_LISTS
) -> Iterator[Mapping[str, Any]]:
    """Each container map of the pod spec, for walks that read only its fields: no ContainerRef (name
    and path) is built, which `containers` spends on every container for its messages."""
    for list_name in lists:
        items = pod_spec.get(list_name)
        if isinstance(items, list):
            for container in items:
                if type(container) is dict or isinstance(container, Mapping):
                    yield container


def resource_names_in(pod_spec: Mapping[str, Any]) -> frozenset[str]:
    """Every resource name the containers' limits and requests write (PodRead.resource_names, for a
    spec not read as a pod: a translated one)."""
    names: set[str] = set()
    for container in container_specs(pod_spec):
        names.update(resource_section(container, "limits"), resource_section(container, "requests"))
    return frozenset(names)


def resource_section(container: Mapping[str, Any], section: str) -> Mapping[str, Any]:
    resources = container.get("resources")
    if type(resources) is not dict and (resources is None or not isinstance(resources, Mapping)):
        return {}
    values = resources.get(section)
    return values if type(values) is dict or (values is not None and isinstance(values, Mapping)) else {}


def resource_entries(
    pod_spec: Mapping[str, Any], section: str, lists: tuple[str, ...] = CONTAINER_LISTS
) -> Iterator[tuple[ContainerRef, str, Any]]:
    """(container, resource name, amount as written) for each entry of one resources section."""
    for container in containers(pod_spec, lists=lists):
        for name, amount in (container.limits if section == "limits" else container.requests).items():
            yield container, str(name), amount


def requested(container: Mapping[str, Any], name: str) -> Any:
    """What a container requests of one resource: its request, else its limit (the API server
    defaults a missing request to the limit); None when it names the resource in neither."""
    requests = resource_section(container, "requests")
    return requests[name] if name in requests else resource_section(container, "limits").get(name)


def required_terms(pod_spec: Mapping[str, Any]) -> list[Any] | None:
    """The pod's required node-affinity terms (ORed), as the list in the spec so edits land there;
    None when it has none."""
    required = mapping_at(
        pod_spec, ("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
    )
    terms = required.get("nodeSelectorTerms") if required is not None else None
    return terms if isinstance(terms, list) else None
