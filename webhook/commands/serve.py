"""`gpuport serve`: run the Flask app under gunicorn with the package's config file."""

import argparse
import os
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from webhook.adapters.http.settings import VARIABLES
from webhook.commands.common import Subcommands, bad_input, positive


def register(commands: Subcommands) -> None:
    parser = commands.add_parser(
        "serve",
        help="serve the admission webhook over TLS",
        description="Serve /mutate, /validate, /healthz, /readyz and /metrics over HTTPS "
        "(gunicorn, gthread). Flags override the GPUPORT_* environment variables.",
        epilog=_environment(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--bind", help="HOST:PORT to listen on (GPUPORT_BIND, default 0.0.0.0:8443)")
    parser.add_argument("--cert-dir", type=Path, help="folder with tls.crt and tls.key (GPUPORT_CERT_DIR)")
    parser.add_argument("--cloud", help="name of this cluster's cloud map (GPUPORT_CLOUD, default generic)")
    parser.add_argument("--cloudmap-dir", type=Path, help="folder of cloud-map YAML (GPUPORT_CLOUDMAP_DIR)")
    parser.add_argument("--workers", type=positive, help="worker processes (GPUPORT_WORKERS, default 1)")
    parser.add_argument("--threads", type=positive, help="threads per worker (GPUPORT_THREADS, default 16)")
    parser.add_argument(
        "--inventory", type=Path, help="nodes as `kubectl get nodes -o yaml` (GPUPORT_INVENTORY)"
    )
    parser.add_argument(
        "--cluster",
        help="watch a cluster for GPU quota: 'in-cluster' or a kubeconfig path (GPUPORT_CLUSTER)",
    )
    parser.set_defaults(run=run)


def _environment() -> str:
    """Every setting's variable, from the settings' own list: one a flag does not set is still shown."""
    width = max(len(variable) for variable, _ in VARIABLES.values())
    lines = [f"  {variable:<{width}}  {what}" for variable, what in VARIABLES.values()]
    return "environment variables:\n" + "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from webhook.adapters.http.settings import Settings

    flags = {
        "bind": args.bind,
        "cert_dir": args.cert_dir,
        "cloud": args.cloud,
        "cloudmap_dir": args.cloudmap_dir,
        "workers": args.workers,
        "threads": args.threads,
        "inventory": args.inventory,
        "cluster": args.cluster,
    }
    overrides = {key: value for key, value in flags.items() if value is not None}
    return serve(replace(Settings.from_env(), **overrides))


def serve(settings) -> int:
    from webhook.adapters.http import logs
    from webhook.config.loading import StartupError, build_context

    # Before anything is read: the lines of the boot (the maps checked here, the app each worker
    # loads) carry the format of every later line.
    logs.configure(settings.log_level)

    for path in (settings.cert_file, settings.key_file):
        if not path.is_file():
            return bad_input(
                "serve", f"{path} not found; create it with `gpuport certs --out {settings.cert_dir}`"
            )
    try:
        build_context(settings.cloudmap_dir, settings.cloud, settings.inventory)  # fail before forking
    except StartupError as exc:
        return bad_input("serve", exc)
    if "GPUPORT_STATE_DIR" not in os.environ:
        # Fresh for every server: markers of an earlier run's workers must not count as ready.
        settings = replace(settings, state_dir=Path(tempfile.mkdtemp(prefix="gpuport-state-")))
    os.environ.update(settings.to_env())
    # Workers are processes: metrics go through files so any worker can report the sum. This must be
    # set before anything imports prometheus_client, which picks its storage at import time.
    os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix="gpuport-metrics-"))
    sys.argv = [sys.argv[0]]  # gunicorn parses argv; our flags are already applied
    _gunicorn_application(settings).run()
    return 0


def _gunicorn_application(settings):
    # gunicorn is imported here, not at the top: every other command loads this module to build the
    # parser, and none of them needs a web server.
    from gunicorn.app.base import BaseApplication

    class GpuportApplication(BaseApplication):
        def load_config(self):
            from webhook.adapters.http import gunicorn_conf

            for key, value in vars(gunicorn_conf).items():
                if key in self.cfg.settings:
                    self.cfg.set(key, value)

        def load(self):
            from webhook.commands.app import build_app

            return build_app(settings)

    return GpuportApplication()
