"""`gpuport certs`: create or renew the CA and serving certificate, and optionally install them."""

import argparse
import sys
from pathlib import Path

from webhook.commands.common import Subcommands, positive


def register(commands: Subcommands) -> None:
    parser = commands.add_parser(
        "certs",
        help="create or renew the CA and serving certificate",
        description="Write DIR/ca.crt, DIR/tls.crt and DIR/tls.key (the keys of a kubernetes.io/tls Secret). "
        "With --kubeconfig or --in-cluster, also write the Secret and put the CA bundle into the named "
        "webhook configurations.",
    )
    parser.add_argument("--out", type=Path, required=True, metavar="DIR")
    parser.add_argument("--service", default="gpuport", help="Service name (default gpuport)")
    parser.add_argument("--namespace", default="gpuport-system", help="namespace (default gpuport-system)")
    parser.add_argument(
        "--dns", action="append", default=[], metavar="NAME", help="extra DNS name (repeatable)"
    )
    parser.add_argument(
        "--ip", action="append", default=[], metavar="IP", help="extra IP address (repeatable)"
    )
    parser.add_argument("--days", type=positive, default=365, help="lifetime in days (default 365)")
    parser.add_argument(
        "--renew-before",
        action="store_true",
        help="keep existing certificates while more than 1/3 of their lifetime remains; when renewing, "
        "the CA bundle carries the old and the new CA",
    )
    cluster = parser.add_mutually_exclusive_group()
    cluster.add_argument("--kubeconfig", type=Path, help="write the Secret and caBundle with this kubeconfig")
    cluster.add_argument("--in-cluster", action="store_true", help="the same, with the pod's service account")
    parser.add_argument("--secret", default="gpuport-tls", help="Secret name (default gpuport-tls)")
    parser.add_argument(
        "--webhook-config",
        action="append",
        default=[],
        metavar="NAME",
        help="Mutating/ValidatingWebhookConfiguration to receive the caBundle (repeatable; default gpuport)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from certs.files import read_bundle, write_bundle
    from certs.issue import issue_bundle, renew_bundle, service_dns_names

    dns = service_dns_names(args.service, args.namespace) + args.dns
    api = None
    if args.kubeconfig or args.in_cluster:
        from webhook.adapters.kube.kubeclient import IN_CLUSTER, api_client

        api = api_client(IN_CLUSTER if args.in_cluster else args.kubeconfig)
    try:
        if api is not None:
            from kubernetes import client

            from certs.kube import read_secret_bundle

            current = read_secret_bundle(client.CoreV1Api(api), args.namespace, args.secret)
        else:
            current = read_bundle(args.out)
    except ValueError as exc:
        print(f"gpuport certs: existing certificates are damaged ({exc}); issuing new ones", file=sys.stderr)
        current = None
    try:
        if args.renew_before:
            bundle = renew_bundle(current, dns, args.ip, days=args.days)
        else:
            bundle = issue_bundle(dns, args.ip, days=args.days)
    except ValueError as exc:
        print(f"gpuport certs: {exc}", file=sys.stderr)
        return 2
    if bundle is None:
        assert current is not None  # renew_bundle keeps only a bundle that exists
        expiry = current.serving_certificate().not_valid_after_utc
        print(f"certificates in {args.out} are valid until {expiry:%Y-%m-%d}; nothing to renew")
        bundle = current
    else:
        print(f"wrote {args.out}/ca.crt, tls.crt, tls.key for {', '.join(dns + args.ip)}")
    write_bundle(args.out, bundle)
    if api is not None:
        from kubernetes import client

        from certs.kube import inject_ca_bundle, write_secret

        write_secret(client.CoreV1Api(api), args.namespace, args.secret, bundle)
        admission = client.AdmissionregistrationV1Api(api)
        patched = inject_ca_bundle(admission, args.webhook_config or ["gpuport"], bundle.ca_crt)
        targets = ", ".join(patched) or "nothing"
        print(f"updated Secret {args.namespace}/{args.secret}; caBundle set on {targets}")
    return 0
