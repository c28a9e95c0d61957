import datetime as dt
import ipaddress
import ssl
import stat
from types import SimpleNamespace

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from certs.files import read_bundle, write_bundle
from certs.issue import covers, issue_bundle, needs_renewal, renew_bundle, service_dns_names
from certs.kube import inject_ca_bundle
from webhook.commands.cli import main

NAMES = service_dns_names("gpuport", "gpuport-system")
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def test_serving_certificate_has_the_service_names_and_is_signed_by_the_bundle(tmp_path):
    bundle = issue_bundle([*NAMES, "localhost"], ["127.0.0.1"])
    cert = bundle.serving_certificate()
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == [
        "gpuport",
        "gpuport.gpuport-system",
        "gpuport.gpuport-system.svc",
        "gpuport.gpuport-system.svc.cluster.local",
        "localhost",
    ]
    assert sans.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    assert isinstance(cert.public_key(), ec.EllipticCurvePublicKey)
    assert cert.public_key().curve.name == "secp256r1"
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert x509.oid.ExtendedKeyUsageOID.SERVER_AUTH in eku
    (ca,) = bundle.ca_certificates()
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    cert.verify_directly_issued_by(ca)


def test_files_use_the_tls_secret_key_names_and_a_private_key_mode(tmp_path):
    write_bundle(tmp_path, issue_bundle(NAMES, []))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ca.crt", "tls.crt", "tls.key"]
    assert stat.S_IMODE((tmp_path / "tls.key").stat().st_mode) == 0o600
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")  # key matches certificate


def test_renewal_waits_until_a_third_of_the_lifetime_is_left():
    bundle = issue_bundle(NAMES, [], days=90, now=NOW)
    cert = bundle.serving_certificate()
    assert not needs_renewal(cert, NOW + dt.timedelta(days=59))
    assert needs_renewal(cert, NOW + dt.timedelta(days=61))
    assert renew_bundle(bundle, NAMES, [], days=90, now=NOW + dt.timedelta(days=59)) is None


def test_renewal_keeps_the_old_ca_in_the_bundle_until_it_expires():
    old = issue_bundle(NAMES, [], days=90, now=NOW)
    renewed = renew_bundle(old, NAMES, [], days=90, now=NOW + dt.timedelta(days=70))
    assert renewed is not None
    new_ca, kept_ca = renewed.ca_certificates()
    assert kept_ca == old.ca_certificates()[0]
    renewed.serving_certificate().verify_directly_issued_by(new_ca)
    # Once the old CA has expired it is dropped.
    later = renew_bundle(renewed, NAMES, [], days=90, now=NOW + dt.timedelta(days=140))
    assert old.ca_certificates()[0] not in later.ca_certificates()
    assert len(later.ca_certificates()) == 2  # the new one and the one from day 70


def test_renewal_happens_when_a_name_is_missing():
    bundle = issue_bundle(NAMES, [], now=NOW)
    assert not covers(bundle.serving_certificate(), NAMES, ["127.0.0.1"])
    assert renew_bundle(bundle, NAMES, ["127.0.0.1"], now=NOW) is not None


def test_certificate_without_names_is_refused():
    with pytest.raises(ValueError, match="at least one DNS name"):
        issue_bundle([], [])


def test_cli_writes_and_then_keeps_valid_certificates(tmp_path, capsys):
    out = tmp_path / "c"
    assert main(["certs", "--out", str(out), "--dns", "localhost", "--ip", "127.0.0.1"]) == 0
    first = read_bundle(out)
    assert (
        main(["certs", "--out", str(out), "--dns", "localhost", "--ip", "127.0.0.1", "--renew-before"]) == 0
    )
    assert read_bundle(out) == first
    assert "nothing to renew" in capsys.readouterr().out


def test_cli_replaces_damaged_files(tmp_path, capsys):
    (tmp_path / "ca.crt").write_text("junk")
    (tmp_path / "tls.crt").write_text("junk")
    (tmp_path / "tls.key").write_text("junk")
    assert main(["certs", "--out", str(tmp_path), "--renew-before"]) == 0
    assert read_bundle(tmp_path) is not None
    assert "damaged" in capsys.readouterr().err


class FakeAdmissionApi:
    """Records patches the way AdmissionregistrationV1Api would receive them."""

    def __init__(self):
        hook = SimpleNamespace
        self.patches = []
        self.mutating = [hook(metadata=hook(name="gpuport"), webhooks=[hook(name="mutate.gpuport.io")])]
        self.validating = [
            hook(
                metadata=hook(name="gpuport"), webhooks=[hook(name="a.gpuport.io"), hook(name="b.gpuport.io")]
            ),
            hook(metadata=hook(name="someone-else"), webhooks=[hook(name="x")]),
        ]

    def _read(self, configs, name):
        from kubernetes.client.exceptions import ApiException

        for config in configs:
            if config.metadata.name == name:
                return config
        raise ApiException(status=404)

    def read_mutating_webhook_configuration(self, name):
        return self._read(self.mutating, name)

    def read_validating_webhook_configuration(self, name):
        return self._read(self.validating, name)

    def patch_mutating_webhook_configuration(self, name, body):
        self.patches.append(("mutating", name, body))

    def patch_validating_webhook_configuration(self, name, body):
        self.patches.append(("validating", name, body))


def test_ca_bundle_goes_into_every_webhook_of_the_named_configurations_only():
    api = FakeAdmissionApi()
    patched = inject_ca_bundle(api, ["gpuport", "absent"], b"PEM")
    assert patched == ["MutatingWebhookConfiguration/gpuport", "ValidatingWebhookConfiguration/gpuport"]
    kinds = {(kind, name) for kind, name, _ in api.patches}
    assert ("validating", "someone-else") not in kinds
    validating_ops = next(body for kind, name, body in api.patches if kind == "validating")
    assert validating_ops == [
        {"op": "test", "path": "/webhooks/0/name", "value": "a.gpuport.io"},
        {"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": "UEVN"},
        {"op": "test", "path": "/webhooks/1/name", "value": "b.gpuport.io"},
        {"op": "add", "path": "/webhooks/1/clientConfig/caBundle", "value": "UEVN"},
    ]


class FakeCoreApi:
    def __init__(self):
        self.secrets = {}

    def read_namespaced_secret(self, name, namespace):
        from kubernetes.client.exceptions import ApiException

        if (namespace, name) not in self.secrets:
            raise ApiException(status=404)
        return SimpleNamespace(data=self.secrets[(namespace, name)]["data"])

    def replace_namespaced_secret(self, name, namespace, body):
        from kubernetes.client.exceptions import ApiException

        if (namespace, name) not in self.secrets:
            raise ApiException(status=404)
        self.secrets[(namespace, name)] = body

    def create_namespaced_secret(self, namespace, body):
        self.secrets[(namespace, body["metadata"]["name"])] = body


def test_secret_is_created_then_replaced_and_read_back():
    from certs.kube import read_secret_bundle, write_secret

    api = FakeCoreApi()
    assert read_secret_bundle(api, "gpuport-system", "gpuport-tls") is None
    first = issue_bundle(NAMES, [])
    write_secret(api, "gpuport-system", "gpuport-tls", first)
    stored = api.secrets[("gpuport-system", "gpuport-tls")]
    assert stored["type"] == "kubernetes.io/tls"
    assert sorted(stored["data"]) == ["ca.crt", "tls.crt", "tls.key"]
    assert read_secret_bundle(api, "gpuport-system", "gpuport-tls") == first
    second = issue_bundle(NAMES, [])
    write_secret(api, "gpuport-system", "gpuport-tls", second)
    assert read_secret_bundle(api, "gpuport-system", "gpuport-tls") == second
