"""The node agent: NVML → a node's GPU capability record, labels and annotation."""
