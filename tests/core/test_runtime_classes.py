"""A RuntimeClass the target does not make, through the webhook: said of what gpuport translates, not of
what is applied to this cluster in its own words (an admin may have made the class here; `translate`,
moving a file, says it of both: tests/commands/test_audit_manifests.py)."""

import copy
from pathlib import Path

import yaml

from tests.helpers import context, parsed, review_of
from webhook.core.deciding import pipeline

K3S = yaml.safe_load(
    (Path(__file__).parents[1] / "manifests" / "audit4" / "k3s-nvidia-runtime-class.yaml").read_text()
)
SAID = "runtimeClassName nvidia kept: eks does not make it"


def deployment(pod_spec: dict) -> dict:
    template = {"metadata": {"labels": {"app": "nbody"}}, "spec": pod_spec}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "nbody"},
        "spec": {"template": template},
    }


def test_a_workload_in_the_target_s_words_applied_to_it_is_not_told_of_its_runtime_class():
    spec = copy.deepcopy(K3S["spec"])
    spec.pop("restartPolicy")
    for obj in (K3S, deployment(spec)):
        decision = pipeline.decide(parsed(review_of(copy.deepcopy(obj))), context("eks"))
        assert decision.allowed and not any(SAID in w for w in decision.warnings)


def test_a_workload_gpuport_translates_is_told_of_its_runtime_class():
    spec = copy.deepcopy(K3S["spec"])
    spec.pop("restartPolicy")
    spec["nodeSelector"] = {"cloud.google.com/gke-accelerator": "nvidia-l4"}  # written for GKE
    decision = pipeline.decide(parsed(review_of(deployment(spec))), context("eks"))
    assert any(SAID in w for w in decision.warnings)
