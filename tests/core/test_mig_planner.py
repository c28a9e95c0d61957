"""The MIG planner: every GPU it proposes passes the layout checker and the demand fits the proposal
(a property over random demands), on few GPUs, touching as few as it can."""

from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.config.cloudmap import default_directory, load_directory
from webhook.config.mig_geometry import load_geometry
from webhook.core.planning.layouts import check_layout
from webhook.core.planning.planner import Gpu, plan_model

CATALOGUE = load_directory(default_directory()).catalogue
GEOMETRY = load_geometry(CATALOGUE)
MODELS = sorted(GEOMETRY)


def _gpus(model, count, current=None, per_node=8):
    return [Gpu(f"node-{i // per_node}", i % per_node, model, current) for i in range(count)]


@st.composite
def scenarios(draw):
    model = draw(st.sampled_from(MODELS))
    geometry = GEOMETRY[model]
    profiles = sorted(geometry.placements)
    demand = draw(st.dictionaries(st.sampled_from(profiles), st.integers(1, 40), max_size=len(profiles)))
    layouts = [None, {}, *({p: geometry.most[p]} for p in profiles)]
    gpus = [
        Gpu(f"node-{i // 8}", i % 8, model, draw(st.sampled_from(layouts)))
        for i in range(draw(st.integers(0, 48)))
    ]
    return model, demand, gpus


@settings(max_examples=150, deadline=None)
@given(scenarios())
def test_every_proposed_gpu_is_valid_and_the_demand_fits_the_proposal(scenario):
    model, demand, gpus = scenario
    geometry = GEOMETRY[model]
    plan = plan_model(model, demand, gpus, geometry)
    assert [p.gpu for p in plan.gpus] == gpus  # one layout per GPU given, in order
    served: dict[str, int] = {}
    for planned in plan.gpus:
        verdict = check_layout(geometry, planned.layout)
        assert verdict.fits, (planned.layout, verdict.reason)
        for name, count in planned.serves.items():
            assert 0 < count <= planned.layout[name]
            served[name] = served.get(name, 0) + count
    for name, asked in demand.items():
        assert served.get(name, 0) + plan.short.get(name, 0) == asked
    # What is short takes the GPUs said: planned again with that many more, nothing is short.
    more = _gpus(model, len(gpus) + plan.more_gpus)
    assert bool(plan.short) == (plan.more_gpus > 0)
    assert not plan_model(model, demand, more, geometry).short


def test_slices_that_add_up_to_one_gpu_but_do_not_fit_on_one_take_two():
    # 3 + 3 + 1 compute slices make 7, yet the two 3g.20gb take all 8 memory slots.
    plan = plan_model("A100-40GB", {"3g.20gb": 2, "1g.5gb": 1}, _gpus("A100-40GB", 8), GEOMETRY["A100-40GB"])
    assert plan.used_gpus == 2 and not plan.short


def test_mixed_slices_share_gpus_rather_than_one_profile_per_gpu():
    demand = {"4g.20gb": 3, "3g.20gb": 3, "1g.5gb": 6, "2g.10gb": 3}
    plan = plan_model("A100-40GB", demand, _gpus("A100-40GB", 16), GEOMETRY["A100-40GB"])
    # 36 memory slots (3 × 4 + 3 × 4 + 6 × 1 + 3 × 2): no fewer than 5 GPUs of 8 slots.
    assert plan.used_gpus == 5 and not plan.short


def test_gpus_whose_layout_today_serves_the_demand_are_kept():
    today = {"3g.20gb": 2}
    plan = plan_model("A100-40GB", {"3g.20gb": 4}, _gpus("A100-40GB", 8, today), GEOMETRY["A100-40GB"])
    assert plan.used_gpus == 2 and plan.repartitioned == 0
    assert all(p.kept for p in plan.gpus)


def test_a_layout_today_that_wastes_gpus_is_changed():
    # All-1g.5gb GPUs hold no 2g.10gb: two of them are cut into 3 × 2g.10gb each.
    today = {"1g.5gb": 7}
    plan = plan_model("A100-40GB", {"2g.10gb": 6}, _gpus("A100-40GB", 4, today), GEOMETRY["A100-40GB"])
    assert plan.used_gpus == 2 and plan.repartitioned == 2
    assert [p.layout for p in plan.gpus] == [{"2g.10gb": 3}] * 2 + [today] * 2  # the rest stay as today


def test_unneeded_gpus_of_unknown_layout_are_left_alone():
    plan = plan_model("H100-80GB", {"1g.10gb": 7}, _gpus("H100-80GB", 16), GEOMETRY["H100-80GB"])
    assert plan.used_gpus == 1
    assert plan.repartitioned == 8  # the one node whose GPU changes, none of the other
    assert [p.layout for p in plan.gpus[8:]] == [{}] * 8


def test_what_does_not_fit_is_said_in_gpus_of_the_model():
    plan = plan_model("H100-80GB", {"3g.40gb": 7}, _gpus("H100-80GB", 2), GEOMETRY["H100-80GB"])
    assert plan.short == {"3g.40gb": 3}
    assert plan.more_gpus == 2


def test_planning_is_linear_in_gpus_not_exponential():
    """Not a timing: the number of distinct choices made stays small however many GPUs repeat them."""
    demand = {"1g.5gb": 3000, "2g.10gb": 2500, "3g.20gb": 2000, "4g.20gb": 1500}
    plan = plan_model("A100-40GB", demand, _gpus("A100-40GB", 8000), GEOMETRY["A100-40GB"])
    assert not plan.short
    assert len({tuple(sorted(p.layout.items())) for p in plan.gpus}) < 10


def test_the_floor_on_gpus_counts_memory_slots_compute_and_each_profiles_limit():
    from webhook.core.planning.planner import fewest_possible

    a100 = GEOMETRY["A100-40GB"]
    assert fewest_possible({"3g.20gb": 2, "1g.5gb": 1}, a100) == 2  # 9 memory slots
    assert fewest_possible({"1g.5gb": 8}, a100) == 2  # 7 to a GPU
    assert fewest_possible({"4g.20gb": 2}, a100) == 2  # one to a GPU, though 8 slots would hold two
    assert fewest_possible({}, a100) == 0


@settings(max_examples=60, deadline=None)
@given(scenarios())
def test_the_plan_never_claims_fewer_gpus_than_the_floor(scenario):
    model, demand, gpus = scenario
    plan = plan_model(model, demand, gpus, GEOMETRY[model])
    assert plan.used_gpus + plan.more_gpus >= plan.fewest_possible
