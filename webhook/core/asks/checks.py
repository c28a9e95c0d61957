"""GPU request checks that mirror the API server's own rules for extended resources, with better words.

The API server rejects a fractional extended resource with a Go structure dump, and only after every
mutating webhook has run. These checks run first and say what to ask for instead. They are never
stricter than the API server: every pod they deny, the API server would deny too.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from webhook.core.vocabulary import quantity
from webhook.core.vocabulary.dialects import Dialects
from webhook.core.vocabulary.platform import CloudMap
from webhook.core.vocabulary.workloads import ContainerRef


@dataclass(frozen=True)
class Violation:
    reason: (
        str  # fractional-gpu | fractional-extended | missing-limit | request-limit-mismatch | bad-quantity
    )
    field: str
    message: str


def is_extended_resource(name: str) -> bool:
    """Kubernetes' rule: a domain-qualified name outside *kubernetes.io/, not a quota key."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def check_containers(found: Iterable[ContainerRef], target: CloudMap, dialects: Dialects) -> list[Violation]:
    """The checks on containers already read (a pod's, read once for its whole decision)."""
    violations: list[Violation] = []
    for container in found:
        violations.extend(_check_container(container, target, dialects))
    return violations


def _check_container(container: ContainerRef, target: CloudMap, dialects: Dialects) -> list[Violation]:
    requests = container.requests
    limits = container.limits
    names = [n for n in (*limits, *(n for n in requests if n not in limits)) if is_extended_resource(n)]
    found: list[Violation] = []
    for name in names:
        # Parsed in this order (limits first), each None when absent or not a quantity: a local
        # each, not a dict and a generator per name, as this runs for every GPU container.
        limit = _parsed(container, "limits", limits, name, found)
        request = _parsed(container, "requests", requests, name, found)
        fractional, written = None, None
        if limit is not None and not quantity.is_whole(limit):
            fractional, written = limit, limits[name]
        elif request is not None and not quantity.is_whole(request):
            fractional, written = request, requests[name]
        if fractional is not None and _translated_by_policy(name, fractional, target, dialects):
            continue
        if fractional is not None:
            found.append(_fractional(container, name, fractional, written, target, dialects))
            continue
        if request is not None and name not in limits:
            found.append(
                Violation(
                    "missing-limit",
                    f"{container.field}.resources.limits",
                    f"{container.label}: {name} is requested ({quantity.as_written(request)}) "
                    "without a limit: Limit must be set for non overcommitable resources "
                    f"(set limits {name}: {quantity.as_written(request)})",
                )
            )
        elif request is not None and limit is not None and request != limit:
            request_text = quantity.as_written(request)
            limit_text = quantity.as_written(limit)
            found.append(
                Violation(
                    "request-limit-mismatch",
                    f"{container.field}.resources.requests",
                    f'{container.label}: requests {name} "{request_text}" must be equal to '
                    f"{name} limit of {limit_text}",
                )
            )
    return found


def _parsed(
    container: ContainerRef, section: str, values: Mapping[str, Any], name: str, found: list[Violation]
) -> Decimal | None:
    if name not in values:
        return None
    try:
        return quantity.parse(values[name])
    except quantity.QuantityError as exc:
        found.append(
            Violation(
                "bad-quantity",
                f"{container.field}.resources.{section}[{name}]",
                f"{container.label}: {section}.{name} {exc}",
            )
        )
        return None


def _translated_by_policy(name: str, amount: Decimal, target: CloudMap, dialects: Dialects) -> bool:
    """A cloud map may turn part of a whole GPU into a MIG slice or a shared GPU instead of denying it."""
    return target.fractional_policy != "deny" and name in dialects.whole_gpu_names and 0 < amount < 1


def _fractional(
    container: ContainerRef, name: str, amount: Decimal, raw: Any, target: CloudMap, dialects: Dialects
) -> Violation:
    written = _as_given(raw, amount)
    field = f"{container.field}.resources.limits[{name}]"
    if name not in dialects:
        return Violation(
            "fractional-extended",
            field,
            f"{container.label}: {name} is {written}, but extended resources must be whole numbers",
        )
    options = target.partial_gpu_options(dialects.catalogue)
    if options:
        instead = "for part of a GPU ask for " + " or ".join(options)
    else:
        instead = f"this cluster offers no partial GPUs: ask for whole ones ({target.whole_gpu}: 1)"
    return Violation(
        "fractional-gpu",
        field,
        f"{container.label}: {name} is {written}, but GPUs are whole units; {instead}",
    )


def _as_given(raw: Any, amount: Decimal) -> str:
    """The amount as the pod gives it ("500m"), with its decimal where that reads differently: the API
    server has already written a 0.5 as 500m when a webhook sees it, so "500m (0.5)" is right whichever
    the user typed."""
    text = raw if isinstance(raw, str) else quantity.as_written(amount)
    decimal = quantity.as_written(amount)
    return text if text == decimal else f"{text} ({decimal})"
