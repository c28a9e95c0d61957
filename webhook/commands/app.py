"""Composition root: build the decision context and the Flask app around it."""

import os

from flask import Flask

from webhook.adapters.http.server import ServerState, create_app
from webhook.adapters.http.settings import Settings
from webhook.adapters.kube.limit_gate import LimitGate
from webhook.config.cloudmap import directory_signature
from webhook.config.loading import build_context
from webhook.core.admission import Context


def quota_gate(cluster: str, namespace: str, threads: int, templates=None):
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
        templates=templates,
    )


def claim_template_store(cluster: str, context: Context):
    """Creates the ResourceClaimTemplates translated pods need and reads those pods' claims name."""
    from webhook.adapters.kube.claim_templates import ClaimTemplateStore
    from webhook.adapters.kube.kubeclient import api_client

    dra = context.target.dra
    return ClaimTemplateStore(api_client(cluster), dra.api_version if dra else "resource.k8s.io/v1beta1")


def build_app(settings: Settings) -> Flask:
    # Taken before the maps are read, so an edit made while they load is noticed by the reloader.
    signature = (directory_signature(settings.cloudmap_dir, settings.inventory), 0)
    context = build_context(settings.cloudmap_dir, settings.cloud, settings.inventory)
    templates = claim_template_store(settings.cluster, context) if settings.cluster else None
    gate = (
        quota_gate(settings.cluster, settings.namespace, settings.threads, templates)
        if settings.cluster
        else None
    )
    state = ServerState(
        context=context,
        maps_signature=signature,
        quota_gate=gate,
        limit_gate=LimitGate(gate.view) if gate else None,
        claim_templates=templates,
    )
    app = create_app(state, bench_baseline=os.environ.get("GPUPORT_BENCH_BASELINE") == "1")
    app.extensions["gpuport"] = state
    return app
