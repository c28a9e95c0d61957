"""gpuport: an admission webhook that makes GPU workloads portable across clouds."""

__version__ = "0.1.0"
