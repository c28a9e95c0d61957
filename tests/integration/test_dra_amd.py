"""dra-amd on a real control plane: AMD's driver publishes whole GPUs and partitions under one device
class, told apart only by the `type` attribute, and names the model by `productName` (the card's product
name, spaces as "_"), which every release publishes; `deviceID` meant a KFD unique id before a 2026
release made it the PCI device id, so the devices here carry the older meaning. A pod written for the
ROCm device plugin must get whole MI300X GPUs: never partitions, never another model."""

import pytest
from kubernetes import client

from tests.integration.conftest import serve_with_cluster_access, unregister_webhooks
from tests.integration.test_dra import GROUP, VERSION, add_node, allocated_devices, scheduled_node

AMD = "gpu.amd.com"


def amd_device(name, kind, product, device_id):
    """Attributes as AMD's driver publishes them (its source at the 2025 releases): type, productName,
    and deviceID as the KFD unique id (a decimal string), not the PCI id."""
    attributes = {
        "type": {"string": kind},
        "productName": {"string": product},
        "deviceID": {"string": device_id},
    }
    return {"name": name, "basic": {"attributes": attributes}}


MI300X, MI210 = "AMD_Instinct_MI300X_OAM", "AMD_Instinct_MI210"


@pytest.fixture(scope="module")
def amd_cluster(dra_cluster, tmp_path_factory):
    # The class AMD's chart installs: every device of the driver, whole or partition.
    client.CustomObjectsApi(dra_cluster.client()).create_cluster_custom_object(
        GROUP,
        VERSION,
        "deviceclasses",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "DeviceClass",
            "metadata": {"name": AMD},
            "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{AMD}'"}}]},
        },
    )
    server = serve_with_cluster_access(dra_cluster, tmp_path_factory, "dra-amd")
    add_node(
        dra_cluster,
        "mi-node",
        [
            amd_device("gpu-0-cpx-0", "amdgpu-partition", MI300X, "994913940318892495"),
            amd_device("gpu-0-cpx-1", "amdgpu-partition", MI300X, "994913940318892495"),
            amd_device("gpu-1", "amdgpu", MI210, "12040298343527019393"),
            amd_device("gpu-2", "amdgpu", MI300X, "7281398427093120115"),
            amd_device("gpu-3", "amdgpu", MI300X, "17016530294862871045"),
        ],
        driver=AMD,
    )
    yield dra_cluster
    unregister_webhooks(dra_cluster.client())
    server.stop()


def test_a_rocm_pod_gets_two_whole_mi300x_not_partitions_nor_another_model(amd_cluster):
    core = client.CoreV1Api(amd_cluster.client())
    core.create_namespace({"metadata": {"name": "rocm"}})
    pod = {
        "metadata": {"name": "trainer"},
        "spec": {
            "nodeSelector": {"amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM"},
            "containers": [
                {"name": "main", "image": "rocm/pytorch", "resources": {"limits": {"amd.com/gpu": "2"}}}
            ],
        },
    }
    created = core.create_namespaced_pod("rocm", pod)
    assert created.spec.node_selector is None and created.spec.resource_claims
    assert scheduled_node(amd_cluster, "rocm", "trainer") == "mi-node"
    assert allocated_devices(amd_cluster, "rocm", "trainer") == ["gpu-2", "gpu-3"]
