"""`gpuport node-agent`: publish this node's GPU capabilities, gathered through NVML."""

import argparse
import json
from pathlib import Path

from webhook.commands.common import Subcommands, bad_input


def register(commands: Subcommands) -> None:
    parser = commands.add_parser(
        "node-agent",
        help="publish this node's GPU capabilities (NVML) as labels and an annotation",
        description="Gather GPUs, health, MIG, NVLink/PCIe topology and NUMA through NVML; publish GFD-style "
        "labels where GPU Feature Discovery does not run, gpuport.io/* labels and the gpuport.io/capability "
        "annotation on this Node; repeat every --interval seconds and on critical XID events.",
    )
    parser.add_argument("--once", action="store_true", help="gather (and publish) once, then exit")
    parser.add_argument(
        "--print", action="store_true", help="print the capability record as JSON; touch no API"
    )
    parser.add_argument("--node-name", default=None, help="this Node's name (default: $NODE_NAME)")
    parser.add_argument("--interval", type=float, default=60.0, help="seconds between refreshes (default 60)")
    parser.add_argument(
        "--cloudmap-dir", type=Path, help="folder holding gpus.yaml (default: the shipped one)"
    )
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        help="reach the API with this kubeconfig (default: the pod's service account)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import logging

    import pynvml

    from webhook.config.cloudmap import default_directory, load_directory
    from webhook.nodeagent.agent import NodeAgent, node_name_from_env, read_cpulist
    from webhook.nodeagent.gather import gather

    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] [%(levelname)s] %(name)s: %(message)s")
    catalogue = load_directory(args.cloudmap_dir or default_directory()).catalogue
    if args.print:
        print(json.dumps(gather(pynvml, catalogue, read_cpulist), indent=2, sort_keys=True))
        return 0
    node_name = args.node_name or node_name_from_env()
    if not node_name:
        return bad_input("node-agent", "set --node-name or NODE_NAME (the DaemonSet passes spec.nodeName)")
    from kubernetes import client

    from webhook.adapters.kube.kubeclient import IN_CLUSTER, api_client

    core_api = client.CoreV1Api(api_client(args.kubeconfig or IN_CLUSTER))
    agent = NodeAgent(pynvml, catalogue, core_api, node_name, args.interval)
    agent.configure(metrics=not args.once)  # κ, host-PID attribution, /metrics port: from the env
    if args.once:
        agent.publish_once()
        return 0
    agent.run_forever()
    return 0
