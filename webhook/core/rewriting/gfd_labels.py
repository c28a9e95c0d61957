"""NVIDIA GPU Feature Discovery's node labels a GPU pod requires, kept where the platform names its GPUs
otherwise: said, never silent.

GFD (run by the GPU Operator) labels each GPU node with its GPUs' memory in MiB, count, architecture
family, compute capability and CUDA versions (`nvidia.com/gpu.memory`, `nvidia.com/gpu.count`,
`nvidia.com/gpu.family`, `nvidia.com/cuda.driver-version.major`, ...: the GFD README's label list).
Pods written for a cluster running it select GPUs by them (OpenShift AI, vLLM and SkyPilot recipes:
`nvidia.com/gpu.memory Gt 70000`). GKE, EKS, AKS, OKE, ACK and CCE label their GPU nodes by their own
words (the map's `model_labels`), and their nodes carry GFD's only where an admin installed GFD or
the GPU Operator: elsewhere the scheduler finds no node with the label and the pod stays Pending. The
labels gpuport reads (GFD's product and sharing labels) are translated where they are read; these
others are kept as written (on a cluster running GFD they hold), and said.
"""

from collections.abc import Iterable

from webhook.core.vocabulary.dialects import Dialects
from webhook.core.vocabulary.inventory import GFD_PRODUCT
from webhook.core.vocabulary.platform import CloudMap

__all__ = ["gfd_label_warnings"]

# Key prefixes of the labels GFD writes (and the MIG manager beside it, on the same nodes).
GFD_PREFIXES = ("nvidia.com/gpu.", "nvidia.com/cuda.", "nvidia.com/mig.", "nvidia.com/gfd.")
# What a node without the label fails; NotIn and DoesNotExist admit it.
REQUIRING = frozenset({"In", "Exists", "Gt", "Lt"})


def gfd_label_warnings(
    constraints: Iterable[tuple[str, str, tuple[str, ...]]], target: CloudMap, dialects: Dialects
) -> list[str]:
    """One warning per GFD label key the pod requires that no map reads, on a target whose map names
    its GPUs by a label of its own (a map naming them by GFD's product label presumes GFD runs; a DRA
    map names none)."""
    if not target.model_labels or any(m.label == GFD_PRODUCT for m in target.model_labels):
        return []
    # On the admission path for every GPU pod: most require no GFD label, and cost one pass here.
    gfd = [key for key, operator, _ in constraints if operator in REQUIRING and key.startswith(GFD_PREFIXES)]
    if not gfd:
        return []
    read, ours = dialects.selector_keys(), target.selector_keys()
    keys = dict.fromkeys(key for key in gfd if key not in read and key not in ours)
    own = target.model_labels[0].label
    return [
        f"gpuport: required node label {key} kept: GPU Feature Discovery's, which {target.name} nodes "
        f"carry only where an admin runs it (the GPU Operator); elsewhere no node takes the pod "
        f"({target.name} names its GPUs by {own})"
        for key in keys
    ]
