"""A namespace over its GPU budget is visible: exported on /metrics as used beside limit, logged once when
first seen and once when back within (issue 45: after an outage, 2.29 GPU-equivalents held against a
quota of 1 and nothing said so)."""

import logging
from decimal import Decimal

from tests.helpers import context
from tests.quota_fakes import FakeView
from tests.translation_cases import pod
from webhook.adapters.http import metrics
from webhook.adapters.http.server import ServerState, create_app
from webhook.adapters.kube.budget_watch import BudgetWatch
from webhook.adapters.kube.quota_gate import QuotaGate
from webhook.core.budget.quota import Quota

CTX = context("generic")


class View(FakeView):
    def budget_namespaces(self, has_gpu_quota, has_gpu_limit):
        return {"team-a"} if any(has_gpu_quota(q) for q in self.quotas) else set()


def gpu_pod(resources, uid):
    body = pod(resources, name=uid)
    body["metadata"]["uid"] = uid
    body["status"] = {"phase": "Running"}
    return body


def watch():
    # A quota of 1 made while gpuport was down, over pods it had admitted with no quota in place.
    view = View([Quota("gpus", {"requests.nvidia.com/gpu": Decimal(1)})])
    view.pods = [gpu_pod({"nvidia.com/gpu": "2"}, "a"), gpu_pod({"nvidia.com/mig-2g.20gb": "1"}, "b")]
    return view, BudgetWatch(QuotaGate(view, ledger=None), lambda: CTX)


def test_an_overshoot_is_logged_when_first_seen_and_when_back_within(caplog):
    view, budgets = watch()
    with caplog.at_level(logging.INFO, logger="gpuport.budget"):
        (figure,) = budgets.figures()
        budgets.figures()  # the same overshoot again: said once
        assert (figure.namespace, figure.quota, round(figure.used, 3), figure.hard) == (
            "team-a",
            "gpus",
            2.286,
            1.0,
        )
        over = [r.getMessage() for r in caplog.records if "over its GPU budget" in r.getMessage()]
        assert over == [
            "namespace team-a is over its GPU budget: quota gpus allows requests.nvidia.com/gpu=1, its pods "
            "hold 2.286; new GPU pods there are refused until it is back within"
        ]
        view.pods = view.pods[1:]  # the two whole GPUs finished
        (figure,) = budgets.figures()
        assert not figure.over
    assert any("back within its GPU budget (quota gpus" in r.getMessage() for r in caplog.records)


def test_the_budget_is_exported_on_metrics_beside_its_limit():
    _, budgets = watch()
    app = create_app(ServerState(context=CTX, budgets=budgets))
    text = app.test_client().get("/metrics").get_data(as_text=True)
    labels = '{namespace="team-a",quota="gpus",resource="requests.nvidia.com/gpu"}'
    assert f"{metrics.BUDGET_USED}{labels} 2.2857142857142856" in text
    assert f"{metrics.BUDGET_LIMIT}{labels} 1.0" in text


def test_a_view_still_loading_exports_no_figure():
    view, budgets = watch()
    view.listed.discard("pods")
    assert budgets.figures() == []
