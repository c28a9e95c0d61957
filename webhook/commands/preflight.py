"""`gpuport preflight`: score the risk of moving workloads to another cloud, before moving them."""

import argparse
import sys
from pathlib import Path

from webhook.commands.common import (
    Subcommands,
    add_dra_api_version,
    bad_input,
    kinds_read,
    positive,
    read_yaml_documents,
)


def register(commands: Subcommands) -> None:
    parser = commands.add_parser(
        "preflight",
        help="score the risk of moving workloads to another cloud, before moving them",
        description="For each workload: what translation changes, a checklist scored as "
        "Risk = sum of weight x (1 - compat), whether it fits the target inventory (best-fit-decreasing), "
        "and a wave plan. Exit 0 when every workload is under --max-risk, 1 otherwise, 2 on bad input. "
        f"It reads Pods and the pod templates of {kinds_read()}.",
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="manifest files, or - for standard input")
    parser.add_argument("--from", dest="source", required=True, metavar="CLOUD")
    parser.add_argument("--to", required=True, metavar="CLOUD")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--inventory", type=Path, help="the target's nodes: `kubectl get nodes -o yaml`")
    where.add_argument(
        "--kubeconfig",
        type=Path,
        help="read the target's nodes, the pods running on them and quotas from its API server",
    )
    parser.add_argument("--cloudmap-dir", type=Path, help="folder of cloud maps (default: the shipped ones)")
    add_dra_api_version(parser)
    parser.add_argument(
        "--max-risk", type=float, default=0.3, help="fraction of the total weight (default 0.3)"
    )
    parser.add_argument("--wave-size", type=positive, default=5, help="workloads per wave (default 5)")
    parser.add_argument("-o", "--output", choices=["table", "json", "markdown"], default="table")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import yaml

    from webhook.commands.preflight_report import as_json, as_markdown, as_text
    from webhook.config.cloudmap import default_directory
    from webhook.config.loading import ClusterDra, StartupError, build_context, load_inventory
    from webhook.core.migration.preflight import preflight

    try:
        context = build_context(
            args.cloudmap_dir or default_directory(),
            args.to,
            read_as=args.source,
            cluster_dra=ClusterDra(args.dra_api_version),
        )
        documents = read_yaml_documents(args.files)
        inventory = load_inventory(args.inventory) if args.inventory else None
    except (StartupError, OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        return bad_input("preflight", exc)
    if args.kubeconfig:
        from webhook.adapters.kube.inventory_reader import inventory_from_cluster
        from webhook.adapters.kube.kubeclient import ClusterUnreadable, read_cluster
        from webhook.core.vocabulary.inventory import InventoryError

        try:
            inventory = read_cluster(args.kubeconfig, inventory_from_cluster)
        except (ClusterUnreadable, InventoryError) as exc:
            return bad_input("preflight", f"reading the cluster's nodes and quotas: {exc}")
    source = next(m for m in context.dialects.maps if m.name == args.source)
    report = preflight(
        documents, source, context, inventory, max_risk_fraction=args.max_risk, wave_size=args.wave_size
    )
    render = {"table": as_text, "json": as_json, "markdown": as_markdown}[args.output]
    sys.stdout.write(render(report))
    return 0 if report.passed else 1
