"""The Kubernetes side of the reservation ledger: read, create and replace one Lease, as plain JSON.

Reservations are read and written on every quota'd admission, so these calls skip the client's model
classes (`_preload_content=False`): building and validating a V1Lease object per call cost more CPU
than the decision itself during a burst. Every call carries CALL_TIMEOUT; errors are the client's own
ApiException (404 absent, 409 changed since read) or urllib3/OS errors, left to the ledger to judge.
"""

import json
from dataclasses import dataclass, field

CALL_TIMEOUT = (1.0, 2.0)  # (connect, read) seconds: two calls fit inside the ledger's deadline
LABELS = {"app.kubernetes.io/name": "gpuport"}


@dataclass(frozen=True)
class StoredLease:
    """A Lease as last read or written: the version a compare-and-swap must name, and its metadata."""

    resource_version: str
    annotations: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_json(cls, raw: bytes) -> "StoredLease":
        metadata = json.loads(raw).get("metadata") or {}
        return cls(
            str(metadata.get("resourceVersion") or ""),
            dict(metadata.get("annotations") or {}),
            dict(metadata.get("labels") or {}),
        )


class LeaseStore:
    def __init__(self, coordination_api, namespace: str):
        self.api = coordination_api
        self.namespace = namespace

    def read(self, name: str, timeout: tuple[float, float] = CALL_TIMEOUT) -> StoredLease | None:
        from kubernetes.client.exceptions import ApiException

        try:
            response = self.api.read_namespaced_lease(
                name, self.namespace, _request_timeout=timeout, _preload_content=False
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return StoredLease.from_json(response.data)

    def write(
        self,
        name: str,
        previous: StoredLease | None,
        annotations: dict[str, str],
        timeout: tuple[float, float] = CALL_TIMEOUT,
    ) -> StoredLease:
        """Create the Lease, or replace `previous` only if nobody changed it since (409 otherwise).
        Annotations not named here are kept as they were."""
        if previous is None:
            body = {"metadata": {"name": name, "annotations": annotations, "labels": LABELS}, "spec": {}}
            response = self.api.create_namespaced_lease(
                self.namespace, body, _request_timeout=timeout, _preload_content=False
            )
        else:
            body = {
                "metadata": {
                    "name": name,
                    "resourceVersion": previous.resource_version,
                    "annotations": {**previous.annotations, **annotations},
                    "labels": previous.labels,
                },
                "spec": {},
            }
            response = self.api.replace_namespaced_lease(
                name, self.namespace, body, _request_timeout=timeout, _preload_content=False
            )
        return StoredLease.from_json(response.data)
