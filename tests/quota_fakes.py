"""Fakes the quota gate and the Lease ledger are tested against: a cluster view and the coordination API,
each failing where the real one would (a conflict on a stale resourceVersion, a missing Lease)."""

import json
import threading
from decimal import Decimal

from tests.helpers import parsed, review_of
from webhook.core.asks.demand import read_demand
from webhook.core.budget.quota import Quota

QUOTA = Quota("gpus", {"requests.nvidia.com/gpu": Decimal(8)})


class FakeView:
    def __init__(self, quotas=(), pods=()):
        self.quotas = list(quotas)
        self.pods = list(pods)
        self.listed = {"pods", "resourcequotas", "namespaces", "limitranges", "nodes"}

    @property
    def synced(self):
        return len(self.listed) == 5

    def has_synced(self, *names):
        return set(names) <= self.listed

    def quotas_in(self, namespace):
        return self.quotas

    def pods_version(self, namespace):
        return tuple(id(p) for p in self.pods)  # changes whenever a test adds or removes a pod

    read_through = 0  # how far this view has read the pods stream; 0: it cannot say

    def pods_read_through(self):
        return self.read_through

    def pod_first_seen(self, namespace, uid):
        return next((p.get("firstSeen") for p in self.pods if p["metadata"].get("uid") == uid), None)

    def pods_in(self, namespace):
        return self.pods


def admit(gate, request, ctx):
    """A gate's answer as the pipeline asks for it: with the pod's demand read once, by the caller."""
    return gate.admit(request, ctx, read_demand(request.object or {}, ctx.dialects))


def request_for(obj, uid, dry_run=False):
    obj = dict(obj, metadata={**obj["metadata"], "uid": uid})
    return parsed(review_of(obj, dry_run=dry_run, uid=f"req-{uid}"))


# The API server refuses (422) an object whose annotations' keys and values add up to more than this
# (apimachinery's TotalAnnotationSizeLimitB).
ANNOTATIONS_LIMIT = 256 * 1024


def _refuse_long_annotations(annotations):
    from kubernetes.client.exceptions import ApiException

    if sum(len(k) + len(v) for k, v in annotations.items()) > ANNOTATIONS_LIMIT:
        raise ApiException(status=422, reason="Unprocessable Entity")


class FakeCoordination:
    """Leases with resourceVersion checks and the annotations' size limit, as the API server does them;
    answers raw JSON, as the client does when asked not to build its models (`_preload_content=False`)."""

    def __init__(self, conflicts=0):
        self.leases = {}
        self.conflicts = conflicts
        self.timeouts = []  # the _request_timeout of every call
        self.calls = []  # (verb, name) of every call
        # Each call is atomic, as on the API server: several ledgers (replicas) may call at once.
        self.atomic = threading.RLock()

    def _answer(self, name):
        from types import SimpleNamespace

        version, annotations = self.leases[name]
        body = {"metadata": {"name": name, "resourceVersion": str(version), "annotations": annotations}}
        return SimpleNamespace(data=json.dumps(body).encode())

    def read_namespaced_lease(self, name, namespace, _request_timeout=None, _preload_content=True):
        with self.atomic:
            return self._read_namespaced_lease(name, namespace, _request_timeout)

    def _read_namespaced_lease(self, name, namespace, _request_timeout):
        self.timeouts.append(_request_timeout)
        self.calls.append(("read", name))
        from kubernetes.client.exceptions import ApiException

        if name not in self.leases:
            raise ApiException(status=404)
        return self._answer(name)

    def create_namespaced_lease(self, namespace, body, _request_timeout=None, _preload_content=True):
        with self.atomic:
            return self._create_namespaced_lease(namespace, body, _request_timeout)

    def _create_namespaced_lease(self, namespace, body, _request_timeout):
        from kubernetes.client.exceptions import ApiException

        self.timeouts.append(_request_timeout)
        self.calls.append(("create", body["metadata"]["name"]))
        if body["metadata"]["name"] in self.leases:
            raise ApiException(status=409)
        _refuse_long_annotations(body["metadata"]["annotations"])
        self.leases[body["metadata"]["name"]] = (1, body["metadata"]["annotations"])
        return self._answer(body["metadata"]["name"])

    def replace_namespaced_lease(self, name, namespace, body, _request_timeout=None, _preload_content=True):
        with self.atomic:
            return self._replace_namespaced_lease(name, namespace, body, _request_timeout)

    def _replace_namespaced_lease(self, name, namespace, body, _request_timeout):
        from kubernetes.client.exceptions import ApiException

        self.timeouts.append(_request_timeout)
        self.calls.append(("replace", name))
        if name not in self.leases:
            raise ApiException(status=404)
        version, _ = self.leases[name]
        if self.conflicts:
            self.conflicts -= 1
            self.leases[name] = (version + 1, self.leases[name][1])  # someone else wrote meanwhile
            raise ApiException(status=409)
        if body["metadata"]["resourceVersion"] != str(version):
            raise ApiException(status=409)
        _refuse_long_annotations(body["metadata"]["annotations"])
        self.leases[name] = (version + 1, body["metadata"]["annotations"])
        return self._answer(name)
