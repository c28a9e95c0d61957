"""Server settings: command-line flags win over GPUPORT_* environment variables, which win over defaults."""

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

# Every setting's environment variable and what it sets: the one list from_env reads, to_env writes and
# `serve --help` shows, so no variable can be read without being documented.
VARIABLES: dict[str, tuple[str, str]] = {
    "bind": ("GPUPORT_BIND", "HOST:PORT to listen on"),
    "cert_dir": ("GPUPORT_CERT_DIR", "folder with tls.crt and tls.key (and ca.crt, for registering)"),
    "cloud": ("GPUPORT_CLOUD", "name of this cluster's cloud map"),
    "cloudmap_dir": ("GPUPORT_CLOUDMAP_DIR", "folder of cloud-map YAML"),
    "workers": ("GPUPORT_WORKERS", "worker processes"),
    "threads": ("GPUPORT_THREADS", "threads per worker"),
    "log_level": ("GPUPORT_LOG_LEVEL", "debug, info, warning or error"),
    "reload_interval": ("GPUPORT_RELOAD_INTERVAL", "seconds between looks at the cloud maps"),
    "inventory": ("GPUPORT_INVENTORY", "nodes as `kubectl get nodes -o yaml`"),
    "cluster": ("GPUPORT_CLUSTER", "watch a cluster for GPU quota: 'in-cluster' or a kubeconfig path"),
    "namespace": ("GPUPORT_NAMESPACE", "gpuport's namespace: its Service and quota reservations"),
    "state_dir": ("GPUPORT_STATE_DIR", "folder for the workers' readiness markers"),
    "register": (
        "GPUPORT_REGISTER",
        "true: register the webhooks and safety-net policy once ready (default in the cluster)",
    ),
    "service": ("GPUPORT_SERVICE", "the Service the API server calls, in the namespace"),
    "webhook_url": ("GPUPORT_WEBHOOK_URL", "https://host:port the API server calls instead of the Service"),
}


def _shipped_maps() -> Path:
    # Imported when a setting needs it: `serve --help` reads VARIABLES while every command's parser is
    # built, and the cloud-map reader brings jsonschema and YAML with it.
    from webhook.config.cloudmap import default_directory

    return default_directory()


@dataclass(frozen=True)
class Settings:
    bind: str = "0.0.0.0:8443"
    cert_dir: Path = Path("/etc/gpuport/tls")
    cloud: str = "generic"
    cloudmap_dir: Path = field(default_factory=_shipped_maps)
    # One worker of 16 threads per replica, from bench/burst_bench.py (1,000 creates in one quota'd
    # namespace, two replicas, 2 cores): 100-123 pods admitted/s, against 76-92 with two workers of 8 or
    # 16 threads, because every worker is one more writer racing for the namespace's Lease. Each worker
    # also lists and watches every pod on its own, so one worker halves the view's memory and the load
    # gpuport puts on the API server. Quota'd reviews wait on that round trip, so threads, not processes,
    # give the concurrency. What more workers buy is CPU for translation (bench/admission_bench.py, 8
    # connections, one replica, 2 cores): two workers of 8 threads answered ~1.5x the requests per
    # second of one worker, on every route alike (ratios to the bare server unchanged). The shipped two
    # replicas already give two processes; raise GPUPORT_WORKERS where pods are translated in bulk and
    # no quota'd namespace bursts.
    workers: int = 1
    threads: int = 16
    log_level: str = "info"
    reload_interval: float = 2.0
    inventory: Path | None = None  # nodes (kubectl get nodes -o yaml) for placement and present models
    cluster: str = ""  # "": no cluster view; "in-cluster"; or a kubeconfig path
    namespace: str = "gpuport-system"  # where quota reservations (Leases) live
    # gpuport registers its webhook configurations and safety-net policy itself once ready (in the
    # cluster: by default); "false" leaves them to whoever manages them (`gpuport registration`).
    register: bool = False
    service: str = "gpuport"  # the Service the API server calls, in `namespace`
    webhook_url: str = ""  # or an address to call instead (gpuport outside the cluster): https://host:port
    state_dir: Path = Path("/tmp/gpuport-state")  # noqa: S108 - workers' readiness markers, per pod

    @classmethod
    def from_env(cls, environ=os.environ) -> "Settings":
        defaults = cls()
        read: dict[str, Any] = {}
        for name, (variable, _) in VARIABLES.items():
            if name == "register":
                read[name] = _register(environ)
            elif name == "inventory":
                read[name] = Path(environ[variable]) if environ.get(variable) else None
            elif environ.get(variable) is not None:
                kind = type(getattr(defaults, name))
                read[name] = Path(environ[variable]) if issubclass(kind, Path) else kind(environ[variable])
        return replace(defaults, **read)

    def to_env(self) -> dict[str, str]:
        """The same settings as environment variables, for gunicorn workers to read back."""
        written = {
            "inventory": str(self.inventory or ""),
            "register": "true" if self.register else "false",
        }
        return {
            variable: written.get(name, str(getattr(self, name))) for name, (variable, _) in VARIABLES.items()
        }

    @property
    def cert_file(self) -> Path:
        return self.cert_dir / "tls.crt"

    @property
    def key_file(self) -> Path:
        return self.cert_dir / "tls.key"


def _register(environ) -> bool:
    """GPUPORT_REGISTER, true or false; unset, true in the cluster (where the install relies on it)."""
    said = environ.get("GPUPORT_REGISTER", "").strip().lower()
    if said in ("true", "false"):
        return said == "true"
    return environ.get("GPUPORT_CLUSTER", "") == "in-cluster"
