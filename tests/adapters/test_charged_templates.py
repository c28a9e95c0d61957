"""A pod's claim templates are charged by the uid /mutate records on it (issue 45: a template deleted and
made again larger between gpuport's admission read and the pod being stored passed both the quota and
the claim gate, and the pod got the larger claim charged the smaller): /validate charges the template of
that uid (a remembered copy, no read), the claim gate lets the pod's claim come only from it, and a
value forged at create is charged exactly what it names, so it gains nothing."""

import copy
import json
from decimal import Decimal

import jsonpatch
from kubernetes.client.exceptions import ApiException

from tests.helpers import context, device_class, parsed, review_of
from tests.quota_fakes import FakeView
from webhook.adapters.kube.claim_gate import ClaimCreateGate
from webhook.adapters.kube.claim_templates import ClaimTemplateStore
from webhook.core.asks.charged_templates import CLAIM_TEMPLATES, recorded_uids
from webhook.core.budget.quota import Quota
from webhook.core.deciding import pipeline
from webhook.core.vocabulary.workloads import read_pod

CTX = context("dra-nvidia")
GPU_QUOTA = Quota("gpus", {"requests.nvidia.com/gpu": Decimal(1)})
V1BETA1 = "resource.k8s.io/v1beta1"
NV = "gpu.nvidia.com"


class View(FakeView):
    def limitranges_in(self, namespace):
        return []

    def namespace(self, namespace):
        return {"labels": {}, "annotations": {}}


def template(uid, count, version="1"):
    request = {"name": "gpu", "deviceClassName": NV, "count": count}
    return {
        "apiVersion": V1BETA1,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one", "namespace": "team-a", "uid": uid, "resourceVersion": version},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }


class Api:
    """The custom-objects calls the store makes: the templates as the API server holds them now."""

    def __init__(self, *templates):
        self.templates = {t["metadata"]["name"]: t for t in templates}
        self.reads = 0

    def get_namespaced_custom_object(self, group, version, namespace, plural, name, _request_timeout, **_):
        self.reads += 1
        if name not in self.templates:
            raise ApiException(status=404, reason="Not Found")
        return copy.deepcopy(self.templates[name])

    def list_cluster_custom_object(self, group, version, plural, **_):
        return {"items": [device_class(NV, f"device.driver == '{NV}'")]}


def store(api, view=None):
    found = ClaimTemplateStore(None, V1BETA1, view=view)
    found.api = api
    return found


def holder(annotations=None, uid="uid-holder"):
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "holder", "namespace": "team-a", "uid": uid, "annotations": annotations or {}},
        "spec": {
            "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "one"}],
            "containers": [{"name": "main", "image": "x", "resources": {"claims": [{"name": "gpus"}]}}],
        },
    }


def mutated(body, templates, view):
    decision = pipeline.mutate(parsed(review_of(body)), CTX, pipeline.NO_GATES, None, templates)
    assert decision.allowed, decision.message
    return jsonpatch.apply_patch(body, list(decision.patch))


def charged(body, templates):
    """What the quota step reads the pod as: its claims' charges, or why they cannot be counted."""
    demand = pipeline.read_pod_demand(read_pod(body), "team-a", CTX, templates, charged=True)
    return demand.claims


def test_mutate_records_the_uid_of_the_template_it_read_where_there_is_a_budget():
    api = Api(template("uid-1", 1))
    templates = store(api, View([GPU_QUOTA]))
    pod = mutated(holder({CLAIM_TEMPLATES: '{"one": "forged"}'}), templates, None)
    assert recorded_uids(pod) == {"one": "uid-1"}  # the value the pod came with replaced
    assert api.reads == 1  # the read the decision made: the uid comes with it
    bare = holder()
    del bare["metadata"]["annotations"]
    assert json.loads(mutated(bare, templates, None)["metadata"]["annotations"][CLAIM_TEMPLATES]) == {
        "one": "uid-1"
    }
    # No GPU budget: nothing is recorded.
    assert (
        CLAIM_TEMPLATES
        not in mutated(holder(), store(Api(template("uid-1", 1)), View()), None)["metadata"]["annotations"]
    )


def test_validate_charges_the_recorded_template_from_memory_without_a_read():
    api = Api(template("uid-1", 1))
    templates = store(api, View([GPU_QUOTA]))
    pod = mutated(holder(), templates, None)
    reads = api.reads
    claims = charged(pod, templates)
    assert api.reads == reads  # the template of that uid was read for mutate: its spec cannot change
    assert [c.use.equivalents for c in claims.charges] == [1] and claims.uncountable == ()


def test_a_template_made_again_after_mutate_is_refused_in_words_or_charged_as_recorded():
    api = Api(template("uid-1", 1))
    pod = mutated(holder(), store(api, View([GPU_QUOTA])), None)
    api.templates["one"] = template("uid-2", 8, version="9")  # deleted and made again, asking 8
    # Another worker or replica, which never read uid-1: it reads the name, finds another uid, says so.
    claims = charged(pod, store(api))
    assert claims.charges == ()
    assert "ResourceClaimTemplate one was deleted and made again" in claims.uncountable[0]
    assert "records uid uid-1; it is uid uid-2 now" in claims.uncountable[0]
    # The worker that read uid-1 charges uid-1 (1 GPU), exactly what it names ...
    remembering = store(api)
    remembering._keep("team-a", "one", template("uid-1", 1))
    assert [c.use.equivalents for c in charged(pod, remembering).charges] == [1]
    # ... and the claim the controller then makes from uid-2 is refused (next test): never 8 for 1.


def claim_from(spec_template, owner_uid="uid-holder"):
    return {
        "apiVersion": V1BETA1,
        "kind": "ResourceClaim",
        "metadata": {
            "name": "holder-gpus-x7k2p",
            "namespace": "team-a",
            "annotations": {"resource.kubernetes.io/pod-claim-name": "gpus"},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": "holder", "uid": owner_uid, "controller": True}
            ],
        },
        "spec": copy.deepcopy(spec_template["spec"]["spec"]),
    }


def claim_review(pod, api):
    view = View([GPU_QUOTA], pods=[dict(pod, firstSeen=100, status={"phase": "Pending"})])
    gate = ClaimCreateGate(view, store(api))
    body = claim_from(api.templates["one"])
    review = review_of(body, kind="ResourceClaim", group="resource.k8s.io", name=body["metadata"]["name"])
    return pipeline.validate(parsed(review), CTX, pipeline.Gates(claim_creates=gate))


def test_the_claim_is_made_only_from_the_template_of_the_recorded_uid():
    # The race: the template made again, larger, after gpuport read it and before the pod was stored,
    # so its resourceVersion (9) is older than the pod's first-seen one (100): only the uid tells.
    api = Api(template("uid-1", 1))
    pod = mutated(holder(), store(api, View([GPU_QUOTA])), None)
    assert claim_review(pod, api).allowed  # the controller's claim from the template charged
    api.templates["one"] = template("uid-2", 8, version="9")
    refused = claim_review(pod, api)
    assert (refused.allowed, refused.reason) == (False, "claim-marked-as-a-pods")
    assert "ResourceClaimTemplate one was deleted and made again" in refused.message
    # Without the record (mutate skipped) the older checks stand alone, as before.
    assert claim_review(holder(), api).allowed


def test_a_value_forged_at_create_is_charged_what_it_names_and_gains_nothing():
    small = template("uid-small", 1)
    api = Api(template("uid-big", 8, version="5"))
    forged = holder({CLAIM_TEMPLATES: json.dumps({"one": "uid-small"})})  # mutate skipped: the user's own
    # A worker that never saw uid-small: the name holds another uid, refused in words.
    assert "was deleted and made again" in charged(forged, store(api)).uncountable[0]
    # A worker that remembers uid-small (read before the owner made the name again) charges 1 GPU ...
    remembering = store(api)
    remembering._keep("team-a", "one", small)
    assert [c.use.equivalents for c in charged(forged, remembering).charges] == [1]
    # ... and the claim the controller makes for the pod comes from uid-big: refused.
    assert claim_review(forged, api).reason == "claim-marked-as-a-pods"
    # A uid no template ever had: refused, and garbage records nothing (the name is read as before).
    assert charged(holder({CLAIM_TEMPLATES: '{"one": "nope"}'}), store(api)).charges == ()
    garbage = charged(holder({CLAIM_TEMPLATES: "[1]"}), store(api))
    assert [c.use.equivalents for c in garbage.charges] == [8]


def test_a_remembered_decision_records_the_uid_the_template_has_now():
    """The record is added after the memo: the next replica of a workload, answered from a remembered
    decision, records the template as it is when that replica is admitted, not as the first one read it."""
    from webhook.adapters.http.memo import DecisionMemo

    now = [0.0]
    api = Api(template("uid-1", 1))
    templates = ClaimTemplateStore(None, V1BETA1, clock=lambda: now[0], view=View([GPU_QUOTA]))
    templates.api = api
    memo = DecisionMemo()

    def replica():
        body = holder()
        body["metadata"] = {"generateName": "holder-", "namespace": "team-a", "annotations": {}}
        decision = pipeline.mutate(parsed(review_of(body)), CTX, pipeline.NO_GATES, memo, templates)
        return recorded_uids(jsonpatch.apply_patch(body, list(decision.patch)))

    assert replica() == {"one": "uid-1"}
    api.templates["one"] = template("uid-2", 8, version="9")
    now[0] += 5  # past the read the first decision made
    assert replica() == {"one": "uid-2"}
