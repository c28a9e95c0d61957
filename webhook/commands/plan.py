"""`gpuport plan mig`: propose the target nodes' MIG layouts from the slices workloads ask for."""

import argparse
import sys
from pathlib import Path

from webhook.commands.common import Subcommands, bad_input, kinds_read, positive, read_yaml_documents


def register(commands: Subcommands) -> None:
    parser = commands.add_parser(
        "plan",
        help="plan what the target's nodes must be configured with (MIG layouts)",
        description="Plan the target's node configuration from the workloads that will run there.",
    )
    plans = parser.add_subparsers(title="plans", metavar="PLAN")
    mig = plans.add_parser(
        "mig",
        help="propose each node's MIG layout for the slices the workloads ask for",
        description="Reads the workloads as `translate` does (each template translated to the target, "
        "its MIG slices times its replicas) and the target's nodes from --inventory (Pods listed there "
        "ask too) or, with --kubeconfig, from the cluster with its running and pending pods, and "
        "proposes a layout per GPU that holds the slices on the fewest GPUs, then with the fewest GPUs "
        "repartitioned. -o yaml (default): a stream kubectl apply -f takes: the ConfigMap the GPU "
        "Operator's MIG manager reads (its mig-parted configuration), then per changed node, in the "
        "order to drain them, the Node with its nvidia.com/mig.config label, after comments naming the "
        "pods to drain first; nothing to change prints no document. -o commands: the same as a shell "
        "script, one node at a time (cordon, drain, label, wait for nvidia.com/mig.config.state=success, "
        "uncordon). GKE, AKS and single-strategy targets get the node pools to create, in nodes, with "
        "the command creating each; HAMi and DRA targets need no layout. Exit 0 when the slices "
        "fit, 1 when not (what is short is said), 2 on bad input. "
        f"It reads Pods and the pod templates of {kinds_read()}.",
    )
    mig.add_argument("files", nargs="*", metavar="FILE", help="manifest files, or - for standard input")
    mig.add_argument(
        "--from",
        dest="source",
        metavar="CLOUD",
        help="read GPU asks only in this cloud's dialect (and --to's); default: every dialect, as "
        "`translate` reads them",
    )
    mig.add_argument("--to", required=True, metavar="CLOUD")
    where = mig.add_mutually_exclusive_group(required=True)
    where.add_argument("--inventory", type=Path, help="the target's nodes: `kubectl get nodes -o yaml`")
    where.add_argument(
        "--kubeconfig",
        type=Path,
        help="read the target's nodes (their nvidia.com/mig.config and node-agent records), its running "
        "pods and its pending pods from its API server, read-only",
    )
    mig.add_argument("--cloudmap-dir", type=Path, help="folder of cloud maps (default: the shipped ones)")
    mig.add_argument(
        "--wave-size",
        type=positive,
        default=5,
        help="workloads per migration wave, as preflight orders them (default 5): -o table says "
        "whether the slices fit once each wave has moved",
    )
    mig.add_argument("-o", "--output", choices=["yaml", "commands", "table"], default="yaml")
    mig.add_argument(
        "--mig-config-name",
        help="the ConfigMap the ClusterPolicy's migManager.config.name names (default: with --kubeconfig, "
        "as the cluster's ClusterPolicy names it; else default-mig-parted-config, the GPU Operator's own)",
    )
    mig.add_argument(
        "--gpu-operator-namespace",
        help="the namespace of that ConfigMap (default: with --kubeconfig, where the cluster holds it; "
        "else gpu-operator)",
    )
    mig.set_defaults(run=run_mig)
    parser.set_defaults(run=lambda _args: _usage(parser))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def run_mig(args: argparse.Namespace) -> int:
    import yaml

    from webhook.adapters.kube.mig_reader import MigManagerConfig
    from webhook.commands.plan_report import Output, as_commands, as_table, as_yaml, shortfalls
    from webhook.config.cloudmap import CloudMapError, default_directory
    from webhook.config.loading import StartupError, build_context, load_inventory
    from webhook.config.mig_geometry import load_geometry
    from webhook.core.planning.mig_plan import plan_mig
    from webhook.core.planning.rendering import DEFAULT_CONFIG_MAP, DEFAULT_NAMESPACE, Operator
    from webhook.core.planning.slice_demand import by_wave, slice_demand
    from webhook.core.planning.target_gpus import target_gpus

    live = MigManagerConfig()  # offline: nothing read, the defaults stand unless given
    try:
        context = build_context(args.cloudmap_dir or default_directory(), args.to, read_as=args.source)
        geometries = load_geometry(context.dialects.catalogue)
        documents = read_yaml_documents(args.files)
        inventory = load_inventory(args.inventory) if args.inventory else None
    except (StartupError, CloudMapError, OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        return bad_input("plan mig", exc)
    if inventory is None:
        from webhook.adapters.kube.kubeclient import ClusterUnreadable, read_cluster
        from webhook.adapters.kube.mig_reader import cluster_for_mig_plan
        from webhook.core.vocabulary.inventory import InventoryError

        try:
            inventory, pending, live = read_cluster(args.kubeconfig, cluster_for_mig_plan)
        except (ClusterUnreadable, InventoryError) as exc:
            return bad_input("plan mig", f"reading the cluster's nodes and pods: {exc}")
        documents += pending
    demand = slice_demand(documents, context, inventory)
    gpus = target_gpus(inventory, context.dialects, geometries)
    plan = plan_mig(demand, gpus, geometries, context.target)
    operator = Operator(
        args.mig_config_name or live.name or DEFAULT_CONFIG_MAP,
        args.gpu_operator_namespace or live.namespace or DEFAULT_NAMESPACE,
    )
    output = Output(context.target, gpus, operator)
    if args.output == "yaml":
        sys.stdout.write(as_yaml(plan, context.dialects.catalogue, inventory, output))
    elif args.output == "commands":
        sys.stdout.write(as_commands(plan, context.dialects.catalogue, inventory, output))
    else:
        waves = _waves(documents, args, context, inventory) if documents else []
        planned = [plan_mig(d, gpus, geometries, context.target) for d in by_wave(demand, waves)]
        sys.stdout.write(
            as_table(
                plan, context.dialects.catalogue, inventory, output, list(zip(waves, planned, strict=True))
            )
        )
    if not plan.fits:
        for line in shortfalls(plan):
            print(f"gpuport plan mig: {line}", file=sys.stderr)
        return 1
    return 0


def _waves(documents: list, args: argparse.Namespace, context, inventory) -> list[list[str]]:
    """The preflight's migration waves (stateless first, lowest risk first), as workload keys."""
    from webhook.core.migration.preflight import preflight

    source = next(m for m in context.dialects.maps if m.name == (args.source or args.to))
    return preflight(documents, source, context, inventory, wave_size=args.wave_size).waves
