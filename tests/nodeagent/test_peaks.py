"""The agent's rolling peaks (nodeagent/peaks.py) and their reader (core/sizing/history.py): bounded,
never read low, and kept across a restart of the agent."""

import json
from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from tests.fakenvml import FakeNVML
from tests.helpers import context
from tests.nodeagent.fakecore import FakeCore
from webhook.core.sizing.history import from_agent_peaks, percentile
from webhook.core.vocabulary.topology import USAGE_PEAKS_ANNOTATION
from webhook.nodeagent import peaks
from webhook.nodeagent.agent import NodeAgent
from webhook.nodeagent.cgroup import pod_uid_reader

CATALOGUE = context().dialects.catalogue
DAY = 86400
T0 = 1_780_000_000 // DAY * DAY  # a day's start
WEEK = 7 * DAY
P95 = Fraction(95, 100)


def exact_percentile(values, q):
    """Nearest rank: the smallest value with at least q of the samples at or below it."""
    ordered = sorted(values)
    rank = max(int(-(-q * len(ordered) // 1)), 1)
    return ordered[rank - 1]


@given(
    st.lists(st.integers(min_value=0, max_value=800), min_size=1, max_size=300),
    st.sampled_from([Fraction(1, 2), Fraction(9, 10), P95, Fraction(99, 100), Fraction(1)]),
)
def test_a_percentile_read_from_the_bounded_histogram_is_never_below_the_samples_own(values, q):
    record = peaks.empty()
    for n, value in enumerate(values):
        record = peaks.add_sample(record, T0 + n * 60, 60, {"u": (100, value)})
    (day,) = record["pods"]["u"]
    assert len(day["c"]) <= peaks.MAX_BINS
    read = percentile({int(k): v for k, v in day["c"].items()}, q)
    assert read >= Fraction(exact_percentile(values, q), 100)
    # Coarsening rounds a bin up by at most its width: never more than that above the truth.
    assert read <= Fraction(exact_percentile(values, q) + day["w"], 100)


def test_days_join_across_the_window_and_a_day_outside_it_is_not_read():
    record = peaks.empty()
    record = peaks.add_sample(record, T0 - 9 * DAY, 60, {"u": (70000, 95)})  # dropped by the bound
    record = peaks.add_sample(record, T0 - 6 * DAY, 60, {"u": (9000, 40)})
    record = peaks.add_sample(record, T0 + 3600, 60, {"u": (5000, 10)})
    assert [b["t"] for b in record["pods"]["u"]] == [T0 - 6 * DAY, T0]
    usage, problems = from_agent_peaks({"n1": record}, T0 + 7200, WEEK, P95)
    assert problems == []
    assert usage["u"].peak_memory_mib == 9000 and usage["u"].compute == Fraction(40, 100)
    assert usage["u"].memory_covered_s == usage["u"].compute_covered_s == 120
    # A 2-day window no longer reaches the day of 9000 MiB.
    usage, _ = from_agent_peaks({"n1": record}, T0 + 7200, 2 * DAY, P95)
    assert usage["u"].peak_memory_mib == 5000


def test_the_record_is_bounded_in_pods_and_those_not_seen_lately_leave_first():
    record = peaks.empty()
    for n in range(10):
        record = peaks.add_sample(record, T0 - DAY + n, 1, {f"old-{n}": (1, 1)})
    for n in range(peaks.MAX_PODS):
        record = peaks.add_sample(record, T0 + n, 1, {f"new-{n:02}": (1, 1)})
    assert sorted(record["pods"]) == [f"new-{n:02}" for n in range(peaks.MAX_PODS)]


def test_a_record_not_in_the_agents_shape_is_said_and_its_pods_left_unmeasured():
    bad = {"v": 1, "day_s": DAY, "pods": {"u": [{"t": T0, "s": 60, "cs": 60, "m": "9 GiB", "c": {}, "w": 1}]}}
    usage, problems = from_agent_peaks({"n1": bad}, T0, WEEK, P95)
    assert usage == {}
    assert problems == ["node n1: its usage peaks are not in the node agent's format; not read"]
    assert peaks.read_back(json.dumps(bad)) == peaks.empty()
    assert peaks.read_back("not json") == peaks.empty()


def agent(fake, core, clock):
    return NodeAgent(
        fake, CATALOGUE, core, "node-a", pod_of=pod_uid_reader(fake.read_cgroup), wall_clock=clock
    )


def test_the_agent_keeps_each_pods_peaks_on_its_node_and_a_restarted_agent_carries_them_on():
    # The T4 time-sliced by five pods: 315 MiB each, the GPU 100 % busy (fixture t4-1-time-sliced-five-pods).
    fake = FakeNVML.load("t4-1-time-sliced-five-pods")
    core = FakeCore()
    now = [T0 + 100.0]
    first = agent(fake, core, lambda: now[0])
    first.publish_once()
    kept = json.loads(core.metadata.annotations[USAGE_PEAKS_ANNOTATION])
    assert len(kept["pods"]) == 4  # the fifth process has no pod (no cgroup): no pod to size
    day = next(iter(kept["pods"].values()))[0]
    # One device shared by five pods: each is given its whole 100 % (an upper bound), and 315 MiB.
    assert (day["m"], day["c"], day["s"]) == (315, {"100": 1}, 60)
    # A new agent (a restart) on the same Node: the first sample's day is carried on, not lost.
    now[0] += 60
    second = agent(fake, core, lambda: now[0])
    second._written_at = None
    second.publish_once()
    again = json.loads(core.metadata.annotations[USAGE_PEAKS_ANNOTATION])
    assert {uid: days[0]["s"] for uid, days in again["pods"].items()} == dict.fromkeys(kept["pods"], 120)


def test_the_agent_serves_each_pods_compute_for_prometheus_and_none_on_mig():
    from prometheus_client import generate_latest

    from webhook.nodeagent.metrics import usage_registry

    for fixture, expected in (("t4-1-time-sliced-five-pods", 4), ("a100-80gb-pcie-mig-balanced", 0)):
        fake = FakeNVML.load(fixture)
        a = agent(fake, FakeCore(), lambda: float(T0))
        a.record()
        text = generate_latest(usage_registry("node-a", lambda a=a: a.last_record)).decode()
        lines = [line for line in text.splitlines() if line.startswith("gpuport_pod_gpu_compute_ratio{")]
        assert len(lines) == expected
        assert all(line.endswith(" 1.0") for line in lines)


def test_a_sample_that_did_not_read_a_pods_memory_neither_lowers_its_peak_nor_covers_the_window():
    # Two processes of one pod, NVML reporting the memory of one: the sum of the other alone would read
    # low, so the sample has no memory figure and the time it stands for is not memory measured.
    devices = [
        {
            "compute_percent": 37.2,
            "processes": [
                {"pid": 1, "memory_mib": 900, "pod_uid": "u"},
                {"pid": 2, "memory_mib": None, "pod_uid": "u"},
            ],
        }
    ]
    assert peaks.pod_samples(devices) == {"u": (None, 38)}  # compute rounded up, never down
    record = peaks.add_sample(peaks.empty(), T0, 60, peaks.pod_samples(devices))
    (day,) = record["pods"]["u"]
    assert (day["m"], day["s"], day["cs"]) == (None, 0, 60)
