"""DRA → device plugin through the webhook, on a real control plane: gpuport serves the generic
(device-plugin) map with cluster access, and a pod written for DRA, whose template is in the cluster,
is rewritten to nvidia.com/gpu and the product label and really scheduled; a claim gpuport cannot
read exactly is refused with its expression quoted. (The API server keeps resourceClaims because DRA
is on; a 1.34+ cluster does so by default.)"""

import uuid

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.integration.conftest import serve_with_cluster_access, unregister_webhooks
from tests.integration.test_dra import GROUP, VERSION, add_node, scheduled_node

PRODUCT = "device.attributes['gpu.nvidia.com'].productName"


@pytest.fixture(scope="module")
def device_plugin_cluster(dra_cluster, tmp_path_factory):
    api = dra_cluster.client()
    server = serve_with_cluster_access(dra_cluster, tmp_path_factory, "generic")
    for name, product in (("dp-40", "NVIDIA-A100-SXM4-40GB"), ("dp-80", "NVIDIA-A100-SXM4-80GB")):
        add_node(dra_cluster, name, None, {"nvidia.com/gpu": "8"}, {"nvidia.com/gpu.product": product})
    yield dra_cluster
    unregister_webhooks(api)
    server.stop()


def written_for_dra(cluster, expression, device_class="gpu.nvidia.com", count=2):
    """A namespace holding a template with this selector, and a pod whose claim is made from it."""
    namespace = f"team-{uuid.uuid4().hex[:8]}"
    client.CoreV1Api(cluster.client()).create_namespace({"metadata": {"name": namespace}})
    client.CustomObjectsApi(cluster.client()).create_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        "resourceclaimtemplates",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "two-gpus"},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "gpu",
                                "deviceClassName": device_class,
                                "count": count,
                                "selectors": [{"cel": {"expression": expression}}],
                            }
                        ]
                    }
                }
            },
        },
    )
    pod = {
        "metadata": {"name": "trainer"},
        "spec": {
            "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "two-gpus"}],
            "containers": [{"name": "main", "image": "train:1", "resources": {"claims": [{"name": "gpus"}]}}],
        },
    }
    return namespace, pod


def test_a_pod_written_for_dra_runs_on_the_device_plugin_node_with_the_gpus_it_named(device_plugin_cluster):
    namespace, pod = written_for_dra(device_plugin_cluster, f"{PRODUCT} == 'NVIDIA A100-SXM4-80GB'")
    core = client.CoreV1Api(device_plugin_cluster.client())
    created = core.create_namespaced_pod(namespace, pod)
    assert created.spec.resource_claims is None
    assert created.spec.containers[0].resources.limits == {"nvidia.com/gpu": "2"}
    assert scheduled_node(device_plugin_cluster, namespace, "trainer") == "dp-80"


def test_a_claim_it_cannot_read_exactly_is_refused_with_the_expression(device_plugin_cluster):
    expression = f"{PRODUCT}.startsWith('NVIDIA A100')"
    namespace, pod = written_for_dra(device_plugin_cluster, expression)
    with pytest.raises(ApiException) as info:
        client.CoreV1Api(device_plugin_cluster.client()).create_namespaced_pod(namespace, pod)
    assert info.value.status == 403
    assert "cannot read the CEL selector" in info.value.body
    assert "productName.startsWith(" in info.value.body


def test_a_mig_profile_in_a_form_the_driver_never_publishes_is_refused_naming_the_one_it_does(
    device_plugin_cluster,
):
    # NVIDIA's driver publishes 3g.40gb (go-nvlib's short form): on DRA this claim is never allocated,
    # so it must not become nvidia.com/mig-3g.40gb, which would run.
    expression = "device.attributes['gpu.nvidia.com'].profile == '3c.3g.40gb'"
    namespace, pod = written_for_dra(device_plugin_cluster, expression, "mig.nvidia.com", 1)
    with pytest.raises(ApiException) as info:
        client.CoreV1Api(device_plugin_cluster.client()).create_namespaced_pod(namespace, pod)
    assert info.value.status == 403
    assert "'3c.3g.40gb' matches no device: the driver publishes it as 3g.40gb" in info.value.body
