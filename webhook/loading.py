"""Build the decision context from the cloud-map directory (startup and, later, reloads)."""

from pathlib import Path

from webhook.cloudmap import CloudMapError, load_directory
from webhook.core import Context
from webhook.platform import AcceleratorNames


class StartupError(RuntimeError):
    pass


def build_context(cloudmap_dir: Path, cloud: str) -> Context:
    try:
        maps = load_directory(cloudmap_dir)
    except CloudMapError as exc:
        raise StartupError(f"cloud map error: {exc}") from None
    if cloud not in maps:
        known = ", ".join(sorted(maps)) or "none"
        raise StartupError(f"no cloud map named {cloud!r} in {cloudmap_dir} (found: {known})")
    return Context(target=maps[cloud], accelerators=AcceleratorNames(tuple(maps.values())))
