"""Composition root: build the decision context and the Flask app around it."""

from pathlib import Path

from flask import Flask

from webhook.loading import build_context
from webhook.server import ServerState, create_app


def build_app(cloudmap_dir: Path, cloud: str) -> Flask:
    state = ServerState(context=build_context(cloudmap_dir, cloud))
    app = create_app(state)
    app.extensions["gpuport"] = state
    return app
