"""Server settings: command-line flags win over GPUPORT_* environment variables, which win over defaults."""

import os
from dataclasses import dataclass, field
from pathlib import Path

from webhook.config.cloudmap import default_directory


@dataclass(frozen=True)
class Settings:
    bind: str = "0.0.0.0:8443"
    cert_dir: Path = Path("/etc/gpuport/tls")
    cloud: str = "generic"
    cloudmap_dir: Path = field(default_factory=default_directory)
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
        return cls(
            bind=environ.get("GPUPORT_BIND", defaults.bind),
            cert_dir=Path(environ.get("GPUPORT_CERT_DIR", defaults.cert_dir)),
            cloud=environ.get("GPUPORT_CLOUD", defaults.cloud),
            cloudmap_dir=Path(environ.get("GPUPORT_CLOUDMAP_DIR", defaults.cloudmap_dir)),
            workers=int(environ.get("GPUPORT_WORKERS", defaults.workers)),
            threads=int(environ.get("GPUPORT_THREADS", defaults.threads)),
            log_level=environ.get("GPUPORT_LOG_LEVEL", defaults.log_level),
            reload_interval=float(environ.get("GPUPORT_RELOAD_INTERVAL", defaults.reload_interval)),
            inventory=Path(environ["GPUPORT_INVENTORY"]) if environ.get("GPUPORT_INVENTORY") else None,
            cluster=environ.get("GPUPORT_CLUSTER", defaults.cluster),
            namespace=environ.get("GPUPORT_NAMESPACE", defaults.namespace),
            state_dir=Path(environ.get("GPUPORT_STATE_DIR", defaults.state_dir)),
            register=_register(environ),
            service=environ.get("GPUPORT_SERVICE", defaults.service),
            webhook_url=environ.get("GPUPORT_WEBHOOK_URL", defaults.webhook_url),
        )

    def to_env(self) -> dict[str, str]:
        """The same settings as environment variables, for gunicorn workers to read back."""
        return {
            "GPUPORT_BIND": self.bind,
            "GPUPORT_CERT_DIR": str(self.cert_dir),
            "GPUPORT_CLOUD": self.cloud,
            "GPUPORT_CLOUDMAP_DIR": str(self.cloudmap_dir),
            "GPUPORT_WORKERS": str(self.workers),
            "GPUPORT_THREADS": str(self.threads),
            "GPUPORT_LOG_LEVEL": self.log_level,
            "GPUPORT_RELOAD_INTERVAL": str(self.reload_interval),
            "GPUPORT_INVENTORY": str(self.inventory or ""),
            "GPUPORT_CLUSTER": self.cluster,
            "GPUPORT_NAMESPACE": self.namespace,
            "GPUPORT_STATE_DIR": str(self.state_dir),
            "GPUPORT_REGISTER": "true" if self.register else "false",
            "GPUPORT_SERVICE": self.service,
            "GPUPORT_WEBHOOK_URL": self.webhook_url,
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
