"""What a translation loses of the source's GPU sharing, said.

A GKE node pool may time-share (or share by MPS) its GPUs among a number of clients, MIG partitions
included (`gke-gpu-partition-size` with `gke-gpu-sharing-strategy` and `gke-max-shared-clients-per-gpu`).
The ask reads as a MIG slice, which every other platform gives to one pod alone; and the number of
clients is a label no other platform's nodes carry. Neither may go unsaid: the pod now needs a slice of
its own (N times the slices), and a shared GPU elsewhere is shared by as many as that cluster's nodes
were set up for. Each is said with what the target's map says an admin sets to share
(`clients_setting`), else how the target shares GPUs otherwise, else that it offers no sharing.
"""

from collections.abc import Mapping
from typing import NamedTuple

from webhook.core.asks.demand import Constraint, PodDemand
from webhook.core.rewriting.translate_ask import TargetAsk
from webhook.core.vocabulary.dialects import Dialects
from webhook.core.vocabulary.platform import CloudMap

__all__ = ["sharing_lost"]


class _Source(NamedTuple):
    """How the source platform shared the pod's GPUs: its map, the strategy label value, the clients
    per GPU (0: not said)."""

    map: CloudMap
    strategy: str
    clients: int


def sharing_lost(
    demand: PodDemand,
    asked_there: Mapping[tuple[str, int], TargetAsk],
    target: CloudMap,
    dialects: Dialects,
) -> list[str]:
    """The warnings for sharing a translation does not keep (none where nothing was shared by label,
    or the target shares by the same label)."""
    if not demand.selection.shared:
        return []
    source = _source(demand.constraints, dialects)
    if source is None or source.map.shared.node_label == target.shared.node_label:
        return []
    said: list[str] = []
    for ask in demand.asks:
        there = asked_there.get((ask.list_name, ask.index))
        if there is None:
            continue
        if ask.kind == "mig":
            by = f"{source.clients} pods" if source.clients else "several pods"
            resource = next(iter(sorted(there.resources)), "")
            said.append(
                f"gpuport: MIG {ask.mig_profile.name} no longer shared: on {source.map.name} {by} shared "
                f"each slice ({source.strategy}); on {target.name} each pod holds one; "
                f"{_advice(target, there, resource, source.clients)}"
            )
        elif ask.kind == "shared":
            label = source.map.shared.clients_label
            count = f" by {source.clients} clients per GPU ({label})" if source.clients else ""
            setting = target.shared.sharing_setting(target.whole_gpu, source.clients)
            how = f"; an admin sets {setting}" if setting else ""
            how_shared = (
                source.strategy if source.strategy.endswith("sharing") else f"{source.strategy} sharing"
            )
            said.append(
                f"gpuport: {source.map.name}'s {how_shared}{count} not kept as such: on "
                f"{target.name} its nodes' sharing set-up decides how and by how many{how}"
            )
    return list(dict.fromkeys(said))


def _source(constraints: tuple[Constraint, ...], dialects: Dialects) -> _Source | None:
    """The map whose sharing label the pod selects, the value it selects, and the clients per GPU
    its clients label names (0 when it names none)."""
    for key, operator, values in constraints:
        if operator != "In":
            continue
        for cloud_map in dialects.maps:
            form = cloud_map.shared
            strategy = next((v for v in values if form.marks_shared(key, v)), "")
            if strategy:
                return _Source(cloud_map, strategy, _clients(constraints, form.clients_label))
    return None


def _clients(constraints: tuple[Constraint, ...], label: str) -> int:
    for key, operator, values in constraints:
        if label and key == label and operator == "In" and len(values) == 1 and values[0].isdigit():
            return int(values[0])
    return 0


def _advice(target: CloudMap, there: TargetAsk, resource: str, clients: int) -> str:
    if there.device is not None:
        return f"pods share one on {target.name} by referencing one ResourceClaim"
    setting = target.shared.sharing_setting(resource, clients)
    if setting:
        return f"to share it, an admin sets {setting}"
    offer = target.shared.offer(target.whole_gpu, target.scheduler_name)
    if offer:
        return f"{target.name} offers {offer}"
    return f"{target.name} offers no GPU sharing"
