"""The GPU budget: GPU-equivalents of every form, ResourceQuota arithmetic and GPU limits."""
