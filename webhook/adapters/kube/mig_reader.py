"""What `plan mig --kubeconfig` reads, read-only: the preflight's inventory (nodes with their labels and
node-agent records, the pods bound to them), the pods still pending, whose slices need room too, and
where the GPU Operator's MIG manager reads its configuration: the ClusterPolicy's
`migManager.config.name` and the namespace holding that ConfigMap."""

from dataclasses import dataclass
from typing import Any

from webhook.adapters.kube.inventory_reader import inventory_from_cluster
from webhook.adapters.kube.usage_reader import pending_pods
from webhook.core.vocabulary.inventory import Inventory

# The GPU Operator's ClusterPolicy: cluster-scoped, nvidia.com/v1 (github.com/NVIDIA/gpu-operator, api/).
CLUSTER_POLICY = ("nvidia.com", "v1", "clusterpolicies")


@dataclass(frozen=True)
class MigManagerConfig:
    """The ConfigMap the ClusterPolicy names; "" for what the cluster does not say or lets no one read
    (no GPU Operator installed, no right to list ClusterPolicies or ConfigMaps)."""

    name: str = ""
    namespace: str = ""


def cluster_for_mig_plan(core_api: Any) -> tuple[Inventory, list[dict[str, Any]], MigManagerConfig]:
    pending = [{"kind": "Pod", **pod} for pod in pending_pods(core_api)]
    return inventory_from_cluster(core_api), pending, mig_manager_config(core_api)


def mig_manager_config(core_api: Any) -> MigManagerConfig:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    custom = client.CustomObjectsApi(core_api.api_client)
    try:
        listed: Any = custom.list_cluster_custom_object(*CLUSTER_POLICY)  # the client types it `object`
        policies = listed.get("items") or []
    except ApiException as exc:
        if exc.status in (403, 404):  # not allowed to read it, or no GPU Operator: the defaults stand
            return MigManagerConfig()
        raise
    named = sorted(
        {
            str(((p.get("spec") or {}).get("migManager") or {}).get("config", {}).get("name") or "")
            for p in policies
        }
        - {""}
    )
    if not named:
        return MigManagerConfig()
    try:
        found = core_api.list_config_map_for_all_namespaces(field_selector=f"metadata.name={named[0]}").items
    except ApiException as exc:
        if exc.status == 403:
            return MigManagerConfig(named[0])
        raise
    namespaces = sorted(c.metadata.namespace for c in found)
    return MigManagerConfig(named[0], namespaces[0] if len(namespaces) == 1 else "")
