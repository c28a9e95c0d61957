"""What a DRA cluster says of itself, and what gpuport does with it: the resource.k8s.io version its
API server serves (a map's `api_version: auto`), its device classes (KEP-5004: a class with an
extendedResourceName lets `nvidia.com/gpu: 2` run on DRA as written), and the adapter that reads
classes and counts the devices nodes publish."""

import jsonpatch
import pytest

from tests.helpers import device_class, parsed, review_of
from tests.translation_cases import pod
from webhook.adapters.kube.claim_templates import ClaimTemplateStore, newest_served
from webhook.commands.cli import main
from webhook.config.cloudmap import default_directory
from webhook.config.loading import ClusterDra, build_context
from webhook.core.asks.claims import class_key, devices_key, standing_classes
from webhook.core.asks.demand import read_demand
from webhook.core.budget.equivalents import pod_use
from webhook.core.deciding import pipeline

NV = "gpu.nvidia.com"
ATTR = f"device.attributes['{NV}']"


# As NVIDIA's chart installs the whole-GPU class on resource.k8s.io/v1 (with the device plugin's name),
# and the extended-resources demo's class for one MIG profile.
WHOLE = device_class(NV, f"device.driver == '{NV}' && {ATTR}.type == 'gpu'", "nvidia.com/gpu")
MIG_1G_12GB = device_class(
    "mig-1g-12gb.gpu.nvidia.com",
    f"device.driver == '{NV}' && {ATTR}.type == 'mig' && {ATTR}.profile == '1g.12gb'",
    "nvidia.com/mig-1g.12gb",
)


def dra_context(*classes, api_version="resource.k8s.io/v1"):
    return build_context(default_directory(), "dra-nvidia", cluster_dra=ClusterDra(api_version, classes))


def decide(body, ctx):
    return pipeline.decide(parsed(review_of(body)), ctx)


def only_the_toleration(body, decision):
    """The pod as written, but for the map's GPU-node toleration, which it would not schedule without."""
    after = jsonpatch.apply_patch(body, list(decision.patch))
    after["spec"].pop("tolerations")
    after["metadata"].pop("annotations", None)
    return after == body and decision.warnings == ("gpuport: toleration nvidia.com/gpu added",)


def test_auto_is_the_version_the_cluster_serves_and_v1_without_one():
    assert dra_context().target.dra.api_version == "resource.k8s.io/v1"
    older = dra_context(api_version="resource.k8s.io/v1beta1")
    (written,) = decide(pod({"nvidia.com/gpu": "1"}), older).claim_templates
    assert written["apiVersion"] == "resource.k8s.io/v1beta1"
    assert "exactly" not in written["spec"]["spec"]["devices"]["requests"][0]


class Versions:
    def __init__(self, served):
        self.served = served

    def get_api_versions(self, _request_timeout):
        class Version:
            def __init__(self, group_version):
                self.group_version = group_version

        class Group:
            def __init__(self, name, versions):
                self.name, self.versions = name, [Version(v) for v in versions]

        class Groups:
            def __init__(self, served):
                self.groups = [Group("apps", ["apps/v1"]), Group("resource.k8s.io", served)]

        return Groups(self.served)


@pytest.mark.parametrize(
    ("served", "newest"),
    [
        (["resource.k8s.io/v1beta1"], "resource.k8s.io/v1beta1"),  # 1.32 with the opt-in
        (["resource.k8s.io/v1beta1", "resource.k8s.io/v1beta2"], "resource.k8s.io/v1beta2"),  # 1.33
        (["resource.k8s.io/v1"], "resource.k8s.io/v1"),  # 1.34+, by default
        (["resource.k8s.io/v1alpha3"], None),  # nothing gpuport writes
    ],
)
def test_discovery_picks_the_newest_version_the_api_server_serves(served, newest):
    assert newest_served(Versions(served)) == newest


def test_the_offline_commands_write_v1_unless_told_otherwise(tmp_path, capsys):
    import yaml

    manifest = tmp_path / "pod.yaml"
    manifest.write_text(yaml.safe_dump(pod({"nvidia.com/gpu": "1"})))
    for flag, version in (
        ([], "resource.k8s.io/v1"),
        (["--dra-api-version", "resource.k8s.io/v1beta1"], "resource.k8s.io/v1beta1"),
    ):
        assert main(["translate", "--to", "dra-nvidia", *flag, str(manifest)]) == 0
        out, _ = capsys.readouterr()
        written = [d for d in yaml.safe_load_all(out) if d and d.get("kind") == "ResourceClaimTemplate"]
        assert [d["apiVersion"] for d in written] == [version]


def test_a_class_standing_for_the_whole_gpu_resource_leaves_such_asks_as_written():
    ctx = dra_context(WHOLE)
    native = pod({"nvidia.com/gpu": "2"})
    decision = decide(native, ctx)
    assert decision.allowed and not decision.claim_templates
    assert only_the_toleration(native, decision)
    # Counted once: as the extended resource it asks for (the claim the scheduler makes for it is not
    # in the pod's spec).
    demand = read_demand(native, ctx.dialects, {}.get)
    assert pod_use(demand, ctx.target, ctx.dialects.catalogue).equivalents == 2
    # Another cloud's words are still translated: the resource name and the label go...
    gke = pod({"nvidia.com/gpu": "1"}, {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"})
    decision = decide(gke, ctx)
    pinned = jsonpatch.apply_patch(gke, list(decision.patch))
    # ...and a pinned model needs a claim that names it: the extended resource cannot say which.
    assert "resourceClaims" in pinned["spec"] and decision.claim_templates
    # Without such a class, every extended-resource ask becomes a claim.
    assert decide(native, dra_context()).claim_templates


def test_a_class_standing_for_a_mig_profile_carries_that_profile_s_asks_as_written():
    ctx = dra_context(WHOLE, MIG_1G_12GB)
    slice_pod = pod({"nvidia.com/mig-1g.12gb": "1"})
    decision = decide(slice_pod, ctx)
    assert decision.allowed and not decision.claim_templates
    assert only_the_toleration(slice_pod, decision)
    other = decide(pod({"nvidia.com/mig-1g.10gb": "1"}), ctx)  # no class stands for it: a claim
    assert other.claim_templates


def test_a_class_selecting_a_profile_the_driver_never_publishes_stands_for_nothing():
    # The driver publishes 3g.40gb (go-nvlib's short form); this class yields no device, so a pod
    # asking for its resource would wait forever: gpuport writes it a claim for the published profile.
    never = device_class(
        "mig-3g-40gb.gpu.nvidia.com",
        f"device.driver == '{NV}' && {ATTR}.type == 'mig' && {ATTR}.profile == '3c.3g.40gb'",
        "nvidia.com/mig-3g.40gb",
    )
    ctx = dra_context(WHOLE, never)
    assert "nvidia.com/mig-3g.40gb" not in ctx.target.dra.extended_resources
    (written,) = decide(pod({"nvidia.com/mig-3g.40gb": "1"}), ctx).claim_templates
    (request,) = written["spec"]["spec"]["devices"]["requests"]
    assert f'device.attributes["{NV}"].profile == "3g.40gb"' in str(request)


def test_a_class_of_another_map_or_one_gpuport_cannot_read_stands_for_nothing():
    unreadable = device_class(
        "odd.gpu.nvidia.com", f"device.driver == '{NV}' && {ATTR}.uuid.startsWith('GPU')", "nvidia.com/gpu"
    )
    assert dra_context(unreadable).target.dra.extended_resources == {}


class SliceApi:
    """The custom-objects calls the adapter makes, answered from a few objects."""

    def __init__(self, classes=(), slices=()):
        self.classes = {c["metadata"]["name"]: c for c in classes}
        self.slices = list(slices)
        self.calls = []

    def get_cluster_custom_object(self, group, version, plural, name, _request_timeout, **_):
        from kubernetes.client.exceptions import ApiException

        self.calls.append((plural, name))
        if name not in self.classes:
            raise ApiException(status=404, reason="Not Found")
        return self.classes[name]

    def get_namespaced_custom_object(self, group, version, namespace, plural, name, _request_timeout, **_):
        self.calls.append((plural, name))
        return {
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {"name": "a", "exactly": {"deviceClassName": "mig-1g-12gb.gpu.nvidia.com"}},
                            {"name": "b", "exactly": {"deviceClassName": NV, "allocationMode": "All"}},
                        ]
                    }
                }
            }
        }

    def list_cluster_custom_object(
        self, group, version, plural, limit=None, _continue=None, _request_timeout=None
    ):
        self.calls.append((plural, _continue))
        if plural == "deviceclasses":
            return {"items": list(self.classes.values())}
        page = int(_continue or 0)
        return {
            "items": self.slices[page : page + 1],
            "metadata": {"continue": str(page + 1) if page + 1 < len(self.slices) else None},
        }


def resource_slice(node, devices, driver=NV, nested=True):
    def device(name, kind):
        attributes = {"type": {"string": kind}}
        return (
            {"name": name, "basic": {"attributes": attributes}}
            if nested
            else {"name": name, "attributes": attributes}
        )

    return {
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node},
            "devices": [device(n, k) for n, k in devices],
        }
    }


def test_the_adapter_reads_what_a_pod_s_claims_need_before_the_core_decides():
    api = SliceApi(
        classes=[MIG_1G_12GB],
        slices=[
            resource_slice("a", [("gpu-0", "gpu"), ("gpu-1", "gpu"), ("mig-0", "mig")]),
            resource_slice("b", [(f"gpu-{i}", "gpu") for i in range(8)], nested=False),  # v1: no `basic`
            resource_slice("b", [("nic-0", "nic")], driver="nic.example.com"),
        ],
    )
    store = ClaimTemplateStore(None, "resource.k8s.io/v1")
    store.api = api
    pod_with_claim = {"spec": {"resourceClaims": [{"name": "c", "resourceClaimTemplateName": "t"}]}}
    lookup = store.referenced("team-a", pod_with_claim)
    assert lookup(class_key("mig-1g-12gb.gpu.nvidia.com")) == MIG_1G_12GB
    assert lookup(devices_key(NV, "gpu"))["count"] == 8
    assert lookup(devices_key(NV, ""))["count"] == 8
    assert lookup(devices_key(NV, "mig"))["count"] == 1
    assert lookup(devices_key("nic.example.com", ""))["count"] == 1
    # Nothing remembered without a watch-fed view: a second pod reads the template, classes and slices
    # again (each may have been deleted and made anew since).
    calls = len(api.calls)
    store.referenced("team-a", pod_with_claim)
    assert len(api.calls) == 2 * calls
    assert store.device_classes() == (MIG_1G_12GB,)


def test_a_node_can_be_given_its_own_slices_devices_and_those_any_node_reaches():
    everywhere = {
        "spec": {
            "driver": NV,
            "allNodes": True,
            "pool": {"name": "fabric"},
            "devices": [{"name": f"f{i}", "attributes": {"type": {"string": "gpu"}}} for i in range(4)],
        }
    }
    api = SliceApi(
        slices=[
            resource_slice("node1", [("a0", "gpu"), ("a1", "gpu"), ("a2", "gpu"), ("a3", "gpu")]),
            resource_slice("node1", [("b0", "gpu"), ("b1", "gpu"), ("b2", "gpu"), ("b3", "gpu")]),
            everywhere,
            {"spec": "not a mapping"},
            {"spec": {"driver": NV, "nodeName": "odd", "devices": [7, {"basic": []}, {"attributes": []}]}},
        ]
    )
    store = ClaimTemplateStore(None, "resource.k8s.io/v1")
    store.api = api
    lookup = store.referenced(
        "team-a", {"spec": {"resourceClaims": [{"name": "c", "resourceClaimTemplateName": "t"}]}}
    )
    assert lookup(devices_key(NV, "gpu"))["count"] == 12  # node1's two slices of 4, and the fabric's 4


def test_no_device_class_stops_the_context_from_being_built():
    odd = [
        device_class("weird", f"{ATTR}.cudaComputeCapability.isGreaterThan(semver('²'))", "example.com/gpu"),
        device_class(
            "nan", f"device.capacity['{NV}'].memory.compareTo(quantity('NaN')) >= 0", "example.com/x"
        ),
        {"metadata": "no", "spec": []},
        "not an object",
    ]
    assert dra_context(*odd).target.dra.extended_resources == {}


def test_the_safety_net_never_refuses_a_resource_a_device_class_stands_for():
    import celpy

    from webhook.config.policy import foreign_names, policy_objects

    ctx = dra_context(WHOLE, MIG_1G_12GB)
    ask = pod({"nvidia.com/gpu": "1"})
    admitted = jsonpatch.apply_patch(ask, list(decide(ask, ctx).patch))
    # Left as written (the scheduler makes its claim), so the policy in the API server must pass it.
    assert admitted["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    policy, _ = policy_objects(ctx.target, ctx.dialects.maps, {})
    environment = celpy.Environment()
    program = environment.program(environment.compile(policy["spec"]["validations"][0]["expression"]))
    assert program.evaluate({"object": celpy.json_to_cel(admitted)})
    assert "this cluster's GPUs (DRA claims, nvidia.com/gpu, nvidia.com/mig-1g.12gb)" in str(policy)
    names = foreign_names(ctx.target, ctx.dialects.maps)
    assert "nvidia.com/mig-1g.12gb" not in names
    assert {"nvidia.com/gpu.shared", "amd.com/gpu", "aliyun.com/gpu-mem"} <= set(names)
    # Without such a class, a whole-GPU resource is another platform's word here.
    bare = dra_context()
    assert "nvidia.com/gpu" in foreign_names(bare.target, bare.dialects.maps)


def created_at(device_class_found, when):
    return {**device_class_found, "metadata": {**device_class_found["metadata"], "creationTimestamp": when}}


# Two classes giving example.com/gpu: whole GPUs made first, then seven-slice MIG devices (and a third
# made in the same second as the MIG class, whose name sorts after it).
WHOLE_FIRST = created_at(
    device_class("a-whole", f"device.driver == '{NV}' && {ATTR}.type == 'gpu'", "example.com/gpu"),
    "2026-01-01T00:00:00Z",
)
MIG_LATER = created_at(
    device_class(
        "m-mig",
        f"device.driver == '{NV}' && {ATTR}.type == 'mig' && {ATTR}.profile == '1g.12gb'",
        "example.com/gpu",
    ),
    "2026-06-01T00:00:00Z",
)
SAME_SECOND = created_at(
    device_class("z-whole", f"device.driver == '{NV}' && {ATTR}.type == 'gpu'", "example.com/gpu"),
    "2026-06-01T00:00:00Z",
)


@pytest.mark.parametrize(
    "order", [(MIG_LATER, WHOLE_FIRST, SAME_SECOND), (SAME_SECOND, WHOLE_FIRST, MIG_LATER)]
)
def test_the_newest_class_stands_for_a_shared_extended_resource_name_then_the_first_by_name(order):
    # kube-scheduler: "the class created later is picked ... at the same time, the name sorted first".
    assert standing_classes(order) == {"example.com/gpu": "m-mig"}
    store = ClaimTemplateStore(None, "resource.k8s.io/v1")
    store.api = SliceApi(classes=order)
    lookup = store.referenced("team-a", pod({"example.com/gpu": "7"}))
    assert lookup("ExtendedResources") == {"resources": {"example.com/gpu": "m-mig"}}
    # The context leaves example.com/gpu as written for what the scheduler gives for it: MIG slices.
    assert dra_context(*order).target.dra.extended_resources == {"example.com/gpu": ("mig", "1g.12gb")}


def test_the_whole_class_made_last_is_the_one_a_pod_gets_and_is_charged():
    newer_whole = created_at(WHOLE_FIRST, "2026-12-01T00:00:00Z")
    store = ClaimTemplateStore(None, "resource.k8s.io/v1")
    store.api = SliceApi(classes=[newer_whole, MIG_LATER])  # as listed: by name, the MIG class last
    ctx = dra_context(newer_whole, MIG_LATER)
    demand = read_demand(pod({"example.com/gpu": "7"}), ctx.dialects, store.referenced("team-a", pod({})))
    assert pod_use(demand, ctx.target, ctx.dialects.catalogue).equivalents == 7  # not 7 slices: 1


class Unlistable(SliceApi):
    def list_cluster_custom_object(self, group, version, plural, **_):
        from kubernetes.client.exceptions import ApiException

        raise ApiException(status=403, reason="Forbidden")


def test_an_unlisted_class_list_is_said_unread_and_a_cluster_without_dra_has_no_classes():
    store = ClaimTemplateStore(None, "resource.k8s.io/v1")
    store.api = Unlistable()
    lookup = store.referenced("team-a", pod({"example.com/gpu": "1"}))
    assert lookup("ExtendedResources")["unread"] == "gpuport could not list the cluster's DeviceClasses"
    assert store.device_classes() == ()
    without = ClaimTemplateStore(None, "resource.k8s.io/v1", served=False)
    without.api = Unlistable()
    assert without.referenced("team-a", pod({"example.com/gpu": "1"}))("ExtendedResources") == {
        "resources": {}
    }


def amd_partition(name, bus):
    attributes = {"type": {"string": "amdgpu-partition"}, "resource.kubernetes.io/pciBusID": {"string": bus}}
    return {"name": name, "attributes": attributes}


def test_partitions_of_one_gpu_are_that_gpu_when_all_is_counted():
    cpx = {
        "spec": {
            "driver": "gpu.amd.com",
            "nodeName": "mi300x",
            "devices": [
                amd_partition(f"gpu-{g}-cpx-{p}", f"0000:{g:02x}:00.0") for g in range(8) for p in range(8)
            ],
        }
    }
    spx = resource_slice("other", [("gpu-0", "amdgpu")], driver="gpu.amd.com")  # no bus id: a GPU each
    store = ClaimTemplateStore(None, "resource.k8s.io/v1")
    store.api = SliceApi(slices=[cpx, spx])
    all_of_them = {"spec": {"resourceClaims": [{"name": "c", "resourceClaimTemplateName": "t"}]}}
    lookup = store.referenced("team-a", all_of_them)
    assert lookup(devices_key("gpu.amd.com", "")) == {"count": 64, "gpus": 8}
    assert lookup(devices_key("gpu.amd.com", "amdgpu-partition")) == {"count": 64, "gpus": 8}
    assert lookup(devices_key("gpu.amd.com", "amdgpu")) == {"count": 1, "gpus": 1}


class WatchedDra:
    """The watch-fed view's DRA side, as ClaimTemplateStore reads it."""

    def __init__(self, classes=(), slices=()):
        self.objects = {"deviceclasses": [1, list(classes)], "resourceslices": [1, list(slices)]}

    def has_synced(self, *names):
        return True

    def cluster_objects(self, name):
        version, held = self.objects[name]
        return version, list(held)


def test_with_a_watch_fed_view_classes_and_slices_are_read_from_it_and_counted_again_when_they_change():
    api = SliceApi(classes=[MIG_1G_12GB])
    view = WatchedDra([MIG_1G_12GB], [resource_slice("a", [("gpu-0", "gpu")])])
    store = ClaimTemplateStore(None, "resource.k8s.io/v1", view=view)
    store.api = api
    claimed = {"spec": {"resourceClaims": [{"name": "c", "resourceClaimTemplateName": "t"}]}}
    assert store.referenced("team-a", claimed)(devices_key(NV, "gpu"))["count"] == 1
    assert [plural for plural, _ in api.calls] == ["resourceclaimtemplates"]  # the template alone
    # A node added with more devices: the next pod's All counts it at once, not a minute later.
    view.objects["resourceslices"] = [
        2,
        [*view.objects["resourceslices"][1], resource_slice("b", [(f"g{i}", "gpu") for i in range(8)])],
    ]
    assert store.referenced("team-a", claimed)(devices_key(NV, "gpu"))["count"] == 8


def test_the_cluster_view_watches_classes_and_slices_without_waiting_on_them_for_readiness():
    from webhook.adapters.kube.clusterview import ClusterView

    view = ClusterView(None, dra=(None, "resource.k8s.io/v1beta1"))
    for name in ("pods", "resourcequotas", "namespaces", "limitranges", "nodes"):
        view.apply(name, "RELIST", items=[])
        view._synced[name].set()
    assert view.synced and view.dra_version() is None  # ready; classes and slices read again until listed
    view.apply(
        "deviceclasses",
        "RELIST",
        items=[{**MIG_1G_12GB, "metadata": {"name": "m", "uid": "1", "resourceVersion": "5"}}],
    )
    view.apply("resourceslices", "RELIST", items=[])
    for name in ("deviceclasses", "resourceslices"):
        view._synced[name].set()
    before = view.dra_version()
    view.apply(
        "resourceslices", "ADDED", {**resource_slice("a", [("gpu-0", "gpu")]), "metadata": {"name": "a-s"}}
    )
    assert view.dra_version() != before
    (held,) = view.cluster_objects("resourceslices")[1]
    assert held["spec"]["nodeName"] == "a"
    assert ClusterView(None).dra_version() == ()  # a view watching none: nothing of it changes


class CountedRefusal(SliceApi):
    """An API server whose RBAC refuses to list DeviceClasses until told otherwise."""

    def __init__(self):
        super().__init__(classes=[WHOLE_FIRST])
        self.asked = 0
        self.refusing = True

    def list_cluster_custom_object(self, group, version, plural, **kwargs):
        from kubernetes.client.exceptions import ApiException

        self.asked += 1
        if self.refusing:
            raise ApiException(status=403, reason="Forbidden")
        return super().list_cluster_custom_object(group, version, plural, **kwargs)


def test_a_refused_class_list_is_logged_once_reported_and_asked_again_on_a_back_off(caplog):
    # The shipped RBAC without the DRA rules: every reload (2 s) asked for the classes, and each
    # refusal was a warning line. Now: one line with the reason, then quiet, asked again ever later.
    now = [0.0]
    store = ClaimTemplateStore(None, "resource.k8s.io/v1", clock=lambda: now[0])
    store.api = api = CountedRefusal()
    with caplog.at_level("INFO", logger="gpuport"):
        for _ in range(90):  # three minutes of reloads
            assert store.device_classes() == ()
            now[0] += 2
    warned = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 1 and "403 Forbidden" in warned[0].getMessage()
    assert "deviceclasses" in warned[0].getMessage()
    assert 2 <= api.asked <= 10  # looked at again, on a back-off, not on every reload
    assert store.capabilities.summary() == "list deviceclasses.resource.k8s.io unavailable: 403 Forbidden"
    api.refusing = False
    now[0] += 600
    with caplog.at_level("INFO", logger="gpuport"):
        assert [c["metadata"]["name"] for c in store.device_classes()] == [WHOLE_FIRST["metadata"]["name"]]
    assert store.capabilities.summary() == ""
    assert "available again" in caplog.records[-1].getMessage()
