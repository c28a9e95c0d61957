"""Composition root: build the decision context and the Flask app around it."""

import logging
from collections.abc import Callable

from flask import Flask

from webhook.adapters.http import metrics
from webhook.adapters.http.server import ServerState, create_app
from webhook.adapters.http.settings import Settings
from webhook.adapters.kube.capabilities import Capabilities
from webhook.adapters.kube.charge_freeze import ChargeFreeze
from webhook.adapters.kube.claim_gate import ClaimCreateGate, pod_reader
from webhook.adapters.kube.limit_gate import LimitGate
from webhook.config.cloudmap import directory_signature
from webhook.config.loading import ClusterDra, build_context
from webhook.core.deciding.pipeline import NO_GATES, Gates
from webhook.core.vocabulary import dra_api

log = logging.getLogger("gpuport.app")


def quota_gate(cluster: str, namespace: str, threads: int, templates=None, capabilities=None):
    """The cluster view and reservation store, from the pod's service account or a kubeconfig. The
    watches start in each worker after fork (gunicorn_conf.post_worker_init)."""
    from kubernetes import client

    from webhook.adapters.http.admission_wsgi import request_timing
    from webhook.adapters.kube.clusterview import ClusterView
    from webhook.adapters.kube.kubeclient import api_client
    from webhook.adapters.kube.ledger import LeaseLedger
    from webhook.adapters.kube.quota_gate import QuotaGate

    api = api_client(cluster)
    # With claims to count, the view also watches DeviceClasses and ResourceSlices: budgets read them
    # as they are now, without a list per pod.
    dra = (client.CustomObjectsApi(api), templates.api_version) if templates and templates.served else None
    view = ClusterView(client.CoreV1Api(api), dra=dra, capabilities=capabilities)
    if templates is not None:
        templates.view = view
    return QuotaGate(
        view,
        # Its own client, without retries: a store call that times out must end the attempt by the
        # admission's deadline, not be made three more times (a frozen API server: connections cut).
        LeaseLedger(client.CoordinationV1Api(api_client(cluster, retry=False)), namespace),
        max_waiting=max(threads - 1, 1),  # one thread always left for everything else
        templates=templates,
        timing=request_timing,  # the review's arrival and its API server's timeout, from the server
    )


def claim_template_store(cluster: str, capabilities=None):
    """Creates the ResourceClaimTemplates translated pods need and reads what pods' claims name, in
    the newest resource.k8s.io version the API server serves (what a map's `api_version: auto` means)."""
    from kubernetes import client

    from webhook.adapters.kube.claim_templates import ClaimTemplateStore, newest_served
    from webhook.adapters.kube.kubeclient import api_client

    api = api_client(cluster)
    served = newest_served(client.ApisApi(api))
    if served is None:
        log.warning(
            "the API server serves no %s version gpuport writes; assuming %s", dra_api.GROUP, dra_api.NEWEST
        )
    return ClaimTemplateStore(
        api, served or dra_api.NEWEST, served=served is not None, capabilities=capabilities
    )


def cluster_dra(store) -> Callable[[], ClusterDra]:
    """What the DRA cluster says of itself, asked again whenever the cloud maps are rebuilt: its API
    version and its device classes (from the watch-fed view once it has them)."""
    return lambda: ClusterDra(store.api_version, store.device_classes())


def registrar_for(settings: Settings, state: ServerState, gate, capabilities: Capabilities | None = None):
    """gpuport's own registration: its webhooks pointed at its Service (or GPUPORT_WEBHOOK_URL) with the
    CA it serves with, the policy for the map in force, the quota webhook closed where there is a GPU
    budget. Started by each worker; it writes only once that worker is ready."""
    from webhook.adapters.kube.kubeclient import api_client
    from webhook.adapters.kube.registrar import Registrar
    from webhook.config.registration import Endpoint, registered_objects
    from webhook.core.budget.limits import from_limitrange
    from webhook.core.budget.quota import gpu_quotas

    endpoint = Endpoint(settings.service, settings.namespace, settings.webhook_url)

    def desired():
        context = state.context
        budget = ()
        if gate is not None:
            budget = gate.view.budget_namespaces(
                lambda q: bool(gpu_quotas([q], context.target.whole_gpu)),
                lambda lr: bool(from_limitrange(lr, context.dialects)),
            )
        ca_bundle = (settings.cert_dir / "ca.crt").read_bytes()
        return registered_objects(context.target, context.dialects.maps, endpoint, ca_bundle, budget)

    return Registrar(
        api_client(settings.cluster),
        desired,
        lambda: state.readiness()[0],
        settings.namespace,
        capabilities=capabilities,
    )


def claim_gate(settings: Settings, gate, templates) -> ClaimCreateGate:
    """Claims made under names pods hold, or marked as a pod's: the pods from the view (read through
    where it has not seen one yet), the templates read now."""
    from webhook.adapters.kube.kubeclient import api_client

    return ClaimCreateGate(gate.view, templates, pod_reader(api_client(settings.cluster)))


def build_app(settings: Settings) -> Flask:
    # Taken before the maps are read, so an edit made while they load is noticed by the reloader.
    signature = (directory_signature(settings.cloudmap_dir, settings.inventory), 0)
    # One record per worker of what the RBAC or the cluster refuses, shared by every adapter that asks.
    capabilities = Capabilities()
    templates = claim_template_store(settings.cluster, capabilities) if settings.cluster else None
    dra = cluster_dra(templates) if templates is not None else None
    context = build_context(
        settings.cloudmap_dir, settings.cloud, settings.inventory, cluster_dra=dra and dra()
    )
    gate = (
        quota_gate(settings.cluster, settings.namespace, settings.threads, templates, capabilities)
        if settings.cluster
        else None
    )
    state = ServerState(
        context=context,
        maps_signature=signature,
        gates=(
            Gates(LimitGate(gate.view), gate, ChargeFreeze(gate.view), claim_gate(settings, gate, templates))
            if gate
            else NO_GATES
        ),
        view=gate.view if gate else None,
        claim_templates=templates,
        cluster_dra=dra,
        unavailable=capabilities.summary if settings.cluster else None,
    )
    if gate is not None:
        from webhook.adapters.kube.budget_watch import BudgetWatch

        state.budgets = BudgetWatch(gate, lambda: state.context)
    if settings.register and settings.cluster:
        state.registrar = registrar_for(settings, state, gate, capabilities)
    if settings.cluster:
        from webhook.adapters.kube.events import PodEvents
        from webhook.adapters.kube.kubeclient import api_client

        state.events = PodEvents(
            api_client(settings.cluster),
            capabilities=capabilities,
            outcome=lambda outcome: metrics.EVENTS.labels(outcome).inc(),
        )
    app = create_app(state)
    app.extensions["gpuport"] = state
    return app
