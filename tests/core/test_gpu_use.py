"""The GPU-use value and its table of measures: every measure the budget adds is limited by a quota
entry, said in the denial, and carried by the quota ledger, without a second list to keep in step."""

from dataclasses import fields
from decimal import Decimal
from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from webhook.core.budget.quota import Quota, exceeded, gpu_quotas
from webhook.core.vocabulary.gpu_use import GPU_MEMORY, MEASURES, NO_GPU, GpuUse, from_wire, to_wire

uses = st.builds(
    GpuUse,
    st.fractions(min_value=0, max_value=64, max_denominator=56),
    st.integers(min_value=0, max_value=8 * 192 * 1024),
)


def test_every_field_of_a_gpu_use_has_exactly_one_measure():
    assert sorted(f.name for f in fields(GpuUse)) == sorted(m.field for m in MEASURES)
    assert len({m.wire for m in MEASURES}) == len(MEASURES)
    assert len({m.quota_key("nvidia.com/gpu") for m in MEASURES}) == len(MEASURES)


@given(uses, uses)
def test_adding_and_taking_the_most_work_measure_by_measure(a, b):
    for measure in MEASURES:
        assert measure.of(a + b) == measure.of(a) + measure.of(b)
        assert measure.of(a.most(b)) == max(measure.of(a), measure.of(b))
    assert a + NO_GPU == a


@given(uses)
def test_what_the_ledger_writes_it_reads_back_exactly(use):
    assert set(to_wire(use)) == {m.wire for m in MEASURES}
    assert from_wire(to_wire(use)) == use


def test_a_measure_an_older_replica_did_not_write_counts_nothing():
    assert from_wire({"gpu": "3/7"}) == GpuUse(Fraction(3, 7), 0)


def test_each_measure_is_limited_by_its_own_quota_entry_and_named_in_the_denial():
    whole = "nvidia.com/gpu"
    hard = {m.quota_key(whole): Decimal(0) for m in MEASURES}
    quota = Quota("every-measure", hard)
    assert gpu_quotas([quota, Quota("cpu-only", {"requests.cpu": Decimal(8)})], whole) == [quota]
    message = exceeded(quota, GpuUse(Fraction(1, 7), 10 * 1024), NO_GPU, whole)
    assert message is not None
    for key in hard:
        assert f"{key}=" in message
    assert "requests.nvidia.com/gpu=0.143" in message
    assert f"{GPU_MEMORY}=10240Mi" in message
