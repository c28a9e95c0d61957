"""Build the decision context from the cloud-map directory (at startup and on every reload)."""

from pathlib import Path

from webhook.cloudmap import CloudMapError, load_directory
from webhook.core import Context
from webhook.platform import Dialects


class StartupError(RuntimeError):
    pass


def build_context(cloudmap_dir: Path, cloud: str) -> Context:
    try:
        loaded = load_directory(cloudmap_dir)
    except CloudMapError as exc:
        raise StartupError(f"cloud map error: {exc}") from None
    if cloud not in loaded.maps:
        known = ", ".join(sorted(loaded.maps)) or "none"
        raise StartupError(f"no cloud map named {cloud!r} in {cloudmap_dir} (found: {known})")
    dialects = Dialects(tuple(loaded.maps.values()), loaded.catalogue)
    return Context(target=loaded.maps[cloud], dialects=dialects)
