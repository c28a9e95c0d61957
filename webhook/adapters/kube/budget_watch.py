"""Every GPU-quota namespace's budget beside what it holds, as this worker's cluster view and quota sum
count it: exported on /metrics at each scrape (adapters/http/metrics.py), and looked at on a timer so
that a namespace going over its budget (a quota made or lowered while gpuport was down) is logged when
it is first seen, and again when it is back within it, even where nothing scrapes."""

import logging
import threading
from collections.abc import Callable

from webhook.core.budget.overshoot import BudgetFigure, budget_figures
from webhook.core.budget.quota import gpu_quotas
from webhook.core.deciding.context import Context

log = logging.getLogger("gpuport.budget")
INTERVAL_SECONDS = 30.0


class BudgetWatch:
    def __init__(self, gate, context: Callable[[], Context], interval: float = INTERVAL_SECONDS):
        self.gate = gate
        self.context = context
        self.interval = interval
        self._over: set[tuple[str, str, str]] = set()  # (namespace, quota, entry) seen over
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def figures(self) -> list[BudgetFigure]:
        """Each GPU quota entry of each namespace with its use; a namespace whose pods cannot be counted
        now (a claim unreadable) is left out, never shown as empty. Logs what went over or back."""
        view = self.gate.view
        if not view.has_synced("pods", "resourcequotas"):
            return []
        context = self.context()
        whole_gpu = context.target.whole_gpu
        found: list[BudgetFigure] = []
        skipped: set[str] = set()
        for namespace in sorted(view.budget_namespaces(lambda q: bool(gpu_quotas([q], whole_gpu)), _none)):
            quotas = gpu_quotas(view.quotas_in(namespace), whole_gpu)
            if not quotas:
                continue
            try:
                used = self.gate.namespace_use(namespace, quotas, context)
            except Exception as exc:
                log.debug("GPU budget of %s not summed now: %s", namespace, exc)
                skipped.add(namespace)
                continue
            found += budget_figures(namespace, quotas, used, whole_gpu)
        self._note(found, skipped)
        return found

    def _note(self, found: list[BudgetFigure], skipped: set[str]) -> None:
        """Logs each entry newly over, and each one back within (or gone) that was over."""
        over = {(f.namespace, f.quota, f.entry): f for f in found if f.over}
        with self._lock:
            new = [f for key, f in over.items() if key not in self._over]
            back = {k for k in self._over if k not in over and k[0] not in skipped}
            self._over = (self._over - back) | over.keys()
        for figure in new:
            log.warning("%s; new GPU pods there are refused until it is back within", figure.words())
        for namespace, quota, entry in sorted(back):
            log.info("namespace %s is back within its GPU budget (quota %s, %s)", namespace, quota, entry)

    def start(self) -> None:
        threading.Thread(target=self._run, name="gpu-budget-watch", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.figures()
            except Exception:
                log.exception("GPU budgets not looked at this round")


def _none(_limitrange) -> bool:
    return False
