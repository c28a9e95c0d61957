"""The package's shape as issues #13 and #25 set it: modules stay small or say why they are not, and a
new sharing form or budget measure is written where issue #25 says it goes."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "webhook"
LONG = 300


def test_every_long_module_says_at_its_top_why_it_is_one_module():
    unexplained = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > LONG and "Why one module" not in (ast.get_docstring(ast.parse(text)) or ""):
            unexplained.append(str(path.relative_to(PACKAGE.parent)))
    assert unexplained == []


def test_no_two_modules_define_one_public_name_for_different_things():
    owners: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            names = []
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            owners_here = [n for n in names if not n.startswith("_")]
            for name in owners_here:
                owners.setdefault(name, []).append(str(path.relative_to(PACKAGE.parent)))
    # Shared by design, one protocol each: cli.py calls `register` and `run` on every command module;
    # `make manifests` runs each generator's `render`; every module has its own `log`.
    by_protocol = {"register", "run", "render", "log"}
    assert {n: where for n, where in owners.items() if len(where) > 1 and n not in by_protocol} == {}


def test_the_node_agent_contract_forbids_every_core_module_but_catalogue_topology_and_errors():
    import tomllib

    config = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))
    contract = next(
        c
        for c in config["tool"]["importlinter"]["contracts"]
        if c.get("source_modules") == ["webhook.nodeagent"]
    )
    forbidden = set(contract["forbidden_modules"])
    parts = {p.parent.name for p in (PACKAGE / "core").glob("*/__init__.py")}
    # Every part of the core but the vocabulary, whole; of the vocabulary, all but the catalogue, the
    # topology arithmetic and the error kinds the catalogue raises.
    assert {f"webhook.core.{part}" for part in parts - {"vocabulary"}} <= forbidden
    vocabulary = {
        f"webhook.core.vocabulary.{p.stem}"
        for p in (PACKAGE / "core" / "vocabulary").glob("*.py")
        if p.stem != "__init__"
    }
    allowed = {f"webhook.core.vocabulary.{m}" for m in ("catalogue", "topology", "errors")}
    assert vocabulary - allowed == {m for m in forbidden if m.startswith("webhook.core.vocabulary.")}


def test_the_core_is_a_handful_of_parts_each_in_the_layers_contract():
    import tomllib

    config = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))
    contract = next(
        c for c in config["tool"]["importlinter"]["contracts"] if c.get("containers") == ["webhook.core"]
    )
    layered = {name.strip() for layer in contract["layers"] for name in layer.split("|")}
    parts = {p.parent.name for p in (PACKAGE / "core").glob("*/__init__.py")}
    assert parts == layered
    assert [p.name for p in (PACKAGE / "core").glob("*.py")] == ["__init__.py"]  # no module outside a part


def test_every_error_the_core_raises_is_one_of_its_three_kinds():
    import importlib
    import inspect
    import pkgutil

    import webhook.core
    from webhook.core.vocabulary.errors import BadInput, Broken, CannotSay

    unkinded = []
    for info in pkgutil.walk_packages(webhook.core.__path__, "webhook.core."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
                and not issubclass(value, BadInput | CannotSay | Broken)
            ):
                unkinded.append(f"{info.name}.{name}")
    assert unkinded == []


def _compares_a_sharing_form_by_name(tree: ast.AST) -> bool:
    """Whether the module compares some `.form` with a sharing form's word (MIG forms have others;
    "none" is both kinds' and SharedForm.offered answers it)."""
    from typing import get_args

    from webhook.core.vocabulary.sharing import SharedFormName

    words = set(get_args(SharedFormName)) - {"none"}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        said = {
            e.value
            for s in sides
            for e in (s.elts if isinstance(s, ast.Tuple | ast.Set | ast.List) else [s])
            if isinstance(e, ast.Constant)
        }
        if said & words and any(isinstance(s, ast.Attribute) and s.attr == "form" for s in sides):
            return True
    return False


def test_a_sharing_form_is_told_apart_by_name_only_where_asks_are_read_written_and_defined():
    # Issue 25: a new sharing form is a word and a row in vocabulary/sharing.py, a schema branch, its
    # reading (asks/demand.py, through Dialects) and its writing (rewriting/translate_ask.py). Any other
    # module branching on the form's name would be one more file to touch.
    comparing = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if _compares_a_sharing_form_by_name(ast.parse(path.read_text(encoding="utf-8")))
    )
    assert comparing == ["core/rewriting/translate_ask.py", "core/vocabulary/sharing.py"]


def test_the_quota_and_its_ledger_name_no_measure_of_a_gpu_use():
    # Issue 25: a new budget measure is a field and a row in vocabulary/gpu_use.py, plus how an ask
    # (budget/equivalents.py) and a claim (asks/pod_claims.py) come to it. The quota's arithmetic and
    # the ledger go through MEASURES, so naming a field there would be one more file to touch.
    from dataclasses import fields

    from webhook.core.vocabulary.gpu_use import GpuUse

    measures = {f.name for f in fields(GpuUse)}
    naming = {}
    for name in ("core/budget/quota.py", "adapters/kube/ledger.py", "adapters/kube/quota_gate.py"):
        tree = ast.parse((PACKAGE / name).read_text(encoding="utf-8"))
        naming[name] = sorted({n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)} & measures)
    assert naming == {name: [] for name in naming}
