"""Glue every command shares: argument types, reading inputs, and the one way a command reports a
problem (prefixed with its name, on stderr, exit 2), so no command re-implements loading."""

import argparse
import sys
from typing import Any

from webhook.core.vocabulary import dra_api

# argparse's subparser registry has no public type name.
Subcommands = Any


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def read_input(name: str) -> str:
    """A file's text, or standard input for '-', with its line endings as written: a CRLF manifest
    comes back out of `translate` in CRLF, not rewritten on every line."""
    if name == "-":
        raw = getattr(sys.stdin, "buffer", None)  # a replaced stdin (tests, embedding) may be text only
        return raw.read().decode("utf-8") if raw is not None else sys.stdin.read()
    with open(name, encoding="utf-8", newline="") as file:
        return file.read()


def read_yaml_documents(names: list[str]) -> list[Any]:
    """Every non-empty YAML (or JSON) document of the named inputs, in order (safe loading, libyaml's
    where present); a problem names the file and line (`UnreadableText`, a `yaml.YAMLError`)."""
    from webhook.config.manifest_text import documents

    return [
        doc
        for name in names
        for doc in documents(read_input(name), "standard input" if name == "-" else name)
        if doc is not None
    ]


def bad_input(command: str, problem: object) -> int:
    print(f"gpuport {command}: {problem}", file=sys.stderr)
    return 2


def add_dra_api_version(parser: argparse.ArgumentParser) -> None:
    """What a DRA map's `api_version: auto` writes offline, where no API server can be asked."""
    parser.add_argument(
        "--dra-api-version",
        choices=dra_api.VERSIONS,
        default=dra_api.NEWEST,
        help="the resource.k8s.io version DRA claim templates are written in when the map says auto "
        "(default resource.k8s.io/v1: Kubernetes 1.34 and later; v1beta2 for 1.33, v1beta1 for 1.32)",
    )


def kinds_read() -> str:
    """The kinds whose pod templates the offline commands read, from the table that reads them."""
    from webhook.core.vocabulary.templates import TEMPLATE_PATHS

    keys = sorted(TEMPLATE_PATHS, key=lambda key: (key[0] not in ("apps", "batch"), key))
    kinds = [kind for _, kind in keys]
    # A kind another group also uses, or that reads as a core kind (Knative's Service), names its group.
    core_names = {"Service"}
    return ", ".join(
        kind
        if (kinds.count(kind) == 1 and kind not in core_names) or group in ("apps", "batch")
        else f"{kind} ({group})"
        for group, kind in keys
    )
