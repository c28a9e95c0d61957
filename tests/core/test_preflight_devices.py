"""preflight scores and lists the devices beside the GPUs without an inventory: an EFA job bound for
a cloud without EFA is no `resource_names 1.00`."""

from pathlib import Path

import yaml

from tests.helpers import context
from webhook.core.migration.preflight import preflight

EFA_JOB = Path(__file__).parents[1] / "manifests" / "devices" / "eks-nccl-efa-job.yaml"


def resource_names(target, text=None):
    docs = [d for d in yaml.safe_load_all(text or EFA_JOB.read_text()) if d]
    report = preflight(docs, context("eks").target, context(target), None)
    (workload,) = report.workloads
    check = next(c for c in workload.checks if c.check == "resource_names")
    return check.compat, check.why


def test_an_efa_job_bound_for_gke_scores_zero_naming_the_device():
    score, why = resource_names("gke")
    assert score == 0.0
    assert "vpc.amazonaws.com/efa (on eks: AWS Elastic Fabric Adapter" in why
    assert "gke has no equivalent and offers networking.gke.io.networks/<name>" in why


def test_an_efa_job_bound_for_a_map_that_does_not_say_scores_half_naming_the_device():
    score, why = resource_names("volcano")
    assert score == 0.5
    assert "vpc.amazonaws.com/efa (on eks: AWS Elastic Fabric Adapter" in why
    assert "the volcano map does not say whether its nodes have it" in why


def test_an_efa_job_staying_on_eks_is_unchanged_and_sure():
    score, _ = resource_names("eks")
    assert score == 1.0
