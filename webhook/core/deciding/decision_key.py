"""The digest of exactly what a pod create's mutation decision reads, so equal pods share one decision.

Pods of one ReplicaSet or Job differ in name suffix, uid, timestamps, owner references and whatever
the API server fills in per pod, none of which the decision reads: it reads the request's kind (and
quotes the pod's name), the labels and annotations the context names (MetadataKeys), each
container's resources and restart policy, and the node selector, affinity, topology spread
constraints, tolerations, scheduler name and runtime class (a pod with resourceClaims is never memoized: its
templates are read too). The pods of an indexed Job arrive unnamed too (generateName) and differ in
labels and annotations of their own (the completion index) that no decision reads, so they share a
key; a StatefulSet's pods arrive named (web-0, web-1). Two reviews with the same key get the same
Decision from the same context (tests/core/test_memo.py checks that on random pods, varying every field
outside the key), except where it says the pod's name or reads or says its containers', which the key
leaves out: remembered.py says when a decision answers pods named otherwise. A field the decision
starts to read must be added here.
"""

import hashlib
from typing import Any, NamedTuple

import orjson

from webhook.core.deciding.review import AdmissionRequest
from webhook.core.vocabulary.workloads import CONTAINER_LISTS

POD_FIELDS = (
    "nodeSelector",
    "affinity",
    "topologySpreadConstraints",
    "tolerations",
    "schedulerName",
    "runtimeClassName",
)
CONTAINER_FIELDS = ("resources", "restartPolicy")  # the names: remembered.py


class MetadataKeys(NamedTuple):
    """The pod labels and annotations a mutation decision reads or writes in one context."""

    labels: frozenset[str]
    annotations: frozenset[str]
    # Annotations read by prefix (KAI's nvidia.com/container.<name>.gpu-memory.request): every key
    # that starts with one is read too.
    annotation_prefixes: tuple[str, ...] = ()
    # Annotations whose value names a container (KAI's gpu-fraction-container-name): with the prefixed
    # ones, the decision reads the containers' names through them (remembered.py).
    naming: frozenset[str] = frozenset()


def decision_key(request: AdmissionRequest, keys: MetadataKeys | None) -> bytes | None:
    """A 16-byte digest for a pod create; None for any other request (they are not memoized).
    `keys`: the labels and annotations the context's decision reads; None keys on all of them."""
    pod = request.object
    # A parsed review holds dicts; anything else is decided afresh. (isinstance against the
    # Mapping ABC costs the memo's hit path more than the rest of the key.)
    if not request.is_pod_create or type(pod) is not dict:
        return None
    metadata = pod.get("metadata")
    spec = pod.get("spec")
    if type(metadata) is not dict or type(spec) is not dict:
        return None
    if spec.get("resourceClaims"):
        # What a claim asks for is in its template, outside the pod and changeable: decide afresh.
        return None
    read: list[Any] = [
        request.namespace,
        request.version,
        _read(metadata.get("labels"), keys.labels if keys is not None else None),
        _read(metadata.get("annotations"), keys.annotations if keys is not None else None),
    ]
    if keys is not None and keys.annotation_prefixes and type(metadata.get("annotations")) is dict:
        read.append(sorted(_prefixed(metadata["annotations"], keys.annotation_prefixes)))
    for list_name in CONTAINER_LISTS:
        items = spec.get(list_name)
        if isinstance(items, list):
            read.append([{f: c.get(f) for f in CONTAINER_FIELDS} if type(c) is dict else c for c in items])
        else:
            read.append(items)
    read += [spec.get(name) for name in POD_FIELDS]
    # One spelling per value (sorted keys); JSON keeps 1, 1.0 and true apart.
    try:
        text = orjson.dumps(read, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:  # not JSON after all (a test's hand-made object): decide afresh
        return None
    return hashlib.blake2b(text, digest_size=16).digest()


def _read(values: Any, keys: frozenset[str] | None) -> Any:
    """The entries of a labels or annotations map the decision reads. A map present but without them
    ({}) stays apart from an absent one (None): edits add into the one and create the other, and
    their patches differ."""
    if keys is None or type(values) is not dict:
        return values
    if keys.isdisjoint(values):
        return {}
    return {key: values[key] for key in keys if key in values}


def _prefixed(values: dict[Any, Any], prefixes: tuple[str, ...]) -> list[tuple[str, Any]]:
    return [(k, v) for k, v in values.items() if isinstance(k, str) and k.startswith(prefixes)]
