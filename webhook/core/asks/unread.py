"""GPU names no map reads (pure): what a budget cannot count must be refused, never passed as free.

A quota in GPU-equivalents counts what the loaded maps read. A device plugin the maps do not describe
(Intel's gpu.intel.com/i915) still gives GPUs, so in a namespace with a GPU budget a pod asking for
one would hold GPUs the budget never sees. Which names give GPUs cannot be known for certain; these
words are what every GPU device plugin and sharing layer in the maps' sources uses in its names, and a
name that carries none of them (vpc.amazonaws.com/efa, rdma/…) is not taken for a GPU, unless it is under
a GPU vendor's domain: NVIDIA's KubeVirt passthrough names a GPU by its PCI device
(nvidia.com/GA100_A100_PCIE_40GB), and a device plugin's config may rename nvidia.com/gpu to anything
(nvidia.com/h100). Such a name is refused in a budget namespace rather than counted whole: one unit may
be a whole GPU, a vGPU slice (nvidia.com/GRID_T4-1Q) or no GPU at all (the Network Operator's NICs
under nvidia.com), and the map entry that says which is one line. A name a map declares as a device
beside the GPUs (`devices`) is what the map says it is.
"""

import re
from collections.abc import Callable, Iterable

from webhook.core.asks.checks import is_extended_resource
from webhook.core.asks.claims import CLASS_RESOURCE_PREFIX
from webhook.core.vocabulary.dialects import GPU_VENDOR_DOMAINS, Dialects

# gpu (nvidia.com/gpu, amd.com/gpu, gpu.intel.com/…, nvidia.com/gpumem, volcano.sh/vgpu-number), a MIG
# slice (nvidia.com/mig-…), a CUDA share (tencent.com/vcuda-core).
_GPU_WORDS = re.compile(r"gpu|/mig-|cuda", re.IGNORECASE)


def names_a_gpu(name: str) -> bool:
    return bool(_GPU_WORDS.search(name))


def under_a_gpu_vendor(name: str, domains: frozenset[str]) -> bool:
    """Whether the extended resource is under one of `domains` or a subdomain of one."""
    domain = name.partition("/")[0]
    return domain in domains or any(domain.endswith("." + d) for d in domains)


def unread_gpu_names(
    names: Iterable[str],
    read: Callable[[str], bool],
    stands_for_class: Callable[[str], bool],
    declared: Callable[[str], bool] = lambda name: False,
    vendor_domains: frozenset[str] = GPU_VENDOR_DOMAINS,
) -> tuple[str, ...]:
    """The extended resources among `names` that name a GPU or are under a GPU vendor's domain, that
    no loaded map reads (`read`) or declares a device beside the GPUs (`declared`), and that no
    DeviceClass stands for (KEP-5004: the scheduler gives a claim of that class, counted as one)."""
    return tuple(
        sorted(
            n
            for n in names
            if is_extended_resource(n)
            and not n.startswith(CLASS_RESOURCE_PREFIX)
            and not read(n)
            and not stands_for_class(n)
            and (names_a_gpu(n) or under_a_gpu_vendor(n, vendor_domains))
            and not declared(n)  # after the cheap tests: it asks every map
        )
    )


def gives_gpus(dialects: Dialects) -> Callable[[str], bool]:
    """Whether an extended resource gives GPUs: a name a loaded map reads, or one no map reads that
    names a GPU or is under a GPU vendor's domain (as `unread_gpu_names` judges it)."""

    def gives(name: str) -> bool:
        return name in dialects or bool(
            unread_gpu_names(
                (name,),
                dialects.__contains__,
                lambda _: False,
                dialects.declares_device,
                dialects.gpu_vendor_domains,
            )
        )

    return gives


def unread_refusal(names: Iterable[str], namespace: str, whole_gpu: str) -> str:
    """Why the pod is refused, and the map entry that would count each name."""
    said = []
    for name in names:
        if "/mig-" in name:
            entry = "resources.mig (form: mixed, resource_prefix)"
        elif name.endswith(".shared"):
            entry = "resources.shared (form: resource, resource)"
        elif names_a_gpu(name):
            entry = "resources.whole, or a map of its own for this device plugin"
        else:
            # Under a GPU vendor's domain with no GPU word: it may be no GPU at all.
            entry = "resources.whole, or, if it gives no GPU, under devices"
        said.append(f"{name} (a map would count it as {entry})")
    return (
        f"gpuport cannot count {', '.join(said)} against the GPU budget of {namespace}: no cloud map "
        f"reads it, and an uncounted GPU would escape the quota. Ask for {whole_gpu}, or add the name to "
        "the cluster's cloud map (gpuport lint checks the edit)"
    )


def unread_warning(names: Iterable[str], target: str, whole_gpu: str, share_names: tuple[str, ...]) -> str:
    """What a pod asking for GPUs by names no map reads is told wherever it goes: they are left as
    written (gpuport cannot say them in the target's words), so only a node running their device plugin
    gives them; the target's own words for a GPU instead."""
    names = tuple(names)
    said = ", ".join(names)
    what, them, it = ("a GPU name", "its", "it") if len(names) == 1 else ("GPU names", "their", "them")
    instead = f"{whole_gpu} for whole GPUs" + (
        f", {' and '.join(share_names)} for a share" if share_names else ""
    )
    return (
        f"gpuport: {said}: {what} no cloud map reads, left as written and not translated; only {target} "
        f"nodes running {them} device plugin give {it}, elsewhere the pod stays Pending ({target} asks "
        f"{instead}; or add a map that reads {it})"
    )
