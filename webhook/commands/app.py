"""Composition root: build the decision context and the Flask app around it."""

import os

from flask import Flask

from webhook.adapters.http.server import ServerState, create_app
from webhook.adapters.http.settings import Settings
from webhook.adapters.kube.limit_gate import LimitGate
from webhook.config.cloudmap import directory_signature
from webhook.config.loading import build_context


def quota_gate(cluster: str, namespace: str, threads: int):
    """The cluster view and reservation store, from the pod's service account or a kubeconfig. The
    watches start in each worker after fork (gunicorn_conf.post_worker_init)."""
    from kubernetes import client

    from webhook.adapters.kube.clusterview import ClusterView
    from webhook.adapters.kube.kubeclient import api_client
    from webhook.adapters.kube.ledger import LeaseLedger
    from webhook.adapters.kube.quota_gate import QuotaGate

    api = api_client(cluster)
    return QuotaGate(
        ClusterView(client.CoreV1Api(api)),
        LeaseLedger(client.CoordinationV1Api(api), namespace),
        max_waiting=max(threads - 1, 1),  # one thread always left for everything else
    )


def claim_template_writer(cluster: str):
    """Creates the ResourceClaimTemplates translated pods need, when the map asks for DRA."""
    from webhook.adapters.kube.claim_templates import ClaimTemplateWriter
    from webhook.adapters.kube.kubeclient import api_client

    return ClaimTemplateWriter(api_client(cluster))


def build_app(settings: Settings) -> Flask:
    # Taken before the maps are read, so an edit made while they load is noticed by the reloader.
    signature = (directory_signature(settings.cloudmap_dir, settings.inventory), 0)
    gate = quota_gate(settings.cluster, settings.namespace, settings.threads) if settings.cluster else None
    state = ServerState(
        context=build_context(settings.cloudmap_dir, settings.cloud, settings.inventory),
        maps_signature=signature,
        quota_gate=gate,
        limit_gate=LimitGate(gate.view) if gate else None,
        claim_templates=claim_template_writer(settings.cluster) if settings.cluster else None,
    )
    app = create_app(state, bench_baseline=os.environ.get("GPUPORT_BENCH_BASELINE") == "1")
    app.extensions["gpuport"] = state
    return app
