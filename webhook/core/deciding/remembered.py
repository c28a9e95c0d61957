"""What the decision memo keeps of a pod create's decision, and which pods it may answer.

The memo's key (decision_key) leaves the containers' names out: pods of two workloads that ask the
same GPUs on the same nodes (a notebook's pod and a batch script's, the next Job of a pipeline) differ
in their containers' names and little else, and deciding each afresh cost a never-seen translated pod
about as much as the rest of its admission. Names are read by a decision only in two ways: an
annotation names a container (KAI's gpu-fraction-container-name, its per-container gpu-memory keys:
MetadataKeys.naming and the prefixes), or the decision says a name (a refusal or warning quoting it, a
share's container written into an annotation, a DRA claim named after it). So a decision is `portable`
(it answers a pod whose containers are named otherwise) only when the pod carries no such annotation,
its names are distinct container names the API server would accept (so each is written in the decision
as it is in the pod, never escaped; and a pod the API server refuses for a repeated name is not decided
for one it accepts), no name appears anywhere in what the decision or the asks say, and no claim
template was planned. Otherwise it answers only pods whose containers have the same names, as before.
The asks of a portable entry are given the asking pod's names (messages quote them later). An entry
that is not portable is kept under its key and its names (`named_key`), so two such workloads arriving
in turn each keep theirs.
The pod's own name is treated alike: a StatefulSet's or a LeaderWorkerSet's pods arrive named (web-0,
web-1) and differ in little else, and a decision reads the name only to quote it (a refusal names the pod).
So the name is left out of the key too, and a portable decision also says no pod name, where the name is
one the API server accepts (a DNS subdomain: written as it is, never escaped); an unnamed pod's ("":
generateName, named after admission) is the same for every replica.
tests/core/test_memo.py holds this to a fresh decision on random pods named at random.
"""

import hashlib
import re
from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol

import orjson

from webhook.core.asks.demand import PodDemand
from webhook.core.deciding.context import Context
from webhook.core.deciding.decision import Decision
from webhook.core.deciding.decision_key import MetadataKeys
from webhook.core.vocabulary.workloads import CONTAINER_LISTS

# Per container list (CONTAINER_LISTS' order), each container's name (None where it has none or is no map);
# then, alone in a last group, the pod's name as the request gives it ("" before the API server names it).
Names = tuple[tuple[str | None, ...], ...]

# RFC 1123 label, as the API server validates a container's name (after admission: gpuport sees any).
_CONTAINER_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
# RFC 1123 subdomain, as it validates a pod's name.
_POD_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


class Remembered(NamedTuple):
    demand: PodDemand | None  # None: the checks refused the pod (nothing after them ran)
    decision: Decision
    names: Names  # the containers' names of the pod it was decided for
    portable: bool  # it answers pods whose containers are named otherwise


class Memo(Protocol):
    """Remembered decisions by decision key, valid for one context only."""

    def get(self, key: bytes, context: Context, names: Names) -> tuple[PodDemand | None, Decision] | None:
        """The (demand, decision) remembered for a pod of `key` whose containers are `names` (`answer_for`);
        the demand is None where the checks refused the pod (nothing after them ran)."""

    def put(self, key: bytes, context: Context, value: Remembered) -> None: ...


def recall(
    memo: Memo | None, key: bytes | None, pod: Mapping[str, Any], context: Context, name: str = ""
) -> tuple[Names, tuple[PodDemand | None, Decision] | None]:
    """The names of the pod's containers and its own (`name`, the request's: "" where the decision
    quotes none), and what the memo answers for it (None: decide afresh)."""
    if memo is None or key is None:
        return (), None
    names = pod_names(pod, name)
    return names, memo.get(key, context, names)


def pod_names(pod: Mapping[str, Any], name: str) -> Names:
    spec = pod.get("spec")
    found: list[tuple[str | None, ...]] = []
    for list_name in CONTAINER_LISTS:
        items = spec.get(list_name) if type(spec) is dict else None
        if type(items) is not list:
            found.append(())
            continue
        names = [c.get("name") if type(c) is dict else None for c in items]
        found.append(tuple(n if type(n) is str else None for n in names))
    found.append((name,))
    return tuple(found)


def named_key(key: bytes, names: Names) -> bytes:
    """Where an entry that answers only its own names is kept: its key, with those names."""
    return hashlib.blake2b(key + orjson.dumps(names), digest_size=16).digest()


def remember(
    demand: PodDemand | None,
    decision: Decision,
    pod: Mapping[str, Any],
    names: Names,
    keys: MetadataKeys | None,
) -> Remembered:
    """The memo's entry for `decision` (and the asks it was decided on) of `pod`, named `names`."""
    return Remembered(demand, decision, names, _portable(demand, decision, pod, names, keys))


def answer_for(entry: Remembered, names: Names) -> tuple[PodDemand | None, Decision] | None:
    """The asks and decision `entry` gives a pod of its key whose containers are `names`; None when it
    was decided for other names and may not answer these."""
    if entry.names == names:
        return entry.demand, entry.decision
    # A refusal says `Pod "web-0"` of a named pod, `Pod` of an unnamed one: no name in it either way.
    named = bool(names and names[-1] and names[-1][0])
    if not entry.portable or not _acceptable(names) or named != bool(entry.names[-1][0]):
        return None
    return _renamed(entry.demand, names), entry.decision


def _acceptable(names: Names) -> bool:
    """Distinct container names, each one the API server accepts for a container, and a pod name it
    accepts for a pod (or none yet)."""
    containers = _containers(names)
    pod = names[-1][0] if names and names[-1] else None
    return (
        len(set(containers)) == len(containers)
        and all(_CONTAINER_NAME.fullmatch(n or "") for n in containers)
        and pod is not None
        and (pod == "" or (len(pod) <= 253 and _POD_NAME.fullmatch(pod) is not None))
    )


def _containers(names: Names) -> list[str | None]:
    return [n for group in names[: len(CONTAINER_LISTS)] for n in group]


def _portable(
    demand: PodDemand | None,
    decision: Decision,
    pod: Mapping[str, Any],
    names: Names,
    keys: MetadataKeys | None,
) -> bool:
    if not _containers(names) or not _acceptable(names):
        return False
    every = [n for group in names for n in group]
    if decision.claim_templates or _names_read(pod, keys):
        return False
    said: list[Any] = [decision.message, decision.warnings, decision.patch, dict(decision.audit_annotations)]
    if demand is not None:
        if demand.claims.any or demand.claims.notes or demand.claims.problems:
            return False
        said += [demand.problems, demand.unread, demand.unreadable, demand.selection.unknown]
    try:
        text = orjson.dumps(said)
    except (orjson.JSONEncodeError, TypeError):  # a value JSON cannot hold: keep it to its own names
        return False
    return not any(name.encode() in text for name in every if name)


def _names_read(pod: Mapping[str, Any], keys: MetadataKeys | None) -> bool:
    """Whether the pod carries an annotation that names a container (any, when the context cannot say
    which annotations its decision reads)."""
    metadata = pod.get("metadata")
    annotations = metadata.get("annotations") if type(metadata) is dict else None
    if not annotations:
        return False
    if keys is None or type(annotations) is not dict:
        return True
    return not keys.naming.isdisjoint(annotations) or any(
        type(k) is str and k.startswith(keys.annotation_prefixes) for k in annotations
    )


def _renamed(demand: PodDemand | None, names: Names) -> PodDemand | None:
    if demand is None or not demand.asks:
        return demand
    lists = {list_name: group for list_name, group in zip(CONTAINER_LISTS, names, strict=False)}
    asks = tuple(a._replace(name=lists[a.list_name][a.index] or "?") for a in demand.asks)
    return demand._replace(asks=asks)
