"""Manifests and inventories read fast (webhook/config/manifest_text.py): the values are those
`yaml.safe_load_all` gives, whichever path reads them, and a problem names the file, line and column."""

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.commands.cli import main
from webhook.config import manifest_text
from webhook.config.manifest_text import UnreadableText, documents

# Plain scalars of every type the safe loader resolves (YAML 1.1), and the forms the fast path leaves to
# it: anchors, aliases, merge keys, tags, keys that are collections.
CASES = [
    "a: 1\nb: [1, 2, '3', 0x1F, 0o17, 017, 1:20, -1_000, +12, 1e3, .inf, -.Inf, .nan, ~, null, Null]\n",
    "c: [yes, No, on, OFF, true, False, y, n]\nd: [2001-12-14t21:59:43.10-05:00, 2002-12-14]\n",
    "---\n---\na: 1\n...\n",
    "",
    "# only a comment\n",
    "x: &a {b: 1}\ny: *a\n",
    "a: {<<: {b: 1}, c: 2}\n",
    "a: !!str 1\nb: !!binary aGVsbG8=\nc: !!int '3'\nd: ! 3\n",
    "- 'quoted'\n- \"dq\\n\"\n- |\n  block\n- >\n  folded\n- ''\n- -\n- =x\n",
    "a: 1\na: 2\n",
    "- - - 1\n  - 2\n- {}\n- []\n- null\n",
    "1: 2\n3.5: x\nnull: y\ntrue: z\n~: w\n",
    "kind: List\nitems:\n- a: \"8\"\n  b: '8'\n  c: 8\n  d: 8Gi\n  e: 500m\n  f: 1.5\n",
    '{"kind": "List", "items": [{"a": 1, "b": [true, null, "x"]}]}',
    '{"a": 1, "b": }',
]


@pytest.mark.parametrize("text", CASES)
@pytest.mark.parametrize("loader", ["libyaml", "pure"])
def test_every_path_gives_what_safe_load_all_gives(monkeypatch, text, loader):
    if loader == "pure":
        monkeypatch.setattr(manifest_text, "LOADER", yaml.SafeLoader)  # PyYAML built without libyaml
    assert documents(text, "f.yaml") == list(yaml.safe_load_all(text))


scalars = st.one_of(
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=False),
    st.booleans(),
    st.none(),
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=12),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(values, min_size=1, max_size=3), st.booleans())
def test_any_dumped_documents_read_back_as_the_safe_loader_reads_them(docs, flow):
    text = yaml.safe_dump_all(docs, default_flow_style=flow)
    assert documents(text, "f.yaml") == list(yaml.safe_load_all(text))


def test_the_common_shape_is_read_without_falling_back_to_the_python_constructor(monkeypatch):
    # The fast path is the point: a listing as kubectl prints it must not reach PyYAML's constructor.
    def refuse(_text):
        raise AssertionError("fell back to the safe loader")

    monkeypatch.setattr(manifest_text, "_safe_load_all", refuse)
    text = "apiVersion: v1\nkind: List\nitems:\n- kind: Node\n  metadata:\n    labels: {x: 'y'}\n"
    assert documents(text, "f.yaml")[0]["items"][0]["metadata"]["labels"] == {"x": "y"}


@pytest.mark.parametrize("loader", ["libyaml", "pure"])
@pytest.mark.parametrize(
    ("text", "where", "what"),
    [
        ("a: 1\nb: [1,\n  2\nc: 3\n", "4:2", "while parsing a flow sequence"),
        ("a: b\n  c: d\n", "2:", "mapping values are not allowed"),
        ("a: 1\n---\nb: !!python/object:os.system x\n", "3:4", "could not determine a constructor"),
    ],
)
def test_a_problem_names_the_file_line_and_column_with_either_loader(monkeypatch, loader, text, where, what):
    if loader == "pure":
        monkeypatch.setattr(manifest_text, "LOADER", yaml.SafeLoader)
    with pytest.raises(UnreadableText) as raised:
        documents(text, "nodes.yaml")
    said = str(raised.value)
    assert said.startswith(f"nodes.yaml:{where}") and what in said
    assert "<unicode string>" not in said and "\n" not in said


def test_a_broken_inventory_is_said_with_its_file_and_line(tmp_path, capsys):
    broken = tmp_path / "nodes.yaml"
    broken.write_text("kind: List\nitems:\n- kind: Node\n  metadata:\n    name: [a}\n", encoding="utf-8")
    assert main(["plan", "mig", "--to", "eks", "--inventory", str(broken)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gpuport plan mig: inventory {broken}:5:") and err.count("\n") == 1


def test_a_broken_manifest_is_said_with_its_file_and_line(tmp_path, capsys):
    broken = tmp_path / "app.yaml"
    broken.write_text("kind: Deployment\nmetadata:\n  name: a\n b: c\n", encoding="utf-8")
    inventory = "examples/inventories/eks.yaml"
    assert main(["preflight", str(broken), "--from", "eks", "--to", "eks", "--inventory", inventory]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gpuport preflight: {broken}:4:") and err.count("\n") == 1


@pytest.mark.parametrize("number", [-9223372036854775809, 18446744073709551616, 10**30])
def test_a_json_integer_past_64_bits_is_read_whole_as_the_safe_loader_reads_it(number):
    # orjson reads it as a float (the property test above found -9223372036854775809 so).
    text = f'{{"count": {number}, "items": [1, 2.5]}}'
    expected = [{"count": number, "items": [1, 2.5]}]
    assert documents(text, "f.json") == expected == list(yaml.safe_load_all(text))
