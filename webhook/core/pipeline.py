"""The admission pipeline: which steps a review goes through, in which order, on which route.

The pod's GPU asks are read once per review and handed to every step. The gates (limits, quota) are
whatever the server was built with: they satisfy `Gate`, and may read the cluster, but the order and
the rule that the first refusal wins are decided here, not in the HTTP adapter.
"""

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from webhook.core.admission import Context, decide_mutation, decide_validation
from webhook.core.checks import is_extended_resource
from webhook.core.claims import CLASS_RESOURCE_PREFIX
from webhook.core.decision import Decision, deny
from webhook.core.decision_key import decision_key
from webhook.core.demand import PodDemand, read_demand
from webhook.core.pod_claims import TemplateLookup
from webhook.core.review import AdmissionRequest
from webhook.core.workloads import container_specs, resource_section


class Memo(Protocol):
    """Remembered (demand, decision) pairs by decision key, valid for one context only."""

    def get(self, key: bytes, context: Context) -> tuple[PodDemand, Decision] | None: ...

    def put(self, key: bytes, context: Context, value: tuple[PodDemand, Decision]) -> None: ...


class ClaimTemplates(Protocol):
    """The cluster's ResourceClaimTemplates: read for the claims a pod names, made for the pods
    gpuport gives claims."""

    def ensure(self, namespace: str, templates: Sequence[Mapping[str, Any]]) -> str | None:
        """Make each template exist in `namespace`; None when they all do, else why not."""

    def referenced(self, namespace: str, pod: Mapping[str, Any]) -> TemplateLookup:
        """The templates the pod's claims name, as far as they could be read."""


def read_pod_demand(
    pod: Mapping[str, Any], namespace: str, context: Context, claims: ClaimTemplates | None
) -> PodDemand:
    """The pod's asks, its DRA claims' included when there is a cluster to read templates from
    (the one way every step reads a pod: mutate, validate, and the quota of pods already running)."""
    spec = pod.get("spec")
    lookup = None
    if (
        claims is not None
        and isinstance(spec, Mapping)
        and (spec.get("resourceClaims") or _foreign(spec, context))
    ):
        lookup = claims.referenced(namespace, pod)
    return read_demand(pod, context.dialects, lookup)


def _foreign(spec: Mapping[str, Any], context: Context) -> bool:
    """Whether a container asks for an extended resource no loaded map reads, which a DeviceClass of
    the cluster may stand for (KEP-5004): then the cluster's classes are read too."""
    return any(
        name not in context.dialects
        and (is_extended_resource(name) or name.startswith(CLASS_RESOURCE_PREFIX))
        for container in container_specs(spec)
        for section in ("limits", "requests")
        for name in resource_section(container, section)
    )


class Gate(Protocol):
    def admit(self, request: AdmissionRequest, context: Context, demand: PodDemand) -> Decision | None:
        """A refusal, or None when this gate has nothing against the pod create. Called only for pod
        creates, with the demand the pipeline read once."""


def mutate(
    review: AdmissionRequest,
    context: Context,
    limit_gate: Gate | None = None,
    memo: Memo | None = None,
    claims: ClaimTemplates | None = None,
) -> Decision:
    """/mutate: the limit gate first (a LimitRange default would change what is translated), then the
    translation, then (on a DRA cluster) the claim templates the translated pod refers to. With a
    memo, a pod create equal in everything the decision reads to a recent one (the next replica of a
    ReplicaSet) takes that one's demand and decision; the gate and the templates still run."""
    return with_claim_templates(review, _decide(review, context, limit_gate, memo, claims), claims)


def with_claim_templates(
    review: AdmissionRequest, decision: Decision, claims: ClaimTemplates | None
) -> Decision:
    """The decision, once the templates it needs exist; a dry run writes nothing."""
    if not decision.allowed or not decision.claim_templates or review.dry_run:
        return decision
    if claims is None:
        return deny(
            "claim-templates-unavailable",
            "this cluster asks for GPUs by ResourceClaim, and gpuport has no cluster access to create "
            "the ResourceClaimTemplate the pod needs (set GPUPORT_CLUSTER and apply "
            "manifests/optional/dra-claim-templates.yaml)",
        )
    problem = claims.ensure(review.namespace, decision.claim_templates)
    return deny("claim-template-failed", problem) if problem else decision


def _decide(
    review: AdmissionRequest,
    context: Context,
    limit_gate: Gate | None,
    memo: Memo | None,
    claims: ClaimTemplates | None,
) -> Decision:
    key = decision_key(review, context.metadata_keys) if memo is not None else None
    remembered = memo.get(key, context) if memo is not None and key is not None else None
    demand: PodDemand | None
    if remembered is not None:
        demand = remembered[0]
    else:
        demand = (
            read_pod_demand(review.object or {}, review.namespace, context, claims)
            if review.is_pod_create
            else None
        )
    if demand is not None and limit_gate is not None:
        refused = limit_gate.admit(review, context, demand)
        if refused:
            return refused
    if remembered is not None:
        return remembered[1]
    decision = decide_mutation(review, context, demand)
    if memo is not None and key is not None and demand is not None:
        memo.put(key, context, (demand, decision))
    return decision


def validate(
    review: AdmissionRequest,
    context: Context,
    gates: Sequence[Gate] = (),
    claims: ClaimTemplates | None = None,
) -> Decision:
    """/validate: the checks, then each gate in order (limits before quota) until one refuses. The
    gates see the devices the pod's DRA claims ask for as well: one budget for both worlds."""
    decision = decide_validation(review, context)
    if not (decision.allowed and gates and review.is_pod_create):
        return decision
    demand = read_pod_demand(review.object or {}, review.namespace, context, claims)
    for gate in gates:
        decision = gate.admit(review, context, demand) or decision
        if not decision.allowed:
            break
    return decision
