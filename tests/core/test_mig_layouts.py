"""The MIG layout checker: NVIDIA's documented valid and invalid combinations, an independent search
over the same placements, and the planner's choices (every maximal layout, none missing)."""

import itertools

import pytest

from webhook.config.cloudmap import default_directory, load_directory
from webhook.config.mig_geometry import load_geometry
from webhook.core.planning.geometry import parse_geometry, parse_placement
from webhook.core.planning.layouts import check_layout, maximal_layouts

CATALOGUE = load_directory(default_directory()).catalogue
GEOMETRY = load_geometry(CATALOGUE)


# From the MIG user guide ("Getting Started with MIG": two 3g.20gb or seven 1g.5gb on an A100-40GB;
# the A100 profile table's instance counts) and the placements it prints.
A100_VALID = [
    {"7g.40gb": 1},
    {"1g.5gb": 7},
    {"3g.20gb": 2},
    {"4g.20gb": 1, "3g.20gb": 1},
    {"4g.20gb": 1, "2g.10gb": 1, "1g.5gb": 1},
    {"4g.20gb": 1, "1g.5gb": 3},
    {"3g.20gb": 1, "2g.10gb": 2},
    {"3g.20gb": 1, "1g.5gb": 4},
    {"2g.10gb": 3, "1g.5gb": 1},
    {"2g.10gb": 3, "1g.10gb": 1},  # the 1g.10gb takes slots 6 and 7, past the last 2g.10gb start
    {"1g.10gb": 4},
    {"1g.5gb+me": 1, "1g.5gb": 6},
]
A100_INVALID = [
    ({"3g.20gb": 2, "1g.5gb": 1}, "9 memory slices asked; A100-40GB has 8"),  # 7 compute slices, still no
    ({"4g.20gb": 2}, "A100-40GB holds at most 1 × 4g.20gb, not 2"),
    ({"3g.20gb": 3}, "A100-40GB holds at most 2 × 3g.20gb, not 3"),
    ({"1g.5gb": 8}, "A100-40GB holds at most 7 × 1g.5gb, not 8"),
    ({"1g.10gb": 4, "1g.5gb": 1}, "9 memory slices asked; A100-40GB has 8"),
    ({"4g.20gb": 1, "2g.10gb": 2}, "8 compute slices asked; A100-40GB has 7"),
    ({"7g.40gb": 1, "1g.5gb": 1}, "8 compute slices asked; A100-40GB has 7"),
    ({"1g.5gb+me": 2}, "A100-40GB holds at most 1 × 1g.5gb+me, not 2"),
    ({"2g.20gb": 1}, "A100-40GB has no MIG profile 2g.20gb"),
]
# H100 80GB: `nvidia-smi mig -cgi 9,15,19 -C` (3g.40gb + 1g.20gb + 1g.10gb) as run on H100s in public
# how-tos, and the user guide's H100 profile table.
H100_VALID = [
    {"3g.40gb": 1, "1g.20gb": 1, "1g.10gb": 1},
    {"3g.40gb": 2},
    {"4g.40gb": 1, "3g.40gb": 1},
    {"2g.20gb": 3, "1g.10gb": 1},
    {"1g.10gb": 7},
    {"7g.80gb": 1},
]
H100_INVALID = [
    {"3g.40gb": 2, "1g.10gb": 1},
    {"4g.40gb": 1, "3g.40gb": 1, "1g.10gb": 1},
    {"1g.20gb": 4, "1g.10gb": 1},
    {"7g.80gb": 1, "1g.10gb": 1},
]


@pytest.mark.parametrize("layout", A100_VALID, ids=str)
def test_documented_a100_40gb_layouts_fit(layout):
    verdict = check_layout(GEOMETRY["A100-40GB"], layout)
    assert verdict.fits, verdict.reason
    instances = sorted(name for name, count in layout.items() for _ in range(count))
    assert sorted(name for name, _ in verdict.starts) == instances


@pytest.mark.parametrize(("layout", "reason"), A100_INVALID, ids=str)
def test_documented_a100_40gb_layouts_that_do_not_fit_say_why(layout, reason):
    verdict = check_layout(GEOMETRY["A100-40GB"], layout)
    assert not verdict.fits
    assert verdict.reason.startswith(reason)


@pytest.mark.parametrize("layout", H100_VALID, ids=str)
def test_documented_h100_80gb_layouts_fit(layout):
    assert check_layout(GEOMETRY["H100-80GB"], layout).fits


@pytest.mark.parametrize("layout", H100_INVALID, ids=str)
def test_h100_80gb_layouts_past_its_slots_do_not_fit(layout):
    assert not check_layout(GEOMETRY["H100-80GB"], layout).fits


def test_the_instances_found_never_share_a_slot_and_start_where_their_profile_may():
    geometry = GEOMETRY["A100-40GB"]
    verdict = check_layout(geometry, {"3g.20gb": 1, "2g.10gb": 1, "1g.10gb": 1})
    used: list[int] = []
    for name, start in verdict.starts:
        placement = geometry.placements[name]
        assert start in placement.starts
        used += range(start, start + placement.size)
    assert sorted(used) == list(range(8))


def _reachable(geometry, layout):
    """An independent answer: every set of occupied slots reachable placing the instances one by one
    (a breadth-first over slot masks); the layout fits when any survives the last instance."""
    masks = {0}
    for name in (n for n, c in sorted(layout.items()) for _ in range(c)):
        placement = geometry.placements[name]
        step = set()
        for mask in masks:
            for start in placement.starts:
                bits = ((1 << placement.size) - 1) << start
                if not mask & bits:
                    step.add(mask | bits)
        masks = step
    return bool(masks)


@pytest.mark.parametrize("model", ["A30", "A100-40GB", "H100-94GB"])
def test_the_checker_agrees_with_an_independent_search_on_every_plain_layout(model):
    geometry = GEOMETRY[model]
    names = sorted(n for n in geometry.placements if "+" not in n)
    for counts in itertools.product(*(range(geometry.most[n] + 1) for n in names)):
        layout = dict(zip(names, counts, strict=True))
        compute = sum(int(n.split("g.")[0]) * c for n, c in layout.items())
        expected = _reachable(geometry, layout) and compute <= geometry.compute_slices
        assert check_layout(geometry, layout).fits == expected, layout


def test_the_media_engine_goes_to_one_instance_per_gpu():
    verdict = check_layout(GEOMETRY["A30"], {"1g.6gb+me": 1, "2g.12gb+me": 1})
    assert not verdict.fits
    assert verdict.reason == "A30 has media engines for 1 '+me' instance(s), not 2"


@pytest.mark.parametrize("model", ["A30", "A100-40GB", "H100-80GB"])
def test_maximal_layouts_are_valid_full_and_cover_every_valid_layout(model):
    geometry = GEOMETRY[model]
    names = sorted(n for n in geometry.placements if "+" not in n)
    choices = maximal_layouts(geometry, names)
    assert choices and all(check_layout(geometry, c).fits for c in choices)
    for choice in choices:  # nothing more fits on any of them
        assert not any(check_layout(geometry, {**choice, n: choice.get(n, 0) + 1}).fits for n in names)
    for counts in itertools.product(*(range(geometry.most[n] + 1) for n in names)):
        layout = dict(zip(names, counts, strict=True))
        if check_layout(geometry, layout).fits:
            assert any(all(c.get(n, 0) >= k for n, k in layout.items()) for c in choices), layout


def test_a_placement_is_read_in_nvidia_smis_notation():
    placement = parse_placement("{0,2,4}:2")
    assert placement is not None
    assert (placement.starts, placement.size, str(placement)) == ((0, 2, 4), 2, "{0,2,4}:2")
    assert parse_placement("0,2,4:2") is None
    assert parse_placement("{0,2}:0") is None


def _problems(placements, slots=8, model="A100-40GB"):
    entry = {"memory_slices": slots, "source": "test", "placements": placements}
    return parse_geometry({"models": {model: entry}}, CATALOGUE)


def test_the_geometry_refuses_a_profile_the_model_lacks_and_a_placement_past_its_slots():
    shipped = {n: str(p) for n, p in GEOMETRY["A100-40GB"].placements.items()}
    geometries, problems = _problems({**shipped, "2g.20gb": "{0,2,4}:2", "3g.20gb": "{0,6}:4"})
    assert geometries == {}
    assert [(p.path[-1], p.problem) for p in problems] == [
        ("3g.20gb", "3g.20gb: starting at slot 6, 4 slots run past the GPU's 8 memory slices"),
        (
            "2g.20gb",
            "A100-40GB has no MIG profile '2g.20gb' (the catalogue lists 1g.10gb, 1g.5gb, 1g.5gb+me, "
            "2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb)",
        ),
    ]


def test_the_geometry_refuses_a_model_with_a_profile_left_without_placement():
    shipped = {n: str(p) for n, p in GEOMETRY["A100-40GB"].placements.items() if n != "7g.40gb"}
    _, problems = _problems(shipped)
    assert [p.problem for p in problems] == ["A100-40GB: no placement for 7g.40gb"]


def test_every_shipped_model_with_mig_has_geometry_but_the_one_left_out():
    with_mig = {m.id for m in CATALOGUE.models.values() if m.mig_capable}
    assert with_mig - set(GEOMETRY) == {"RTX-PRO-6000"}
    for geometry in GEOMETRY.values():
        assert geometry.source
        assert geometry.seen_on == "hardware" or GEOMETRY[geometry.seen_on].seen_on == "hardware"
