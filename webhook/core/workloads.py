"""Where the pod spec lives in each kind gpuport looks at, and how to walk its containers."""

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

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


@dataclass(frozen=True)
class ContainerRef:
    """One container of a pod spec, with the field path the API server would print for it."""

    list_name: str
    index: int
    name: str
    spec: Mapping[str, Any]
    spec_path: str

    @property
    def label(self) -> str:
        return f'{self.list_name}[{self.index}] "{self.name}"'

    @property
    def field(self) -> str:
        return f"{self.spec_path}.{self.list_name}[{self.index}]"


def pod_spec_path(group: str, kind: str) -> tuple[str, ...] | None:
    return POD_SPEC_PATHS.get((group, kind))


def find_pod_spec(obj: Mapping[str, Any], path: tuple[str, ...]) -> Mapping[str, Any] | None:
    node: Any = obj
    for key in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node if isinstance(node, Mapping) else None


def containers(pod_spec: Mapping[str, Any], spec_path: tuple[str, ...]) -> Iterator[ContainerRef]:
    dotted = ".".join(spec_path)
    for list_name in CONTAINER_LISTS:
        items = pod_spec.get(list_name)
        if not isinstance(items, list):
            continue
        for index, container in enumerate(items):
            if isinstance(container, Mapping):
                name = container.get("name")
                yield ContainerRef(
                    list_name, index, name if isinstance(name, str) else "?", container, dotted
                )


def resource_section(container: Mapping[str, Any], section: str) -> Mapping[str, Any]:
    resources = container.get("resources")
    if not isinstance(resources, Mapping):
        return {}
    values = resources.get(section)
    return values if isinstance(values, Mapping) else {}
