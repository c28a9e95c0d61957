"""The preflight's inventory read live from a cluster: nodes and ResourceQuotas, read-only, through
the same parser as an inventory file, so a live read and `kubectl get -o yaml` give one answer."""

from typing import Any

from webhook.core.vocabulary.inventory import Inventory, parse_inventory


def inventory_from_cluster(core_api: Any) -> Inventory:
    """The same inventory read live: nodes and ResourceQuotas through the Kubernetes API (read-only)."""
    serialize = core_api.api_client.sanitize_for_serialization
    nodes = [{"kind": "Node", **serialize(n)} for n in core_api.list_node().items]
    quotas = [
        {"kind": "ResourceQuota", **serialize(q)}
        for q in core_api.list_resource_quota_for_all_namespaces().items
    ]
    return parse_inventory(nodes + quotas)
