"""gunicorn settings for `gpuport serve`; values come from GPUPORT_* variables that serve sets.

gthread workers keep HTTP/1.1 connections alive, which is how the API server calls webhooks: the
sync worker would close each one and pay a TLS handshake per admission.
"""

import gc
import os
import signal
import threading

from webhook.adapters.http import logs, metrics
from webhook.adapters.http.readiness import WorkerReadiness
from webhook.adapters.http.reload import CloudMapReloader
from webhook.adapters.http.settings import Settings
from webhook.adapters.http.tls import ReloadingContext

_settings = Settings.from_env()

bind = [_settings.bind]
# gthread with request deadlines: slow or idle clients cannot hold the threads (deadline_worker.py).
worker_class = "webhook.adapters.http.deadline_worker.DeadlineThreadWorker"
# Connections one worker holds open at once; the API server keeps a small pool per instance.
worker_connections = 256
workers = _settings.workers
threads = _settings.threads
# Longer than the API server's idle-connection timeout (90 s), so the client, not us, closes idle
# connections and never sends on one we have just closed.
keepalive = 120
timeout = 30
graceful_timeout = 20
certfile = str(_settings.cert_file)
keyfile = str(_settings.key_file)
loglevel = _settings.log_level
accesslog = None
errorlog = "-"
proc_name = "gpuport"
# No runtime control socket: nothing uses it, and the container's root filesystem is read-only.
control_socket_disable = True
# One TLS context per worker process, created after fork and rebuilt when the files change.
_tls: ReloadingContext | None = None


def ssl_context(config, default_ssl_context_factory):
    global _tls
    if _tls is None or _tls.cert_file != _settings.cert_file:
        _tls = ReloadingContext(
            _settings.cert_file,
            _settings.key_file,
            on_reload=lambda ok: metrics.CERT_RELOADS.labels("ok" if ok else "error").inc(),
        )
    return _tls.current()


def post_worker_init(worker):
    """Start watching the cloud maps; on SIGTERM, report not-ready first, then let gunicorn drain and
    close kept-alive connections."""
    logs.configure(_settings.log_level)  # serve did in the master; a worker started another way too
    # What the worker loaded (modules, clients, maps: some 130,000 objects) lives as long as it does:
    # frozen, a full collection no longer walks it. Each one stops every thread of the worker, and
    # in a burst they took 110-300 ms, a few times a run (bench/burst_bench.py, issue 37).
    gc.collect()
    gc.freeze()
    state = worker.wsgi.extensions["gpuport"]
    if state.view is not None:
        readiness = WorkerReadiness(_settings.state_dir, _settings.workers)
        state.all_workers_ready = readiness.ready
        state.view.start()
        pid = os.getpid()
        view = state.view

        def mark_when_synced() -> None:
            if view.wait_synced():
                readiness.mark(pid)

        threading.Thread(target=mark_when_synced, name="mark-synced", daemon=True).start()
    CloudMapReloader(
        state, _settings.cloudmap_dir, _settings.cloud, _settings.reload_interval, _settings.inventory
    ).start()
    if state.registrar is not None:  # it waits for readiness: nothing is registered before
        state.registrar.start()
    if state.budgets is not None:
        state.budgets.start()
    stop = worker.handle_exit

    def on_sigterm(signum, frame):
        state.draining.set()
        stop(signum, frame)

    signal.signal(signal.SIGTERM, on_sigterm)


def child_exit(server, worker):
    metrics.worker_exited(worker.pid)
    WorkerReadiness(_settings.state_dir, _settings.workers).clear(worker.pid)
