"""The GPU catalogue as values: models, MIG profiles, and the project's profile-matching rule."""

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from webhook.core.vocabulary.errors import BadInput

PROFILE_PATTERN = re.compile(
    r"^(?P<compute>[1-9][0-9]*)g\.(?P<memory>[1-9][0-9]*)gb(?P<suffix>\+me|-me|\+me\.all|\+gfx)?$"
)
MEDIA_SUFFIXES = ("+me", "+me.all")
# How a GPU reaches the others in its node. sxm: a socketed module (NVIDIA SXM, OCP OAM) on a GPU-to-GPU
# fabric (NVLink/NVSwitch, Infinity Fabric); pcie: a PCIe card (at most pairs joined by a bridge). A
# multi-GPU job written for the one is not the same job on the other.
INTERCONNECTS = ("sxm", "pcie")


class ProfileError(BadInput):
    pass


@dataclass(frozen=True, order=True)
class MigProfile:
    """A MIG profile such as 3g.40gb or 1g.10gb+me: compute slices, memory and an engine suffix."""

    compute: int
    memory_gb: int
    suffix: str = ""

    @classmethod
    def parse(cls, name: str) -> "MigProfile":
        match = PROFILE_PATTERN.match(name)
        if not match:
            raise ProfileError(f"{name!r} is not a MIG profile (expected <slices>g.<memory>gb, e.g. 1g.10gb)")
        return cls(int(match["compute"]), int(match["memory"]), match["suffix"] or "")

    @property
    def name(self) -> str:
        return f"{self.compute}g.{self.memory_gb}gb{self.suffix}"

    @property
    def has_media(self) -> bool:
        return self.suffix in MEDIA_SUFFIXES

    def covers(self, wanted: "MigProfile") -> bool:
        return self.compute >= wanted.compute and self.memory_gb >= wanted.memory_gb


@dataclass(frozen=True)
class GpuModel:
    id: str
    vendor: str
    family: str
    memory_gb: int  # as sold ("80GB"): names the model and its MIG profiles; what substitutes compare
    memory_mib: int = 0  # as NVML reports it: what "at least this much memory" is answered with
    gpu_class: str = ""  # training | inference: what the model is bought for; "" unclassified
    names: tuple[str, ...] = ()
    pci_ids: tuple[str, ...] = ()
    compute_slices: int = 0
    profiles: Mapping[str, int] = field(default_factory=dict)  # profile name → max instances
    architecture: str = ""  # as NVIDIA's DRA driver publishes it: "Hopper", "Ada Lovelace"
    compute_capability: tuple[int, int] | None = None  # (9, 0)
    interconnects: Mapping[str, str] = field(default_factory=dict)  # product name → sxm | pcie
    # The CPU of the hosts it is sold in, where not x86-64: "arm64" (GB200's Grace). An image built for
    # one does not run on the other, so a model is only ever replaced by one on the same hosts' CPU.
    host_cpu: str = ""

    @property
    def interconnect(self) -> str:
        """sxm or pcie when every product name of the model is sold that way; "" when it is sold both."""
        found = set(self.interconnects.values())
        return found.pop() if len(found) == 1 else ""

    @property
    def memory_bytes(self) -> int:
        return (self.memory_mib or self.memory_gb * 1024) * 2**20

    @property
    def mig_capable(self) -> bool:
        return bool(self.profiles)

    @property
    def memory_slices(self) -> int:
        """The MIG memory slices of the GPU: 8 where there are 7 compute slices (A100, H100, H200,
        B200...), as many as the compute slices where there are 4 (A30, RTX PRO 6000): MIG user guide,
        "Supported MIG Profiles"; tests/config pins it to every model of geometry/mig.yaml."""
        return 8 if self.compute_slices == 7 else self.compute_slices

    def memory_slots(self, profile: MigProfile) -> int:
        """The memory slices one instance of `profile` takes: its memory over one slice's, to the
        nearest (the names round the GB: a 1g.12gb on a 94 GB H100 NVL takes 1 of 8, 12 × 8 / 94 = 1.02;
        a 1g.35gb on an H200 2 of 8, 35 × 8 / 141 = 1.99). Pinned to geometry/mig.yaml's placements."""
        return max(1, round(Fraction(profile.memory_gb * self.memory_slices, self.memory_gb or 1)))

    def slice_share(self, profile: MigProfile) -> Fraction:
        """What one instance of `profile` takes of this GPU: the larger of its share of the compute
        slices and of the memory slices (a 1g.20gb on an H100 takes 1 of 7 compute slices but 2 of 8
        memory slices: 4 fit, so each holds 1/4 of the GPU)."""
        compute = Fraction(profile.compute, self.compute_slices or 7)
        if not self.memory_slices:
            return compute
        return max(compute, Fraction(self.memory_slots(profile), self.memory_slices))

    def mig_profiles(self) -> list[MigProfile]:
        return sorted(MigProfile.parse(name) for name in self.profiles)

    def smallest_fit(self, wanted: MigProfile) -> MigProfile | None:
        """The project rule: the smallest profile with ≥ the compute and ≥ the memory asked for;
        a media engine only when asked for, and graphics-enabled profiles only when asked for."""
        candidates = [
            p
            for p in self.mig_profiles()
            if p.covers(wanted)
            and (p.has_media == wanted.has_media)
            and (("gfx" in p.suffix) == ("gfx" in wanted.suffix))
        ]
        # Prefer the plain profile over "-me" twins of the same size.
        candidates.sort(key=lambda p: (p.compute, p.memory_gb, p.suffix != wanted.suffix, p.suffix))
        return candidates[0] if candidates else None


@dataclass(frozen=True)
class Catalogue:
    models: Mapping[str, GpuModel]

    def get(self, model_id: str) -> GpuModel | None:
        return self.models.get(model_id)

    def by_product_name(self, product: str) -> tuple[GpuModel, MigProfile | None] | None:
        """Model (and MIG profile) from a GFD product label: NVIDIA-H100-80GB-HBM3[-MIG-1g.10gb][-SHARED]."""
        base = product.removesuffix("-SHARED")
        profile = None
        if "-MIG-" in base:
            base, _, profile_name = base.partition("-MIG-")
            try:
                profile = MigProfile.parse(profile_name)
            except ProfileError:
                return None
        for model in self.models.values():
            if base in model.names:
                return model, profile
        return None

    def interconnect_of(self, product: str) -> str:
        """sxm | pcie of a GFD product name ("" when the catalogue does not say)."""
        found = self.by_product_name(product)
        return (
            found[0].interconnects.get(product.removesuffix("-SHARED").partition("-MIG-")[0], "")
            if found
            else ""
        )

    def slice_share(self, profile: MigProfile, models: Iterable[str] | None) -> Fraction:
        """A MIG slice's share of its GPU: the larger of its compute and its memory share there
        (GpuModel.slice_share). The GPU is one of `models` that has the profile, else any model that
        has it; of several, the one that makes the share largest (never undercount). A profile no
        model has counts its compute slices over 7."""
        pinned = [self.models[m] for m in sorted(models or ()) if m in self.models]
        holders = [m for m in pinned if profile.name in m.profiles] or [
            m for m in self.models.values() if profile.name in m.profiles
        ]
        return max((m.slice_share(profile) for m in holders), default=Fraction(profile.compute, 7))

    def compute_share(self, profile: MigProfile, models: Iterable[str] | None) -> Fraction:
        """A MIG slice's compute slices over its GPU's (the largest, as slice_share picks the GPU): the
        weight of its SMs in a utilisation figure, which is no charge (that is slice_share)."""
        pinned = [self.models[m] for m in sorted(models or ()) if m in self.models]
        holders = [m for m in pinned if profile.name in m.profiles] or [
            m for m in self.models.values() if profile.name in m.profiles
        ]
        return Fraction(profile.compute, min((m.compute_slices for m in holders), default=7))

    def ids(self) -> tuple[str, ...]:
        return tuple(self.models)

    def equivalent(self, model_id: str, offered: Iterable[str], any_class: bool = False) -> GpuModel | None:
        """The offered model of the same vendor (and class, unless `any_class`) with the least marketed
        memory that is still ≥ the source's, of the same family first: what the author could have
        meant, never a dearer kind of GPU. Memory is compared as sold (an L4 and an A10 are both 24 GB
        cards, though NVML gives the A10 6 MiB less): users buy GPUs by that figure, and the MiB NVML
        reports differ by driver and ECC, so comparing them would refuse equivalents. The hosts' CPU
        stays: a B200 job's x86-64 image does not run on a GB200's Grace host, nor the other way."""
        source = self.models[model_id]
        fits = [
            self.models[m]
            for m in offered
            if self.models[m].vendor == source.vendor
            and self.models[m].host_cpu == source.host_cpu
            and self.models[m].memory_gb >= source.memory_gb
            and (any_class or self.models[m].gpu_class == source.gpu_class)
        ]
        return min(fits, key=lambda g: (g.memory_gb, g.family != source.family, g.id)) if fits else None


def parse_catalogue(data: Mapping[str, Any]) -> Catalogue:
    models = {}
    for model_id, entry in data["models"].items():
        mig = entry.get("mig") or {}
        capability = entry.get("compute_capability")
        models[model_id] = GpuModel(
            id=model_id,
            vendor=entry["vendor"],
            family=entry["family"],
            gpu_class=entry.get("class", ""),
            memory_gb=entry["memory_gb"],
            memory_mib=entry.get("memory_mib", 0),
            architecture=entry.get("architecture", ""),
            compute_capability=_capability(capability) if capability else None,
            names=tuple(entry.get("names", ())),
            interconnects=_interconnects(entry),
            host_cpu=entry.get("host_cpu", ""),
            pci_ids=tuple(entry.get("pci_ids", ())),
            compute_slices=mig.get("compute_slices", 0),
            profiles=dict(mig.get("profiles", {})),
        )
    return Catalogue(models)


def _interconnects(entry: Mapping[str, Any]) -> dict[str, str]:
    """Product name → sxm | pcie: one word for every name, or a word per name."""
    given = entry.get("interconnect")
    if isinstance(given, str):
        return {name: given for name in entry.get("names", ())}
    return dict(given or {})


def _capability(text: str) -> tuple[int, int]:
    major, _, minor = text.partition(".")
    return int(major), int(minor or 0)


def smallest_model_fit(models: Iterable[GpuModel], wanted: MigProfile) -> tuple[GpuModel, MigProfile] | None:
    """Across several models, the smallest fitting profile; ties go to the model with less memory."""
    fits = [(profile, model) for model in models if (profile := model.smallest_fit(wanted)) is not None]
    if not fits:
        return None
    profile, model = min(fits, key=lambda f: (f[0].compute, f[0].memory_gb, f[1].memory_gb, f[1].id))
    return model, profile
