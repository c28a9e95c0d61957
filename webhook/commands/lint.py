"""`gpuport lint`: check cloud maps, the GPU catalogue and quota manifests; print file:line: problem."""

import argparse
from pathlib import Path

from webhook.commands.common import Subcommands


def register(commands: Subcommands) -> None:
    parser = commands.add_parser(
        "lint",
        help="check cloud maps, the GPU catalogue and ResourceQuota manifests",
        description="Print file:line: problem for each error; exit 1 when there is any.",
    )
    parser.add_argument("files", nargs="+", type=Path, metavar="FILE")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from webhook.config.lint import lint_files

    findings = lint_files(args.files)
    for finding in findings:
        print(finding)
    if not findings:
        print(f"ok: {len(args.files)} file(s)")
    return 1 if findings else 0
