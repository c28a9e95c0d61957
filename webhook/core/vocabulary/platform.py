"""A platform's GPU vocabulary as plain values: what the decision core reads, with no I/O."""

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from webhook.core.vocabulary import dra_api
from webhook.core.vocabulary.catalogue import Catalogue, MigProfile, ProfileError

# The words a map chooses among. The schema (config/schemas/cloudmap.schema.json) lists the same, for
# editors; tests/config/test_cloudmap.py holds the two together, defaults included.
Vendor = Literal["nvidia", "amd"]
MigFormName = Literal["none", "mixed", "single", "partition-label", "by-memory"]
SharedFormName = Literal["none", "resource", "label", "memory", "annotation"]
DeviceKind = Literal["whole", "mig", "partition"]  # what a DRA device of a `type` is
FractionalPolicy = Literal["deny", "mig", "shared"]  # what a fractional whole-GPU ask becomes
MigToWhole = Literal["deny", "allow"]  # whether a MIG slice may become a whole GPU
Substitution = Literal["same-class", "any"]  # which models may replace one the map lacks
TopologyPolicy = Literal["preferred", "required"]  # how hard NVLink affinity is
NumaScheduler = Literal["", "volcano", "koordinator"]  # which NUMA annotation to write ("": none)


@dataclass(frozen=True)
class ModelLabel:
    """A node label whose value names the GPU model (model id → the values that mean it)."""

    label: str
    values: Mapping[str, tuple[str, ...]]
    gpus: Mapping[str, int] = field(default_factory=dict)  # value → GPUs a node with it holds

    def models_for(self, value: str) -> frozenset[str]:
        return frozenset(model for model, values in self.values.items() if value in values)

    def holds(self, value: str, gpus: int) -> bool:
        """Whether a node with this value can hold a pod asking `gpus` GPUs (unknown counts: yes)."""
        return self.gpus.get(value, gpus) >= gpus


@dataclass(frozen=True)
class MigForm:
    form: MigFormName = "none"
    resource_prefix: str = ""
    product_label: str = ""
    label: str = ""
    annotations: Mapping[str, str] = field(default_factory=dict)  # by-memory: "cut a MIG instance"
    # The profiles the platform offers per model (GKE partitions an A100 40GB only as 1g.5gb, 2g.10gb,
    # 3g.20gb and 7g.40gb); a model not listed gets no MIG there. Empty: every profile of every model.
    profiles: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def resource_for(self, profile: MigProfile) -> str:
        return self.resource_prefix + profile.name.replace("+", ".")

    def profile_of(self, resource: str) -> MigProfile | None:
        """The profile a mixed-strategy resource name asks for: mig-1g.10gb.me → 1g.10gb+me (also on a
        by-memory platform that serves those names as written)."""
        if self.form not in ("mixed", "by-memory") or not self.resource_prefix:
            return None
        if not resource.startswith(self.resource_prefix):
            return None
        name = resource[len(self.resource_prefix) :]
        for dotted, plus in ((".me.all", "+me.all"), (".me", "+me"), (".gfx", "+gfx")):
            if name.endswith(dotted):
                name = name[: -len(dotted)] + plus
                break
        try:
            return MigProfile.parse(name)
        except ProfileError:
            return None


@dataclass(frozen=True)
class SharingTraits:
    """What a sharing form means wherever it is read, written or judged, so the layers above ask the
    form instead of comparing its name: a new form is a row here (its reading in asks/demand.py and its
    writing in rewriting/translate_ask.py are the rest)."""

    caps_memory: bool  # a share's memory size is enforced there
    needs_size: bool  # a share there must say how much (memory or a fraction)
    memory_fate: str  # what becomes of a share's memory size there, for preflight


SHARING_TRAITS: Mapping[SharedFormName, SharingTraits] = {
    "none": SharingTraits(False, False, "no shared GPUs are offered"),
    "resource": SharingTraits(False, False, "becomes time-slicing: memory is no longer capped"),
    "label": SharingTraits(False, False, "becomes time-slicing: memory is no longer capped"),
    "memory": SharingTraits(True, True, "stays a memory limit"),
    # KAI reserves the share when scheduling; without a separate isolator nothing caps it at run time.
    "annotation": SharingTraits(False, True, "becomes a share the scheduler reserves: memory is not capped"),
}


@dataclass(frozen=True)
class SharedForm:
    form: SharedFormName = "none"
    resource: str = ""
    label: str = ""
    values: tuple[str, ...] = ()
    memory_resource: str = ""
    memory_percent_resource: str = ""  # memory as a percentage of one card
    memory_unit_bytes: int = 0
    count_resource: str = ""
    core_resource: str = ""
    core_per_gpu: int = 100
    count_optional: bool = False  # the count resource may be left out for one GPU (ACK's gpu-count)
    replicas_per_gpu: int = 0  # time-slicing replicas per GPU, for GPU-equivalents; 0: unknown (counts 1)
    max_per_container: int = 0  # most shared GPUs one container may ask for; 0: no limit
    fraction_annotation: str = ""  # annotation form: part of a GPU, "0.5"
    memory_annotation: str = ""  # annotation form: GPU memory in MiB
    # What must be configured for `resource` to exist at all, said whenever it is written: a name that
    # depends on the device plugin's settings is never written as if certain.
    requires: str = ""

    @property
    def traits(self) -> SharingTraits:
        return SHARING_TRAITS[self.form]

    @property
    def offered(self) -> bool:
        return self.form != "none"

    def annotation_names(self) -> tuple[str, ...]:
        """The pod annotations a share is asked with (the annotation form's), else ()."""
        if self.form != "annotation":
            return ()
        return tuple(a for a in (self.fraction_annotation, self.memory_annotation) if a)

    @property
    def node_label(self) -> str:
        """The node label that marks shared GPUs (the label form's), else ""."""
        return self.label if self.form == "label" else ""

    def marks_shared(self, key: str, value: str) -> bool:
        """Whether a node label requirement key=value asks for shared GPUs."""
        return bool(self.node_label) and key == self.node_label and value in self.values

    def share_resource(self, name: str) -> bool:
        """Whether `name` alone asks for a shared GPU, counted in GPUs (the resource form's)."""
        return self.form == "resource" and name == self.resource

    def memory_share_names(self, whole_gpu: str) -> frozenset[str]:
        """The resources that make an ask a share by memory (the memory form's): its memory,
        percentage or core resource, or a count resource of its own (aliyun.com/gpu-count; HAMi's
        count is the whole-GPU resource, a whole GPU when alone)."""
        if self.form != "memory":
            return frozenset()
        own_count = self.count_resource if self.count_resource != whole_gpu else ""
        names = {self.memory_resource, self.memory_percent_resource, self.core_resource, own_count}
        return frozenset(n for n in names if n)

    def offer(self, whole_gpu: str, scheduler: str = "") -> str:
        """How a user asks for a shared GPU here, in the platform's words ("" when none is offered);
        `scheduler` is the schedulerName the platform's pods carry, where one reads the ask."""
        if self.form == "resource":
            return f"a shared GPU ({self.resource}: 1)"
        if self.form == "label":
            return f"a shared GPU ({whole_gpu}: 1 with node selector {self.label}: {self.values[0]})"
        if self.form == "memory":
            return f"a share of a GPU by memory ({self.memory_resource})"
        if self.form == "annotation":
            by = f", with schedulerName {scheduler}" if scheduler else ""
            return f"a share of a GPU by pod annotation ({' or '.join(self.annotation_names())}{by})"
        return ""

    def resource_names(self) -> frozenset[str]:
        names = {
            self.resource,
            self.memory_resource,
            self.memory_percent_resource,
            self.count_resource,
            self.core_resource,
        }
        return frozenset(n for n in names if n)


@dataclass(frozen=True)
class ModelAnnotations:
    """Pod annotations naming GPU models to use or avoid, comma-separated (HAMi's use-gputype)."""

    use: str = ""
    avoid: str = ""

    def keys(self) -> tuple[str, ...]:
        return tuple(k for k in (self.use, self.avoid) if k)


@dataclass(frozen=True)
class NodeLabels:
    """A platform's own node labels beyond GPUs: what a pod moving elsewhere must not keep."""

    owned: tuple[str, ...] = ()  # key prefixes ending in "/", or exact keys
    spot: tuple[tuple[str, str], ...] = ()  # (key, value) marking spot nodes; the first is written
    spot_tolerations: tuple[Mapping[str, str], ...] = ()  # what a pod needs on those nodes

    def owns(self, key: str) -> bool:
        return any(key.startswith(p) if p.endswith("/") else key == p for p in self.owned)

    def is_spot(self, key: str, value: str) -> bool:
        return (key, value) in self.spot


DEFAULT_TYPES: Mapping[str, DeviceKind] = {"gpu": "whole", "mig": "mig"}


@dataclass(frozen=True)
class DraForm:
    """How a cluster asks for GPUs through Dynamic Resource Allocation (resource.k8s.io): device
    classes for whole GPUs and MIG slices, and the driver's attribute names that say which model or
    profile a device is. A map with this form gets ResourceClaims, never extended resources."""

    api_version: dra_api.MapVersion  # auto is resolved from the API server before a decision
    driver: str  # the attribute domain: device.attributes["<driver>"]
    whole_class: str
    mig_class: str = ""
    product_attribute: str = "productName"
    profile_attribute: str = "profile"
    memory_capacity: str = "memory"
    product_names: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # model → attribute values
    # The `type` attribute's value on whole GPUs, when the class alone does not tell them from
    # partitions (AMD's gpu.amd.com holds both): requests then select on it.
    whole_type: str = ""
    # The `type` attribute's values and what each device is (whole | mig | partition): how a device
    # class gpuport reads from the cluster is understood.
    types: Mapping[str, DeviceKind] = field(default_factory=lambda: dict(DEFAULT_TYPES))
    pci_attribute: str = ""  # an attribute holding the PCI device id, read back (AMD's deviceID)
    # KEP-5004: extended resource name → (device kind, MIG profile name or "") of the cluster's device
    # classes that carry one; a pod asking for such a resource runs on DRA as written.
    extended_resources: Mapping[str, tuple[str, str]] = field(default_factory=dict)

    def extended_resource(self, kind: str, profile: str) -> str:
        """The extended resource a device class of this cluster gives devices of this kind (and MIG
        profile) for (KEP-5004), or ""."""
        return next((r for r, said in sorted(self.extended_resources.items()) if said == (kind, profile)), "")

    def kind_of_type(self, value: str) -> str:
        """whole | mig | partition for a `type` value this driver publishes; "" for one it does not."""
        return self.types.get(value, "")


@dataclass(frozen=True)
class CloudMap:
    name: str
    whole_gpu: str
    description: str = ""
    vendor: Vendor = "nvidia"
    mig: MigForm = field(default_factory=MigForm)
    shared: SharedForm = field(default_factory=SharedForm)
    model_labels: tuple[ModelLabel, ...] = ()
    model_annotations: ModelAnnotations = field(default_factory=ModelAnnotations)
    node_labels: NodeLabels = field(default_factory=NodeLabels)
    offered_models: tuple[str, ...] = ()
    offered_profiles: tuple[str, ...] = ()  # MIG profiles the cluster's layout has; empty: all
    tolerations: tuple[Mapping[str, str], ...] = ()
    topology_labels: Mapping[str, str] = field(default_factory=dict)
    scheduler_name: str = ""
    fractional_policy: FractionalPolicy = "deny"
    mig_to_whole: MigToWhole = "deny"
    substitution: Substitution = "same-class"
    topology_policy: TopologyPolicy = "preferred"
    # The overcommit guard for shared GPUs: the fraction of a shared GPU's memory its clients may fill
    # (κ), and whether a shared ask must say how much memory it needs.
    sharing_memory_fill: float = 0.9
    sharing_memory_required: bool = False
    numa_scheduler: NumaScheduler = ""
    driver_version: str = ""  # the platform's usual NVIDIA driver, for preflight without an inventory
    preflight_weights: Mapping[str, float] = field(default_factory=dict)
    dra: DraForm | None = None  # set: this cluster asks for GPUs by ResourceClaim
    source: str = ""

    # The derived sets below are read on every admission: a map is a frozen value, so each is
    # worked out once per map (dataclasses.replace makes a new map, with its own).
    @functools.cached_property
    def _resource_names(self) -> frozenset[str]:
        return frozenset({self.whole_gpu} | self.shared.resource_names())

    def resource_names(self) -> frozenset[str]:
        """Exact resource names pods on this platform ask for (MIG names of the mixed form aside)."""
        return self._resource_names

    @functools.cached_property
    def _annotation_keys(self) -> frozenset[str]:
        return frozenset(
            (*self.model_annotations.keys(), *self.shared.annotation_names(), *self.mig.annotations)
        )

    def annotation_keys(self) -> frozenset[str]:
        """Pod annotations that carry GPU meaning on this platform."""
        return self._annotation_keys

    def is_accelerator(self, resource: str) -> bool:
        return resource in self.resource_names() or self.mig.profile_of(resource) is not None

    @functools.cached_property
    def _selector_keys(self) -> frozenset[str]:
        keys = {m.label for m in self.model_labels}
        keys |= {k for k in (self.mig.product_label, self.mig.label, self.shared.label) if k}
        return frozenset(keys)

    def selector_keys(self) -> frozenset[str]:
        """Node-label keys that carry GPU meaning on this platform."""
        return self._selector_keys

    def models_offered(self, catalogue: Catalogue) -> tuple[str, ...]:
        if self.offered_models:
            return self.offered_models
        if self.dra is not None and self.dra.product_names:
            return tuple(m for m in self.dra.product_names if m in catalogue.models)
        if self.model_labels:
            return tuple(m for m in self.model_labels[0].values if m in catalogue.models)
        return tuple(m.id for m in catalogue.models.values() if m.vendor == self.vendor)

    @property
    def mig_offered(self) -> str:
        """How MIG slices are asked for here, in words; "" when they are not."""
        if self.dra is not None:
            return f"device class {self.dra.mig_class}" if self.dra.mig_class else ""
        return "" if self.mig.form == "none" else self.mig.form

    def partial_gpu_options(self) -> list[str]:
        """What a user who wants part of a GPU can ask for on this platform, in its own words."""
        options = []
        if self.mig.form == "mixed":
            options.append(
                f"a MIG slice ({self.mig.resource_prefix}<profile>, e.g. {self.mig.resource_prefix}1g.10gb)"
            )
        elif self.mig.form == "single":
            label = f"{self.mig.product_label}=<model>-MIG-<profile>"
            options.append(f"a MIG slice ({self.whole_gpu} on a node labelled {label})")
        elif self.mig.form == "partition-label":
            options.append(
                f"a MIG slice ({self.whole_gpu}: 1 with node selector {self.mig.label}: <profile>)"
            )
        if self.shared.offered:
            options.append(self.shared.offer(self.whole_gpu, self.scheduler_name))
        return options
