"""The admission pipeline: which steps a review goes through, in which order, on which route.

On both routes the checks answer first (a fractional GPU is told what to ask for instead, whatever a
namespace's limits say), then the gates, then (on /mutate) the translation. The pod's GPU asks are
read once per review and handed to every step. The gates (limits, quota) are whatever the server was
built with: they satisfy `Gate` and may read the cluster, but which runs on which route, in which
order, and the rule that the first refusal wins are decided here (`Gates`), not in the HTTP adapter.
"""

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from webhook.core.asks.charged_templates import named_templates, recorded_uids, recording_patch
from webhook.core.asks.demand import PodDemand, read_demand, reads_claims
from webhook.core.asks.pod_claims import TemplateLookup
from webhook.core.deciding.admission import check_request, mutation_after_checks
from webhook.core.deciding.context import Context
from webhook.core.deciding.decision import CHECKED, Decision, deny
from webhook.core.deciding.decision_key import decision_key
from webhook.core.deciding.remembered import Memo, recall, remember
from webhook.core.deciding.review import AdmissionRequest
from webhook.core.vocabulary import dra_api
from webhook.core.vocabulary.workloads import PodRead, read_pod


class ClaimTemplates(Protocol):
    """The cluster's ResourceClaimTemplates: read for the claims a pod names, made for the pods
    gpuport gives claims. One may say `served = False` (the API server serves no resource.k8s.io):
    then no DeviceClass is asked for a pod that names no claim."""

    def ensure(self, namespace: str, templates: Sequence[Mapping[str, Any]]) -> str | None:
        """Make each template exist in `namespace`; None when they all do, else why not."""

    def referenced(
        self, namespace: str, pod: Mapping[str, Any], uids: Mapping[str, str] | None = None
    ) -> TemplateLookup:
        """The templates the pod's claims name, as far as they could be read; those in `uids` (name →
        uid) as the template of that uid, or a reason why not (charged_templates)."""

    def charged_uids(self, namespace: str, names: Sequence[str], context: Context) -> Mapping[str, str]:
        """The uid of each named template as gpuport reads it now, where there is a GPU budget to
        charge it to ({} elsewhere): what /mutate records on the pod."""


def read_pod_demand(
    read: PodRead,
    namespace: str,
    context: Context,
    claims: ClaimTemplates | None,
    charged: bool = False,
) -> PodDemand:
    """The asks of a pod as read, its DRA claims' included when there is a cluster to read templates
    from (the one way every step reads a pod: mutate, validate, and the quota of pods already running).
    `charged`: a pod create being charged, whose templates are those its annotation records by uid."""
    lookup = None
    # A GPU name a map reads is read against the cluster's classes too: one may stand for it (KEP-5004).
    # Where the API server serves no resource.k8s.io (`served` False) no class can: such a pod reads the
    # same without the lookup, which cost about as much as the rest of its reading, twice a pod.
    if claims is not None and (
        reads_claims(read, context.dialects)
        or (getattr(claims, "served", True) and any(n in context.dialects for n in read.resource_names))
    ):
        uids = recorded_uids(read.pod) if charged else None
        found = (
            claims.referenced(namespace, read.pod, uids) if uids else claims.referenced(namespace, read.pod)
        )
        lookup = context.claim_objects(found)
    return read_demand(read, context.dialects, lookup)


class Gate(Protocol):
    def admit(self, request: AdmissionRequest, context: Context, demand: PodDemand) -> Decision | None:
        """A refusal, or None when this gate has nothing against the pod create. Called only for pod
        creates, with the demand the pipeline read once."""

    # It may also say up front, `concerns(request, context) -> bool`, whether it can have anything to
    # say of the pod create whatever it asks: most namespaces hold no GPU budget, and their pods then
    # skip /validate's read of the asks.


def concerned(gates: tuple[Gate, ...], request: AdmissionRequest, context: Context) -> tuple[Gate, ...]:
    """The gates that may have something to say of this pod create (all, for a gate that cannot tell)."""
    if not gates:
        return gates
    return tuple(g for g in gates if (says := getattr(g, "concerns", None)) is None or says(request, context))


@runtime_checkable
class UpdateGate(Protocol):
    def admit_update(
        self, request: AdmissionRequest, context: Context, demand: PodDemand, before: PodDemand
    ) -> Decision | None:
        """A refusal, or None when this gate has nothing against the pod update: what the pod asks
        after it (`demand`) and before (`before`), each read once by the pipeline."""


class ClaimGate(Protocol):
    def admit_claim(self, request: AdmissionRequest, context: Context) -> Decision | None:
        """A refusal, or None when this gate has nothing against the ResourceClaim create or update."""


@dataclass(frozen=True)
class Gates:
    """The gates a server was built with (None: not in this server), and which runs where."""

    limits: Gate | None = None
    quota: Gate | None = None
    charges: UpdateGate | None = None  # a pod's charge annotations kept as its create set them
    # a claim made under a name pods already hold, or marked as a pod's unlike its template
    claim_creates: ClaimGate | None = None

    # Worked out once per server, not per review: every admission asks for its route's order.
    @functools.cached_property
    def on_mutate(self) -> tuple[Gate, ...]:
        # Before the translation: a LimitRange default would change what is translated.
        return tuple(gate for gate in (self.limits,) if gate is not None)

    @functools.cached_property
    def on_validate(self) -> tuple[Gate, ...]:
        # Limits before quota: a pod the limits refuse must not hold a quota reservation.
        return tuple(gate for gate in (self.limits, self.quota) if gate is not None)

    @functools.cached_property
    def on_pod_update(self) -> tuple[UpdateGate, ...]:
        # An update can move a running pod into a scoped quota or change its GPU share (pods.go's
        # podMatchesScopeFunc reads activeDeadlineSeconds; KAI and HAMi read annotations), and neither
        # the built-in evaluator nor LimitRanger looks at pod updates, so nothing else would count the
        # move. Limits first (the refusal names the limit), then the charge annotations kept where
        # there is a budget, then quota (a pod refused before it holds no reservation).
        found = (self.limits, self.charges, self.quota)
        return tuple(gate for gate in found if isinstance(gate, UpdateGate))


NO_GATES = Gates()


def mutate(
    review: AdmissionRequest,
    context: Context,
    gates: Gates = NO_GATES,
    memo: Memo | None = None,
    claims: ClaimTemplates | None = None,
) -> Decision:
    """/mutate: the checks, the gates, then the translation, then (on a DRA cluster) the claim
    templates the translated pod refers to. With a memo, a pod create equal in everything the
    decision reads to a recent one (the next replica of a ReplicaSet) takes that one's demand and
    decision; the gates and the templates still run."""
    decision = with_claim_templates(review, decide(review, context, gates, memo, claims), claims)
    return with_charged_templates(review, decision, context, claims)


def with_charged_templates(
    review: AdmissionRequest, decision: Decision, context: Context, claims: ClaimTemplates | None
) -> Decision:
    """The decision with the uid of each template the pod names recorded on it (charged_templates),
    where there is a budget: never remembered with the decision, since a template may be made again."""
    if claims is None or not decision.allowed or not review.is_pod_create or review.object is None:
        return decision
    names = named_templates(review.object, decision.claim_templates)
    uids = claims.charged_uids(review.namespace, names, context) if names else None
    if not uids:
        return decision
    return decision._replace(patch=recording_patch(review.object, decision.patch, uids))


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


def decide(
    review: AdmissionRequest,
    context: Context,
    gates: Gates = NO_GATES,
    memo: Memo | None = None,
    claims: ClaimTemplates | None = None,
) -> Decision:
    """The /mutate decision before the claim templates it needs are made: what `mutate` answers on a
    cluster that has them, and what the tests and the bench ask of the core alone."""
    key = decision_key(review, context.metadata_keys) if memo is not None else None
    names, remembered = recall(memo, key, review.object or {}, context, review.name)
    read: PodRead | None = None  # None: the decision is the remembered one
    if remembered is not None:
        demand, decision = remembered
        if demand is None:
            return decision  # the checks refused it: nothing after them runs
        pod_create = True  # a key is made for pod creates alone
    else:
        # The object is read once, by the checks: the gates and the translation walk that reading.
        checked = check_request(review, context)
        if isinstance(checked, Decision):
            if memo is not None and key is not None and not checked.allowed:
                entry = remember(None, checked, review.object or {}, names, context.metadata_keys)
                memo.put(key, context, entry)
            return checked
        read = checked
        pod_create = review.is_pod_create
        # A workload's template is read without its claims: its pods' are read when they are created.
        demand = read_pod_demand(read, review.namespace, context, claims if pod_create else None)
    if pod_create:  # remembered or not: the gates read the cluster as it is now
        for gate in concerned(gates.on_mutate, review, context):
            refused = gate.admit(review, context, demand)
            if refused is not None:
                return refused
    if read is None:
        return decision
    decision = mutation_after_checks(review, context, read, demand)
    if memo is not None and key is not None:  # a key is made for pod creates alone
        memo.put(key, context, remember(demand, decision, read.pod, names, context.metadata_keys))
    return decision


def validate(
    review: AdmissionRequest,
    context: Context,
    gates: Gates = NO_GATES,
    claims: ClaimTemplates | None = None,
    memo: Memo | None = None,
) -> Decision:
    """/validate: the checks, then each gate in order until one refuses (for a pod update, the update
    gates). The gates see the devices the pod's DRA claims ask for as well: one budget for both worlds.
    With a memo (its own: it holds pods as mutated), a pod create the checks passed whose key, its
    name left out, is a recent one's (the next replica, named by now) takes that one's demand; the
    gates still run, on the cluster as it is now."""
    if review.is_pod_update:
        # A pod's containers cannot change once it exists: what the checks say was said at its create.
        return validate_pod_update(review, context, gates, claims) or CHECKED
    if review.kind == "ResourceClaim" and review.group == dra_api.GROUP:
        if review.operation not in ("CREATE", "UPDATE") or gates.claim_creates is None:
            return CHECKED
        return gates.claim_creates.admit_claim(review, context) or CHECKED
    order = concerned(gates.on_validate, review, context) if review.is_pod_create else gates.on_validate
    key = None
    if memo is not None and order and review.is_pod_create:
        # The API server has named the pod by now, each replica apart. Neither the checks that pass nor
        # the demand read the name (a refusal quotes it: refusals are not remembered, decided afresh),
        # which the key leaves out; recall is given none.
        key = decision_key(review, context.metadata_keys)
    names, remembered = recall(memo, key, review.object or {}, context)
    if remembered is not None and remembered[0] is not None:
        demand = remembered[0]
    else:
        read = check_request(review, context)
        if isinstance(read, Decision):
            return read
        if not (order and review.is_pod_create):
            return CHECKED
        demand = read_pod_demand(read, review.namespace, context, claims, charged=True)
        if memo is not None and key is not None:
            memo.put(key, context, remember(demand, CHECKED, read.pod, names, context.metadata_keys))
    decision = CHECKED
    for gate in order:
        decision = gate.admit(review, context, demand) or decision
        if not decision.allowed:
            break
    return decision


def validate_pod_update(
    review: AdmissionRequest,
    context: Context,
    gates: Gates = NO_GATES,
    claims: ClaimTemplates | None = None,
) -> Decision | None:
    """A refusal of a pod update that would take the pod past a GPU limit, change an annotation its
    charge is read from in a namespace with a GPU budget, or take it past a quota it newly falls under
    or past one whose charge it raises (the webhook sends only updates that set activeDeadlineSeconds
    or change a GPU annotation); None otherwise. Both versions are read the same way a create is."""
    if not gates.on_pod_update or review.old_object is None:
        return None
    namespace = review.namespace
    demand = read_pod_demand(read_pod(review.object or {}), namespace, context, claims)
    before = read_pod_demand(read_pod(review.old_object), namespace, context, claims)
    for gate in gates.on_pod_update:
        refused = gate.admit_update(review, context, demand, before)
        if refused is not None:
            return refused
    return None
