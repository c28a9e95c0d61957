"""The decision core must stay pure: no HTTP framework, no Kubernetes client, no file or network I/O.

import-linter (`make lint`, contracts in pyproject.toml) keeps the layers and bans the frameworks; this
test is stricter on the standard library, which import-linter does not see: every module under
webhook/core/ may import only the computation-only modules below, so no os, socket or pathlib creeps in."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ALLOWED_IMPORTS = {
    "base64",
    "collections",
    "copy",
    "dataclasses",
    "decimal",
    "fractions",
    "functools",
    "hashlib",  # digests of decision inputs (decision_key)
    "itertools",
    "json",
    "math",
    "operator",  # the comparison functions
    "re",
    "types",
    "typing",
    "jsonpatch",  # pure computation on dicts
    "orjson",  # the JSON codec (C): parses reviews and spells decision keys, no I/O
    "kubernetes.utils",  # parse_quantity only; see webhook/core/vocabulary/quantity.py
    "webhook",
}
CORE = Path(__file__).resolve().parents[2] / "webhook" / "core"
# "part/module", for every module of every part of the core.
CORE_MODULES = sorted(
    str(path.relative_to(CORE).with_suffix("")) for path in CORE.rglob("*.py") if path.stem != "__init__"
)


def imported_names(module: str) -> set[str]:
    tree = ast.parse((CORE / f"{module}.py").read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.add(node.module)
    return names


def test_the_core_is_found_where_the_tree_says():
    assert {
        "deciding/admission",
        "asks/demand",
        "rewriting/translate",
        "budget/quota",
        "vocabulary/topology",
    } <= set(CORE_MODULES)


@pytest.mark.parametrize("module", CORE_MODULES)
def test_core_module_imports_only_pure_dependencies(module):
    for name in imported_names(module):
        assert any(name == ok or name.startswith(ok + ".") for ok in ALLOWED_IMPORTS), (
            f"webhook/core/{module}.py imports {name}, which the pure core must not use"
        )


def test_core_imports_with_adapters_blocked():
    code = (
        "import sys\n"
        "for name in ('flask', 'werkzeug', 'gunicorn', 'prometheus_client', 'webhook.adapters.http.server',"
        " 'webhook.config.cloudmap', 'socket_blocked'):\n"
        "    sys.modules[name] = None\n"
        "import importlib, pkgutil, webhook.core\n"
        "found = [m.name for m in pkgutil.walk_packages(webhook.core.__path__, 'webhook.core.')]\n"
        "for name in found:\n"
        "    importlib.import_module(name)\n"
        "print(len(found))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) == len(CORE_MODULES) + len(list(CORE.glob("*/__init__.py")))
