"""Every loaded platform's vocabulary at once (Dialects), and what its words mean: a node label's
key=value, an extended resource's name. A pod may be written for any loaded platform, so reading it
asks every map; the answers are remembered per Dialects (a new context starts afresh), bounded, as the
pods of one workload ask the same questions again and again.
"""

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from webhook.core.vocabulary.catalogue import Catalogue, MigProfile, ProfileError
from webhook.core.vocabulary.platform import CloudMap
from webhook.core.vocabulary.sharing import SharedForm

_K = TypeVar("_K")
_V = TypeVar("_V")


@dataclass(frozen=True)
class LabelMeaning:
    """What one node-label requirement key=value says about GPUs, in every loaded dialect."""

    names_models: bool = False  # some map names GPU models by this key
    models: frozenset[str] = frozenset()  # the models the value names there
    profile: MigProfile | None = None  # a MIG profile it names (partition size, -MIG- product)
    shared: bool = False  # it asks for a shared GPU (a sharing label, a -SHARED product)
    unparsed: tuple[str, ...] = ()  # "key=value" once per map whose partition label cannot parse it
    interconnect: str = ""  # sxm | pcie: how the GPUs of a node with it reach each other, where known


@dataclass(frozen=True)
class ResourceMeaning:
    """What an extended resource name is in the loaded dialects (the first map that reads it decides)."""

    accelerator: bool  # some map asks for GPUs by this name (whole, slice, share, memory, count...)
    kind: str = ""  # mig | shared | whole when a map names that kind of ask by it alone; "" otherwise
    vendor: str = ""
    profile: MigProfile | None = None  # kind mig: the slice


# The domains of GPU device plugins: NVIDIA's, AMD's ROCm plugin's and Intel's GPU plugin's (Intel's
# other plugins, sgx.intel.com, qat.intel.com, fpga.intel.com, give no GPUs). The maps add the domain
# of every whole-GPU name they read (Dialects.gpu_vendor_domains).
GPU_VENDOR_DOMAINS = frozenset({"nvidia.com", "amd.com", "gpu.intel.com"})

# Enough for every label value and resource name the loaded maps know, many times over; past it,
# meanings are worked out afresh rather than remembered, so pods naming endless made-up values cannot
# grow the memory.
MEANINGS_KEPT = 4096


def _remembered(known: dict[_K, _V], key: _K, work_out: Callable[[], _V]) -> _V:
    meaning = known.get(key)
    if meaning is None:
        meaning = work_out()
        if len(known) < MEANINGS_KEPT:
            known[key] = meaning
    return meaning


@dataclass(frozen=True)
class Dialects:
    """Every loaded platform's vocabulary: gpuport reads asks written for any of them."""

    maps: tuple[CloudMap, ...]
    catalogue: Catalogue

    @functools.cached_property
    def _label_meanings(self) -> dict[tuple[str, str], LabelMeaning]:
        return {}

    @functools.cached_property
    def _resource_meanings(self) -> dict[str, ResourceMeaning]:
        return {}

    def meanings_remembered(self) -> int:
        """How many label and resource meanings this vocabulary keeps: at most MEANINGS_KEPT of each,
        whatever pods name."""
        return len(self._label_meanings) + len(self._resource_meanings)

    @functools.cached_property
    def whole_gpu_names(self) -> frozenset[str]:
        """Every platform's whole-GPU resources (nvidia.com/gpu, amd.com/gpu, ...)."""
        return frozenset(name for m in self.maps for name in m.whole_names())

    @functools.cached_property
    def selections(self) -> dict[Any, Any]:
        """demand.read_selection's answers by the GPU-label requirements they came from, kept like the
        meanings (per Dialects, at most MEANINGS_KEPT); demand.py owns the type and fills it."""
        return {}

    @functools.cached_property
    def memory_forms(self) -> tuple[tuple[SharedForm, str, frozenset[str]], ...]:
        """(form, vendor, the resource names that make an ask a share: SharedForm.memory_share_names)
        of each map sharing GPUs by memory, in map order."""
        found = []
        for cloud_map in self.maps:
            names = cloud_map.shared.memory_share_names(cloud_map.whole_gpu)
            if names:
                found.append((cloud_map.shared, cloud_map.vendor, names))
        return tuple(found)

    @functools.cached_property
    def share_resource_names(self) -> frozenset[str]:
        """Every name of memory_forms at once: an ask naming none of them is no share by memory."""
        return frozenset().union(*(names for _, _, names in self.memory_forms))

    def resource_meaning(self, name: str) -> ResourceMeaning:
        """Remembered per Dialects (a new context reads afresh), at most MEANINGS_KEPT names."""
        known = self._resource_meanings.get(name)  # the usual answer, without building a closure
        if known is not None:
            return known
        return _remembered(self._resource_meanings, name, lambda: self._read_resource(name))

    def _read_resource(self, name: str) -> ResourceMeaning:
        if not any(m.is_accelerator(name) for m in self.maps):
            return ResourceMeaning(False)
        for cloud_map in self.maps:
            profile = cloud_map.mig.profile_of(name)
            if profile is not None:
                return ResourceMeaning(True, "mig", cloud_map.vendor, profile)
            if cloud_map.shared.share_resource(name):
                return ResourceMeaning(True, "shared", cloud_map.vendor)
            for vendor in cloud_map.vendors:
                if name == cloud_map.whole_for(vendor):
                    return ResourceMeaning(True, "whole", vendor)
        return ResourceMeaning(True)

    def label_meaning(self, key: str, value: str) -> LabelMeaning:
        """Remembered like resource meanings: pods of one workload repeat theirs."""
        known = self._label_meanings.get((key, value))
        if known is not None:
            return known
        return _remembered(self._label_meanings, (key, value), lambda: self._read_label(key, value))

    def _read_label(self, key: str, value: str) -> LabelMeaning:
        names_models, shared = False, False
        models: set[str] = set()
        profile: MigProfile | None = None
        unparsed: list[str] = []
        interconnect = ""
        for cloud_map in self.maps:
            for model_label in cloud_map.model_labels:
                if model_label.label == key:
                    names_models = True
                    models |= model_label.models_for(value)
                    interconnect = interconnect or model_label.interconnect.get(value, "")
            if key == cloud_map.mig.product_label or any(m.label == key for m in cloud_map.model_labels):
                # GFD product values carry -MIG-<profile> (strategy single) or -SHARED suffixes.
                found = self.catalogue.by_product_name(value)
                if found is not None:
                    models.add(found[0].id)
                    profile = found[1] or profile
                    shared = shared or value.endswith("-SHARED")
            if cloud_map.mig.form == "partition-label" and key == cloud_map.mig.label:
                try:
                    profile = MigProfile.parse(value)
                except ProfileError:
                    unparsed.append(f"{key}={value}")
            shared = shared or cloud_map.shared.marks_shared(key, value)
        interconnect = interconnect or self.catalogue.interconnect_of(value)
        return LabelMeaning(names_models, frozenset(models), profile, shared, tuple(unparsed), interconnect)

    def __contains__(self, resource: str) -> bool:
        return self.resource_meaning(resource).accelerator

    def declares_device(self, resource: str) -> bool:
        """Whether some map declares `resource` a device beside the GPUs (its `devices`)."""
        return any(m.device_for(resource) or m.device_same_as(resource) for m in self.maps)

    @functools.cached_property
    def gpu_vendor_domains(self) -> frozenset[str]:
        """The domains whose extended resources may give GPUs: the GPU device plugins' own and the
        domain of every whole-GPU name a map reads."""
        found = {name.partition("/")[0] for m in self.maps for name in m.whole_names() if "/" in name}
        return frozenset(found | GPU_VENDOR_DOMAINS)

    @functools.cached_property
    def model_annotations(self) -> tuple[tuple[str, bool, str], ...]:
        """(annotation key, True to use / False to avoid the models it names, the schedulerName of the
        layer that honours it) of every map, first map first, each key once: most pods carry
        annotations, and asking 18 maps about each was the larger part of reading them."""
        found: dict[str, tuple[bool, str]] = {}
        for cloud_map in self.maps:
            named_by = cloud_map.model_annotations
            for key, keep in ((named_by.use, True), (named_by.avoid, False)):
                if key:
                    found.setdefault(key, (keep, cloud_map.scheduler_name))
        return tuple((key, keep, scheduler) for key, (keep, scheduler) in found.items())

    @functools.cached_property
    def annotation_shares(self) -> tuple[CloudMap, ...]:
        """The maps whose scheduler reads a GPU share from pod annotations (KAI's gpu-fraction)."""
        return tuple(m for m in self.maps if m.shared.annotation_names())

    @functools.cached_property
    def dynamic_mig(self) -> tuple[tuple[Mapping[str, str], str], ...]:
        """(pod annotations, memory resource) of each map whose layer cuts MIG instances from a memory
        share when the pod carries those annotations (HAMi's dynamic MIG)."""
        return tuple(
            (m.mig.annotations, m.shared.memory_resource)
            for m in self.maps
            if m.mig.form == "by-memory" and m.mig.annotations
        )

    @functools.cached_property
    def scheduler_names(self) -> frozenset[str]:
        """The schedulerName of every loaded platform's scheduler layer."""
        return frozenset(m.scheduler_name for m in self.maps if m.scheduler_name)

    @functools.cached_property
    def _offered(self) -> dict[int, tuple[CloudMap, tuple[str, ...], frozenset[str]]]:
        return {}

    def models_offered(self, cloud_map: CloudMap) -> tuple[str, ...]:
        """`cloud_map.models_offered`, in its order, worked out once per map object (the context's
        target and the map as declared: a handful); the map is held with the answer, so an id
        cannot be reused while it is remembered."""
        return self._offers(cloud_map)[1]

    def offered(self, cloud_map: CloudMap) -> frozenset[str]:
        """The models `cloud_map` offers, as a set (remembered like models_offered)."""
        return self._offers(cloud_map)[2]

    def _offers(self, cloud_map: CloudMap) -> tuple[CloudMap, tuple[str, ...], frozenset[str]]:
        found = self._offered.get(id(cloud_map))
        if found is None or found[0] is not cloud_map:
            models = cloud_map.models_offered(self.catalogue)
            found = (cloud_map, models, frozenset(models))
            if len(self._offered) < MEANINGS_KEPT:
                self._offered[id(cloud_map)] = found
        return found

    @functools.cached_property
    def _selector_keys(self) -> frozenset[str]:
        return frozenset().union(*(m.selector_keys() for m in self.maps))

    def selector_keys(self) -> frozenset[str]:
        return self._selector_keys
