"""A platform's GPU vocabulary as plain values: what the decision core reads, with no I/O.

Why one module of ~340 lines: a CloudMap and its parts (model labels, MIG form, node labels, devices,
DRA form) are one value, parsed together from one file and read together by every decision; the
sharing forms, the map's largest part, already have their own module (sharing.py).
"""

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from webhook.core.vocabulary import dra_api
from webhook.core.vocabulary.catalogue import Catalogue, MigProfile, ProfileError
from webhook.core.vocabulary.sharing import SharedForm

# The words a map chooses among. The schema (config/schemas/cloudmap.schema.json) lists the same, for
# editors; tests/config/test_cloudmap.py holds the two together, defaults included.
Vendor = Literal["nvidia", "amd"]
MigFormName = Literal["none", "mixed", "single", "partition-label", "by-memory"]
DeviceKind = Literal["whole", "mig", "partition"]  # what a DRA device of a `type` is
FractionalPolicy = Literal["deny", "mig", "shared"]  # what a fractional whole-GPU ask becomes
MigToWhole = Literal["deny", "allow"]  # whether a MIG slice may become a whole GPU
Substitution = Literal["same-class", "any"]  # which models may replace one the map lacks
TopologyPolicy = Literal["preferred", "required"]  # how hard NVLink affinity is
NumaScheduler = Literal["", "volcano", "koordinator"]  # which NUMA annotation to write ("": none)
# What a device beside the GPUs is: a network interface for RDMA between nodes (EFA, InfiniBand),
# one of the cloud's GPUDirect networks, or an accelerator that is not a GPU (AWS Neuron).
CloudDeviceKind = Literal["rdma-network", "gpudirect-network", "accelerator"]
Capacity = Literal["on-demand", "spot", "reserved"]


@dataclass(frozen=True)
class ModelLabel:
    """A node label whose value names the GPU model (model id → the values that mean it)."""

    label: str
    values: Mapping[str, tuple[str, ...]]
    gpus: Mapping[str, int] = field(default_factory=dict)  # value → GPUs a node with it holds
    # value → sxm | pcie (catalogue.INTERCONNECTS) where known: as the map says for an instance type,
    # else as the catalogue says for a product name or for a model sold one way only
    interconnect: Mapping[str, str] = field(default_factory=dict)

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
    # How a node comes to offer a slice, with {profile} and {compute} for the slice: MIG is set up per
    # node pool or node, so a translated slice says what the target must have set up.
    requires: str = ""
    # Who sets a mixed-form node's MIG layout: "node", the GPU Operator's MIG manager per GPU (the
    # nvidia.com/mig.config label); "node-pool", the platform, one profile for all the GPUs of a node
    # pool, chosen at the pool's creation and fixed after (AKS --gpu-instance-profile).
    partitioned: Literal["node", "node-pool"] = "node"

    @property
    def per_pool(self) -> bool:
        """Whether every GPU of a node pool carries one profile: a plan is pools to create."""
        return self.form in ("single", "partition-label") or self.partitioned == "node-pool"

    def requirement(self, profile: MigProfile) -> str:
        """`requires` for this slice ("" when the map does not say)."""
        return self.requires.replace("{profile}", profile.name).replace("{compute}", str(profile.compute))

    def resource_for(self, profile: MigProfile) -> str:
        return self.resource_prefix + profile.name.replace("+", ".")

    def profile_of(self, resource: str) -> MigProfile | None:
        """The profile a mixed-strategy resource name asks for: mig-1g.10gb.me → 1g.10gb+me (also on a
        by-memory platform that serves those names as written)."""
        if self.form not in ("mixed", "by-memory") or not self.resource_prefix:
            return None
        if not resource.startswith(self.resource_prefix):
            return None
        # The device plugin's time-slicing and MPS with renameByDefault append ".shared" to every name it
        # advertises, MIG ones included (mig-3g.40gb.shared): a replica of that slice, never less of it.
        name = resource[len(self.resource_prefix) :].removesuffix(".shared")
        for dotted, plus in ((".me.all", "+me.all"), (".me", "+me"), (".gfx", "+gfx")):
            if name.endswith(dotted):
                name = name[: -len(dotted)] + plus
                break
        try:
            return MigProfile.parse(name)
        except ProfileError:
            return None


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
    # (key, value) marking on-demand and reserved nodes, the first written. No on-demand label: the
    # platform's on-demand nodes are those without a spot label (AKS, GKE). No reserved label: the
    # platform has no word for reserved capacity a pod can select.
    on_demand: tuple[tuple[str, str], ...] = ()
    reserved: tuple[tuple[str, str], ...] = ()

    def owns(self, key: str) -> bool:
        return any(key.startswith(p) if p.endswith("/") else key == p for p in self.owned)

    # Read for every map on every translation (capacity.capacity_keys): worked out once per value, as
    # CloudMap's derived sets are; made afresh they cost a translated pod about 8 % of its decision.
    @functools.cached_property
    def _capacity_labels(self) -> tuple[tuple[Capacity, str, str], ...]:
        said: tuple[tuple[Capacity, tuple[tuple[str, str], ...]], ...] = (
            ("on-demand", self.on_demand),
            ("spot", self.spot),
            ("reserved", self.reserved),
        )
        return tuple((capacity, k, v) for capacity, labels in said for k, v in labels)

    def capacity_labels(self) -> tuple[tuple[Capacity, str, str], ...]:
        """(capacity type, key, value) of every label saying one on this platform."""
        return self._capacity_labels

    @functools.cached_property
    def _capacity_keys(self) -> frozenset[str]:
        return frozenset(k for _, k, _ in self._capacity_labels)

    def capacity_keys(self) -> frozenset[str]:
        return self._capacity_keys


@dataclass(frozen=True)
class CloudDevice:
    """A device beside the GPUs that a pod on this platform asks for as an extended resource."""

    resource: str  # the exact name, or a prefix ending in "/" when the admin names the rest
    kind: CloudDeviceKind
    what: str  # what it is, in a few words, for messages
    # Other names (any platform's) asking for the same device in the same count: a pod asking one
    # of them here is given this one.
    same_as: tuple[str, ...] = ()
    # Whether the device plugin behind the name runs on any cluster (the RDMA shared device plugin's
    # admin-named rdma/ resources): its name alone does not say the pod came from this platform.
    portable: bool = False

    def names(self, resource: str) -> bool:
        if self.resource.endswith("/"):
            return resource.startswith(self.resource) and len(resource) > len(self.resource)
        return resource == self.resource

    def describe(self) -> str:
        name = f"{self.resource}<name>" if self.resource.endswith("/") else self.resource
        return f"{name}: {self.what}"


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
    # Other vendors' GPUs the platform also has, each vendor's whole-GPU resource (AKS's ND MI300X v5
    # VMs beside its NVIDIA sizes: amd.com/gpu). Whole GPUs only: MIG and sharing are `vendor`'s.
    whole_by_vendor: Mapping[str, str] = field(default_factory=dict)
    mig: MigForm = field(default_factory=MigForm)
    shared: SharedForm = field(default_factory=SharedForm)
    model_labels: tuple[ModelLabel, ...] = ()
    model_annotations: ModelAnnotations = field(default_factory=ModelAnnotations)
    node_labels: NodeLabels = field(default_factory=NodeLabels)
    offered_models: tuple[str, ...] = ()
    offered_profiles: tuple[str, ...] = ()  # MIG profiles the cluster's layout has; empty: all
    tolerations: tuple[Mapping[str, str], ...] = ()
    # The API server runs the ExtendedResourceToleration admission plugin: a pod asking for an extended
    # resource is given {key: <resource>, operator: Exists, effect: NoSchedule} (EKS since 1.19, GKE).
    extended_resource_toleration: bool = False
    topology_labels: Mapping[str, str] = field(default_factory=dict)  # role → the key written
    # The RuntimeClasses the platform makes itself (GKE Sandbox's gvisor); None: the map does not say.
    runtime_classes: tuple[str, ...] | None = None
    topology_read: Mapping[str, str] = field(default_factory=dict)  # every key read → its role
    scheduler_name: str = ""
    # Schedulers the platform also runs beside the default one (CCE's Volcano add-on): a pod naming one
    # keeps it, whatever another map's scheduler layer calls itself.
    other_schedulers: tuple[str, ...] = ()
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
    # The platform's devices beside GPUs; None: the map does not say which it has (a scheduler
    # layer that runs on any cloud), so another platform's devices are kept there, with a warning.
    devices: tuple[CloudDevice, ...] | None = None
    source: str = ""

    # The derived sets below are read on every admission: a map is a frozen value, so each is
    # worked out once per map (dataclasses.replace makes a new map, with its own).
    @functools.cached_property
    def _resource_names(self) -> frozenset[str]:
        return frozenset({self.whole_gpu, *self.whole_by_vendor.values()} | self.shared.resource_names())

    @functools.cached_property
    def vendors(self) -> tuple[str, ...]:
        """The vendors whose GPUs this platform has, its own first."""
        return (self.vendor, *(v for v in self.whole_by_vendor if v != self.vendor))

    def single_pins(self, key: str, values: tuple[str, ...]) -> list[tuple[str, str]]:
        """Labels of this platform with one value naming the same GPUs as `key` in `values` (and no
        other): what a kind that takes a nodeSelector only (NIM) can be given instead of affinity."""
        models = {
            m
            for label in self.model_labels
            if label.label == key
            for v in values
            for m in label.models_for(v)
        }
        pins: list[tuple[str, str]] = []
        # A key's first label is the one written; later ones (HyperPod's ml. types) are read only.
        firsts: dict[str, ModelLabel] = {}
        for label in self.model_labels:
            firsts.setdefault(label.label, label)
        for label in firsts.values():
            if label.label.startswith("beta.kubernetes.io/"):
                continue  # the deprecated alias: read, never written
            said = sorted({v for m in models for v in label.values.get(m, ())})
            if len(said) == 1 and label.models_for(said[0]) <= models and (label.label, said[0]) not in pins:
                pins.append((label.label, said[0]))
        return pins

    def whole_for(self, vendor: str) -> str:
        """The whole-GPU resource of `vendor`'s GPUs here ("" where the platform has none of them)."""
        return self.whole_gpu if vendor == self.vendor else self.whole_by_vendor.get(vendor, "")

    def whole_names(self) -> tuple[str, ...]:
        """Every whole-GPU resource of this platform, its own vendor's first."""
        return tuple(self.whole_for(v) for v in self.vendors)

    def resource_names(self) -> frozenset[str]:
        """Exact resource names pods on this platform ask for (MIG names of the mixed form aside)."""
        return self._resource_names

    @functools.cached_property
    def _annotation_keys(self) -> frozenset[str]:
        return frozenset(
            (*self.model_annotations.keys(), *self.shared.annotation_names(), *self.mig.annotations)
        )

    def annotation_keys(self) -> frozenset[str]:
        """Pod annotations that carry GPU meaning on this platform (keys named per container aside:
        `speaks_annotation`)."""
        return self._annotation_keys

    def speaks_annotation(self, key: str) -> bool:
        """Whether the pod annotation `key` carries GPU meaning on this platform."""
        return key in self._annotation_keys or self.shared.names_container_annotation(key)

    def device_for(self, resource: str) -> CloudDevice | None:
        """The device of this platform that `resource` names, or None."""
        return next((d for d in self.devices or () if d.names(resource)), None)

    def device_same_as(self, resource: str) -> CloudDevice | None:
        """The device of this platform that asks for what `resource` asks for under another name."""
        return next((d for d in self.devices or () if resource in d.same_as), None)

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
        return tuple(m.id for m in catalogue.models.values() if m.vendor in self.vendors)

    @property
    def mig_offered(self) -> str:
        """How MIG slices are asked for here, in words; "" when they are not."""
        if self.dra is not None:
            return f"device class {self.dra.mig_class}" if self.dra.mig_class else ""
        return "" if self.mig.form == "none" else self.mig.form

    def mig_example(self, catalogue: Catalogue) -> tuple[str, str] | None:
        """(its smallest profile, the model) for the first model offered here that this platform slices
        by MIG, in the profiles it offers for it; None where it slices none of them."""
        if self.dra is not None or self.mig.form not in ("mixed", "single", "partition-label"):
            return None
        for model in self.models_offered(catalogue):
            plain = sorted(
                MigProfile.parse(name) for name in self.mig_profiles_of(model, catalogue) if "+" not in name
            )
            if plain:
                return plain[0].name, model
        return None

    def mig_profiles_of(self, model: str, catalogue: Catalogue) -> tuple[str, ...]:
        """The MIG profiles this platform cuts `model` into: those its map lists for it where it lists
        any, else the catalogue's; () where it has no MIG or the model none (an L4, a T4)."""
        entry = catalogue.models.get(model)
        if entry is None or self.mig.form == "none":
            return ()
        if self.mig.profiles:
            return tuple(self.mig.profiles.get(model, ()))
        return tuple(entry.profiles)

    def slices_any(self, models: Iterable[str] | None, catalogue: Catalogue) -> bool:
        """Whether some of `models` (None or none: any model offered here) can be MIG-sliced here."""
        chosen = tuple(models or ()) or self.models_offered(catalogue)
        return any(self.mig_profiles_of(model, catalogue) for model in chosen)

    def partial_gpu_options(self, catalogue: Catalogue) -> tuple[str, ...]:
        """What a user who wants part of a GPU can ask for on this platform, in its own words: only the
        MIG profiles it offers for the models it offers (said in fractional-GPU denials and refusals)."""
        options = []
        example = self.mig_example(catalogue)
        if example is not None:
            profile, model = example
            e_g = f"e.g. {profile} on {model}"
            if self.mig.form == "mixed":
                prefix = self.mig.resource_prefix
                options.append(f"a MIG slice ({prefix}<profile>, e.g. {prefix}{profile} on {model})")
            elif self.mig.form == "single":
                label = f"{self.mig.product_label}=<model>-MIG-<profile>"
                options.append(f"a MIG slice ({self.whole_gpu} on a node labelled {label}, {e_g})")
            else:
                selector = f"node selector {self.mig.label}: <profile>"
                options.append(f"a MIG slice ({self.whole_gpu}: 1 with {selector}, {e_g})")
        if self.shared.offered:
            options.append(self.shared.offer(self.whole_gpu, self.scheduler_name))
        return tuple(options)
