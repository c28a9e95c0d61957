"""Readiness is the server's, not the answering worker's: every worker's view must have synced."""

import os
import subprocess
import sys

from tests.helpers import context
from webhook.adapters.http.readiness import WorkerReadiness
from webhook.adapters.http.server import ServerState


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_ready_only_when_every_expected_worker_has_synced(tmp_path):
    readiness = WorkerReadiness(tmp_path / "state", workers=2)
    assert readiness.ready() == (False, "cluster view synced in 0 of 2 workers")
    readiness.mark(os.getpid())
    assert readiness.ready() == (False, "cluster view synced in 1 of 2 workers")
    readiness.mark(dead_pid())  # a worker that died after syncing does not count
    assert readiness.ready()[0] is False
    parent = os.getppid()
    readiness.mark(parent)
    assert readiness.ready() == (True, "ok")
    readiness.clear(parent)  # gunicorn's child_exit
    assert readiness.ready()[0] is False


class SyncedView:
    synced = True


def test_readyz_waits_for_the_other_workers_too(tmp_path):
    readiness = WorkerReadiness(tmp_path, workers=2)
    state = ServerState(context=context(), view=SyncedView(), all_workers_ready=readiness.ready)
    readiness.mark(os.getpid())
    assert state.readiness() == (False, "cluster view synced in 1 of 2 workers")
    readiness.mark(os.getppid())
    assert state.readiness() == (True, "ok")


def test_readyz_says_what_gpuport_goes_without_and_stays_ready(tmp_path):
    from webhook.adapters.http.server import create_app

    missing = ["list deviceclasses.resource.k8s.io unavailable: 403 Forbidden"]
    state = ServerState(context=context(), view=SyncedView(), unavailable=lambda: "; ".join(missing))
    answer = create_app(state).test_client().get("/readyz")
    assert answer.status_code == 200
    assert (
        answer.get_data(as_text=True).strip()
        == "ok; list deviceclasses.resource.k8s.io unavailable: 403 Forbidden"
    )
    missing.clear()  # granted since: the body says so at once
    assert create_app(state).test_client().get("/readyz").get_data(as_text=True).strip() == "ok"
