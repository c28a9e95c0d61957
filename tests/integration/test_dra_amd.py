"""dra-amd on a real control plane: AMD's driver publishes whole GPUs and partitions under one device
class, told apart only by the `type` attribute, and names the model by `productName` (the card's product
name, spaces as "_"), which every release publishes; `deviceID` meant a KFD unique id before a 2026
release made it the PCI device id, so the devices here carry the older meaning. A pod written for the
ROCm device plugin must get whole MI300X GPUs: never partitions, never another model. A claim for every
device of a node (allocationMode: All) with no type takes partitions too, and is charged the GPUs they
are on."""

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.integration.conftest import serve_with_cluster_access, unregister_webhooks
from tests.integration.test_dra import GROUP, VERSION, add_node, allocated_devices, scheduled_node, wait_for

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


def cpx_partition(gpu_index, partition):
    """A partition as AMD's driver publishes one (docs/driver-attributes.md): type amdgpu-partition,
    its compute+memory profile, and its parent GPU's PCI bus id, the same for every partition of it."""
    attributes = {
        "type": {"string": "amdgpu-partition"},
        "productName": {"string": MI300X},
        "partitionProfile": {"string": "cpx_nps1"},
        "resource.kubernetes.io/pciBusID": {"string": f"0000:{0x11 + gpu_index:02x}:00.0"},
    }
    return {"name": f"gpu-{gpu_index}-cpx-{partition}", "basic": {"attributes": attributes}}


def test_all_with_no_type_takes_a_cpx_node_s_partitions_and_is_charged_their_gpus(amd_cluster):
    # An 8×MI300X node in CPX mode publishes only partitions, 64 of them; AMD's class selects the driver
    # alone, so a request for all of a node's devices with no type can take all 64: 8 GPUs. (This API
    # server allocates at most 32 devices to one claim, so the real allocation is shown on a 4×MI300X
    # node in CPX mode: all 32 of its partitions.)
    add_node(amd_cluster, "cpx-node", [cpx_partition(g, p) for g in range(8) for p in range(8)], driver=AMD)
    add_node(amd_cluster, "cpx-half", [cpx_partition(g, p) for g in range(4) for p in range(8)], driver=AMD)
    core = client.CoreV1Api(amd_cluster.client())
    namespace = "amd-budget"
    core.create_namespace({"metadata": {"name": namespace}})
    core.create_namespaced_resource_quota(
        namespace, {"metadata": {"name": "gpus"}, "spec": {"hard": {"requests.amd.com/gpu": "8"}}}
    )
    custom = client.CustomObjectsApi(amd_cluster.client())

    def template(name, request):
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": name},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "deviceClassName": AMD, **request}]}}},
        }
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaimtemplates", body)

    def pod(name, made_from, node=None):
        spec = {
            "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": made_from}],
            "containers": [{"name": "main", "image": "x", "resources": {"claims": [{"name": "gpus"}]}}],
        }
        if node:
            spec["nodeSelector"] = {"kubernetes.io/hostname": node}
        return {"metadata": {"name": name}, "spec": spec}

    template("every-device", {"allocationMode": "All"})
    template("one", {"count": 1})

    def quota_watched():  # nine devices' worth is refused once gpuport's view has the quota
        template_name = "probe"
        if not any(
            t["metadata"]["name"] == template_name
            for t in custom.list_namespaced_custom_object(
                GROUP, VERSION, namespace, "resourceclaimtemplates"
            )["items"]
        ):
            template(template_name, {"count": 9})
        try:
            core.create_namespaced_pod(namespace, pod("probe", template_name), dry_run="All")
        except ApiException as exc:
            return "exceeded quota" in exc.body
        return False

    assert wait_for(quota_watched, timeout=30)
    core.create_namespaced_pod(namespace, pod("all-of-it", "every-device", node="cpx-half"))
    # What it holds: the real scheduler gives it every partition of the node.
    assert scheduled_node(amd_cluster, namespace, "all-of-it") == "cpx-half"
    assert len(allocated_devices(amd_cluster, namespace, "all-of-it")) == 32
    # Charged what it could take on any node, 8 GPUs (not the 3 whole GPUs the fullest node publishes):
    # one more does not fit.
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod(namespace, pod("one-more", "one"))
    assert "requested: requests.amd.com/gpu=1, used: requests.amd.com/gpu=8" in refused.value.body
