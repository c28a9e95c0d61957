"""Claims that give no GPU (NVIDIA's IMEX channels for ComputeDomains) beside ordinary GPU asks: only the
GPU asks are translated; the channel claim is the workload's own business, kept as written and said.

The shapes are NVIDIA's DRA driver for GPUs (github.com/NVIDIA/k8s-dra-driver-gpu): the DeviceClass its
chart installs for channels (`device.driver == 'compute-domain.nvidia.com' && ….type == 'channel' && ….id
== 0`) and the ResourceClaimTemplate its controller makes for a ComputeDomain (one request of that class,
with opaque config naming the domain), as the cluster holds them when the webhook reads them."""

import jsonpatch
import pytest

from tests.helpers import context
from webhook.core.asks.claims import DEVICE_CLASS, read_device_class
from webhook.core.deciding.admission import decide_template

CHANNEL_CLASS = "compute-domain-default-channel.nvidia.com"
CHANNEL_SELECTOR = (
    "device.driver == 'compute-domain.nvidia.com' && "
    "device.attributes['compute-domain.nvidia.com'].type == 'channel' && "
    "device.attributes['compute-domain.nvidia.com'].id == 0"
)
CLASS_SPEC = {"selectors": [{"cel": {"expression": CHANNEL_SELECTOR}}]}
TEMPLATE = {
    "spec": {
        "spec": {
            "devices": {
                "requests": [{"name": "channel", "exactly": {"deviceClassName": CHANNEL_CLASS}}],
                "config": [
                    {
                        "requests": ["channel"],
                        "opaque": {
                            "driver": "compute-domain.nvidia.com",
                            "parameters": {
                                "apiVersion": "resource.nvidia.com/v1beta1",
                                "kind": "ComputeDomainChannelConfig",
                                "domainID": "5e5bb5b2-1b9f-4a53-9a0e-2ab1c2c1f3a0",
                            },
                        },
                    }
                ],
            }
        }
    }
}


def cluster(key):
    return {"imex-channel-0": TEMPLATE, DEVICE_CLASS + CHANNEL_CLASS: {"spec": CLASS_SPEC}}.get(key)


def worker(selector):
    return {
        "spec": {
            "nodeSelector": selector,
            "containers": [
                {
                    "name": "nvbandwidth",
                    "image": "ghcr.io/nvidia/k8s-samples:nvbandwidth",
                    "resources": {"limits": {"nvidia.com/gpu": "4"}, "claims": [{"name": "imex-channel-0"}]},
                }
            ],
            "resourceClaims": [{"name": "imex-channel-0", "resourceClaimTemplateName": "imex-channel-0"}],
        }
    }


def test_the_channel_class_is_read_as_another_driver_s_devices_not_as_gpus_of_any_kind():
    maps = context("gke").dialects.maps
    meaning = read_device_class(CHANNEL_CLASS, CLASS_SPEC, maps, context("gke").dialects.catalogue)
    assert meaning.gpu is False


@pytest.mark.parametrize(
    ("selector", "target"),
    [
        ({"nvidia.com/gpu.product": "NVIDIA-GB200"}, "gke"),
        ({"nvidia.com/gpu.product": "NVIDIA-GB200"}, "oke"),
        ({"cloud.google.com/gke-accelerator": "nvidia-gb200"}, "generic"),
        ({"cloud.google.com/gke-accelerator": "nvidia-gb200"}, "dra-nvidia"),
    ],
)
def test_only_the_gpu_ask_is_translated_and_the_channel_claim_kept_and_said(selector, target):
    decided = decide_template(worker(selector), context(target), hints=False, templates=cluster)
    assert decided.rewrite is not None, decided.refusals
    patch, warnings, _ = decided.rewrite
    after = jsonpatch.apply_patch(worker(selector), patch)["spec"]
    channel = {"name": "imex-channel-0", "resourceClaimTemplateName": "imex-channel-0"}
    assert channel in after["resourceClaims"]
    assert {"name": "imex-channel-0"} in after["containers"][0]["resources"]["claims"]
    said = [w for w in warnings if "claim imex-channel-0" in w]
    assert said and "kept as written: it gives no GPU (compute-domain-default-channel.nvidia.com)" in said[0]
