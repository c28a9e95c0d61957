"""preflight scores and lists the devices beside the GPUs without an inventory: an EFA job bound for
a cloud without EFA is no `resource_names 1.00`."""

from decimal import Decimal
from pathlib import Path

import yaml

from tests.helpers import context
from webhook.core.migration.preflight import preflight
from webhook.core.vocabulary.inventory import Inventory, Node

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


def topology(inventory=None):
    docs = [d for d in yaml.safe_load_all(EFA_JOB.read_text()) if d]
    report = preflight(docs, context("eks").target, context("eks"), inventory)
    (workload,) = report.workloads
    check = next(c for c in workload.checks if c.check == "topology")
    return check.compat, check.why


def p5(efa):
    labels = {"node.kubernetes.io/instance-type": "p5.48xlarge"}
    allocatable = {"nvidia.com/gpu": Decimal(8), **({"vpc.amazonaws.com/efa": Decimal(efa)} if efa else {})}
    return Inventory((Node("p5-a", labels, allocatable),))


def test_the_topology_check_counts_the_job_s_8_gpus_not_its_32_efa_interfaces():
    assert topology() == (0.5, "8 GPUs per pod; not checked: no inventory")


def test_a_node_s_efa_interfaces_are_not_counted_as_its_gpus():
    # 32 EFA interfaces and 8 GPUs: the job's 8 GPUs fit; a node with 4 GPUs and 32 EFA holds no 8.
    assert topology(p5(32))[1].startswith("8 GPUs per pod fit on one node")
    four = Inventory(
        (Node("small", {}, {"nvidia.com/gpu": Decimal(4), "vpc.amazonaws.com/efa": Decimal(32)}),)
    )
    assert topology(four) == (0.0, "8 GPUs per pod but the largest node has 4")
