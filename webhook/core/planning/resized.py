"""The MIG slices a right-sized fleet asks for (`gpuport rightsize --plan`): the cluster's running pods,
with each resized workload's pods replaced by its proposal. A workload moved to a slice asks for it on
the model it was measured on, wherever a node of that model has room; its old pods hold nothing."""

import dataclasses

from webhook.core.deciding.context import Context
from webhook.core.planning.slice_demand import SliceAsk, SliceDemand, slice_demand
from webhook.core.sizing.fleet import FleetSizing
from webhook.core.sizing.owners import workload_of
from webhook.core.vocabulary.inventory import Inventory


def resized_inventory(inventory: Inventory, fleet: FleetSizing) -> Inventory:
    """The inventory without the pods of the workloads that get a new ask: their GPUs are free."""
    resized = {s.workload for s in fleet.sizings if s.proposal is not None}
    kept = tuple(p for p in inventory.pods if workload_of(p.manifest) not in resized)
    return dataclasses.replace(inventory, pods=kept)


def resized_demand(inventory: Inventory, fleet: FleetSizing, context: Context) -> SliceDemand:
    """The running pods' slices (the resized ones left out) and each MIG proposal's, times its pods."""
    running = slice_demand([], context, resized_inventory(inventory, fleet))
    asks = list(running.asks)
    for sizing in fleet.sizings:
        proposal = sizing.proposal
        if proposal is None or not proposal.form.startswith("MIG ") or sizing.model is None:
            continue
        profile = proposal.form.removeprefix("MIG ")
        asks.append(SliceAsk(sizing.workload, profile, 1, sizing.pods, frozenset({sizing.model})))
    return SliceDemand(tuple(asks), running.problems)
