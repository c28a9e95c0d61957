"""A GKE pod's named reservation, dropped off GKE: said as reserved capacity lost, not a stray label.

A GKE pod consumes one Compute Engine reservation by naming it (`cloud.google.com/reservation-name`,
with `cloud.google.com/reservation-affinity: specific`; GKE "Consuming reserved zonal resources").
No other platform's node carries the name, so the selector goes; what goes with it is the capacity
the author had reserved (often the only H100s to be had), and the pod now takes any capacity the
target gives. Kept so (a named reservation is not any reserved capacity: EKS's `reserved` capacity
type names none), and said in those words.
"""

from webhook.core.vocabulary.platform import CloudMap

__all__ = ["RESERVATION_NAME", "reservation_removed"]

RESERVATION_NAME = "cloud.google.com/reservation-name"


def reservation_removed(values: tuple[str, ...], target: CloudMap, where: str = "node selector") -> str:
    return (
        f"gpuport: {where} {RESERVATION_NAME}={'|'.join(values)} removed: GKE's reservation; "
        f"any {target.name} capacity now"
    )
