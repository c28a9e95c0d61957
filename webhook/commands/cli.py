"""The `gpuport` command line: registers one module per command. Each module holds its own parser
block and a thin `run` over the code that does the work; heavy imports wait until a command runs."""

import argparse
import sys

from webhook import __version__
from webhook.commands import (
    certificates,
    completion,
    explain,
    lint,
    node_agent,
    plan,
    preflight,
    registration,
    rightsize,
    serve,
    translate,
    usage,
)

COMMANDS = (
    serve,
    certificates,
    translate,
    preflight,
    plan,
    usage,
    rightsize,
    node_agent,
    explain,
    lint,
    registration,
    completion,
)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):
        parser.print_help()
        return 2
    return int(args.run(args))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpuport",
        description="Admission webhook that makes GPU workloads portable across clouds.",
    )
    parser.add_argument("--version", action="version", version=f"gpuport {__version__}")
    # For `completion`, which writes its script from every command's flags.
    parser.set_defaults(command_line=parser)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    for command in COMMANDS:
        command.register(commands)
    return parser


if __name__ == "__main__":
    sys.exit(main())
