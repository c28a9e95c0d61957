"""Where pod templates live in the manifests the offline commands read (translate, preflight, explain).

One table, one walker: each kind lists the paths of its pod templates, with "*" standing for every
entry of a map (replica types) or a list (worker groups, tasks). A kind that carries GPUs where no
table entry reaches is reported, never passed over in silence (see `unread_reason`).
"""

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from webhook.core.vocabulary.workloads import POD_SPEC_PATHS

Path = tuple[str, ...]


def _replica_specs(field: str) -> tuple[Path, ...]:
    return (("spec", field, "*", "template"),)


def _ray(*cluster: str) -> tuple[Path, ...]:
    return ((*cluster, "headGroupSpec", "template"), (*cluster, "workerGroupSpecs", "*", "template"))


def _trainer_runtime() -> tuple[Path, ...]:
    return (("spec", "template", "spec", "replicatedJobs", "*", "template", "spec", "template"),)


TEMPLATE_PATHS: dict[tuple[str, str], tuple[Path, ...]] = {
    **{key: (path[:-1],) for key, path in POD_SPEC_PATHS.items() if key != ("", "Pod")},
    ("kubeflow.org", "PyTorchJob"): _replica_specs("pytorchReplicaSpecs"),
    ("kubeflow.org", "TFJob"): _replica_specs("tfReplicaSpecs"),
    ("kubeflow.org", "PaddleJob"): _replica_specs("paddleReplicaSpecs"),
    ("kubeflow.org", "XGBoostJob"): _replica_specs("xgbReplicaSpecs"),
    ("kubeflow.org", "MXJob"): _replica_specs("mxReplicaSpecs"),
    ("kubeflow.org", "MPIJob"): _replica_specs("mpiReplicaSpecs"),
    ("jobset.x-k8s.io", "JobSet"): (("spec", "replicatedJobs", "*", "template", "spec", "template"),),
    ("ray.io", "RayCluster"): _ray("spec"),
    ("ray.io", "RayService"): _ray("spec", "rayClusterConfig"),
    ("ray.io", "RayJob"): _ray("spec", "rayClusterSpec"),
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): (
        ("spec", "leaderWorkerTemplate", "leaderTemplate"),
        ("spec", "leaderWorkerTemplate", "workerTemplate"),
    ),
    ("batch.volcano.sh", "Job"): (("spec", "tasks", "*", "template"),),
    # Kubeflow Trainer v2: a runtime is a JobSet template (spec.template is the JobSet's).
    ("trainer.kubeflow.org", "TrainingRuntime"): _trainer_runtime(),
    ("trainer.kubeflow.org", "ClusterTrainingRuntime"): _trainer_runtime(),
    ("kubeflow.org", "Notebook"): (("spec", "template"),),  # the controller makes a StatefulSet of it
}

# Kinds whose pods are not written as pod templates: said plainly instead of guessed at.
# Each says where the kind asks for GPUs and why that is not a pod template gpuport can rewrite; the
# webhook still translates the pods each makes, when they are created.
_PODS = "the webhook translates its pods when they are created"
_KSERVE_RUNTIME = f"its spec is a pod spec KServe completes per model; {_PODS}"
_ARGO = f"each step's container stands beside its own nodeSelector and affinity; {_PODS}"
_SPARK = f"its driver and executors ask for GPUs in a gpu field of the Spark operator's own; {_PODS}"
UNREAD_KINDS: dict[tuple[str, str], str] = {
    ("serving.kserve.io", "InferenceService"): (
        "its predictor mixes pod fields with KServe's own (model, minReplicas) and KServe writes the "
        f"pods; {_PODS}"
    ),
    ("serving.kserve.io", "ServingRuntime"): _KSERVE_RUNTIME,
    ("serving.kserve.io", "ClusterServingRuntime"): _KSERVE_RUNTIME,
    ("trainer.kubeflow.org", "TrainJob"): (
        "it asks for GPUs in spec.trainer.resourcesPerNode and places pods through spec.podSpecOverrides, "
        f"which its runtime's templates complete (those runtimes are translated); {_PODS}"
    ),
    ("argoproj.io", "Workflow"): _ARGO,
    ("argoproj.io", "WorkflowTemplate"): _ARGO,
    ("argoproj.io", "ClusterWorkflowTemplate"): _ARGO,
    ("argoproj.io", "CronWorkflow"): _ARGO,
    ("sparkoperator.k8s.io", "SparkApplication"): _SPARK,
    ("sparkoperator.k8s.io", "ScheduledSparkApplication"): _SPARK,
    ("serving.knative.dev", "Service"): (
        "Knative admits node selectors, affinity and tolerations in a Service only with its "
        f"kubernetes.podspec-* feature flags on; {_PODS}"
    ),
    ("nvidia.com", "DynamoGraphDeployment"): f"each service asks for GPUs in Dynamo's own fields; {_PODS}",
    ("apps.nvidia.com", "NIMService"): f"the NIM operator writes the pod from its spec.resources; {_PODS}",
}


def group_of(api_version: str) -> str:
    return api_version.rpartition("/")[0] if "/" in api_version else ""


def kind_key(doc: Mapping[str, Any]) -> tuple[str, str]:
    return group_of(str(doc.get("apiVersion", ""))), str(doc.get("kind", ""))


def pod_templates(doc: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """(JSON Pointer of the template, the template: an object with metadata and spec) for each pod
    template in the document; for a Pod, the Pod itself at ""."""
    key = kind_key(doc)
    if not isinstance(doc.get("spec"), Mapping):
        return
    if key == ("", "Pod"):
        yield "", doc
        return
    for path in TEMPLATE_PATHS.get(key, ()):
        for pointer, node in _walk(doc, path, ""):
            if isinstance(node, Mapping) and isinstance(node.get("spec"), Mapping):
                yield pointer, node


def _walk(node: Any, path: Path, pointer: str) -> Iterator[tuple[str, Any]]:
    if not path:
        yield pointer, node
        return
    head, rest = path[0], path[1:]
    if head == "*":
        if isinstance(node, Mapping):
            for name, child in node.items():
                yield from _walk(child, rest, f"{pointer}/{_escape(str(name))}")
        elif isinstance(node, list):
            for index, child in enumerate(node):
                yield from _walk(child, rest, f"{pointer}/{index}")
    elif isinstance(node, Mapping) and head in node:
        yield from _walk(node[head], rest, f"{pointer}/{head}")


def _escape(part: str) -> str:
    return part.replace("~", "~0").replace("/", "~1")


def unread_reason(doc: Mapping[str, Any], is_gpu_resource: Callable[[str], bool]) -> str:
    """Why a document that asks for GPUs was not looked into, or "" when it was (or asks for none)."""
    key = kind_key(doc)
    if key == ("", "Pod") or key in TEMPLATE_PATHS:
        return ""
    found = sorted(set(_gpu_resources(doc, is_gpu_resource)))
    if not found:
        return ""
    why = UNREAD_KINDS.get(key, "gpuport does not know where this kind keeps its pod templates")
    return f"not looked into: {why}; its GPU asks ({', '.join(found)}) are left as written"


def _gpu_resources(node: Any, is_gpu_resource: Callable[[str], bool]) -> Iterator[str]:
    """GPU resources named anywhere in a document: in resources' limits and requests, and in the shapes
    operators use instead (the Spark operator's gpu: {name, quantity}; a plain "gpu" resource, which no
    Kubernetes resource is, in Dynamo's)."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            if key in ("limits", "requests") and isinstance(value, Mapping):
                yield from (str(n) for n in value if is_gpu_resource(str(n)) or str(n) == "gpu")
            elif key == "gpu" and isinstance(value, Mapping) and is_gpu_resource(str(value.get("name"))):
                yield str(value["name"])
            else:
                yield from _gpu_resources(value, is_gpu_resource)
    elif isinstance(node, list):
        for item in node:
            yield from _gpu_resources(item, is_gpu_resource)
