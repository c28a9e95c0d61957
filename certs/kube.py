"""Store the bundle in a kubernetes.io/tls Secret and put the CA bundle into webhook configurations."""

import base64

from certs.issue import Bundle, load_bundle


def read_secret_bundle(core_api, namespace: str, name: str) -> Bundle | None:
    from kubernetes.client.exceptions import ApiException

    try:
        secret = core_api.read_namespaced_secret(name, namespace)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    data = secret.data or {}
    if not all(k in data for k in ("ca.crt", "tls.crt", "tls.key")):
        return None
    return load_bundle(*(base64.b64decode(data[k]) for k in ("ca.crt", "tls.crt", "tls.key")))


def write_secret(core_api, namespace: str, name: str, bundle: Bundle) -> None:
    from kubernetes.client.exceptions import ApiException

    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app.kubernetes.io/name": "gpuport"}},
        "data": {
            "ca.crt": base64.b64encode(bundle.ca_crt).decode(),
            "tls.crt": base64.b64encode(bundle.tls_crt).decode(),
            "tls.key": base64.b64encode(bundle.tls_key).decode(),
        },
    }
    try:
        core_api.replace_namespaced_secret(name, namespace, body)
    except ApiException as exc:
        if exc.status != 404:
            raise
        core_api.create_namespaced_secret(namespace, body)


def inject_ca_bundle(admission_api, config_names: list[str], ca_bundle: bytes) -> list[str]:
    """Set clientConfig.caBundle on every webhook of the named configurations; returns what was patched.

    Configurations are read by name, so RBAC can limit this to `get`/`patch` on those names alone."""
    from kubernetes.client.exceptions import ApiException

    encoded = base64.b64encode(ca_bundle).decode()
    patched = []
    for kind, read, patch in (
        (
            "MutatingWebhookConfiguration",
            admission_api.read_mutating_webhook_configuration,
            admission_api.patch_mutating_webhook_configuration,
        ),
        (
            "ValidatingWebhookConfiguration",
            admission_api.read_validating_webhook_configuration,
            admission_api.patch_validating_webhook_configuration,
        ),
    ):
        for name in config_names:
            try:
                config = read(name)
            except ApiException as exc:
                if exc.status == 404:
                    continue
                raise
            # JSON Patch, with a test per webhook so a concurrent reorder fails instead of
            # putting a bundle on the wrong webhook; "add" also replaces an existing caBundle.
            ops = []
            for index, webhook in enumerate(config.webhooks or []):
                ops.append({"op": "test", "path": f"/webhooks/{index}/name", "value": webhook.name})
                ops.append(
                    {"op": "add", "path": f"/webhooks/{index}/clientConfig/caBundle", "value": encoded}
                )
            if ops:
                patch(name, ops)
                patched.append(f"{kind}/{name}")
    return patched
