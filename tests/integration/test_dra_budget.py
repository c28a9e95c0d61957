"""One GPU budget for every DRA claim shape, on a real control plane (kube-apiserver, controller
manager and scheduler with DRA on; gpuport serving dra-nvidia with cluster access): in a namespace
with a GPU quota, a pod whose claim has a shape gpuport cannot translate is still counted (or refused
saying why), never admitted uncounted beside a pod that fills the quota; a claim two pods share is
charged once; and an init container asking 4 GPUs before an app asking 2 holds 4 devices, as the
real scheduler's allocation shows. Templates and claims made ahead that their owners delete and make
again under the same name are charged as they are now. (firstAvailable needs resource.k8s.io v1beta2,
1.33+: this API server, 1.32, does not serve it; tests/core/test_claim_budget.py counts it.)"""

import uuid

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.integration.conftest import serve_with_cluster_access, unregister_webhooks
from tests.integration.test_dra import (
    CLASSES,
    DRIVER,
    GROUP,
    VERSION,
    add_node,
    allocated_devices,
    gpu,
    scheduled_node,
    wait_for,
)

ATTR = f"device.attributes['{DRIVER}']"
# The per-profile MIG class NVIDIA's extended-resources demo installs: no loaded map names it.
CUSTOM_CLASS = "mig-1g-12gb.gpu.nvidia.com"


@pytest.fixture(scope="module")
def cluster(dra_cluster, tmp_path_factory):
    custom = client.CustomObjectsApi(dra_cluster.client())
    classes = {
        **CLASSES,
        CUSTOM_CLASS: f"device.driver == '{DRIVER}' && {ATTR}.type == 'mig' && {ATTR}.profile == '1g.12gb'",
    }
    for name, expression in classes.items():
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
    # The fullest node publishes 8 GPUs: what allocationMode All may take.
    add_node(dra_cluster, "eight", [gpu(f"gpu-{i}", "NVIDIA H100 80GB HBM3", "81559Mi") for i in range(8)])
    server = serve_with_cluster_access(dra_cluster, tmp_path_factory, "dra-nvidia")
    yield dra_cluster
    unregister_webhooks(dra_cluster.client())
    server.stop()


def quota_namespace(cluster, gpus):
    name = f"budget-{uuid.uuid4().hex[:8]}"
    core = client.CoreV1Api(cluster.client())
    core.create_namespace({"metadata": {"name": name}})
    core.create_namespaced_resource_quota(
        name, {"metadata": {"name": "gpus"}, "spec": {"hard": {"requests.nvidia.com/gpu": str(gpus)}}}
    )
    return name


def template(cluster, namespace, name, request, **devices):
    client.CustomObjectsApi(cluster.client()).create_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        "resourceclaimtemplates",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": name},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", **request}], **devices}}},
        },
    )


def claimed_pod(name, claim_entry):
    return {
        "metadata": {"name": name},
        "spec": {
            "resourceClaims": [{"name": "gpus", **claim_entry}],
            "containers": [{"name": "main", "image": "x", "resources": {"claims": [{"name": "gpus"}]}}],
        },
    }


def gpu_pod(name, count):
    """A device-plugin pod; gpuport gives it a claim of `count` GPUs on this cluster."""
    return {
        "metadata": {"name": name},
        "spec": {
            "containers": [
                {"name": "main", "image": "x", "resources": {"limits": {"nvidia.com/gpu": str(count)}}}
            ]
        },
    }


def create(cluster, namespace, body):
    """None when admitted, else the API server's message."""
    try:
        client.CoreV1Api(cluster.client()).create_namespaced_pod(namespace, body)
    except ApiException as exc:
        return exc.body
    return None


def wait_until_quota_is_watched(cluster, namespace, gpus):
    """A dry run over the quota is refused once gpuport's view has the namespace's quota. (The probe's
    template is the user's own: a dry run creates no template for a pod gpuport translates, so such a
    dry run cannot be counted and is not refused.)"""
    template(cluster, namespace, "probe", {"deviceClassName": "gpu.nvidia.com", "count": gpus + 1})

    def refused():
        try:
            client.CoreV1Api(cluster.client()).create_namespaced_pod(
                namespace, claimed_pod("probe", {"resourceClaimTemplateName": "probe"}), dry_run="All"
            )
        except ApiException as exc:
            return "exceeded quota" in exc.body
        return False

    assert wait_for(refused, timeout=30)


# (shape, template request, claim-wide fields, GPU-equivalents the pod is charged)
COUNTED = [
    # A count of 8 whole GPUs, with a selector gpuport cannot read: 8 GPUs whatever the CEL says.
    (
        "count-8-unreadable-selector",
        {
            "deviceClassName": "gpu.nvidia.com",
            "count": 8,
            "selectors": [{"cel": {"expression": f"{ATTR}.productName.startsWith('NVIDIA H')"}}],
        },
        {},
        8,
    ),
    # Every device of a node: the fullest node publishes 8.
    ("allocation-mode-all", {"deviceClassName": "gpu.nvidia.com", "allocationMode": "All"}, {}, 8),
    # Driver config (time-slicing) does not change what is allocated: 2 GPUs.
    (
        "driver-config",
        {"deviceClassName": "gpu.nvidia.com", "count": 2},
        {
            "config": [
                {
                    "requests": ["gpu"],
                    "opaque": {
                        "driver": DRIVER,
                        "parameters": {
                            "apiVersion": "resource.nvidia.com/v1beta1",
                            "kind": "GpuConfig",
                            "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}},
                        },
                    },
                }
            ]
        },
        2,
    ),
    # A class no map names, read from the cluster: seven 1g.12gb slices are one GPU.
    ("custom-device-class", {"deviceClassName": CUSTOM_CLASS, "count": 7}, {}, 1),
]


@pytest.mark.parametrize(
    ("shape", "request_fields", "devices", "charged"), COUNTED, ids=[c[0] for c in COUNTED]
)
def test_a_claim_of_a_shape_gpuport_cannot_translate_is_still_counted(
    cluster, shape, request_fields, devices, charged
):
    namespace = quota_namespace(cluster, 8)
    wait_until_quota_is_watched(cluster, namespace, 8)
    template(cluster, namespace, shape, request_fields, **devices)
    assert create(cluster, namespace, claimed_pod("claimed", {"resourceClaimTemplateName": shape})) is None
    # What it took is taken: one GPU more than is left is refused, what is left is admitted.
    left = 8 - charged
    refused = create(cluster, namespace, gpu_pod("over", left + 1))
    assert refused and "exceeded quota: gpus" in refused
    if left:
        assert create(cluster, namespace, gpu_pod("fills", left)) is None


def test_a_claim_gpuport_cannot_count_is_refused_naming_it_and_the_quota_stays_whole(cluster):
    namespace = quota_namespace(cluster, 8)
    wait_until_quota_is_watched(cluster, namespace, 8)
    template(cluster, namespace, "unknown-class", {"deviceClassName": "accelerator.example.com", "count": 8})
    refused = create(
        cluster, namespace, claimed_pod("unknown", {"resourceClaimTemplateName": "unknown-class"})
    )
    assert refused and "cannot count this pod's claims against the GPU quota" in refused
    assert "device class 'accelerator.example.com' is not one a loaded map names" in refused
    # Nothing was taken by it: a pod filling the quota is admitted, and one more GPU is not.
    assert create(cluster, namespace, gpu_pod("fills", 8)) is None
    assert "exceeded quota" in create(cluster, namespace, gpu_pod("over", 1))


def test_a_claim_two_pods_share_is_charged_once(cluster):
    namespace = quota_namespace(cluster, 2)
    wait_until_quota_is_watched(cluster, namespace, 2)
    client.CustomObjectsApi(cluster.client()).create_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
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
    for name in ("reader", "writer"):
        assert create(cluster, namespace, claimed_pod(name, {"resourceClaimName": "team-gpus"})) is None
    refused = create(cluster, namespace, gpu_pod("third", 1))
    assert refused and "requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=2" in refused


def test_an_init_container_asking_4_and_an_app_asking_2_hold_4_devices(cluster):
    namespace = f"init-{uuid.uuid4().hex[:8]}"
    core = client.CoreV1Api(cluster.client())
    core.create_namespace({"metadata": {"name": namespace}})
    add_node(
        cluster, "five", [gpu(f"gpu-{i}", "NVIDIA L4", "23034Mi") for i in range(5)], labels={"pool": "five"}
    )
    body = {
        "metadata": {"name": "staged"},
        "spec": {
            "nodeSelector": {"pool": "five"},
            "initContainers": [
                {"name": "warm", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "4"}}}
            ],
            "containers": [{"name": "main", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "2"}}}],
        },
    }
    created = core.create_namespaced_pod(namespace, body)
    assert [c.name for c in created.spec.resource_claims] == ["gpuport-main"]
    assert created.spec.containers[0].resources.claims[0].request == "main"
    assert scheduled_node(cluster, namespace, "staged") == "five"
    assert len(allocated_devices(cluster, namespace, "staged")) == 4  # max(4, 2), not 4 + 2
    # The fifth device is still free: a one-GPU pod lands on the same node.
    one = {**gpu_pod("one", 1), "spec": {**gpu_pod("one", 1)["spec"], "nodeSelector": {"pool": "five"}}}
    core.create_namespaced_pod(namespace, one)
    assert scheduled_node(cluster, namespace, "one") == "five"


def test_a_refused_model_stays_refused_so_a_gpu_no_map_lists_still_takes_the_pod(cluster):
    # HAMi's nouse-gputype: T4 becomes !(productName == "Tesla T4"): on nodes of T4s and of L40s (a
    # GPU gpuport's maps do not list), the real scheduler gives the pod an L40, never a T4.
    namespace = f"avoid-{uuid.uuid4().hex[:8]}"
    core = client.CoreV1Api(cluster.client())
    core.create_namespace({"metadata": {"name": namespace}})
    add_node(
        cluster, "t4s", [gpu(f"gpu-{i}", "Tesla T4", "15360Mi") for i in range(4)], labels={"pool": "mixed"}
    )
    add_node(cluster, "l40s", [gpu("gpu-0", "NVIDIA L40", "46068Mi")], labels={"pool": "mixed"})
    body = {
        "metadata": {"name": "not-a-t4", "annotations": {"nvidia.com/nouse-gputype": "T4"}},
        "spec": {
            "schedulerName": "hami-scheduler",
            "nodeSelector": {"pool": "mixed"},
            "containers": [{"name": "main", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
        },
    }
    created = core.create_namespaced_pod(namespace, body)
    assert created.spec.scheduler_name == "default-scheduler"  # HAMi's is not this cluster's
    assert scheduled_node(cluster, namespace, "not-a-t4") == "l40s"


def test_a_running_pod_stays_charged_what_its_claim_holds_after_its_template_is_changed(cluster):
    namespace = quota_namespace(cluster, 8)
    wait_until_quota_is_watched(cluster, namespace, 8)
    template(cluster, namespace, "eight", {"deviceClassName": "gpu.nvidia.com", "count": 8})
    assert create(cluster, namespace, claimed_pod("holder", {"resourceClaimTemplateName": "eight"})) is None
    core = client.CoreV1Api(cluster.client())

    def claim_made():
        return core.read_namespaced_pod("holder", namespace).status.resource_claim_statuses

    assert wait_for(claim_made, timeout=30)
    custom = client.CustomObjectsApi(cluster.client())
    custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaimtemplates", "eight")
    template(cluster, namespace, "eight", {"deviceClassName": "gpu.nvidia.com", "count": 1})
    template(cluster, namespace, "one", {"deviceClassName": "gpu.nvidia.com", "count": 1})
    # A pod of 1 GPU does not fit: the running pod is charged its claim's 8, not its template's 1 now.
    # (A dry run stores nothing, so the probe can be repeated until gpuport's view has the pod's claim
    # status.)

    def refused():
        try:
            core.create_namespaced_pod(
                namespace, claimed_pod("probe", {"resourceClaimTemplateName": "one"}), dry_run="All"
            )
        except ApiException as exc:
            return exc.body
        return None

    message = wait_for(refused, timeout=20)
    assert message and "requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=8" in message, (
        message
    )


def test_a_template_deleted_and_made_again_charges_the_next_pod_its_new_count(cluster):
    namespace = quota_namespace(cluster, 8)
    wait_until_quota_is_watched(cluster, namespace, 8)
    template(cluster, namespace, "gpus", {"deviceClassName": "gpu.nvidia.com", "count": 1})
    assert create(cluster, namespace, claimed_pod("first", {"resourceClaimTemplateName": "gpus"})) is None
    # Its owner deletes it and makes it again under the same name, asking 8: the next pod's claim is
    # made from what exists now, so it holds 8 GPUs.
    custom = client.CustomObjectsApi(cluster.client())
    custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaimtemplates", "gpus")
    template(cluster, namespace, "gpus", {"deviceClassName": "gpu.nvidia.com", "count": 8})
    over = create(cluster, namespace, claimed_pod("second-over", {"resourceClaimTemplateName": "gpus"}))
    assert over and "requested: requests.nvidia.com/gpu=8, used: requests.nvidia.com/gpu=1" in over, over
    # With room for it, it is admitted, charged 8: one GPU more does not fit in 9.
    core = client.CoreV1Api(cluster.client())
    core.patch_namespaced_resource_quota(
        "gpus", namespace, {"spec": {"hard": {"requests.nvidia.com/gpu": "9"}}}
    )

    def admitted():
        return (
            create(cluster, namespace, claimed_pod("second", {"resourceClaimTemplateName": "gpus"})) is None
        )

    assert wait_for(admitted, timeout=30)
    refused = create(cluster, namespace, gpu_pod("third", 1))
    assert refused and "used: requests.nvidia.com/gpu=9" in refused, refused


def test_a_claim_made_ahead_deleted_cannot_be_made_again_larger_while_pods_name_it(cluster):
    """Issue 45 changed this case: a claim made ahead that two pods name, deleted and made again asking 8,
    was charged its new count (once) at gpuport's next decision, by which time the scheduler could have
    allocated it. The create itself is refused now in a budget namespace (the sum still reads claims made
    ahead again at each decision: tests/core/test_claim_budget.py)."""
    namespace = quota_namespace(cluster, 8)
    wait_until_quota_is_watched(cluster, namespace, 8)
    custom = client.CustomObjectsApi(cluster.client())

    def claim(count):
        # A model no node has: the claim is never allocated, so its owner may delete it at any time.
        selector = f"{ATTR}.productName == 'NVIDIA B300'"
        request = {"name": "gpu", "deviceClassName": "gpu.nvidia.com", "count": count}
        request["selectors"] = [{"cel": {"expression": selector}}]
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ResourceClaim",
            "metadata": {"name": "team-gpus"},
            "spec": {"devices": {"requests": [request]}},
        }
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", body)

    claim(1)
    for name in ("reader", "writer"):
        assert create(cluster, namespace, claimed_pod(name, {"resourceClaimName": "team-gpus"})) is None
    custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", "team-gpus")

    def gone():
        try:
            custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", "team-gpus")
        except ApiException as exc:
            return exc.status == 404
        return False

    assert wait_for(gone, timeout=30)
    with pytest.raises(ApiException) as info:
        claim(8)
    assert info.value.status == 403 and "pod(s) reader, writer already name this claim" in info.value.body


def test_a_claim_pods_already_name_made_again_larger_is_refused_at_its_create(cluster):
    """Issue 45: devices are allocated after admission, from the claim as it is then. A claim a gated pod
    names (charged 1 at its admission), deleted and made again asking 8, was allocated 8 GPUs under a
    quota of 1; so was the claim the controller made from a pod's template, made again under its name
    with the pod as owner. Both creates are refused in the budget namespace; the controller's own claim
    (a new generated name) is made as before."""
    custom = client.CustomObjectsApi(cluster.client())
    core = client.CoreV1Api(cluster.client())

    def claim(name, count, owner=None):
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ResourceClaim",
            "metadata": {"name": name, **({"ownerReferences": [owner]} if owner else {})},
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "deviceClassName": "gpu.nvidia.com", "count": count}]
                }
            },
        }
        try:
            custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", body)
        except ApiException as exc:
            return exc
        return None

    def delete(name):
        custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", name)

        def gone():
            try:
                custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", name)
            except ApiException as exc:
                return exc.status == 404
            return False

        assert wait_for(gone, timeout=30)

    def gated(name, entry):
        body = claimed_pod(name, entry)
        body["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
        return body

    namespace = quota_namespace(cluster, 1)
    wait_until_quota_is_watched(cluster, namespace, 1)
    assert claim("team-gpus", 1) is None
    assert create(cluster, namespace, gated("gated", {"resourceClaimName": "team-gpus"})) is None
    delete("team-gpus")
    refused = claim("team-gpus", 8)
    assert refused is not None and refused.status == 403, refused
    assert "pod(s) gated already name this claim" in refused.body, refused.body

    # A namespace of its own: the gated pod, its claim gone, leaves its namespace uncountable.
    namespace = quota_namespace(cluster, 1)
    wait_until_quota_is_watched(cluster, namespace, 1)
    template(cluster, namespace, "one", {"deviceClassName": "gpu.nvidia.com", "count": 1})
    assert create(cluster, namespace, gated("holder", {"resourceClaimTemplateName": "one"})) is None

    def made():
        statuses = core.read_namespaced_pod("holder", namespace).status.resource_claim_statuses
        return statuses[0].resource_claim_name if statuses else None

    name = wait_for(made, timeout=30)
    assert name, "the controller made no claim for the holder"
    holder = core.read_namespaced_pod("holder", namespace)
    delete(name)
    owner = {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "holder",
        "uid": holder.metadata.uid,
        "controller": True,
    }
    refused = claim(name, 8, owner)
    assert refused is not None and refused.status == 403 and "pod(s) holder already name" in refused.body, (
        refused
    )
