"""`gpuport translate`: the webhook's checks and translation on manifest files, offline."""

import argparse
import sys
from pathlib import Path

from webhook.commands.common import Subcommands, add_dra_api_version, bad_input, kinds_read, read_input


def register(commands: Subcommands) -> None:
    parser = commands.add_parser(
        "translate",
        help="rewrite manifests for another cloud, offline",
        description="Run the webhook's checks and translation on Pods and the pod templates of "
        f"{kinds_read()} in multi-document YAML. Prints the translated YAML (comments and key order kept); "
        "exit 1 when anything is denied.",
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="manifest files, or - for standard input")
    parser.add_argument("--to", required=True, metavar="CLOUD", help="the target cloud map")
    parser.add_argument(
        "--from", dest="source", metavar="CLOUD", help="read GPU asks only in this cloud's dialect"
    )
    parser.add_argument("--cloudmap-dir", type=Path, help="folder of cloud maps (default: the shipped ones)")
    parser.add_argument("--inventory", type=Path, help="the target's nodes: pick present models, add hints")
    add_dra_api_version(parser)
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--diff", action="store_true", help="print a unified diff instead of the YAML")
    output.add_argument(
        "-o", "--output", choices=["yaml", "json"], default="yaml", help="yaml, or json decisions"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from webhook.adapters.files.offline import (
        ManifestError,
        dump_documents,
        load_documents,
        results_json,
        translate_documents,
        unified_diff,
        written_device_classes,
    )
    from webhook.adapters.files.yamledit import Unfaithful
    from webhook.config.cloudmap import default_directory
    from webhook.config.loading import ClusterDra, StartupError, build_context

    try:
        context = build_context(
            args.cloudmap_dir or default_directory(),
            args.to,
            args.inventory,
            read_as=args.source,
            cluster_dra=ClusterDra(args.dra_api_version),
        )
    except StartupError as exc:
        return bad_input("translate", exc)
    results, denied = [], False
    for name in args.files:
        try:
            text = read_input(name)
            manifest = load_documents(text, name)
        except (OSError, UnicodeDecodeError, ManifestError) as exc:
            return bad_input("translate", exc)
        classes = written_device_classes(manifest)
        if classes and context.target.dra is not None:
            # The cluster the files are for has these DeviceClasses: those standing for an extended
            # resource (KEP-5004) let a pod asking for it run as written, as the webhook reads them.
            try:
                file_context = build_context(
                    args.cloudmap_dir or default_directory(),
                    args.to,
                    args.inventory,
                    read_as=args.source,
                    cluster_dra=ClusterDra(args.dra_api_version, classes),
                )
            except StartupError as exc:
                return bad_input("translate", exc)
        else:
            file_context = context
        file_results = translate_documents(manifest, file_context)
        results += file_results
        for result in file_results:
            for warning in result.warnings:
                print(f"{name}: {result.kind}/{result.name}: {warning}", file=sys.stderr)
            if not result.allowed:
                denied = True
                for message in result.messages:
                    print(f"{name}: {result.kind}/{result.name}: denied: {message}", file=sys.stderr)
        try:
            printed = dump_documents(manifest) if args.diff or args.output == "yaml" else ""
        except Unfaithful as exc:  # never print a translation that does not read back as intended
            return bad_input("translate", f"{name}: {exc}")
        if args.diff:
            sys.stdout.write(unified_diff(text, printed, name))
        elif args.output == "yaml":
            sys.stdout.write(printed)
    if args.output == "json" and not args.diff:
        print(results_json(results))
    return 1 if denied else 0
