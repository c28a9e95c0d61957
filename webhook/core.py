"""The decision core: an admission request and a read-only context in, a Decision out.

Pure: no I/O, no clock, no randomness. The same input always gives the same Decision, which is what
makes the webhook idempotent under reinvocation and testable without a server.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.checks import Violation, check_pod_spec
from webhook.decision import Decision, allow, deny
from webhook.demand import PodDemand, read_demand, read_selection
from webhook.patch import diff_mutation
from webhook.platform import CloudMap, Dialects
from webhook.review import AdmissionRequest
from webhook.translate import Untranslatable, is_native, translate_pod
from webhook.workloads import find_pod_spec, pod_spec_path

# A mutation edits the editable view of a Pod in place and returns one warning line per change.
# It also receives the whole original Pod, read-only, for context it may not edit.
Mutation = Callable[[dict[str, Any], Mapping[str, Any]], list[str]]


@dataclass(frozen=True)
class Context:
    target: CloudMap
    dialects: Dialects
    # Extra rewrites after translation (placement hints plug in here).
    mutations: tuple[Mutation, ...] = ()
    # GPU models some node has now (from the inventory); None when gpuport has no view of the cluster.
    present_models: frozenset[str] | None = None


def decide_mutation(request: AdmissionRequest, context: Context, demand: PodDemand | None = None) -> Decision:
    """The /mutate path: deny what can never run, then rewrite Pods (never workload templates).
    `demand` is the pod's, when the caller has already read it."""
    checked = _check(request, context)
    if checked is not None:
        return checked
    if not request.is_pod_create:
        return allow("checked")
    pod = request.object or {}
    try:
        patch, warnings = rewrite_pod(pod, context, demand)
    except Untranslatable as exc:
        return deny("untranslatable", untranslatable_message(request, context.target, exc))
    return allow("mutated" if patch else "unchanged", patch=patch, warnings=warnings)


def rewrite_pod(
    pod: Mapping[str, Any], context: Context, demand: PodDemand | None = None
) -> tuple[list[dict[str, Any]], list[str]]:
    """The JSON Patch that translates a Pod (or a pod template) to the target, and its warnings."""
    demand = demand if demand is not None else read_demand(pod, context.dialects)
    wanted = [m for m in context.mutations if getattr(m, "wants", lambda pod: True)(pod)]
    native = not demand.asks or is_native(pod.get("spec") or {}, demand, context.target, context.dialects)
    if native and not wanted:
        return [], []  # the common case pays for no copy and no diff
    warnings: list[str] = []

    def mutate(view: dict[str, Any]) -> None:
        if not native:
            warnings.extend(translate_pod(view, demand, context.target, context.dialects))
        if not native and context.present_models is not None:
            chosen = read_selection(view["spec"], context.dialects).models
            if chosen and not chosen & context.present_models:
                warnings.append(
                    f"gpuport: no node has {' or '.join(sorted(chosen))} now; the pod waits for one"
                )
        for mutation in wanted:
            warnings.extend(mutation(view, pod))

    return diff_mutation(pod, mutate), warnings


def untranslatable_message(request: AdmissionRequest, target: CloudMap, exc: Untranslatable) -> str:
    subject = f'{request.kind} "{request.name}"' if request.name else request.kind
    return f"{subject} cannot run on this cluster ({target.name}): " + "; ".join(exc.messages)


def decide_validation(request: AdmissionRequest, context: Context) -> Decision:
    """The /validate path: the same checks, on the final object after every mutating webhook."""
    checked = _check(request, context)
    return checked if checked is not None else allow("checked")


def _check(request: AdmissionRequest, context: Context) -> Decision | None:
    """A denial, an allowance for requests gpuport does not look at, or None to go on."""
    if request.operation not in ("CREATE", "UPDATE"):
        return allow("operation-ignored")
    path = pod_spec_path(request.group, request.kind)
    if path is None:
        return allow("kind-ignored")
    pod_spec = find_pod_spec(request.object or {}, path)
    if pod_spec is None:
        return allow("no-pod-spec")
    violations = check_pod_spec(pod_spec, path, context.target, context.dialects)
    if violations:
        return deny(violations[0].reason, denial_message(request, violations))
    return None


def denial_message(request: AdmissionRequest, violations: list[Violation]) -> str:
    subject = f'{request.kind} "{request.name}"' if request.name else request.kind
    if len(violations) == 1:
        return f"{subject}: {violations[0].message}"
    listed = "; ".join(f"({n}) {v.message}" for n, v in enumerate(violations, 1))
    return f"{subject} has {len(violations)} problems: {listed}"
