"""GPU topology arithmetic on a node's link matrix (one link name per GPU pair, as the node agent
records it): which GPUs form NVLink domains, and the cheapest k of them to place a pod on. Shared by
the node agent, which publishes the domains, and placement, which ranks nodes by the cost."""

import itertools

# Where the node agent publishes a node's capability record (its GPUs, MIG layout and this link matrix),
# and where the inventory reads it back.
CAPABILITY_ANNOTATION = "gpuport.io/capability"
# The node label the agent keeps: "true" while every GPU a share could land on is filled past the
# cloud map's policy.sharing.memory_fill (the webhook steers new shared-GPU pods off such nodes).
SHARED_MEMORY_FULL = "gpuport.io/shared-memory-full"
# Where the node agent keeps each pod's rolling usage peaks (nodeagent/peaks.py), apart from the
# capability record: the webhook reads that record on every node change, and never needs these.
USAGE_PEAKS_ANNOTATION = "gpuport.io/usage-peaks"

# Hop cost of a GPU pair, by the closest link between them (lower is faster).
HOPS = {"NVLINK": 1, "PCIE_SWITCH": 2, "HOST_BRIDGE": 3, "NUMA": 3, "SYSTEM": 4}


def nvlink_domains(matrix: list[list[str]]) -> list[list[int]]:
    """Largest sets of GPUs that are all NVLink-connected to each other (cliques), largest first."""
    n = len(matrix)
    linked = {i: {j for j in range(n) if j != i and matrix[i][j] == "NVLINK"} for i in range(n)}
    cliques: list[set[int]] = []

    def expand(clique: set[int], candidates: set[int], excluded: set[int]) -> None:
        if not candidates and not excluded:
            cliques.append(clique)
            return
        for v in sorted(candidates):
            expand(clique | {v}, candidates & linked[v], excluded & linked[v])
            candidates = candidates - {v}
            excluded = excluded | {v}

    expand(set(), set(range(n)), set())
    ordered = sorted((sorted(c) for c in cliques if len(c) > 1), key=lambda c: (-len(c), c))
    return ordered


def best_cost(matrix: list[list[str]], k: int) -> tuple[int | None, list[int]]:
    """The seed's cost Σ_{i<j} Hop_ij (uniform traffic) of the best k GPUs on this node, and which."""
    n = len(matrix)
    if k > n or k < 2:
        return (0 if 0 < k <= n else None), list(range(min(k, n)))
    best: tuple[int | None, list[int]] = (None, [])
    for subset in itertools.combinations(range(n), k):
        cost = sum(HOPS.get(matrix[i][j], 4) for i, j in itertools.combinations(subset, 2))
        if best[0] is None or cost < best[0]:
            best = (cost, list(subset))
    return best
