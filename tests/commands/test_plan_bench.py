"""bench/plan_bench.py's cluster, small: what it measures is what it says (the benches run by hand)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from plan_bench import measure


def test_the_benchmark_plans_every_pod_it_generates_and_they_fit():
    result = measure(nodes=40, pods=400)
    assert (result["gpus"], result["pods"], result["fits"]) == (320, 400, True)
    assert result["changed_nodes"] > 0


def test_end_to_end_both_loaders_read_the_kubectl_shaped_files_into_the_same_plan(tmp_path):
    from plan_bench import end_to_end

    fast, pure = (end_to_end(20, 200, tmp_path, loader) for loader in ("c", "pure"))
    assert fast["changed_nodes"] == pure["changed_nodes"] > 0
    assert fast["inventory_mib"] == pure["inventory_mib"] > 0
