"""One container's GPU ask in the target's words: the resources, node labels and annotations that
ask for the same thing there (a MIG slice on a model that has it, a share sized in the target's
unit...), or why the target cannot give it. The pod-level choices (which models, which selectors
stay) are translate.py's; this module answers per ask.

Why one module of ~300 lines: the kinds of ask fall back on one another (a fraction becomes a slice or
a share by policy, a slice whole GPUs), so their placements call each other.
"""

import math
from collections.abc import Mapping
from dataclasses import replace
from fractions import Fraction
from types import MappingProxyType
from typing import NamedTuple

from webhook.core.asks.annotation_share import SharedAsk
from webhook.core.asks.demand import ContainerAsk
from webhook.core.rewriting.dra import DeviceAsk
from webhook.core.vocabulary.catalogue import Catalogue, GpuModel, MigProfile, smallest_model_fit
from webhook.core.vocabulary.errors import CannotSay
from webhook.core.vocabulary.platform import CloudMap
from webhook.core.vocabulary.quantity import MIB


class Untranslatable(CannotSay):
    """The pod asks for something the target cannot give; the messages say what it offers instead."""

    def __init__(self, messages: list[str]):
        self.messages = messages
        super().__init__("; ".join(messages))


class TargetAsk(NamedTuple):
    """The target-side answer for one container: resources, plus labels the node must carry."""

    resources: dict[str, str]
    node_labels: dict[str, tuple[str, ...]]  # label → acceptable values
    models: tuple[str, ...]  # the GPU models this ask now needs (empty: any the resource implies)
    note: str  # what changed, for the warning
    annotations: Mapping[str, str] = MappingProxyType({})  # pod annotations the form needs
    device: DeviceAsk | None = None  # on a DRA cluster: what the container's claim asks for
    mig: MigProfile | None = None  # the slice it asks for there, whose node set-up is said


def translate_ask(
    ask: ContainerAsk,
    models: tuple[str, ...],
    target: CloudMap,
    catalogue: Catalogue,
    avoid: tuple[str, ...] = (),
) -> TargetAsk:
    """`avoid`: models the pod refuses, written into a DRA claim as a refusal."""
    if ask.vendor not in target.vendors:
        raise Untranslatable(
            [
                f"asks for an {ask.vendor.upper()} GPU ({ask.describe()}); "
                f"{target.name} offers {_vendors_words(target)} GPUs only"
            ]
        )
    if len(target.vendors) > 1:
        # One node has one vendor's GPUs: an ask pinned to another vendor's models never runs.
        other = [m for m in models if catalogue.models[m].vendor != ask.vendor]
        if other:
            verb = "is" if len(other) == 1 else "are"
            raise Untranslatable(
                [
                    f"asks for an {ask.vendor.upper()} GPU ({ask.describe()}) on {' or '.join(other)}, "
                    f"which {verb} not {ask.vendor.upper()}"
                ]
            )
    if ask.vendor != target.vendor:
        return _place_other_vendor(ask, target)
    if ask.kind == "whole":
        if target.dra is not None:
            extended = target.dra.extended_resource("whole", "")
            if extended and not models and not avoid:  # KEP-5004: the cluster makes the claim itself
                return TargetAsk({extended: str(ask.count)}, {}, (), "")
            return TargetAsk({}, {}, (), "", device=DeviceAsk("gpu", ask.count, models, avoid))
        return TargetAsk({target.whole_gpu: str(ask.count)}, {}, (), "")
    if ask.kind == "mig":
        return _place_mig(ask, ask.mig_profile, models, target, catalogue, avoid)
    if ask.kind == "shared":
        return _place_shared(ask, models, target, catalogue)
    return _place_fraction(ask, models, target, catalogue)


def _vendors_words(target: CloudMap) -> str:
    return " and ".join(v.upper() for v in target.vendors)


def _place_other_vendor(ask: ContainerAsk, target: CloudMap) -> TargetAsk:
    """An ask for GPUs of a vendor the platform has beside its own (`whole_by_vendor`): whole GPUs, by
    that vendor's resource; its MIG and sharing are the platform's own vendor's, never these GPUs'."""
    resource = target.whole_for(ask.vendor)
    if ask.kind != "whole":
        raise Untranslatable(
            [
                f"asks for part of an {ask.vendor.upper()} GPU ({ask.describe()}); {target.name} gives "
                f"{ask.vendor.upper()} GPUs whole only ({resource})"
            ]
        )
    return TargetAsk({resource: str(ask.count)}, {}, (), "")


def mig_candidates(models: tuple[str, ...], target: CloudMap, catalogue: Catalogue) -> list[GpuModel]:
    """MIG-capable models to place a slice on, each limited to the profiles the platform offers for
    it (the map's `mig.profiles`: a model it does not list has none there) and to those the cluster
    has set up (`offered_profiles`, from the map or the inventory) when it has any of them."""
    ids = models or target.models_offered(catalogue)
    by_model = target.mig.profiles
    found = []
    for model in (catalogue.models[m] for m in ids if catalogue.models[m].mig_capable):
        if by_model:
            sold = by_model.get(model.id, ())
            if not sold:
                continue
            model = replace(model, profiles={p: n for p, n in model.profiles.items() if p in sold})
        if target.offered_profiles:
            present = {p: n for p, n in model.profiles.items() if p in target.offered_profiles}
            model = replace(model, profiles=present) if present else model
        found.append(model)
    return found


def _place_mig(
    ask: ContainerAsk,
    wanted: MigProfile,
    models: tuple[str, ...],
    target: CloudMap,
    catalogue: Catalogue,
    avoid: tuple[str, ...] = (),
) -> TargetAsk:
    if target.mig.form == "by-memory":
        return _place_mig_by_memory(ask, wanted, target)
    if target.dra is not None and not target.dra.mig_class:
        raise Untranslatable(
            [f"asks for MIG {wanted.name}; {target.name} has no device class for MIG slices"]
        )
    if target.mig.form == "none" and target.dra is None:
        if target.mig_to_whole == "allow":
            return TargetAsk(
                {target.whole_gpu: str(ask.count)}, {}, (), " (no MIG here: whole GPUs, by policy)"
            )
        raise Untranslatable(
            [f"asks for MIG {wanted.name}; {target.name} offers no MIG slices. {_offer(target, catalogue)}"]
        )
    candidates = mig_candidates(models, target, catalogue)
    fit = smallest_model_fit(candidates, wanted)
    if fit is None:
        offered = sorted(
            {p.name for g in candidates for p in g.mig_profiles()}, key=lambda n: MigProfile.parse(n)
        )
        raise Untranslatable(
            [
                f"asks for MIG {wanted.name}; no {target.name} GPU has a slice with ≥ {wanted.compute}g and "
                f"≥ {wanted.memory_gb}gb (offered: {', '.join(offered) or 'none'})"
            ]
        )
    model, profile = fit
    note = ""
    if profile != wanted:
        more = "; more compute" if profile.compute > wanted.compute else ""
        note = f" ({model.id} has no {wanted.name}{more})"
    if target.dra is not None:
        # Pinned models stay pinned (those with the profile); an unpinned slice may be cut from any GPU.
        on = tuple(m for m in models if profile.name in catalogue.models[m].profiles)
        extended = target.dra.extended_resource("mig", profile.name)
        if extended and not on and not avoid:  # KEP-5004: a device class stands for this profile
            return TargetAsk({extended: str(ask.count)}, {}, (), note, mig=profile)
        device = DeviceAsk("mig", ask.count, on, avoid, profile.name)
        return TargetAsk({}, {}, (), note, device=device, mig=profile)
    if target.mig.form == "mixed":
        return TargetAsk({target.mig.resource_for(profile): str(ask.count)}, {}, (), note, mig=profile)
    if target.mig.form == "single":
        # The product label names model and slice at once: NVIDIA-H100-80GB-HBM3-MIG-1g.10gb.
        products = tuple(f"{name}-MIG-{profile.name}" for name in model.names)
        labels = {target.mig.product_label: products}
        return TargetAsk({target.whole_gpu: str(ask.count)}, labels, (), note, mig=profile)
    labels = {target.mig.label: (profile.name,)}
    # One partition size names the same slice on every GPU the platform cuts it from (GKE's 3g.40gb on an
    # A100 80GB and an H100 80GB): each such model stays acceptable, never only the first found.
    same = tuple(g.id for g in candidates if profile.name in g.profiles) or (model.id,)
    return TargetAsk({target.whole_gpu: str(ask.count)}, labels, same, note, mig=profile)


def _offers_mig(target: CloudMap) -> bool:
    """Whether the target gives MIG slices that isolate memory as asked (not cut by a layer from a
    memory share, which is what by-memory is)."""
    return bool(target.mig_offered) and target.mig.form != "by-memory"


def _place_mig_by_memory(ask: ContainerAsk, wanted: MigProfile, target: CloudMap) -> TargetAsk:
    """HAMi's dynamic MIG: the layer cuts a MIG instance with at least the memory asked for, so the
    slice is written as a share of that memory (and of the compute, where the layer takes cores)."""
    form = target.shared
    resources = {form.memory_resource: _memory_quantity(wanted.memory_gb * 1024, form.memory_unit_bytes)}
    if form.count_resource:
        resources[form.count_resource] = str(ask.count)
    note = f" (MIG {wanted.name}: {target.name} cuts an instance with at least this memory)"
    return TargetAsk(resources, {}, (), note, dict(target.mig.annotations))


def _place_shared(
    ask: ContainerAsk, models: tuple[str, ...], target: CloudMap, catalogue: Catalogue
) -> TargetAsk:
    share = ask.gpu_share
    form = target.shared
    if share.isolated and share.memory_mib and _offers_mig(target):
        # The pod asked for a MIG instance cut to its memory: a slice keeps the memory isolated, which
        # a software share would not.
        wanted = MigProfile(1, math.ceil(share.memory_mib / 1024))
        placed = _place_mig(ask, wanted, models, target, catalogue)
        return placed._replace(note=" (MIG, as asked: memory isolated)")
    if share.isolated and share.memory_mib and target.mig.form == "by-memory" and form.memory_resource:
        # Another layer's dynamic MIG: this one cuts an instance of at least that memory when asked so.
        resources = {form.memory_resource: _memory_quantity(share.memory_mib, form.memory_unit_bytes)}
        if form.count_resource:
            resources[form.count_resource] = str(ask.count)
        note = f" (dynamic MIG, as asked: {target.name} cuts an instance with at least this memory)"
        return TargetAsk(resources, {}, (), note, dict(target.mig.annotations))
    if target.dra is not None:
        # Sharing under DRA is one ResourceClaim that several pods reference, with the driver's
        # sharing settings on it: a choice of which pods share, which a pod's own ask cannot make.
        raise Untranslatable(
            [
                f"asks for a shared GPU; {target.name} asks for GPUs by ResourceClaim, and a shared GPU "
                "there is one claim several pods reference, which gpuport does not make up. "
                f"{_offer(target, catalogue)}"
            ]
        )
    if not form.offered:
        raise Untranslatable(
            [f"asks for a shared GPU; {target.name} offers no GPU sharing. {_offer(target, catalogue)}"]
        )
    lost = " (memory limit not enforced by time-slicing)" if share.memory_mib or share.memory_percent else ""
    if form.form == "resource":
        return TargetAsk({form.resource: str(ask.count)}, {}, (), lost)
    if form.form == "annotation":
        return _place_annotation_share(ask, share, target)
    if form.form == "label":
        if form.max_per_container and ask.count > form.max_per_container:
            raise Untranslatable(
                [
                    f"asks for {ask.count} shared GPUs in one container; {target.name} allows at most "
                    f"{form.max_per_container} {target.whole_gpu} per container on shared GPUs. "
                    "Ask for whole GPUs, or split the work over containers"
                ]
            )
        return TargetAsk({target.whole_gpu: str(ask.count)}, {form.label: (form.values[0],)}, (), lost)
    if share.memory_percent is not None and form.memory_percent_resource and share.memory_mib is None:
        resources = {form.memory_percent_resource: str(share.memory_percent)}
    else:
        memory = _share_memory_mib(share, models, catalogue)
        if memory is None:
            raise Untranslatable([f"{_share_words(share, models)}; {_memory_advice(target, share)}"])
        resources = {form.memory_resource: _memory_quantity(memory, form.memory_unit_bytes)}
    if form.count_resource and (ask.count != 1 or not form.count_optional):
        resources[form.count_resource] = str(ask.count)
    if form.core_resource and share.core_percent is not None:
        resources[form.core_resource] = str(math.ceil(share.core_percent * form.core_per_gpu / 100))
    return TargetAsk(resources, {}, (), "")


def _place_annotation_share(ask: ContainerAsk, share: SharedAsk, target: CloudMap) -> TargetAsk:
    """KAI: one share of a GPU per pod, by annotation, for the first app container or the one the
    form's container annotation names; no GPU resource."""
    form = target.shared
    named = ask.list_name != "containers" or ask.index != 0
    if ask.count != 1 or (named and not form.container_annotation):
        raise Untranslatable(
            [
                f"asks for {ask.count} shared GPUs; {target.name} gives one share per pod, "
                "to its first container"
            ]
        )
    # The share goes to the container that asked it, which KAI finds by name (init containers first).
    given_to = {form.container_annotation: ask.name} if named else {}
    if share.memory_mib is not None:
        annotation = {form.memory_annotation: str(share.memory_mib)}
    elif (percent := share.memory_percent or share.core_percent) is not None:
        annotation = {form.fraction_annotation: f"{percent / 100:g}"}
    else:
        raise Untranslatable(
            [
                f"asks for a shared GPU without a size; {target.name} shares GPUs by "
                f"{form.fraction_annotation} or {form.memory_annotation} (MiB): ask with one of them"
            ]
        )
    return TargetAsk({}, {}, (), "", {**annotation, **given_to})


def _share_memory_mib(share: SharedAsk, models: tuple[str, ...], catalogue: Catalogue) -> int | None:
    """MiB of GPU memory a share means: as asked, or its percentage of the one model it is pinned to."""
    if share.memory_mib is not None:
        return share.memory_mib
    percent = share.memory_percent if share.memory_percent is not None else share.core_percent
    if percent is None or len(models) != 1:
        return None
    return (catalogue.models[models[0]].memory_bytes >> 20) * percent // 100


def _share_words(share: SharedAsk, models: tuple[str, ...]) -> str:
    which = f"on one of {' or '.join(models)}" if models else "on no particular GPU model"
    if share.memory_percent is not None:
        return f"asks for {share.memory_percent}% of a GPU's memory {which}"
    if share.core_percent is not None:
        return f"asks for {share.core_percent}% of a GPU's cores {which}"
    return "asks for a shared GPU without a memory size"


def _memory_advice(target: CloudMap, share: SharedAsk) -> str:
    form = target.shared
    if share.memory_percent is None and share.core_percent is None:
        # No size at all (GKE's time-sharing or MPS): no model named would give one.
        return (
            f"{target.name} shares GPUs by memory ({form.memory_resource}): ask for "
            f"{form.memory_resource} directly, the GPU memory the container needs"
        )
    return (
        f"{target.name} shares GPUs by memory ({form.memory_resource}): name one GPU model in a node "
        f"selector so gpuport can size the share, or ask for {form.memory_resource} directly"
    )


def _place_fraction(
    ask: ContainerAsk, models: tuple[str, ...], target: CloudMap, catalogue: Catalogue
) -> TargetAsk:
    amount = ask.gpu_fraction
    if target.fractional_policy == "shared" and amount < 1:
        shared = ContainerAsk(
            ask.list_name,
            ask.index,
            ask.name,
            "shared",
            1,
            ask.vendor,
            written=ask.written,
            share=_fraction_share(amount, models, catalogue),
        )
        return _place_shared(shared, models, target, catalogue)
    if target.fractional_policy == "mig" and amount < 1:
        if len(models) != 1 or not catalogue.models[models[0]].mig_capable:
            raise Untranslatable(
                [
                    f"asks for {float(amount):g} GPU; name one MIG-capable GPU model in a node selector "
                    "so gpuport can size the slice"
                ]
            )
        model = catalogue.models[models[0]]
        wanted = MigProfile(math.ceil(amount * model.compute_slices), math.ceil(amount * model.memory_gb))
        return _place_mig(ask._replace(count=1), wanted, models, target, catalogue)
    raise Untranslatable([f"asks for {float(amount):g} GPU; GPUs are whole units"])


def _fraction_share(amount: Fraction, models: tuple[str, ...], catalogue: Catalogue) -> SharedAsk:
    if len(models) == 1:
        return SharedAsk(
            memory_mib=math.ceil((catalogue.models[models[0]].memory_bytes >> 20) * amount),
            core_percent=math.ceil(amount * 100),
        )
    return SharedAsk(core_percent=math.ceil(amount * 100))


def _memory_quantity(mib: int, unit_bytes: int) -> str:
    if unit_bytes == 1:
        return f"{mib}Mi"
    return str(math.ceil(mib * MIB / unit_bytes))


def _offer(target: CloudMap, catalogue: Catalogue) -> str:
    if target.dra is not None:
        classes = [f"whole GPUs (device class {target.dra.whole_class})"]
        if target.dra.mig_class:
            classes.append(f"MIG slices (device class {target.dra.mig_class})")
        return f"{target.name} offers: {'; '.join(classes)}"
    options = [f"whole GPUs ({target.whole_gpu})", *target.partial_gpu_options(catalogue)]
    return f"{target.name} offers: {'; '.join(options)}"
