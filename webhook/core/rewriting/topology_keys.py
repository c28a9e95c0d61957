"""Topology keys only the old cloud's nodes carry: translated to the target's key, removed with a
warning, or refused.

A pod written for GKE groups its pods by GKE's node labels (cloud.google.com/gke-nodepool in JobSet's
exclusive placement, cloud.google.com/gce-topology-block in a spread constraint). No node of another
cloud carries them, and the scheduler reads a missing key by where it is written (topology_terms.py):
a required pod affinity or a DoNotSchedule spread filters every such node out, so the pod stays
Pending; a required anti-affinity passes every such node, so the exclusivity is silently gone; the
rest only scores.

Each map says which of its node labels group nodes, by role (`topology_labels`: zone, nodepool, block,
subblock, host). A key another platform owns (its node_labels) is read by its role there, and:

- the target labels that role: the key is renamed, wherever it is written, and said;
- else, for a host (GKE's gce-topology-host): kubernetes.io/hostname, said with what changes. Where a
  node is a VM, two nodes may share a physical host: pods kept together on one node are held tighter
  than on one host (a group that fits no single node waits), pods kept apart by node are kept apart
  less (two may share a host). Both keep more of what was meant than no key at all, which leaves a
  required anti-affinity with no effect and a required affinity refused;
- else, where the scheduler would filter every node by it (required pod affinity, DoNotSchedule
  spread, JobSet's and LeaderWorkerSet's exclusive placement): the pod is refused when the key asks
  its pods together (affinity, exclusive placement: dropping it would scatter a job whose ranks were
  placed together), naming the keys the target has and the map entry an admin could add; a
  DoNotSchedule spread is removed with a warning (its pods run, no longer spread over that key);
- else (required anti-affinity, preferred terms, ScheduleAnyway) it is removed with a warning: kept,
  it would be ignored on every node.

JobSet's controller copies the exclusive-placement annotation onto every pod with the JobSet's name
(`jobset.sigs.k8s.io/jobset-name`, as a label and as an annotation); JobSet is no kind gpuport registers,
so its pods are where the webhook sees the placement. A pod refused or a key renamed for that
annotation names the JobSet, so the fix said is the one `translate` says: the JobSet's annotation,
which the pod only copies. LeaderWorkerSet's pods likewise, named by its `leaderworkerset.sigs.k8s.io/name`
label (its pods are made by a StatefulSet, whose events show the refusal).

A key no map owns (the user's own labels, the well-known zone and hostname) is left as written. A pod
already in the target's words is looked at only where the target's map owns node labels (a cloud
that says what its nodes carry); a scheduler layer's map (generic, HAMi...) runs on any cloud, so
there another cloud's key on a native pod may well be right.
"""

from collections.abc import Mapping
from typing import Any, NamedTuple

from webhook.core.rewriting.podedits import DropAnnotation, PodEdit, RewriteTopology
from webhook.core.rewriting.topology_terms import (
    EXCLUSIVE_ANNOTATIONS,
    JOBSET_NAME,
    KAI_ANNOTATIONS,
    KAI_TOPOLOGY,
    LWS_NAME,
    WORKLOAD_ANNOTATIONS,
    TopologyUse,
    topology_uses,
)
from webhook.core.vocabulary.dialects import Dialects
from webhook.core.vocabulary.platform import CloudMap

__all__ = ["TopologyKeysPlan", "plan_topology"]

# The keys every Kubernetes node may carry (kubernetes.io/docs/reference/labels-annotations-taints).
HOSTNAME = "kubernetes.io/hostname"
_EVERYWHERE = (HOSTNAME, "topology.kubernetes.io/zone", "topology.kubernetes.io/region")
_ROLE_WORDS = {"nodepool": "node pool", "subblock": "sub-block"}
KAI_SCHEDULER = "kai-scheduler"  # the schedulerName KAI's pods are written with (KAI's quickstart)
_RUNS = f"a cluster that does lists {KAI_SCHEDULER} in its map's other_schedulers"
JOBSET_EXCLUSIVE = EXCLUSIVE_ANNOTATIONS[0]
# The workload whose controller copies each exclusive-placement annotation onto its pods, and where on
# the pod it names itself: JobSet in an annotation (and a label), LeaderWorkerSet in a label only.
_COPIED_BY = {
    JOBSET_EXCLUSIVE: ("JobSet", "annotations", JOBSET_NAME),
    **{a: ("LeaderWorkerSet", "labels", LWS_NAME) for a in WORKLOAD_ANNOTATIONS if a != JOBSET_EXCLUSIVE},
}


class TopologyKeysPlan(NamedTuple):
    edits: list[PodEdit]
    refusals: list[str]


NO_TOPOLOGY_EDITS = TopologyKeysPlan([], [])


def plan_topology(
    spec: Mapping[str, Any],
    annotations: Mapping[str, Any],
    target: CloudMap,
    dialects: Dialects,
    translated: bool,
    labels: Mapping[str, Any] | None = None,
) -> TopologyKeysPlan:
    """What becomes of each topology key the pod (`spec`, `annotations`) names on `target`;
    `translated`: whether the pod is being moved from another platform's words. `labels`: the pod's,
    where a LeaderWorkerSet names itself (a refused placement names the workload it was copied from)."""
    if not translated and not target.node_labels.owned:
        return NO_TOPOLOGY_EDITS
    if (
        "affinity" not in spec
        and "topologySpreadConstraints" not in spec
        and annotations.keys().isdisjoint(EXCLUSIVE_ANNOTATIONS)
    ):
        return NO_TOPOLOGY_EDITS  # the common pod: nothing to walk
    # KAI's placement levels where the target runs no KAI Scheduler: read by nothing there, so removed and
    # said (as its schedulerName is), whatever key they name.
    inert: list[PodEdit] = []
    if translated and KAI_SCHEDULER not in (target.scheduler_name, *target.other_schedulers):
        placed = [a for a in KAI_ANNOTATIONS if a in annotations]
        inert = [
            DropAnnotation(
                a, f"gpuport: annotation {a} removed: {target.name} does not run KAI Scheduler ({_RUNS})"
            )
            for a in (*placed, KAI_TOPOLOGY)
            if placed and a in annotations
        ]
    ignored = {f"annotation {e.key}" for e in inert if isinstance(e, DropAnnotation)}
    uses = [
        u for u in topology_uses(spec, annotations) if not _carried(u.key, target) and u.where not in ignored
    ]
    renames: dict[str, str] = {}
    drops: set[str] = set()
    said: list[str] = []
    refusals: list[str] = []
    copied = _copied_from(labels or {}, annotations)
    for key in dict.fromkeys(u.key for u in uses):
        owner, role = _owner(key, dialects, target)
        if not owner:
            continue  # the user's own label, or one every platform's nodes may carry
        at = [u for u in uses if u.key == key]
        new = target.topology_labels.get(role, "") if role else ""
        what = f"{owner}'s {_ROLE_WORDS.get(role, role) or 'node label'}"
        from_workload = next((copied[u.where] for u in at if u.where in copied), None)
        if new:
            renames[key] = new
            of = f"; {from_workload.workload}'s exclusive placement" if from_workload else ""
            said.append(f"gpuport: topology key {key} → {new} ({_ROLE_WORDS.get(role, role)}{of})")
            said += _kai_level(at, new, annotations)
            continue
        if role == "host":
            renames[key] = HOSTNAME
            said += _by_node(key, at) + _kai_level(at, HOSTNAME, annotations)
            continue
        together = [u for u in at if u.required and u.place in ("affinity", "exclusive")]
        if together:
            refusals.append(_refusal(key, what, together, role, target, from_workload))
            continue
        drops.add(key)
        said += [_removed(u, target) for u in _once(at)]
    if refusals:
        return TopologyKeysPlan([], refusals)
    if not said:
        return TopologyKeysPlan(inert, []) if inert else NO_TOPOLOGY_EDITS
    return TopologyKeysPlan([*inert, RewriteTopology(renames, frozenset(drops), tuple(said))], [])


class Copied(NamedTuple):
    workload: str  # "JobSet llama-pretrain"
    annotation: str  # the workload's annotation the pod copies


def _copied_from(labels: Mapping[str, Any], annotations: Mapping[str, Any]) -> dict[str, Copied]:
    """For each exclusive-placement annotation of the pod ("annotation <key>", as TopologyUse.where
    says it), the workload it was copied from, where the pod names that workload."""
    copied = {}
    metadata = {"annotations": annotations, "labels": labels}
    for annotation, (kind, field, name_key) in _COPIED_BY.items():
        if annotation in annotations:
            name = metadata[field].get(name_key)
            if isinstance(name, str) and name:
                copied[f"annotation {annotation}"] = Copied(f"{kind} {name}", annotation)
    return copied


def _kai_level(uses: list[TopologyUse], new: str, annotations: Mapping[str, Any]) -> list[str]:
    """KAI places by the levels of the Topology the workload names: a key renamed there must be one."""
    if not any(u.where.removeprefix("annotation ") in KAI_ANNOTATIONS for u in uses):
        return []
    name = annotations.get(KAI_TOPOLOGY)
    topology = f"KAI Topology {name}" if isinstance(name, str) and name else "the KAI Topology it names"
    return [f"gpuport: {topology} must list {new} as a level on this cluster"]


def _carried(key: str, target: CloudMap) -> bool:
    """Whether the target's nodes carry `key` (or any node may)."""
    return key in _EVERYWHERE or target.node_labels.owns(key) or key in target.topology_read


def _owner(key: str, dialects: Dialects, target: CloudMap) -> tuple[str, str]:
    """The platform whose nodes carry `key`, and the role its map gives the key ("" when it names
    none); ("", "") when no loaded map owns the key."""
    for cloud_map in dialects.maps:
        if cloud_map.name == target.name or not cloud_map.node_labels.owns(key):
            continue
        return cloud_map.name, cloud_map.topology_read.get(key, "")
    return "", ""


def _by_node(key: str, uses: list[TopologyUse]) -> list[str]:
    """What a host key written as the node's name now means, once per sense it is used in."""
    head = f"gpuport: topology key {key} → {HOSTNAME}:"
    said = []
    if any(u.place in ("affinity", "exclusive") for u in uses):
        said.append(f"{head} together on one node, not host")
    if any(u.place in ("anti-affinity", "spread") for u in uses):
        said.append(f"{head} apart by node, not host")
    return said


def _once(uses: list[TopologyUse]) -> list[TopologyUse]:
    return list({u.where: u for u in uses}.values())


def _removed(use: TopologyUse, target: CloudMap) -> str:
    """Short: a warning is one kubectl line (decision.MAX_WARNING_CHARS)."""
    if use.place == "spread":
        what = "spread" if use.required else "preferred spread"
    else:
        what = (
            f"{'' if use.required else 'preferred '}{'anti-' if use.place == 'anti-affinity' else ''}affinity"
        )
    why = "" if use.required else ", it only scored"
    if use.place == "spread" and use.required:
        why = ", else Pending"
    return f"gpuport: {what} on {use.key} removed: no {target.name} node has it{why}"


def _refusal(
    key: str, what: str, uses: list[TopologyUse], role: str, target: CloudMap, copied: Copied | None = None
) -> str:
    """`copied`: the workload whose exclusive placement the pod copies the key from (a JobSet, a
    LeaderWorkerSet), when the pod names it: the fix is in that workload, not in the pod."""
    where = ", ".join(dict.fromkeys(u.where for u in uses))
    keys = ", ".join(dict.fromkeys((*target.topology_labels.values(), HOSTNAME)))
    fix = f"add topology_labels.{role} to the {target.name} map" if role else "label the nodes with it"
    write = f"write a topology key its nodes carry ({keys})"
    if copied:
        where += f", copied from {copied.workload}"
        write = f"set {copied.workload}'s {copied.annotation} to a topology key its nodes carry ({keys})"
    return (
        f"keeps its pods together on one {key} ({what}; {where}); no {target.name} node carries it and "
        f"the {target.name} map names no equivalent: {write} or {fix}"
    )
