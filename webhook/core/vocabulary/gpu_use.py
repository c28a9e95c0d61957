"""GPU use as the budget counts it: GPU-equivalents and the GPU memory that comes with them.

One value for a container's ask, a claim's charge, a pod's total and a quota's used total, so the
budget's arithmetic (adding pods, taking a pod's peak) is written once. `MEASURES` says, for each of
its fields, which ResourceQuota entry limits it, how a limit and a figure read, and how the quota
ledger reads it: a new budget dimension is a field and a row here, plus how an ask (budget/
equivalents.py) and a claim (asks/pod_claims.device_charge) come to it.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache
from typing import Any

from webhook.core.vocabulary.quantity import MIB


@dataclass(frozen=True, slots=True)
class GpuUse:
    equivalents: Fraction = Fraction(0)
    memory_mib: int = 0  # GPU memory the use may take, for the optional gpuport.io/gpu-memory budget

    # Written out, not looped over MEASURES: the quota gate adds one per pod in a namespace.
    def __add__(self, other: "GpuUse") -> "GpuUse":
        return GpuUse(self.equivalents + other.equivalents, self.memory_mib + other.memory_mib)

    def most(self, other: "GpuUse") -> "GpuUse":
        """The larger of each measure: a pod's compute peak and its memory peak may come from
        different containers, and neither may be undercounted."""
        return GpuUse(max(self.equivalents, other.equivalents), max(self.memory_mib, other.memory_mib))

    def above(self, counted: "GpuUse") -> "GpuUse":
        """What this use adds to a sum that holds `counted` already, never below zero in a measure
        (the built-in quota's SubtractWithNonNegativeResult: an update is charged its increase)."""
        return GpuUse(
            max(self.equivalents - counted.equivalents, Fraction(0)),
            max(self.memory_mib - counted.memory_mib, 0),
        )


NO_GPU = GpuUse()


def show(value: Fraction) -> str:
    """3 as "3", 3/7 as "0.429": the quota message's numbers, as kubectl users read them."""
    if value.denominator == 1:
        return str(value.numerator)
    return f"{float(value):.3f}".rstrip("0")


@dataclass(frozen=True)
class Measure:
    field: str  # GpuUse's attribute
    quota_key: Callable[[str], str]  # the ResourceQuota `hard` entry, given the cluster's whole-GPU name
    limit: Callable[[Decimal], Any]  # that entry's quantity in the field's unit
    show: Callable[[Any], str]  # a figure as the denial message says it
    wire: str  # the ledger's key (to_wire writes it)
    from_wire: Callable[[Any], Any]

    def of(self, use: GpuUse) -> Any:
        return getattr(use, self.field)


GPU_MEMORY = "requests.gpuport.io/gpu-memory"

MEASURES: tuple[Measure, ...] = (
    Measure(
        field="equivalents",
        quota_key=lambda whole_gpu: f"requests.{whole_gpu}",
        limit=lambda hard: Fraction(str(hard)),
        show=show,
        wire="gpu",
        from_wire=lambda text: Fraction(str(text)),
    ),
    Measure(
        field="memory_mib",
        quota_key=lambda whole_gpu: GPU_MEMORY,
        limit=lambda hard: int(hard / MIB),
        show=lambda mib: f"{mib}Mi",
        wire="mib",
        from_wire=int,
    ),
)


_WIRE_KEYS = tuple(m.wire for m in MEASURES)


def to_wire(use: GpuUse) -> dict[str, Any]:
    """The ledger's fields for `use`. Written out like __add__, not looped over MEASURES: the Lease of
    a burst's few hundred reservations is written on every commit (tests/core/test_gpu_use.py holds
    the keys to MEASURES)."""
    return {"gpu": str(use.equivalents), "mib": use.memory_mib}


def from_wire(entry: Mapping[str, Any]) -> GpuUse:
    """A use as the ledger wrote it; a measure an older replica did not write counts nothing."""
    return _from_wire(*[entry.get(key) for key in _WIRE_KEYS])


# A burst's reservations repeat a handful of sizes; parsing a Fraction from text is the slow part of
# reading a Lease of a few hundred of them on every commit.
@lru_cache(maxsize=256)
def _from_wire(*values: Any) -> GpuUse:
    return GpuUse(**{m.field: m.from_wire(v) for m, v in zip(MEASURES, values, strict=True) if v is not None})
