"""NVIDIA's ComputeDomains (pure): the IMEX channel claims their driver makes, for manifests read offline.

NVIDIA's DRA driver for GPUs (github.com/NVIDIA/k8s-dra-driver-gpu) runs Multi-Node NVLink workloads
(GB200 NVL72) through a ComputeDomain (resource.nvidia.com/v1beta1): its controller makes the
ResourceClaimTemplate named in `spec.channel.resourceClaimTemplate.name`, in the ComputeDomain's
namespace, asking for one device of the class compute-domain-default-channel.nvidia.com, an IMEX channel
of the driver compute-domain.nvidia.com (the chart installs that class, selecting
`device.driver == 'compute-domain.nvidia.com' && ….type == 'channel' && ….id == 0`; the template's shape
is the driver's compute-domain workload claim template). A workload written beside its ComputeDomain
names a template that does not exist yet; gpuport reads it as the driver will make it: a claim of
another driver, which gives no GPU and is kept as written. (The driver's template also carries opaque
config naming the domain, which gpuport never reads for a claim that is not a GPU: left out.)
"""

from collections.abc import Iterator, Mapping
from typing import Any

from webhook.core.vocabulary import dra_api
from webhook.core.vocabulary.workloads import is_map, mapping_at

COMPUTE_DOMAIN_GROUP = "resource.nvidia.com"
CHANNEL_DRIVER = "compute-domain.nvidia.com"
CHANNEL_CLASS = "compute-domain-default-channel.nvidia.com"


def channel_templates(doc: Any) -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    """(namespace, name, template) of the ResourceClaimTemplate a ComputeDomain's driver makes."""
    if not is_map(doc) or doc.get("kind") != "ComputeDomain":
        return
    if str(doc.get("apiVersion", "")).partition("/")[0] != COMPUTE_DOMAIN_GROUP:
        return
    name = (mapping_at(doc, ("spec", "channel", "resourceClaimTemplate")) or {}).get("name")
    if not isinstance(name, str) or not name:
        return
    metadata = doc.get("metadata")
    namespace = metadata.get("namespace") if is_map(metadata) else None
    namespace = namespace if isinstance(namespace, str) else ""
    request = {"name": "channel", "exactly": {"deviceClassName": CHANNEL_CLASS}}
    template = {
        "apiVersion": f"{dra_api.GROUP}/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }
    yield namespace, name, template


def channel_class() -> Mapping[str, Any]:
    """The DeviceClass the driver's chart installs for the channels."""
    expression = (
        f"device.driver == '{CHANNEL_DRIVER}' && device.attributes['{CHANNEL_DRIVER}'].type == 'channel' "
        f"&& device.attributes['{CHANNEL_DRIVER}'].id == 0"
    )
    return {
        "apiVersion": f"{dra_api.GROUP}/v1",
        "kind": "DeviceClass",
        "metadata": {"name": CHANNEL_CLASS},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }
