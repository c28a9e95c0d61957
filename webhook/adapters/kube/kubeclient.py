"""One way to reach the Kubernetes API for every command: the pod's service account or a kubeconfig.

Each caller gets its own ApiClient instead of the library's process-wide default configuration, so
two identities (say the webhook's and the node agent's) can never leak into each other's calls."""

from pathlib import Path

IN_CLUSTER = "in-cluster"


def api_client(cluster: str | Path):
    """`cluster` is "in-cluster" (the mounted service-account token) or the path of a kubeconfig."""
    from kubernetes import client, config

    configuration = client.Configuration()
    if str(cluster) == IN_CLUSTER:
        config.load_incluster_config(client_configuration=configuration)
    else:
        config.load_kube_config(config_file=str(cluster), client_configuration=configuration)
    return client.ApiClient(configuration)
