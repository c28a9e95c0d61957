"""A reference allocator: the judge of the GPU budget's property test (tests/core/test_allocator_model.py).

Deliberately simple, and an upper bound of what Kubernetes' structured allocator could give one pod
on one node, in GPU-equivalents:

- A device matches a request when every selector of its DeviceClass and of the request holds and
  its capacity meets `capacity.requests`. A selector that cannot be evaluated (an attribute the
  device lacks: a CEL runtime error, which fails the real allocation) counts as holding, and so does a
  capacity the device does not publish: the judge may only err upwards.
- Each request is judged alone, as if no other request of the pod took a device (the real allocator
  gives each device to one request): the sum of every request's best is never below the real total.
- ExactCount takes the `count` most valuable matching devices (all of them, where fewer match:
  the real allocator would fail there, which gives less); All takes every matching device;
  firstAvailable takes its best alternative; adminAccess is judged like any other request
  (it ignores other claims' allocations, so it can only reach more devices, never fewer).
- A device is worth its share of its physical GPU: a whole GPU 1, a MIG device its compute slices
  over its model's (the catalogue's numbers), an AMD partition 1/n of its GPU. Slices are generated
  in valid layouts (a GPU's devices never add up to more than it), so no cap per GPU is needed.
- An extended resource a DeviceClass stands for (KEP-5004) is a request of `amount` devices of the
  class the scheduler picks: the newest by creationTimestamp, ties to the first by name, or the class
  a `deviceclass.resource.kubernetes.io/<class>` name names; every container counts, init ones too.

Selectors are small expression trees, rendered to CEL for gpuport and evaluated here by hand, so the
judge never depends on how gpuport (or a CEL library) reads an expression.
"""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

CLASS_RESOURCE_PREFIX = "deviceclass.resource.kubernetes.io/"
PCI_BUS = "resource.kubernetes.io/pciBusID"


class _Error:
    """A CEL runtime error (a missing attribute), carried through && and || as CEL does."""

    def __repr__(self) -> str:
        return "ERROR"


ERROR = _Error()


# Expressions: ("true",) | ("driver", op, value) | ("attr", domain, name, op, value) |
# ("memory_at_least", domain, bytes) | ("and", a, b) | ("or", a, b) | ("not", a)
# op: "==", "!=", "in" (value a tuple), "startsWith".
Expr = tuple[Any, ...]


def render(expr: Expr) -> str:
    """The expression in CEL, as a DeviceClass or a claim writes it."""
    kind = expr[0]
    if kind == "true":
        return "true"
    if kind == "driver":
        return f"device.driver {expr[1]} {_literal(expr[2])}"
    if kind == "attr":
        _, domain, name, op, value = expr
        at = f"device.attributes['{domain}'].{name}"
        if op == "in":
            return f"{at} in [{', '.join(map(_literal, value))}]"
        if op == "startsWith":
            return f"{at}.startsWith({_literal(value)})"
        return f"{at} {op} {_literal(value)}"
    if kind == "memory_at_least":
        return f"device.capacity['{expr[1]}'].memory.compareTo(quantity('{expr[2]}')) >= 0"
    if kind in ("and", "or"):
        joined = " && " if kind == "and" else " || "
        return f"({render(expr[1])}{joined}{render(expr[2])})"
    if kind == "not":
        return f"!({render(expr[1])})"
    raise ValueError(expr)


def _literal(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


@dataclass(frozen=True)
class Device:
    """A published device, with what the judge knows and the API does not say: its worth."""

    name: str
    driver: str
    attributes: Mapping[str, str]  # by qualified name: "<domain>/<name>", or the bare name (driver's)
    memory: int | None  # capacity `memory` in bytes, when published
    worth: Fraction  # its share of its physical GPU

    def attribute(self, domain: str, name: str) -> str | _Error:
        # Unqualified attributes are in the driver's own domain (the API's rule).
        if domain == self.driver and name in self.attributes:
            return self.attributes[name]
        return self.attributes.get(f"{domain}/{name}", ERROR)


def evaluate(expr: Expr, device: Device) -> bool | _Error:
    kind = expr[0]
    if kind == "true":
        return True
    if kind == "driver":
        return (device.driver == expr[2]) == (expr[1] == "==")
    if kind == "attr":
        _, domain, name, op, value = expr
        found = device.attribute(domain, name)
        if isinstance(found, _Error):
            return ERROR
        if op == "==":
            return found == value
        if op == "!=":
            return found != value
        if op == "in":
            return found in value
        return found.startswith(value)
    if kind == "memory_at_least":
        if device.memory is None or device.driver != expr[1]:
            return ERROR
        return device.memory >= quantity_bytes(expr[2])
    if kind == "and":
        left, right = evaluate(expr[1], device), evaluate(expr[2], device)
        if left is False or right is False:
            return False
        return ERROR if ERROR in (left, right) else True
    if kind == "or":
        left, right = evaluate(expr[1], device), evaluate(expr[2], device)
        if left is True or right is True:
            return True
        return ERROR if ERROR in (left, right) else False
    if kind == "not":
        inner = evaluate(expr[1], device)
        return inner if isinstance(inner, _Error) else not inner
    raise ValueError(expr)


def holds(expr: Expr, device: Device) -> bool:
    """Whether the device may be taken: an error counts as yes (the judge errs upwards)."""
    return evaluate(expr, device) is not False


SUFFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 10**3, "M": 10**6, "G": 10**9}


def quantity_bytes(text: str) -> int:
    for suffix, factor in SUFFIXES.items():
        if text.endswith(suffix):
            return int(text.removesuffix(suffix)) * factor
    return int(text)


@dataclass(frozen=True)
class DeviceClass:
    name: str
    selectors: tuple[Expr, ...]
    extended_resource: str = ""
    created: str = ""  # RFC 3339, UTC


@dataclass(frozen=True)
class Request:
    """One request or subrequest: `exactly`'s fields (v1)."""

    device_class: str
    selectors: tuple[Expr, ...] = ()
    all_devices: bool = False  # allocationMode All
    count: int = 1
    memory: str = ""  # capacity.requests.memory, as written
    admin_access: bool = False
    alternatives: tuple["Request", ...] = ()  # firstAvailable: then the fields above are unused


@dataclass(frozen=True)
class Cluster:
    nodes: Mapping[str, Sequence[Device]]
    classes: Mapping[str, DeviceClass] = field(default_factory=dict)

    def standing(self, resource: str) -> DeviceClass | None:
        """The class the scheduler gives a pod asking for `resource` (KEP-5004)."""
        if resource.startswith(CLASS_RESOURCE_PREFIX):
            return self.classes.get(resource.removeprefix(CLASS_RESOURCE_PREFIX))
        standing = [c for c in self.classes.values() if c.extended_resource == resource]
        # Newest first; in one second, the first by name.
        standing.sort(key=lambda c: c.name)
        standing.sort(key=lambda c: c.created, reverse=True)
        return standing[0] if standing else None


def matches(cluster: Cluster, request: Request, device: Device) -> bool:
    device_class = cluster.classes.get(request.device_class)
    if device_class is None:
        return False  # no such class: nothing can be allocated
    if not all(holds(s, device) for s in (*device_class.selectors, *request.selectors)):
        return False
    # KEP-5075 without consumable capacity: the device must hold at least what is asked.
    return not request.memory or device.memory is None or device.memory >= quantity_bytes(request.memory)


def best(cluster: Cluster, request: Request, devices: Sequence[Device]) -> Fraction:
    """The most GPU-equivalents this request alone could take from these devices."""
    if request.alternatives:
        return max(best(cluster, a, devices) for a in request.alternatives)
    worth = sorted((d.worth for d in devices if matches(cluster, request, d)), reverse=True)
    taken = worth if request.all_devices else worth[: request.count]
    return sum(taken, Fraction(0))


def pod_requests(
    cluster: Cluster, claims: Iterable[Sequence[Request]], extended: Iterable[tuple[str, int]]
) -> list[Request]:
    """Every request the pod's claims and the scheduler's claim for its extended resources hold."""
    found = [r for claim in claims for r in claim]
    for resource, amount in extended:
        device_class = cluster.standing(resource)
        if device_class is not None and amount > 0:
            found.append(Request(device_class.name, count=amount))
    return found


def most_on_a_node(
    cluster: Cluster, claims: Iterable[Sequence[Request]], extended: Iterable[tuple[str, int]]
) -> tuple[Fraction, str]:
    """The most GPU-equivalents any one node could give the pod, and that node."""
    requests = pod_requests(cluster, claims, extended)
    judged = [
        (sum((best(cluster, r, d) for r in requests), Fraction(0)), n) for n, d in cluster.nodes.items()
    ]
    return max(judged, default=(Fraction(0), ""))
