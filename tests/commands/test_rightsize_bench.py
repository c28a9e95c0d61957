"""bench/rightsize_bench.py's fleet, small: what it measures is what it says (the benches run by hand)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from rightsize_bench import measure


def test_the_benchmark_sizes_every_workload_it_generates_and_resizes_them():
    result = measure(pods=80)
    assert (result["exit"], result["pods"], result["workloads"]) == (0, 80, 10)
    assert result["resized"] == 10  # every pod at most 25,000 MiB and 30 % busy: a slice holds it
