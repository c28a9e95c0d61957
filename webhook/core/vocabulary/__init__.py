"""The words every other part uses: the GPU catalogue, a cloud map as values and every loaded map at once
(dialects), quantities, where a pod keeps its containers and each kind its pod templates, NVLink
topology, CUDA's driver table and the node inventory."""
