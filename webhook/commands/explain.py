"""`gpuport explain`: the GPU-pair cost table behind a multi-GPU pod's topology hint."""

import argparse
from pathlib import Path

from webhook.commands.common import Subcommands, bad_input, read_yaml_documents


def register(commands: Subcommands) -> None:
    parser = commands.add_parser(
        "explain",
        help="show the GPU-pair cost table behind a multi-GPU pod's topology hint",
        description="For each pod (or pod template) in FILE: GPUs asked for, and per node class of the "
        "inventory the best cost of that many GPUs (NVLink 1, PCIe switch 2, host bridge/NUMA 3, "
        "cross-socket 4 per GPU pair), with the hint gpuport adds.",
    )
    parser.add_argument("files", nargs="+", metavar="FILE")
    parser.add_argument("--cloud", default="generic", help="this cluster's cloud map (default generic)")
    parser.add_argument("--inventory", type=Path, required=True, help="nodes with gpuport.io/capability")
    parser.add_argument("--cloudmap-dir", type=Path)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import jsonpatch
    import yaml

    from webhook.config.cloudmap import default_directory
    from webhook.config.loading import StartupError, build_context, load_inventory
    from webhook.core.deciding.admission import decide_template
    from webhook.core.rewriting.placement import cost_table, node_classes, whole_gpus
    from webhook.core.vocabulary.templates import pod_templates
    from webhook.core.vocabulary.topology import CAPABILITY_ANNOTATION
    from webhook.core.vocabulary.workloads import mapping_at

    try:
        inventory = load_inventory(args.inventory)
        context = build_context(args.cloudmap_dir or default_directory(), args.cloud, inventory=inventory)
        documents = read_yaml_documents(args.files)
    except (StartupError, OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        return bad_input("explain", exc)
    classes = node_classes(inventory)
    for doc in documents:
        for path, template in pod_templates(doc):
            name = f"{doc.get('kind')}/{(doc.get('metadata') or {}).get('name', '?')}{path}"
            decided = decide_template(template, context)
            if decided.rewrite is None:
                print(f"{name}: refused: {'; '.join(decided.refusals)}")
                continue
            patch, warnings, _ = decided.rewrite
            pod = jsonpatch.apply_patch(template, patch)
            k = whole_gpus(mapping_at(pod, ("spec",)) or {}, context.target)
            print(f"{name}: {k} whole GPU(s)")
            if k < 2:
                print("  no topology hint: a pod needs at least 2 whole GPUs on one node for one")
            elif not classes:
                print(
                    f"  no cost table: no node of {args.inventory} carries {CAPABILITY_ANNOTATION} (the node "
                    "agent's record of its GPUs and their links; run manifests/node-agent.yaml, then "
                    "`kubectl get nodes -o yaml`)"
                )
            for row in cost_table(classes, k) if k >= 2 else []:
                cost = "cannot hold them" if row.cost is None else f"cost {row.cost} on GPUs {list(row.gpus)}"
                print(f"  {row.node_class.label:50} {cost}  ({len(row.node_class.nodes)} node(s))")
            for warning in warnings:
                print(f"  {warning}")
    return 0
