"""DRA claims read back (pure), two ways: what each request can allocate, counted against the GPU
budget whatever its shape, and what it asks for in device-plugin words, said only where that is exact.

The budget reading never needs a selector to be understood: a request for 8 devices of a GPU class is
8 GPUs whatever its CEL says. The class says what a device is: one a loaded map names, or the cluster's
DeviceClass, whose selectors name the driver and the `type` (a class that pins another driver gives no
GPU). `allocationMode: All` is the most devices one node publishes for that driver and type;
`firstAvailable` counts its largest alternative. What cannot be counted is said, never guessed.

The device-plugin reading is exact or refused: a request for a class a map knows (or a DeviceClass read
as above), an exact count, and selectors of the shapes cel_selectors.py reads. Anything else is refused
with the expression quoted: a guess would put the pod on the wrong hardware. The budget trusts what the
selectors narrowed (a MIG profile, the models) only when every term was inside that strict grammar.

Why one module of ~330 lines: the class reading and the two readings of a request share one state per
request (what the class and the selectors narrowed, and whether the grammar held throughout).
"""

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, Literal

from webhook.core.asks.cel_selectors import DRIVER, SelectorReading, literal_text
from webhook.core.vocabulary import dra_api
from webhook.core.vocabulary.catalogue import Catalogue, MigProfile
from webhook.core.vocabulary.errors import CannotSay
from webhook.core.vocabulary.platform import CloudMap, DeviceKind, DraForm

# The objects claims are read from, by key: a ResourceClaimTemplate by its name, and the keys below.
ClaimObjects = Callable[[str], Mapping[str, Any] | None]
STANDALONE = "ResourceClaim/"  # + name: a claim made ahead, answered as {"spec": {"spec": <its spec>}}
DEVICE_CLASS = "DeviceClass/"  # + name: the cluster's DeviceClass object
# + "<driver>/<type>": {"count": n}, the most devices of that driver (and type, "" for any) that one
# node publishes in its ResourceSlices; with "same": True when every node publishes n (then
# allocationMode All is said as n), and "by": {node kind: [counts]} to say why not; "gpus": the most
# GPUs those devices are on one node (a Fraction: partitions of one GPU are that GPU, not one each).
DEVICES_PER_NODE = "DevicesPerNode/"
# {"resources": {extended resource name: device class}}: the cluster's DeviceClasses that carry an
# extendedResourceName (KEP-5004): a pod asking for that resource is given devices of that class.
# With "unread": why, when the cluster's classes could not be listed (then no name can be said free).
EXTENDED_RESOURCES = "ExtendedResources"
# Every DeviceClass also stands for this resource name + its own name (KEP-5004).
CLASS_RESOURCE_PREFIX = "deviceclass.resource.kubernetes.io/"


def class_key(name: str) -> str:
    return DEVICE_CLASS + name


def standing_classes(classes: Iterable[Any]) -> dict[str, str]:
    """{extended resource name: the DeviceClass the scheduler gives a pod asking for it} (KEP-5004):
    where classes share a name, the one created last; created in the same second, the first by name
    (DeviceClassSpec.extendedResourceName, as kube-scheduler's dynamicresources plugin maps them)."""
    found: dict[str, tuple[str, str]] = {}
    for device_class in classes:
        metadata = device_class.get("metadata") if isinstance(device_class, Mapping) else None
        spec = device_class.get("spec") if isinstance(device_class, Mapping) else None
        name = metadata.get("name") if isinstance(metadata, Mapping) else None
        resource = spec.get("extendedResourceName") if isinstance(spec, Mapping) else None
        if not isinstance(name, str) or not isinstance(resource, str) or not resource:
            continue
        created = metadata.get("creationTimestamp") if isinstance(metadata, Mapping) else None
        # RFC 3339 in UTC as the API server writes it: compared as text, in time order.
        created = created if isinstance(created, str) else ""
        held = found.get(resource)
        if held is None or created > held[0] or (created == held[0] and name < held[1]):
            found[resource] = (created, name)
    return {resource: name for resource, (_, name) in found.items()}


def devices_key(driver: str, device_type: str) -> str:
    return f"{DEVICES_PER_NODE}{driver}/{device_type}"


class UnreadableClaim(CannotSay):
    """A claim gpuport cannot say in device-plugin words exactly; the message says what and why."""


@dataclass(frozen=True)
class ClaimedDevices:
    """What one request of a claim asks for, in device-plugin words: `count` whole GPUs or MIG slices."""

    kind: Literal["whole", "mig"]
    count: int
    vendor: str
    models: frozenset[str] | None  # acceptable models; None: any
    profile: MigProfile | None = None
    avoid: frozenset[str] = frozenset()  # models refused (a negated product selector)


@dataclass(frozen=True)
class RequestReading:
    """One request of a claim: what it may allocate (the budget) and, when exact, what it asks for."""

    name: str
    gpu: bool  # False: another driver's devices (a NIC, a compute-domain channel): not budgeted
    vendor: str = ""
    kind: DeviceKind = "whole"
    count: int | None = None  # devices it may allocate; None: cannot be told (see uncountable)
    profile: MigProfile | None = None
    models: frozenset[str] | None = None
    avoid: frozenset[str] = frozenset()
    uncountable: str = ""  # why `count` is None
    inexact: str = ""  # why it cannot be said in device-plugin words ("" when it can)
    note: str = ""  # said when it is translated: a choice gpuport made
    options: tuple["RequestReading", ...] = ()  # firstAvailable: every alternative, for the budget
    largest_mib: int = 0  # the most memory one of its devices may have (the memory budget's charge)
    # allocationMode All: the most GPUs its devices are on one node (partitions of a GPU are that GPU);
    # None where the nodes do not say, and then each device is charged as a whole GPU.
    gpus: Fraction | None = None

    def exactly(self) -> ClaimedDevices:
        """The device-plugin ask; only for a reading with nothing inexact."""
        if self.inexact or self.count is None or self.kind == "partition":
            raise UnreadableClaim(
                self.inexact or self.uncountable or f"request {self.name!r} asks for partitions"
            )
        return ClaimedDevices(self.kind, self.count, self.vendor, self.models, self.profile, self.avoid)


@dataclass(frozen=True)
class DeviceClassMeaning:
    """What a device class gives: GPUs of a driver a loaded map knows (of one kind, when its `type`
    says), or no GPU at all."""

    name: str
    gpu: bool
    map_name: str = ""  # the loaded map whose DRA driver gives these devices
    kind: str | None = None  # whole | mig | partition; "" a type the map does not know; None: any
    profile: MigProfile | None = None
    models: frozenset[str] | None = None
    avoid: frozenset[str] = frozenset()
    parsed: bool = True
    inexact: tuple[str, ...] = ()
    extended_resource: str = ""  # KEP-5004: pods asking for this resource get these devices


# A DRA driver whose name says GPU (gpu.nvidia.com, gpu.amd.com, gpu.intel.com, any *gpu* driver) gives
# GPUs; another (compute-domain.nvidia.com, a NIC's) does not.
GPU_DRIVER = re.compile("gpu", re.IGNORECASE)


def dra_map_for(device_class: str, maps: tuple[CloudMap, ...]) -> tuple[CloudMap, bool] | None:
    """The loaded map whose DRA form names this device class, and whether it is its MIG class."""
    for cloud_map in maps:
        form = cloud_map.dra
        if form is not None and device_class in (form.whole_class, form.mig_class):
            return cloud_map, device_class == form.mig_class
    return None


def class_meaning(
    name: str, maps: tuple[CloudMap, ...], catalogue: Catalogue, objects: ClaimObjects | None
) -> DeviceClassMeaning | str:
    """What device class `name` gives, or why gpuport cannot tell (a string)."""
    known = dra_map_for(name, maps)
    if known is not None:
        cloud_map, mig = known
        assert cloud_map.dra is not None
        # A whole class that also holds partitions (AMD) gives either until a request says which.
        kind = "mig" if mig else (None if cloud_map.dra.whole_type else "whole")
        return DeviceClassMeaning(name, True, cloud_map.name, kind)
    found = objects(class_key(name)) if objects is not None else None
    spec = found.get("spec") if isinstance(found, Mapping) else None
    if not isinstance(spec, Mapping):
        return f"device class {name!r} is not one a loaded map names, and gpuport could not read it"
    return read_device_class(name, spec, maps, catalogue)


def read_device_class(
    name: str, spec: Mapping[str, Any], maps: tuple[CloudMap, ...], catalogue: Catalogue
) -> DeviceClassMeaning:
    """A DeviceClass's spec, read: the driver its selectors pin (another driver's class gives no GPU),
    the `type` and anything else they narrow to. Nothing is trusted from selectors outside the strict
    grammar: a driver pinned beside `||` may not be pinned at all, so such a class may give GPUs of
    any kind (counted as whole GPUs, never translated)."""
    extended = spec.get("extendedResourceName")
    extended = extended if isinstance(extended, str) else ""
    selectors = spec.get("selectors")
    expressions = [
        s["cel"]["expression"]
        for s in (selectors if isinstance(selectors, list) else ())
        if isinstance(s, Mapping)
        and isinstance(s.get("cel"), Mapping)
        and isinstance(s["cel"].get("expression"), str)
    ]
    drivers = {
        literal_text(found.groups()[1:])
        for expression in expressions
        for term in expression.split("&&")
        if (found := DRIVER.fullmatch(term.strip().strip("()").strip())) and found.group(1) == "=="
    }
    gpu_drivers = {m.dra.driver for m in maps if m.dra is not None}
    pinned = len(drivers) == 1 and (
        _grammar_holds(next(iter(drivers)), selectors, catalogue)
        or (not drivers & gpu_drivers and any(_plain_conjunction(e, drivers) for e in expressions))
    )
    gpu_maps = [m for m in maps if m.dra is not None and (not pinned or m.dra.driver in drivers)]
    if pinned and not gpu_maps:
        driver = next(iter(drivers))
        if not GPU_DRIVER.search(driver):
            return DeviceClassMeaning(name, False, extended_resource=extended)
        # A GPU driver no map describes (Intel's gpu.intel.com): its devices are GPUs of a kind gpuport
        # cannot say, each counted as a whole GPU, never charged as another driver's NICs.
        why = f"device class {name} gives devices of {driver}, a GPU driver no loaded map describes"
        return DeviceClassMeaning(
            name, True, kind="", parsed=False, inexact=(why,), extended_resource=extended
        )
    if not pinned or len({m.dra.driver for m in gpu_maps if m.dra}) != 1:
        # Any driver's devices, GPUs among them: counted as whole GPUs, never translated.
        why = f"device class {name} does not say plainly which driver's devices it gives"
        return DeviceClassMeaning(
            name, True, kind="", parsed=False, inexact=(why,), extended_resource=extended
        )
    cloud_map = gpu_maps[0]
    assert cloud_map.dra is not None
    reading = SelectorReading(cloud_map.dra, catalogue, cloud_map.models_offered(catalogue), None)
    reading.selectors(selectors, f"device class {name}")
    reading.finish()
    inexact = [f"device class {name}: {why}" for why in reading.inexact]
    if spec.get("config"):
        inexact.append(
            f"device class {name} sets the driver up (spec.config), which device plugins cannot do"
        )
    if not reading.parsed:  # the kind, profile and models it seems to say are not trusted
        return DeviceClassMeaning(
            name, True, cloud_map.name, "", parsed=False, inexact=tuple(inexact), extended_resource=extended
        )
    return DeviceClassMeaning(
        name,
        True,
        cloud_map.name,
        reading.kind,
        reading.profile,
        reading.models,
        reading.avoid,
        True,
        tuple(inexact),
        extended,
    )


def _plain_conjunction(expression: str, drivers: set[str]) -> bool:
    """Whether `expression` is terms joined by && alone, one of them `device.driver == <one of drivers>`:
    then every device it selects is that driver's, whatever the other terms compare (NVIDIA's IMEX
    channel class adds `.id == 0`, outside the GPU grammar). No ||, ?: or negated group, which could
    put the driver term under another."""
    if "||" in expression or "?" in expression or re.search(r"!\s*\(", expression):
        return False
    for term in expression.split("&&"):
        found = DRIVER.fullmatch(term.strip().strip("()").strip())
        if found and found.group(1) == "==" and literal_text(found.groups()[1:]) in drivers:
            return True
    return False


def _grammar_holds(driver: str, selectors: Any, catalogue: Catalogue) -> bool:
    """Whether every selector is inside the strict grammar, read as `driver`'s: only then does a
    `device.driver ==` term pin the class to that driver."""
    reading = SelectorReading(
        DraForm(api_version=dra_api.NEWEST, driver=driver, whole_class=""), catalogue, (), None
    )
    reading.selectors(selectors, "")
    return reading.parsed


def read_claim_requests(
    claim_spec: Mapping[str, Any],
    maps: tuple[CloudMap, ...],
    catalogue: Catalogue,
    objects: ClaimObjects | None = None,
) -> tuple[list[RequestReading], list[str]]:
    """Every request of a claim's spec (a template's spec.spec), read both ways, and what makes the
    claim as a whole inexact (its constraints and driver config: device plugins have neither)."""
    devices = claim_spec.get("devices")
    devices = devices if isinstance(devices, Mapping) else {}
    whole_claim: list[str] = []
    for refused in ("constraints", "config"):
        if devices.get(refused):
            whole_claim.append(_whole_claim_problem(refused, devices[refused]))
    requests = devices.get("requests")
    if not isinstance(requests, list) or not requests:
        raise UnreadableClaim("its devices.requests is not a list of requests")
    return [_request(r, maps, catalogue, objects) for r in requests], whole_claim


def _whole_claim_problem(field_name: str, value: Any) -> str:
    if field_name == "config":
        parameters = [
            (c.get("opaque") or {}).get("parameters")
            for c in (value if isinstance(value, list) else ())
            if isinstance(c, Mapping) and isinstance(c.get("opaque"), Mapping)
        ]
        kinds = sorted({str(p.get("kind", "?")) for p in parameters if isinstance(p, Mapping)})
        said = f" ({', '.join(kinds)})" if kinds else ""
        return (
            f"its devices.config{said} sets the driver up (sharing, MPS, MIG), which device plugins "
            "cannot do per pod"
        )
    return (
        "its devices.constraints make the devices share an attribute (one parent GPU, one PCIe root), "
        "which device plugins cannot promise"
    )


def read_claim(
    claim_spec: Mapping[str, Any], maps: tuple[CloudMap, ...], catalogue: Catalogue
) -> list[ClaimedDevices]:
    """The devices a claim asks for, request by request, in device-plugin words; UnreadableClaim when
    any of it cannot be said exactly."""
    readings, whole_claim = read_claim_requests(claim_spec, maps, catalogue)
    if whole_claim:
        raise UnreadableClaim(whole_claim[0])
    return [r.exactly() for r in readings if r.gpu or _raise(r)]


def _raise(reading: RequestReading) -> bool:
    raise UnreadableClaim(reading.inexact or f"request {reading.name!r} asks for no GPU")


def _request(
    request: Any, maps: tuple[CloudMap, ...], catalogue: Catalogue, objects: ClaimObjects | None
) -> RequestReading:
    if not isinstance(request, Mapping):
        raise UnreadableClaim("a request is not a mapping")
    name = str(request.get("name", "?"))
    alternatives = request.get("firstAvailable")
    if alternatives is not None:
        if not isinstance(alternatives, list) or not alternatives or not all(map(_is_map, alternatives)):
            raise UnreadableClaim(f"request {name!r}: firstAvailable is not a list of alternatives")
        subs = [str(a.get("name", "?")) for a in alternatives]
        options = tuple(
            _one(sub, a, maps, catalogue, objects, f"{name}/{sub}")
            for sub, a in zip(subs, alternatives, strict=True)
        )
        return _first_available(name, options)
    exact = dra_api.requested_devices(request)
    if not isinstance(exact, Mapping):
        raise UnreadableClaim(f"request {name!r}: exactly is not a mapping")
    return _one(name, exact, maps, catalogue, objects, name)


def extended_request(
    resource: str,
    amount: int,
    device_class: str,
    maps: tuple[CloudMap, ...],
    catalogue: Catalogue,
    objects: ClaimObjects | None,
) -> RequestReading:
    """An extended resource a DeviceClass stands for (KEP-5004), read as the claim the scheduler
    makes for it: `amount` devices of that class."""
    return _one(
        resource, {"deviceClassName": device_class, "count": amount}, maps, catalogue, objects, resource
    )


def _is_map(value: Any) -> bool:
    return isinstance(value, Mapping)


def _first_available(name: str, options: tuple[RequestReading, ...]) -> RequestReading:
    """The budget counts the largest alternative; in device-plugin words the request is its first
    alternative that can be said exactly (the scheduler would try them in order)."""
    gpu = [o for o in options if o.gpu]
    if not gpu:
        return RequestReading(name, False, options=options)
    chosen = next((o for o in gpu if not o.inexact and o.count is not None and o.kind != "partition"), None)
    if chosen is None:
        return replace(
            gpu[0],
            name=name,
            inexact=f"request {name!r}: none of its firstAvailable alternatives can be said exactly "
            f"({gpu[0].inexact or gpu[0].uncountable})",
            options=options,
        )
    note = f"request {name} lists alternatives (firstAvailable): the first gpuport can say is {chosen.name}"
    return replace(chosen, name=name, note=note, options=options)


def _one(
    name: str,
    exact: Mapping[str, Any],
    maps: tuple[CloudMap, ...],
    catalogue: Catalogue,
    objects: ClaimObjects | None,
    said_as: str,
) -> RequestReading:
    device_class = exact.get("deviceClassName")
    meaning = class_meaning(str(device_class), maps, catalogue, objects)
    if isinstance(meaning, str):
        why = f"request {said_as!r}: {meaning}"
        return RequestReading(name, True, kind="whole", uncountable=why, inexact=why)
    if not meaning.gpu:
        return RequestReading(name, False)
    cloud_map = next(m for m in maps if m.name == meaning.map_name) if meaning.map_name else None
    form = cloud_map.dra if cloud_map is not None else None
    inexact = list(meaning.inexact)
    if form is None or cloud_map is None:
        count, uncountable = _count(exact, {}, said_as)
        largest = max((m.memory_bytes >> 20 for m in catalogue.models.values()), default=0)
        return RequestReading(
            name,
            True,
            kind="whole",
            count=count,
            uncountable=uncountable,
            inexact="; ".join(inexact),
            largest_mib=largest,
        )
    reading = SelectorReading(
        form,
        catalogue,
        cloud_map.models_offered(catalogue),
        meaning.kind,
        meaning.models,
        meaning.avoid,
        meaning.profile,
        meaning.parsed,
    )
    reading.selectors(exact.get("selectors"), f"request {said_as!r}")
    reading.capacity(exact.get("capacity"), f"request {said_as!r}")
    reading.finish()
    inexact += reading.inexact
    # Outside the strict grammar nothing the selectors seem to say is trusted: the request may take any
    # of the class's devices (counted as whole GPUs each, and for All every device of the driver).
    trusted = reading.parsed and meaning.parsed
    kind = reading.kind if trusted else ""
    note = ""
    untyped = kind is None and bool(form.whole_type)
    if kind is None and form.whole_type:
        # The class holds whole GPUs and partitions, and the request does not say which: a whole GPU is
        # what the driver gives on a card that is not partitioned.
        kind, note = (
            "whole",
            f"request {said_as} of {device_class} does not select a type: read as whole GPUs",
        )
    elif not kind:
        inexact.append(
            f"request {said_as!r}: device class {device_class} gives devices of no kind gpuport says"
        )
    # allocationMode All counts the type the request or class said; unsaid, every device of the driver.
    device_type = _type_of(form, kind) if kind else ""
    every_device = exact.get("allocationMode") == "All"
    per_node = _per_node(objects, form.driver, device_type) if every_device else {}
    count, uncountable = _count(exact, per_node, said_as)
    # What All takes on the budget: with no type said, every device the driver publishes on a node
    # (an AMD GPU not in SPX mode is published only as partitions), each GPU once however it is split.
    taken = _per_node(objects, form.driver, "") if every_device and untyped else per_node
    gpus = _gpus_of(taken)
    if taken is not per_node and isinstance(taken.get("count"), int):
        if gpus is None:
            gpus = Fraction(taken["count"])  # the nodes do not say which devices share a GPU: each is one
        if count is None:  # no node publishes a whole GPU (every card partitioned): still countable
            count, uncountable = taken["count"], ""
    if every_device and untyped and taken.get("count") != per_node.get("count"):
        inexact.append(
            f"request {said_as!r} takes every device of {form.driver} on a node (allocationMode: All, no "
            "type), partitions as well as whole GPUs"
        )
    if exact.get("allocationMode", "ExactCount") == "All":
        if count is not None and per_node.get("same") is True:
            # Every node holds one number of them: asking for that many is asking for all of a node.
            written = (
                f"request {said_as} asks for every device of a node (allocationMode: All): "
                f"{count}, what each GPU node holds"
            )
            note = f"{note}; {written}" if note else written
        else:
            inexact.append(
                f"request {said_as!r} asks for every matching device of a node (allocationMode: All)"
                + _held_by_kind(per_node)
            )
    if exact.get("adminAccess"):
        inexact.append(f"request {said_as!r} asks for admin access, which device plugins do not give")
    if kind == "mig" and reading.profile is None:
        inexact.append(f"request {said_as!r} asks for any MIG device; device plugins name a profile")
    if kind == "partition":
        inexact.append(
            f"request {said_as!r} asks for GPU partitions; gpuport says only whole GPUs of {cloud_map.vendor}"
        )
    if reading.models is not None and not reading.models:
        inexact.append(f"request {said_as!r} matches no GPU model gpuport knows")
    return RequestReading(
        name,
        True,
        cloud_map.vendor,
        kind if kind in ("whole", "mig", "partition") else "whole",  # type: ignore[arg-type]
        count,
        reading.profile if trusted else None,
        reading.models if trusted else None,
        reading.avoid if trusted else frozenset(),
        uncountable,
        "; ".join(inexact),
        note,
        largest_mib=_largest_mib(reading.models if trusted else None, cloud_map, catalogue),
        gpus=gpus,
    )


def _largest_mib(models: frozenset[str] | None, cloud_map: CloudMap, catalogue: Catalogue) -> int:
    """The most memory (NVML's MiB) one device may have: of the models it may be, else of every model
    the driver's map names."""
    candidates = models or cloud_map.models_offered(catalogue)
    return max(
        (catalogue.models[m].memory_bytes >> 20 for m in candidates if m in catalogue.models), default=0
    )


def _per_node(objects: ClaimObjects | None, driver: str, device_type: str) -> Mapping[str, Any]:
    found = objects(devices_key(driver, device_type)) if objects is not None and driver else None
    return found if isinstance(found, Mapping) else {}


def _gpus_of(per_node: Mapping[str, Any]) -> Fraction | None:
    gpus = per_node.get("gpus")
    return gpus if isinstance(gpus, Fraction) and gpus >= 0 else None


def _held_by_kind(per_node: Mapping[str, Any]) -> str:
    by = per_node.get("by")
    if not isinstance(by, Mapping) or not by:
        return ""
    held = ", ".join(f"{'/'.join(map(str, counts))} on {kind}" for kind, counts in sorted(by.items()))
    return f", and the GPU nodes do not all hold one number ({held}): ask for a count"


def per_node_answer(
    counts: tuple[tuple[str, frozenset[int]], ...], maps: tuple[CloudMap, ...]
) -> tuple[Mapping[str, Any], frozenset[str]] | None:
    """What DEVICES_PER_NODE answers from the whole GPUs each device-plugin node offers (by node kind),
    and the keys it answers: where a claim is moved off DRA, a driver's devices on a node are that
    node's whole GPUs. None without counts."""
    if not counts:
        return None
    every = {n for _, held in counts for n in held}
    answer = {
        "count": max(every),
        "same": len(every) == 1,
        "by": {kind: sorted(held) for kind, held in counts},
    }
    keys = frozenset(
        devices_key(m.dra.driver, device_type)
        for m in maps
        if m.dra is not None
        for device_type in ("", _type_of(m.dra, "whole"))
    )
    return answer, keys


def _type_of(form: DraForm, kind: str) -> str:
    return next((t for t, k in form.types.items() if k == kind), "")


def _count(exact: Mapping[str, Any], per_node: Mapping[str, Any], said_as: str) -> tuple[int | None, str]:
    """`per_node`: what the nodes publish of the request's devices (allocationMode All), else {}."""
    mode = exact.get("allocationMode", "ExactCount")
    if mode == "All":
        most = per_node.get("count")
        if isinstance(most, int) and not isinstance(most, bool) and most >= 0:
            return most, ""
        return None, (
            f"request {said_as!r} asks for every matching device of a node (allocationMode: All), and "
            "gpuport cannot see how many devices the nodes publish"
        )
    if mode != "ExactCount":
        return None, f"request {said_as!r} has allocationMode {mode!r}"
    count = exact.get("count", 1)
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        return None, f"request {said_as!r} has count {count!r}"
    return count, ""
