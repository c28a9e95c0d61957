"""The arithmetic of bench/admission_bench.py's report (the benches themselves are run by hand)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from admission_bench import summarize


def test_each_case_is_divided_by_the_baseline_of_its_own_round():
    # The machine's speed drifts threefold between rounds. Round by round the case answers 0.9, 0.5 and
    # 1.25 of the baseline; dividing the medians instead (150 / 200) would report 0.75.
    rounds = {
        "bare": [{"req_per_s": 100.0}, {"req_per_s": 300.0}, {"req_per_s": 200.0}],
        "case": [{"req_per_s": 90.0}, {"req_per_s": 150.0}, {"req_per_s": 250.0}],
    }
    report = summarize(rounds, "bare")
    assert report["case"]["ratio"] == 0.9
    assert report["case"]["req_per_s"] == 150.0  # the table shows the case's median round
    assert report["bare"]["ratio"] == 1.0


def test_the_median_ratio_ignores_one_round_disturbed():
    rounds = {
        "bare": [{"req_per_s": 100.0}, {"req_per_s": 100.0}, {"req_per_s": 100.0}],
        "case": [{"req_per_s": 80.0}, {"req_per_s": 20.0}, {"req_per_s": 85.0}],
    }
    assert summarize(rounds, "bare")["case"]["ratio"] == 0.8
