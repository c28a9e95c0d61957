"""GPU-equivalents: one number for every way of asking for a GPU, so one quota covers them all.

- A whole GPU of any vendor counts 1.
- A MIG slice counts its compute slices over the GPU's total: 1g on a 7-slice GPU is 1/7, on an A30 1/4.
  The GPU is the model the pod pins; if it pins none, the model with that profile that makes the slice
  count most (never undercount).
- A shared GPU counts its share: memory over the GPU's memory, or a memory or compute percentage
  over 100, whichever is larger; the GPU is the pinned model, else the smallest the cluster offers.
  A shared slot that names neither (time-slicing) counts 1/replicas of the platform map
  (`shared.replicas_per_gpu`), else 1.
- A pod counts like Kubernetes counts requests: the larger of its largest init container and the sum of
  its app containers plus restartable init containers ("sidecars"); its DRA claims are added whole,
  each once (a claim's devices are held for the pod's life whichever containers use them).
Exact fractions throughout: seven 1g slices sum to exactly one GPU.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from webhook.core.asks.demand import ContainerAsk, PodDemand
from webhook.core.vocabulary.catalogue import Catalogue, GpuModel
from webhook.core.vocabulary.platform import CloudMap


@dataclass(frozen=True)
class PodGpuUse:
    equivalents: Fraction
    memory_mib: int  # GPU memory the pod can use, for the optional gpuport.io/gpu-memory budget


def ask_equivalents(
    ask: ContainerAsk, models: frozenset[str] | None, target: CloudMap, catalogue: Catalogue
) -> tuple[Fraction, int]:
    pinned = [catalogue.models[m] for m in sorted(models or ()) if m in catalogue.models]
    # The memory a whole GPU may bring: the largest of the models it may land on (never undercount the
    # optional memory budget); unpinned, the largest the cluster offers.
    largest = max(
        (m.memory_bytes >> 20 for m in pinned or _offered(target, catalogue, ask.vendor)), default=0
    )
    if ask.kind == "whole":
        return Fraction(ask.count), ask.count * largest
    if ask.kind == "mig":
        slice_share = catalogue.slice_share(ask.mig_profile, models)
        return slice_share * ask.count, ask.mig_profile.memory_gb * 1024 * ask.count
    if ask.kind == "fraction":
        return ask.gpu_fraction, int(largest * ask.gpu_fraction)
    share = ask.share
    gpu = pinned or [catalogue.models[m] for m in target.models_offered(catalogue) if m in catalogue.models]
    gpu_mib = min((m.memory_bytes >> 20 for m in gpu), default=0)
    parts = []
    if share and share.memory_mib and gpu_mib:
        parts.append(Fraction(share.memory_mib, gpu_mib))
    if share and share.core_percent:
        parts.append(Fraction(share.core_percent, 100))
    if share and share.memory_percent:
        parts.append(Fraction(share.memory_percent, 100))
    if not parts:
        parts.append(Fraction(1, target.shared.replicas_per_gpu or 1))
    memory = share.memory_mib if share and share.memory_mib else int(gpu_mib * max(parts))
    return min(max(parts), Fraction(1)) * ask.count, memory * ask.count


def _offered(target: CloudMap, catalogue: Catalogue, vendor: str) -> list[GpuModel]:
    found = [catalogue.models[m] for m in target.models_offered(catalogue) if m in catalogue.models]
    return [m for m in found if m.vendor == vendor] or found


def pod_use(
    pod: Mapping[str, Any],
    demand: PodDemand,
    target: CloudMap,
    catalogue: Catalogue,
    shared_claims: bool = True,
) -> PodGpuUse:
    """What the pod holds: its containers' asks as the kubelet counts them, plus every DRA claim it
    names (held for the pod's life, whichever containers use it). `shared_claims` off leaves out the
    claims made ahead, which the caller counts once for all the pods that share them."""
    spec = pod.get("spec") or {}
    sidecars = {
        i
        for i, c in enumerate(spec.get("initContainers") or [])
        if isinstance(c, Mapping) and c.get("restartPolicy") == "Always"
    }
    app, sidecar, init = (Fraction(0), 0), (Fraction(0), 0), (Fraction(0), 0)
    for ask in demand.asks:
        if ask.claim:
            continue  # counted with its claim, below
        amount = ask_equivalents(ask, demand.selection.models, target, catalogue)
        if ask.list_name == "containers":
            app = (app[0] + amount[0], app[1] + amount[1])
        elif ask.index in sidecars:
            sidecar = (sidecar[0] + amount[0], sidecar[1] + amount[1])
        else:
            init = (max(init[0], amount[0]), max(init[1], amount[1]))
    running = (app[0] + sidecar[0], app[1] + sidecar[1])
    claimed, claimed_memory = demand.claims.own()
    if shared_claims:
        for equivalents, memory in demand.claims.shared().values():
            claimed, claimed_memory = claimed + equivalents, claimed_memory + memory
    return PodGpuUse(
        equivalents=max(running[0], init[0]) + claimed,
        memory_mib=max(running[1], init[1]) + claimed_memory,
    )


def show(value: Fraction) -> str:
    """3 as "3", 3/7 as "0.429": the quota message's numbers, as kubectl users read them."""
    if value.denominator == 1:
        return str(value.numerator)
    return f"{float(value):.3f}".rstrip("0")
