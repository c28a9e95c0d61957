"""Device-plugin asks → DRA claims: the templates, the pod edits, the map's `dra` section, the step that
creates templates, and the offline printer. Expectations are written from the NVIDIA DRA driver's
published names (gpu.nvidia.com, mig.nvidia.com, productName, profile), never computed."""

import copy
from dataclasses import replace
from decimal import Decimal

import jsonpatch
import pytest
import yaml

from tests.helpers import context, parsed, pod_with_resources, review_of
from tests.translation_cases import pod
from webhook.adapters.files.offline import dump_documents, load_documents, translate_documents
from webhook.config.cloudmap import CloudMapError, default_directory, load_directory, parse_cloud_map
from webhook.core.asks.demand import read_demand
from webhook.core.deciding import pipeline
from webhook.core.rewriting.dra import claim_name, claim_template, whole_request

DRA = context("dra-nvidia")
FORM = DRA.target.dra
GKE_A100_80 = {"cloud.google.com/gke-accelerator": "nvidia-a100-80gb"}
A100_80_NAMES = (
    'device.attributes["gpu.nvidia.com"].productName in ["NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB PCIe"]'
)


def decide(obj, ctx=DRA, **kw):
    return pipeline.decide(parsed(review_of(obj, **kw)), ctx)


def after(obj, decision):
    assert decision.allowed, decision.message
    return jsonpatch.apply_patch(obj, list(decision.patch))


def request_of(template):
    """The template's one request, its class, count and selectors read alike in every API version."""
    (request,) = template["spec"]["spec"]["devices"]["requests"]
    return {**request, **request.get("exactly", {})}


def test_the_template_is_the_v1_shape_where_no_api_server_says_otherwise_and_named_by_its_content():
    # The shipped map says `api_version: auto`; with no API server to ask (tests, translate), v1.
    template = claim_template(FORM, whole_request(FORM, 2, ("A100-80GB",)))
    assert template["apiVersion"] == "resource.k8s.io/v1"
    assert template["spec"] == {
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": "gpu.nvidia.com",
                            "allocationMode": "ExactCount",
                            "count": 2,
                            "selectors": [{"cel": {"expression": A100_80_NAMES}}],
                        },
                    }
                ]
            }
        }
    }
    same = claim_template(FORM, whole_request(FORM, 2, ("A100-80GB",)))
    three = claim_template(FORM, whole_request(FORM, 3, ("A100-80GB",)))
    assert same["metadata"]["name"] == template["metadata"]["name"]
    assert three["metadata"]["name"] != template["metadata"]["name"]
    assert template["metadata"]["name"].startswith("gpuport-gpu-")


def test_a_v1beta1_cluster_gets_the_flat_shape_v1beta2_nests_and_each_is_named_apart():
    beta1 = replace(FORM, api_version="resource.k8s.io/v1beta1")
    template = claim_template(beta1, whole_request(beta1, 1, ()))
    assert template["apiVersion"] == "resource.k8s.io/v1beta1"
    assert template["spec"]["spec"]["devices"]["requests"] == [
        {"name": "gpu", "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1}
    ]
    beta2 = replace(FORM, api_version="resource.k8s.io/v1beta2")
    nested = claim_template(beta2, whole_request(beta2, 1, ()))
    assert nested["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 1
    v1 = claim_template(FORM, whole_request(FORM, 1, ()))
    assert len({t["metadata"]["name"] for t in (template, nested, v1)}) == 3


def test_a_gke_pod_gets_a_claim_its_gpus_gone_and_nothing_else_lost():
    source = pod({"nvidia.com/gpu": "2", "cpu": "8"}, GKE_A100_80)
    source["spec"]["containers"][0]["resources"]["requests"]["memory"] = "64Gi"
    decision = decide(source)
    result = after(source, decision)
    (template,) = decision.claim_templates
    container = result["spec"]["containers"][0]
    assert container["resources"] == {
        "limits": {"cpu": "8"},
        "requests": {"cpu": "8", "memory": "64Gi"},
        "claims": [{"name": "gpuport-main"}],
    }
    assert result["spec"]["resourceClaims"] == [
        {"name": "gpuport-main", "resourceClaimTemplateName": template["metadata"]["name"]}
    ]
    assert "nodeSelector" not in result["spec"]
    assert template["metadata"]["annotations"] == {"gpuport.io/asks": "2 × A100-80GB"}
    assert any("→ claim gpuport-main (2 × A100-80GB)" in w for w in decision.warnings)
    assert decide(result).patch == (), "a translated pod is left alone the second time"


def test_two_containers_asking_alike_get_two_claims_from_one_template():
    source = pod_with_resources({"limits": {"nvidia.com/gpu": "1"}}, {"limits": {"nvidia.com/gpu": "1"}})
    decision = decide(source)
    result = after(source, decision)
    assert len(decision.claim_templates) == 1
    name = decision.claim_templates[0]["metadata"]["name"]
    assert result["spec"]["resourceClaims"] == [
        {"name": "gpuport-c0", "resourceClaimTemplateName": name},
        {"name": "gpuport-c1", "resourceClaimTemplateName": name},
    ]
    assert [c["resources"]["claims"] for c in result["spec"]["containers"]] == [
        [{"name": "gpuport-c0"}],
        [{"name": "gpuport-c1"}],
    ]


def test_an_init_container_holds_its_devices_in_the_app_s_claim_and_existing_claims_are_kept_apart():
    source = pod_with_resources(
        {"limits": {"nvidia.com/gpu": "1"}}, init=({"limits": {"nvidia.com/gpu": "2"}},)
    )
    source["spec"]["resourceClaims"] = [{"name": "scratch", "resourceClaimName": "shared-nic"}]
    source["spec"]["containers"][0]["resources"]["claims"] = [{"name": "scratch"}]
    decision = decide(source)
    result = after(source, decision)
    (template,) = decision.claim_templates
    assert [(r["name"], r["exactly"]["count"]) for r in template["spec"]["spec"]["devices"]["requests"]] == [
        ("c0", 1),
        ("init", 1),
    ]
    assert [c["name"] for c in result["spec"]["resourceClaims"]] == ["scratch", "gpuport-c0"]
    assert result["spec"]["containers"][0]["resources"]["claims"] == [
        {"name": "scratch"},
        {"name": "gpuport-c0", "request": "c0"},
    ]
    assert result["spec"]["initContainers"][0]["resources"]["claims"] == [{"name": "gpuport-c0"}]


def test_claims_written_as_a_map_are_said_not_replaced():
    # One claim reference not in a list: replacing it would lose it without a word.
    source = pod_with_resources({"limits": {"nvidia.com/gpu": "1"}, "claims": {"name": "scratch"}})
    decision = decide(source)
    assert not decision.allowed
    assert decision.message.endswith("cannot edit the pod: claims is a map; Kubernetes reads a list there")


def test_a_claim_name_stays_a_dns_label():
    assert claim_name("containers", 3, "x" * 60) == "gpuport-c3"
    assert claim_name("initContainers", 0, "setup") == "gpuport-setup"
    assert claim_name("initContainers", 1, "?") == "gpuport-init1"


def test_a_mig_ask_pins_the_profile_and_the_model_it_was_written_for():
    source = pod({"nvidia.com/mig-3g.40gb": "1"}, {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"})
    (template,) = decide(source).claim_templates
    request = request_of(template)
    assert request["deviceClassName"] == "mig.nvidia.com"
    assert [s["cel"]["expression"] for s in request["selectors"]] == [
        'device.attributes["gpu.nvidia.com"].profile == "3g.40gb"',
        A100_80_NAMES,
    ]


def test_an_unpinned_mig_ask_may_be_cut_from_any_gpu():
    (template,) = decide(pod({"nvidia.com/mig-1g.10gb": "2"})).claim_templates
    request = request_of(template)
    assert request["count"] == 2
    assert [s["cel"]["expression"] for s in request["selectors"]] == [
        'device.attributes["gpu.nvidia.com"].profile == "1g.10gb"'
    ]


def test_shared_and_fractional_asks_are_refused_with_what_the_cluster_offers():
    shared = decide(pod({"nvidia.com/gpu.shared": "1"}))
    assert not shared.allowed
    offers = "whole GPUs (device class gpu.nvidia.com); MIG slices (device class mig.nvidia.com)"
    assert f"dra-nvidia offers: {offers}" in shared.message
    assert not decide(pod({"nvidia.com/gpu": "0.5"})).allowed


def test_a_map_without_a_mig_class_says_so():
    no_mig = replace(DRA, target=replace(DRA.target, dra=replace(FORM, mig_class="")))
    decision = decide(pod({"nvidia.com/mig-1g.10gb": "1"}), no_mig)
    assert not decision.allowed
    assert "dra-nvidia has no device class for MIG slices" in decision.message


class Recording:
    def __init__(self, problem=None):
        self.calls, self.problem = [], problem

    def ensure(self, namespace, templates):
        self.calls.append((namespace, [t["metadata"]["name"] for t in templates]))
        return self.problem

    def referenced(self, namespace, pod):
        return {}.get  # a cluster with no claim objects and no class standing for a name

    def charged_uids(self, namespace, names, context):
        return {}  # a namespace without a GPU budget: nothing recorded


def test_the_pipeline_creates_templates_before_admitting_and_never_on_a_dry_run():
    review = parsed(review_of(pod({"nvidia.com/gpu": "1"}, GKE_A100_80)))
    writer = Recording()
    decision = pipeline.mutate(review, DRA, pipeline.NO_GATES, None, writer)
    assert decision.allowed
    assert writer.calls == [("team-a", [decision.claim_templates[0]["metadata"]["name"]])]

    dry = parsed(review_of(pod({"nvidia.com/gpu": "1"}, GKE_A100_80), dry_run=True))
    writer = Recording()
    assert pipeline.mutate(dry, DRA, pipeline.NO_GATES, None, writer).allowed
    assert writer.calls == []


def test_a_template_that_cannot_be_made_denies_the_pod_with_the_reason():
    review = parsed(review_of(pod({"nvidia.com/gpu": "1"})))
    refused = pipeline.mutate(
        review, DRA, pipeline.NO_GATES, None, Recording("gpuport could not create X: 403 Forbidden")
    )
    assert not refused.allowed and refused.message == "gpuport could not create X: 403 Forbidden"
    blind = pipeline.mutate(review, DRA, pipeline.NO_GATES, None, None)
    assert not blind.allowed
    assert "gpuport has no cluster access to create the ResourceClaimTemplate" in blind.message


def test_a_memo_hit_still_makes_sure_the_template_exists():
    from webhook.adapters.http.memo import DecisionMemo

    memo, writer = DecisionMemo(), Recording()
    for uid in ("a", "b"):
        review = parsed(review_of(pod({"nvidia.com/gpu": "1"}), uid=uid))
        assert pipeline.mutate(review, DRA, pipeline.NO_GATES, memo, writer).allowed
    assert len(writer.calls) == 2


def test_the_dra_section_of_a_map_is_checked_with_file_and_line():
    catalogue = load_directory(default_directory()).catalogue
    text = (default_directory() / "dra-nvidia.yaml").read_text()
    with pytest.raises(CloudMapError) as info:
        parse_cloud_map(text.replace("    A10: [", "    A11: ["), "cloudmaps/dra.yaml", catalogue)
    assert info.value.problem.startswith("unknown GPU model 'A11'")
    assert text.splitlines()[info.value.line - 1].startswith("    A10: [")
    with pytest.raises(CloudMapError) as info:
        parse_cloud_map(
            text.replace("api_version: auto", "api_version: resource.k8s.io/v2"), "d.yaml", catalogue
        )
    assert "resource.k8s.io/v2" in str(info.value)
    quoted = text.replace('T4: ["Tesla T4"]', 'T4: ["Tesla T4\\" || true"]')
    with pytest.raises(CloudMapError):  # no quote can reach a CEL expression
        parse_cloud_map(quoted, "d.yaml", catalogue)


def test_the_cli_prints_each_template_once_in_the_workload_s_namespace():
    text = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: trainer  # two replicas, one template
  namespace: ml
spec:
  template:
    spec:
      nodeSelector:
        cloud.google.com/gke-accelerator: nvidia-a100-80gb
      containers:
        - name: trainer
          image: train:1
          resources:
            limits:
              nvidia.com/gpu: 2
---
apiVersion: batch/v1
kind: Job
metadata:
  name: eval
  namespace: ml
spec:
  template:
    spec:
      nodeSelector:
        cloud.google.com/gke-accelerator: nvidia-a100-80gb
      containers:
        - name: eval
          image: eval:1
          resources:
            limits:
              nvidia.com/gpu: 2
"""
    manifest = load_documents(text, "in.yaml")
    translate_documents(manifest, DRA)
    out = dump_documents(manifest)
    assert "# two replicas, one template" in out
    documents = list(yaml.safe_load_all(out))
    assert [d["kind"] for d in documents] == ["Deployment", "Job", "ResourceClaimTemplate"]
    template = documents[2]
    assert template["metadata"]["namespace"] == "ml"
    assert template["metadata"]["annotations"]["gpuport.io/asks"] == "2 × A100-80GB"
    for workload in documents[:2]:
        claims = workload["spec"]["template"]["spec"]["resourceClaims"]
        assert claims[0]["resourceClaimTemplateName"] == template["metadata"]["name"]


class FakeTemplatesApi:
    """The two calls ClaimTemplateStore makes, against a dict of stored templates."""

    def __init__(self, failure=None):
        self.stored, self.creates, self.failure = {}, 0, failure

    def create_namespaced_custom_object(self, group, version, namespace, plural, body, _request_timeout):
        from kubernetes.client.exceptions import ApiException

        self.creates += 1
        if self.failure:
            raise self.failure
        key = (namespace, body["metadata"]["name"])
        if key in self.stored:
            raise ApiException(status=409, reason="Conflict")
        self.stored[key] = body

    def get_namespaced_custom_object(self, group, version, namespace, plural, name, _request_timeout, **_):
        from kubernetes.client.exceptions import ApiException

        self.gets = getattr(self, "gets", 0) + 1
        if (namespace, name) not in self.stored:
            raise ApiException(status=404, reason="Not Found")
        found = self.stored[(namespace, name)]
        # The API server fills in defaults: what gpuport wrote must still be found inside.
        return {**found, "spec": {"spec": {**found["spec"]["spec"], "extra": "defaulted"}}}


def writer_with(api, clock):
    from webhook.adapters.kube.claim_templates import ClaimTemplateStore

    writer = ClaimTemplateStore(None, "resource.k8s.io/v1beta1", clock=clock)
    writer.api = api
    return writer


def test_the_writer_creates_once_trusts_its_memory_a_minute_then_checks_again():
    now = [0.0]
    api = FakeTemplatesApi()
    writer = writer_with(api, lambda: now[0])
    (template,) = decide(pod({"nvidia.com/gpu": "1"})).claim_templates
    assert writer.ensure("team-a", [template]) is None
    assert writer.ensure("team-a", [template]) is None
    assert api.creates == 1
    now[0] = 61.0
    assert writer.ensure("team-a", [template]) is None  # exists already, with this content: fine
    assert api.creates == 2
    assert writer.ensure("team-b", [template]) is None and api.creates == 3


def test_the_writer_refuses_a_forged_template_and_names_an_unreachable_api():
    from kubernetes.client.exceptions import ApiException

    (template,) = decide(pod({"nvidia.com/gpu": "1"})).claim_templates
    name = template["metadata"]["name"]
    api = FakeTemplatesApi()
    api.stored[("team-a", name)] = {**template, "spec": {"spec": {"devices": {"requests": []}}}}
    problem = writer_with(api, lambda: 0.0).ensure("team-a", [template])
    assert problem == (
        f"ResourceClaimTemplate team-a/{name} exists with content gpuport did not write; "
        "delete it or rename it"
    )
    forbidden = writer_with(FakeTemplatesApi(ApiException(status=403, reason="Forbidden")), lambda: 0.0)
    assert (
        forbidden.ensure("team-a", [template])
        == f"gpuport could not create ResourceClaimTemplate team-a/{name}: 403 Forbidden"
    )
    down = writer_with(FakeTemplatesApi(ConnectionRefusedError()), lambda: 0.0)
    assert down.ensure("team-a", [template]).endswith(": ConnectionRefusedError")


def test_the_safety_net_policy_of_a_dra_cluster_refuses_every_gpu_resource():
    from webhook.config.policy import foreign_names

    maps = DRA.dialects.maps
    names = foreign_names(DRA.target, maps)
    assert {"nvidia.com/gpu", "nvidia.com/gpu.shared", "aliyun.com/gpu-mem", "amd.com/gpu"} <= set(names)
    assert "nvidia.com/gpu" not in foreign_names(context("generic").target, maps)


def test_the_store_reads_a_pod_s_templates_again_for_every_pod_and_says_which_it_could_not():
    now = [0.0]
    api = FakeTemplatesApi()
    store = writer_with(api, lambda: now[0])
    (template,) = decide(pod({"nvidia.com/gpu": "1"})).claim_templates
    name = template["metadata"]["name"]
    api.stored[("team-a", name)] = template
    user_pod = {
        "spec": {
            "resourceClaims": [
                {"name": "a", "resourceClaimTemplateName": name},
                {"name": "b", "resourceClaimTemplateName": "gone"},
            ]
        }
    }
    lookup = store.referenced("team-a", user_pod)
    assert lookup(name)["spec"]["spec"]["devices"] == template["spec"]["spec"]["devices"]
    assert lookup("gone") is None
    # A template may be deleted and made again under its name at any moment: never remembered.
    store.referenced("team-a", user_pod)
    assert api.gets == 4


def test_a_template_read_as_missing_is_still_created_when_a_pod_needs_it():
    # A dry run's /validate looked for the template (404) just before the real create asks for it.
    api = FakeTemplatesApi()
    store = writer_with(api, lambda: 0.0)
    (template,) = decide(pod({"nvidia.com/gpu": "1"})).claim_templates
    name = template["metadata"]["name"]
    claims = {"spec": {"resourceClaims": [{"name": "a", "resourceClaimTemplateName": name}]}}
    assert store.referenced("team-a", claims)(name) is None
    assert store.ensure("team-a", [template]) is None
    assert ("team-a", name) in api.stored
    assert store.referenced("team-a", claims)(name) is not None


def test_quota_refuses_a_pod_whose_claims_it_cannot_read_but_not_its_dry_run_of_gpuport_s_own():
    from webhook.adapters.kube.quota_gate import QuotaGate
    from webhook.core.budget.quota import Quota

    class View:
        def has_synced(self, *names):
            return True

        def quotas_in(self, namespace):
            return [Quota("gpus", {"requests.nvidia.com/gpu": Decimal(4)})]

    def user_pod(claim):
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "team-a"},
            "spec": {
                "resourceClaims": [{"name": claim, "resourceClaimTemplateName": "gone"}],
                "containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": claim}]}}],
            },
        }

    gate = QuotaGate(View(), ledger=None)
    demand = read_demand(user_pod("a"), DRA.dialects, {}.get)
    assert demand.asks == () and demand.claims.uncountable == (
        "claim a (ResourceClaimTemplate gone): it could not be read (create it before the pod, or retry)",
    )
    for dry_run in (False, True):  # a user's own template: the dry run is refused too
        refused = gate.admit(parsed(review_of(user_pod("a"), dry_run=dry_run)), DRA, demand)
        assert refused is not None and not refused.allowed
        assert "cannot count this pod's claims against the GPU quota of team-a: claim a" in refused.message
    # A translated pod's dry run names the template gpuport would have made, had it not been a dry run.
    translated = read_demand(user_pod("gpuport-c"), DRA.dialects, {}.get)
    assert gate.admit(parsed(review_of(user_pod("gpuport-c"), dry_run=True)), DRA, translated) is None
    assert gate.admit(parsed(review_of(user_pod("gpuport-c"))), DRA, translated) is not None


def test_init_containers_and_the_app_hold_what_a_device_plugin_gives_never_the_sum():
    # A device plugin hands an init container's GPUs on to the app containers: the pod holds
    # max(largest init, sum of the apps). Init 1 and 4, app 2 → one claim of 4 devices: the app's own
    # request of 2 and 2 more for the init containers, which use the claim whole.
    source = pod_with_resources(
        {"limits": {"nvidia.com/gpu": "2"}},
        init=({"limits": {"nvidia.com/gpu": "1"}}, {"limits": {"nvidia.com/gpu": "4"}}),
    )
    decision = decide(source)
    result = after(source, decision)
    (template,) = decision.claim_templates
    requests = template["spec"]["spec"]["devices"]["requests"]
    assert [(r["name"], r["exactly"]["count"]) for r in requests] == [("c0", 2), ("init", 2)]
    assert [c["name"] for c in result["spec"]["resourceClaims"]] == ["gpuport-c0"]
    assert [c["resources"]["claims"] for c in result["spec"]["initContainers"]] == [
        [{"name": "gpuport-c0"}]
    ] * 2
    assert result["spec"]["containers"][0]["resources"]["claims"] == [{"name": "gpuport-c0", "request": "c0"}]
    init_words = "→ claim gpuport-c0 (all 4 × any GPU, 2 of them the app's after it)"
    assert list(decision.warnings[:3]) == [
        f"gpuport: initContainers[0] nvidia.com/gpu: 1 {init_words}",
        f"gpuport: initContainers[1] nvidia.com/gpu: 4 {init_words}",
        "gpuport: containers[0] nvidia.com/gpu: 2 → claim gpuport-c0 (2 × any GPU, request c0)",
    ]
    # Read back, the pod holds 4, as DRA allocates it and as the device plugin would have.
    claimed = read_demand(
        result, DRA.dialects, {t["metadata"]["name"]: t for t in decision.claim_templates}.get
    )
    assert claimed.claims.own().equivalents == 4

    # A sidecar runs beside the others: it keeps a claim of its own.
    sidecar = copy.deepcopy(source)
    sidecar["spec"]["initContainers"][0]["restartPolicy"] = "Always"
    running = after(sidecar, decide(sidecar))
    assert {c["name"] for c in running["spec"]["resourceClaims"]} == {"gpuport-c0", "gpuport-init0"}

    # Read back for a device-plugin cluster: every container asks for what it is given (the init
    # containers the whole claim: 4); the pod still holds at most 4 at once.
    templates = {t["metadata"]["name"]: t for t in decision.claim_templates}
    from webhook.core.deciding.admission import decide_template

    rewrite = decide_template(result, context("generic"), templates=templates.get).rewrite
    assert rewrite is not None
    back = jsonpatch.apply_patch(result, rewrite.patch)
    assert [c["resources"]["limits"] for c in back["spec"]["initContainers"]] == [
        {"nvidia.com/gpu": "4"},
        {"nvidia.com/gpu": "4"},
    ]
    assert back["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "2"}


def test_init_containers_alone_share_one_claim_as_large_as_the_largest():
    source = pod_with_resources(
        {"limits": {"cpu": "1"}},
        init=({"limits": {"nvidia.com/gpu": "1"}}, {"limits": {"nvidia.com/gpu": "3"}}),
    )
    decision = decide(source)
    (template,) = decision.claim_templates
    assert [(r["name"], r["exactly"]["count"]) for r in template["spec"]["spec"]["devices"]["requests"]] == [
        ("gpu", 3)
    ]
    result = after(source, decision)
    assert [c["name"] for c in result["spec"]["resourceClaims"]] == ["gpuport-init0"]


def test_a_model_the_pod_refuses_stays_refused_and_every_other_gpu_stays_acceptable():
    # HAMi's nouse-gputype: T4 means "not a T4", not "one of the 25 models the catalogue knows": an L40
    # or a B300 the maps do not list must still do.
    source = pod({"nvidia.com/gpu": "1"})
    source["metadata"]["annotations"] = {"nvidia.com/nouse-gputype": "T4"}
    source["spec"]["schedulerName"] = "hami-scheduler"
    (template,) = decide(source).claim_templates
    (expression,) = [s["cel"]["expression"] for s in request_of(template)["selectors"]]
    assert expression == '!(device.attributes["gpu.nvidia.com"].productName == "Tesla T4")'
    assert template["metadata"]["annotations"]["gpuport.io/asks"] == "1 × any GPU (not T4)"
    # Read back, the refusal is a refusal again.
    claimed = read_demand(
        after(source, decide(source)), DRA.dialects, {template["metadata"]["name"]: template}.get
    )
    assert claimed.selection.avoid == {"T4"} and claimed.selection.models is None


def test_claim_names_never_collide_so_two_containers_never_share_one_by_accident():
    # A container named c0 and another whose name is too long for a readable claim name (its fallback
    # is gpuport-c0): two claims, not one the two share.
    source = pod_with_resources({"limits": {"nvidia.com/gpu": "1"}})
    source["spec"]["containers"][0]["name"] = "a" * 60
    source["spec"]["containers"].append(
        {"name": "c0", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "2"}}}
    )
    result = after(source, decide(source))
    names = [c["name"] for c in result["spec"]["resourceClaims"]]
    assert len(names) == len(set(names)) == 2
    used = [c["resources"]["claims"][0]["name"] for c in result["spec"]["containers"]]
    assert used[0] != used[1]
