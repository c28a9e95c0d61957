"""Where pod templates live in the manifests the offline commands read (translate, preflight, explain).

One table, one walker: each kind lists the paths of its pod templates, with "*" standing for every
entry of a map (replica types) or a list (worker groups, tasks), and `INLINE` ending the path to a pod
spec written inline beside the kind's own fields (KServe's). A document that carries GPUs where no
table entry reaches is reported, never passed over in silence (see `unread_reason`).
"""

import copy
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from webhook.core.vocabulary.workloads import POD_SPEC_PATHS, mapping_at

Path = tuple[str, ...]


def _replica_specs(field: str) -> tuple[Path, ...]:
    return (("spec", field, "*", "template"),)


def _ray(*cluster: str) -> tuple[Path, ...]:
    return ((*cluster, "headGroupSpec", "template"), (*cluster, "workerGroupSpecs", "*", "template"))


# The last step of a path to a pod spec written inline: its template is that node as the spec, with the
# metadata its pods get (see `_inline`). KServe copies an InferenceService's annotations to the pods of
# each of its components (buildPredictorResources, createKnativeService in kserve/kserve
# pkg/controller/v1beta1/inferenceservice; kserve/kserve#3710).
INLINE = "<pod spec>"
_KSERVE_KINDS = ("InferenceService", "ServingRuntime", "ClusterServingRuntime")


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
    # Knative admits a Service's node selector, affinity and tolerations only with feature flags on; the
    # offline adapter says which (see `knative_flags`).
    ("serving.knative.dev", "Service"): (("spec", "template"),),
    # KServe: a runtime's spec, and each component of an InferenceService, is a pod spec beside KServe's
    # own fields. KServe merges the two into the pod (predictor.go, buildPodSpec).
    **{("serving.kserve.io", kind): (("spec", INLINE),) for kind in _KSERVE_KINDS[1:]},
    ("serving.kserve.io", _KSERVE_KINDS[0]): tuple(
        ("spec", component, INLINE) for component in ("predictor", "transformer", "explainer")
    ),
}

# A KServe component's implementation block (container fields: resources, args, env) is its pod's first
# container: a `model` is merged into the runtime's kserve-container, which comes first, and the other
# containers follow; a framework (or an explainer's `art`) takes the place of the first container
# (buildPodSpec and GetContainer in kserve/kserve). Read so, its GPU asks are translated where written.
_MODEL = "model"
_FRAMEWORKS: tuple[str, ...] = ("sklearn", "xgboost", "tensorflow", "pytorch", "triton", "onnx")
_FRAMEWORKS += ("huggingface", "pmml", "lightgbm", "paddle", "art")  # art: an explainer's (ART)
# A runtime's pods get the labels and annotations of its spec (ServingRuntimePodSpec: buildObjectMeta in
# kserve/kserve), not those of its metadata, which KServe reads for itself; so the spec is the metadata
# of its template too. An InferenceService's own are copied to its pods.
_POD_METADATA_INSIDE = {("serving.kserve.io", kind) for kind in _KSERVE_KINDS[1:]}
# Multi-node serving: KServe sizes the head and its workers together, counting GPUs by its own resource
# names (computeRayNodeAndGPUs), so neither is translated alone.
_MULTI_NODE = "workerSpec"
_MULTI_NODE_WHY = "KServe sizes a multi-node (workerSpec) head and its workers together by their GPU counts"

# Kinds whose pods are not written as pod templates: said plainly instead of guessed at.
# Each says where the kind asks for GPUs and why that is not a pod template gpuport can rewrite; the
# webhook still translates the pods each makes, when they are created.
_PODS = "the webhook translates its pods when they are created"
_ARGO = f"each step's container stands beside its own nodeSelector and affinity; {_PODS}"
_SPARK = f"its driver and executors ask for GPUs in a gpu field of the Spark operator's own; {_PODS}"
UNREAD_KINDS: dict[tuple[str, str], str] = {
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
    ("nvidia.com", "DynamoGraphDeployment"): f"each service asks for GPUs in Dynamo's own fields; {_PODS}",
    ("apps.nvidia.com", "NIMService"): f"the NIM operator writes the pod from its spec.resources; {_PODS}",
}


def group_of(api_version: str) -> str:
    return api_version.rpartition("/")[0] if "/" in api_version else ""


def kind_key(doc: Mapping[str, Any]) -> tuple[str, str]:
    return group_of(str(doc.get("apiVersion", ""))), str(doc.get("kind", ""))


def pod_templates(doc: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """(JSON Pointer of the template, the template: an object with metadata and spec) for each pod
    template in the document; for a Pod, the Pod itself at "". A pod spec written inline comes as a view
    (at the pointer of the spec) whose edits land in the document."""
    key = kind_key(doc)
    if not isinstance(doc.get("spec"), Mapping):
        return
    if key == ("", "Pod"):
        yield "", doc
        return
    for path in TEMPLATE_PATHS.get(key, ()):
        if path[-1] == INLINE:
            for pointer, node in _walk(doc, path[:-1], ""):
                if isinstance(node, Mapping) and _MULTI_NODE not in node:
                    yield _inline(doc, pointer, node)
            continue
        for pointer, node in _walk(doc, path, ""):
            if isinstance(node, Mapping) and isinstance(node.get("spec"), Mapping):
                yield pointer, node


class _View(dict):  # type: ignore[type-arg]
    """Entries of `owner`, and `extra` ones that are not its own, as one mapping. Writing or deleting one
    of the owner's entries here does it in the owner too, so a JSON Patch applied to the view lands in
    the document. A copy is plain data, apart from the document."""

    def __init__(self, owner: Any, entries: Mapping[str, Any], extra: frozenset[str]) -> None:
        super().__init__(entries)
        self._owner, self._extra = owner, extra

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        if key not in self._extra:
            self._owner[key] = value

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        if key not in self._extra and key in self._owner:
            del self._owner[key]

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return copy.deepcopy(dict(self), memo)


def _inline(doc: Any, pointer: str, node: Mapping[str, Any]) -> tuple[str, Any]:
    """The template of a pod spec written inline: the node as its spec, with the metadata its pods get."""
    spec: Any = node
    block = next((k for k in (_MODEL, *_FRAMEWORKS) if isinstance(node.get(k), Mapping)), None)
    if block is not None:
        written = node.get("containers")
        others = list(written) if isinstance(written, list) else []
        containers = [node[block], *(others if block == _MODEL else others[1:])]
        entries = {k: v for k, v in node.items() if k != block}
        spec = _View(node, {**entries, "containers": containers}, frozenset({"containers"}))
    if kind_key(doc) in _POD_METADATA_INSIDE:  # its labels and annotations are the node's own
        return pointer, _View(doc, {"metadata": node, "spec": spec}, frozenset({"metadata", "spec"}))
    metadata = doc.get("metadata")
    entries = {"spec": spec} if metadata is None else {"metadata": metadata, "spec": spec}
    return pointer, _View(doc, entries, frozenset({"spec"}))


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
    """Why a document that asks for GPUs was not looked into, or "" when it was (or asks for none). Of a
    kind gpuport opens, the asks no template of it reaches."""
    key = kind_key(doc)
    if key == ("", "Pod"):
        return ""
    if key in TEMPLATE_PATHS:
        return _left_out(doc, is_gpu_resource)
    found = sorted({name for _, _, name in _gpu_asks(doc, is_gpu_resource, "")})
    if not found:
        return ""
    why = UNREAD_KINDS.get(key, "gpuport does not know where this kind keeps its pod templates")
    return f"not looked into: {why}; its GPU asks ({', '.join(found)}) are left as written"


def _left_out(doc: Mapping[str, Any], is_gpu_resource: Callable[[str], bool]) -> str:
    """The GPU asks of a kind gpuport opens that none of its templates' containers holds."""
    read = set()
    for _, template in pod_templates(doc):
        spec = template.get("spec")
        for list_name in ("initContainers", "containers"):
            items = spec.get(list_name) if isinstance(spec, Mapping) else None
            read |= {id(c.get("resources")) for c in items or () if isinstance(c, Mapping)}
    left = [(at, name) for at, holder, name in _gpu_asks(doc, is_gpu_resource, "") if id(holder) not in read]
    if not left:
        return ""
    multi_node = [
        at
        for path in TEMPLATE_PATHS[kind_key(doc)]
        if path[-1] == INLINE
        for at, node in _walk(doc, path[:-1], "")
        if isinstance(node, Mapping) and _MULTI_NODE in node
    ]
    inside = all(any(at == m or at.startswith(f"{m}/") for m in multi_node) for at, _ in left)
    why = _MULTI_NODE_WHY if inside else "gpuport reads no pod spec there"
    where = ", ".join(sorted({at for at, _ in left}))
    names = ", ".join(sorted({name for _, name in left}))
    return f"not looked into: {where}: {why}; {_PODS}; its GPU asks ({names}) are left as written"


def _gpu_asks(node: Any, is_gpu_resource: Callable[[str], bool], at: str) -> Iterator[tuple[str, Any, str]]:
    """(JSON Pointer of the mapping that asks, that mapping, the GPU resource) for each GPU resource named
    anywhere in a document: in resources' limits and requests, and in the shapes operators use instead
    (the Spark operator's gpu: {name, quantity}; a plain "gpu" resource, which no Kubernetes resource
    is, in Dynamo's)."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            if key in ("limits", "requests") and isinstance(value, Mapping):
                names = (str(n) for n in value if is_gpu_resource(str(n)) or str(n) == "gpu")
                yield from ((at, node, name) for name in names)
            elif key == "gpu" and isinstance(value, Mapping) and is_gpu_resource(str(value.get("name"))):
                yield at, node, str(value["name"])
            else:
                yield from _gpu_asks(value, is_gpu_resource, f"{at}/{_escape(str(key))}")
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from _gpu_asks(item, is_gpu_resource, f"{at}/{index}")


# Knative checks a Service's pod spec against its feature flags (the config-features ConfigMap in
# knative-serving): node selectors, affinity, tolerations and a scheduler name only where a
# kubernetes.podspec-* flag allows them (https://knative.dev/docs/serving/configuration/feature-flags/),
# resource claims nowhere yet (knative/serving#15332). KServe makes a Knative Service of each component
# unless it runs in its raw-deployment (Standard) or ModelMesh mode, so the same holds for what an
# InferenceService or a runtime gives its pods:
# https://kserve.github.io/website/latest/modelserving/nodescheduling/inferenceservicenodescheduling/
_KNATIVE_FLAGS = {
    "nodeSelector": "nodeselector",
    "affinity": "affinity",
    "tolerations": "tolerations",
    "schedulerName": "schedulername",
}
_ON_KNATIVE = {
    ("serving.knative.dev", "Service"): "Knative",
    **{("serving.kserve.io", kind): "KServe on Knative" for kind in _KSERVE_KINDS},
}
_KSERVE_MODE = "serving.kserve.io/deploymentMode"
_OFF_KNATIVE = {"RawDeployment", "Standard", "ModelMesh"}


def knative_flags(doc: Mapping[str, Any], spec: Mapping[str, Any], patch: list[dict[str, Any]]) -> list[str]:
    """What Knative must allow before it admits the fields a translation's `patch` adds to a pod `spec`
    of `doc` that Knative checks (fields the spec had already, it allowed): [] for other kinds."""
    who = _ON_KNATIVE.get(kind_key(doc))
    annotations = mapping_at(doc, ("metadata", "annotations")) or {}
    if who is None or annotations.get(_KSERVE_MODE) in _OFF_KNATIVE:
        return []
    added = {op["path"].removeprefix("/spec/") for op in patch if op["op"] == "add"} - set(spec)
    flags = [flag for field, flag in _KNATIVE_FLAGS.items() if field in added]
    warnings = []
    if flags:
        named = flags[0] if len(flags) == 1 else "{" + ",".join(flags) + "}"
        warnings.append(f"gpuport: {who} needs config-features kubernetes.podspec-{named}")
    if "resourceClaims" in added:
        warnings.append(f"gpuport: {who} admits no resourceClaims in a pod spec yet (knative/serving#15332)")
    return warnings
