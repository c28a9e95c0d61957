"""Hot reload of cloud maps: each worker polls the directory and swaps in a new context when it changes.

A broken edit never takes effect: the last good maps keep serving, the error (file:line) is logged and
counted, and the next edit is tried again. Polling rather than inotify: a mounted ConfigMap changes by
a symlink swap that inotify on the files misses, and a stat of a dozen files every few seconds is free.
"""

import logging
import threading
from pathlib import Path

from webhook.adapters.http import metrics
from webhook.config.cloudmap import directory_signature
from webhook.config.loading import ClusterDra, StartupError, build_context

log = logging.getLogger("gpuport.reload")


class CloudMapReloader:
    def __init__(
        self, state, directory: Path, cloud: str, interval: float = 2.0, inventory: Path | None = None
    ):
        self.state = state
        self.directory = Path(directory)
        self.cloud = cloud
        self.inventory = inventory
        self.interval = interval
        self._stop = threading.Event()

    def check_once(self) -> bool:
        """Reload if the files changed; True when a new context was swapped in."""
        view = getattr(self.state, "view", None)
        ask_dra = getattr(self.state, "cluster_dra", None)
        dra = ask_dra() if ask_dra is not None else None
        # Node changes seen by the cluster view count as an edit too: present models and topology
        # follow; so do device classes that stand for an extended resource (KEP-5004).
        signature = (
            directory_signature(self.directory, self.inventory),
            view.nodes_version if view else 0,
            *((repr(_extended(dra)),) if dra is not None else ()),
        )
        if signature == self.state.maps_signature:
            return False
        self.state.maps_signature = signature
        try:
            nodes = view.inventory() if view is not None and self.inventory is None else None
            context = build_context(self.directory, self.cloud, self.inventory, nodes, cluster_dra=dra)
        except StartupError as exc:
            self.state.reload_error = str(exc)
            metrics.CLOUDMAP_RELOADS.labels("error").inc()
            log.error("cloud maps not reloaded, the previous ones stay in force: %s", exc)
            return False
        except Exception as exc:  # a defect, not an edit: the last good context keeps serving, said
            self.state.reload_error = f"context not rebuilt: {type(exc).__name__}: {exc}"
            metrics.CLOUDMAP_RELOADS.labels("error").inc()
            log.exception("decision context not rebuilt, the previous one stays in force")
            return False
        self.state.context = context
        self.state.reload_error = ""
        metrics.CLOUDMAP_RELOADS.labels("ok").inc()
        log.info("cloud maps reloaded from %s (active: %s)", self.directory, self.cloud)
        return True

    def start(self) -> None:
        threading.Thread(target=self._run, name="cloudmap-reloader", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.check_once()
            except Exception:  # a reloader that dies silently would freeze the maps forever
                log.exception("cloud-map reload check failed; will retry")


def _extended(dra: ClusterDra) -> list[tuple[str, str]]:
    """(class, extendedResourceName) of the cluster's device classes: what a reload must follow."""
    found = []
    for device_class in dra.device_classes:
        spec = device_class.get("spec") if isinstance(device_class, dict) else None
        extended = spec.get("extendedResourceName") if isinstance(spec, dict) else None
        if extended:
            found.append((str(device_class.get("metadata")), str(extended)))
    return sorted(found)
