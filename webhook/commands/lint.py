"""`gpuport lint`: check cloud maps, the GPU catalogue and quota manifests; print file:line: problem."""

import argparse
from pathlib import Path

from webhook.commands.common import Subcommands


def register(commands: Subcommands) -> None:
    parser = commands.add_parser(
        "lint",
        help="check cloud maps, the GPU catalogue and ResourceQuota manifests",
        description="For each file, what it is and `ok`, or file:line: problem for every error (a schema "
        "error says the forms allowed); exit 1 when there is any. A file of another kind is said, not "
        "linted.",
    )
    parser.add_argument("files", nargs="+", type=Path, metavar="FILE")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from webhook.config.lint import lint_files

    reports = lint_files(args.files)
    for report in reports:
        if report.findings:
            for finding in report.findings:
                print(finding)
        elif report.linted:
            print(f"{report.path}: {report.what}: ok")
        else:
            print(f"{report.path}: {report.what}")
    return 1 if any(r.findings for r in reports) else 0
