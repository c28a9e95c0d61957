"""GPU limits in GPU-equivalents for GPU pods only, real LimitRanges, and the default-injection trap."""

import json
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import context, parsed, review_of
from tests.quota_fakes import FakeView
from tests.translation_cases import pod
from webhook.adapters.kube.limit_gate import LimitGate
from webhook.core.asks.demand import read_demand
from webhook.core.budget.limits import LimitsError, from_annotation, from_limitrange, injected, violations

CTX = context("generic")


class View(FakeView):
    def __init__(self, annotations=None, labels=None, limitranges=()):
        super().__init__()
        self.ns = {"labels": labels or {}, "annotations": annotations or {}}
        self.lrs = list(limitranges)

    def namespace(self, namespace):
        return self.ns

    def limitranges_in(self, namespace):
        return self.lrs


def gate_says(view, obj):
    return LimitGate(view).admit(parsed(review_of(obj)), CTX, read_demand(obj, CTX.dialects))


MIN4 = {"gpuport.io/gpu-limits": json.dumps([{"type": "Pod", "min": 4}])}


def test_every_gpu_pod_asks_at_least_4_gpus_in_any_form_and_cpu_pods_pass():
    denied = gate_says(View(MIN4), pod({"aliyun.com/gpu-count": "2"}))
    assert denied.reason == "gpu-limit"
    assert denied.message == (
        'pods "work" is forbidden: minimum nvidia.com/gpu usage per Pod is 4, but request is 2 '
        "(namespace annotation gpuport.io/gpu-limits, in GPU-equivalents)"
    )
    assert gate_says(View(MIN4), pod({"cpu": "1"})) is None
    assert gate_says(View(MIN4), pod({"nvidia.com/gpu": "4"})) is None


def test_container_max_applies_to_gpu_containers_only():
    limits = from_annotation(json.dumps([{"type": "Container", "max": "0.5"}]))
    obj = pod({"nvidia.com/mig-3g.40gb": "1"})  # 1/2: 4 of 8 memory slices
    obj["spec"]["containers"].append({"name": "sidecar", "resources": {"limits": {"cpu": "1"}}})
    demand = read_demand(obj, CTX.dialects)
    assert violations(obj, demand, limits, CTX.target, CTX.dialects.catalogue) == []
    big = pod({"nvidia.com/mig-4g.40gb": "1"})  # 4/7 > 0.5
    assert violations(big, read_demand(big, CTX.dialects), limits, CTX.target, CTX.dialects.catalogue) == [
        "maximum nvidia.com/gpu usage per Container is 0.5, but limit is 0.571 "
        "(namespace annotation gpuport.io/gpu-limits, in GPU-equivalents)"
    ]


def test_a_per_pod_max_counts_each_name_s_peak_as_the_kubelet_does():
    from tests.core.test_quota import split_names_pod

    real = {
        "metadata": {"name": "one"},
        "spec": {"limits": [{"type": "Pod", "max": {"nvidia.com/gpu": "1"}}]},
    }
    denied = gate_says(View(limitranges=[real]), split_names_pod())
    assert denied is not None and denied.reason == "gpu-limit"
    assert "maximum nvidia.com/gpu usage per Pod is 1, but limit is 4.857 (LimitRange one" in denied.message


def test_real_limitrange_is_read_across_gpu_names():
    limitrange = {
        "metadata": {"name": "gpu-caps"},
        "spec": {"limits": [{"type": "Pod", "max": {"nvidia.com/gpu": "2", "cpu": "8"}}]},
    }
    assert [(lim.type, lim.max) for lim in from_limitrange(limitrange, CTX.dialects)] == [
        ("Pod", Fraction(2))
    ]
    denied = gate_says(View(limitranges=[limitrange]), pod({"aliyun.com/gpu-count": "3"}))
    assert "maximum nvidia.com/gpu usage per Pod is 2, but limit is 3 (LimitRange gpu-caps" in denied.message


def test_several_violations_are_listed_like_limitranger():
    limits = {
        "gpuport.io/gpu-limits": json.dumps([{"type": "Pod", "min": 4}, {"type": "Container", "min": 3}])
    }
    denied = gate_says(View(limits), pod({"nvidia.com/gpu": "2"}))
    assert denied.message.startswith('pods "work" is forbidden: [minimum nvidia.com/gpu usage per Pod is 4')


def test_a_gpu_injected_by_limitranger_into_a_cpu_container_is_caught():
    limitrange = {
        "metadata": {"name": "gpu-max"},
        "spec": {"limits": [{"type": "Container", "max": {"nvidia.com/gpu": "2"}}]},
    }
    obj = pod({"nvidia.com/gpu": "2"})
    obj["metadata"]["annotations"] = {
        "kubernetes.io/limit-ranger": "LimitRanger plugin set: nvidia.com/gpu request for container main; "
        "nvidia.com/gpu limit for container main"
    }
    assert injected(obj, CTX.dialects) == [("main", "nvidia.com/gpu")]
    denied = gate_says(View(limitranges=[limitrange]), obj)
    assert denied.reason == "limitrange-injected-gpu"
    assert (
        'the LimitRange gpu-max gave GPUs to container "main" (nvidia.com/gpu), which asked for none'
        in denied.message
    )
    assert "Add default: {nvidia.com/gpu: 0}" in denied.message
    assert (
        gate_says(View(labels={"gpuport.io/allow-gpu-defaults": "true"}, limitranges=[limitrange]), obj)
        is None
    )


def test_cpu_defaults_from_limitranger_are_not_our_business():
    obj = pod({"cpu": "1"})
    obj["metadata"]["annotations"] = {
        "kubernetes.io/limit-ranger": "LimitRanger plugin set: cpu request for container main"
    }
    assert gate_says(View(), obj) is None


@pytest.mark.parametrize(
    "text",
    [
        '{"type": "Pod"}',
        '[{"type": "Node", "min": 1}]',
        '[{"type": "Pod", "min": "x"}]',
        '[{"type": "Pod", "mni": 1}]',
        "not json",
    ],
)
def test_a_bad_annotation_is_a_clear_error(text):
    with pytest.raises(LimitsError, match=r"gpuport\.io/gpu-limits must be a JSON list"):
        from_annotation(text)


def test_a_bad_annotation_never_blocks_pods():
    assert gate_says(View({"gpuport.io/gpu-limits": "oops"}), pod({"nvidia.com/gpu": "1"})) is None


def test_lint_flags_the_limitrange_traps(tmp_path):
    from webhook.config.lint import lint_files

    path = tmp_path / "lr.yaml"
    path.write_text(
        "apiVersion: v1\nkind: LimitRange\nmetadata:\n  name: gpu\nspec:\n  limits:\n"
        "    - type: Container\n      max: {nvidia.com/gpu: 2}\n"
        "    - type: Pod\n      min: {nvidia.com/gpu: 4}\n"
        "    - type: Container\n      max: {nvidia.com/gpu: 2}\n      default: {nvidia.com/gpu: 0}\n"
    )
    found = [str(f) for report in lint_files([path]) for f in report.findings]
    assert found == [
        f"{path}:7: nvidia.com/gpu max without a default: every container gets 2 GPUs by default; "
        "add default: {nvidia.com/gpu: 0} (or use gpuport.io/gpu-limits)",
        f"{path}:9: nvidia.com/gpu min on type Pod refuses every CPU-only pod; "
        "use gpuport.io/gpu-limits instead",
    ]


def test_a_container_limit_adds_up_the_kinds_one_container_asks():
    at_most_one = {"gpuport.io/gpu-limits": json.dumps([{"type": "Container", "max": 1}])}
    denied = gate_says(View(at_most_one), pod({"nvidia.com/mig-7g.80gb": "4", "nvidia.com/mig-1g.10gb": "1"}))
    assert denied is not None and denied.reason == "gpu-limit"
    # 4 × 7g.80gb and a 1g.10gb, charged as on an A100 40GB (2 of 8 memory slices: 1/4).
    assert "but limit is 4.25 " in denied.message, denied.message


def test_a_gpu_name_no_map_reads_is_refused_where_gpu_limits_hold():
    at_most_one = {"gpuport.io/gpu-limits": json.dumps([{"type": "Pod", "max": 1}])}
    denied = gate_says(View(at_most_one), pod({"gpu.intel.com/i915": "8"}))
    assert denied is not None and denied.reason == "gpu-limit-name-unread"
    assert "gpu.intel.com/i915" in denied.message
    assert gate_says(View(), pod({"gpu.intel.com/i915": "8"})) is None  # no limits: no budget to guard
    # A GPU under a vendor's domain with no GPU word (KubeVirt passthrough naming) likewise.
    denied = gate_says(View(at_most_one), pod({"nvidia.com/GA100_A100_PCIE_40GB": "8"}))
    assert denied is not None and denied.reason == "gpu-limit-name-unread"


LIMITRANGE_MAX2 = {
    "metadata": {"name": "gpu-max"},
    "spec": {"limits": [{"type": "Container", "max": {"nvidia.com/gpu": "2"}}]},
}
VIEWS = {
    "no budget": lambda: View(),
    "opted in, no limits": lambda: View(labels={"gpuport.io/allow-gpu-defaults": "true"}),
    "cpu LimitRange": lambda: View(limitranges=[{"metadata": {"name": "cpu"}, "spec": {"limits": []}}]),
    "GPU LimitRange": lambda: View(limitranges=[LIMITRANGE_MAX2]),
    "limits annotation": lambda: View(MIN4),
}
INJECTED = (
    "LimitRanger plugin set: nvidia.com/gpu request for container main; "
    "nvidia.com/gpu limit for container main"
)


@settings(max_examples=150, deadline=None)
@given(
    view=st.sampled_from(sorted(VIEWS)),
    resources=st.dictionaries(
        st.sampled_from(["nvidia.com/gpu", "aliyun.com/gpu-count", "nvidia.com/mig-1g.10gb", "cpu"]),
        st.sampled_from(["1", "3", "8"]),
        max_size=2,
    ),
    trap=st.booleans(),
)
def test_a_limit_gate_that_says_it_has_nothing_to_say_admits_whatever_the_pod_asks(view, resources, trap):
    # /validate skips reading the asks of a pod no gate is concerned with: that must never let one past.
    obj = pod(resources)
    if trap:
        obj["metadata"]["annotations"] = {"kubernetes.io/limit-ranger": INJECTED}
    gate, request = LimitGate(VIEWS[view]()), parsed(review_of(obj))
    if not gate.concerns(request, CTX):
        assert gate_says(VIEWS[view](), obj) is None
    assert gate.concerns(request, CTX) == (view not in ("no budget", "opted in, no limits") or trap)


def test_a_pod_the_limitranger_gave_gpus_is_refused_even_once_the_limitrange_is_out_of_the_view():
    obj = pod({"nvidia.com/gpu": "2"})
    obj["metadata"]["annotations"] = {"kubernetes.io/limit-ranger": INJECTED}
    assert LimitGate(View()).concerns(parsed(review_of(obj)), CTX)
    assert gate_says(View(), obj).reason == "limitrange-injected-gpu"
