"""A layouts plan as the commands an operator runs, one node at a time: the MIG manager's configuration
first, then for each changed node in drain order: cordon, drain (the MIG manager evicts nothing, and a
GPU still in use fails the repartition: `nvidia.com/mig.config.state=failed`), set the label, wait for
the MIG manager to report `success`, uncordon. The state label is removed in the same patch that sets
the new configuration, so the wait cannot be satisfied by the previous configuration's `success`."""

from webhook.core.planning.drains import Drain
from webhook.core.planning.rendering import NodeChange
from webhook.core.planning.target_gpus import MIG_CONFIG_LABEL

STATE_LABEL = "nvidia.com/mig.config.state"  # pending, rebooting, success or failed, set by the MIG manager
DRAIN_TIMEOUT = "15m"
REPARTITION_TIMEOUT = "30m"  # a repartition may reboot the node (WITH_REBOOT on some clouds)


def node_commands(drain: Drain, change: NodeChange) -> list[str]:
    node = drain.node
    state_path = "{.metadata.labels." + STATE_LABEL.replace(".", "\\.") + "}"
    return [
        f"kubectl cordon {node}",
        f"kubectl drain {node} --ignore-daemonsets --delete-emptydir-data --timeout={DRAIN_TIMEOUT}",
        f"kubectl label node {node} --overwrite {MIG_CONFIG_LABEL}={change.config} {STATE_LABEL}-",
        f"kubectl wait node/{node} --for=jsonpath='{state_path}'=success --timeout={REPARTITION_TIMEOUT}",
        f"kubectl uncordon {node}",
    ]


def shell_script(
    config_map_yaml: str, drains: list[Drain], changes: list[NodeChange], notes: list[str]
) -> str:
    """A POSIX shell script: stops at the first command that fails (a drain refused by a disruption
    budget, a repartition that does not reach `success` in time), with the nodes before it done."""
    by_node = {change.node: change for change in changes}
    lines = ["#!/bin/sh", *[f"# {note}" for note in notes], "set -eu", ""]
    if config_map_yaml:
        lines += [
            "# The MIG manager's configuration: kubectl apply writes config.yaml whole (see above).",
            "kubectl apply -f - <<'EOF'",
            config_map_yaml.rstrip("\n"),
            "EOF",
        ]
    for number, drain in enumerate(drains, 1):
        pods = ", ".join(drain.pods) or "no GPU pods"
        lines += ["", f"# {number}/{len(drains)} {drain.node}: {pods}"]
        lines += [f"# warning: {warning}" for warning in drain.warnings]
        lines += node_commands(drain, by_node[drain.node])
    return "\n".join(lines) + "\n"
