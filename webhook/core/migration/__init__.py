"""The migration preflight: per-workload checks and risk, capacity packing."""
