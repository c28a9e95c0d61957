"""How a platform shares GPUs in software: the sharing form a cloud map names, what each form means
(SHARING_TRAITS), and the form's own answers (how to ask for a share, which names and labels mark
one), so the layers above ask the form instead of comparing its name. A new form is a word and a row
here, a branch in the schema, its reading (asks/demand.py) and its writing (rewriting/translate_ask.py).
"""

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

# Listed in the schema too (config/schemas/cloudmap.schema.json): tests/config/test_cloudmap.py holds
# the two together.
SharedFormName = Literal["none", "resource", "label", "memory", "annotation"]


@dataclass(frozen=True)
class SharingTraits:
    """What a sharing form means to the layers that judge an ask without reading or writing it."""

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
    # memory form: the percentage of each card's memory a share gets when it asks neither memory nor a
    # percentage (HAMi and Volcano: 100); 0: none is given
    default_memory_percent: int = 0
    count_optional: bool = False  # the count resource may be left out for one GPU (ACK's gpu-count)
    replicas_per_gpu: int = 0  # time-slicing replicas per GPU, for GPU-equivalents; 0: unknown (counts 1)
    max_per_container: int = 0  # most shared GPUs one container may ask for; 0: no limit
    fraction_annotation: str = ""  # annotation form: part of a GPU, "0.5"
    memory_annotation: str = ""  # annotation form: GPU memory in MiB
    count_annotation: str = ""  # annotation form: how many GPUs get that share each (default 1)
    container_annotation: str = ""  # annotation form: the container given the share (default the first)
    # annotation form: <prefix><container>.gpu-memory.request / .limit, memory for that container
    container_memory_prefix: str = ""
    # What must be configured for `resource` to exist at all, said whenever it is written: a name that
    # depends on the device plugin's settings is never written as if certain.
    requires: str = ""
    # label form: the node label saying how many clients share one GPU (GKE's
    # gke-max-shared-clients-per-gpu), read where a translation loses it
    clients_label: str = ""
    # How an admin shares a GPU or slice among N clients here, {resource} and {clients} filled in:
    # said where a translation loses the sharing or its client count. "": the map does not say.
    clients_setting: str = ""

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
        named = (
            self.fraction_annotation,
            self.memory_annotation,
            self.count_annotation,
            self.container_annotation,
        )
        return tuple(a for a in named if a)

    def names_container_annotation(self, key: str) -> bool:
        """Whether `key` is one of the annotation form's per-container keys (KAI's
        nvidia.com/container.<name>.gpu-memory.request)."""
        prefix = self.container_memory_prefix
        return (
            bool(prefix)
            and key.startswith(prefix)
            and key.endswith((".gpu-memory.request", ".gpu-memory.limit"))
        )

    @functools.cached_property  # read on every pod create (the guard, the whole-GPU markers)
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
            named = " or ".join(a for a in (self.fraction_annotation, self.memory_annotation) if a)
            return f"a share of a GPU by pod annotation ({named}{by})"
        return ""

    def sharing_setting(self, resource: str, clients: int) -> str:
        """What an admin sets to share `resource` among `clients` here ("" where the map does not say;
        "N" where the clients are not known)."""
        count = str(clients) if clients else "N"
        return self.clients_setting.replace("{resource}", resource).replace("{clients}", count)

    def resource_names(self) -> frozenset[str]:
        names = {
            self.resource,
            self.memory_resource,
            self.memory_percent_resource,
            self.count_resource,
            self.core_resource,
        }
        return frozenset(n for n in names if n)
