"""`gpuport serve`: run the Flask app under gunicorn with the package's config file."""

import os
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from gunicorn.app.base import BaseApplication

from webhook.adapters.http.settings import Settings


class _GunicornApp(BaseApplication):
    def __init__(self, settings: Settings):
        self.settings = settings
        super().__init__()

    def load_config(self):
        from webhook.adapters.http import gunicorn_conf

        for key, value in vars(gunicorn_conf).items():
            if key in self.cfg.settings:
                self.cfg.set(key, value)

    def load(self):
        from webhook.commands.app import build_app

        return build_app(self.settings)


def serve(settings: Settings) -> int:
    from webhook.config.loading import StartupError, build_context

    for path in (settings.cert_file, settings.key_file):
        if not path.is_file():
            print(
                f"gpuport serve: {path} not found; create it with `gpuport certs --out {settings.cert_dir}`",
                file=sys.stderr,
            )
            return 2
    try:
        build_context(
            settings.cloudmap_dir, settings.cloud, settings.inventory
        )  # fail before forking workers
    except StartupError as exc:
        print(f"gpuport serve: {exc}", file=sys.stderr)
        return 2
    if "GPUPORT_STATE_DIR" not in os.environ:
        # Fresh for every server: markers of an earlier run's workers must not count as ready.
        settings = replace(settings, state_dir=Path(tempfile.mkdtemp(prefix="gpuport-state-")))
    os.environ.update(settings.to_env())
    # Workers are processes: metrics go through files so any worker can report the sum. This must be
    # set before anything imports prometheus_client, which picks its storage at import time.
    os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix="gpuport-metrics-"))
    sys.argv = [sys.argv[0]]  # gunicorn parses argv; our flags are already applied
    _GunicornApp(settings).run()
    return 0
