"""DRA claims → device-plugin asks: what is read exactly, what is refused with the expression quoted,
and the round trip (a pod sent to a DRA cluster and back asks for what it asked for)."""

import contextlib
import copy
import re

import jsonpatch
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import context, parsed, review_of
from tests.translation_cases import SOURCES, summarize
from webhook.core.asks.claims import UnreadableClaim, read_claim, read_claim_requests
from webhook.core.asks.demand import read_demand
from webhook.core.deciding import pipeline
from webhook.core.deciding.admission import decide_template, rewrite_pod
from webhook.core.deciding.decision_key import decision_key
from webhook.core.rewriting.translate import Untranslatable
from webhook.core.vocabulary.catalogue import MigProfile
from webhook.core.vocabulary.workloads import read_pod

DRA = context("dra-nvidia")
MAPS, CATALOGUE = DRA.dialects.maps, DRA.dialects.catalogue
PRODUCT = "device.attributes['gpu.nvidia.com'].productName"


def claim(*selectors, device_class="gpu.nvidia.com", count=2, **extra):
    request = {"name": "gpu", "deviceClassName": device_class, "count": count, **extra}
    if selectors:
        request["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"devices": {"requests": [request]}}


def read(spec):
    (devices,) = read_claim(spec, MAPS, CATALOGUE)
    return devices


@pytest.mark.parametrize(
    "expression",
    [
        f"{PRODUCT} == 'NVIDIA A100-SXM4-80GB'",
        'device.attributes["gpu.nvidia.com"].productName == "NVIDIA A100-SXM4-80GB"',
        f"{PRODUCT} in ['NVIDIA A100-SXM4-80GB', 'NVIDIA A100 80GB PCIe']",
        f"device.driver == 'gpu.nvidia.com' && ({PRODUCT} == 'NVIDIA A100-SXM4-80GB')",
        f"device.attributes['gpu.nvidia.com'].type == 'gpu' && {PRODUCT} == 'NVIDIA A100-SXM4-80GB'",
    ],
)
def test_the_forms_drivers_samples_use_are_read_exactly(expression):
    devices = read(claim(expression))
    assert (devices.kind, devices.count, devices.models) == ("whole", 2, frozenset({"A100-80GB"}))


def test_a_memory_bound_is_answered_with_nvml_s_figures_so_80gi_does_not_select_an_h100_80gb():
    # The driver publishes NVML's total in bytes: an H100 80GB has 81,559 MiB, less than 80 GiB (81,920
    # MiB); an A100 80GB has exactly 81,920 MiB. The real claim never gets an H100 80GB: neither does
    # its reading.
    bound = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0"
    models = read(claim(bound)).models
    assert {"A100-80GB", "H100-94GB", "H200", "B200"} <= models
    assert not {"H100-80GB", "A100-40GB", "L4", "T4", "A10G"} & models
    strictly = read(claim(bound.replace(">= 0", "> 0"))).models
    assert "A100-80GB" not in strictly and "H200" in strictly
    below = read(claim("device.capacity['gpu.nvidia.com'].memory.isLessThan(quantity('80Gi'))")).models
    assert "H100-80GB" in below and "A100-80GB" not in below
    decimal = read(claim("device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('80G'))")).models
    assert "H100-80GB" in decimal  # 80 GB (10^9 bytes) is 76.3 GiB: an H100 80GB has more


def test_a_mig_request_reads_its_profile_and_the_v1_shape_reads_alike():
    spec = {
        "devices": {
            "requests": [
                {
                    "name": "slice",
                    "exactly": {
                        "deviceClassName": "mig.nvidia.com",
                        "selectors": [
                            {
                                "cel": {
                                    "expression": "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"
                                }
                            }
                        ],
                    },
                }
            ]
        }
    }
    devices = read(spec)
    assert (devices.kind, devices.count, devices.profile, devices.models) == (
        "mig",
        1,
        MigProfile.parse("1g.10gb"),
        None,
    )


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        (claim(f"{PRODUCT}.startsWith('NVIDIA A100')"), "startsWith"),
        (claim(f"{PRODUCT} == 'NVIDIA A100-SXM4-80GB' || {PRODUCT} == 'NVIDIA H100 80GB HBM3'"), "||"),
        (claim("device.attributes['gpu.nvidia.com'].uuid == 'GPU-4404041a'"), "uuid"),
        (claim("device.attributes['example.com'].productName == 'NVIDIA H100 80GB HBM3'"), "example.com"),
        (claim(f"!({PRODUCT}.matches('T4'))"), "!("),
        (
            claim("device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('550.0.0'))"),
            "driver",
        ),
    ],
)
def test_cel_it_cannot_read_exactly_is_refused_with_the_expression_quoted(spec, words):
    with pytest.raises(UnreadableClaim) as info:
        read_claim(spec, MAPS, CATALOGUE)
    expression = spec["devices"]["requests"][0]["selectors"][0]["cel"]["expression"]
    assert repr(expression) in str(info.value) and words in str(info.value)


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        (claim(allocationMode="All"), "every matching device of a node (allocationMode: All)"),
        (
            claim(device_class="gpu.example.com"),
            "device class 'gpu.example.com' is not one a loaded map names",
        ),
        (claim(f"{PRODUCT} == 'NVIDIA Z9000'"), "matches no GPU model gpuport knows"),
        (claim(device_class="mig.nvidia.com"), "asks for any MIG device; device plugins name a profile"),
        (
            claim(
                "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('10Gi')) >= 0",
                device_class="mig.nvidia.com",
            ),
            "a MIG slice is chosen by its profile",
        ),
        ({"devices": {"requests": [{"name": "a", "firstAvailable": []}]}}, "firstAvailable is not a list"),
        (
            {**claim(), "devices": {**claim()["devices"], "constraints": [{"matchAttribute": "x"}]}},
            "constraints",
        ),
        ({**claim(), "devices": {**claim()["devices"], "config": [{"opaque": {}}]}}, "config"),
        (claim(count=0), "count 0"),
    ],
)
def test_claims_without_a_device_plugin_equivalent_are_refused_saying_why(spec, why):
    with pytest.raises(UnreadableClaim, match=re.escape(why)):
        read_claim(spec, MAPS, CATALOGUE)


MEMORY_90GI = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('90Gi')) >= 0"


def _first_available(exact):
    return {"devices": {"requests": [{"name": "gpu", "firstAvailable": [{"name": "big", **exact}]}]}}


@pytest.mark.parametrize(
    "spec",
    [
        # v1 and v1beta2 nest the request under `exactly`; v1beta1 keeps it on the request.
        {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": "gpu.nvidia.com",
                            "capacity": {"requests": {"memory": "90Gi"}},
                        },
                    }
                ]
            }
        },
        claim(count=1, capacity={"requests": {"memory": "90Gi"}}),
        # A name with its domain is the same capacity as the bare name (the driver's domain).
        claim(count=1, capacity={"requests": {"gpu.nvidia.com/memory": "90Gi"}}),
        _first_available({"deviceClassName": "gpu.nvidia.com", "capacity": {"requests": {"memory": "90Gi"}}}),
    ],
    ids=["v1-exactly", "v1beta1", "qualified-name", "firstAvailable"],
)
def test_capacity_requests_are_read_as_the_cel_bound_the_api_says_they_are(spec):
    # KEP-5075: capacity.requests is the filter `device.capacity[<domain>].<name>.compareTo(quantity(
    # <amount>)) >= 0`; dropped, the request would be translated to any GPU.
    as_cel = read(claim(MEMORY_90GI, count=1)).models
    assert as_cel and "H200" in as_cel and "H100-80GB" not in as_cel
    assert read(spec).models == as_cel


def test_a_pod_whose_claim_requests_capacity_is_sent_to_the_gpus_that_have_it():
    def requires(spec):
        pod = dra_pod()
        result = jsonpatch.apply_patch(
            pod, rewritten(pod, context("generic"), {"two": template_of(spec)}.get).patch
        )
        return summarize(result)["requires"]

    by_capacity = requires(claim(count=1, capacity={"requests": {"memory": "90Gi"}}))
    assert by_capacity == requires(claim(MEMORY_90GI, count=1)) and by_capacity


@pytest.mark.parametrize(
    ("capacity", "device_class", "why"),
    [
        ({"requests": {"multiprocessors": "30"}}, "mig.nvidia.com", "capacity.requests multiprocessors: 30"),
        (
            {"requests": {"example.com/memory": "90Gi"}},
            "gpu.nvidia.com",
            "capacity.requests example.com/memory",
        ),
        ({"requests": {"memory": "lots"}}, "gpu.nvidia.com", "capacity.requests memory: lots"),
        ({"requests": "90Gi"}, "gpu.nvidia.com", "capacity"),
        ({"requests": {"memory": "10Gi"}}, "mig.nvidia.com", "capacity.requests memory: 10Gi"),
    ],
)
def test_capacity_requests_that_cannot_be_said_are_refused_naming_the_field(capacity, device_class, why):
    selectors = (
        ("device.attributes['gpu.nvidia.com'].profile == '1g.10gb'",) if device_class[0] == "m" else ()
    )
    with pytest.raises(UnreadableClaim, match=re.escape(why)):
        read_claim(claim(*selectors, device_class=device_class, capacity=capacity), MAPS, CATALOGUE)


def test_a_long_form_profile_the_driver_never_publishes_is_refused_naming_the_form_it_does():
    # The driver's `profile` is go-nvlib's MigProfile.String(): 3g.40gb whenever compute and GPU-instance
    # slices are equal. `3c.3g.40gb` matches no device: the claim never runs on DRA, and must not
    # become nvidia.com/mig-3g.40gb (which would).
    spec = claim("device.attributes['gpu.nvidia.com'].profile == '3c.3g.40gb'", device_class="mig.nvidia.com")
    with pytest.raises(UnreadableClaim) as info:
        read_claim(spec, MAPS, CATALOGUE)
    assert "'3c.3g.40gb' matches no device" in str(info.value) and "publishes it as 3g.40gb" in str(
        info.value
    )
    decided = decide_template(dra_pod(), context("generic"), templates={"two": template_of(spec)}.get)
    assert decided.rewrite is None and "3c.3g.40gb" in " ".join(decided.refusals)


def dra_pod(template_name="two", containers=("main",), claim_names=None):
    claim_names = claim_names or ["gpus"] * len(containers)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "team-a"},
        "spec": {
            "resourceClaims": [
                {"name": n, "resourceClaimTemplateName": template_name} for n in sorted(set(claim_names))
            ],
            "containers": [
                {"name": c, "image": "x", "resources": {"claims": [{"name": n}]}}
                for c, n in zip(containers, claim_names, strict=True)
            ],
        },
    }


def template_of(spec, name="two"):
    return {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": spec},
    }


def rewritten(pod, ctx, lookup):
    """The pod's rewrite as every caller reaches it (checks, claims read through `lookup`)."""
    decided = decide_template(pod, ctx, templates=lookup)
    assert decided.rewrite is not None, decided.refusals
    return decided.rewrite


def test_a_dra_pod_gets_the_target_s_resources_and_its_claims_go():
    pod = dra_pod()
    lookup = {"two": template_of(claim(f"{PRODUCT} == 'NVIDIA H100 80GB HBM3'"))}.get
    result = jsonpatch.apply_patch(pod, rewritten(pod, context("generic"), lookup).patch)
    assert "resourceClaims" not in result["spec"]
    assert result["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "2"}}
    assert summarize(result)["requires"] == {
        "nvidia.com/gpu.product": ["NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-PCIe"]
    }


def test_a_claim_two_containers_share_and_an_unreadable_one_are_refused_in_the_pod_s_words():
    shared = dra_pod(containers=("a", "b"), claim_names=["gpus", "gpus"])
    lookup = {"two": template_of(claim())}.get
    demand = read_demand(shared, DRA.dialects, lookup)
    assert demand.claim_problems == (
        'claim gpus is shared by containers[0] "a" and containers[1] "b"; '
        "device plugins cannot share GPUs between containers",
    )
    unreadable = {"two": template_of(claim(f"{PRODUCT}.matches('A100')"))}.get
    (problem,) = read_demand(dra_pod(), DRA.dialects, unreadable).claim_problems
    assert problem.startswith("claim gpus (ResourceClaimTemplate two): cannot read the CEL selector")
    assert f"{PRODUCT}.matches('A100')" in problem


def test_claims_for_devices_no_map_names_are_not_gpu_asks():
    nic = {"two": template_of(claim(device_class="nic.example.com"))}.get
    assert read_demand(dra_pod(), DRA.dialects, nic).asks == ()
    assert read_demand(dra_pod(), DRA.dialects, None).asks == ()  # no templates known: nothing read


def test_a_pod_with_claims_is_never_memoized():
    assert decision_key(parsed(review_of(dra_pod())), None) is None


ROUND_TRIP = ["generic-whole", "gke-whole", "eks-8", "generic-8", "gke-mig", "generic-mig"]


@pytest.mark.parametrize("source", ROUND_TRIP)
@pytest.mark.parametrize("target", ["generic", "eks", "gke", "aks"])
def test_there_and_back_asks_for_what_going_straight_asks_for(source, target):
    original = SOURCES[source][1]
    there = pipeline.decide(parsed(review_of(copy.deepcopy(original))), DRA)
    on_dra = jsonpatch.apply_patch(original, list(there.patch))
    templates = {t["metadata"]["name"]: t for t in there.claim_templates}
    back = rewritten(on_dra, context(target), templates.get)
    straight = pipeline.decide(parsed(review_of(copy.deepcopy(original))), context(target))
    expected = jsonpatch.apply_patch(original, list(straight.patch))
    returned = jsonpatch.apply_patch(on_dra, back.patch)
    assert canonical(returned, target) == canonical(expected, target)
    assert summarize(returned)["resources"] == summarize(expected)["resources"]
    assert "resourceClaims" not in returned["spec"]


def canonical(pod, target):
    """What a pod asks for, in gpuport's own terms (models, not one form factor's product name)."""
    demand = read_demand(pod, context(target).dialects)
    return [(a.kind, a.count, a.profile) for a in demand.asks], demand.selection.models


@settings(max_examples=150, deadline=None)
@given(
    count=st.integers(1, 8),
    models=st.sets(st.sampled_from(sorted(DRA.target.dra.product_names)), min_size=0, max_size=3),
)
def test_every_template_gpuport_writes_reads_back_to_its_ask(count, models):
    from webhook.core.rewriting.dra import claim_template, whole_request

    form = DRA.target.dra
    template = claim_template(form, whole_request(form, count, tuple(sorted(models))))
    devices = read(template["spec"]["spec"])
    assert (devices.kind, devices.count) == ("whole", count)
    assert devices.models == (frozenset(models) if models else None)


def test_an_unreadable_claim_is_refused_on_a_device_plugin_target_and_runs_as_written_on_dra():
    pod = dra_pod()
    expression = f"{PRODUCT}.matches('A100')"
    lookup = {"two": template_of(claim(expression))}.get
    assert expression in "; ".join(decide_template(pod, context("eks"), templates=lookup).refusals)
    assert rewritten(pod, DRA, lookup).patch == []


def test_the_preflight_reads_a_dra_workload_beside_its_template_and_scores_both_directions():
    from webhook.core.migration.preflight import preflight

    template = template_of(claim(f"{PRODUCT} == 'NVIDIA H100 80GB HBM3'", count=4), name="four")
    template["metadata"]["namespace"] = "ml"
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "ml"},
        "spec": {"template": {"spec": dra_pod("four")["spec"]}},
    }
    report = preflight([template, job], DRA.target, context("eks"), None)
    (workload,) = report.workloads
    checks = {c.check: c for c in workload.checks}
    assert workload.translated == [
        "/spec/template: nvidia.com/gpu: 4, node.kubernetes.io/instance-type=p5.48xlarge"
    ]
    assert checks["gpu_model"].compat == 1.0 and "H100-80GB" in checks["gpu_model"].why
    assert checks["topology"].why == "4 GPUs per pod; not checked: no inventory"

    alone = preflight([job], context("eks").target, DRA, None)
    assert alone.workloads == [], "without its template the workload's claims are unknown: not a GPU workload"
    unreadable = template_of(claim(f"{PRODUCT}.matches('H100')"), name="four")
    unreadable["metadata"]["namespace"] = "ml"
    (refused,) = preflight([unreadable, job], DRA.target, context("eks"), None).workloads
    resource_names = next(c for c in refused.checks if c.check == "resource_names")
    assert resource_names.compat == 0.0 and "matches('H100')" in resource_names.why

    gke = SOURCES["gke-8"][1]
    (there,) = preflight([gke], context("gke").target, DRA, None).workloads
    assert there.translated == ["/: claim of 8 × H100-80GB"]


def test_amd_whole_gpus_are_told_from_partitions_by_type_and_named_by_product_name_or_pci_id():
    amd = context("dra-amd")
    maps, catalogue = amd.dialects.maps, amd.dialects.catalogue
    whole = "device.attributes['gpu.amd.com'].type == 'amdgpu'"
    # productName: what every release of AMD's driver publishes; deviceID: the PCI id only from 2026.
    for mi300x in (
        "device.attributes['gpu.amd.com'].productName == 'AMD_Instinct_MI300X_OAM'",
        "device.attributes['gpu.amd.com'].deviceID == '0x74a1'",
    ):
        (devices,) = read_claim(claim(whole, mi300x, device_class="gpu.amd.com"), maps, catalogue)
        assert (devices.kind, devices.vendor, devices.count, devices.models) == (
            "whole",
            "amd",
            2,
            frozenset({"MI300X"}),
        )
    # deviceID as the older releases published it (a KFD unique id) names no model: refused, quoted.
    kfd = "device.attributes['gpu.amd.com'].deviceID == '994913940318892495'"
    with pytest.raises(UnreadableClaim, match="matches no GPU model"):
        read_claim(claim(whole, kfd, device_class="gpu.amd.com"), maps, catalogue)
    partition = "device.attributes['gpu.amd.com'].type == 'amdgpu-partition'"
    with pytest.raises(UnreadableClaim, match="asks for GPU partitions"):
        read_claim(claim(partition, device_class="gpu.amd.com"), maps, catalogue)
    # The class holds both, and AMD's own single-GPU example selects neither: whole GPUs, said.
    readings, _ = read_claim_requests(claim(device_class="gpu.amd.com"), maps, catalogue)
    assert (readings[0].kind, readings[0].inexact) == ("whole", "")
    assert readings[0].note == "request gpu of gpu.amd.com does not select a type: read as whole GPUs"


def test_what_gpuport_writes_for_amd_selects_by_product_name():
    amd = context("dra-amd")
    review = review_of(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ml"},
            "spec": {
                "nodeSelector": {"amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM"},
                "containers": [{"name": "c", "image": "x", "resources": {"limits": {"amd.com/gpu": "1"}}}],
            },
        }
    )
    (template,) = pipeline.decide(parsed(review), amd).claim_templates
    (request,) = template["spec"]["spec"]["devices"]["requests"]
    assert [s["cel"]["expression"] for s in request["exactly"]["selectors"]] == [
        'device.attributes["gpu.amd.com"].type == "amdgpu"',
        'device.attributes["gpu.amd.com"].productName == "AMD_Instinct_MI300X_OAM"',
    ]


def test_gpu_limits_count_a_pod_s_claimed_devices_in_gpu_equivalents():
    from webhook.core.budget.limits import from_annotation, violations

    lookup = {"two": template_of(claim(f"{PRODUCT} == 'NVIDIA H100 80GB HBM3'", count=2))}.get
    demand = read_demand(dra_pod(), DRA.dialects, lookup)
    at_most_one = from_annotation('[{"type": "Pod", "max": 1}]')
    (found,) = violations(dra_pod(), demand, at_most_one, DRA.target, CATALOGUE)
    assert found.startswith("maximum nvidia.com/gpu usage per Pod is 1, but limit is 2")
    slice_lookup = {
        "two": template_of(
            claim(
                "device.attributes['gpu.nvidia.com'].profile == '3g.40gb'",
                device_class="mig.nvidia.com",
                count=1,
            )
        )
    }.get
    sliced = read_demand(dra_pod(), DRA.dialects, slice_lookup)
    assert violations(dra_pod(), sliced, at_most_one, DRA.target, CATALOGUE) == []  # 3/7 of a GPU


def test_a_claim_made_ahead_counts_for_quota_but_is_never_turned_into_a_device_plugin_ask():
    pod = dra_pod()
    pod["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimName": "team-gpus"}]
    made_ahead = {"ResourceClaim/team-gpus": template_of(claim(f"{PRODUCT} == 'NVIDIA H100 80GB HBM3'"))}
    demand = read_demand(pod, DRA.dialects, made_ahead.get)
    assert [(a.kind, a.count, a.claim) for a in demand.asks] == [("whole", 2, "gpus")]
    (problem,) = demand.claim_problems
    assert problem.startswith("claim gpus is ResourceClaim team-gpus, made ahead and possibly shared")
    assert decide_template(pod, context("generic"), templates=made_ahead.get).refusals == [problem]
    assert read_demand(pod, DRA.dialects, {}.get).claims.uncountable == (
        "claim gpus (ResourceClaim team-gpus): it could not be read (create it before the pod, or retry)",
    )


JUNK = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(
    entries=st.one_of(
        JUNK,
        st.lists(
            st.fixed_dictionaries(
                {"name": st.just("gpus")},
                optional={"resourceClaimTemplateName": JUNK, "resourceClaimName": JUNK},
            ),
            max_size=3,
        ),
    ),
    refs=st.one_of(JUNK, st.just([{"name": "gpus"}])),
    template=st.one_of(
        JUNK,
        st.fixed_dictionaries({"spec": st.fixed_dictionaries({"spec": JUNK})}),
        st.just(template_of(claim())),
        # capacity.requests of any shape: read as bounds, refused, never crashed on
        st.builds(
            lambda capacity: template_of(claim(count=1, capacity=capacity)),
            JUNK
            | st.fixed_dictionaries({"requests": st.dictionaries(st.text(max_size=20), JUNK, max_size=3)}),
        ),
    ),
    target=st.sampled_from(["generic", "dra-nvidia", "eks"]),
    asks_by_resource=st.booleans(),
)
def test_claims_of_any_shape_are_decided_without_a_crash(entries, refs, template, target, asks_by_resource):
    pod = dra_pod()
    pod["spec"]["resourceClaims"] = entries
    pod["spec"]["containers"][0]["resources"]["claims"] = refs
    if asks_by_resource:  # and to DRA: claims are added beside whatever is there
        pod["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "1"}
    lookup = lambda name: template if isinstance(template, dict) else None  # noqa: E731
    ctx = context(target)
    decided = decide_template(pod, ctx, templates=lookup)
    assert (decided.rewrite is None) is bool(decided.refusals)  # a refusal with reasons is an answer
    # The rewrite itself, on shapes the checks would refuse first as well.
    read = read_pod(pod)
    with contextlib.suppress(Untranslatable):
        rewrite_pod(read, ctx, read_demand(read, ctx.dialects, ctx.claim_objects(lookup)))


def test_translate_and_preflight_read_claims_made_ahead_beside_the_workload_alike():
    from webhook.core.asks.pod_claims import NOT_BESIDE, ClaimsBeside
    from webhook.core.migration.preflight import preflight

    made_ahead = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceClaim",
        "metadata": {"name": "team-gpus", "namespace": "ml"},
        "spec": claim(f"{PRODUCT} == 'NVIDIA H100 80GB HBM3'"),
    }
    template = template_of(claim(count=1), name="one")
    template["metadata"]["namespace"] = "ml"
    beside = ClaimsBeside([made_ahead, template, {"kind": "Pod"}])
    assert beside.lookup("ml")("ResourceClaim/team-gpus") == {"spec": {"spec": made_ahead["spec"]}}
    assert beside.lookup("ml")("one") is template
    # Not among the files for that namespace: an answer saying which file to pass, never a guess.
    assert beside.lookup("other")("one") == NOT_BESIDE and "not in the files given" in NOT_BESIDE["unread"]
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "ml"},
        "spec": {"template": {"spec": dra_pod()["spec"]}},
    }
    job["spec"]["template"]["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimName": "team-gpus"}]
    (workload,) = preflight([made_ahead, job], DRA.target, context("eks"), None).workloads
    resource_names = next(c for c in workload.checks if c.check == "resource_names")
    assert resource_names.compat == 0.0 and "made ahead and possibly shared" in resource_names.why
