"""Composition root: build the decision context and the Flask app around it."""

import os
from pathlib import Path

from flask import Flask

from webhook.cloudmap import directory_signature
from webhook.loading import build_context
from webhook.server import ServerState, create_app


def build_app(cloudmap_dir: Path, cloud: str, inventory: Path | None = None) -> Flask:
    # Taken before the maps are read, so an edit made while they load is noticed by the reloader.
    signature = directory_signature(cloudmap_dir, inventory)
    state = ServerState(context=build_context(cloudmap_dir, cloud, inventory), maps_signature=signature)
    app = create_app(state, bench_baseline=os.environ.get("GPUPORT_BENCH_BASELINE") == "1")
    app.extensions["gpuport"] = state
    return app
