"""Glue every command shares: argument types, reading inputs, and the one way a command reports a
problem (prefixed with its name, on stderr, exit 2), so no command re-implements loading."""

import argparse
import sys
from pathlib import Path
from typing import Any

# argparse's subparser registry has no public type name.
Subcommands = Any


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def read_input(name: str) -> str:
    """A file's text, or standard input for '-'."""
    return sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")


def read_yaml_documents(names: list[str]) -> list[Any]:
    """Every non-empty YAML document of the named inputs, in order (safe loading)."""
    import yaml

    return [doc for name in names for doc in yaml.safe_load_all(read_input(name)) if doc is not None]


def bad_input(command: str, problem: object) -> int:
    print(f"gpuport {command}: {problem}", file=sys.stderr)
    return 2
