"""Where a pod names a topology key, read and edited: pod affinity and anti-affinity terms (required and
preferred), topology spread constraints, and the exclusive-placement annotations JobSet and
LeaderWorkerSet turn into pod affinity.

A topology key is a node label whose value groups nodes into domains; the scheduler reads it from the
nodes when it places the pod. What it does with a node that lacks the key depends on where the key is
written (kubernetes/kubernetes pkg/scheduler/framework/plugins, v1.32):

- required pod affinity (interpodaffinity, satisfyPodAffinity): such a node is filtered out, even for
  the first pod of a group ("node(s) didn't match pod affinity rules");
- required pod anti-affinity (satisfyPodAntiAffinity, satisfyExistingPodsAntiAffinity): such a node
  passes; the exclusivity the term asked for is silently gone;
- a spread constraint with whenUnsatisfiable DoNotSchedule (podtopologyspread Filter): such a node is
  filtered out ("node(s) didn't match pod topology spread constraints (missing required label)"),
  whatever nodeAffinityPolicy and nodeTaintsPolicy say (those choose the nodes whose pods are counted);
- preferred terms and ScheduleAnyway constraints only score nodes: such a node is scored without them.

JobSet copies `alpha.jobset.sigs.k8s.io/exclusive-topology` from the JobSet (or a replicated job's
template) to its Jobs and pods, and its pod webhook makes it a required pod affinity on the key (the
job's pods together) and a required anti-affinity (no other job in that domain); LeaderWorkerSet's
`leaderworkerset.sigs.k8s.io/exclusive-topology` does the same for a group. So the annotation is read as
a required co-location.

Kueue's Topology Aware Scheduling reads a topology key from each PodSet's pod template
(kueue.sigs.k8s.io, "Run Workloads with Topology-Aware Scheduling"): `podset-required-topology` admits
the workload only where all its pods fit in one domain of that level, `podset-slice-required-topology`
each slice of them, `podset-preferred-topology` tries the level and falls back to wider ones. A level
must be one of the Topology object's; a key no node carries is a level no domain has, so the workload
is never admitted (it stays suspended). The required two are read as a required co-location, the
preferred one as scoring only.

KAI Scheduler's topology-aware scheduling reads `kai.scheduler/topology-required-placement` and
`-preferred-placement` from the workload (its pod grouper's top owner), each naming a level of a KAI
Topology by its node label: read the same way, on a pod and, by `translate`, on the workload object.

Pure walking: which keys a pod names where (`topology_uses`), and the edit that renames or removes them
(`rewrite_topology`). What to do with each key is topology_keys.py's choice.
"""

from collections.abc import Iterator, Mapping
from typing import Any, Literal, NamedTuple

__all__ = [
    "EXCLUSIVE_ANNOTATIONS",
    "JOBSET_NAME",
    "KAI_ANNOTATIONS",
    "KAI_TOPOLOGY",
    "LWS_NAME",
    "WORKLOAD_ANNOTATIONS",
    "TopologyUse",
    "rewrite_topology",
    "topology_uses",
]

# The annotations a workload's controller copies to its pods as pod affinity (JobSet, LeaderWorkerSet).
WORKLOAD_ANNOTATIONS = (
    "alpha.jobset.sigs.k8s.io/exclusive-topology",
    "leaderworkerset.sigs.k8s.io/exclusive-topology",
    "leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology",
)
# Kueue's, on a pod template: whether it holds the pods to the level (else it only prefers it).
_KUEUE_ANNOTATIONS = {
    "kueue.x-k8s.io/podset-required-topology": True,
    "kueue.x-k8s.io/podset-slice-required-topology": True,
    "kueue.x-k8s.io/podset-preferred-topology": False,
}
# KAI Scheduler's, on the workload its pod grouper reads (the pods' top owner: a Job, a PyTorchJob, a pod
# no controller owns), naming a level of the Topology `kai.scheduler/topology` names by its node label
# (KAI's docs/topology): required, it places the workload on no node lacking the label; preferred, it
# falls back to a wider level.
KAI_ANNOTATIONS = {
    "kai.scheduler/topology-required-placement": True,
    "kai.scheduler/topology-preferred-placement": False,
}
KAI_TOPOLOGY = "kai.scheduler/topology"
_SCHEDULER_ANNOTATIONS = {**_KUEUE_ANNOTATIONS, **KAI_ANNOTATIONS}
# Every annotation of a pod whose value is a topology key that places the pod with others.
EXCLUSIVE_ANNOTATIONS = (*WORKLOAD_ANNOTATIONS, *_SCHEDULER_ANNOTATIONS)

# The annotation JobSet's controller puts on its pods naming their JobSet (jobset.sigs.k8s.io/v1alpha2
# JobSetNameKey; labelAndAnnotateObject sets it as a label and as an annotation): a placement refused on
# a pod names the JobSet it was copied from.
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
# The label LeaderWorkerSet's controller puts on every pod of its groups naming the LeaderWorkerSet
# (lws.sigs.k8s.io "Labels, Annotations and Environment Variables"); it copies its exclusive-topology
# annotations to them too, so a refused placement names the LeaderWorkerSet to fix.
LWS_NAME = "leaderworkerset.sigs.k8s.io/name"

Place = Literal["affinity", "anti-affinity", "spread", "exclusive"]
_TERMS: tuple[tuple[str, Place], ...] = (("podAffinity", "affinity"), ("podAntiAffinity", "anti-affinity"))
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


class TopologyUse(NamedTuple):
    key: str
    place: Place
    required: bool  # whether the scheduler filters nodes by it (else it only scores them)
    where: str  # the field, for messages: "podAffinity required", "topologySpreadConstraints"...


def topology_uses(spec: Mapping[str, Any], annotations: Mapping[str, Any]) -> Iterator[TopologyUse]:
    """Every topology key the pod names, where, and whether the scheduler filters nodes by it. Fields
    of the wrong kind are passed over (the API server refuses such a pod by itself)."""
    affinity = spec.get("affinity")
    if isinstance(affinity, Mapping):
        for field, place in _TERMS:
            terms = affinity.get(field)
            if not isinstance(terms, Mapping):
                continue
            for term in _maps(terms.get(_REQUIRED)):
                if isinstance(term.get("topologyKey"), str):
                    yield TopologyUse(term["topologyKey"], place, True, f"{field} required")
            for weighted in _maps(terms.get(_PREFERRED)):
                inner = weighted.get("podAffinityTerm")
                if isinstance(inner, Mapping) and isinstance(inner.get("topologyKey"), str):
                    yield TopologyUse(inner["topologyKey"], place, False, f"{field} preferred")
    for constraint in _maps(spec.get("topologySpreadConstraints")):
        if isinstance(constraint.get("topologyKey"), str):
            # whenUnsatisfiable is a required field; the API server refuses a constraint without it.
            hard = constraint.get("whenUnsatisfiable", "DoNotSchedule") != "ScheduleAnyway"
            how = "DoNotSchedule" if hard else "ScheduleAnyway"
            yield TopologyUse(constraint["topologyKey"], "spread", hard, f"topologySpreadConstraints {how}")
    for name in EXCLUSIVE_ANNOTATIONS:
        value = annotations.get(name)
        if isinstance(value, str) and value:
            yield TopologyUse(
                value, "exclusive", _SCHEDULER_ANNOTATIONS.get(name, True), f"annotation {name}"
            )


def rewrite_topology(view: dict[str, Any], renames: Mapping[str, str], drops: frozenset[str]) -> bool:
    """Rename topology keys (`renames`) and remove what names one of `drops`: a term, a constraint, an
    annotation. Whether anything changed."""
    spec = view["spec"]
    changed = False
    affinity = spec.get("affinity")
    if isinstance(affinity, dict):
        for field, _ in _TERMS:
            terms = affinity.get(field)
            if not isinstance(terms, dict):
                continue
            for section in (_REQUIRED, _PREFERRED):
                listed = terms.get(section)
                if not isinstance(listed, list):
                    continue
                kept: list[Any] = []
                renamed: list[Any] = []
                for entry in listed:
                    term = (
                        entry.get("podAffinityTerm")
                        if section == _PREFERRED and isinstance(entry, dict)
                        else entry
                    )
                    done = _retarget(term, renames, drops)
                    changed = changed or done != "same"
                    _keep(entry, done, kept, renamed)
                if kept:
                    terms[section] = kept
                else:
                    del terms[section]
            if not terms:
                del affinity[field]
        if not affinity:
            del spec["affinity"]
    constraints = spec.get("topologySpreadConstraints")
    if isinstance(constraints, list):
        kept = []
        renamed = []
        for constraint in constraints:
            done = _retarget(constraint, renames, drops)
            changed = changed or done != "same"
            _keep(constraint, done, kept, renamed)
        if kept:
            spec["topologySpreadConstraints"] = kept
        else:
            del spec["topologySpreadConstraints"]
    annotations = view["metadata"].get("annotations")
    if isinstance(annotations, dict):
        for name in EXCLUSIVE_ANNOTATIONS:
            value = annotations.get(name)
            if not isinstance(value, str):
                continue
            if value in drops:
                del annotations[name]
                changed = True
            elif value in renames:
                annotations[name] = renames[value]
                changed = True
    return changed


def _keep(entry: Any, done: str, kept: list[Any], renamed: list[Any]) -> None:
    """Keep `entry` unless dropped, or it and a kept one are the same once renamed (a host's term
    renamed to the hostname beside the author's own hostname term: the scheduler reads one)."""
    if done == "dropped" or (entry in kept and (done == "renamed" or entry in renamed)):
        return
    kept.append(entry)
    if done == "renamed":
        renamed.append(entry)


def _retarget(holder: Any, renames: Mapping[str, str], drops: frozenset[str]) -> str:
    """ "dropped", "renamed" or "same": what becomes of the term or constraint `holder`."""
    key = holder.get("topologyKey") if isinstance(holder, dict) else None
    if not isinstance(key, str):
        return "same"
    if key in drops:
        return "dropped"
    if key in renames:
        holder["topologyKey"] = renames[key]
        return "renamed"
    return "same"


def _maps(value: Any) -> Iterator[Mapping[str, Any]]:
    if isinstance(value, list):
        yield from (v for v in value if isinstance(v, Mapping))
