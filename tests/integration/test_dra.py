"""The DRA bridge on a real control plane: kube-apiserver, controller manager and scheduler with
Dynamic Resource Allocation on, gpuport serving the dra-nvidia map. Devices are published the way
NVIDIA's DRA driver publishes them (a ResourceSlice per node, attributes in the gpu.nvidia.com
domain); no kubelet runs, so "scheduled" means the scheduler allocated the claim and bound the pod.
"""

import subprocess
import sys
import time
import uuid

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.integration.conftest import new_namespace, serve_with_cluster_access, unregister_webhooks
from tests.translation_cases import pod as _pod

GROUP, VERSION = "resource.k8s.io", "v1beta1"
DRIVER = "gpu.nvidia.com"
# The device classes NVIDIA's driver installs: whole GPUs and MIG devices, told apart by `type`.
CLASSES = {
    "gpu.nvidia.com": f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == 'gpu'",
    "mig.nvidia.com": f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == 'mig'",
}


# What NVIDIA's driver publishes for a GPU besides its product name (k8s-dra-driver-gpu,
# cmd/gpu-kubelet-plugin/deviceinfo.go GpuInfo.Attributes; the names its bats tests assert):
# architecture as go-nvlib spells it, compute capability and driver versions as semantic versions.
ARCHITECTURE = {
    "NVIDIA A100": ("Ampere", "8.0.0"),
    "NVIDIA H100": ("Hopper", "9.0.0"),
    "NVIDIA L4": ("Ada Lovelace", "8.9.0"),
    "NVIDIA L40": ("Ada Lovelace", "8.9.0"),
    "Tesla T4": ("Turing", "7.5.0"),
}


def published(kind, product):
    architecture, capability = next(
        (v for prefix, v in ARCHITECTURE.items() if product.startswith(prefix)), ("Unknown", "0.0.0")
    )
    return {
        "type": {"string": kind},
        "productName": {"string": product},
        "brand": {"string": "Nvidia"},
        "architecture": {"string": architecture},
        "cudaComputeCapability": {"version": capability},
        "driverVersion": {"version": "570.133.20"},
        "cudaDriverVersion": {"version": "12.8.0"},
    }


def gpu(name, product, memory):
    """A whole GPU; `memory` is NVML's total, as the driver publishes it (an H100 80GB: 81559Mi)."""
    return {
        "name": name,
        "basic": {"attributes": published("gpu", product), "capacity": {"memory": {"value": memory}}},
    }


def mig(name, product, profile, memory):
    """A MIG device: its parent's attributes, its profile, and its profile's memory."""
    attributes = {**published("mig", product), "profile": {"string": profile}}
    return {"name": name, "basic": {"attributes": attributes, "capacity": {"memory": {"value": memory}}}}


@pytest.fixture(scope="module")
def dra(dra_cluster, tmp_path_factory):
    """gpuport serving the dra-nvidia map with cluster access, and the driver's device classes."""
    api = dra_cluster.client()
    custom = client.CustomObjectsApi(api)
    for name, expression in CLASSES.items():
        custom.create_cluster_custom_object(
            GROUP,
            VERSION,
            "deviceclasses",
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "DeviceClass",
                "metadata": {"name": name},
                "spec": {"selectors": [{"cel": {"expression": expression}}]},
            },
        )
    server = serve_with_cluster_access(dra_cluster, tmp_path_factory, "dra-nvidia")
    yield dra_cluster
    unregister_webhooks(api)
    server.stop()


@pytest.fixture
def team(dra):
    """A namespace of its own (the controller manager makes its default ServiceAccount)."""
    return new_namespace(dra)


def add_node(cluster, name, devices, allocatable=None, labels=None, driver=DRIVER):
    """A Ready node with no taint left, and its devices published as the DRA driver would."""
    core = client.CoreV1Api(cluster.client())
    core.create_node(
        {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}}}
    )
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110", **(allocatable or {})}
    now = "2026-11-30T00:00:00Z"
    core.patch_node_status(
        name,
        {
            "status": {
                "capacity": resources,
                "allocatable": resources,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "no kubelet here",
                        "lastHeartbeatTime": now,
                        "lastTransitionTime": now,
                    }
                ],
            }
        },
    )
    core.patch_node(name, {"spec": {"taints": None}})  # no node lifecycle controller removes not-ready
    if devices:
        client.CustomObjectsApi(cluster.client()).create_cluster_custom_object(
            GROUP,
            VERSION,
            "resourceslices",
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{name}-{driver}"},
                "spec": {
                    "driver": driver,
                    "nodeName": name,
                    "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                    "devices": devices,
                },
            },
        )


def gke_pod(name, resources, selector):
    body = _pod(resources, selector, name=name)
    body["metadata"].pop("namespace")
    return body


def wait_for(check, timeout=60, every=0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(every)
    return None


def scheduled_node(cluster, namespace, name, timeout=60):
    core = client.CoreV1Api(cluster.client())
    return wait_for(lambda: core.read_namespaced_pod(name, namespace).spec.node_name, timeout)


def scheduling_failure(cluster, namespace, name, containing, timeout=60):
    """The scheduler's FailedScheduling message for the pod once it says `containing` (before the
    controller manager has made the claim, the scheduler first says it waits for it)."""
    core = client.CoreV1Api(cluster.client())

    def failed():
        events = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}")
        messages = [e.message for e in events.items if e.reason == "FailedScheduling"]
        return next((m for m in messages if containing in m), None)

    return wait_for(failed, timeout)


def allocated_devices(cluster, namespace, pod_name):
    custom = client.CustomObjectsApi(cluster.client())
    claims = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims")["items"]
    mine = [c for c in claims if any(o["name"] == pod_name for o in c["metadata"].get("ownerReferences", []))]
    return sorted(
        r["device"]
        for c in mine
        for r in c.get("status", {}).get("allocation", {}).get("devices", {}).get("results", [])
    )


def templates_in(cluster, namespace):
    custom = client.CustomObjectsApi(cluster.client())
    return custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaimtemplates")["items"]


A100_80 = {"cloud.google.com/gke-accelerator": "nvidia-a100-80gb"}
PROFILE = f"device.attributes['{DRIVER}'].profile"


def test_a_gke_pod_asking_two_a100_80gb_waits_for_them_then_gets_two_matching_devices(dra, team):
    add_node(dra, "dra-a100-40", [gpu(f"gpu-{i}", "NVIDIA A100-SXM4-40GB", "40Gi") for i in range(4)])
    core = client.CoreV1Api(dra.client())
    created = core.create_namespaced_pod(team, gke_pod("trainer", {"nvidia.com/gpu": "2"}, A100_80))

    # gpuport rewrote it: no extended resource, no GKE label, a claim from a template that exists.
    assert created.spec.node_selector is None
    container = created.spec.containers[0]
    assert not (container.resources.limits or {}) and [c.name for c in container.resources.claims] == [
        "gpuport-main"
    ]
    (claim,) = created.spec.resource_claims
    (template,) = templates_in(dra, team)
    assert claim.resource_claim_template_name == template["metadata"]["name"]
    (request,) = template["spec"]["spec"]["devices"]["requests"]
    assert (request["deviceClassName"], request["count"]) == ("gpu.nvidia.com", 2)

    # Only 40GB devices: the real scheduler keeps it pending, and says why.
    assert scheduling_failure(dra, team, "trainer", "cannot allocate all claims")
    assert core.read_namespaced_pod("trainer", team).spec.node_name is None

    # Two A100 80GB devices appear on another node: allocated and bound there, those two and no others.
    add_node(
        dra,
        "dra-a100-80",
        [gpu("gpu-0", "NVIDIA A100-SXM4-80GB", "80Gi"), gpu("gpu-1", "NVIDIA A100-SXM4-80GB", "80Gi")],
    )
    assert scheduled_node(dra, team, "trainer", timeout=90) == "dra-a100-80"
    assert allocated_devices(dra, team, "trainer") == ["gpu-0", "gpu-1"]


def test_a_mig_slice_ask_gets_a_mig_device_with_that_profile(dra, team):
    add_node(
        dra,
        "dra-h100-mig",
        [
            mig("gpu-0-mig-3g40gb-0", "NVIDIA H100 80GB HBM3", "3g.40gb", "40Gi"),
            mig("gpu-0-mig-1g10gb-4", "NVIDIA H100 80GB HBM3", "1g.10gb", "10Gi"),
            gpu("gpu-1", "NVIDIA H100 80GB HBM3", "80Gi"),
        ],
    )
    body = gke_pod(
        "slice",
        {"nvidia.com/gpu": "1"},
        {
            "cloud.google.com/gke-accelerator": "nvidia-h100-80gb",
            "cloud.google.com/gke-gpu-partition-size": "1g.10gb",
        },
    )
    client.CoreV1Api(dra.client()).create_namespaced_pod(team, body)
    assert scheduled_node(dra, team, "slice") == "dra-h100-mig"
    assert allocated_devices(dra, team, "slice") == ["gpu-0-mig-1g10gb-4"]


def test_replicas_share_one_template_and_a_dry_run_creates_none(dra, team):
    core = client.CoreV1Api(dra.client())
    body = gke_pod("dry", {"nvidia.com/gpu": "1"}, {"cloud.google.com/gke-accelerator": "nvidia-l4"})
    dry = core.create_namespaced_pod(team, body, dry_run="All")
    assert dry.spec.resource_claims[0].resource_claim_template_name.startswith("gpuport-gpu-")
    assert templates_in(dra, team) == []

    for name in ("replica-a", "replica-b"):
        body["metadata"]["name"] = name
        core.create_namespaced_pod(team, body)
    (template,) = templates_in(dra, team)
    assert template["metadata"]["name"] == dry.spec.resource_claims[0].resource_claim_template_name
    assert template["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "gpuport"}
    for name in ("replica-a", "replica-b"):
        made_from = core.read_namespaced_pod(name, team).spec.resource_claims[0].resource_claim_template_name
        assert made_from == template["metadata"]["name"]


def test_a_template_of_that_name_with_other_content_is_refused_not_overwritten(dra, team):
    core = client.CoreV1Api(dra.client())
    body = gke_pod("first", {"nvidia.com/gpu": "4"}, {"cloud.google.com/gke-accelerator": "nvidia-l4"})
    name = (
        core.create_namespaced_pod(team, body, dry_run="All")
        .spec.resource_claims[0]
        .resource_claim_template_name
    )
    forged = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {
            "spec": {
                "devices": {"requests": [{"name": "gpu", "deviceClassName": "gpu.nvidia.com", "count": 1}]}
            }
        },
    }
    client.CustomObjectsApi(dra.client()).create_namespaced_custom_object(
        GROUP, VERSION, team, "resourceclaimtemplates", forged
    )
    with pytest.raises(ApiException) as info:
        core.create_namespaced_pod(team, body)
    assert info.value.status == 403
    assert f"ResourceClaimTemplate {team}/{name} exists with content gpuport did not write" in info.value.body
    (kept,) = templates_in(dra, team)
    assert kept["spec"]["spec"]["devices"]["requests"][0]["count"] == 1


DRA_MANIFEST = """\
# Written for a DRA cluster: two A100 80GB GPUs through NVIDIA's driver.
apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaimTemplate
metadata:
  name: two-a100-80
spec:
  spec:
    devices:
      requests:
      - name: gpu
        deviceClassName: gpu.nvidia.com
        count: 2
        selectors:
        - cel:
            expression: "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100-SXM4-80GB'"
---
apiVersion: v1
kind: Pod
metadata:
  name: trainer
spec:
  resourceClaims:
  - name: gpus
    resourceClaimTemplateName: two-a100-80
  containers:
  - name: trainer
    image: train:1
    resources:
      claims:
      - name: gpus
"""


def test_a_dra_manifest_translated_for_a_device_plugin_cluster_lands_on_the_gpus_it_asked_for(dra, tmp_path):
    # A namespace gpuport's webhook skips stands for a cluster without DRA: nodes offer nvidia.com/gpu
    # and GPU Feature Discovery's product label.
    core = client.CoreV1Api(dra.client())
    namespace = f"dp-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": namespace, "labels": {"gpuport.io/admission": "disabled"}}})
    for name, product in (("dp-a100-40", "NVIDIA-A100-SXM4-40GB"), ("dp-a100-80", "NVIDIA-A100-SXM4-80GB")):
        add_node(dra, name, None, {"nvidia.com/gpu": "8"}, {"nvidia.com/gpu.product": product})
    (tmp_path / "dra.yaml").write_text(DRA_MANIFEST)
    translated = subprocess.run(
        [sys.executable, "-m", "webhook", "translate", "--to", "generic", str(tmp_path / "dra.yaml")],
        capture_output=True,
        text=True,
        check=True,
    )
    (pod,) = list(yaml.safe_load_all(translated.stdout))  # the template is left out: nothing uses it
    assert "left out" in translated.stderr
    # The CLI writes counts as numbers, as the manifest's author does (kubectl sends them so, and the
    # API server reads a number as a quantity); this Python client's models take quantities as strings.
    for container in pod["spec"]["containers"]:
        limits = container["resources"]["limits"]
        limits.update({name: str(amount) for name, amount in limits.items()})
    core.create_namespaced_pod(namespace, pod)
    assert scheduled_node(dra, namespace, "trainer") == "dp-a100-80"
    assert core.read_namespaced_pod("trainer", namespace).spec.containers[0].resources.limits == {
        "nvidia.com/gpu": "2"
    }


def test_a_quota_d_namespace_counts_claimed_devices_in_gpu_equivalents(dra, team):
    core = client.CoreV1Api(dra.client())
    core.create_namespaced_resource_quota(
        team, {"metadata": {"name": "gpus"}, "spec": {"hard": {"requests.nvidia.com/gpu": "3"}}}
    )
    l4 = {"cloud.google.com/gke-accelerator": "nvidia-l4"}
    core.create_namespaced_pod(team, gke_pod("first", {"nvidia.com/gpu": "2"}, l4))

    def refused(name, dry_run=None):
        try:
            core.create_namespaced_pod(team, gke_pod(name, {"nvidia.com/gpu": "2"}, l4), dry_run=dry_run)
        except ApiException as exc:
            return exc.body if "exceeded quota" in exc.body else None
        return None

    # The pod's own claims are all it asks for: 2 used + 2 asked > 3, once gpuport's view has the quota.
    assert wait_for(lambda: refused("probe", dry_run="All"), timeout=20)
    message = refused("second")
    assert message and "requested: requests.nvidia.com/gpu=2, used: requests.nvidia.com/gpu=2" in message

    # A pod written for DRA, with its own template, counts the same way: one MIG 3g.40gb of seven.
    custom = client.CustomObjectsApi(dra.client())
    custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        team,
        "resourceclaimtemplates",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "slice"},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "mig",
                                "deviceClassName": "mig.nvidia.com",
                                "selectors": [{"cel": {"expression": f"{PROFILE} == '3g.40gb'"}}],
                            }
                        ]
                    }
                }
            },
        },
    )
    native = {
        "metadata": {"name": "native"},
        "spec": {
            "resourceClaims": [{"name": "slice", "resourceClaimTemplateName": "slice"}],
            "containers": [{"name": "main", "image": "x", "resources": {"claims": [{"name": "slice"}]}}],
        },
    }
    core.create_namespaced_pod(team, native)  # 2 + 3/7 ≤ 3
    again = {**native, "metadata": {"name": "native-2"}}
    core.create_namespaced_pod(team, again)  # 2 + 6/7 ≤ 3
    with pytest.raises(ApiException) as info:
        core.create_namespaced_pod(team, {**native, "metadata": {"name": "native-3"}})  # 2 + 9/7 > 3
    assert "exceeded quota" in info.value.body

    # A claim whose template does not exist cannot be counted: refused, saying which.
    missing = {**native, "metadata": {"name": "missing"}}
    missing["spec"] = {
        **native["spec"],
        "resourceClaims": [{"name": "slice", "resourceClaimTemplateName": "nowhere"}],
    }
    with pytest.raises(ApiException) as info:
        core.create_namespaced_pod(team, missing)
    assert f"cannot count this pod's claims against the GPU quota of {team}" in info.value.body
    assert "claim slice (ResourceClaimTemplate nowhere): it could not be read" in info.value.body


def test_a_claim_made_ahead_counts_against_the_gpu_quota_too(dra, team):
    core = client.CoreV1Api(dra.client())
    core.create_namespaced_resource_quota(
        team, {"metadata": {"name": "gpus"}, "spec": {"hard": {"requests.nvidia.com/gpu": "1"}}}
    )
    client.CustomObjectsApi(dra.client()).create_namespaced_custom_object(
        GROUP,
        VERSION,
        team,
        "resourceclaims",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ResourceClaim",
            "metadata": {"name": "team-gpus"},
            "spec": {
                "devices": {"requests": [{"name": "gpu", "deviceClassName": "gpu.nvidia.com", "count": 2}]}
            },
        },
    )
    pod = {
        "metadata": {"name": "made-ahead"},
        "spec": {
            "resourceClaims": [{"name": "gpus", "resourceClaimName": "team-gpus"}],
            "containers": [{"name": "main", "image": "x", "resources": {"claims": [{"name": "gpus"}]}}],
        },
    }

    def refused():
        try:
            core.create_namespaced_pod(team, pod, dry_run="All")
        except ApiException as exc:
            return exc.body if "exceeded quota" in exc.body else None
        return None

    message = wait_for(refused, timeout=20)  # once gpuport's view has the quota
    assert message and "requested: requests.nvidia.com/gpu=2" in message
