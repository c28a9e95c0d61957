import copy
import dataclasses

import pytest

from tests.helpers import context, fixture, gpu, parsed, pod_with_resources, review_of
from webhook.core.asks.checks import is_extended_resource
from webhook.core.deciding import pipeline


def mutate(obj, ctx, **kw):
    return pipeline.decide(parsed(review_of(obj, **kw)), ctx)


def test_half_gpu_is_denied_with_mig_and_shared_alternatives(generic_context):
    decision = pipeline.decide(
        parsed(fixture("pod-create-fractional-gpu-500m-before-validation.json")), generic_context
    )
    assert not decision.allowed
    assert decision.reason == "fractional-gpu"
    assert decision.message == (
        'Pod "wh-gpu-frac": containers[0] "main": nvidia.com/gpu is 500m (0.5), but GPUs are whole units; '
        "for part of a GPU ask for a MIG slice (nvidia.com/mig-<profile>, e.g. nvidia.com/mig-1g.6gb on A30) "
        "or a shared GPU (nvidia.com/gpu.shared: 1)"
    )


# The API server has written a 0.5 as 500m by the time a webhook sees it (the fixture above was captured
# so): the amount is quoted as the pod gives it, with its decimal beside it where that reads differently.
@pytest.mark.parametrize(
    ("value", "written"),
    [("500m", "500m (0.5)"), ("0.5", "0.5"), ("1.5", "1.5"), ("1500m", "1500m (1.5)"), (0.25, "0.25")],
)
def test_fractional_values_are_shown_as_the_user_wrote_them(generic_context, value, written):
    decision = mutate(pod_with_resources(gpu(value, value)), generic_context)
    assert not decision.allowed
    assert f"nvidia.com/gpu is {written}," in decision.message


def test_fractional_amd_gpu_is_denied_with_this_clusters_alternatives(generic_context):
    decision = mutate(pod_with_resources(gpu("0.25", "0.25", resource="amd.com/gpu")), generic_context)
    assert decision.reason == "fractional-gpu"
    assert 'containers[0] "c0": amd.com/gpu is 0.25, but GPUs are whole units' in decision.message
    assert "nvidia.com/gpu.shared: 1" in decision.message


def test_a_cluster_without_partial_gpus_says_to_ask_for_whole_ones():
    from tests.helpers import context

    decision = mutate(pod_with_resources(gpu("0.5", "0.5", resource="amd.com/gpu")), context("amd"))
    assert decision.message.endswith(
        "this cluster offers no partial GPUs: ask for whole ones (amd.com/gpu: 1)"
    )


def test_on_kai_a_half_gpu_is_told_to_ask_by_kais_annotations():
    from tests.helpers import context

    decision = mutate(pod_with_resources(gpu("0.5", "0.5")), context("kai"))
    assert decision.reason == "fractional-gpu"
    assert decision.message.endswith(
        "or a share of a GPU by pod annotation (gpu-fraction or gpu-memory, with schedulerName kai-scheduler)"
    )


def test_fractional_mig_slice_is_denied(generic_context):
    decision = mutate(
        pod_with_resources(gpu("0.5", "0.5", resource="nvidia.com/mig-1g.10gb")), generic_context
    )
    assert decision.reason == "fractional-gpu"


def test_fractional_unknown_extended_resource_gets_the_plain_rule(generic_context):
    decision = mutate(pod_with_resources(gpu("0.5", "0.5", resource="example.com/widget")), generic_context)
    assert decision.reason == "fractional-extended"
    assert decision.message.endswith(
        "example.com/widget is 0.5, but extended resources must be whole numbers"
    )


def test_fractional_gpu_in_an_init_container_is_denied(generic_context):
    pod = pod_with_resources({}, init=(gpu("0.5", "0.5"),))
    decision = mutate(pod, generic_context)
    assert not decision.allowed
    assert 'initContainers[0] "init0": nvidia.com/gpu is 0.5' in decision.message


@pytest.mark.parametrize(
    ("kind", "group", "wrap"),
    [
        ("Deployment", "apps", lambda spec: {"spec": {"template": {"spec": spec}}}),
        ("StatefulSet", "apps", lambda spec: {"spec": {"template": {"spec": spec}}}),
        ("DaemonSet", "apps", lambda spec: {"spec": {"template": {"spec": spec}}}),
        ("ReplicaSet", "apps", lambda spec: {"spec": {"template": {"spec": spec}}}),
        ("Job", "batch", lambda spec: {"spec": {"template": {"spec": spec}}}),
        ("CronJob", "batch", lambda spec: {"spec": {"jobTemplate": {"spec": {"template": {"spec": spec}}}}}),
    ],
)
def test_fractional_gpu_in_a_workload_template_is_denied_and_never_patched(
    generic_context, kind, group, wrap
):
    spec = pod_with_resources(gpu(limit="0.5"))["spec"]  # templates carry limits only
    obj = {"apiVersion": f"{group}/v1", "kind": kind, "metadata": {"name": "train"}, **wrap(spec)}
    decision = mutate(obj, generic_context, kind=kind, group=group)
    assert not decision.allowed
    assert decision.message.startswith(f'{kind} "train": containers[0] "c0": nvidia.com/gpu is 0.5')
    assert decision.patch == ()
    whole = copy.deepcopy(obj)
    whole_spec = pod_with_resources(gpu(limit="2"))["spec"]
    whole.update(wrap(whole_spec))
    ok = mutate(whole, generic_context, kind=kind, group=group)
    assert ok.allowed and ok.patch == ()


def test_request_different_from_limit_mirrors_the_builtin_wording(generic_context):
    decision = mutate(pod_with_resources(gpu(limit="2", request="1")), generic_context)
    assert decision.reason == "request-limit-mismatch"
    assert decision.message == (
        'Pod "p": containers[0] "c0": requests nvidia.com/gpu "1" must be equal to nvidia.com/gpu limit of 2'
    )


def test_request_without_limit_mirrors_the_builtin_wording(generic_context):
    decision = mutate(pod_with_resources(gpu(request="1")), generic_context)
    assert decision.reason == "missing-limit"
    assert "Limit must be set for non overcommitable resources" in decision.message
    assert 'containers[0] "c0": nvidia.com/gpu is requested (1) without a limit' in decision.message


def test_limit_without_request_is_fine_on_templates(generic_context):
    decision = mutate(pod_with_resources(gpu(limit="1")), generic_context)
    assert decision.allowed


def test_unparseable_quantity_is_denied_not_crashed(generic_context):
    decision = mutate(pod_with_resources(gpu("lots", "lots")), generic_context)
    assert decision.reason == "bad-quantity"
    assert "'lots' is not a quantity" in decision.message


def test_a_fractional_request_is_said_as_fractional_whatever_the_limit(generic_context):
    # Beside a whole limit, and with no limit at all: the fraction is the problem to fix first.
    for resources in (gpu(limit="1", request="500m"), gpu(request="500m")):
        decision = mutate(pod_with_resources(resources), generic_context)
        assert decision.reason == "fractional-gpu"
        said = 'containers[0] "c0": nvidia.com/gpu is 500m (0.5), but GPUs are whole units'
        assert said in decision.message


def test_unparseable_limit_and_request_are_listed_limit_first(generic_context):
    decision = mutate(pod_with_resources(gpu("lots", "heaps")), generic_context)
    assert decision.message == (
        'Pod "p" has 2 problems: (1) containers[0] "c0": limits.nvidia.com/gpu \'lots\' is not a quantity; '
        "(2) containers[0] \"c0\": requests.nvidia.com/gpu 'heaps' is not a quantity"
    )


def test_several_problems_become_one_denial_listing_all(generic_context):
    pod = pod_with_resources(gpu("0.5", "0.5"), gpu(limit="2", request="1"), init=(gpu(request="1"),))
    decision = mutate(pod, generic_context)
    assert not decision.allowed
    assert decision.message.startswith('Pod "p" has 3 problems: (1) initContainers[0] "init0"')
    assert '(2) containers[0] "c0": nvidia.com/gpu is 0.5' in decision.message
    assert '(3) containers[1] "c1": requests nvidia.com/gpu "1" must be equal' in decision.message


def test_whole_gpu_pod_passes_with_an_empty_patch(generic_context):
    decision = pipeline.decide(parsed(fixture("pod-create-gpu-limit-1.json")), generic_context)
    assert decision.allowed
    assert decision.patch == ()


def test_validate_path_runs_the_same_checks_on_the_final_object(generic_context):
    ok = pipeline.validate(parsed(fixture("validate-pod-create-gpu-8.json")), generic_context)
    assert ok.allowed
    frac = pipeline.validate(
        parsed(fixture("pod-create-fractional-gpu-500m-before-validation.json")), generic_context
    )
    assert not frac.allowed and frac.reason == "fractional-gpu"


def test_cpu_and_memory_fractions_are_not_our_business(generic_context):
    decision = mutate(pod_with_resources({"limits": {"cpu": "500m", "memory": "1.5Gi"}}), generic_context)
    assert decision.allowed


@pytest.mark.parametrize(
    ("name", "extended"),
    [
        ("nvidia.com/gpu", True),
        ("amd.com/gpu", True),
        ("cpu", False),
        ("hugepages-2Mi", False),
        ("kubernetes.io/foo", False),
        ("example.kubernetes.io/foo", False),
        ("requests.nvidia.com/gpu", False),
    ],
)
def test_extended_resource_rule_matches_kubernetes(name, extended):
    assert is_extended_resource(name) is extended


def test_the_readme_shows_the_denial_the_server_really_gives(generic_context):
    from tests.helpers import REPO

    readme = (REPO / "README.md").read_text()
    shown = readme.split("and the answer denies it with a message a user can act on:", 1)[1]
    shown = shown.split("```", 2)[1]
    decision = pipeline.decide(
        parsed(fixture("pod-create-fractional-gpu-500m-before-validation.json")), generic_context
    )
    assert " ".join(shown.split()) == decision.message


@pytest.mark.parametrize(
    ("target", "offered", "not_offered"),
    [
        ("eks", "nvidia.com/mig-1g.5gb on A100-40GB", "1g.10gb"),  # p4d's A100 40GB comes first
        ("aks", "nvidia.com/mig-1g.5gb on A100-40GB", "1g.10gb"),
        ("gke", "cloud.google.com/gke-gpu-partition-size: <profile>, e.g. 1g.5gb on A100-40GB", "1g.10gb"),
    ],
)
def test_a_fractional_denial_suggests_a_profile_the_map_offers_for_its_models(target, offered, not_offered):
    decision = mutate(pod_with_resources(gpu("500m", "500m")), context(target))
    assert decision.reason == "fractional-gpu"
    assert "nvidia.com/gpu is 500m (0.5)," in decision.message
    assert offered in decision.message
    assert not_offered not in decision.message


def test_a_fractional_denial_offers_no_mig_where_no_model_the_map_offers_can_be_sliced():
    base = context("eks")
    only_t4_and_l4 = dataclasses.replace(base.target, offered_models=("T4", "L4"))
    t4_and_l4 = dataclasses.replace(base, target=only_t4_and_l4)
    decision = mutate(pod_with_resources(gpu("0.5", "0.5")), t4_and_l4)
    assert decision.reason == "fractional-gpu"
    assert "MIG" not in decision.message
    assert "a shared GPU (nvidia.com/gpu.shared: 1)" in decision.message
