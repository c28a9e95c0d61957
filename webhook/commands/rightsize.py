"""`gpuport rightsize`: from what each GPU workload used to the smallest ask that holds it, and the MIG
layout for the right-sized fleet. It prints; it never changes the cluster."""

import argparse
import re
import sys
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

from webhook.commands.common import Subcommands, bad_input, read_yaml_documents

_DURATION = re.compile(r"^([1-9][0-9]*)([mhdw])$")
_SECONDS = {"m": 60, "h": 3600, "d": 86400, "w": 604800}


def duration(text: str) -> int:
    match = _DURATION.match(text)
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration such as 90m, 36h, 7d or 2w")
    return int(match[1]) * _SECONDS[match[2]]


def share(text: str) -> Fraction:
    """A fraction written as 0.2 or 20%."""
    try:
        value = Fraction(text.removesuffix("%")) / (100 if text.endswith("%") else 1)
    except (ValueError, ZeroDivisionError):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number such as 0.2 or 20%") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is below 0")
    return value


def instant(text: str) -> float:
    from datetime import datetime

    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a time such as 2026-12-01T00:00:00Z") from None


def register(commands: Subcommands) -> None:
    parser = commands.add_parser(
        "rightsize",
        help="propose the smallest GPU ask that holds each workload's measured peak",
        description="Reads the running GPU pods (--inventory: `kubectl get nodes,pods -A -o yaml`, or "
        "--kubeconfig) and what each used over --window: from Prometheus (--prometheus URL, the node "
        "agents' gpuport_pod_gpu_* metrics) or else from the node agents' own rolling peaks (the "
        "gpuport.io/usage-peaks annotation). Per workload (pods grouped through their owners): its ask, "
        "its peak GPU memory and compute percentile, how long measured, and the smallest MIG slice, "
        "memory-capped share or whole-GPU count that holds the peak plus --headroom on the model it ran "
        "on, with the GPU-equivalents saved; or why nothing is proposed. -o yaml prints the workloads' "
        "manifests (FILE...) with only those asks changed; --plan adds the MIG layout the right-sized "
        "fleet needs (as `plan mig`). Nothing on the cluster is changed. Exit 0, or 2 on bad input.",
    )
    parser.add_argument("files", nargs="*", metavar="FILE", help="the workloads' manifests, for -o yaml")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--inventory", type=Path, help="`kubectl get nodes,pods -A -o yaml` of the cluster")
    where.add_argument("--kubeconfig", type=Path, help="read the nodes and pods from the cluster, read-only")
    parser.add_argument("--prometheus", metavar="URL", help="a Prometheus server scraping the node agents")
    parser.add_argument("--cloud", default="generic", help="this cluster's cloud map (default generic)")
    parser.add_argument("--cloudmap-dir", type=Path, help="folder of cloud maps (default: the shipped ones)")
    parser.add_argument("--window", type=duration, default=duration("7d"), help="how far back (default 7d)")
    parser.add_argument(
        "--headroom", type=share, default=Fraction(1, 5), help="above the peak (default 20%%)"
    )
    parser.add_argument(
        "--quantile", type=share, default=Fraction(95, 100), help="of compute samples (default 0.95)"
    )
    parser.add_argument(
        "--min-coverage",
        type=share,
        default=Fraction(1, 2),
        help="the least part of the window each figure must cover to propose anything (default 50%%)",
    )
    parser.add_argument(
        "--at",
        type=instant,
        help="the window's end, as 2026-12-01T00:00:00Z (default now), so a report made later says the same",
    )
    parser.add_argument("--plan", action="store_true", help="add the MIG layout for the right-sized fleet")
    parser.add_argument("-o", "--output", choices=["table", "json", "yaml"], default="table")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import yaml

    from webhook.commands.rightsize_report import fleet_plan, sizing_json, sizing_table
    from webhook.config.cloudmap import default_directory
    from webhook.config.loading import StartupError, build_context
    from webhook.core.sizing.fleet import size_fleet
    from webhook.core.sizing.recommend import Options
    from webhook.core.vocabulary.inventory import InventoryError, parse_inventory

    if args.quantile > 1 or args.min_coverage > 1:
        return bad_input("rightsize", "--quantile and --min-coverage are at most 1 (100%)")
    if args.output == "yaml" and not args.files:
        return bad_input("rightsize", "-o yaml prints the workloads' manifests: name them (FILE...)")
    try:
        documents = _cluster_documents(args)
        inventory = parse_inventory(documents)
        context = build_context(args.cloudmap_dir or default_directory(), args.cloud)
    except (OSError, UnicodeDecodeError, yaml.YAMLError, InventoryError, StartupError, _Unreadable) as exc:
        return bad_input("rightsize", exc)
    options = Options(args.window, args.headroom, args.min_coverage)
    try:
        usage, problems = _usage(args, documents)
    except _Unreadable as exc:
        return bad_input("rightsize", exc)
    fleet = size_fleet(inventory, usage, context, options)
    for problem in [*problems, *fleet.problems]:
        print(f"gpuport rightsize: {problem}", file=sys.stderr)
    if args.output == "yaml":
        return _print_manifests(args.files, fleet)
    sys.stdout.write(sizing_json(fleet) if args.output == "json" else sizing_table(fleet, args.quantile))
    if args.plan:
        sys.stdout.write(fleet_plan(inventory, fleet, context))
    return 0


class _Unreadable(Exception):
    """The cluster or Prometheus could not be read; the message says which and why."""


def _cluster_documents(args: argparse.Namespace) -> list[Any]:
    if args.inventory:
        return read_yaml_documents([str(args.inventory)])
    from webhook.adapters.kube.kubeclient import ClusterUnreadable, read_cluster
    from webhook.adapters.kube.usage_reader import nodes_and_pods

    try:
        nodes, pods = read_cluster(args.kubeconfig, nodes_and_pods)
    except ClusterUnreadable as exc:
        raise _Unreadable(str(exc)) from None
    return [{"kind": "Node", **n} for n in nodes] + [{"kind": "Pod", **p} for p in pods]


def _usage(args: argparse.Namespace, documents: list[Any]) -> tuple[dict, list[str]]:
    from webhook.core.sizing.history import from_agent_peaks, node_peaks
    from webhook.core.vocabulary.topology import USAGE_PEAKS_ANNOTATION

    now = args.at if args.at is not None else time.time()
    if args.prometheus:
        from webhook.adapters.prometheus.pod_usage import PrometheusUnreadable, read_pod_usage

        try:
            return read_pod_usage(args.prometheus, args.window, args.quantile, now), []
        except PrometheusUnreadable as exc:
            raise _Unreadable(f"Prometheus: {exc}") from None
    return from_agent_peaks(node_peaks(documents, USAGE_PEAKS_ANNOTATION), now, args.window, args.quantile)


def _print_manifests(files: list[str], fleet) -> int:
    from webhook.adapters.files.offline import ManifestError, dump_documents, load_documents
    from webhook.adapters.files.resized import resize_documents
    from webhook.adapters.files.yamledit import Unfaithful
    from webhook.commands.common import read_input

    for name in files:
        try:
            manifest = load_documents(read_input(name), name)
        except (OSError, UnicodeDecodeError, ManifestError) as exc:
            return bad_input("rightsize", exc)
        for line in resize_documents(manifest, fleet.sizings):
            print(f"{name}: {line}", file=sys.stderr)
        try:
            sys.stdout.write(dump_documents(manifest))
        except Unfaithful as exc:
            return bad_input("rightsize", f"{name}: {exc}")
    return 0
