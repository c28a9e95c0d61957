"""GPU use as the budget counts it: GPU-equivalents and the GPU memory that comes with them.

One value for a container's ask, a claim's charge, a pod's total and a quota's used total, so the
budget's arithmetic (adding pods, taking a pod's peak) is written once.
"""

from dataclasses import dataclass
from fractions import Fraction


@dataclass(frozen=True, slots=True)
class GpuUse:
    equivalents: Fraction = Fraction(0)
    memory_mib: int = 0  # GPU memory the use may take, for the optional gpuport.io/gpu-memory budget

    def __add__(self, other: "GpuUse") -> "GpuUse":
        return GpuUse(self.equivalents + other.equivalents, self.memory_mib + other.memory_mib)

    def most(self, other: "GpuUse") -> "GpuUse":
        """The larger of each measure: a pod's compute peak and its memory peak may come from
        different containers, and neither may be undercounted."""
        return GpuUse(max(self.equivalents, other.equivalents), max(self.memory_mib, other.memory_mib))


NO_GPU = GpuUse()
