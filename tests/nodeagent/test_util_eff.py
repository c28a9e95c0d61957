"""Util_eff = Σ used ÷ Σ capacity, on devices written by hand (the pure functions, no NVML)."""

import pytest

from webhook.nodeagent.util_eff import (
    gpu_util_eff,
    node_util_eff,
    pod_memory_mib,
    shared_memory_full,
    usage_summary,
)


def device(index, used, total, compute=None, mig=None, processes=()):
    return {
        "index": index,
        "uuid": f"GPU-{index}" if mig is None else f"MIG-{index}-{mig}",
        "model": "X",
        "mig_profile": mig,
        "memory_used_mib": used,
        "memory_total_mib": total,
        "compute_percent": compute,
        "processes": [{"pid": pid, "memory_mib": mib, "pod_uid": pod} for pid, mib, pod in processes],
    }


# GPU 0: whole, 30000 of 80000 MiB, 50 %.  GPU 1: MIG-enabled, represented by two instances,
# 10000 of 40000 and 15000 of 20000 MiB (no compute on MIG).  GPU 2: whole, 70000 of 80000 MiB, its
# utilisation not answered.
DEVICES = [
    device(0, 30000, 80000, compute=50),
    device(1, 10000, 40000, mig="3g.40gb"),
    device(1, 15000, 20000, mig="2g.20gb"),
    device(2, 70000, 80000),
]


def test_util_eff_per_gpu_is_its_used_over_its_capacity_and_a_mig_gpu_is_the_sum_of_its_instances():
    assert gpu_util_eff(DEVICES) == {
        0: {"compute": 50 / 100, "memory": 30000 / 80000},  # 0.375
        1: {"compute": None, "memory": (10000 + 15000) / (40000 + 20000)},  # 0.41667, not (0.25 + 0.75) / 2
        2: {"compute": None, "memory": 70000 / 80000},  # 0.875
    }


def test_util_eff_per_node_sums_memory_over_every_device_once_and_averages_compute_over_gpus_that_answered():
    node = node_util_eff(DEVICES)
    # (30000 + 10000 + 15000 + 70000) / (80000 + 40000 + 20000 + 80000) = 125000 / 220000 = 0.56818
    assert node["memory"] == pytest.approx(125000 / 220000)
    assert node["compute"] == 0.5  # GPU 0 alone answered: 50 / 100
    assert usage_summary(DEVICES, 0.9)["util_eff"] == {"compute": 0.5, "memory": 0.568}


def test_a_device_that_did_not_report_memory_is_left_out_of_both_sums_not_counted_as_zero():
    devices = [*DEVICES, device(3, None, 80000, compute=100)]
    # Unchanged memory (125000 / 220000, not 125000 / 300000); compute (50 + 100) / 2 / 100 = 0.75.
    assert node_util_eff(devices) == {"compute": 0.75, "memory": pytest.approx(125000 / 220000)}
    assert node_util_eff([]) == {"compute": None, "memory": None}


def test_shared_memory_full_needs_every_whole_gpu_past_kappa_and_ignores_mig_instances():
    # Whole GPUs: 30000 / 80000 and 70000 / 80000. κ = 0.35 → 28000: both past; κ = 0.4 → 32000: GPU 0 not.
    assert shared_memory_full(DEVICES, 0.35) is True
    assert shared_memory_full(DEVICES, 0.4) is False
    assert shared_memory_full(DEVICES, 0.9) is False
    # Only MIG instances, however full: no device a share lands on, so not "full".
    assert shared_memory_full([device(1, 40000, 40000, mig="3g.40gb")], 0.9) is False
    assert shared_memory_full([], 0.9) is False
    # A whole GPU that did not report its memory cannot be called full.
    assert shared_memory_full([device(0, 79000, 80000), device(2, None, 80000)], 0.9) is False
    summary = usage_summary(DEVICES, 0.35)
    assert summary["shared_memory_full"] is True and summary["memory_fill_limit"] == 0.35


def test_pod_memory_sums_known_process_memory_and_leaves_unreported_memory_out():
    devices = [
        device(0, 1, 2, processes=[(10, 300, "a"), (11, None, "a"), (12, 200, None)]),
        device(1, 1, 2, mig="1g.10gb", processes=[(20, 100, "a"), (21, None, "b")]),
    ]
    # Pod a: 300 + 100 (process 11 reported no memory: left out, not 0). Pod b: nothing reported, no sum.
    # Process 12 belongs to no known pod.
    assert pod_memory_mib(devices) == {"a": 300 + 100}
