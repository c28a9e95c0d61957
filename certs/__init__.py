"""Certificates for the webhook: a CA and a serving certificate, rotation, and caBundle injection.

The CA key is used once, to sign the serving certificate, and never written anywhere: renewal makes
a new CA, and the bundle carries the new and the old CA until the old one expires, so API servers that
still hold the old bundle and replicas that still serve the old certificate both keep working.
"""

from certs.issue import Bundle, issue_bundle, load_bundle, needs_renewal, renew_bundle

__all__ = ["Bundle", "issue_bundle", "load_bundle", "needs_renewal", "renew_bundle"]
