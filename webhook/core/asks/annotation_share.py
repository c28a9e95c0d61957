"""A GPU share asked by pod annotation, read as the scheduler that honours it reads it (NVIDIA KAI, from
its source: pkg/scheduler/api/pod_info, pkg/common/resources/gpu_sharing.go, the binder's
GetFractionContainerRef, the admission's gpu_request_validator.go, and its GPU sharing guide's
NvFractions annotations). What a layer gives is what gpuport charges, so every reading here errs up:

- `gpu-fraction` is parsed by Go's strconv.ParseFloat (`0x1.ccp-1`, `1e-1`, `+.5` are numbers there);
  the share is charged at the larger of its exact value and the two decimals KAI's bind request carries
  (`%.2f`), rounded up to a whole percent (0.0199 is charged 2 %, never the 1 % int(f × 100) gives).
- `gpu-memory` (MiB) and `gpu-fraction-num-devices` are parsed by ParseInt.
- `nvidia.com/container.<name>.gpu-memory.request` / `.limit` (Kubernetes quantities; a request left
  out is the limit) ask memory for the named container; the larger of the two is charged, since the
  runtime lets the container use up to the limit.
- The share goes to the container `gpu-fraction-container-name` names (init containers first, then
  app containers, as the binder looks), to the container a per-container key names, else to the first
  app container.

Anything the scheduler could read differently (a value Go rejects or reads as NaN, a fraction outside
(0, 1), a container that does not exist, two containers named) is `unreadable`: a GPU budget refuses
the pod rather than charge it nothing.
"""

import math
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any, NamedTuple

from webhook.core.vocabulary import quantity
from webhook.core.vocabulary.errors import BadInput
from webhook.core.vocabulary.gofloat import GoSyntaxError, parse_float, parse_int
from webhook.core.vocabulary.sharing import SharedForm
from webhook.core.vocabulary.workloads import ContainerRef

# KAI's key for the per-container form (a DNS label between the prefix and the suffix); other keys
# with the prefix are not its words.
_CONTAINER_KEY = re.compile(r"([a-z0-9](?:[a-z0-9-]*[a-z0-9])?)\.gpu-memory\.(request|limit)")


_SHARED_LISTS = ("initContainers", "containers")  # an ephemeral container gets no share


class SharedAsk(NamedTuple):
    memory_mib: int | None = None
    core_percent: int | None = None
    memory_percent: int | None = None  # of one card's memory, when asked that way
    # Asked as a MIG instance cut to this memory (HAMi's dynamic MIG, by the map's mig annotations):
    # isolated memory, which a target offering MIG keeps by giving a MIG slice.
    isolated: bool = False


class AnnotationShare(NamedTuple):
    """What the annotations ask: the share, on which container, on how many GPUs, the annotations as
    written; or why the scheduler's reading cannot be known (`unreadable`)."""

    container: ContainerRef | None = None
    share: SharedAsk | None = None
    devices: int = 1  # how many GPUs get the share each
    written: Mapping[str, str] = {}
    unreadable: str = ""


def read_annotation_share(
    form: SharedForm, annotations: Mapping[str, Any], containers: Sequence[ContainerRef]
) -> AnnotationShare | None:
    """The share `form`'s annotations ask of a pod its scheduler schedules; None when they ask none."""
    legacy = {k: str(annotations[k]) for k in form.annotation_names() if k in annotations}
    per_container = _per_container(form, annotations)
    if form.fraction_annotation not in legacy and form.memory_annotation not in legacy and not per_container:
        return None  # a device count or a container name alone asks for nothing
    written = {**legacy, **{k: v for keys in per_container.values() for k, v in keys.items()}}
    try:
        share, count = _share(form, legacy, per_container)
        container = _container(form, legacy, per_container, containers)
    except _Unreadable as exc:
        return AnnotationShare(written=written, unreadable=f"GPU share annotations {written}: {exc}")
    return AnnotationShare(container, share, count, written)


class _Unreadable(BadInput):
    """The annotations cannot be read as their scheduler reads them (caught here, never raised out)."""


def _per_container(form: SharedForm, annotations: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """{container name: {key: value}} of the per-container memory keys (KAI's NvFractions form)."""
    prefix = form.container_memory_prefix
    found: dict[str, dict[str, str]] = {}
    if not prefix:
        return found
    for key, value in annotations.items():
        if isinstance(key, str) and key.startswith(prefix):
            matched = _CONTAINER_KEY.fullmatch(key[len(prefix) :])
            if matched:
                found.setdefault(matched.group(1), {})[key] = str(value)
    return found


def _share(
    form: SharedForm, legacy: Mapping[str, str], per_container: Mapping[str, Mapping[str, str]]
) -> tuple[SharedAsk, int]:
    percent = None
    if form.fraction_annotation in legacy:
        percent = _fraction_percent(legacy[form.fraction_annotation], form.fraction_annotation)
    memory = None
    if form.memory_annotation in legacy:
        memory = _go_int(legacy[form.memory_annotation], form.memory_annotation)
    for keys in per_container.values():
        memory = max(memory or 0, _container_memory_mib(form, keys))
    count = 1
    if form.count_annotation in legacy:
        count = _go_int(legacy[form.count_annotation], form.count_annotation)
    return SharedAsk(memory_mib=memory, memory_percent=percent), count


def _fraction_percent(text: str, key: str) -> int:
    try:
        fraction = parse_float(text)
    except GoSyntaxError as exc:
        raise _Unreadable(str(exc)) from None
    if math.isnan(fraction) or not 0 < fraction < 1:
        raise _Unreadable(f"{key} is {text} (Go reads {fraction}); a share is between 0 and 1")
    exact = Decimal(repr(fraction))  # the shortest text of the double, as KAI's float64 holds it
    bound = Decimal(f"{fraction:.2f}")  # what KAI's bind request records (fmt's %.2f rounds)
    return math.ceil(max(exact, bound) * 100)


def _go_int(text: str, key: str) -> int:
    try:
        value = parse_int(text)
    except GoSyntaxError as exc:
        raise _Unreadable(str(exc)) from None
    if value < 1:
        raise _Unreadable(f"{key} is {value}; it must be at least 1")
    return value


def _container_memory_mib(form: SharedForm, keys: Mapping[str, str]) -> int:
    amounts = []
    for key, value in keys.items():
        try:
            amount = quantity.parse(value)
        except BadInput as exc:
            raise _Unreadable(f"{key}: {exc}") from None
        if amount <= 0:
            raise _Unreadable(f"{key} is {value}; it must be more than 0")
        amounts.append(amount)
    return math.ceil(max(amounts) / quantity.MIB)


def _container(
    form: SharedForm,
    legacy: Mapping[str, str],
    per_container: Mapping[str, Mapping[str, str]],
    containers: Sequence[ContainerRef],
) -> ContainerRef:
    """The container KAI gives the share to; the same one however the pod names it, or unreadable."""
    named: set[str] = set(per_container)
    if form.container_annotation in legacy:
        named.add(legacy[form.container_annotation])
    elif form.fraction_annotation in legacy or form.memory_annotation in legacy:
        first = next((c for c in containers if c.list_name == "containers"), None)
        if first is None:
            raise _Unreadable("the pod has no container to give the share to")
        named.add(first.name)
    if len(named) > 1:
        raise _Unreadable(f"they name {len(named)} containers ({', '.join(sorted(named))}); KAI gives one")
    name = named.pop()
    # Init containers first: the binder looks there before the app containers.
    found = next((c for c in containers if c.name == name and c.list_name in _SHARED_LISTS), None)
    if found is None:
        raise _Unreadable(f"no container is named {name!r}")
    return found
