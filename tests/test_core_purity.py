"""The decision core must stay pure: no HTTP framework, no Kubernetes client, no file or network I/O."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

CORE_MODULES = [
    "catalogue",
    "checks",
    "core",
    "cuda",
    "decision",
    "demand",
    "inventory",
    "packing",
    "patch",
    "placement",
    "platform",
    "preflight",
    "quantity",
    "review",
    "templates",
    "translate",
    "workloads",
    "nodeagent/gather",
]
ALLOWED_IMPORTS = {
    "base64",
    "collections",
    "copy",
    "dataclasses",
    "decimal",
    "fractions",
    "functools",
    "itertools",
    "json",
    "math",
    "re",
    "types",
    "typing",
    "jsonpatch",  # pure computation on dicts
    "kubernetes.utils",  # parse_quantity only; see webhook/quantity.py
    "webhook",
}
PACKAGE = Path(__file__).resolve().parent.parent / "webhook"


def imported_names(module: str) -> set[str]:
    tree = ast.parse((PACKAGE / f"{module}.py").read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.add(node.module)
    return names


@pytest.mark.parametrize("module", CORE_MODULES)
def test_core_module_imports_only_pure_dependencies(module):
    for name in imported_names(module):
        assert any(name == ok or name.startswith(ok + ".") for ok in ALLOWED_IMPORTS), (
            f"webhook/{module}.py imports {name}, which the pure core must not use"
        )


def test_core_imports_with_adapters_blocked():
    code = (
        "import sys\n"
        "for name in ('flask', 'werkzeug', 'gunicorn', 'prometheus_client', 'webhook.server',"
        " 'webhook.cloudmap', 'socket_blocked'):\n"
        "    sys.modules[name] = None\n"
        "import webhook.core, webhook.checks, webhook.patch, webhook.review\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
