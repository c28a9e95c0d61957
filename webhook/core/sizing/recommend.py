"""The smallest ask that holds what a workload used, with headroom, on the model it ran on (pure).

Safe by construction, in this order:
- Nothing is proposed without enough history (a share of the window the caller sets), without a
  compute figure (NVML gives none on MIG instances), for a workload that may land on a model it was
  not measured on (a slice of another model is another slice), for a workload that asked for NVLink
  topology, or for asks this module does not size (DRA claims, several GPU containers).
- What is needed is the measured peak memory and compute percentile times (1 + headroom).
- A MIG slice holds it when its usable memory and its compute do, both read low: a slice's usable
  memory is taken as USABLE_SHARE of the size in its name (an H200 1g.18gb gives 16.0 GiB), its compute
  as SLICE_COMPUTE of its share of compute slices (an H100's 1g holds 16 of 132 SMs, 0.85 of 1/7).
- A share is proposed only in a form that caps memory (HAMi's, ACK's: the map's `memory` form), sized to
  the need and within the sharing guard's fill limit κ of the card; time-slicing caps nothing.
- Fewer whole GPUs hold it when they have the compute and the memory.
The cheapest that holds it wins, in GPU-equivalents as the quota charges them (webhook.core.budget), a
slice before a share before whole GPUs at the same charge (hardware isolation first). It must cost less
than today's ask, else the reason says why not.
"""

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from webhook.core.asks.demand import ContainerAsk, PodDemand, read_demand
from webhook.core.budget.equivalents import pod_use
from webhook.core.deciding.context import Context
from webhook.core.sizing.history import PodUsage
from webhook.core.vocabulary.catalogue import GpuModel, MigProfile

# A slice's usable memory over the size its name says: H200 1g.18gb = 16.0 GiB (0.889), A100-40 1g.5gb
# = 4.75 GiB (0.95), H100-80 7g.80gb = 79.25 GiB (0.99) (shared/reference/gpus.md, "Usable memory").
USABLE_SHARE = Fraction(88, 100)
# A slice's compute over its share of compute slices: A100-40 1g = 14 of 108 SMs (0.91 × 1/7), H200 1g
# = 16 of 132 (0.85 × 1/7), A100-40 7g = 98 of 108 (0.91).
SLICE_COMPUTE = Fraction(84, 100)
# NVIDIA's and gpuport's topology words: a workload that asked to sit on linked GPUs keeps its GPUs.
TOPOLOGY_ANNOTATIONS = ("gpuport.io/topology", "volcano.sh/numa-topology-policy")


@dataclass(frozen=True)
class Proposal:
    form: str  # "MIG 1g.10gb", "share of 12000 MiB", "2 GPUs"
    resources: Mapping[str, str]  # the GPU container's limits, in the cluster's words
    node_selector: Mapping[str, str]  # what the ask needs beside it (GKE's partition size), else empty
    gpus: Fraction  # its charge per pod, in GPU-equivalents
    memory_mib: int  # the memory it gives, as read low
    compute: Fraction  # the compute it gives, in GPUs, as read low


@dataclass(frozen=True)
class Sizing:
    workload: str
    pods: int
    model: str | None
    container: str
    today: str  # the GPU container's ask as written
    written: tuple[str, ...]  # the resource names it is written with (what a resized manifest replaces)
    today_gpus: Fraction  # per pod
    usage: PodUsage | None
    window_s: int
    proposal: Proposal | None
    reason: str  # why nothing is proposed, or what the proposal holds

    @property
    def saved(self) -> Fraction:
        """GPU-equivalents the workload frees, all its pods together."""
        return (self.today_gpus - self.proposal.gpus) * self.pods if self.proposal else Fraction(0)


@dataclass(frozen=True)
class Options:
    window_s: int
    headroom: Fraction = Fraction(1, 5)
    min_coverage: Fraction = Fraction(1, 2)  # of the window, for every figure


def size_workload(
    workload: str,
    pod: Mapping[str, Any],
    pods: int,
    models: frozenset[str],
    other_models: frozenset[str],
    usage: PodUsage | None,
    context: Context,
    options: Options,
) -> Sizing | None:
    """The sizing of one workload from one of its pods (`pod`, as running), the models its pods ran on,
    the other models the cluster has that its selectors allow (`other_models`), and its usage. None
    when the pod asks for no GPU."""
    demand = read_demand(pod, context.dialects)
    asks = [a for a in demand.asks if not a.claim]
    if not demand.asks:
        return None
    catalogue = context.dialects.catalogue
    today_gpus = pod_use(demand, context.target, catalogue).equivalents
    model = catalogue.get(next(iter(models))) if len(models) == 1 else None
    containers = sorted({a.name for a in asks})
    ask = asks[0] if asks else demand.asks[0]

    def sizing(proposal: Proposal | None, reason: str) -> Sizing:
        return Sizing(
            workload,
            pods,
            model.id if model else None,
            ask.name,
            ask.describe(),
            tuple(ask.written),
            today_gpus,
            usage,
            options.window_s,
            proposal,
            reason,
        )

    def said(reason: str) -> Sizing:
        return sizing(None, reason)

    why_not = _unsized(demand, asks, containers, models, other_models, pod, usage, options)
    if why_not:
        return said(why_not)
    assert model is not None and usage is not None  # _unsized said why otherwise
    assert usage.peak_memory_mib is not None and usage.compute is not None
    factor = 1 + options.headroom
    need_memory = math.ceil(usage.peak_memory_mib * factor)
    need_compute = usage.compute * factor
    cheaper = [p for p in _candidates(model, context, need_memory, need_compute) if p.gpus < today_gpus]
    held = [p for p in cheaper if p.memory_mib >= need_memory and p.compute >= need_compute]
    best = min(held, key=lambda p: (p.gpus, _FORM_ORDER[p.form.split()[0]]), default=None)
    if best is None:
        if not cheaper:
            return said(f"no smaller form on {model.id} here (no MIG slice or memory-capped share)")
        if all(p.compute < need_compute for p in cheaper):
            return said(f"compute-bound: needs {float(need_compute):.2f} GPUs of compute with headroom")
        return said(f"memory-bound: needs {need_memory} MiB with headroom; nothing smaller holds it")
    return sizing(
        best,
        f"holds {need_memory} MiB and {float(need_compute):.2f} GPUs of compute "
        f"({_percent(options.headroom)} headroom)",
    )


_FORM_ORDER = {"MIG": 0, "share": 1, "whole": 2}


def _unsized(
    demand: PodDemand,
    asks: list[ContainerAsk],
    containers: list[str],
    models: frozenset[str],
    other_models: frozenset[str],
    pod: Mapping[str, Any],
    usage: PodUsage | None,
    options: Options,
) -> str:
    if len(asks) != len(demand.asks):
        return "asks GPUs by ResourceClaim: not sized"
    if len(containers) != 1 or len(asks) != 1:
        return f"asks GPUs in {len(asks)} places ({', '.join(containers)}): sized only with one GPU ask"
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    if any(key in annotations for key in TOPOLOGY_ANNOTATIONS):
        return "asked for GPU topology: its GPUs are kept"
    if not models:
        return "the model of its nodes is unknown"
    if len(models) > 1:
        return f"ran on several models ({', '.join(sorted(models))}): pin one to right-size it"
    if other_models:
        return (
            f"may also run on {', '.join(sorted(other_models))}, measured on {next(iter(models))} only: "
            "pin the model to right-size it"
        )
    if usage is None:
        return "not measured: no samples of its pods in the window"
    window = options.window_s
    least = options.min_coverage * window
    for what, covered in (("memory", usage.memory_covered_s), ("compute", usage.compute_covered_s)):
        if covered < least:
            return f"too little history: {what} measured for {_duration(covered)} of {_duration(window)}"
    if usage.peak_memory_mib is None:
        return "memory not measured"
    if usage.compute is None:
        return "compute not measured (NVML gives no utilisation on MIG instances)"
    return ""


def _candidates(model: GpuModel, context: Context, memory_mib: int, compute: Fraction) -> list[Proposal]:
    target = context.target
    found: list[Proposal] = []
    offered = target.mig.profiles.get(model.id) if target.mig.profiles else None
    if target.mig.form in _MIG_ASKED and model.mig_capable and (offered is None or offered):
        for profile in model.mig_profiles():
            if profile.suffix or (offered is not None and profile.name not in offered):
                continue  # media and graphics engines only when asked for, which a measure cannot say
            found.append(_slice(profile, model, context))
    form = target.shared
    if form.traits.caps_memory and form.memory_resource:  # a share whose memory is enforced
        found += _share(model, context, memory_mib, compute)
    whole = target.whole_for(model.vendor)
    for count in range(1, 9):
        found.append(
            Proposal(
                f"whole {count}",
                {whole: str(count)},
                {},
                Fraction(count),
                count * model.memory_bytes >> 20,
                Fraction(count),
            )
        )
    return [p for p in found if p.gpus > 0]


# The MIG forms whose ask is a resource name (mixed, by-memory) or the whole GPU with a node label
# (partition-label); a single-strategy cluster's slices are its whole GPUs, sized as such.
_MIG_ASKED = ("mixed", "by-memory", "partition-label")


def _slice(profile: MigProfile, model: GpuModel, context: Context) -> Proposal:
    target = context.target
    if target.mig.form == "partition-label":
        resources, selector = {target.whole_for(model.vendor): "1"}, {target.mig.label: profile.name}
    else:
        resources, selector = {target.mig.resource_for(profile): "1"}, {}
    pod = {
        "spec": {
            "nodeSelector": dict(selector),
            "containers": [{"name": "c", "resources": {"limits": dict(resources)}}],
        }
    }
    return Proposal(
        f"MIG {profile.name}",
        resources,
        selector,
        _charge(pod, model, context),
        int(profile.memory_gb * 1024 * USABLE_SHARE),
        Fraction(profile.compute, model.compute_slices or 7) * SLICE_COMPUTE,
    )


def _share(model: GpuModel, context: Context, memory_mib: int, compute: Fraction) -> list[Proposal]:
    """A share of the map's memory form sized to the need (memory in whole GiB, cores in percent, both
    rounded up), if it fits within the sharing guard's fill limit κ of one card."""
    target = context.target
    form = target.shared
    card_mib = model.memory_bytes >> 20
    memory_mib = -(-memory_mib // 1024) * 1024
    if memory_mib > target.sharing_memory_fill * card_mib:
        return []
    resources = {
        form.count_resource or target.whole_for(model.vendor): "1",
        form.memory_resource: str(math.ceil(memory_mib * 2**20 / max(form.memory_unit_bytes, 1))),
    }
    if form.core_resource:
        cores = max(math.ceil(compute * form.core_per_gpu), 1)
        resources[form.core_resource] = str(cores)
        compute = Fraction(cores, form.core_per_gpu)
    else:
        compute = Fraction(0)  # no core limit: what time-slicing leaves it, which is not a promise
    pod = {"spec": {"containers": [{"name": "c", "resources": {"limits": dict(resources)}}]}}
    return [
        Proposal(f"share {memory_mib} MiB", resources, {}, _charge(pod, model, context), memory_mib, compute)
    ]


def _charge(pod: dict[str, Any], model: GpuModel, context: Context) -> Fraction:
    """What the quota charges `pod` pinned to `model` (0 when the map cannot read the ask: never proposed)."""
    demand = read_demand(pod, context.dialects)
    if demand.problems or not demand.asks:
        return Fraction(0)
    only = frozenset({model.id})
    pinned = demand._replace(selection=demand.selection._replace(models=only), charged_models=only)
    return pod_use(pinned, context.target, context.dialects.catalogue).equivalents


def _percent(value: Fraction) -> str:
    return f"{float(value) * 100:g} %"


def _duration(seconds: int | Fraction) -> str:
    seconds = int(seconds)
    if seconds >= 86400:
        return f"{seconds / 86400:.1f} d"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds // 60} min"
