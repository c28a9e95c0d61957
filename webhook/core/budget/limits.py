"""GPU limits per namespace in GPU-equivalents, for pods that ask for an accelerator only (pure).

The built-in LimitRanger applies a GPU entry to every pod: a Container `max: {nvidia.com/gpu: 2}` makes
the API server default every container, CPU-only sidecars included, to 2 GPUs; a Pod `min` refuses
every CPU-only pod. gpuport offers the same shape without those traps, across every GPU form:
- its own limits in the namespace annotation `gpuport.io/gpu-limits` (set by whoever may edit the
  namespace, never by a pod): a JSON list of {"type": "Pod"|"Container", "min": n, "max": n};
- real LimitRange objects whose min/max name any GPU resource, read in GPU-equivalents;
- the default-injection trap: when the `kubernetes.io/limit-ranger` annotation shows a GPU was put into
  a container that asked for none, the pod is denied with the fix, unless the namespace opts in with
  the label `gpuport.io/allow-gpu-defaults=true`.
Container limits apply to the containers that ask for a GPU; Pod limits to the pod's effective total.
`default` is accepted in gpuport's annotation for LimitRange's shape but injects nothing, on purpose.
"""

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from webhook.core.asks.demand import PodDemand
from webhook.core.budget.equivalents import ask_equivalents, pod_use
from webhook.core.vocabulary import quantity
from webhook.core.vocabulary.catalogue import Catalogue
from webhook.core.vocabulary.dialects import Dialects
from webhook.core.vocabulary.errors import BadInput
from webhook.core.vocabulary.gpu_use import show
from webhook.core.vocabulary.platform import CloudMap

LIMITS_ANNOTATION = "gpuport.io/gpu-limits"
OPT_IN_LABEL = "gpuport.io/allow-gpu-defaults"
LIMIT_RANGER = "kubernetes.io/limit-ranger"
_INJECTED = re.compile(r"(\S+) (?:request|limit) for (?:init )?container (\S+)")


class LimitsError(BadInput):
    pass


@dataclass(frozen=True)
class GpuLimit:
    source: str
    type: str  # Container | Pod
    min: Fraction | None = None
    max: Fraction | None = None


def _amount(value: Any) -> Fraction:
    return Fraction(str(quantity.parse(value)))


def from_annotation(text: str) -> list[GpuLimit]:
    try:
        entries = json.loads(text)
        if not isinstance(entries, list):
            raise TypeError("not a list")
        limits = []
        for entry in entries:
            unknown = set(entry) - {"type", "min", "max", "default"}
            if unknown or entry.get("type") not in ("Container", "Pod"):
                raise TypeError(f"bad entry {entry}")
            limits.append(
                GpuLimit(
                    f"namespace annotation {LIMITS_ANNOTATION}",
                    entry["type"],
                    _amount(entry["min"]) if "min" in entry else None,
                    _amount(entry["max"]) if "max" in entry else None,
                )
            )
        return limits
    except (TypeError, ValueError, AttributeError, quantity.QuantityError) as exc:
        raise LimitsError(
            f"{LIMITS_ANNOTATION} must be a JSON list of {{type: Pod|Container, min, max}}: {exc}"
        ) from None


def from_limitrange(obj: Mapping[str, Any], dialects: Dialects) -> list[GpuLimit]:
    name = (obj.get("metadata") or {}).get("name", "?")
    limits = []
    for item in (obj.get("spec") or {}).get("limits") or []:
        if item.get("type") not in ("Container", "Pod"):
            continue
        bounds = {}
        for key in ("min", "max"):
            gpu = {r: v for r, v in (item.get(key) or {}).items() if r in dialects}
            if gpu:
                # Across names: the bound is on GPU-equivalents, read at the entry's strictest value.
                values = [_amount(v) for v in gpu.values()]
                bounds[key] = max(values) if key == "min" else min(values)
        if bounds:
            limits.append(GpuLimit(f"LimitRange {name}", item["type"], bounds.get("min"), bounds.get("max")))
    return limits


def violations(
    pod: Mapping[str, Any], demand: PodDemand, limits: list[GpuLimit], target: CloudMap, catalogue: Catalogue
) -> list[str]:
    """LimitRanger's wording, on GPU-equivalents, for a pod that asks for an accelerator."""
    if not demand.asks and not demand.claims.any:
        return []
    resource = target.whole_gpu
    found = []
    for limit in limits:
        if limit.type == "Pod":
            amounts = [("Pod", pod_use(demand, target, catalogue).equivalents)]
        else:
            # A container's asks added up: one container may ask for several kinds of GPU at once.
            by_container: dict[tuple[str, int], Fraction] = {}
            for a in demand.asks:
                if not a.claim:
                    share = ask_equivalents(a, demand.charged_models, target, catalogue).equivalents
                    where = (a.list_name, a.index)
                    by_container[where] = by_container.get(where, Fraction(0)) + share
            amounts = [("Container", amount) for amount in by_container.values()]
            amounts += [("Container", amount) for _, amount in demand.claims.container_charges]
        for kind, amount in amounts:
            if limit.min is not None and amount < limit.min:
                found.append(
                    f"minimum {resource} usage per {kind} is {show(limit.min)}, but request is "
                    f"{show(amount)} ({limit.source}, in GPU-equivalents)"
                )
            if limit.max is not None and amount > limit.max:
                found.append(
                    f"maximum {resource} usage per {kind} is {show(limit.max)}, but limit is "
                    f"{show(amount)} ({limit.source}, in GPU-equivalents)"
                )
    return found


def injected(pod: Mapping[str, Any], dialects: Dialects) -> list[tuple[str, str]]:
    """(container, GPU resource) pairs the built-in LimitRanger defaulted into containers."""
    note = ((pod.get("metadata") or {}).get("annotations") or {}).get(LIMIT_RANGER, "")
    pairs = []
    for resource, container in _INJECTED.findall(note):
        container = container.rstrip(";,")
        if resource in dialects and (container, resource) not in pairs:
            pairs.append((container, resource))
    return pairs


def trap_message(pairs: list[tuple[str, str]], limitranges: list[str]) -> str:
    where = ", ".join(f'container "{c}" ({r})' for c, r in pairs)
    names = ", ".join(limitranges) or "a LimitRange in this namespace"
    resource = pairs[0][1]
    return (
        f"the LimitRange {names} gave GPUs to {where}, which asked for none: a GPU max without a default "
        f"makes Kubernetes default every container to the max. Add default: {{{resource}: 0}} (and "
        f"defaultRequest) beside max, or label the namespace {OPT_IN_LABEL}=true to allow it"
    )
