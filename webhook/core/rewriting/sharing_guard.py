"""The overcommit guard for shared GPUs: a GPU whose memory is promised to more clients than it holds
takes every client down with it when one runs away, and time-slicing enforces no memory limit.

The cloud map's policy.sharing says how full a shared GPU may get (κ, `memory_fill`) and whether a
shared ask must say its memory. A shared ask that needs more than κ of the largest GPU it may be given
can never be served safely: it is refused, naming what fits. Every other shared-GPU pod is steered
off the nodes the node agent reports past κ (its `gpuport.io/shared-memory-full` label), by a required
node-affinity term, and told why. Only shares are guarded: whole GPUs and MIG slices (hardware
isolation, HAMi's and Volcano's dynamic MIG included) never are. The guard steers new pods; it cannot
move or stop pods already running.
"""

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from webhook.core.asks.demand import ContainerAsk, PodDemand
from webhook.core.rewriting.podedits import require_expression
from webhook.core.vocabulary.dialects import Dialects
from webhook.core.vocabulary.platform import CloudMap
from webhook.core.vocabulary.topology import SHARED_MEMORY_FULL

KEEP_OFF_FULL = {"key": SHARED_MEMORY_FULL, "operator": "NotIn", "values": ["true"]}


def shares(demand: PodDemand, target: CloudMap, every_node_shares: bool = False) -> list[ContainerAsk]:
    """The pod's asks that get a software share of a GPU on the target: shares (one asked as a MIG
    instance stays hardware-isolated wherever the target cuts one), fractions the map turns into shares,
    and whole-GPU asks that can only land on shared GPUs (the pod requires the map's sharing label, or,
    `every_node_shares`, every node offering the whole-GPU resource shares it)."""
    # One pass, nothing worked out a plain whole-GPU pod does not need: this runs on every pod create.
    found = []
    label = target.shared.node_label
    landing_on_shares: bool | None = None
    for a in demand.asks:
        kind = a.kind
        if kind == "shared":
            isolated = a.share is not None and a.share.isolated
            if not (isolated and (bool(target.mig_offered) or target.mig.form == "by-memory")):
                found.append(a)
        elif kind == "fraction":
            if target.fractional_policy == "shared":
                found.append(a)
        elif kind == "whole" and (label or every_node_shares) and target.whole_gpu in a.written:
            if landing_on_shares is None:
                landing_on_shares = every_node_shares or any(
                    key == label and operator in ("In", "Exists") for key, operator, _ in demand.constraints
                )
            if landing_on_shares:
                found.append(a)
    return found


def sharing_refusals(demand: PodDemand, target: CloudMap, dialects: Dialects) -> list[str]:
    """Why the pod's shares cannot be served within policy.sharing; [] when they can."""
    found = shares(demand, target)
    if not found:
        return []
    refusals = []
    fill = target.sharing_memory_fill
    catalogue = dialects.catalogue
    offered = dialects.models_offered(target)  # remembered per map: this runs on every shared pod
    pinned = [m for m in offered if m in (demand.selection.models or ())]
    candidates = sorted((catalogue.models[m] for m in pinned or offered), key=lambda m: m.memory_bytes)
    for ask in found:
        share = ask.share
        mib = share.memory_mib if share is not None else None
        part = _part_of_a_gpu(ask)
        if part is not None and part > Fraction(str(fill)):
            refusals.append(
                f"{ask.label} asks for {float(part):.0%} of a GPU's memory as a share; a client of a shared "
                f"GPU may fill at most {fill:.0%} (policy.sharing.memory_fill): ask for a whole GPU "
                f"({target.whole_gpu}: 1)"
            )
            continue
        unsaid = part is None and mib is None
        if unsaid and ask.kind == "shared" and target.sharing_memory_required:
            refusals.append(
                f"{ask.label} asks for a shared GPU without saying how much memory it needs, which "
                f"{target.name} requires (policy.sharing.memory_required): {_how_to_say(target)}"
            )
        if mib is None or not candidates:
            continue
        largest = candidates[-1]
        room = int((largest.memory_bytes >> 20) * fill)
        if mib > room:
            whole = next((m.id for m in candidates if (m.memory_bytes >> 20) >= mib), "")
            instead = f"ask for a whole {whole} ({target.whole_gpu}: 1)" if whole else "no GPU here holds it"
            refusals.append(
                f"{ask.label} asks for a shared GPU with {mib} MiB; a client of a shared {largest.id} may "
                f"fill at most {room} MiB ({fill:g} of {largest.memory_bytes >> 20} MiB, "
                f"policy.sharing.memory_fill): {instead}"
            )
    return refusals


def _part_of_a_gpu(ask: ContainerAsk) -> Fraction | None:
    """The part of one GPU's memory a share asks for when it says so as a part (a percentage, a
    fraction), else None."""
    if ask.kind == "fraction":
        return ask.fraction
    if ask.share is not None and ask.share.memory_percent is not None:
        return Fraction(ask.share.memory_percent, 100)
    return None


def _how_to_say(target: CloudMap) -> str:
    form = target.shared
    if form.memory_resource:
        return f"add {form.memory_resource}"
    if form.memory_annotation:
        return f"add the annotation {form.memory_annotation}"
    return "this cluster's shares cannot say memory: ask for a MIG slice or a whole GPU"


class SharedMemoryGuard:
    """A mutation (see core.deciding.context.Mutation): keeps shared-GPU pods off nodes whose shared
    GPUs are past κ, where the node agent labels nodes. `all_full`: every node offering shares that
    carries the label says true, in this view of the cluster."""

    label_keys: frozenset[str] = frozenset()  # reads and writes no pod label or annotation
    annotation_keys: frozenset[str] = frozenset()

    def __init__(self, target: CloudMap, all_full: bool, every_node_shares: bool = False):
        self.target = target
        self.all_full = all_full
        self.every_node_shares = every_node_shares

    def wants(self, pod: Mapping[str, Any], demand: PodDemand | None = None) -> bool:
        return demand is not None and bool(shares(demand, self.target, self.every_node_shares))

    def __call__(self, view: dict[str, Any], pod: Mapping[str, Any]) -> list[str]:
        percent = f"{self.target.sharing_memory_fill:.0%}"
        warnings = []
        if require_expression(view["spec"], KEEP_OFF_FULL):
            warnings.append(
                f"gpuport: shared GPU: kept off nodes with {SHARED_MEMORY_FULL}=true (past {percent} of "
                "memory)"
            )
        if self.all_full:
            warnings.append(
                f"gpuport: every node's shared GPUs are past {percent} of memory now: the pod waits"
            )
        return warnings
