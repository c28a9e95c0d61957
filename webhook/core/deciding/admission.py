"""The decision core: an admission request and a read-only context in, a Decision out.

Pure: no I/O, no clock, no randomness. The same input always gives the same Decision, which is what
makes the webhook idempotent under reinvocation and testable without a server.
"""

from collections.abc import Mapping
from typing import Any, NamedTuple

from webhook.core.asks.checks import check_containers
from webhook.core.asks.demand import PodDemand, read_demand, read_selection
from webhook.core.asks.pod_claims import TemplateLookup
from webhook.core.asks.unread import unread_warning
from webhook.core.deciding.context import REWRITES, REWRITES_CHARS, Context
from webhook.core.deciding.decision import CHECKED, Decision, allow, deny
from webhook.core.deciding.review import AdmissionRequest
from webhook.core.rewriting.devices import plan_devices
from webhook.core.rewriting.foreign import is_native, read_foreign
from webhook.core.rewriting.gfd_labels import gfd_label_warnings
from webhook.core.rewriting.inert_annotations import inert_warnings
from webhook.core.rewriting.patch import diff_mutation
from webhook.core.rewriting.podedits import (
    AddTolerations,
    MalformedField,
    PodEdit,
    RecordOriginal,
    apply_edits,
    editable,
    missing_tolerations,
)
from webhook.core.rewriting.queued_templates import queued_as_written
from webhook.core.rewriting.runtime_class import runtime_class_warning
from webhook.core.rewriting.sharing_guard import sharing_refusals
from webhook.core.rewriting.topology_keys import NO_TOPOLOGY_EDITS, plan_topology
from webhook.core.rewriting.translate import TRANSLATED_FROM, Untranslatable, translate_pod
from webhook.core.rewriting.unmet import absent, too_small
from webhook.core.rewriting.whole_gpus import keep_whole, slices_only, whole_only
from webhook.core.vocabulary.workloads import POD_SPEC_PATHS, PodRead, read_at, read_pod, resource_names_in


def mutation_after_checks(
    request: AdmissionRequest, context: Context, read: PodRead, demand: PodDemand
) -> Decision:
    """The /mutate decision once `check_request` has had nothing to say and read the object (`read`, whose
    asks are `demand`); the pipeline runs its gates in between. A pod create is rewritten. The
    template of a workload is decided as its pods will be and said, never patched: its pods are
    rewritten when they are created, and a template changed in place would make GitOps tools report
    drift forever. A workload a controller made (a Deployment's ReplicaSet, a CronJob's Job) never
    gets here (check_request): nobody reads the warnings its controller gets, and its owner was told
    when applied."""
    pod = request.is_pod_create
    try:
        rewrite = rewrite_pod(read, context, demand, hints=pod, record=pod)
    except Untranslatable as exc:
        said = "; ".join(exc.messages)
        if not pod:
            return allow("checked", warnings=[f"gpuport: pods will be refused: {said}"])
        subject = f'{request.kind} "{request.name}"' if request.name else request.kind
        return deny("untranslatable", f"{subject} cannot run on this cluster ({context.target.name}): {said}")
    if not pod:
        warnings = [f"gpuport: pods: {w.removeprefix('gpuport: ')}" for w in rewrite.warnings]
        workload = request.object or {}
        warnings += queued_as_written(request.group, request.kind, workload, read.pod, demand, rewrite.patch)
        return allow("checked", warnings=warnings)
    return allow(
        "mutated" if rewrite.patch else "unchanged",
        patch=rewrite.patch,
        warnings=rewrite.warnings,
        claim_templates=rewrite.claim_templates,
    )


def _nothing_to_say(request: AdmissionRequest) -> bool:
    """A request past the checks that is neither rewritten nor told how its pods will be: a Pod not
    being created, or a workload a controller made (see mutation_after_checks). Its asks go unread."""
    if request.kind == "Pod":
        return not request.is_pod_create
    metadata = (request.object or {}).get("metadata")
    found = metadata.get("ownerReferences") if isinstance(metadata, Mapping) else None
    return isinstance(found, list) and any(isinstance(o, Mapping) and o.get("controller") for o in found)


class Rewrite(NamedTuple):
    patch: list[dict[str, Any]]
    warnings: list[str]
    # ResourceClaimTemplates the rewritten pod refers to (DRA clusters): they must exist before it.
    claim_templates: list[dict[str, Any]]


def rewrite_pod(
    read: PodRead,
    context: Context,
    demand: PodDemand,
    hints: bool = True,
    record: bool = False,
    offline: bool = False,
) -> Rewrite:
    """The JSON Patch that translates a Pod (or a pod template), as read and with its asks (`demand`),
    to the target, and its warnings. A pod already in the target's words changes only where it could
    not schedule as written (the map's GPU-node tolerations) and by placement hints, unless `hints` is
    off (offline, for files, and a workload's template). `offline`: a file being moved to the target,
    not an object applied to this cluster."""
    pod = read.pod
    target = context.target
    if demand.claim_problems and target.dra is None:
        raise Untranslatable(list(demand.claim_problems))  # never left as is: no node here could run it
    refused = sharing_refusals(demand, target, context.dialects)
    spec = read.spec
    # Read once for both steps; the same for the map as declared and as narrowed (see Foreign).
    foreign = read_foreign(spec, demand, context.as_declared, context.dialects)
    native = not demand.asks or is_native(demand, context.as_declared, context.dialects, foreign)
    # A GPU name no map reads is said once, by the unread warning below, not again as a device.
    beside = demand.resource_names.difference(demand.unread) if demand.unread else demand.resource_names
    devices = plan_devices(beside, target, context.dialects, translated=not native)
    # A pod that asks for no GPU is not gpuport's to judge: its topology keys are its own business.
    topology = (
        plan_topology(
            spec, read.annotations, target, context.dialects, translated=not native, labels=read.labels
        )
        if demand.asks or demand.claims.any
        else NO_TOPOLOGY_EDITS
    )
    if refused or devices.refusals or topology.refusals:
        raise Untranslatable(refused + devices.refusals + topology.refusals)
    # A mutation that cannot say whether it may change this pod is asked nothing and runs.
    wanted = [m for m in context.mutations if (w := getattr(m, "wants", None)) is None or w(pod, demand)]
    if native and not hints:
        wanted = []
    warnings = [
        f"gpuport: {why}; a namespace with a GPU quota or GPU limits refuses this pod"
        for why in demand.claims.uncountable
    ]
    warnings += devices.warnings
    if demand.asks:
        warnings += inert_warnings(read.annotations, target)
        warnings += gfd_label_warnings(demand, target, context.dialects)
    if not native or offline:
        # Offline, a file already in the target's words is being moved too (k3s's sample: a plain
        # nvidia.com/gpu through `runtimeClassName: nvidia`), and is refused there all the same. Not on
        # what is applied to this cluster in its own words: an admin may have made the class here.
        warnings += runtime_class_warning(spec, target, context.dialects)
    if demand.unread:
        shared = target.shared
        share_names = tuple(n for n in (shared.memory_resource, shared.core_resource) if n)
        warnings.append(unread_warning(demand.unread, target.name, target.whole_gpu, share_names))
    # Every step decides first, as a plan of edits with their words; the edits are made in one place.
    edits: list[PodEdit] = []
    needed: list[dict[str, Any]] = []
    unmet: list[str] = []  # what no node gives now: said after the edits
    if native and demand.asks:
        if missing_tolerations(spec, target.tolerations):
            edits.append(AddTolerations(target.tolerations))
        off, only = whole_only(demand, target, context.slice_nodes, context.dialects.catalogue)
        if off:
            edits += keep_whole(demand, target, context.dialects, off, context.slice_nodes is not None)
        everywhere = slices_only(only, target)
        warnings += too_small(demand, context.as_declared) + everywhere
        # The pod's models and resource names are the ones read with its demand: no edit above
        # changes them.
        unmet = absent(
            demand.selection.models,
            demand.resource_names,
            target,
            context.present_models,
            context.present_resources,
        )
    elif not native:
        edits, needed = translate_pod(spec, demand, target, context.dialects, context.as_declared, foreign)
    # Before the record of the original, which then holds the keys as written too.
    last = len(edits) - 1 if edits and isinstance(edits[-1], RecordOriginal) else len(edits)
    edits[last:last] = topology.edits
    edits += devices.edits
    # gpuport's record of what it changed comes with its record of the original ask; one a pod brings
    # without that is removed, never passed on as gpuport's word (an Event is recorded from it). A pod
    # gpuport translated keeps both when it is reviewed again (reinvocation, a replayed manifest).
    annotations = read.annotations
    forged = record and REWRITES in annotations and TRANSLATED_FROM not in annotations
    if not edits and not wanted and not forged:
        return Rewrite([], warnings + unmet, [])  # no copy, no diff

    def mutate(view: dict[str, Any]) -> None:
        warnings.extend(apply_edits(view, edits))
        if not native:
            # A translated pod asks for other models and resources now: read them from what it
            # became, when gpuport knows what the nodes have.
            models = demand.selection.models
            if context.present_models is not None:
                models = read_selection(view["spec"], context.dialects).models
            names = resource_names_in(view["spec"]) if context.present_resources is not None else frozenset()
            unmet.extend(absent(models, names, target, context.present_models, context.present_resources))
        warnings.extend(unmet)
        for mutation in wanted:
            warnings.extend(mutation(view, pod))
        if forged:
            del view["metadata"]["annotations"][REWRITES]
        if record and not native and warnings:
            # On the pod itself, for `kubectl describe` and the Event gpuport records once it exists.
            said = "; ".join(w.removeprefix("gpuport: ") for w in warnings)
            editable(view["metadata"], "annotations", dict)[REWRITES] = said[:REWRITES_CHARS]

    try:
        return Rewrite(diff_mutation(pod, mutate), warnings, needed)
    except MalformedField as exc:  # said like any pod that cannot run here, never a crash
        raise Untranslatable([f"cannot edit the pod: {exc}"]) from None


class TemplateDecision(NamedTuple):
    """A pod or pod template decided as the webhook decides it: refused (the checks' or the
    translation's words, and `rewrite` None) or rewritten."""

    refusals: list[str]
    rewrite: Rewrite | None


def decide_template(
    template: Mapping[str, Any],
    context: Context,
    *,
    hints: bool = True,
    templates: TemplateLookup | None = None,
) -> TemplateDecision:
    """The checks, then the translation: the one decision `translate`, `preflight`, `explain` and a
    workload's preview reach, in the order the webhook's pipeline runs them on a pod (which puts its
    gates between the two)."""
    read = read_pod(template)
    violations = check_containers(read.containers, context.target, context.dialects)
    if violations:
        return TemplateDecision([v.message for v in violations], None)
    try:
        demand = read_demand(read, context.dialects, context.claim_objects(templates) if templates else None)
        return TemplateDecision([], rewrite_pod(read, context, demand, hints=hints, offline=True))
    except Untranslatable as exc:
        return TemplateDecision(list(exc.messages), None)


def check_request(request: AdmissionRequest, context: Context) -> Decision | PodRead:
    """A denial, or an allowance for requests gpuport does not look at or has nothing more to say
    of; else the object's pod spec as read (a Pod's, a workload's template's), which every step
    after the checks walks."""
    if request.operation not in ("CREATE", "UPDATE"):
        return allow("operation-ignored")
    path = POD_SPEC_PATHS.get((request.group, request.kind))
    if path is None:
        return allow("kind-ignored")
    quiet = _nothing_to_say(request)  # still checked: the checks answer for every object
    read = read_at(request.object or {}, path)
    if read is None:
        return allow("no-pod-spec")
    violations = check_containers(read.containers, context.target, context.dialects)
    if not violations:
        return CHECKED if quiet else read
    subject = f'{request.kind} "{request.name}"' if request.name else request.kind
    if len(violations) == 1:
        return deny(violations[0].reason, f"{subject}: {violations[0].message}")
    listed = "; ".join(f"({n}) {v.message}" for n, v in enumerate(violations, 1))
    return deny(violations[0].reason, f"{subject} has {len(violations)} problems: {listed}")
