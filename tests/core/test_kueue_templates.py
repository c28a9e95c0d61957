"""A workload Kueue queues is admitted by its pod template as written: said where the webhook sees it.

Kueue counts what a queued workload's template asks for against its ClusterQueue before any pod exists,
and gpuport rewrites pods, never the template. The Job's, the CronJob's and the several asks' tests
failed before queued_templates.py existed (the webhook said only how the pods would be rewritten), the
Deployment's on its first version (which read the label on any kind); the others hold where there is
nothing to say.
"""

import copy
from pathlib import Path

import pytest
import yaml

from tests.helpers import context, parsed, review_of
from webhook.core.deciding import pipeline
from webhook.core.deciding.decision import MAX_WARNING_CHARS

MANIFESTS = Path(__file__).resolve().parent.parent / "manifests"
MIG_JOB = yaml.safe_load((MANIFESTS / "kueue" / "gke-mig-job.yaml").read_text())
T4_JOB = yaml.safe_load((MANIFESTS / "kueue-job-gke.yaml").read_text())
QUEUED = (
    "gpuport: Kueue queues this Job as its template asks (nvidia.com/gpu: 1), not as the pods will ask here"
)
FIX = "gpuport: apply it translated (gpuport translate) for Kueue to queue and charge what its pods ask"


def decided(job: dict, cloud: str):
    return pipeline.decide(parsed(review_of(copy.deepcopy(job))), context(cloud))


@pytest.mark.parametrize("cloud", ["generic", "eks", "aks", "dra-nvidia"])
def test_a_queued_job_whose_pods_will_ask_other_names_is_told_kueue_counts_the_template(cloud):
    decision = decided(MIG_JOB, cloud)
    assert decision.allowed and decision.patch == ()  # the template is never patched
    assert decision.warnings[-2:] == (QUEUED, FIX)
    assert all(len(w) <= MAX_WARNING_CHARS for w in decision.warnings[-2:])
    # what the pods will ask is said beside it, as for any workload
    assert any(w.startswith("gpuport: pods: containers[0] nvidia.com/gpu: 1 → ") for w in decision.warnings)


def cron_job(labels_at: str) -> dict:
    """The MIG Job's spec as a CronJob's, the queue label on the CronJob or on its jobTemplate."""
    labels = {"kueue.x-k8s.io/queue-name": "user-queue"}
    template = {"spec": copy.deepcopy(MIG_JOB["spec"])}
    cron = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "nightly"}}
    cron["spec"] = {"schedule": "0 3 * * *", "jobTemplate": template}
    (template if labels_at == "jobTemplate" else cron).setdefault("metadata", {})["labels"] = labels
    return cron


def test_a_cron_job_is_told_where_kueue_reads_its_jobs_queue():
    # Kueue reads the queue of a CronJob's Jobs from its jobTemplate's labels (the Jobs carry them).
    told = decided(cron_job("jobTemplate"), "generic").warnings
    assert told[-2] == (
        "gpuport: Kueue queues this CronJob's Jobs as their template asks (nvidia.com/gpu: 1), not as the "
        "pods will ask here"
    )
    assert not any("Kueue" in w for w in decided(cron_job("CronJob"), "generic").warnings)


@pytest.mark.parametrize("kind", ["Deployment", "StatefulSet"])
def test_a_workload_kueue_admits_pod_by_pod_is_not_told_of_kueue(kind):
    # Kueue's pod integration admits each pod as created, which gpuport has rewritten by then.
    workload = copy.deepcopy(MIG_JOB)
    workload.update(apiVersion="apps/v1", kind=kind)
    workload["spec"] = {"replicas": 2, "template": workload["spec"]["template"]}
    workload["spec"]["template"]["spec"].pop("restartPolicy")
    assert not any("Kueue" in w for w in decided(workload, "generic").warnings)


def test_several_asks_are_named_first_and_counted_within_what_kubectl_shows():
    job = copy.deepcopy(MIG_JOB)
    containers = job["spec"]["template"]["spec"]["containers"]
    containers.append(copy.deepcopy(containers[0]) | {"name": "second"})
    containers[1]["resources"] = {"limits": {"nvidia.com/gpu": 2}}
    told = decided(job, "generic").warnings
    assert told[-2] == (
        "gpuport: Kueue queues this Job as its template asks (nvidia.com/gpu: 1 (+1)), not as the pods will "
        "ask here"
    )
    assert all(len(w) <= MAX_WARNING_CHARS and not w.endswith("…") for w in told[-2:])


def test_a_job_no_queue_names_is_not_told_of_kueue():
    job = copy.deepcopy(MIG_JOB)
    del job["metadata"]["labels"]
    assert not any("Kueue" in w for w in decided(job, "generic").warnings)


def test_a_queued_job_on_its_own_platform_is_not_told_of_kueue():
    assert not any("Kueue" in w for w in decided(MIG_JOB, "gke").warnings)


def test_a_queued_job_whose_pods_change_only_node_selectors_is_not_told_of_kueue():
    # GKE's T4 selector becomes GFD's product label: Kueue counts nvidia.com/gpu: 1 either way.
    decision = decided(T4_JOB, "generic")
    assert decision.warnings == ("gpuport: pods: node selector nvidia.com/gpu.product=Tesla-T4",)


def test_a_queued_job_whose_pods_will_be_refused_is_told_that_alone():
    decision = decided(MIG_JOB, "ack")  # ACK sells no MIG slices
    refused = "gpuport: pods will be refused: containers[0] asks for MIG 1g.10gb"
    assert decision.warnings[0].startswith(refused)
    assert not any("Kueue" in w for w in decision.warnings)


def test_a_queued_pod_is_rewritten_itself_and_not_told_of_kueue():
    # Kueue's pod integration reads the pod as created, which gpuport has rewritten by then.
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
        "spec": copy.deepcopy(MIG_JOB["spec"]["template"]["spec"]),
    }
    decision = decided(pod, "generic")
    assert decision.patch and not any("Kueue" in w for w in decision.warnings)
