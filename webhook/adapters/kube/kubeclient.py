"""One way to reach the Kubernetes API for every command: the pod's service account or a kubeconfig.

Each caller gets its own ApiClient instead of the library's process-wide default configuration, so
two identities (say the webhook's and the node agent's) can never leak into each other's calls."""

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

IN_CLUSTER = "in-cluster"


def api_client(cluster: str | Path, retry: bool = True):
    """`cluster` is "in-cluster" (the mounted service-account token) or the path of a kubeconfig.
    `retry=False`: a call that fails or times out is not made again (urllib3 otherwise makes a GET or a
    PUT up to three more times, each with the whole timeout): for calls that must end by a deadline."""
    from kubernetes import client, config

    configuration = client.Configuration()
    if str(cluster) == IN_CLUSTER:
        config.load_incluster_config(client_configuration=configuration)
    else:
        config.load_kube_config(config_file=str(cluster), client_configuration=configuration)
    if not retry:
        configuration.retries = False
    return client.ApiClient(configuration)


class ClusterUnreadable(Exception):
    """The kubeconfig or the API server could not be read: one line saying which and why."""


def read_cluster(cluster: str | Path, read: Callable[[Any], T]) -> T:
    """`read(CoreV1Api)` on the cluster, every way it can fail said in one line (ClusterUnreadable):
    a command reading a cluster never ends in a traceback."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError, MaxRetryError

    try:
        api = api_client(cluster)
    except Exception as exc:  # the client library raises what its YAML and dict walks raise on a bad file
        raise ClusterUnreadable(f"kubeconfig {cluster}: {_one_line(exc)}") from None
    where = api.configuration.host
    try:
        return read(client.CoreV1Api(api))
    except ApiException as exc:
        raise ClusterUnreadable(f"{where} answered {exc.status} {exc.reason}{_said(exc.body)}") from None
    except MaxRetryError as exc:
        raise ClusterUnreadable(f"cannot reach {where}: {_one_line(exc.reason or exc)}") from None
    except (HTTPError, OSError) as exc:
        raise ClusterUnreadable(f"cannot read {where}: {_one_line(exc)}") from None


def _one_line(exc: object) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _said(body: Any) -> str:
    try:
        message = json.loads(body).get("message")
    except (TypeError, ValueError, AttributeError):
        return ""
    return f": {' '.join(message.split())}" if isinstance(message, str) and message.strip() else ""
