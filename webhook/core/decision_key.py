"""The digest of exactly what a pod create's mutation decision reads, so equal pods share one decision.

Pods of one ReplicaSet or Job differ in name suffix, uid, timestamps, owner references and whatever
the API server fills in per pod, none of which the decision reads: it reads the request's kind and
name (messages quote them), the pod's labels and annotations, each container's name, resources and
restart policy, and the node selector, affinity, tolerations and scheduler name (a pod with
resourceClaims is never memoized: its templates are read too). Two reviews with the
same key get the same Decision from the same context (tests/test_memo.py checks that on random pods,
varying every field outside the key). A field the decision starts to read must be added here.
"""

import hashlib
from typing import Any

import orjson

from webhook.core.review import AdmissionRequest
from webhook.core.workloads import CONTAINER_LISTS, is_map

POD_FIELDS = ("nodeSelector", "affinity", "tolerations", "schedulerName")
CONTAINER_FIELDS = ("name", "resources", "restartPolicy")


def decision_key(request: AdmissionRequest) -> bytes | None:
    """A 16-byte digest for a pod create; None for any other request (they are not memoized)."""
    pod = request.object
    if not request.is_pod_create or not is_map(pod):
        return None
    metadata = pod.get("metadata")
    spec = pod.get("spec")
    if not is_map(metadata) or not is_map(spec):
        return None
    if spec.get("resourceClaims"):
        # What a claim asks for is in its template, outside the pod and changeable: decide afresh.
        return None
    read: list[Any] = [
        request.namespace,
        request.version,
        request.name,
        metadata.get("labels"),
        metadata.get("annotations"),
    ]
    for list_name in CONTAINER_LISTS:
        items = spec.get(list_name)
        if isinstance(items, list):
            read.append([{f: c.get(f) for f in CONTAINER_FIELDS} if is_map(c) else c for c in items])
        else:
            read.append(items)
    read += [spec.get(name) for name in POD_FIELDS]
    # One spelling per value (sorted keys); JSON keeps 1, 1.0 and true apart.
    try:
        text = orjson.dumps(read, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:  # not JSON after all (a test's hand-made object): decide afresh
        return None
    return hashlib.blake2b(text, digest_size=16).digest()
