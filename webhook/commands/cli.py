"""The `gpuport` command line. Each subcommand is a thin adapter over a module that does the work."""

import argparse
import sys
from pathlib import Path

from webhook import __version__


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):
        parser.print_help()
        return 2
    return args.run(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpuport",
        description="Admission webhook that makes GPU workloads portable across clouds.",
    )
    parser.add_argument("--version", action="version", version=f"gpuport {__version__}")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")

    serve = commands.add_parser(
        "serve",
        help="serve the admission webhook over TLS",
        description="Serve /mutate, /validate, /healthz, /readyz and /metrics over HTTPS "
        "(gunicorn, gthread). Flags override the GPUPORT_* environment variables.",
    )
    serve.add_argument("--bind", help="HOST:PORT to listen on (GPUPORT_BIND, default 0.0.0.0:8443)")
    serve.add_argument("--cert-dir", type=Path, help="folder with tls.crt and tls.key (GPUPORT_CERT_DIR)")
    serve.add_argument("--cloud", help="name of this cluster's cloud map (GPUPORT_CLOUD, default generic)")
    serve.add_argument("--cloudmap-dir", type=Path, help="folder of cloud-map YAML (GPUPORT_CLOUDMAP_DIR)")
    serve.add_argument("--workers", type=_positive, help="worker processes (GPUPORT_WORKERS, default 1)")
    serve.add_argument("--threads", type=_positive, help="threads per worker (GPUPORT_THREADS, default 16)")
    serve.add_argument(
        "--inventory", type=Path, help="nodes as `kubectl get nodes -o yaml` (GPUPORT_INVENTORY)"
    )
    serve.add_argument(
        "--cluster",
        help="watch a cluster for GPU quota: 'in-cluster' or a kubeconfig path (GPUPORT_CLUSTER)",
    )
    serve.set_defaults(run=_run_serve)

    certs = commands.add_parser(
        "certs",
        help="create or renew the CA and serving certificate",
        description="Write DIR/ca.crt, DIR/tls.crt and DIR/tls.key (the keys of a kubernetes.io/tls Secret). "
        "With --kubeconfig or --in-cluster, also write the Secret and put the CA bundle into the named "
        "webhook configurations.",
    )
    certs.add_argument("--out", type=Path, required=True, metavar="DIR")
    certs.add_argument("--service", default="gpuport", help="Service name (default gpuport)")
    certs.add_argument("--namespace", default="gpuport-system", help="namespace (default gpuport-system)")
    certs.add_argument(
        "--dns", action="append", default=[], metavar="NAME", help="extra DNS name (repeatable)"
    )
    certs.add_argument(
        "--ip", action="append", default=[], metavar="IP", help="extra IP address (repeatable)"
    )
    certs.add_argument("--days", type=_positive, default=365, help="lifetime in days (default 365)")
    certs.add_argument(
        "--renew-before",
        action="store_true",
        help="keep existing certificates while more than 1/3 of their lifetime remains; when renewing, "
        "the CA bundle carries the old and the new CA",
    )
    cluster = certs.add_mutually_exclusive_group()
    cluster.add_argument("--kubeconfig", type=Path, help="write the Secret and caBundle with this kubeconfig")
    cluster.add_argument("--in-cluster", action="store_true", help="the same, with the pod's service account")
    certs.add_argument("--secret", default="gpuport-tls", help="Secret name (default gpuport-tls)")
    certs.add_argument(
        "--webhook-config",
        action="append",
        default=[],
        metavar="NAME",
        help="Mutating/ValidatingWebhookConfiguration to receive the caBundle (repeatable; default gpuport)",
    )
    certs.set_defaults(run=_run_certs)

    translate = commands.add_parser(
        "translate",
        help="rewrite manifests for another cloud, offline",
        description="Run the webhook's checks and translation on Pods and the pod templates of Deployment, "
        "StatefulSet, DaemonSet, ReplicaSet, Job, CronJob, PyTorchJob and JobSet in multi-document YAML. "
        "Prints the translated YAML (comments and key order kept); exit 1 when anything is denied.",
    )
    translate.add_argument("files", nargs="+", metavar="FILE", help="manifest files, or - for standard input")
    translate.add_argument("--to", required=True, metavar="CLOUD", help="the target cloud map")
    translate.add_argument(
        "--from", dest="source", metavar="CLOUD", help="read GPU asks only in this cloud's dialect"
    )
    translate.add_argument(
        "--cloudmap-dir", type=Path, help="folder of cloud maps (default: the shipped ones)"
    )
    translate.add_argument(
        "--inventory", type=Path, help="the target's nodes: pick present models, add hints"
    )
    output = translate.add_mutually_exclusive_group()
    output.add_argument("--diff", action="store_true", help="print a unified diff instead of the YAML")
    output.add_argument(
        "-o", "--output", choices=["yaml", "json"], default="yaml", help="yaml, or json decisions"
    )
    translate.set_defaults(run=_run_translate)

    preflight = commands.add_parser(
        "preflight",
        help="score the risk of moving workloads to another cloud, before moving them",
        description="For each workload: what translation changes, a checklist scored as "
        "Risk = sum of weight x (1 - compat), whether it fits the target inventory (best-fit-decreasing), "
        "and a wave plan. Exit 0 when every workload is under --max-risk, 1 otherwise, 2 on bad input.",
    )
    preflight.add_argument("files", nargs="+", metavar="FILE", help="manifest files, or - for standard input")
    preflight.add_argument("--from", dest="source", required=True, metavar="CLOUD")
    preflight.add_argument("--to", required=True, metavar="CLOUD")
    where = preflight.add_mutually_exclusive_group()
    where.add_argument("--inventory", type=Path, help="the target's nodes: `kubectl get nodes -o yaml`")
    where.add_argument(
        "--kubeconfig", type=Path, help="read the target's nodes and quotas from its API server"
    )
    preflight.add_argument(
        "--cloudmap-dir", type=Path, help="folder of cloud maps (default: the shipped ones)"
    )
    preflight.add_argument(
        "--max-risk", type=float, default=0.3, help="fraction of the total weight (default 0.3)"
    )
    preflight.add_argument("--wave-size", type=_positive, default=5, help="workloads per wave (default 5)")
    preflight.add_argument("-o", "--output", choices=["table", "json", "markdown"], default="table")
    preflight.set_defaults(run=_run_preflight)

    agent = commands.add_parser(
        "node-agent",
        help="publish this node's GPU capabilities (NVML) as labels and an annotation",
        description="Gather GPUs, health, MIG, NVLink/PCIe topology and NUMA through NVML; publish GFD-style "
        "labels where GPU Feature Discovery does not run, gpuport.io/* labels and the gpuport.io/capability "
        "annotation on this Node; repeat every --interval seconds and on critical XID events.",
    )
    agent.add_argument("--once", action="store_true", help="gather (and publish) once, then exit")
    agent.add_argument(
        "--print", action="store_true", help="print the capability record as JSON; touch no API"
    )
    agent.add_argument("--node-name", default=None, help="this Node's name (default: $NODE_NAME)")
    agent.add_argument("--interval", type=float, default=60.0, help="seconds between refreshes (default 60)")
    agent.add_argument(
        "--cloudmap-dir", type=Path, help="folder holding gpus.yaml (default: the shipped one)"
    )
    agent.add_argument(
        "--kubeconfig",
        type=Path,
        help="reach the API with this kubeconfig (default: the pod's service account)",
    )
    agent.set_defaults(run=_run_node_agent)

    explain = commands.add_parser(
        "explain",
        help="show the GPU-pair cost table behind a multi-GPU pod's topology hint",
        description="For each pod (or pod template) in FILE: GPUs asked for, and per node class of the "
        "inventory the best cost of that many GPUs (NVLink 1, PCIe switch 2, host bridge/NUMA 3, "
        "cross-socket 4 per GPU pair), with the hint gpuport adds.",
    )
    explain.add_argument("files", nargs="+", metavar="FILE")
    explain.add_argument("--cloud", default="generic", help="this cluster's cloud map (default generic)")
    explain.add_argument("--inventory", type=Path, required=True, help="nodes with gpuport.io/capability")
    explain.add_argument("--cloudmap-dir", type=Path)
    explain.set_defaults(run=_run_explain)

    lint = commands.add_parser(
        "lint",
        help="check cloud maps, the GPU catalogue and ResourceQuota manifests",
        description="Print file:line: problem for each error; exit 1 when there is any.",
    )
    lint.add_argument("files", nargs="+", type=Path, metavar="FILE")
    lint.set_defaults(run=_run_lint)
    return parser


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _run_serve(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from webhook.adapters.http.settings import Settings
    from webhook.commands.serve import serve

    settings = Settings.from_env()
    overrides = {
        key: value
        for key, value in {
            "bind": args.bind,
            "cert_dir": args.cert_dir,
            "cloud": args.cloud,
            "cloudmap_dir": args.cloudmap_dir,
            "workers": args.workers,
            "threads": args.threads,
            "inventory": args.inventory,
            "cluster": args.cluster,
        }.items()
        if value is not None
    }
    return serve(replace(settings, **overrides))


def _run_certs(args: argparse.Namespace) -> int:
    from certs.files import read_bundle, write_bundle
    from certs.issue import issue_bundle, renew_bundle, service_dns_names

    dns = service_dns_names(args.service, args.namespace) + args.dns
    api = _kube_apis(args) if (args.kubeconfig or args.in_cluster) else None
    try:
        if api is not None:
            from certs.kube import read_secret_bundle

            current = read_secret_bundle(api["core"], args.namespace, args.secret)
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
        expiry = current.serving_certificate().not_valid_after_utc
        print(f"certificates in {args.out} are valid until {expiry:%Y-%m-%d}; nothing to renew")
        bundle = current
    else:
        print(f"wrote {args.out}/ca.crt, tls.crt, tls.key for {', '.join(dns + args.ip)}")
    write_bundle(args.out, bundle)
    if api is not None:
        from certs.kube import inject_ca_bundle, write_secret

        write_secret(api["core"], args.namespace, args.secret, bundle)
        patched = inject_ca_bundle(api["admission"], args.webhook_config or ["gpuport"], bundle.ca_crt)
        targets = ", ".join(patched) or "nothing"
        print(f"updated Secret {args.namespace}/{args.secret}; caBundle set on {targets}")
    return 0


def _run_translate(args: argparse.Namespace) -> int:
    from webhook.adapters.files.offline import (
        ManifestError,
        dump_documents,
        load_documents,
        results_json,
        translate_documents,
        unified_diff,
    )
    from webhook.adapters.files.yamledit import Unfaithful
    from webhook.config.cloudmap import default_directory
    from webhook.config.loading import StartupError, build_context

    try:
        context = build_context(
            args.cloudmap_dir or default_directory(), args.to, args.inventory, read_as=args.source
        )
    except StartupError as exc:
        print(f"gpuport translate: {exc}", file=sys.stderr)
        return 2
    results, denied = [], False
    for name in args.files:
        try:
            text = sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
            manifest = load_documents(text, name)
        except (OSError, UnicodeDecodeError, ManifestError) as exc:
            print(f"gpuport translate: {exc}", file=sys.stderr)
            return 2
        file_results = translate_documents(manifest, context)
        results += file_results
        for result in file_results:
            for warning in result.warnings:
                print(f"{name}: {result.kind}/{result.name}: {warning}", file=sys.stderr)
            if not result.allowed:
                denied = True
                for message in result.messages:
                    print(f"{name}: {result.kind}/{result.name}: denied: {message}", file=sys.stderr)
        try:
            printed = dump_documents(manifest) if args.diff or args.output == "yaml" else ""
        except Unfaithful as exc:  # never print a translation that does not read back as intended
            print(f"gpuport translate: {name}: {exc}", file=sys.stderr)
            return 2
        if args.diff:
            sys.stdout.write(unified_diff(text, printed, name))
        elif args.output == "yaml":
            sys.stdout.write(printed)
    if args.output == "json" and not args.diff:
        print(results_json(results))
    return 1 if denied else 0


def _run_preflight(args: argparse.Namespace) -> int:
    import yaml

    from webhook.commands.preflight_report import as_json, as_markdown, as_text
    from webhook.config.cloudmap import default_directory
    from webhook.config.loading import StartupError, build_context
    from webhook.core.inventory import InventoryError, parse_inventory
    from webhook.core.preflight import preflight

    try:
        context = build_context(args.cloudmap_dir or default_directory(), args.to, read_as=args.source)
    except StartupError as exc:
        print(f"gpuport preflight: {exc}", file=sys.stderr)
        return 2
    source = next(m for m in context.dialects.maps if m.name == args.source)
    try:
        documents = []
        for name in args.files:
            text = sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
            documents += [d for d in yaml.safe_load_all(text) if d is not None]
        inventory = None
        if args.inventory:
            inventory = parse_inventory(list(yaml.safe_load_all(args.inventory.read_text(encoding="utf-8"))))
        elif args.kubeconfig:
            from kubernetes import client

            from webhook.adapters.kube.kubeclient import api_client
            from webhook.core.inventory import inventory_from_cluster

            inventory = inventory_from_cluster(client.CoreV1Api(api_client(args.kubeconfig)))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, InventoryError) as exc:
        print(f"gpuport preflight: {exc}", file=sys.stderr)
        return 2
    report = preflight(
        documents, source, context, inventory, max_risk_fraction=args.max_risk, wave_size=args.wave_size
    )
    render = {"table": as_text, "json": as_json, "markdown": as_markdown}[args.output]
    sys.stdout.write(render(report))
    return 0 if report.passed else 1


def _run_node_agent(args: argparse.Namespace) -> int:
    import json
    import logging

    import pynvml

    from webhook.config.cloudmap import default_directory, load_directory
    from webhook.nodeagent.agent import NodeAgent, node_name_from_env, read_cpulist
    from webhook.nodeagent.gather import gather

    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] [%(levelname)s] %(name)s: %(message)s")
    catalogue = load_directory(args.cloudmap_dir or default_directory()).catalogue
    if args.print:
        print(json.dumps(gather(pynvml, catalogue, read_cpulist), indent=2, sort_keys=True))
        return 0
    node_name = args.node_name or node_name_from_env()
    if not node_name:
        print(
            "gpuport node-agent: set --node-name or NODE_NAME (the DaemonSet passes spec.nodeName)",
            file=sys.stderr,
        )
        return 2
    from kubernetes import client

    from webhook.adapters.kube.kubeclient import IN_CLUSTER, api_client

    core_api = client.CoreV1Api(api_client(args.kubeconfig or IN_CLUSTER))
    agent = NodeAgent(pynvml, catalogue, core_api, node_name, args.interval)
    if args.once:
        agent.publish_once()
        return 0
    agent.run_forever()
    return 0


def _run_explain(args: argparse.Namespace) -> int:
    import jsonpatch
    import yaml

    from webhook.config.cloudmap import default_directory
    from webhook.config.loading import StartupError, build_context, load_inventory
    from webhook.core.admission import rewrite_pod
    from webhook.core.placement import cost_table, node_classes, whole_gpus
    from webhook.core.templates import pod_templates
    from webhook.core.translate import Untranslatable

    try:
        context = build_context(args.cloudmap_dir or default_directory(), args.cloud, args.inventory)
        classes = node_classes(load_inventory(args.inventory))
        documents = [d for name in args.files for d in yaml.safe_load_all(Path(name).read_text()) if d]
    except (StartupError, OSError, yaml.YAMLError) as exc:
        print(f"gpuport explain: {exc}", file=sys.stderr)
        return 2
    for doc in documents:
        for path, template in pod_templates(doc):
            name = f"{doc.get('kind')}/{(doc.get('metadata') or {}).get('name', '?')}{path}"
            try:
                patch, warnings = rewrite_pod(template, context)
            except Untranslatable as exc:
                print(f"{name}: not translatable: {exc}")
                continue
            pod = jsonpatch.apply_patch(template, patch)
            k = whole_gpus(pod.get("spec") or {}, context.target)
            print(f"{name}: {k} whole GPU(s)")
            for row in cost_table(classes, k) if k >= 2 else []:
                cost = "cannot hold them" if row.cost is None else f"cost {row.cost} on GPUs {list(row.gpus)}"
                print(f"  {row.node_class.label:50} {cost}  ({len(row.node_class.nodes)} node(s))")
            for warning in warnings:
                print(f"  {warning}")
    return 0


def _run_lint(args: argparse.Namespace) -> int:
    from webhook.config.lint import lint_files

    findings = lint_files(args.files)
    for finding in findings:
        print(finding)
    if not findings:
        print(f"ok: {len(args.files)} file(s)")
    return 1 if findings else 0


def _kube_apis(args: argparse.Namespace) -> dict:
    from kubernetes import client

    from webhook.adapters.kube.kubeclient import IN_CLUSTER, api_client

    api = api_client(IN_CLUSTER if args.in_cluster else args.kubeconfig)
    return {"core": client.CoreV1Api(api), "admission": client.AdmissionregistrationV1Api(api)}


if __name__ == "__main__":
    sys.exit(main())
