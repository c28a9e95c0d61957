"""A namespace's GPU budget beside what it holds: the figures /metrics exports and `gpuport usage` shows
(issue 45: a quota made while gpuport was down, 2.29 GPU-equivalents admitted against 1, was never
reported)."""

from decimal import Decimal

from tests.helpers import context
from tests.translation_cases import pod
from webhook.core.budget.overshoot import budget_figures, quota_use
from webhook.core.budget.quota import Quota

CTX = context("generic")
QUOTA = Quota(
    "gpus", {"requests.nvidia.com/gpu": Decimal(1), "requests.gpuport.io/gpu-memory": Decimal(2**40)}
)
SCOPED = Quota("short", {"requests.nvidia.com/gpu": Decimal(4)}, scopes=("Terminating",))


def running(resources, phase="Running"):
    body = pod(resources)
    body["status"] = {"phase": phase}
    return body


def test_an_outage_overshoot_is_a_figure_over_its_limit():
    pods = [
        running({"nvidia.com/gpu": "2"}),
        running({"nvidia.com/mig-2g.20gb": "1"}),  # 2/7
        running({"nvidia.com/gpu": "8"}, phase="Succeeded"),  # finished: holds nothing
    ]
    used = quota_use(pods, [QUOTA, SCOPED], CTX.target, CTX.dialects)
    figures = budget_figures("team-a", [QUOTA, SCOPED], used, CTX.target.whole_gpu)
    gpus = next(f for f in figures if f.quota == "gpus" and f.entry == "requests.nvidia.com/gpu")
    assert (round(gpus.used, 2), gpus.hard, gpus.over) == (2.29, 1.0, True)
    assert gpus.words() == (
        "namespace team-a is over its GPU budget: quota gpus allows requests.nvidia.com/gpu=1, "
        "its pods hold 2.286"
    )
    short = next(f for f in figures if f.quota == "short")
    assert (short.used, short.over) == (0.0, False)  # no pod of the namespace has a deadline
    assert {f.entry for f in figures if f.quota == "gpus"} == {
        "requests.nvidia.com/gpu",
        "requests.gpuport.io/gpu-memory",
    }
