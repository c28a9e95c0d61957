"""The MIG slices a set of workloads asks of the target, read as `translate` reads them: each pod
template translated to the target's words first, then its slice asks read back, times its replicas.
Pods already running on the target (an inventory's Pods) ask for theirs too."""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jsonpatch

from webhook.core.asks.demand import PodDemand, read_demand
from webhook.core.asks.pod_claims import ClaimsBeside
from webhook.core.deciding.admission import decide_template
from webhook.core.deciding.context import Context
from webhook.core.migration.preflight import replica_count
from webhook.core.vocabulary.inventory import Inventory
from webhook.core.vocabulary.templates import pod_templates
from webhook.core.vocabulary.workloads import held_at_once


@dataclass(frozen=True)
class SliceAsk:
    """One workload's (or running pod's) ask for one profile: per pod, and how many pods."""

    workload: str  # Kind/namespace/name
    profile: str
    per_pod: int
    pods: int
    models: frozenset[str] | None  # the models the translated pod accepts; None: any with the profile
    running_on: str = ""  # the node of a pod already running there

    @property
    def instances(self) -> int:
        return self.per_pod * self.pods


@dataclass(frozen=True)
class SliceDemand:
    asks: tuple[SliceAsk, ...]
    problems: tuple[str, ...]  # workloads whose slices cannot be read (not translatable), each with why


def slice_demand(documents: list[Any], context: Context, inventory: Inventory | None) -> SliceDemand:
    asks: list[SliceAsk] = []
    problems: list[str] = []
    beside = ClaimsBeside(documents)
    made = PodsMade(documents, inventory)
    for doc in documents:
        if not isinstance(doc, Mapping):
            continue
        metadata = doc.get("metadata") or {}
        namespace = str(metadata.get("namespace") or "default")
        workload = f"{doc.get('kind')}/{namespace}/{metadata.get('name', '?')}"
        for path, template in pod_templates(doc):
            decided = decide_template(template, context, hints=False, templates=beside.lookup(namespace))
            if decided.rewrite is None:
                if decided.refusals:
                    problems.append(f"{workload}: not translatable: {'; '.join(decided.refusals)}")
                continue
            translated = jsonpatch.apply_patch(dict(template), decided.rewrite.patch)
            demand = read_demand(translated, context.dialects)
            pods = replica_count(doc, path, inventory)
            if doc.get("kind") != "Pod":
                pods = max(pods - len(made.of(namespace, template)), 0)
            asks += [
                SliceAsk(workload, profile, count, pods, demand.selection.models)
                for profile, count in _slices_per_pod(demand).items()
            ]
    for pod in inventory.pods if inventory else ():
        demand = read_demand(pod.manifest, context.dialects)
        where = f"Pod/{pod.namespace}/{pod.name}"
        asks += [
            SliceAsk(where, profile, count, 1, demand.selection.models, running_on=pod.node)
            for profile, count in _slices_per_pod(demand).items()
        ]
    return SliceDemand(tuple(asks), tuple(problems))


class PodsMade:
    """The pods a workload has made already, each asking for itself (a running pod on its node, a
    pending one as a Pod document): its replicas less these are what is still to come, so no pod is
    counted twice. A pod is the workload's when it is in its namespace and carries every label of its
    pod template, as the workload's selector picks its pods (a template without labels claims none)."""

    def __init__(self, documents: list[Any], inventory: Inventory | None):
        self.pods: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
        listed = [p for p in documents if isinstance(p, Mapping) and p.get("kind") == "Pod"]
        for pod in [*listed, *(p.manifest for p in (inventory.pods if inventory else ()))]:
            metadata = _mapping(pod.get("metadata"))
            namespace = str(metadata.get("namespace") or "default")
            self.pods.setdefault(namespace, []).append(
                (str(metadata.get("name", "")), _mapping(metadata.get("labels")))
            )

    def of(self, namespace: str, template: Mapping[str, Any]) -> set[str]:
        wanted = _mapping(_mapping(template.get("metadata")).get("labels"))
        if not wanted:
            return set()
        return {
            name
            for name, labels in self.pods.get(namespace, ())
            if all(labels.get(key) == value for key, value in wanted.items())
        }


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _slices_per_pod(demand: PodDemand) -> dict[str, int]:
    """Slices of each profile one pod holds at once (init containers one at a time)."""
    profiles = {a.mig_profile.name for a in demand.asks if a.kind == "mig"}
    if not profiles and demand.selection.profile is not None:
        # A partition-label target asks for a whole "GPU" that is the labelled slice.
        return {demand.selection.profile.name: max(demand.gpus_on_one_node, 1)}
    return {
        name: held_at_once(
            [(a, a.count) for a in demand.asks if a.kind == "mig" and a.mig_profile.name == name], 0, max
        )
        for name in sorted(profiles)
    }


def by_wave(demand: SliceDemand, waves: list[list[str]]) -> list[SliceDemand]:
    """The demand once each migration wave has moved, cumulative: the running pods and every
    workload of waves 1..n. A workload in no wave moves with the last."""
    placed = {key: n for n, wave in enumerate(waves) for key in wave}
    last = max(len(waves) - 1, 0)
    return [
        SliceDemand(
            tuple(a for a in demand.asks if a.running_on or placed.get(a.workload, last) <= n),
            demand.problems,
        )
        for n in range(len(waves))
    ]
