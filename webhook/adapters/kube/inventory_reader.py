"""The preflight's inventory read live from a cluster: nodes, the pods bound to them and
ResourceQuotas, read-only, through the same parser as an inventory file, so a live read and
`kubectl get nodes,pods,resourcequotas -A -o yaml` give one answer."""

from typing import Any

from webhook.adapters.kube.usage_reader import nodes_and_pods
from webhook.core.vocabulary.inventory import Inventory, parse_inventory


def inventory_from_cluster(core_api: Any) -> Inventory:
    """The same inventory read live. The pods are those `usage` reads (bound, not finished, in pages):
    what they hold on a node is not free for a workload moved in."""
    serialize = core_api.api_client.sanitize_for_serialization
    nodes, pods = nodes_and_pods(core_api)
    quotas = [
        {"kind": "ResourceQuota", **serialize(q)}
        for q in core_api.list_resource_quota_for_all_namespaces().items
    ]
    return parse_inventory(
        [{"kind": "Node", **n} for n in nodes] + [{"kind": "Pod", **p} for p in pods] + quotas
    )
