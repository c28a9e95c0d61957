"""Preflight counts the pods each operator makes from its object and classes the workload by kind
(issue 47). Manifests are written here in the shapes the operators document: Kubeflow Trainer v2's
TrainJob (trainer.kubeflow.org/v1alpha1, spec.trainer.numNodes and resourcesPerNode), Volcano's Job
(batch.volcano.sh/v1alpha1, spec.tasks[].replicas), LeaderWorkerSet (leaderworkerset.x-k8s.io/v1,
spec.replicas groups of leaderWorkerTemplate.size pods), KubeRay's RayCluster (ray.io/v1,
workerGroupSpecs[].replicas × numOfHosts), JobSet (jobset.x-k8s.io/v1alpha2, replicatedJobs[].replicas
× the Job's parallelism) and Kubeflow's MPIJob (kubeflow.org/v2beta1, mpiReplicaSpecs)."""

import pytest

from tests.core.test_preflight import checks, p5_node, run, running_pod
from webhook.commands.preflight_report import as_text
from webhook.core.vocabulary.inventory import parse_inventory


def container(gpus=1):
    return {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": gpus}}}


def template(gpus=1):
    return {"spec": {"containers": [container(gpus)]}}


TRAINJOB = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainJob",
    "metadata": {"name": "llm", "namespace": "ml"},
    "spec": {
        "runtimeRef": {"name": "torch-distributed"},
        "trainer": {"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": 8}}},
    },
}
VOLCANO = {
    "apiVersion": "batch.volcano.sh/v1alpha1",
    "kind": "Job",
    "metadata": {"name": "vj", "namespace": "ml"},
    "spec": {
        "minAvailable": 3,
        "schedulerName": "volcano",
        "tasks": [
            {"name": "master", "replicas": 1, "template": template()},
            {"name": "worker", "replicas": 2, "template": template()},
        ],
    },
}
LWS = {
    "apiVersion": "leaderworkerset.x-k8s.io/v1",
    "kind": "LeaderWorkerSet",
    "metadata": {"name": "serve", "namespace": "ml"},
    "spec": {
        "replicas": 2,
        "leaderWorkerTemplate": {"size": 4, "leaderTemplate": template(), "workerTemplate": template()},
    },
}
RAY = {
    "apiVersion": "ray.io/v1",
    "kind": "RayCluster",
    "metadata": {"name": "rc", "namespace": "ml"},
    "spec": {
        "headGroupSpec": {"template": {"spec": {"containers": [{"name": "h", "image": "x"}]}}},
        "workerGroupSpecs": [{"groupName": "tpu", "replicas": 2, "numOfHosts": 3, "template": template()}],
    },
}
JOBSET = {
    "apiVersion": "jobset.x-k8s.io/v1alpha2",
    "kind": "JobSet",
    "metadata": {"name": "js", "namespace": "ml"},
    "spec": {
        "replicatedJobs": [
            {"name": "w", "replicas": 2, "template": {"spec": {"parallelism": 3, "template": template()}}}
        ]
    },
}
MPIJOB = {
    "apiVersion": "kubeflow.org/v2beta1",
    "kind": "MPIJob",
    "metadata": {"name": "mpi", "namespace": "ml"},
    "spec": {
        "mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "template": {"spec": {"containers": [{"name": "l", "image": "x"}]}}},
            "Worker": {"replicas": 4, "template": template()},
        }
    },
}


@pytest.mark.parametrize(
    ("manifest", "pods", "category"),
    [
        (TRAINJOB, 2, "training"),  # numNodes trainer pods
        (VOLCANO, 3, "training"),  # 1 + 2 task replicas, not one "parallelism" per task
        (LWS, 8, "inference/stateless"),  # 2 groups of 4: a leader and 3 workers each
        (RAY, 7, "inference/stateless"),  # the head, and 2 replicas × 3 hosts
        (JOBSET, 6, "training"),  # 2 jobs × parallelism 3
        (MPIJOB, 5, "training"),  # a launcher and 4 workers
    ],
)
def test_each_operator_s_pods_are_counted_as_it_makes_them(manifest, pods, category):
    (report,) = run([manifest], source="eks", target="eks").workloads
    assert (report.replicas, report.category) == (pods, category)


def test_a_trainjob_needing_two_8_gpu_nodes_does_not_fit_one():
    inventory = parse_inventory([p5_node("a")])
    (report,) = run([TRAINJOB], source="eks", target="eks", inventory=inventory).workloads
    compat, why = checks(run([TRAINJOB], source="eks", target="eks", inventory=inventory))["capacity"]
    assert report.pending == 1 and compat == 0.5
    assert why.startswith("1/2 replicas fit (a ×1); 1 stay Pending")


def tainted_p5(name):
    node = p5_node(name)
    node["spec"] = {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}
    return node


@pytest.mark.parametrize("target", ["eks", "gke"])
def test_a_platform_that_adds_gpu_tolerations_at_admission_is_said_not_left_pending(target):
    # EKS and GKE run ExtendedResourceToleration: a pod asking nvidia.com/gpu tolerates the
    # nvidia.com/gpu:NoSchedule taint without writing it.
    inventory = parse_inventory([tainted_p5("a")])
    report = run([VOLCANO], source="eks", target=target, inventory=inventory)
    compat, why = checks(report)["capacity"]
    assert compat == 1.0 and why.startswith("3/3 replicas fit (a ×3)")
    assert why.endswith(
        "; /spec/tasks/0/template, /spec/tasks/1/template tolerate the nvidia.com/gpu:NoSchedule taint by "
        f"the toleration {target} adds at admission (ExtendedResourceToleration), not written in the manifest"
    )


def test_only_the_templates_asking_a_gpu_are_said_to_get_the_toleration():
    # The Ray head asks for no GPU: the plugin adds nothing to it, and it stays Pending on the tainted node.
    inventory = parse_inventory([tainted_p5("a")])
    compat, why = checks(run([RAY], source="eks", target="eks", inventory=inventory))["capacity"]
    assert compat == 6 / 7 and why.startswith("6/7 replicas fit (a ×6); 1 stay Pending: the pod does not")
    assert why.endswith(
        "; /spec/workerGroupSpecs/0/template tolerates the nvidia.com/gpu:NoSchedule taint by the toleration "
        "eks adds at admission (ExtendedResourceToleration), not written in the manifest"
    )


def test_a_platform_without_the_plugin_leaves_the_untolerating_pod_pending():
    inventory = parse_inventory([tainted_p5("a")])
    compat, why = checks(run([VOLCANO], source="eks", target="generic", inventory=inventory))["capacity"]
    assert compat == 0.0 and "does not tolerate the taint nvidia.com/gpu:NoSchedule" in why
    assert "admission" not in why


def test_the_held_line_says_what_running_pods_hold_not_free_capacity():
    inventory = parse_inventory([p5_node("a"), running_pod("busy", "a", {"nvidia.com/gpu": "2"})])
    text = as_text(run([VOLCANO], source="eks", target="eks", inventory=inventory))
    assert "Free capacity" not in text
    assert "Held by running pods, so not free for what moves in (GPU-equivalents per node): a 2." in text


def test_a_refused_8_gpu_pod_is_not_said_to_be_one_gpu_per_pod():
    # AKS offers nothing as large as a B200: translation refuses the pod.
    spec = {
        "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-b200"},
        "containers": [container(8)],
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "odd", "namespace": "ml"},
        "spec": {"replicas": 1, "template": {"spec": spec}},
    }
    report = run([deployment], source="gke", target="aks", inventory=parse_inventory([p5_node("a")]))
    assert checks(report)["topology"] == (
        0.5,
        "not checked: translation refuses /spec/template (see resource_names)",
    )
