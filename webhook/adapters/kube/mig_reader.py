"""What `plan mig --kubeconfig` reads, read-only: the preflight's inventory (nodes with their labels and
node-agent records, the pods bound to them) and the pods still pending, whose slices need room too."""

from typing import Any

from webhook.adapters.kube.inventory_reader import inventory_from_cluster
from webhook.adapters.kube.usage_reader import pending_pods
from webhook.core.vocabulary.inventory import Inventory


def cluster_for_mig_plan(core_api: Any) -> tuple[Inventory, list[dict[str, Any]]]:
    return inventory_from_cluster(core_api), [{"kind": "Pod", **pod} for pod in pending_pods(core_api)]
