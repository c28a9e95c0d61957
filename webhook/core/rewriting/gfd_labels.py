"""NVIDIA GPU Feature Discovery's node labels a GPU pod requires, kept where the platform names its GPUs
otherwise: said, never silent, with the target's words for the GPUs they admit.

GFD (run by the GPU Operator) labels each GPU node with its GPUs' memory in MiB (as NVML reports it),
count, architecture family, compute capability and CUDA versions (`nvidia.com/gpu.memory`,
`nvidia.com/gpu.count`, `nvidia.com/gpu.family`, `nvidia.com/gpu.compute.major`,
`nvidia.com/cuda.driver-version.major`, ...: the GFD README's label list). Pods written for a cluster
running it select GPUs by them (`nvidia.com/gpu.memory Gt 70000`). GKE, EKS, AKS, OKE, ACK and CCE label
their GPU nodes in their own words (the map's `model_labels`), and their nodes carry GFD's only where an
admin installed GFD or the GPU Operator: elsewhere the scheduler finds no node with the label and the
pod stays Pending. The labels gpuport reads (GFD's product label) are translated where they are read;
these others are kept as written (on a cluster running GFD they hold), and said. Where the labels
describe the GPU (memory, family, compute capability), the warning names the target's values for the
catalogue's GPUs they admit: the pin the user could write instead.
"""

from collections.abc import Callable

from webhook.core.asks.demand import Constraint, PodDemand
from webhook.core.vocabulary.catalogue import GpuModel
from webhook.core.vocabulary.dialects import Dialects
from webhook.core.vocabulary.inventory import GFD_PRODUCT
from webhook.core.vocabulary.platform import CloudMap, ModelLabel

__all__ = ["gfd_label_warnings"]

# Key prefixes of the labels GFD writes (and the MIG manager beside it, on the same nodes).
GFD_PREFIXES = ("nvidia.com/gpu.", "nvidia.com/cuda.", "nvidia.com/mig.", "nvidia.com/gfd.")
# What a node without the label fails; NotIn and DoesNotExist admit it.
REQUIRING = frozenset({"In", "Exists", "Gt", "Lt"})
# GFD's labels that describe the GPU model, as the catalogue says the value GFD writes for it.
MODEL_VALUE: dict[str, Callable[[GpuModel], int | str]] = {
    "nvidia.com/gpu.memory": lambda m: m.memory_mib,
    "nvidia.com/gpu.family": lambda m: m.family,
    "nvidia.com/gpu.compute.major": lambda m: m.compute_capability[0] if m.compute_capability else -1,
}
SHOWN = 6  # values named in one warning line


def gfd_label_warnings(demand: PodDemand, target: CloudMap, dialects: Dialects) -> list[str]:
    """One warning per GFD label key the pod requires that no map reads, on a target whose map names
    its GPUs by a label of its own (a map naming them by GFD's product label presumes GFD runs; a DRA
    map names none)."""
    if not target.model_labels or any(m.label == GFD_PRODUCT for m in target.model_labels):
        return []
    # On the admission path for every GPU pod: most require no GFD label, and cost one pass here.
    gfd = [c for c in demand.constraints if c[1] in REQUIRING and c[0].startswith(GFD_PREFIXES)]
    if not gfd:
        return []
    read, ours = dialects.selector_keys(), target.selector_keys()
    keys = dict.fromkeys(key for key, _, _ in gfd if key not in read and key not in ours)
    if not keys:
        return []
    own = target.model_labels[0]
    pin = _pin(gfd, own, demand.gpus_on_one_node, dialects)
    return [
        # kubectl shows 120 characters: what happens first, the pin after.
        f"gpuport: GFD label {key} kept: only {target.name} nodes running GPU Feature Discovery (the GPU "
        f"Operator) have it ({target.name} names its GPUs by {own.label}{pin})"
        for key in keys
    ]


def _pin(gfd: list[Constraint], own: ModelLabel, gpus: int, dialects: Dialects) -> str:
    """': <the target's values for the GPUs GFD's model labels admit, on nodes holding `gpus` of them>'
    (or that none of its GPUs is one); "" when the pod requires no such label or one cannot be read (a
    bound written as a word)."""
    admitted: set[str] | None = None
    nvidia = [m for m in dialects.catalogue.models.values() if m.vendor == "nvidia"]
    for key, operator, written in gfd:
        value_of = MODEL_VALUE.get(key)
        if value_of is None:
            continue
        found: set[str] = set()
        for model in nvidia:
            holds = _holds(value_of(model), operator, written)
            if holds is None:
                return ""
            if holds:
                found.add(model.id)
        admitted = found if admitted is None else admitted & found
    if admitted is None:
        return ""
    named = [
        v
        for model, values in own.values.items()
        if model in admitted
        for v in values
        if own.gpus.get(v, gpus) >= gpus
    ]
    if not named:
        return ": none of its GPUs has what these labels ask"
    shown = ", ".join(named[:SHOWN]) + (", …" if len(named) > SHOWN else "")
    return f": {shown} for the GPUs these labels admit"


def _holds(value: int | str, operator: str, written: tuple[str, ...]) -> bool | None:
    """Whether a node whose GPU has `value` meets the requirement; None when it cannot be read."""
    if operator == "In":
        return str(value) in written
    if operator == "Exists":
        return True
    try:
        bound = int(written[0])
    except (IndexError, ValueError):
        return None
    if not isinstance(value, int):
        return None
    return value > bound if operator == "Gt" else value < bound
