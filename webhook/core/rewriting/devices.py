"""Devices beside the GPUs: every extended resource a pod asks for, accounted for on the target.

A pod written for one cloud often asks for that cloud's network or accelerator devices next to its
GPUs (an EKS NCCL job's vpc.amazonaws.com/efa). Kept as written on another cloud, such an ask waits
forever for a device no node there has. Each map describes its own devices (`devices`); for each
extended resource that is not a GPU:

- the target describes it: native, untouched;
- the target describes a device that is the same under another name (`same_as`): renamed, said;
- another map describes it and the target's map lists its devices: refused, naming the device, what
  it is and what the target offers;
- another map describes it and the target's map does not say which devices it has (a scheduler layer
  that runs on any cloud): kept, with a warning;
- no map describes it: kept, with a warning, never silently.

A device whose plugin runs on any cluster (`portable`: the RDMA shared device plugin's admin-named
`rdma/` resources) says nothing of where a pod came from: kept, with a warning, except where the
target's map lists its own node-to-node fabric (`rdma-network`, `gpudirect-network`) and this is not
it. EFA is the only RDMA fabric on AWS, and GKE gives its RDMA NICs through multi-networking: no node
there advertises an `rdma/` device, so the pod would wait forever; it is refused naming the fabric
the target has. A device
no map describes is mentioned only for a pod being moved (`translated`): on the cluster's own pods
(FUSE, KubeVirt, an FPGA) it is the admin's business, and a warning on each would be noise.

Why no equivalent across clouds is declared in the shipped maps: an EFA count is a number of network
interfaces, an InfiniBand ask from the RDMA shared device plugin is one device any number of pods
share, and a GKE network resource names a Network object that also needs the pod's interface
annotations. Moving a count from one to another would say something the pod did not ask for, so a
foreign device is refused rather than translated silently.
"""

from typing import NamedTuple

from webhook.core.asks.checks import is_extended_resource
from webhook.core.asks.claims import CLASS_RESOURCE_PREFIX
from webhook.core.rewriting.podedits import PodEdit, RenameResources
from webhook.core.vocabulary.dialects import Dialects
from webhook.core.vocabulary.platform import CloudDevice, CloudMap

__all__ = ["DevicePlan", "plan_devices"]


class DevicePlan(NamedTuple):
    edits: list[PodEdit]  # the renames, when there are any
    warnings: list[str]  # devices kept as written that the target may not have
    refusals: list[str]  # devices the target has no equivalent of


NO_DEVICES = DevicePlan([], [], [])
FABRICS = frozenset({"rdma-network", "gpudirect-network"})  # the networks between nodes


def plan_devices(
    names: frozenset[str], target: CloudMap, dialects: Dialects, translated: bool = True
) -> DevicePlan:
    """What becomes of each non-GPU extended resource among `names` (a pod's resource names) on
    `target`; `translated`: whether the pod is being moved from another platform's words."""
    others = [n for n in sorted(names) if _beside_gpus(n, dialects)]
    if not others:
        return NO_DEVICES
    renames: dict[str, str] = {}
    warnings: list[str] = []
    refusals: list[str] = []
    for name in others:
        if target.device_for(name) is not None:
            continue
        same = target.device_same_as(name)
        if same is not None and not same.resource.endswith("/"):
            renames[name] = same.resource
            continue
        owner = _described(name, target, dialects)
        if owner is None and not translated:
            continue
        if owner is None:
            warnings.append(
                f"gpuport: {name} is in no cloud map, kept as written: {target.name} nodes must advertise it"
            )
        elif owner[1].portable and owner[1].kind in FABRICS and (fabrics := _fabrics(target)):
            refusals.append(
                f"asks for {name} (on {owner[0]}: {owner[1].what}); no {target.name} node has it: "
                f"{target.name}'s fabric between nodes is {fabrics}"
            )
        elif target.devices is None or owner[1].portable:
            unsure = (
                "does not say whether its nodes have it" if target.devices is None else "does not list it"
            )
            warnings.append(
                f"gpuport: {name} (on {owner[0]}: {owner[1].what}) kept as written: the "
                f"{target.name} map {unsure}"
            )
        else:
            refusals.append(
                f"asks for {name} (on {owner[0]}: {owner[1].what}); {target.name} has no equivalent "
                f"and offers {_offers(target)}"
            )
    edits: list[PodEdit] = []
    if renames:
        said = ", ".join(f"{old} → {new}" for old, new in renames.items())
        edits.append(RenameResources(renames, f"gpuport: {said} (the same device on {target.name})"))
    return DevicePlan(edits, warnings, refusals)


def _fabrics(target: CloudMap) -> str:
    return "; ".join(d.describe() for d in target.devices or () if d.kind in FABRICS)


def _beside_gpus(name: str, dialects: Dialects) -> bool:
    """An extended resource that no map reads as a GPU and no DeviceClass stands for."""
    return is_extended_resource(name) and not name.startswith(CLASS_RESOURCE_PREFIX) and name not in dialects


def _described(name: str, target: CloudMap, dialects: Dialects) -> tuple[str, CloudDevice] | None:
    for cloud_map in dialects.maps:
        if cloud_map.name == target.name:
            continue
        device = cloud_map.device_for(name) or cloud_map.device_same_as(name)
        if device is not None:
            return cloud_map.name, device
    return None


def _offers(target: CloudMap) -> str:
    devices = target.devices or ()
    if not devices:
        return "no devices beside GPUs in its map"
    return "; ".join(d.describe() for d in devices)
