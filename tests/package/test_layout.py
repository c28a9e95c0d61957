"""The package's shape as issue #13 set it: modules stay small or say why they are not."""

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
