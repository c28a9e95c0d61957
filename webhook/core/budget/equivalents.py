"""GPU-equivalents: one number for every way of asking for a GPU, so one quota covers them all.

- A whole GPU of any vendor counts 1.
- A MIG slice counts the larger of its compute slices over the GPU's and its memory slices over the
  GPU's: 1g.10gb on an H100 is 1/7, 1g.20gb there 1/4 (2 of 8 memory slices: 4 fit), 1g on an A30 1/4.
  The GPU is the model the pod pins; if it pins none, the model with that profile that makes the slice
  count most (never undercount).
- A shared GPU counts its share: memory over the GPU's memory, or a memory or compute percentage
  over 100, whichever is larger; the GPU is the pinned model, else the smallest the cluster offers.
  A shared slot that names neither (time-slicing) counts 1/replicas of the platform map
  (`shared.replicas_per_gpu`), else 1.
- A pod counts like the scheduler and the kubelet's device manager count requests, per resource name:
  for each name the larger of its init peak (each init container beside the sidecars started before it)
  and the sum of its app containers plus restartable init containers ("sidecars"), and the names added
  up. An init container's devices of a name no later container asks for stay the pod's: the larger of
  two GPU-equivalent totals would count 1 for inits asking 1 GPU and 7 × 1g.10gb beside an app's 7g.80gb,
  which hold 3. Its DRA claims are added whole, each once (a claim's devices are held for the pod's
  life whichever containers use them).
Exact fractions throughout: seven 1g slices sum to exactly one GPU.
"""

from fractions import Fraction

from webhook.core.asks.demand import ContainerAsk, PodDemand
from webhook.core.vocabulary.catalogue import Catalogue, GpuModel
from webhook.core.vocabulary.gpu_use import NO_GPU, GpuUse
from webhook.core.vocabulary.platform import CloudMap
from webhook.core.vocabulary.workloads import held_at_once


def ask_equivalents(
    ask: ContainerAsk, models: frozenset[str] | None, target: CloudMap, catalogue: Catalogue
) -> GpuUse:
    pinned = [catalogue.models[m] for m in sorted(models or ()) if m in catalogue.models]
    # The memory a whole GPU may bring: the largest of the models it may land on (never undercount the
    # optional memory budget); unpinned, the largest the cluster offers.
    largest = max(
        (m.memory_bytes >> 20 for m in pinned or _offered(target, catalogue, ask.vendor)), default=0
    )
    if ask.kind == "whole":
        return GpuUse(Fraction(ask.count), ask.count * largest)
    if ask.kind == "mig":
        slice_share = catalogue.slice_share(ask.mig_profile, models)
        return GpuUse(slice_share * ask.count, ask.mig_profile.memory_gb * 1024 * ask.count)
    if ask.kind == "fraction":
        return GpuUse(ask.gpu_fraction, int(largest * ask.gpu_fraction))
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
    # A share asked as a part of a card gets that part of the card it lands on: of the largest it may;
    # one asked both ways (KAI's scheduler reads gpu-fraction over gpu-memory) the larger.
    card = max(gpu_mib, largest)
    if share and share.memory_mib:
        memory = max(share.memory_mib, int(card * Fraction(share.memory_percent or 0, 100)))
    else:
        memory = int(card * max(parts))
    return GpuUse(min(max(parts), Fraction(1)) * ask.count, memory * ask.count)


def _offered(target: CloudMap, catalogue: Catalogue, vendor: str) -> list[GpuModel]:
    found = [catalogue.models[m] for m in target.models_offered(catalogue) if m in catalogue.models]
    return [m for m in found if m.vendor == vendor] or found


def pod_use(demand: PodDemand, target: CloudMap, catalogue: Catalogue, shared_claims: bool = True) -> GpuUse:
    """What the pod holds: its containers' asks as Kubernetes counts a pod's requests, plus every DRA
    claim it names (held for the pod's life, whichever containers use it). `shared_claims` off leaves
    out the claims made ahead, which the caller counts once for all the pods that share them."""
    models = demand.charged_models
    by_name: dict[object, list[tuple[ContainerAsk, GpuUse]]] = {}
    for a in demand.asks:
        if not a.claim:
            # An ask read from annotations (a KAI share) has no resource name: its own, by kind.
            name = a.resources or (a.kind, a.vendor, a.profile)
            by_name.setdefault(name, []).append((a, ask_equivalents(a, models, target, catalogue)))
    use = sum((held_at_once(asked, NO_GPU, GpuUse.most) for asked in by_name.values()), NO_GPU)
    use += demand.claims.own()
    if shared_claims:
        use = sum(demand.claims.shared().values(), use)
    return use
