"""The decision core: an admission request and a read-only context in, a Decision out.

Pure: no I/O, no clock, no randomness. The same input always gives the same Decision, which is what
makes the webhook idempotent under reinvocation and testable without a server.
"""

from collections.abc import Mapping
from typing import Any, NamedTuple

from webhook.core.asks.checks import check_containers
from webhook.core.asks.demand import PodDemand, read_demand, read_selection
from webhook.core.asks.pod_claims import TemplateLookup
from webhook.core.deciding.context import REWRITES, REWRITES_CHARS, Context
from webhook.core.deciding.decision import CHECKED, Decision, allow, deny
from webhook.core.deciding.review import AdmissionRequest
from webhook.core.rewriting.patch import diff_mutation
from webhook.core.rewriting.podedits import MalformedField, add_tolerations, editable, missing_tolerations
from webhook.core.rewriting.sharing_guard import sharing_refusals
from webhook.core.rewriting.translate import (
    TRANSLATED_FROM,
    Untranslatable,
    gpus_on_one_node,
    is_native,
    read_foreign,
    translate_pod,
)
from webhook.core.rewriting.whole_gpus import SliceMarker, keep_whole, slices_only, whole_only
from webhook.core.vocabulary.platform import CloudMap
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
) -> Rewrite:
    """The JSON Patch that translates a Pod (or a pod template), as read and with its asks (`demand`),
    to the target, and its warnings. A pod already in the target's words changes only where it could
    not schedule as written (the map's GPU-node tolerations) and by placement hints, unless `hints` is
    off (offline, for files)."""
    pod = read.pod
    if demand.claim_problems and context.target.dra is None:
        raise Untranslatable(list(demand.claim_problems))  # never left as is: no node here could run it
    refused = sharing_refusals(demand, context.target, context.dialects)
    if refused:
        raise Untranslatable(refused)
    spec = read.spec
    # Read once for both steps; the same for the map as declared and as narrowed (see Foreign).
    foreign = read_foreign(spec, demand, context.as_declared, context.dialects)
    native = not demand.asks or is_native(demand, context.as_declared, context.dialects, foreign)
    # A mutation that cannot say whether it may change this pod is asked nothing and runs.
    wanted = [m for m in context.mutations if (w := getattr(m, "wants", None)) is None or w(pod, demand)]
    if native and not hints:
        wanted = []
    tolerate = bool(demand.asks) and missing_tolerations(spec, context.target.tolerations)
    uncounted = [
        f"gpuport: {why}; a namespace with a GPU quota or GPU limits refuses this pod"
        for why in demand.claims.uncountable
    ]
    off: tuple[SliceMarker, ...] = ()
    if native and demand.asks:
        uncounted += _too_small(demand, context.as_declared)
        off, only = whole_only(demand, context.target, context.slice_nodes)
        uncounted += slices_only(only, context.target)
    # gpuport's record of what it changed comes with its record of the original ask; one a pod brings
    # without that is removed, never passed on as gpuport's word (an Event is recorded from it). A pod
    # gpuport translated keeps both when it is reviewed again (reinvocation, a replayed manifest).
    annotations = read.annotations
    forged = record and REWRITES in annotations and TRANSLATED_FROM not in annotations
    if native and not wanted and not tolerate and not forged and not off:
        # No copy, no diff; the pod's models and resource names are the ones read with its demand.
        absent = _absent(spec, context, demand.selection.models, demand.resource_names) if demand.asks else []
        return Rewrite([], uncounted + absent, [])
    warnings: list[str] = uncounted
    needed: list[dict[str, Any]] = []

    def mutate(view: dict[str, Any]) -> None:
        if native:
            warnings.extend(add_tolerations(view["spec"], context.target.tolerations if tolerate else ()))
            seen = context.slice_nodes is not None
            warnings.extend(keep_whole(view["spec"], demand, context.target, context.dialects, off, seen))
        else:
            translation = translate_pod(
                view, demand, context.target, context.dialects, context.as_declared, foreign
            )
            warnings.extend(translation.warnings)
            needed.extend(translation.claim_templates)
        # A translated pod asks for other models now: read them from what it became (only asked
        # about when gpuport knows which models the nodes have).
        models = demand.selection.models
        if not native and context.present_models is not None:
            models = read_selection(view["spec"], context.dialects).models
        if demand.asks:  # as on the path without a copy: a pod asking for nothing waits for nothing
            warnings.extend(_absent(view["spec"], context, models))
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
        return TemplateDecision([], rewrite_pod(read, context, demand, hints=hints))
    except Untranslatable as exc:
        return TemplateDecision(list(exc.messages), None)


def _too_small(demand: PodDemand, target: CloudMap) -> list[str]:
    """A pod in this cluster's words pinned to node kinds (instance types, VM sizes) none of which holds
    the GPUs it asks for on one node, by the map: said, never changed (the map may not know a size)."""
    needed = 0
    warnings = []
    for key, operator, values in demand.constraints:
        label = next((m for m in target.model_labels if m.label == key and m.gpus), None)
        if label is None or operator != "In" or not values or not all(v in label.gpus for v in values):
            continue  # a size the map does not know may well hold it
        needed = needed or gpus_on_one_node(demand)
        if not any(label.holds(v, needed) for v in values):
            most = max(label.gpus[v] for v in values)
            warnings.append(
                f"gpuport: no {key} named ({', '.join(values)}) holds {needed} GPUs (at most {most}): "
                "it stays Pending"
            )
    return warnings


def _absent(
    spec: Mapping[str, Any],
    context: Context,
    chosen: frozenset[str] | None,
    names: frozenset[str] | None = None,
) -> list[str]:
    """What the pod now asks for (`chosen` models, its GPU resources) that no node has at the moment:
    said, never changed (an autoscaler may add the node; gpuport does not second-guess a pod written
    for this cluster). `names`: every resource name of the spec's containers, when already read."""
    warnings = []
    if context.present_models is not None and chosen and not chosen & context.present_models:
        warnings.append(f"gpuport: no node has {' or '.join(sorted(chosen))} now; the pod waits for one")
    if context.present_resources is not None:
        if names is None:
            names = resource_names_in(spec)
        for name in sorted(n for n in names if context.target.is_accelerator(n)):
            if name not in context.present_resources:
                warnings.append(f"gpuport: no node offers {name} now; the pod waits for one")
    return warnings


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
