"""Where pod templates live in the manifests the offline commands read (translate, preflight, explain).

One table, one walker: each kind lists the paths of its pod templates, with "*" standing for every
entry of a map (replica types) or a list (worker groups, tasks), and `INLINE` or `STEP` ending the path
to a pod spec written inline beside the kind's own fields (KServe's; an Argo workflow step's). A
document that carries GPUs where no table entry reaches is reported, never passed over in silence (see
`unread_reason`).

Why one module: the table, the views the walker yields of inline pod specs and the reasons it gives for
what it leaves out are one account of where each kind keeps its pods. Whether an Argo step is opened and
why it is not are the same reading of its workflow, and the report of the asks left out names the places
the walker held back; split, each half would have to repeat the other's reading.
"""

import copy
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

from webhook.core.vocabulary.workloads import POD_SPEC_PATHS, TRANSLATED_FROM, mapping_at

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

# Argo Workflows: each entry of a workflow's spec.templates (a CronWorkflow's spec.workflowSpec.templates)
# that runs a `container`, a `script` (a container with its source) or a `containerSet` makes a pod each
# time it runs (createWorkflowPod in argoproj/argo-workflows workflow/controller/workflowpod.go). Its pod
# spec is read as a view of that template: its containers are [container], [script] or
# containerSet.containers, then its sidecars (Argo's own wait container, which asks for no GPU, comes
# first in the pod and is not shown), its initContainers its own; its metadata is the template's
# `metadata`, whose labels and annotations Argo copies to the pod (addMetadata), so the translated-from
# record lands there. The pod's nodeSelector, affinity, tolerations, schedulerName and resourceClaims
# (Argo 4.1 and later) are the template's own; one it leaves unset Argo takes from the steps or dag
# template that runs it, else from the workflow's spec (addSchedulingConstraints); labels and annotations
# of the workflow's spec.podMetadata go to every pod, under the template's own. A translation of the step
# alone would miss those, so a default is read as the step's only where it can be written back exactly:
# set in the workflow's spec and taken by no other template that makes a pod (nor, through a
# templateRef, by one written elsewhere), it is read and written where it is written; a field neither
# sets is the step's own. A default other pods share, one a calling steps or dag template may give, a
# podSpecPatch (Argo merges it last), spec.templateDefaults naming pod fields (merged into every step), a
# workflowTemplateRef (its spec comes from elsewhere) and a {{...}} parameter in a field gpuport reads
# (filled in only when the step runs) leave the step reported with that reason (`_argo_steps`). A
# WorkflowTemplate's step is read as the template runs it: one another workflow calls through a
# templateRef takes that workflow's defaults, which no document here says.
STEP = "<argo step>"
_ARGO_KINDS = ("Workflow", "WorkflowTemplate", "ClusterWorkflowTemplate")
_ARGO_STEPS = {("argoproj.io", kind) for kind in (*_ARGO_KINDS, "CronWorkflow")}
_PLACEMENT = ("nodeSelector", "tolerations", "affinity", "schedulerName", "resourceClaims")
_RUNS = ("container", "script", "containerSet")
_NO_POD = ("steps", "dag", "suspend")  # the other kinds of template make pods (or use the agent pod)
_POD_FIELDS = {*_RUNS, *_PLACEMENT, "metadata", "sidecars", "initContainers", "podSpecPatch"}


# NVIDIA's NIM operator makes a Deployment of each NIMService, whose pod takes spec.nodeSelector and
# spec.tolerations, one container "<name>-ctr" with spec.resources, and spec.labels and spec.annotations
# (GetDeploymentParams, NVIDIA/k8s-nim-operator api/apps/v1alpha1/nimservice_types.go). Its pod is read as
# that view of the spec. A NIMService carries no other pod field (its podAffinity is pod affinity only):
# a translation that needs one (node affinity, resource claims) cannot be written there (`fit_to_kind`).
NIM = "<NIM operator's pod>"


# Kubeflow Trainer v2: a TrainJob's trainer pods are its runtime's "node" job, with the container "node"
# taking spec.trainer.resourcesPerNode (the TrainJob wins over everything else), and each entry of
# spec.podTemplateOverrides (spec.podSpecOverrides before Trainer 2.1: its fields flat, no metadata) that
# targets the job "node" laid over the runtime's template in order
# (https://www.kubeflow.org/docs/components/trainer/operator-guides/podtemplate-overrides/). The pod is
# read as that view: the resources as the container's, the override's nodeSelector, tolerations and
# affinity as the pod's, written back there; the runtime's own (a separate document) is translated
# where it is written. With no override for "node", one is made when the translation writes a pod field;
# with several, which field wins is their order's, so the TrainJob is reported instead (`_held_back`).
TRAINER = "<trainer node's pod>"
_TRAINER_JOB = "node"
_OVERRIDES = ("podTemplateOverrides", "podSpecOverrides")
_TRAINER_PLACEMENT = ("nodeSelector", "tolerations", "affinity")
_TRAINER_WHY = 'several of its pod overrides target the trainer job "node"; Trainer lays them over each other'


# The pod fields a kind passes to its pods, where gpuport reads them as a view (NIM, TRAINER): (the fields,
# who does not take the others, what they take instead), for `fit_to_kind`.
_CARRIED = {
    ("apps.nvidia.com", "NIMService"): (
        frozenset({"nodeSelector", "tolerations", "containers"}),
        "the NIM operator does not take from a NIMService",
        "only nodeSelector, tolerations, resources",
    ),
    ("trainer.kubeflow.org", "TrainJob"): (
        frozenset({*_TRAINER_PLACEMENT, "containers"}),
        "gpuport does not write in a TrainJob",
        'its trainer\'s resourcesPerNode; nodeSelector, tolerations, affinity of its override for "node"',
    ),
}


# NVIDIA Dynamo (nvidia.com/v1alpha1): the operator makes the pods of each service of a
# DynamoGraphDeployment (spec.services.<name>; a DynamoComponentDeployment's spec is one service) from
# its extraPodSpec, a PodSpec whose containers come first, then the container "main":
# extraPodSpec.mainContainer with the service's own `resources` over its resources. Those are Dynamo's
# strings: cpu, memory, gpu (a count of gpuType, nvidia.com/gpu when unset), custom (any resource by its
# name), claims; the pod's labels and annotations are extraPodMetadata's, beside the service's
# (GenerateBasePodSpec in ai-dynamo/dynamo deploy/cloud/operator/internal/dynamo/graph.go,
# GetResourcesConfig in internal/controller_common/resource.go, api/dynamo/common/common.go). Its pod is
# read as that view and written back where each field comes from (`_DynamoResources`): an amount to the
# Dynamo field that gives it (a GPU renamed to gpu and gpuType, a new device to custom), pod fields to
# extraPodSpec, annotations to extraPodMetadata, each made where there is none. A service runs
# replicas x multinode.nodeCount such pods. nvidia.com/v1beta1 writes each component's pod as a pod
# template (spec.components[].podTemplate; a DynamoComponentDeployment's spec.podTemplate).
DYNAMO = "<Dynamo service's pod>"
_DYNAMO_MAIN = "main"
_DYNAMO_GPU = "nvidia.com/gpu"
_DYNAMO_OWN = ("cpu", "memory")
_SECTIONS = ("limits", "requests")


# CodeFlare's AppWrapper (workload.codeflare.dev/v1beta2, github.com/project-codeflare/appwrapper): its
# components' templates are whole resources the AppWrapper controller creates once Kueue admits it; their
# podSets name where each keeps its pod templates. A wrapped kind gpuport reads through plain template
# paths is read so, at its pointer inside the AppWrapper; one read as a view (NIMService, TrainJob,
# Dynamo's, KServe's, Argo's) is left unread and reported, its view's fit being its own kind's.
WRAPPED = "<wrapped resource>"


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
    ("apps.nvidia.com", "NIMService"): (("spec", NIM),),
    ("trainer.kubeflow.org", "TrainJob"): (("spec", TRAINER),),
    # Kubeflow Trainer v2: a runtime is a JobSet template (spec.template is the JobSet's).
    ("trainer.kubeflow.org", "TrainingRuntime"): _trainer_runtime(),
    ("trainer.kubeflow.org", "ClusterTrainingRuntime"): _trainer_runtime(),
    ("nvidia.com", "DynamoGraphDeployment"): (
        ("spec", "services", "*", DYNAMO),
        ("spec", "components", "*", "podTemplate"),
    ),
    ("nvidia.com", "DynamoComponentDeployment"): (("spec", DYNAMO), ("spec", "podTemplate")),
    ("kubeflow.org", "Notebook"): (("spec", "template"),),  # the controller makes a StatefulSet of it
    # A core PodTemplate: what Flyte's propeller (`default-pod-template-name`, a task's pod_template_name)
    # merges into its task pods, the container "primary" being the task's own.
    ("", "PodTemplate"): (("template",),),
    # Knative admits a Service's node selector, affinity and tolerations only with feature flags on; the
    # offline adapter says which (see `controller_notes`).
    ("serving.knative.dev", "Service"): (("spec", "template"),),
    # KServe: a runtime's spec, and each component of an InferenceService, is a pod spec beside KServe's
    # own fields. KServe merges the two into the pod (predictor.go, buildPodSpec).
    **{("serving.kserve.io", kind): (("spec", INLINE),) for kind in _KSERVE_KINDS[1:]},
    ("serving.kserve.io", _KSERVE_KINDS[0]): tuple(
        ("spec", component, INLINE) for component in ("predictor", "transformer", "explainer")
    ),
    # Argo: each template that runs containers is the pod spec of its step's pods (see STEP).
    **{("argoproj.io", kind): (("spec", "templates", "*", STEP),) for kind in _ARGO_KINDS},
    ("argoproj.io", "CronWorkflow"): (("spec", "workflowSpec", "templates", "*", STEP),),
    # Argo Rollouts: a Deployment's template, rolled out by canary or blue-green steps (a Rollout that
    # names a Deployment through spec.workloadRef has none: that Deployment is read where written).
    ("argoproj.io", "Rollout"): (("spec", "template"),),
    # OpenKruise: a CloneSet and an Advanced StatefulSet (v1alpha1, v1beta1) keep the apps kinds'
    # spec.template, updated in place where only images change.
    **{("apps.kruise.io", kind): (("spec", "template"),) for kind in ("CloneSet", "StatefulSet")},
    # KEDA: a ScaledJob makes a batch Job of spec.jobTargetRef (a JobSpec) for each batch of events.
    ("keda.sh", "ScaledJob"): (("spec", "jobTargetRef", "template"),),
    ("kubeflow.org", "JAXJob"): _replica_specs("jaxReplicaSpecs"),
    # Seldon Core v1: each componentSpec of a predictor is a PodTemplateSpec Seldon makes a Deployment of
    # (beside its hpaSpec, kedaSpec, pdbSpec), Seldon adding its own containers for the graph's units.
    ("machinelearning.seldon.io", "SeldonDeployment"): (("spec", "predictors", "*", "componentSpecs", "*"),),
    # CodeFlare's AppWrapper: each component's template is a whole resource (a PyTorchJob, a Job...),
    # read as that kind is read (see WRAPPED).
    ("workload.codeflare.dev", "AppWrapper"): (("spec", "components", "*", "template", WRAPPED),),
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
_SPARK = f"its driver and executors ask for GPUs in a gpu field of the Spark operator's own; {_PODS}"
# KubeVirt ("Host Devices Assignment", kubevirt.io/user-guide): a VM's GPU is passed through by the device
# plugin's resource name per card model (domain.devices.gpus or hostDevices, deviceName), and its
# virt-launcher pod asks for that name, which no map translates (only a node running the passthrough
# plugin, as the GPU Operator's sandbox workloads do, gives it).
_KUBEVIRT = (
    "KubeVirt passes its GPUs through to the VM by the passthrough device plugin's names "
    "(domain.devices gpus, hostDevices), which no cloud map translates; only nodes running that plugin "
    "give them to its virt-launcher pod"
)
UNREAD_KINDS: dict[tuple[str, str], str] = {
    ("sparkoperator.k8s.io", "SparkApplication"): _SPARK,
    ("sparkoperator.k8s.io", "ScheduledSparkApplication"): _SPARK,
    **{
        ("kubevirt.io", kind): _KUBEVIRT
        for kind in ("VirtualMachine", "VirtualMachineInstance", "VirtualMachineInstanceReplicaSet")
    },
    ("pool.kubevirt.io", "VirtualMachinePool"): _KUBEVIRT,
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
    if not isinstance(doc.get("spec"), Mapping) and key != ("", "PodTemplate"):  # its template is top-level
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
        if path[-1] == TRAINER:
            yield from _trainer(doc)
            continue
        if path[-1] == DYNAMO:
            services = _walk(doc, path[:-1], "")
            yield from (
                _dynamo(pointer, node)
                for pointer, node in services
                if isinstance(node, Mapping) and "podTemplate" not in node  # v1beta1's: a template
            )
            continue
        if path[-1] == NIM:
            node = mapping_at(doc, path[:-1])
            yield from [_nim(doc, node)] if node is not None else ()
            continue
        if path[-1] == WRAPPED:
            for pointer, node in _walk(doc, path[:-1], ""):
                if isinstance(node, Mapping) and _plainly_read(kind_key(node)):
                    yield from ((f"{pointer}{inner}", tmpl) for inner, tmpl in pod_templates(node))
            continue
        if path[-1] == STEP:
            yield from (
                _step(pointer, node, spec) for pointer, node, spec, why in _argo_steps(doc, path) if not why
            )
            continue
        for pointer, node in _walk(doc, path, ""):
            if isinstance(node, Mapping) and isinstance(node.get("spec"), Mapping):
                yield pointer, node


def _plainly_read(key: tuple[str, str]) -> bool:
    """Whether a kind's pod templates are all written as templates (no view of the kind's own fields)."""
    views = (INLINE, TRAINER, DYNAMO, NIM, STEP, WRAPPED)
    return key == ("", "Pod") or (
        key in TEMPLATE_PATHS and all(p[-1] not in views for p in TEMPLATE_PATHS[key])
    )


class _View(dict):  # type: ignore[type-arg]
    """Entries of `owner`, and `extra` ones that are not its own, as one mapping. Writing or deleting one
    of the owner's entries here does it in the owner too (or in the mapping `routes` names for that key),
    so a JSON Patch applied to the view lands in the document. An owner may be given as a function that
    returns it, made when first written to. A copy is plain data, apart from the document."""

    def __init__(
        self,
        owner: Any,
        entries: Mapping[str, Any],
        extra: frozenset[str],
        routes: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(entries)
        self._owner, self._extra, self._routes = owner, extra, routes or {}

    def _holder(self, key: str) -> Any:
        holder = self._routes.get(key, self._owner)
        return holder() if callable(holder) else holder

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        if key not in self._extra:
            self._holder(key)[key] = value

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        holder = self._holder(key) if key not in self._extra else {}
        if key in holder:
            del holder[key]

    # dict's own mutators bypass __setitem__/__delitem__: each goes through them, so none can change the
    # view without the document.
    def setdefault(self, key: str, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def pop(self, key: str, *default: Any) -> Any:
        if key not in self:
            if default:
                return default[0]
            raise KeyError(key)
        value = self[key]
        del self[key]
        return value

    def popitem(self) -> tuple[str, Any]:
        key = next(reversed(self))
        return key, self.pop(key)

    def clear(self) -> None:
        for key in list(self):
            del self[key]

    def __ior__(self, other: Any) -> "_View":  # type: ignore[misc]
        self.update(other)
        return self

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return copy.deepcopy(dict(self), memo)


def _inline(doc: Any, pointer: str, node: Mapping[str, Any]) -> tuple[str, Any]:
    """The template of a pod spec written inline: the node as its spec, with the metadata its pods get."""
    spec: Any = node
    entries, extra, routes = dict(node), frozenset[str](), {}
    block = next((k for k in (_MODEL, *_FRAMEWORKS) if isinstance(node.get(k), Mapping)), None)
    if block is not None:
        written = node.get("containers")
        others = list(written) if isinstance(written, list) else []
        containers = [node[block], *(others if block == _MODEL else others[1:])]
        entries = {k: v for k, v in node.items() if k != block} | {"containers": containers}
        extra = frozenset({"containers"})
    annotations = mapping_at(doc, ("metadata", "annotations"))
    if kind_key(doc) == ("serving.kserve.io", _KSERVE_KINDS[0]) and _gke_selected(annotations, entries):
        assert annotations is not None  # _gke_selected read it
        selector = {**(entries.get("nodeSelector") or {}), _GKE_LABEL: annotations[_GKE_KEY]}
        own = _View(
            lambda: _made(node, "nodeSelector"),
            selector,
            frozenset(),
            {_GKE_LABEL: _Renamed(annotations, _GKE_KEY)},
        )
        entries["nodeSelector"], routes = own, {"nodeSelector": _GkeSelector(node, annotations)}
    if block is not None or routes:
        spec = _View(node, entries, extra, routes)
    if kind_key(doc) in _POD_METADATA_INSIDE:  # its labels and annotations are the node's own
        return pointer, _View(doc, {"metadata": node, "spec": spec}, frozenset({"metadata", "spec"}))
    metadata = doc.get("metadata")
    entries = {"spec": spec} if metadata is None else {"metadata": metadata, "spec": spec}
    return pointer, _View(doc, entries, frozenset({"spec"}))


# KServe's pod mutator gives a pod of an InferenceService annotated serving.kserve.io/gke-accelerator (the
# annotation is copied to its pods) the node selector cloud.google.com/gke-accelerator with its value,
# when a container's limits name nvidia.com/gpu (kserve/kserve pkg/webhook/admission/pod/
# accelerator_injector.go; kserve/kserve#17, #794). The pod's selector is read so, and written back
# where each part comes from: the label to the annotation, the rest to the component's nodeSelector.
_GKE_KEY = "serving.kserve.io/gke-accelerator"
_GKE_LABEL = "cloud.google.com/gke-accelerator"
_GKE_GPU = "nvidia.com/gpu"


def _gke_selected(annotations: Mapping[str, Any] | None, spec: Mapping[str, Any]) -> bool:
    """Whether KServe adds the annotation's GKE selector to the pod of this component (see _GKE_KEY)."""
    if not annotations or not isinstance(annotations.get(_GKE_KEY), str):
        return False
    written = spec.get("nodeSelector")
    if isinstance(written, Mapping) and _GKE_LABEL in written:
        return False  # the component's own selector says it already
    containers = spec.get("containers")
    listed = containers if isinstance(containers, list) else []
    return any(
        isinstance(c, Mapping) and _GKE_GPU in (mapping_at(c, ("resources", "limits")) or {}) for c in listed
    )


class _GkeSelector:
    """Where a pod's nodeSelector of an InferenceService component is written back (see _GKE_KEY): the
    GKE accelerator label to the InferenceService's annotation, the rest to the component's own."""

    def __init__(self, component: Any, annotations: Any) -> None:
        self._component, self._annotations = component, annotations

    def __contains__(self, key: str) -> bool:
        return key == "nodeSelector"

    def __setitem__(self, key: str, value: Mapping[str, Any]) -> None:
        del self[key]
        rest = {k: v for k, v in value.items() if k != _GKE_LABEL}
        if _GKE_LABEL in value:
            self._annotations[_GKE_KEY] = value[_GKE_LABEL]
        if rest:
            self._component["nodeSelector"] = rest

    def __delitem__(self, key: str) -> None:
        self._component.pop("nodeSelector", None)
        self._annotations.pop(_GKE_KEY, None)


def _trainer_overrides(doc: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """(field, entry) for each pod override of a TrainJob that targets its trainer job (see TRAINER)."""
    found = []
    for field in _OVERRIDES:
        entries = (mapping_at(doc, ("spec",)) or {}).get(field)
        for entry in entries if isinstance(entries, list) else ():
            targets = entry.get("targetJobs") if isinstance(entry, Mapping) else None
            named = (
                [t.get("name") for t in targets if isinstance(t, Mapping)]
                if isinstance(targets, list)
                else []
            )
            found += [(field, entry)] if _TRAINER_JOB in named else []
    return found


def _trainer(doc: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """The trainer pod of a TrainJob, as a view of its trainer and its override for "node" (see TRAINER)."""
    trainer, overrides = mapping_at(doc, ("spec", "trainer")), _trainer_overrides(doc)
    if trainer is None or len(overrides) > 1:
        return
    own = {"resources": trainer["resourcesPerNode"]} if "resourcesPerNode" in trainer else {}
    routes = {"resources": _Renamed(trainer, "resourcesPerNode")}
    container = _View(trainer, {"name": _TRAINER_JOB, **own}, frozenset({"name"}), routes)
    if overrides:
        field, entry = overrides[0]
        pod: Any = entry if field == _OVERRIDES[1] else entry.get("spec")
        if not isinstance(pod, Mapping):  # made in the override once the translation writes to it
            pod = _View(lambda: _made(entry, "spec"), {}, frozenset())
        metadata = entry.get("metadata") if field == _OVERRIDES[0] else mapping_at(doc, ("metadata",))
        if not isinstance(metadata, Mapping):  # made in the override once the translation writes to it
            metadata = _View(lambda: _made(entry, "metadata"), {}, frozenset())
    else:  # a field the translation writes goes to a new override for "node"
        pod = _View(lambda: _new_override(doc), {}, frozenset())
        metadata = mapping_at(doc, ("metadata",)) or {}
    placed = {k: pod[k] for k in _TRAINER_PLACEMENT if k in pod}
    pod_spec = _View(pod, {**placed, "containers": [container]}, frozenset({"containers"}))
    yield (
        "/spec/trainer",
        _View(doc, {"metadata": metadata, "spec": pod_spec}, frozenset({"metadata", "spec"})),
    )


def _new_override(doc: Any) -> Any:
    """The spec of a new pod override for the trainer job, in the form the TrainJob writes (see TRAINER)."""
    spec = doc["spec"]
    field = _OVERRIDES[1] if _OVERRIDES[1] in spec else _OVERRIDES[0]
    entry: dict[str, Any] = {"targetJobs": [{"name": _TRAINER_JOB}]}
    if field == _OVERRIDES[0]:
        entry["spec"] = {}
    _made_list(spec, field).append(entry)
    written = _made_list(spec, field)[-1]
    return written if field == _OVERRIDES[1] else written["spec"]


def _made_list(node: Any, key: str) -> Any:
    if not isinstance(node.get(key), list):
        node[key] = []
    return node[key]


def _nim(doc: Mapping[str, Any], spec: Any) -> tuple[str, Any]:
    """The pod the NIM operator makes of a NIMService (see NIM), as a view of its spec."""
    name = (mapping_at(doc, ("metadata",)) or {}).get("name")
    own = {"resources": spec["resources"]} if "resources" in spec else {}
    container = _View(spec, {"name": f"{name}-ctr", **own}, frozenset({"name"}))
    placed = {k: spec[k] for k in ("nodeSelector", "tolerations") if k in spec}
    pod_spec = _View(spec, {**placed, "containers": [container]}, frozenset({"containers"}))
    metadata = _View(spec, {k: spec[k] for k in ("labels", "annotations") if k in spec}, frozenset())
    return "/spec", _View(spec, {"metadata": metadata, "spec": pod_spec}, frozenset({"metadata", "spec"}))


def _dynamo(pointer: str, service: Any) -> tuple[str, Any]:
    """The pod the Dynamo operator makes of a service (see DYNAMO), as a view of the service."""

    def extra() -> Any:
        return _last(service, "extraPodSpec")

    written = service.get("extraPodSpec")
    pod: Any = written if isinstance(written, Mapping) else _View(extra, {}, frozenset())
    main: Any = pod.get("mainContainer")
    if not isinstance(main, Mapping):  # made in extraPodSpec once the translation writes to it
        main = _View(lambda: _last(extra(), "mainContainer"), {}, frozenset())
    resources = _DynamoResources(service, main)
    entries = {**main, "name": main.get("name", _DYNAMO_MAIN), "resources": resources}
    container = _View(main, entries, frozenset({"name"}), {"resources": _Whole(resources)})
    sidecars = pod.get("containers")
    listed = [*(sidecars if isinstance(sidecars, list) else []), container]
    own = {k: v for k, v in pod.items() if k not in ("mainContainer", "containers")}
    pod_spec = _View(pod, {**own, "containers": listed}, frozenset({"containers"}))

    def metadata_of() -> Any:
        return _last(service, "extraPodMetadata")

    metadata = _View(metadata_of, {}, frozenset())
    for key in ("labels", "annotations"):
        pod_own = mapping_at(service, ("extraPodMetadata", key)) or {}
        merged = {**(mapping_at(service, (key,)) or {}), **pod_own}
        if merged:
            dict.__setitem__(
                metadata, key, _View(lambda key=key: _last(metadata_of(), key), merged, frozenset())
            )
    return pointer, _View(service, {"metadata": metadata, "spec": pod_spec}, frozenset({"metadata", "spec"}))


def _last(node: Any, key: str) -> Any:
    """node[key], a mapping made at the end of node where there is none."""
    if not isinstance(node.get(key), Mapping):
        node[key] = {}
    return node[key]


def _text(value: Any) -> Any:
    """An amount as Dynamo's fields hold it: a string (the author's, as written, where it is one)."""
    return value if isinstance(value, str) else str(value)


class _DynamoResources(_View):
    """The resources of a Dynamo service's main container (see DYNAMO): extraPodSpec.mainContainer's
    with the service's `resources` over them; each amount written back where it comes from."""

    def __init__(self, service: Any, main: Any) -> None:
        self._service, self._main = service, main
        ours, theirs = self.ours() or {}, self.theirs() or {}
        items = [ours.get(section) for section in _SECTIONS]
        # The names the service's gpu fields give: a new name for the GPU ask goes to them too.
        given = [item for item in items if isinstance(item, Mapping) and "gpu" in item]
        self.gpu_names = {item.get("gpuType") or _DYNAMO_GPU for item in given}
        entries: dict[str, Any] = {}
        for section in _SECTIONS:
            if isinstance(ours.get(section), Mapping) or isinstance(theirs.get(section), Mapping):
                entries[section] = _DynamoSection(self, section)
        claims = ours.get("claims", theirs.get("claims"))
        if claims is not None:
            entries["claims"] = claims
        super().__init__(None, entries, frozenset())

    def ours(self) -> Any:
        written = self._service.get("resources")
        return written if isinstance(written, Mapping) else None

    def theirs(self) -> Any:
        written = self._main.get("resources")
        return written if isinstance(written, Mapping) else None

    def made(self, section: str) -> Any:
        """Where a section's new amounts go: the service's resources where it has them, else the main
        container's."""
        holder = self.ours() if self.ours() is not None else _last(self._main, "resources")
        return _last(holder, section)

    @property
    def sources(self) -> list[Any]:
        """The mappings this view reads (for `_left_out`)."""
        return [r for r in (self.ours(), self.theirs()) if r is not None]

    def __setitem__(self, key: str, value: Any) -> None:
        if key in _SECTIONS and isinstance(value, Mapping):
            section = _DynamoSection(self, key)
            dict.__setitem__(self, key, section)
            for name in [n for n in section if n not in value]:
                del section[name]
            for name, amount in value.items():
                section[name] = amount
            return
        dict.__setitem__(self, key, value)
        ours, theirs = self.ours(), self.theirs() or {}
        mine = ours is not None and ("claims" in ours or "claims" not in theirs)  # claims: the service's
        (ours if mine else _last(self._main, "resources"))[key] = value

    def __delitem__(self, key: str) -> None:
        dict.__delitem__(self, key)
        for holder in self.sources:
            holder.pop(key, None)


class _DynamoSection(_View):
    """The limits or requests of a Dynamo service's main container (see `_DynamoResources`): the main
    container's amounts, the service's over them (its gpu under the name gpuType gives)."""

    def __init__(self, resources: _DynamoResources, section: str) -> None:
        self._resources, self._section = resources, section
        item = self._item()
        entries = dict(mapping_at(resources.theirs() or {}, (section,)) or {})
        if item is not None:
            entries |= {k: item[k] for k in _DYNAMO_OWN if k in item}
            if "gpu" in item:
                entries[item.get("gpuType") or _DYNAMO_GPU] = item["gpu"]
            entries |= mapping_at(item, ("custom",)) or {}
        self._had_gpu = item is not None and "gpu" in item
        super().__init__(None, entries, frozenset())

    def _item(self) -> Any:
        return mapping_at(self._resources.ours() or {}, (self._section,))

    def _theirs(self) -> Any:
        return mapping_at(self._resources.theirs() or {}, (self._section,))

    def __setitem__(self, key: str, value: Any) -> None:
        dict.__setitem__(self, key, value)
        item, theirs = self._item(), self._theirs()
        if item is not None and "gpu" in item and key == (item.get("gpuType") or _DYNAMO_GPU):
            item["gpu"] = _text(value)
        elif item is not None and key in _DYNAMO_OWN and key in item:
            item[key] = _text(value)
        elif item is not None and key in (mapping_at(item, ("custom",)) or {}):
            item["custom"][key] = _text(value)
        elif theirs is not None and key in theirs:
            theirs[key] = value
        else:
            self._add(key, value)

    def _add(self, key: str, value: Any) -> None:
        """A name neither gave: to the service's resources where it has them (a GPU's new name to its
        gpu and gpuType, a device to custom), else to the main container's."""
        if self._resources.ours() is None:
            self._resources.made(self._section)[key] = value
            return
        item = self._resources.made(self._section)
        if key in _DYNAMO_OWN:
            item[key] = _text(value)
        elif "gpu" not in item and (self._had_gpu or key in self._resources.gpu_names):
            item["gpu"] = _text(value)
            if key != _DYNAMO_GPU:
                item["gpuType"] = key
            else:
                item.pop("gpuType", None)
        else:
            _last(item, "custom")[key] = _text(value)

    def __delitem__(self, key: str) -> None:
        dict.__delitem__(self, key)
        item, theirs = self._item(), self._theirs()
        if item is not None:
            if "gpu" in item and key == (item.get("gpuType") or _DYNAMO_GPU):
                item.pop("gpu")
                item.pop("gpuType", None)
            if key in _DYNAMO_OWN:
                item.pop(key, None)
            if key in (mapping_at(item, ("custom",)) or {}):
                item["custom"].pop(key)
        if theirs is not None:
            theirs.pop(key, None)


class _Whole:
    """A container's resources written whole (see `_DynamoResources`): each section set through it."""

    def __init__(self, resources: _DynamoResources) -> None:
        self._resources = resources

    def __contains__(self, key: str) -> bool:
        return True

    def __setitem__(self, key: str, value: Any) -> None:
        for section in [k for k in self._resources if k not in value]:
            del self._resources[section]
        for section, amounts in value.items():
            self._resources[section] = amounts

    def __delitem__(self, key: str) -> None:
        self._resources.clear()


class Fitted(NamedTuple):
    patch: list[dict[str, Any]]  # what to write in the document
    notes: list[str]  # what to say
    refusals: list[str]  # why it cannot be written


def fit_to_kind(doc: Mapping[str, Any], spec: Mapping[str, Any], patch: list[dict[str, Any]]) -> Fitted:
    """A translation's `patch` of a pod `spec` of `doc` as `doc` can hold it. Knative checks a Service's
    pod spec, Argo passes a step's fields to its pods, the NIM operator only some: never seen by the
    webhook, only the object a file holds meets them, so the offline commands fit the webhook's patch to
    them; the decision stays the webhook's, unaware of all three. The pod fields a kind does not pass to
    its pods (see NIM) cannot be written there: a translated pod that needs one is refused; a pod already
    in the target's words keeps its document as written (the webhook adds them to its pods). Then what
    the controller must allow (`controller_notes`)."""
    carried = _CARRIED.get(kind_key(doc))
    if carried is not None:
        set_here = {op["path"].split("/")[2] for op in patch if op["path"].startswith("/spec/")}
        fields = sorted(set_here - carried[0])
        said = f"{', '.join(fields)}, which {carried[1]}"
        if fields and any(_records(op) for op in patch):
            # A DRA cluster's claims can be asked for as a plain resource instead (KEP-5004: a
            # DeviceClass's extendedResourceName, alpha in 1.34, beta in 1.36), which the kind does take.
            fix = (
                "; or an admin gives a DeviceClass the GPU resource it asks as its extendedResourceName "
                "(Kubernetes 1.34+): an ask naming no GPU model is then served as written"
                if "resourceClaims" in fields
                else ""
            )
            return Fitted([], [], [f"the translated pod needs {said} ({carried[2]}){fix}"])
        if fields:
            return Fitted([], [f"gpuport: the webhook adds {said}, to its pods when they are created"], [])
    return Fitted(patch, controller_notes(doc, spec, patch), [])


def carried_ops(doc: Mapping[str, Any], patch: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The operations of a translation's `patch` that `doc` can hold: those on the pod fields its kind
    passes to its pods (see _CARRIED), and every one for a kind that passes them all."""
    carried = _CARRIED.get(kind_key(doc))
    if carried is None:
        return patch
    return [
        op for op in patch if not op["path"].startswith("/spec/") or op["path"].split("/")[2] in carried[0]
    ]


def _records(op: Mapping[str, Any]) -> bool:
    """Whether a patch operation writes gpuport's record of a translation (so the pod was translated)."""
    value = op.get("value")
    annotations = value.get("annotations") if isinstance(value, Mapping) else None
    return TRANSLATED_FROM in (op["path"].replace("~1", "/"), *(value or ()), *(annotations or ()))


class _Renamed:
    """One entry of a view, held in another map under another name (a GKE accelerator label as KServe's
    annotation; a trainer container's resources as a TrainJob's resourcesPerNode)."""

    def __init__(self, holder: Any, name: str) -> None:
        self._holder, self._name = holder, name

    def __contains__(self, key: str) -> bool:
        return self._name in self._holder

    def __setitem__(self, key: str, value: Any) -> None:
        self._holder[self._name] = value

    def __delitem__(self, key: str) -> None:
        self._holder.pop(self._name, None)


def _argo_steps(doc: Mapping[str, Any], path: Path) -> Iterator[tuple[str, Mapping[str, Any], Any, str]]:
    """(pointer, template, the workflow's spec, why it is reported or "") for each template of an Argo
    workflow that runs containers (see STEP)."""
    spec, where = mapping_at(doc, path[:-3]) or {}, ".".join(path[:-3])
    entries = [(at, t) for at, t in _walk(doc, path[:-1], "") if isinstance(t, Mapping)]
    callers = [t for _, t in entries if "steps" in t or "dag" in t]
    shared = sum(1 for _, t in entries if not any(k in t for k in _NO_POD)) > 1 or _names(spec, "templateRef")
    defaults = sorted(_POD_FIELDS & set(mapping_at(spec, ("templateDefaults",)) or {}))
    whole = ""
    if spec.get("podSpecPatch"):
        whole = f"Argo merges {where}.podSpecPatch into every pod"
    elif defaults:
        whole = f"Argo merges {where}.templateDefaults ({', '.join(defaults)}) into every step"
    elif spec.get("workflowTemplateRef"):
        whole = f"its workflow's spec comes from the WorkflowTemplate {where}.workflowTemplateRef names"
    for at, t in entries:
        if any(isinstance(t.get(k), Mapping) for k in _RUNS):
            yield at, t, spec, whole or _argo_held(t, spec, where, callers, shared)


def _argo_held(t: Mapping[str, Any], spec: Any, where: str, callers: list[Any], shared: bool) -> str:
    """Why a step's pod is not read as the step (see STEP), or ""."""
    if t.get("podSpecPatch"):
        return "Argo merges its podSpecPatch into the pod"
    for field in _PLACEMENT:
        if _sets(t, field):
            continue
        if any(_sets(caller, field) for caller in callers):
            return f"its {field} may be that of the steps or dag template that runs it"
        if shared and _sets(spec, field):
            return f"its {field} is {where}.{field}, which other pods take too"
    if _labelled(spec.get("podMetadata")) and (shared or _labelled(t.get("metadata"))):
        return f"its pod gets the labels and annotations of {where}.podMetadata beside its own"
    read = [c.get("resources") for c in _step_containers(t) if isinstance(c, Mapping)]
    read += [t.get(field) or spec.get(field) for field in _PLACEMENT]
    if _parameter_in([*read, t.get("metadata"), spec.get("podMetadata")]):
        return "Argo fills in its {{...}} parameters only when the step runs"
    return ""


def _step_containers(t: Mapping[str, Any]) -> list[Any]:
    """A step's containers as its pod holds them (see STEP)."""
    containers = [t[k] for k in ("container", "script") if isinstance(t.get(k), Mapping)]
    for listed in (mapping_at(t, ("containerSet",)) or {}).get("containers"), t.get("sidecars"):
        containers += listed if isinstance(listed, list) else []
    return containers


def _step(pointer: str, t: Any, spec: Any) -> tuple[str, Any]:
    """The view of the pod an Argo step makes (see STEP): a default of the workflow's that only this step
    takes is read and written in the workflow's spec."""
    routes = {field: spec for field in _PLACEMENT if not _sets(t, field) and _sets(spec, field)}
    skipped = {*_RUNS, "sidecars", "metadata", *routes}
    entries = {k: v for k, v in t.items() if k not in skipped} | {field: spec[field] for field in routes}
    pod_spec = _View(t, {**entries, "containers": _step_containers(t)}, frozenset({"containers"}), routes)
    if _labelled(spec.get("podMetadata")):  # this step's pod alone gets them, and it has none of its own
        return pointer, _View(
            t, {"metadata": spec["podMetadata"], "spec": pod_spec}, frozenset({"metadata", "spec"})
        )
    metadata = t.get("metadata")
    if not isinstance(metadata, Mapping):  # made in the template once the translation writes to it
        metadata = _View(lambda: _made(t, "metadata"), {}, frozenset())
    return pointer, _View(t, {"metadata": metadata, "spec": pod_spec}, frozenset({"spec"}))


def _sets(node: Any, field: str) -> bool:
    """Whether an Argo template or workflow spec sets a pod field, as Argo tells: an empty affinity is
    one, an empty map, list or name is not (addSchedulingConstraints)."""
    value = node.get(field) if isinstance(node, Mapping) else None
    return value is not None if field == "affinity" else bool(value)


def _labelled(metadata: Any) -> bool:
    return isinstance(metadata, Mapping) and bool(metadata.get("labels") or metadata.get("annotations"))


def _parameter_in(node: Any) -> bool:
    """Whether an Argo parameter ({{...}}) is written anywhere in a node, keys included."""
    if isinstance(node, Mapping):
        return any(_parameter_in(key) or _parameter_in(value) for key, value in node.items())
    if isinstance(node, list):
        return any(_parameter_in(item) for item in node)
    return isinstance(node, str) and "{{" in node


def _names(node: Any, key: str) -> bool:
    if isinstance(node, Mapping):
        return key in node or any(_names(value, key) for value in node.values())
    return isinstance(node, list) and any(_names(item, key) for item in node)


def _made(node: Any, key: str) -> Any:
    """node[key], a mapping made where there is none (after the template's name, where readers look)."""
    if not isinstance(node.get(key), Mapping):
        if hasattr(node, "insert") and key not in node:
            node.insert(1 if next(iter(node), None) == "name" else 0, key, {})
        else:
            node[key] = {}
    return node[key]


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
            for resources in (c.get("resources") for c in items or () if isinstance(c, Mapping)):
                read |= {id(resources), *(id(r) for r in getattr(resources, "sources", ()))}
    left = [(at, name) for at, holder, name in _gpu_asks(doc, is_gpu_resource, "") if id(holder) not in read]
    if not left:
        return ""
    held = _held_back(doc)
    places: dict[str, set[str]] = {}
    for at, _ in left:
        why = next(
            (w for h, w in held if at == h or at.startswith(f"{h}/")), "gpuport reads no pod spec there"
        )
        places.setdefault(why, set()).add(at)
    said = "; ".join(f"{', '.join(sorted(where))}: {why}" for why, where in places.items())
    names = ", ".join(sorted({name for _, name in left}))
    return f"not looked into: {said}; {_PODS}; its GPU asks ({names}) are left as written"


def _held_back(doc: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(JSON Pointer, why) for each place of a kind gpuport opens whose pod it leaves unread on purpose."""
    held = []
    for path in TEMPLATE_PATHS[kind_key(doc)]:
        if path[-1] == INLINE:
            held += [
                (at, _MULTI_NODE_WHY)
                for at, node in _walk(doc, path[:-1], "")
                if isinstance(node, Mapping) and _MULTI_NODE in node
            ]
        elif path[-1] == TRAINER and len(_trainer_overrides(doc)) > 1:
            held.append(("/spec/trainer", _TRAINER_WHY))
        elif path[-1] == STEP:
            held += [(at, why) for at, _, _, why in _argo_steps(doc, path) if why]
            spec = "".join(f"/{part}" for part in path[:-3])
            held += [
                (f"{spec}/{field}", "Argo merges it into the pod of every step")
                for field in ("templateDefaults", "podSpecPatch")
            ]
        elif path[-1] == WRAPPED:
            held += [
                (at, _wrapped_why(kind_key(node)))
                for at, node in _walk(doc, path[:-1], "")
                if isinstance(node, Mapping) and not _plainly_read(kind_key(node))
            ]
    return held


def _wrapped_why(key: tuple[str, str]) -> str:
    """Why a resource an AppWrapper wraps is not opened: read as a view only alone, or not read at all."""
    if key in TEMPLATE_PATHS:
        return f"gpuport reads a wrapped {key[1]} only where written alone"
    return UNREAD_KINDS.get(
        key, f"gpuport does not know where a wrapped {key[1] or 'resource'} keeps its pods"
    )


_RESOURCE_NAME = re.compile(r"[\w.-]+/[\w.-]+")


def _gpu_asks(node: Any, is_gpu_resource: Callable[[str], bool], at: str) -> Iterator[tuple[str, Any, str]]:
    """(JSON Pointer of the mapping that asks, that mapping, the GPU resource) for each GPU resource named
    anywhere in a document: in resources' limits and requests, and in the shapes operators use instead
    (the Spark operator's gpu: {name, quantity}; a plain "gpu" resource, which no Kubernetes resource
    is, in Dynamo's; resource names an Argo podSpecPatch mentions; a KubeVirt device's deviceName)."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            if key in ("limits", "requests") and isinstance(value, Mapping):
                names = (str(n) for n in value if is_gpu_resource(str(n)) or str(n) == "gpu")
                yield from ((at, node, name) for name in names)
            elif key in ("gpus", "hostDevices") and isinstance(value, list):  # KubeVirt's (see _KUBEVIRT)
                for index, device in enumerate(value):
                    name = device.get("deviceName") if isinstance(device, Mapping) else None
                    if isinstance(name, str) and is_gpu_resource(name):
                        yield f"{at}/{key}/{index}", device, name
            elif key == "gpu" and isinstance(value, Mapping) and is_gpu_resource(str(value.get("name"))):
                yield at, node, str(value["name"])
            elif key == "podSpecPatch" and isinstance(value, str):  # Argo's: a patch written as text
                mentioned = sorted({name for name in _RESOURCE_NAME.findall(value) if is_gpu_resource(name)})
                yield from ((f"{at}/podSpecPatch", node, name) for name in mentioned)
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


# Argo gives a step's pod the step's resourceClaims from v4.1.0 on (argoproj/argo-workflows#16587); an
# earlier controller drops the field, and the API server refuses a pod whose containers name a claim it
# does not hold.
_ARGO_CLAIMS = "gpuport: Argo Workflows passes a step's resourceClaims to its pod from v4.1.0 on"


def controller_notes(
    doc: Mapping[str, Any], spec: Mapping[str, Any], patch: list[dict[str, Any]]
) -> list[str]:
    """What the controller that makes `doc`'s pods must allow, or be, before it passes on the fields a
    translation's `patch` adds to a pod `spec` of `doc` (fields the spec had already, it took): Knative's
    flags, the Argo release that reads a step's claims, a Volcano Job's task leaving its gang for another
    scheduler; [] for other kinds."""
    added = {op["path"].removeprefix("/spec/") for op in patch if op["op"] == "add"} - set(spec)
    if kind_key(doc) == _VOLCANO_JOB:
        return _volcano_scheduler(doc, patch)
    if kind_key(doc) in _ARGO_STEPS:  # Argo Rollouts (same group) keeps a plain pod template
        return [_ARGO_CLAIMS] if "resourceClaims" in added else []
    who = _ON_KNATIVE.get(kind_key(doc))
    annotations = mapping_at(doc, ("metadata", "annotations")) or {}
    if who is None or annotations.get(_KSERVE_MODE) in _OFF_KNATIVE:
        return []
    flags = [flag for field, flag in _KNATIVE_FLAGS.items() if field in added]
    warnings = []
    if flags:
        named = flags[0] if len(flags) == 1 else "{" + ",".join(flags) + "}"
        warnings.append(f"gpuport: {who} needs config-features kubernetes.podspec-{named}")
    if "resourceClaims" in added:
        warnings.append(f"gpuport: {who} admits no resourceClaims in a pod spec yet (knative/serving#15332)")
    return warnings


# Volcano's job controller gives a task's pods the Job's spec.schedulerName (Volcano's admission webhook
# defaults it to volcano) unless the task's template names one (job_controller_util.go, createJobPod);
# Volcano gang-schedules them through the Job's PodGroup (minAvailable), which another scheduler never
# reads.
_VOLCANO_JOB = ("batch.volcano.sh", "Job")


def _volcano_scheduler(doc: Mapping[str, Any], patch: list[dict[str, Any]]) -> list[str]:
    """A scheduler layer's name a translation writes in a Volcano Job's task: said, since its pods then
    leave the Job's scheduler and its gang."""
    written = [
        op.get("value") for op in patch if op["path"] == "/spec/schedulerName" and op["op"] != "remove"
    ]
    job = (mapping_at(doc, ("spec",)) or {}).get("schedulerName") or "volcano"
    if not written or written[-1] == job:
        return []
    return [
        f"gpuport: the task's pods are scheduled by {written[-1]}, not by the Volcano Job's {job}: the "
        "Job's gang scheduling (minAvailable, its PodGroup) does not hold for them"
    ]
