"""The shipped MIG geometry loads against the catalogue; a broken one is refused at its line."""

from fractions import Fraction

import pytest

from webhook.config.cloudmap import CloudMapError, default_directory, load_directory
from webhook.config.mig_geometry import load_geometry, parse_geometry_text, shipped_geometry_path
from webhook.core.vocabulary.catalogue import MigProfile

CATALOGUE = load_directory(default_directory()).catalogue


def test_the_shipped_geometry_loads_and_travels_with_the_package():
    geometries = load_geometry(CATALOGUE)
    assert shipped_geometry_path().is_file()
    assert str(geometries["A100-40GB"].placements["3g.20gb"]) == "{0,4}:4"
    assert geometries["A100-40GB"].most["3g.20gb"] == 2  # the catalogue's count, not repeated here


def _text(placement_lines: str) -> str:
    return (
        "models:\n"
        "  A30:\n"
        "    memory_slices: 4\n"
        "    source: a test\n"
        "    placements:\n"
        '      1g.6gb: "{0,1,2,3}:1"\n'
        '      1g.6gb+me: "{0,1,2,3}:1"\n'
        '      2g.12gb+me: "{0,2}:2"\n'
        '      4g.24gb: "{0}:4"\n' + placement_lines
    )


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('      2g.12gb: "{0,2}:2"\n      3g.18gb: "{0}:3"\n', "A30 has no MIG profile '3g.18gb'"),
        ('      2g.12gb: "{0,3}:2"\n', "2g.12gb: starting at slot 3, 2 slots run past the GPU's 4 memory"),
        ('      2g.12gb: "0,2:2"\n', "2g.12gb: '0,2:2' is not a placement"),
    ],
)
def test_a_bad_placement_is_refused_at_its_line(line, problem):
    with pytest.raises(CloudMapError) as info:
        parse_geometry_text(_text(line), "mig.yaml", CATALOGUE)
    bad_line = _text(line).splitlines().index(line.splitlines()[-1]) + 1
    assert (info.value.path, info.value.line) == ("mig.yaml", bad_line)
    assert info.value.problem.startswith(problem)


def test_a_profile_without_placement_is_refused_at_the_models_placements():
    with pytest.raises(CloudMapError) as info:
        parse_geometry_text(_text(""), "mig.yaml", CATALOGUE)
    assert (info.value.line, info.value.problem) == (5, "A30: no placement for 2g.12gb")


def test_a_model_without_source_is_refused():
    text = _text('      2g.12gb: "{0,2}:2"\n').replace("    source: a test\n", "")
    with pytest.raises(CloudMapError) as info:
        parse_geometry_text(text, "mig.yaml", CATALOGUE)
    assert (info.value.line, info.value.problem) == (2, "A30: say where the placements come from (source)")


def test_not_yaml_is_refused_at_its_line():
    with pytest.raises(CloudMapError) as info:
        parse_geometry_text("models:\n  A30: [\n", "mig.yaml", CATALOGUE)
    assert info.value.line == 3 and info.value.problem.startswith("not valid YAML")


def test_the_budget_s_memory_slices_are_the_geometry_s_for_every_model_and_profile():
    # The admission server never reads geometry/mig.yaml; the budget charges a MIG slice the larger of
    # its compute and memory share (GpuModel.slice_share) from the catalogue alone. Every figure it
    # works out must be the placements' own.
    catalogue = CATALOGUE
    geometries = load_geometry(catalogue)
    assert geometries
    for model_id, geometry in geometries.items():
        model = catalogue.models[model_id]
        assert model.memory_slices == geometry.memory_slices, model_id
        for name, placement in geometry.placements.items():
            profile = MigProfile.parse(name)
            assert model.memory_slots(profile) == placement.size, (model_id, name)
            assert model.slice_share(profile) == max(
                Fraction(profile.compute, geometry.compute_slices),
                Fraction(placement.size, geometry.memory_slices),
            )


def test_the_media_profiles_of_gh200_144gb_and_gb200_are_planned():
    # Both print a '+me' 1g profile (ID 20, 1/1) in their nvidia-smi mig -lgip (mig-parted#139, #227).
    from webhook.core.planning.layouts import check_layout

    geometries = load_geometry(CATALOGUE)
    for model, me, plain in (("GH200-144GB", "1g.18gb+me", "1g.18gb"), ("GB200", "1g.23gb+me", "1g.23gb")):
        assert geometries[model].most[me] == 1
        assert check_layout(geometries[model], {me: 1, plain: 6}).fits
        assert not check_layout(geometries[model], {me: 2}).fits


def test_gb200s_names_under_older_drivers_read_as_its_profiles():
    gb200 = load_geometry(CATALOGUE)["GB200"]
    assert [gb200.profile(n) for n in ("1g.24gb", "1g.24gb+me", "3g.95gb", "4g.95gb", "7g.189gb")] == [
        "1g.23gb",
        "1g.23gb+me",
        "3g.93gb",
        "4g.93gb",
        "7g.186gb",
    ]
    assert gb200.profile("2g.47gb") == "2g.47gb"


def test_every_balanced_layout_is_the_gpu_operators_and_fits():
    # The GPU Operator's all-balanced: two 1g, one 2g, one 3g (the A30: two 1g, one 2g).
    geometries = load_geometry(CATALOGUE)
    assert geometries["A100-40GB"].balanced == {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}
    assert geometries["GB200"].balanced == {"1g.23gb": 2, "2g.47gb": 1, "3g.93gb": 1}
    assert geometries["A30"].balanced == {"1g.6gb": 2, "2g.12gb": 1}
    assert all(g.balanced for g in geometries.values())


@pytest.mark.parametrize(
    ("extra", "line", "problem"),
    [
        ("    balanced: {2g.12gb: 3}\n", 5, "A30: balanced must map its profiles to counts it holds"),
        ("    balanced: {1g.6gb: 2, 2g.12gb: 1, 4g.24gb: 1}\n", 5, "A30: balanced does not fit"),
        ("    aliases: {1g.7gb: 3g.1gb}\n", 5, "A30: aliases must map names it lacks onto profiles it has"),
    ],
)
def test_a_bad_balanced_layout_or_alias_is_refused_at_its_line(extra, line, problem):
    text = _text('      2g.12gb: "{0,2}:2"\n').replace("    source: a test\n", "    source: a test\n" + extra)
    with pytest.raises(CloudMapError) as info:
        parse_geometry_text(text, "mig.yaml", CATALOGUE)
    assert info.value.line == line and info.value.problem.startswith(problem)
