"""Issue, load and renew a CA + serving-certificate bundle (cryptography; ECDSA P-256)."""

import datetime as dt
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# Tolerates clocks a few minutes apart between the signer and the API server.
BACKDATE = dt.timedelta(minutes=5)
RENEW_WHEN_REMAINING = 1 / 3


@dataclass(frozen=True)
class Bundle:
    """PEM bytes, named as the keys of a kubernetes.io/tls Secret."""

    ca_crt: bytes  # one or more CA certificates: the caBundle
    tls_crt: bytes
    tls_key: bytes

    def serving_certificate(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.tls_crt)

    def ca_certificates(self) -> list[x509.Certificate]:
        return x509.load_pem_x509_certificates(self.ca_crt)


def service_dns_names(service: str, namespace: str) -> list[str]:
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def issue_bundle(
    dns_names: list[str],
    ip_addresses: list[str],
    *,
    days: int = 365,
    now: dt.datetime | None = None,
    keep_cas: Sequence[x509.Certificate] = (),
) -> Bundle:
    """A fresh CA and a serving certificate for the names; `keep_cas` are appended to the bundle."""
    if not dns_names and not ip_addresses:
        raise ValueError("a serving certificate needs at least one DNS name or IP address")
    now = now or dt.datetime.now(dt.UTC)
    not_before, not_after = now - BACKDATE, now + dt.timedelta(days=days)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"gpuport CA {now:%Y-%m-%dT%H:%M:%SZ}")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
    common_name = dns_names[0] if dns_names else ip_addresses[0]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    still_valid = [c for c in keep_cas if c.not_valid_after_utc > now and c != ca_cert]
    ca_pem = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in [ca_cert, *still_valid])
    return Bundle(
        ca_crt=ca_pem,
        tls_crt=cert.public_bytes(serialization.Encoding.PEM),
        tls_key=key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )


def load_bundle(ca_crt: bytes, tls_crt: bytes, tls_key: bytes) -> Bundle:
    bundle = Bundle(ca_crt, tls_crt, tls_key)
    bundle.serving_certificate()  # raises ValueError on a damaged file
    bundle.ca_certificates()
    return bundle


def needs_renewal(cert: x509.Certificate, now: dt.datetime | None = None) -> bool:
    """True once less than a third of the certificate's lifetime remains (or it has expired)."""
    now = now or dt.datetime.now(dt.UTC)
    lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
    return cert.not_valid_after_utc - now < lifetime * RENEW_WHEN_REMAINING


def covers(cert: x509.Certificate, dns_names: list[str], ip_addresses: list[str]) -> bool:
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    have_dns = set(sans.get_values_for_type(x509.DNSName))
    have_ips = {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}
    return set(dns_names) <= have_dns and {str(ipaddress.ip_address(i)) for i in ip_addresses} <= have_ips


def renew_bundle(
    current: Bundle | None,
    dns_names: list[str],
    ip_addresses: list[str],
    *,
    days: int = 365,
    now: dt.datetime | None = None,
) -> Bundle | None:
    """A new bundle when `current` is missing, due for renewal or lacks a name; else None."""
    if current is not None:
        cert = current.serving_certificate()
        if not needs_renewal(cert, now) and covers(cert, dns_names, ip_addresses):
            return None
    keep = current.ca_certificates() if current is not None else []
    return issue_bundle(dns_names, ip_addresses, days=days, now=now, keep_cas=keep)


def _key_usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def registered_ca_bundle(serving: bytes, trusted: bytes, now: dt.datetime | None = None) -> bytes:
    """The CA bundle a webhook configuration should trust, written by a server whose Secret says
    `serving` (its ca.crt: the CA it serves with and, during a renewal, the one before) where the
    configuration trusts `trusted` now.

    Every unexpired CA of `serving`, and those of `trusted` newer than any of them: a writer that has
    not yet seen a new Secret never takes the new CA back out, while a CA the Secret no longer holds
    (replaced, not renewed: a leaked key) leaves as soon as every writer has the new Secret. Each CA
    once, newest first, so the same CAs always make the same bundle."""
    now = now or dt.datetime.now(dt.UTC)
    own = _unexpired(serving, now)
    newest = max((cert.not_valid_before_utc for cert in own.values()), default=None)
    kept = dict(own)
    for fingerprint, cert in _unexpired(trusted, now).items():
        if newest is None or cert.not_valid_before_utc > newest:
            kept.setdefault(fingerprint, cert)
    newest_first = sorted(
        kept.items(), key=lambda item: (item[1].not_valid_before_utc, item[0]), reverse=True
    )
    return b"".join(cert.public_bytes(serialization.Encoding.PEM) for _, cert in newest_first)


def _unexpired(bundle: bytes, now: dt.datetime) -> dict[bytes, x509.Certificate]:
    found: dict[bytes, x509.Certificate] = {}
    if bundle.strip():
        for cert in x509.load_pem_x509_certificates(bundle):
            if cert.not_valid_after_utc > now:
                found.setdefault(cert.fingerprint(hashes.SHA256()), cert)
    return found
