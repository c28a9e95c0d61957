"""A pod's DRA claims (pure): what each claim charges to the GPU budget, and which devices each
container uses in device-plugin words where that is exact.

The budget follows DRA, not the containers: a claim's devices are held for the pod's life whichever
containers use them, so every claim the pod names is charged once, made from a template (the pod's
own) or made ahead (a ResourceClaim, which several pods may share: charged once per namespace, see
quota_gate). What cannot be counted is listed with why, never guessed as nothing.

Why one module of ~440 lines: a pod's claims are read once for both answers, and the two meet in the
containers' references (which claim or request each uses), so splitting them would read twice.
"""

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from functools import reduce
from typing import Any

from webhook.core.asks.checks import is_extended_resource
from webhook.core.asks.claims import (
    CLASS_RESOURCE_PREFIX,
    DEVICE_CLASS,
    EXTENDED_RESOURCES,
    STANDALONE,
    ClaimedDevices,
    ClaimObjects,
    RequestReading,
    UnreadableClaim,
    extended_request,
    read_claim_requests,
)
from webhook.core.asks.compute_domains import CHANNEL_CLASS, channel_class, channel_templates
from webhook.core.vocabulary import dra_api, quantity
from webhook.core.vocabulary.catalogue import Catalogue
from webhook.core.vocabulary.gpu_use import NO_GPU, GpuUse
from webhook.core.vocabulary.platform import CloudMap
from webhook.core.vocabulary.workloads import ContainerRef, PodRead, is_map, mapping_at, read_pod

# Kept for the callers that name the lookup by what it mostly answers: templates by name.
TemplateLookup = ClaimObjects
__all__ = ["STANDALONE", "TemplateLookup"]

# The names gpuport gives the claims and templates it makes (rewriting.dra writes them, budgets read them).
TEMPLATE_PREFIX = "gpuport-"


@dataclass(frozen=True)
class ClaimUse:
    """A container's use of a GPU claim: which claim, made from which template, asking for what."""

    container: ContainerRef
    claim: str
    template: str
    devices: ClaimedDevices


@dataclass(frozen=True)
class ClaimCharge:
    """What one of the pod's claims takes from the GPU budget."""

    claim: str  # the pod's name for it
    made_from: str  # "ResourceClaimTemplate x" or "ResourceClaim x"
    shared_as: str  # a claim made ahead: its ResourceClaim name, charged once however many pods use it
    use: GpuUse


@dataclass(frozen=True)
class PodClaims:
    """Everything gpuport reads from a pod's claims."""

    uses: tuple[ClaimUse, ...] = ()  # device-plugin asks, container by container (exact ones only)
    charges: tuple[ClaimCharge, ...] = ()  # every GPU claim the pod names
    # GPU-equivalents each container's claims give it (for per-container GPU limits), by label.
    container_charges: tuple[tuple[str, Fraction], ...] = ()
    uncountable: tuple[str, ...] = ()  # claims the budget cannot count, each with why
    problems: tuple[str, ...] = ()  # why the claims cannot be said in device-plugin words
    notes: tuple[str, ...] = ()  # choices made reading them, said when the pod is translated

    @property
    def any(self) -> bool:
        """Whether the pod names a claim that gives, or may give, GPUs."""
        return bool(self.charges or self.uncountable)

    def blocking(self, dry_run: bool) -> tuple[str, ...]:
        """The claims a GPU budget must refuse the pod for. A dry run creates no template, so one
        gpuport names for a pod it translated (its claims are named gpuport-…) is not held against it."""
        skipped = f"claim {TEMPLATE_PREFIX}"
        return tuple(why for why in self.uncountable if not (dry_run and why.startswith(skipped)))

    def own(self) -> GpuUse:
        """The charge of the claims made for this pod alone (from templates)."""
        return sum((c.use for c in self.charges if not c.shared_as), NO_GPU)

    def shared(self) -> dict[str, GpuUse]:
        """The charge of each claim made ahead, by its ResourceClaim name."""
        return {c.shared_as: c.use for c in self.charges if c.shared_as}


NO_CLAIMS = PodClaims()


@dataclass
class _Claim:
    name: str
    source: str  # as the lookup knows it
    made_from: str
    requests: dict[str, RequestReading]  # by name, for the containers that name one
    whole_claim: list[str]
    # Every request as written: the budget counts each, even two of one name (the API server refuses
    # those; a file read offline may hold them).
    readings: list[RequestReading]
    standalone: bool  # made ahead (resourceClaimName): pods may share it

    @property
    def gpu(self) -> list[RequestReading]:
        return [r for r in self.readings if r.gpu]


@dataclass(frozen=True)
class ClaimSource:
    """Where one of a pod's claims is read from: `key` for the lookup, and whether it is a claim made
    ahead that pods may share."""

    name: str  # the pod's name for the claim
    key: str
    made_from: str
    shared: bool


def claim_sources(pod: Mapping[str, Any]) -> list[ClaimSource]:
    """The pod's claims and where each is read from. A claim made from a template is read from the
    ResourceClaim the cluster made of it once the pod's status names it (a running pod): the template
    may since have been deleted or made anew, the claim (immutable, held while the pod uses it) not."""
    spec = pod.get("spec")
    status = pod.get("status")
    entries = spec.get("resourceClaims") if is_map(spec) else None
    made = status.get("resourceClaimStatuses") if is_map(status) else None
    generated = {
        s["name"]: s["resourceClaimName"]
        for s in (made if isinstance(made, list) else ())
        if is_map(s) and isinstance(s.get("name"), str) and isinstance(s.get("resourceClaimName"), str)
    }
    found = []
    for entry in entries if isinstance(entries, list) else ():
        if not is_map(entry) or not isinstance(entry.get("name"), str):
            continue  # the API server refuses such a pod; nothing to read
        name, template, claim = (
            entry["name"],
            entry.get("resourceClaimTemplateName"),
            entry.get("resourceClaimName"),
        )
        if isinstance(template, str) and template:
            if name in generated:
                said = f"ResourceClaim {generated[name]} made from ResourceClaimTemplate {template}"
                found.append(ClaimSource(name, STANDALONE + generated[name], said, False))
            else:
                found.append(ClaimSource(name, template, f"ResourceClaimTemplate {template}", False))
        elif isinstance(claim, str) and claim:
            found.append(ClaimSource(name, STANDALONE + claim, f"ResourceClaim {claim}", True))
    return found


def class_standing(objects: ClaimObjects | None) -> Callable[[str], bool]:
    """Whether a DeviceClass stands for an extended resource (KEP-5004), as far as `objects` (None:
    no cluster to ask) can tell; the class list is read only when a name needs it."""
    if objects is None:
        return _no_class

    def stands(name: str) -> bool:
        found = objects(EXTENDED_RESOURCES)
        standing = found.get("resources") if isinstance(found, Mapping) else None
        return isinstance(standing, Mapping) and isinstance(standing.get(name), str)

    return stands


def _no_class(_: str) -> bool:
    return False


def read_pod_claims(
    pod: Mapping[str, Any] | PodRead,
    objects: ClaimObjects,
    maps: tuple[CloudMap, ...],
    catalogue: Catalogue,
    known: Callable[[str], bool] = lambda _: False,
) -> PodClaims:
    """The pod's claims, read through `objects` (its namespace's templates and claims, the cluster's
    device classes), and the extended resources a DeviceClass stands for (KEP-5004), which the
    scheduler turns into a claim of that class: charged like one. `known`: resource names a loaded
    map reads as GPU asks itself (counted as such)."""
    read = pod if isinstance(pod, PodRead) else read_pod(pod)
    claims: dict[str, _Claim] = {}
    charges: list[ClaimCharge] = []
    uncountable: list[str] = []
    problems: list[str] = []
    notes: list[str] = []
    for found_at in claim_sources(read.pod):
        name, source, made_from = found_at.name, found_at.key, found_at.made_from
        said = f"claim {name} ({made_from})"
        found = objects(source)
        claim_spec = mapping_at(found, ("spec", "spec")) if found is not None else None
        if claim_spec is None:
            # A lookup may say why instead (a template made again since the pod was charged by its uid).
            why = found.get("unread") if found is not None else None
            why = (
                why
                if isinstance(why, str) and why
                else "it could not be read (create it before the pod, or retry)"
            )
            uncountable.append(f"{said}: {why}")
            continue
        try:
            readings, whole_claim = read_claim_requests(claim_spec, maps, catalogue, objects)
        except UnreadableClaim as exc:
            uncountable.append(f"{said}: {exc}")
            continue
        claim = _Claim(
            name, source, made_from, {r.name: r for r in readings}, whole_claim, readings, found_at.shared
        )
        if not claim.gpu:  # another driver's devices (an IMEX channel, a NIC): not GPUs, left alone
            classes = ", ".join(sorted(_classes_named(claim_spec))) or "no device class"
            notes.append(
                f"claim {name} ({made_from}) kept as written: it gives no GPU ({classes}); the "
                "cluster needs the driver that serves it"
            )
            continue
        claims[name] = claim
        charge, why = _charge(claim, catalogue)
        if charge is None:
            uncountable.append(f"{said}: {why}")
        else:
            charges.append(charge)
        notes += [f"claim {name}: {r.note}" for r in claim.gpu if r.note]
        problems += _claim_problems(claim, said)
    for said, extended in _extended_charges(read.containers, objects, maps, catalogue, known):
        if isinstance(extended, str):
            uncountable.append(f"{said}: {extended}")
        elif extended.use != NO_GPU:
            charges.append(extended)
    uses, container_charges = _uses(read.containers, claims, catalogue, problems)
    return PodClaims(
        tuple(uses),
        tuple(charges),
        tuple(container_charges.items()),
        tuple(uncountable),
        tuple(dict.fromkeys(problems)),
        tuple(notes),
    )


def _classes_named(value: Any) -> set[str]:
    """Every deviceClassName in a claim's spec, whatever the API version nests it under."""
    if isinstance(value, Mapping):
        named = value.get("deviceClassName")
        found = {named} if isinstance(named, str) else set()
        return found.union(*(_classes_named(v) for k, v in value.items() if k != "deviceClassName"))
    if isinstance(value, list):
        return set().union(*(_classes_named(v) for v in value))
    return set()


def stood_for(read: PodRead, objects: ClaimObjects) -> bool:
    """Whether a DeviceClass stands for one of the names the pod's containers ask for (KEP-5004),
    even one a map reads: the scheduler may give that class's devices for it."""
    found = objects(EXTENDED_RESOURCES)
    standing = found.get("resources") if isinstance(found, Mapping) else None
    return isinstance(standing, Mapping) and any(n in standing for n in read.resource_names)


def _extended_charges(
    found_in: Sequence[ContainerRef],
    objects: ClaimObjects,
    maps: tuple[CloudMap, ...],
    catalogue: Catalogue,
    known: Callable[[str], bool],
) -> list[tuple[str, ClaimCharge | str]]:
    """A charge (or why none can be made) per container resource a DeviceClass stands for. Init
    containers are added like the others: what the scheduler's claim holds for them is never more."""
    found = objects(EXTENDED_RESOURCES)
    standing = found.get("resources") if isinstance(found, Mapping) else None
    standing = standing if isinstance(standing, Mapping) else {}
    # The classes could not be listed: any name no map reads may be one a class gives GPUs for. Refused
    # where a budget applies, like a template that cannot be read; never passed as free.
    unread = found.get("unread") if isinstance(found, Mapping) else None
    charged: list[tuple[str, ClaimCharge | str]] = []
    for container in found_in:
        limits, requests = container.limits, container.requests
        for resource in dict.fromkeys([*limits, *requests]):
            said = f"{container.label} {resource}"
            if resource.startswith(CLASS_RESOURCE_PREFIX):
                device_class: Any = resource.removeprefix(CLASS_RESOURCE_PREFIX)
            else:
                device_class = standing.get(resource)
                if (
                    isinstance(unread, str)
                    and unread
                    and is_extended_resource(resource)
                    and not known(resource)
                ):
                    charged.append((said, f"{unread}, so gpuport cannot tell which devices it gives"))
                    continue
            if not isinstance(device_class, str) or not device_class:
                continue
            try:
                amount = quantity.parse(limits.get(resource, requests.get(resource)))
            except quantity.QuantityError:
                continue  # the checks refuse it
            if not quantity.is_whole(amount) or amount < 0:
                charged.append((said, f"{amount} is not a whole number of devices"))
                continue
            reading = extended_request(resource, int(amount), device_class, maps, catalogue, objects)
            if not reading.gpu:
                continue
            charge = device_charge(reading, catalogue)
            if charge is None:
                charged.append(
                    (said, reading.uncountable or f"device class {device_class} cannot be counted")
                )
                continue
            if known(resource) and not resource.startswith(CLASS_RESOURCE_PREFIX):
                # A map reads the name and charges the container its meaning; the scheduler gives the
                # class's devices instead wherever no device plugin offers the name: the charge is
                # the larger, so only what the class's devices give beyond the name's meaning is added.
                meant = _name_equivalents(resource, maps, catalogue) * int(amount)
                if charge.equivalents <= meant:
                    continue
                charge = GpuUse(charge.equivalents - meant, charge.memory_mib)
            charged.append((said, ClaimCharge(said, f"DeviceClass {device_class}", "", charge)))
    return charged


def _name_equivalents(resource: str, maps: tuple[CloudMap, ...], catalogue: Catalogue) -> Fraction:
    """The least GPU-equivalents one unit of a name a map reads is charged as a container's ask: a
    MIG profile's share of the GPU that has it where that share is least (a 1g.10gb: 1/7 of an H100,
    where an A100 40GB's is 1/4), a whole GPU for a whole-GPU name, and nothing for a share (which may
    be charged far less than a GPU)."""
    for cloud_map in maps:
        profile = cloud_map.mig.profile_of(resource)
        if profile is not None:
            holders = [
                m.slice_share(profile) for m in catalogue.models.values() if profile.name in m.profiles
            ]
            return min(holders, default=Fraction(profile.compute, 7))
    return Fraction(1) if any(resource == m.whole_gpu for m in maps) else Fraction(0)


def device_charge(reading: RequestReading, catalogue: Catalogue) -> GpuUse | None:
    """GPU-equivalents and GPU memory (MiB) a request may take; None when it cannot be counted. A
    firstAvailable request takes its largest alternative, measure by measure."""
    if reading.options:
        charges = [device_charge(o, catalogue) for o in reading.options if o.gpu]
        if any(c is None for c in charges):
            return None
        return reduce(GpuUse.most, (c for c in charges if c is not None), NO_GPU)
    if not reading.gpu:
        return NO_GPU
    if reading.count is None:
        return None
    if reading.kind == "mig" and reading.profile is not None:
        share = catalogue.slice_share(reading.profile, reading.models)
        return GpuUse(share * reading.count, reading.profile.memory_gb * 1024 * reading.count)
    if reading.gpus is not None:
        # allocationMode All: the GPUs the node's devices are on, partitions as their share of one.
        return GpuUse(reading.gpus, math.ceil(reading.largest_mib * reading.gpus))
    # A whole GPU, a partition, or a MIG slice of no profile said: at most a whole GPU each, with the
    # memory of the largest GPU it may be.
    return GpuUse(Fraction(reading.count), reading.largest_mib * reading.count)


def _charge(claim: _Claim, catalogue: Catalogue) -> tuple[ClaimCharge | None, str]:
    total = NO_GPU
    for reading in claim.gpu:
        charge = device_charge(reading, catalogue)
        if charge is None:
            why = reading.uncountable or next((o.uncountable for o in reading.options if o.uncountable), "")
            return None, why or f"request {reading.name!r} cannot be counted"
        total += charge
    shared_as = claim.source.removeprefix(STANDALONE) if claim.standalone else ""
    return ClaimCharge(claim.name, claim.made_from, shared_as, total), ""


def _claim_problems(claim: _Claim, said: str) -> list[str]:
    """Why this claim as a whole cannot be said in device-plugin words."""
    found = [f"{said}: {why}" for why in claim.whole_claim]
    found += [f"{said}: {r.inexact}" for r in claim.gpu if r.inexact]
    others = [r.name for r in claim.readings if not r.gpu]
    if others:
        found.append(
            f"{said} asks for GPUs and other devices (request {', '.join(others)}) in one claim; "
            "split them so the GPUs can become a device-plugin ask"
        )
    if claim.standalone:
        found.append(
            f"claim {claim.name} is {claim.made_from}, made ahead and possibly shared by several pods "
            f"(spec.resourceClaims[name={claim.name}].resourceClaimName); device plugins cannot share GPUs "
            "between pods: use a ResourceClaimTemplate"
        )
    return found


def _uses(
    found_in: Sequence[ContainerRef],
    claims: Mapping[str, _Claim],
    catalogue: Catalogue,
    problems: list[str],
) -> tuple[list[ClaimUse], dict[str, Fraction]]:
    """Each container's GPU claims in device-plugin words, and what they give it in GPU-equivalents."""
    uses: list[ClaimUse] = []
    given: dict[str, Fraction] = {}
    running: dict[tuple[str, str], list[str]] = {}  # (claim, request) → containers running at once
    used: set[str] = set()
    for container in found_in:
        readings: list[RequestReading] = []
        names: list[str] = []
        for claim_name, request in _claim_refs(container.spec):
            claim = claims.get(claim_name)
            if claim is None:
                continue
            used.add(claim_name)
            if request and request not in claim.requests:
                problems.append(
                    f"{container.label} uses request {request} of claim {claim_name}, which has none such"
                )
                continue
            chosen = [claim.requests[request]] if request else claim.gpu
            readings += [r for r in chosen if r.gpu]
            names.append(claim_name)
            if container.runs_beside_apps:
                for reading in chosen:
                    running.setdefault((claim_name, reading.name), []).append(container.label)
        if not readings:
            continue
        charges = [device_charge(r, catalogue) for r in readings]
        given[container.label] = sum((c.equivalents for c in charges if c is not None), Fraction(0))
        if len(set(names)) != 1:
            problems.append(
                f"{container.label} uses {len(set(names))} GPU claims; device plugins give one ask"
            )
            continue
        claim = claims[names[0]]
        try:
            exact = [r.exactly() for r in readings]
        except UnreadableClaim:
            continue  # said once for the claim
        kinds = {(d.kind, d.vendor, d.models, d.profile, d.avoid) for d in exact}
        if len(kinds) != 1:
            problems.append(
                f"{container.label} uses claim {claim.name}, which asks for {len(kinds)} kinds of device"
            )
            continue
        template = claim.source.removeprefix(STANDALONE)
        total = replace(exact[0], count=sum(d.count for d in exact))
        uses.append(ClaimUse(container, claim.name, template, total))
    for (claim_name, request), labels in running.items():
        if len(labels) > 1:
            what = f"claim {claim_name}" + (
                f" (request {request})" if len(claims[claim_name].requests) > 1 else ""
            )
            problems.append(
                f"{what} is shared by {' and '.join(labels)}; "
                "device plugins cannot share GPUs between containers"
            )
    for name in claims.keys() - used:
        problems.append(
            f"claim {name} is used by no container (spec.containers[*].resources.claims); device plugins "
            "give GPUs to containers only"
        )
    return uses, given


def _claim_refs(container: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(claim, request or "") of each of a container's resources.claims."""
    resources = container.get("resources")
    used = resources.get("claims") if is_map(resources) else None
    if not isinstance(used, list):
        return []
    found = []
    for ref in used:
        if is_map(ref) and isinstance(ref.get("name"), str):
            request = ref.get("request")
            found.append((ref["name"], request if isinstance(request, str) else ""))
    return found


NOT_BESIDE: Mapping[str, Any] = {
    "unread": "it is not in the files given: pass the file that defines it (or the ComputeDomain whose "
    "channel makes it) to read what it asks for"
}


class ClaimsBeside:
    """The ResourceClaimTemplates, ResourceClaims and DeviceClasses among a set of manifests: a
    workload's claims are read from those written beside it (gpuport translate, preflight)."""

    def __init__(self, documents: list[Any]):
        self.found: dict[tuple[str, str], Mapping[str, Any]] = {}
        made: dict[tuple[str, str], Mapping[str, Any]] = {}  # by the drivers of objects written here
        for doc in documents:
            for namespace, name, template in channel_templates(doc):
                made[(namespace, name)] = template
                made[("", DEVICE_CLASS + CHANNEL_CLASS)] = channel_class()
            key = claim_object_key(doc)
            if key is None:
                continue
            if doc.get("kind") == "ResourceClaim":  # in a template's shape, as the lookup answers
                self.found[key] = {"spec": {"spec": doc.get("spec") or {}}}
            else:
                self.found[key] = doc
        self.found = {**made, **self.found}  # what is written here wins

    def lookup(self, namespace: str) -> ClaimObjects:
        def find(key: str) -> Mapping[str, Any] | None:
            if key.startswith(DEVICE_CLASS):  # cluster-scoped
                return self.found.get(("", key))
            found = self.found.get((namespace, key))
            if found is None and (
                key.startswith(STANDALONE) or ("/" not in key and key != EXTENDED_RESOURCES)
            ):
                # A claim or template (a name has no "/") written nowhere among these files: the
                # webhook's "create it before the pod" says nothing to someone translating files.
                return NOT_BESIDE
            return found

        return find


def namespace_of(doc: Any) -> str:
    metadata = doc.get("metadata") if is_map(doc) else None
    namespace = metadata.get("namespace") if is_map(metadata) else None
    return namespace if isinstance(namespace, str) else ""


def claim_object_key(doc: Any) -> tuple[str, str] | None:
    """(namespace, key as the lookup knows it) of a ResourceClaimTemplate, ResourceClaim or
    DeviceClass; None for any other document."""
    if not is_map(doc) or not dra_api.is_dra_api(str(doc.get("apiVersion", ""))):
        return None
    metadata = doc.get("metadata")
    name = metadata.get("name") if is_map(metadata) else None
    kind = doc.get("kind")
    if not isinstance(name, str) or kind not in ("ResourceClaimTemplate", "ResourceClaim", "DeviceClass"):
        return None
    if kind == "DeviceClass":
        return "", DEVICE_CLASS + name
    return namespace_of(doc), (STANDALONE + name if kind == "ResourceClaim" else name)
