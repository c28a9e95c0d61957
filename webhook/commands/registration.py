"""`gpuport registration`: print what gpuport registers with the API server once it is ready (its
webhook configurations and safety-net policy), for clusters where they are managed by hand or by GitOps
(GPUPORT_REGISTER=false)."""

import argparse
import sys
from pathlib import Path

from webhook.commands.common import Subcommands, bad_input


def register(commands: Subcommands) -> None:
    parser = commands.add_parser(
        "registration",
        help="print the webhook configurations and policy gpuport registers",
        description="Print, as YAML, the MutatingWebhookConfiguration, ValidatingWebhookConfiguration and "
        "ValidatingAdmissionPolicies gpuport registers itself once ready, for the given cloud map. The quota "
        "webhook fails closed, and GPUs asked for by environment variable are refused, only in the "
        "--budget-namespace namespaces: name every namespace with a GPU "
        "quota or GPU limits, and print again when that changes (a registering gpuport keeps the list "
        "itself; printed, it is as current as its arguments).",
    )
    parser.add_argument("--cloud", default="generic", help="this cluster's cloud map (default generic)")
    parser.add_argument("--cloudmap-dir", type=Path, help="folder of cloud maps (default: the shipped ones)")
    parser.add_argument("--service", default="gpuport", help="the Service the API server calls")
    parser.add_argument("--namespace", default="gpuport-system", help="its namespace")
    parser.add_argument("--url", default="", help="an https address to call instead of the Service")
    bundle = parser.add_mutually_exclusive_group()
    bundle.add_argument("--ca-file", type=Path, help="the CA bundle (ca.crt) to put in the configurations")
    bundle.add_argument(
        "--no-ca-bundle",
        action="store_true",
        help="print no CA bundle: only for a --url whose certificate the API server already trusts",
    )
    parser.add_argument(
        "--budget-namespace", action="append", default=[], metavar="NS", help="a namespace with a GPU budget"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import yaml

    from webhook.config.cloudmap import default_directory
    from webhook.config.loading import StartupError, build_context
    from webhook.config.registration import Endpoint, registered_objects

    if args.ca_file is None and not args.no_ca_bundle:
        # Without a bundle the API server cannot trust gpuport's serving certificate (made by its own
        # CA), so every call fails: the webhooks fail open and the quota webhook refuses every pod.
        return bad_input(
            "registration",
            "no --ca-file: the API server could not call gpuport with these configurations; give the "
            "CA that signed its serving certificate (ca.crt), or --no-ca-bundle for a --url whose "
            "certificate the API server already trusts",
        )
    try:
        context = build_context(args.cloudmap_dir or default_directory(), args.cloud)
        ca_bundle = args.ca_file.read_bytes() if args.ca_file else b""
    except (StartupError, OSError) as exc:
        return bad_input("registration", exc)
    endpoint = Endpoint(args.service, args.namespace, args.url)
    objects = registered_objects(
        context.target, context.dialects.maps, endpoint, ca_bundle, args.budget_namespace
    )
    sys.stdout.write(yaml.safe_dump_all(objects, sort_keys=False, width=4096))
    if not args.budget_namespace:
        sys.stderr.write(
            "gpuport registration: no --budget-namespace: while gpuport is down, no namespace's GPU "
            "quota or GPU limits are enforced (its checks fail open everywhere); name each namespace "
            "that has them\n"
        )
    return 0
