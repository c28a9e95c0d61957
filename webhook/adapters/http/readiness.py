"""Readiness of the whole server, not of the worker that happens to answer the probe.

gunicorn's workers are processes, each with its own cluster view; a probe lands on one of them. Each
worker leaves a marker file once its view has synced; /readyz is true only when every expected worker
has one, so a Service never sends admissions to a pod whose other worker still knows nothing.
"""

import os
from pathlib import Path


class WorkerReadiness:
    def __init__(self, directory: Path, workers: int):
        self.directory = Path(directory)
        self.workers = workers

    def _marker(self, pid: int) -> Path:
        return self.directory / f"synced-{pid}"

    def mark(self, pid: int) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._marker(pid).touch()

    def clear(self, pid: int) -> None:
        self._marker(pid).unlink(missing_ok=True)

    def ready(self) -> tuple[bool, str]:
        synced = [p for p in self._pids() if _alive(p)]
        if len(synced) >= self.workers:
            return True, "ok"
        return False, f"cluster view synced in {len(synced)} of {self.workers} workers"

    def _pids(self) -> list[int]:
        try:
            names = [p.name for p in self.directory.iterdir()]
        except FileNotFoundError:
            return []
        return [int(n.removeprefix("synced-")) for n in names if n.startswith("synced-")]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
