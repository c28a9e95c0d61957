"""One budget for DRA claims of every shape: each GPU device a pod's claims can allocate is counted in
GPU-equivalents, or the pod's claim is listed as uncountable with why; nothing is counted as nothing.
A claim made ahead and shared by pods is charged once; a claim is charged once however many of the
pod's containers use it. The shapes are those NVIDIA's and AMD's DRA drivers publish in their demo
specs and chart (see tests/core/test_dra_published_shapes.py for the specs themselves)."""

from decimal import Decimal
from fractions import Fraction

import pytest

from tests.helpers import context, device_class, parsed, review_of
from webhook.adapters.kube.quota_gate import QuotaGate
from webhook.core.asks.claims import class_key, devices_key, read_claim_requests
from webhook.core.asks.demand import read_demand
from webhook.core.asks.pod_claims import read_pod_claims
from webhook.core.budget.equivalents import pod_use
from webhook.core.budget.quota import Quota
from webhook.core.vocabulary.gpu_use import GpuUse

DRA = context("dra-nvidia")
GENERIC = context("generic")
MAPS, CATALOGUE = DRA.dialects.maps, DRA.dialects.catalogue
NV = "gpu.nvidia.com"
ATTR = f"device.attributes['{NV}']"


def request(device_class=NV, *selectors, **fields):
    entry = {"name": "gpu", "exactly": {"deviceClassName": device_class, **fields}}
    if selectors:
        entry["exactly"]["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return entry


def claim_spec(*requests, **devices):
    return {"devices": {"requests": list(requests), **devices}}


def template(spec, name="t"):
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": spec},
    }


# The demo's per-profile MIG class (NVIDIA k8s-dra-driver-gpu, demo/specs/extended-resources/mig-1g-12gb).
MIG_1G_12GB = device_class(
    "mig-1g-12gb.gpu.nvidia.com",
    f"device.driver == '{NV}' && {ATTR}.type == 'mig' && {ATTR}.profile == '1g.12gb'",
    extended="nvidia.com/mig-1g.12gb",
)
# A class of another driver's devices (a network card): no GPU.
NIC = device_class("nic.example.com", "device.driver == 'nic.example.com'")
# Intel's DRA driver's class (intel/intel-resource-drivers-for-kubernetes): no map describes it.
INTEL = device_class("gpu.intel.com", "device.driver == 'gpu.intel.com'")


def pod(*entries, containers=(("main", ("gpus",)),)):
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "team-a"},
        "spec": {
            "resourceClaims": list(entries),
            "containers": [
                {"name": n, "image": "x", "resources": {"claims": [{"name": c} for c in refs]}}
                for n, refs in containers
            ],
        },
    }


def from_template(name="gpus", made_from="t"):
    return {"name": name, "resourceClaimTemplateName": made_from}


def charged(spec, objects=None):
    """What the pod of one claim made from `spec` is charged, or why it cannot be."""
    found = {"t": template(spec), **(objects or {})}
    claims = read_pod_claims(pod(from_template()), found.get, MAPS, CATALOGUE)
    if claims.uncountable:
        return claims.uncountable
    return claims.own().equivalents


H100 = f"{ATTR}.productName == 'NVIDIA H100 80GB HBM3'"


@pytest.mark.parametrize(
    ("spec", "objects", "expected"),
    [
        # A count of whole GPUs is that many GPUs, whatever the CEL says (this one is not readable).
        (claim_spec(request(NV, f"{ATTR}.architecture.startsWith('H')", count=8)), {}, 8),
        # Driver config (time-slicing, MPS) does not change what is allocated.
        (
            claim_spec(
                request(NV, count=2),
                config=[{"requests": ["gpu"], "opaque": {"driver": NV, "parameters": {"kind": "GpuConfig"}}}],
            ),
            {},
            2,
        ),
        # Every device of a node: as many as the fullest node publishes.
        (claim_spec(request(NV, allocationMode="All")), {devices_key(NV, "gpu"): {"count": 8}}, 8),
        # firstAvailable: its largest alternative (a whole GPU, rather than two 1g.10gb slices).
        (
            claim_spec(
                {
                    "name": "gpu",
                    "firstAvailable": [
                        {
                            "name": "slices",
                            "deviceClassName": "mig.nvidia.com",
                            "count": 2,
                            "selectors": [{"cel": {"expression": f"{ATTR}.profile == '1g.10gb'"}}],
                        },
                        {"name": "whole", "deviceClassName": NV, "count": 1},
                    ],
                }
            ),
            {},
            1,
        ),
        # A class no map names, read from the cluster: the demo's 1g.12gb class, a seventh each.
        (
            claim_spec(request("mig-1g-12gb.gpu.nvidia.com", count=2)),
            {class_key("mig-1g-12gb.gpu.nvidia.com"): MIG_1G_12GB},
            Fraction(2, 7),
        ),
        # A MIG slice of no profile said: at most a whole GPU each.
        (claim_spec(request("mig.nvidia.com", count=3)), {}, 3),
        # The driver's passthrough class (type vfio): whole GPUs, though never translated.
        (
            claim_spec(request("vfio.gpu.nvidia.com")),
            {
                class_key("vfio.gpu.nvidia.com"): device_class(
                    "vfio.gpu.nvidia.com", f"device.driver == '{NV}' && {ATTR}.type == 'vfio'"
                )
            },
            1,
        ),
        # A class that pins no driver may give GPUs: counted as whole GPUs.
        (
            claim_spec(request("anything.example.com", count=2)),
            {class_key("anything.example.com"): device_class("anything.example.com", "true")},
            2,
        ),
        # Another driver's devices are no GPU: nothing to charge, and nothing refused.
        (claim_spec(request("nic.example.com", count=4)), {class_key("nic.example.com"): NIC}, 0),
        # NVIDIA's IMEX channels (its compute-domain driver): no GPU either.
        (
            claim_spec(request("compute-domain-default-channel.nvidia.com", count=1)),
            {
                class_key("compute-domain-default-channel.nvidia.com"): device_class(
                    "compute-domain-default-channel.nvidia.com",
                    "device.driver == 'compute-domain.nvidia.com'",
                )
            },
            0,
        ),
        # A GPU driver no map describes (Intel's DRA driver, class gpu.intel.com): whole GPUs each.
        (claim_spec(request("gpu.intel.com", count=8)), {class_key("gpu.intel.com"): INTEL}, 8),
    ],
)
def test_every_shape_a_driver_publishes_is_charged_in_gpu_equivalents(spec, objects, expected):
    assert charged(spec, objects) == expected


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        (
            claim_spec(request("mig-1g-12gb.gpu.nvidia.com")),
            "device class 'mig-1g-12gb.gpu.nvidia.com' is not one",
        ),
        (
            claim_spec(request(NV, allocationMode="All")),
            "gpuport cannot see how many devices the nodes publish",
        ),
        (claim_spec(request(NV, count=0)), "has count 0"),
        (
            claim_spec(
                {"name": "gpu", "firstAvailable": [{"name": "x", "deviceClassName": "unknown.example.com"}]}
            ),
            "device class 'unknown.example.com' is not one",
        ),
    ],
)
def test_what_cannot_be_counted_is_said_with_the_claim_and_why_never_counted_as_nothing(spec, why):
    (said,) = charged(spec)
    assert said.startswith("claim gpus (ResourceClaimTemplate t): ") and why in said


def test_a_template_that_cannot_be_read_is_uncountable():
    claims = read_pod_claims(pod(from_template(made_from="gone")), {}.get, MAPS, CATALOGUE)
    assert claims.any and claims.uncountable == (
        "claim gpus (ResourceClaimTemplate gone): it could not be read (create it before the pod, or retry)",
    )


def test_a_claim_is_charged_once_however_many_containers_use_it_and_init_containers_too():
    body = pod(from_template(), containers=(("a", ("gpus",)), ("b", ("gpus",))))
    body["spec"]["initContainers"] = [
        {"name": "setup", "image": "x", "resources": {"claims": [{"name": "gpus"}]}}
    ]
    claims = read_pod_claims(body, {"t": template(claim_spec(request(NV, count=2)))}.get, MAPS, CATALOGUE)
    # Any model may come: the memory budget is charged as if it were the largest the driver's map names
    # (B300, 275,040 MiB by NVML, since it joined dra-nvidia).
    assert claims.own() == GpuUse(Fraction(2), 2 * CATALOGUE.models["B300"].memory_mib)


def test_a_claim_made_ahead_is_charged_apart_so_pods_that_share_it_are_charged_once():
    shared = pod({"name": "gpus", "resourceClaimName": "team-gpu"})
    found = {"ResourceClaim/team-gpu": {"spec": {"spec": claim_spec(request(NV, H100))}}}
    demand = read_demand(shared, DRA.dialects, found.get)
    assert demand.claims.shared() == {"team-gpu": GpuUse(Fraction(1), 81559)}
    assert demand.claims.own() == GpuUse(Fraction(0), 0)
    assert pod_use(demand, DRA.target, CATALOGUE).equivalents == 1
    assert pod_use(demand, DRA.target, CATALOGUE, shared_claims=False).equivalents == 0


def test_a_pod_holds_its_containers_asks_as_the_kubelet_counts_them_plus_its_claims():
    mixed = pod(from_template())
    mixed["spec"]["initContainers"] = [
        {"name": "warm", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "4"}}}
    ]
    mixed["spec"]["containers"].append(
        {"name": "side", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    )
    demand = read_demand(mixed, DRA.dialects, {"t": template(claim_spec(request(NV, count=2)))}.get)
    assert pod_use(demand, DRA.target, CATALOGUE).equivalents == 4 + 2  # max(4, 1) + the claim


class View:
    """A cluster view of one namespace with a GPU quota and the pods given."""

    def __init__(self, hard, pods=()):
        self.quota = Quota("gpus", {"requests.nvidia.com/gpu": Decimal(hard)})
        self.pods = list(pods)

    def has_synced(self, *names):
        return True

    def quotas_in(self, namespace):
        return [self.quota]

    def pods_version(self, namespace):
        return len(self.pods)

    def pods_read_through(self):
        return 0

    def pods_in(self, namespace):
        return self.pods


class Objects:
    """The namespace's claims, as the cluster adapter answers for a pod."""

    def __init__(self, found):
        self.found = found

    def referenced(self, namespace, pod):
        return self.found.get


class Ledger:
    def reserve(self, namespace, reservation, decide, now, counted, write, mark, deadline=None):
        return decide([])


def running(name, entry):
    body = pod(entry)
    body["metadata"] = {"name": name, "namespace": "team-a", "uid": name}
    return body


def test_the_quota_charges_a_claim_shared_by_pods_once_while_any_pod_uses_it():
    made_ahead = {"name": "gpus", "resourceClaimName": "team-gpu"}
    found = {"ResourceClaim/team-gpu": {"spec": {"spec": claim_spec(request(NV, count=2))}}}
    # Two running pods share the claim: 2 GPUs used, not 4; a third pod sharing it adds nothing.
    view = View(2, [running("a", made_ahead), running("b", made_ahead)])
    gate = QuotaGate(view, Ledger(), templates=Objects(found))
    third = running("c", made_ahead)
    assert gate.admit(parsed(review_of(third)), DRA, read_demand(third, DRA.dialects, found.get)) is None
    # A pod with a claim of its own is charged for it on top: 2 used + 1 > 2.
    own = running("d", from_template())
    found["t"] = template(claim_spec(request(NV, count=1)))
    refused = gate.admit(parsed(review_of(own)), DRA, read_demand(own, DRA.dialects, found.get))
    assert (
        refused is not None
        and "requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=2" in (refused.message)
    )


def test_the_quota_charges_a_shared_claim_to_the_first_pod_that_uses_it():
    made_ahead = {"name": "gpus", "resourceClaimName": "team-gpu"}
    found = {"ResourceClaim/team-gpu": {"spec": {"spec": claim_spec(request(NV, count=2))}}}
    gate = QuotaGate(View(1), Ledger(), templates=Objects(found))
    first = running("a", made_ahead)
    refused = gate.admit(parsed(review_of(first)), DRA, read_demand(first, DRA.dialects, found.get))
    assert (
        refused is not None
        and "requested: requests.nvidia.com/gpu=2, used: requests.nvidia.com/gpu=0" in (refused.message)
    )


def test_the_quota_refuses_a_pod_whose_claim_cannot_be_counted_naming_the_claim_and_why():
    found = {"t": template(claim_spec(request("custom.example.com")))}
    gate = QuotaGate(View(8), Ledger(), templates=Objects(found))
    body = running("a", from_template())
    refused = gate.admit(parsed(review_of(body)), DRA, read_demand(body, DRA.dialects, found.get))
    assert refused.reason == "quota-claims-uncountable"
    assert refused.message == (
        "gpuport cannot count this pod's claims against the GPU quota of team-a: claim gpus "
        "(ResourceClaimTemplate t): request 'gpu': device class 'custom.example.com' is not one a loaded "
        "map names, and gpuport could not read it"
    )


def test_gpu_limits_refuse_an_uncountable_claim_and_count_a_custom_class():
    from webhook.adapters.kube.limit_gate import LimitGate

    class LimitView:
        def namespace(self, name):
            return {"labels": {}, "annotations": {"gpuport.io/gpu-limits": '[{"type": "Pod", "max": 1}]'}}

        def limitranges_in(self, name):
            return []

    gate = LimitGate(LimitView())
    body = running("a", from_template())
    unknown = {"t": template(claim_spec(request("custom.example.com")))}
    refused = gate.admit(parsed(review_of(body)), DRA, read_demand(body, DRA.dialects, unknown.get))
    assert refused.reason == "gpu-limit-claims-uncountable"
    known = {
        "t": template(claim_spec(request("mig-1g-12gb.gpu.nvidia.com", count=8))),
        class_key("mig-1g-12gb.gpu.nvidia.com"): MIG_1G_12GB,
    }
    over = gate.admit(parsed(review_of(body)), DRA, read_demand(body, DRA.dialects, known.get))
    assert "maximum nvidia.com/gpu usage per Pod is 1, but limit is 1.143" in over.message  # 8/7


def test_a_version_comparison_on_compute_capability_is_checked_against_the_catalogue():
    def models(expression):
        (reading,), _ = read_claim_requests(claim_spec(request(NV, expression)), MAPS, CATALOGUE)
        assert reading.inexact == ""
        return reading.models

    hopper_and_later = models(f"{ATTR}.cudaComputeCapability.isGreaterThan(semver('8.9.0'))")
    assert {"H100-80GB", "H200", "B200"} <= hopper_and_later and not {"L4", "A100-80GB"} & hopper_and_later
    at_least = models(f"{ATTR}.cudaComputeCapability.compareTo(semver('9.0.0')) >= 0")
    assert "H100-80GB" in at_least and "L40S" not in at_least
    assert models(f"{ATTR}.cudaComputeCapability == semver('8.6.0')") == {"A10", "A10G"}
    assert models(f"{ATTR}.architecture == 'Ada Lovelace'") == {"L4", "L40S"}


def test_a_driver_version_requirement_is_counted_but_not_said_in_device_plugin_words():
    expression = f"{ATTR}.driverVersion.isGreaterThan(semver('550.0.0'))"
    (reading,), _ = read_claim_requests(claim_spec(request(NV, expression, count=2)), MAPS, CATALOGUE)
    assert reading.count == 2 and "a device-plugin pod cannot select" in reading.inexact


def test_a_negated_product_selector_is_a_refusal_and_long_mig_profiles_are_refused():
    refusing = f"!({ATTR}.productName in ['Tesla T4', 'NVIDIA L4'])"
    (reading,), _ = read_claim_requests(claim_spec(request(NV, refusing)), MAPS, CATALOGUE)
    assert (reading.models, reading.avoid, reading.inexact) == (None, {"T4", "L4"}, "")
    also = f"{ATTR}.productName != 'Tesla T4'"
    (reading,), _ = read_claim_requests(claim_spec(request(NV, also)), MAPS, CATALOGUE)
    assert reading.avoid == {"T4"}

    def profile(value):
        (found,), _ = read_claim_requests(
            claim_spec(request("mig.nvidia.com", f"{ATTR}.profile == '{value}'")), MAPS, CATALOGUE
        )
        return found

    # The driver publishes 3g.40gb, never 3c.3g.40gb: that selector matches no device, so it names no
    # profile to translate to, and the budget still counts the device it asks for.
    never = profile("3c.3g.40gb")
    assert never.profile is None and "matches no device" in never.inexact
    assert charged(claim_spec(request("mig.nvidia.com", f"{ATTR}.profile == '3c.3g.40gb'"))) == 1
    inside = profile("1c.3g.40gb")
    assert "compute instance inside a MIG device" in inside.inexact
    assert charged(claim_spec(request("mig.nvidia.com", f"{ATTR}.profile == '1c.3g.40gb'"))) == 1


@pytest.mark.parametrize(
    ("spec", "objects", "expected"),
    [
        # A driver pinned beside `||` is no pin: the class may give GPUs, counted whole.
        (
            claim_spec(request("tricky.example.com", count=8)),
            {
                class_key("tricky.example.com"): device_class(
                    "tricky.example.com",
                    "(device.driver == 'nic.example.com' && false) || device.driver == 'gpu.nvidia.com'",
                )
            },
            8,
        ),
        # A profile a class seems to pin beside `||` is not trusted: 7 devices may be 7 whole H100s.
        (
            claim_spec(request("cheap.example.com", count=7)),
            {
                class_key("cheap.example.com"): device_class(
                    "cheap.example.com",
                    f"device.driver == '{NV}' && {ATTR}.type == 'mig' && {ATTR}.profile == '1g.10gb'"
                    f" || {H100}",
                )
            },
            7,
        ),
        # A memory bound read before the type says MIG does not narrow to the whole GPUs that fit it:
        # four 1g.24gb slices may be an RTX PRO 6000's quarters, one whole GPU.
        (
            claim_spec(
                request(
                    NV + "-any",
                    f"device.capacity['{NV}'].memory.compareTo(quantity('95Gi')) <= 0 && "
                    f"{ATTR}.type == 'mig' && {ATTR}.profile == '1g.24gb'",
                    count=4,
                )
            ),
            {class_key(NV + "-any"): device_class(NV + "-any", f"device.driver == '{NV}'")},
            1,
        ),
        # Two requests of one name (offline only: the API server refuses them) are both counted.
        (
            claim_spec(
                request(NV, count=8), {"name": "gpu", "exactly": {"deviceClassName": "nic.example.com"}}
            ),
            {class_key("nic.example.com"): NIC},
            8,
        ),
    ],
)
def test_nothing_outside_the_strict_grammar_lowers_a_charge(spec, objects, expected):
    assert charged(spec, objects) == expected


def test_a_request_outside_the_grammar_takes_every_device_of_the_driver_for_all():
    # AMD's class holds whole GPUs and partitions; `type == partition && junk || true` may be anything.
    amd = context("dra-amd")
    amd_attr = "device.attributes['gpu.amd.com']"
    junk = f"{amd_attr}.type == 'amdgpu-partition' && {amd_attr}.x == 'y' || true"
    found = {
        "t": template(claim_spec(request("gpu.amd.com", junk, allocationMode="All"))),
        devices_key("gpu.amd.com", "amdgpu-partition"): {"count": 2},
        devices_key("gpu.amd.com", ""): {"count": 8},
    }
    claims = read_pod_claims(pod(from_template()), found.get, amd.dialects.maps, amd.dialects.catalogue)
    assert claims.own().equivalents == 8


def test_the_memory_budget_is_charged_the_largest_gpu_a_claim_may_get():
    two = claim_spec(request(NV, f"{ATTR}.productName in ['NVIDIA A100-SXM4-40GB', 'NVIDIA H200']", count=2))
    claims = read_pod_claims(pod(from_template()), {"t": template(two)}.get, MAPS, CATALOGUE)
    assert claims.own() == GpuUse(Fraction(2), 2 * CATALOGUE.models["H200"].memory_mib)
    any_slice = claim_spec(request("mig.nvidia.com", count=4))
    claims = read_pod_claims(pod(from_template()), {"t": template(any_slice)}.get, MAPS, CATALOGUE)
    assert claims.own() == GpuUse(Fraction(4), 4 * CATALOGUE.models["B300"].memory_mib)  # the largest named


@pytest.mark.parametrize(
    "expression",
    [
        f"{ATTR}.cudaComputeCapability.isGreaterThan(semver('²'))",
        f"device.capacity['{NV}'].memory.compareTo(quantity('NaN')) >= 0",
    ],
)
def test_literals_python_reads_loosely_are_refused_not_crashed_on(expression):
    (reading,), _ = read_claim_requests(claim_spec(request(NV, expression, count=2)), MAPS, CATALOGUE)
    assert reading.count == 2 and "cannot read the CEL selector" in reading.inexact


def test_driver_config_of_any_shape_is_said_not_crashed_on():
    for parameters in ([1, 2], "TimeSlicing", 3):
        spec = claim_spec(request(NV), config=[{"opaque": {"driver": NV, "parameters": parameters}}])
        _, whole_claim = read_claim_requests(spec, MAPS, CATALOGUE)
        assert whole_claim and "devices.config" in whole_claim[0]


def test_a_device_class_that_sets_the_driver_up_is_not_translated():
    configured = device_class("sliced.gpu.nvidia.com", f"device.driver == '{NV}' && {ATTR}.type == 'gpu'")
    configured["spec"]["config"] = [{"opaque": {"driver": NV, "parameters": {"kind": "GpuConfig"}}}]
    spec = claim_spec(request("sliced.gpu.nvidia.com"))
    (reading,), _ = read_claim_requests(
        spec, MAPS, CATALOGUE, {class_key("sliced.gpu.nvidia.com"): configured}.get
    )
    assert reading.count == 1 and "spec.config" in reading.inexact


def test_a_running_pod_is_charged_what_its_claim_holds_whatever_became_of_its_template():
    # The pod was admitted for a template of 8 GPUs; its owner then deleted the template, or made it
    # anew asking 1. The claim the cluster made from it (immutable, held while the pod runs) still
    # holds 8: that is what the running pod is charged.
    body = running("a", from_template())
    body["status"] = {"resourceClaimStatuses": [{"name": "gpus", "resourceClaimName": "a-gpus-x7k2"}]}
    found = {"ResourceClaim/a-gpus-x7k2": {"spec": {"spec": claim_spec(request(NV, count=8))}}}
    for template_now in ({}, {"t": template(claim_spec(request(NV, count=1)))}):
        objects = {**found, **template_now}
        gate = QuotaGate(View(8, [body]), Ledger(), templates=Objects(objects))
        new = running("b", from_template())
        refused = gate.admit(
            parsed(review_of(new)),
            DRA,
            read_demand(new, DRA.dialects, {"t": template(claim_spec(request(NV, count=1)))}.get),
        )
        assert refused is not None and "used: requests.nvidia.com/gpu=8" in refused.message


def test_a_running_pod_whose_claim_cannot_be_read_stops_the_count_until_it_can():
    body = running("a", from_template())
    body["status"] = {"resourceClaimStatuses": [{"name": "gpus", "resourceClaimName": "a-gpus-x7k2"}]}
    objects: dict = {}
    gate = QuotaGate(View(8, [body]), Ledger(), templates=Objects(objects))
    new = running("b", from_template())
    demand = read_demand(new, DRA.dialects, {"t": template(claim_spec(request(NV, count=1)))}.get)
    refused = gate.admit(parsed(review_of(new)), DRA, demand)
    assert refused.reason == "quota-running-pod-uncountable"
    assert "cannot count what pod a (claim gpus (ResourceClaim a-gpus-x7k2 made from" in refused.message
    # Not remembered: once the claim can be read, it is counted (1 of 8 used, 1 more fits).
    objects["ResourceClaim/a-gpus-x7k2"] = {"spec": {"spec": claim_spec(request(NV, count=1))}}
    assert gate.admit(parsed(review_of(new)), DRA, demand) is None


def extended_pod(resources, init=None):
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "team-a"},
        "spec": {"containers": [{"name": "main", "image": "x", "resources": {"limits": dict(resources)}}]},
    }
    if init:
        body["spec"]["initContainers"] = [{"name": "warm", "image": "x", "resources": {"limits": dict(init)}}]
    return body


GPU_CLASS = device_class(NV, f"device.driver == '{NV}' && {ATTR}.type == 'gpu'")
STANDING = {  # as the cluster adapter answers: the classes that carry an extendedResourceName
    "ExtendedResources": {"resources": {"example.com/gpu": NV, "example.com/nic": "nic.example.com"}},
    class_key(NV): GPU_CLASS,
    class_key("nic.example.com"): NIC,
}


@pytest.mark.parametrize(
    ("resources", "init", "expected"),
    [
        ({"deviceclass.resource.kubernetes.io/gpu.nvidia.com": "8"}, None, 8),  # every class's own name
        ({"example.com/gpu": "2"}, None, 2),  # a class's extendedResourceName no map reads
        ({"example.com/gpu": "2"}, {"example.com/gpu": "3"}, 5),  # init containers added, never less
        ({"deviceclass.resource.kubernetes.io/mig-1g-12gb.gpu.nvidia.com": "7"}, None, 1),
        ({"example.com/nic": "4"}, None, 0),  # another driver's devices: no GPU
    ],
)
def test_a_resource_a_device_class_stands_for_is_charged_like_the_claim_the_scheduler_makes(
    resources, init, expected
):
    found = {**STANDING, class_key("mig-1g-12gb.gpu.nvidia.com"): MIG_1G_12GB}
    body = extended_pod(resources, init)
    demand = read_demand(body, DRA.dialects, found.get)
    assert pod_use(demand, DRA.target, CATALOGUE).equivalents == expected


def test_a_resource_naming_a_class_the_cluster_lacks_cannot_be_counted():
    body = extended_pod({"deviceclass.resource.kubernetes.io/missing.example.com": "1"})
    demand = read_demand(body, DRA.dialects, STANDING.get)
    (said,) = demand.claims.uncountable
    assert said.startswith('containers[0] "main" deviceclass.resource.kubernetes.io/missing.example.com: ')
    assert "device class 'missing.example.com' is not one" in said


def test_a_resource_a_map_reads_itself_is_counted_once_as_its_ask():
    # nvidia.com/gpu is read as a whole-GPU ask; a class standing for it adds nothing more.
    found = {**STANDING, "ExtendedResources": {"resources": {"nvidia.com/gpu": NV}}}
    body = extended_pod({"nvidia.com/gpu": "2"})
    demand = read_demand(body, DRA.dialects, found.get)
    assert pod_use(demand, DRA.target, CATALOGUE).equivalents == 2


class ChangingView(View):
    """A view whose pods change in place (a pod's status filled in), as the watch delivers it."""

    def __init__(self, hard, pods=()):
        super().__init__(hard, pods)
        self.version = 0

    def pods_version(self, namespace):
        return self.version

    def replace(self, uid, record):
        self.pods = [record if p["metadata"]["uid"] == uid else p for p in self.pods]
        self.version += 1


def test_a_pending_pod_is_charged_again_once_the_cluster_has_made_its_claims():
    # Admitted for a template of 1; before the claim controller ran, the template was deleted and made
    # again asking 8, and the claim the pod got (named in its status) holds 8.
    pending = running("a", from_template())
    found = {"t": template(claim_spec(request(NV, count=1)))}
    view = ChangingView(2, [pending])
    gate = QuotaGate(view, Ledger(), templates=Objects(found))
    new = running("b", from_template())
    demand = read_demand(new, DRA.dialects, {"t": template(claim_spec(request(NV, count=1)))}.get)
    assert gate.admit(parsed(review_of(new)), DRA, demand) is None  # 1 used, 1 more fits in 2
    made = {**pending, "status": {"resourceClaimStatuses": [{"name": "gpus", "resourceClaimName": "a-x"}]}}
    found["ResourceClaim/a-x"] = {"spec": {"spec": claim_spec(request(NV, count=8))}}
    view.replace("a", made)
    refused = gate.admit(parsed(review_of(new)), DRA, demand)
    assert refused is not None and "used: requests.nvidia.com/gpu=8" in refused.message


def test_a_claim_made_ahead_is_read_again_for_every_decision():
    # Two pods share a claim of 1 that its owner then deletes and makes again, under its name, of 8.
    made_ahead = {"name": "gpus", "resourceClaimName": "team-gpu"}
    found = {"ResourceClaim/team-gpu": {"spec": {"spec": claim_spec(request(NV, count=1))}}}
    view = View(8, [running("a", made_ahead), running("b", made_ahead)])
    gate = QuotaGate(view, Ledger(), templates=Objects(found))
    new = running("c", from_template())
    one = {"t": template(claim_spec(request(NV, count=1)))}
    demand = read_demand(new, DRA.dialects, one.get)
    assert gate.admit(parsed(review_of(new)), DRA, demand) is None
    found["ResourceClaim/team-gpu"] = {"spec": {"spec": claim_spec(request(NV, count=8))}}
    refused = gate.admit(parsed(review_of(new)), DRA, demand)
    assert refused is not None and "used: requests.nvidia.com/gpu=8" in refused.message
    # Charged once for both pods, and a claim that can no longer be read stops the count.
    del found["ResourceClaim/team-gpu"]
    unread = gate.admit(parsed(review_of(new)), DRA, demand)
    assert unread.reason == "quota-running-pod-uncountable"
    assert "cannot count what the claims made ahead hold (claim team-gpu" in unread.message


AMD_CTX = context("dra-amd")
AMD = "gpu.amd.com"


def amd_all(*selectors):
    return claim_spec(request(AMD, *selectors, allocationMode="All"))


# An 8×MI300X node in CPX mode publishes 64 partitions (8 per GPU); another node one whole GPU.
CPX_NODE = {
    devices_key(AMD, "amdgpu"): {"count": 1, "gpus": Fraction(1)},
    devices_key(AMD, "amdgpu-partition"): {"count": 64, "gpus": Fraction(8)},
    devices_key(AMD, ""): {"count": 64, "gpus": Fraction(8)},
}


@pytest.mark.parametrize(
    ("spec", "objects", "expected"),
    [
        (amd_all(), CPX_NODE, 8),  # no type: every device the driver publishes, each GPU once
        (amd_all(f"device.attributes['{AMD}'].type == 'amdgpu-partition'"), CPX_NODE, 8),
        (amd_all(f"device.attributes['{AMD}'].type == 'amdgpu'"), CPX_NODE, 1),
        # Every card partitioned: no node publishes a whole GPU, and All is still counted.
        (amd_all(), {devices_key(AMD, ""): {"count": 64, "gpus": Fraction(8)}}, 8),
        # Nodes that do not say which devices share a GPU: each device is a whole GPU, never fewer.
        (amd_all(), {devices_key(AMD, "amdgpu"): {"count": 1}, devices_key(AMD, ""): {"count": 64}}, 64),
    ],
)
def test_all_on_amd_takes_every_device_the_driver_publishes_partitions_as_their_gpu(spec, objects, expected):
    maps, catalogue = AMD_CTX.dialects.maps, AMD_CTX.dialects.catalogue
    claims = read_pod_claims(pod(from_template()), {"t": template(spec), **objects}.get, maps, catalogue)
    assert not claims.uncountable
    assert claims.own().equivalents == expected


def test_all_with_no_type_is_not_said_as_whole_amd_gpus_where_nodes_publish_partitions():
    maps, catalogue = AMD_CTX.dialects.maps, AMD_CTX.dialects.catalogue
    found = {"t": template(amd_all()), **CPX_NODE}
    (reading,), _ = read_claim_requests(amd_all(), maps, catalogue, found.get)
    assert "partitions as well as whole GPUs" in reading.inexact


# A class standing for a MIG name a map reads, but whose selector lets it give any of the driver's devices.
LOOSE = device_class("loose.example.com", f"device.driver == '{NV}'", extended="nvidia.com/mig-1g.10gb")
MIG_1G_10GB = device_class(
    "mig-1g-10gb.gpu.nvidia.com",
    f"device.driver == '{NV}' && {ATTR}.type == 'mig' && {ATTR}.profile == '1g.10gb'",
    extended="nvidia.com/mig-1g.10gb",
)


@pytest.mark.parametrize(
    ("device_class_found", "expected"),
    [
        # The scheduler may give 7 GPUs for it: charged 7 GPUs, not 7 slices. No model is pinned, so the
        # name is charged as an A100 40GB's 1g.10gb (1/4 each, 2 of 8 memory slices) and what the class
        # adds beyond the name as its least (an H100's 1/7 each): 7/4 + (7 - 1) never falls below 7.
        (LOOSE, 7 + Fraction(3, 4)),
        # The class gives what the name means, its devices charged as the name unpinned (7/4); the part
        # beyond the name's least meaning (7 × 1/7) is added, never less than either reader gives.
        (MIG_1G_10GB, Fraction(5, 2)),
    ],
)
def test_a_class_standing_for_a_name_a_map_reads_is_charged_by_the_devices_it_allows(
    device_class_found, expected
):
    name = device_class_found["metadata"]["name"]
    found = {
        "ExtendedResources": {"resources": {"nvidia.com/mig-1g.10gb": name}},
        class_key(name): device_class_found,
    }
    demand = read_demand(extended_pod({"nvidia.com/mig-1g.10gb": "7"}), DRA.dialects, found.get)
    assert not demand.claims.uncountable
    assert pod_use(demand, DRA.target, CATALOGUE).equivalents == expected


def test_an_unlisted_class_list_leaves_no_name_a_map_does_not_read_free():
    unread = {"ExtendedResources": {"resources": {}, "unread": "gpuport could not list the DeviceClasses"}}
    # A name with no GPU word in it: only a class could say it gives GPUs, and none could be read.
    demand = read_demand(extended_pod({"example.com/accelerator": "8"}), DRA.dialects, unread.get)
    (said,) = demand.claims.uncountable
    assert said == (
        'containers[0] "main" example.com/accelerator: gpuport could not list the DeviceClasses, so gpuport '
        "cannot tell which devices it gives"
    )
    gate = QuotaGate(View(8), Ledger(), templates=Objects(unread))
    refused = gate.admit(parsed(review_of(extended_pod({"example.com/accelerator": "8"}))), DRA, demand)
    assert refused.reason == "quota-claims-uncountable"
    # A name a map reads is counted as its ask; cpu and memory are not GPUs at all.
    known = read_demand(extended_pod({"nvidia.com/gpu": "1", "cpu": "2"}), DRA.dialects, unread.get)
    assert not known.claims.uncountable
