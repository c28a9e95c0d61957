"""Pod annotations only one platform reads, kept on a pod moved elsewhere: said, never silent.

They are kept as written (on another platform nothing reads them, so they change nothing there), but a
pod written with them meant something the target will not give it:

- GKE's multi-networking annotations (`networking.gke.io/default-interface`, `networking.gke.io/
  interfaces`: GKE "Set up multi-network support for Pods") give the pod the extra NICs GPUDirect-TCPX,
  TCPXO and RDMA use; elsewhere the pod gets its default network only.
- HAMi's `nvidia.com/use-gpuuuid` (HAMi's "Specify GPU UUID" example, docs/specify-device-uuid-to-use)
  runs the pod on the named GPUs only; the UUIDs are the old cluster's cards, which no GPU elsewhere
  has, and on a cluster that does not run HAMi nothing reads them.
"""

from collections.abc import Mapping
from typing import Any

from webhook.core.vocabulary.platform import CloudMap

__all__ = ["INERT_ANNOTATIONS", "inert_warnings"]

# annotation → (the maps whose platform reads it, what the pod goes without elsewhere: short, a warning
# is one kubectl line)
INERT_ANNOTATIONS: Mapping[str, tuple[frozenset[str], str]] = {
    "networking.gke.io/interfaces": (frozenset({"gke"}), "GKE's extra NICs: none on {target}"),
    "networking.gke.io/default-interface": (frozenset({"gke"}), "GKE's multi-networking: not on {target}"),
    "nvidia.com/use-gpuuuid": (frozenset({"hami"}), "HAMi's pin to the old cluster's GPUs"),
}


def inert_warnings(annotations: Mapping[str, Any], target: CloudMap) -> list[str]:
    """One warning per annotation of INERT_ANNOTATIONS the pod carries that `target` does not read."""
    if annotations.keys().isdisjoint(INERT_ANNOTATIONS):
        return []
    return [
        f"gpuport: annotation {key} kept, inert: {without.format(target=target.name)}"
        for key, (readers, without) in INERT_ANNOTATIONS.items()
        if key in annotations and target.name not in readers
    ]
