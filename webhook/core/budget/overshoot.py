"""A namespace's GPU budget beside what it holds (pure): each GPU quota entry's use and limit, and
whether it is over. gpuport refuses what would take a namespace past its budget, but a namespace can be
over it all the same: a quota made or lowered while gpuport was down, or while pods ran that no quota
limited. Refusing new pods says nothing of it; these figures let the server export it as a metric, log
it when it is first seen, and `gpuport usage` show it.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.core.asks.demand import read_demand
from webhook.core.budget.equivalents import pod_use
from webhook.core.budget.quota import Quota, applies, gpu_quotas, pod_facts
from webhook.core.vocabulary.dialects import Dialects
from webhook.core.vocabulary.gpu_use import MEASURES, NO_GPU, GpuUse
from webhook.core.vocabulary.platform import CloudMap


@dataclass(frozen=True)
class BudgetFigure:
    """One GPU quota entry of a namespace: what its pods use and what it allows, in the entry's unit
    (GPU-equivalents, or MiB for the GPU-memory budget)."""

    namespace: str
    quota: str
    entry: str  # the ResourceQuota `hard` key: requests.nvidia.com/gpu, requests.gpuport.io/gpu-memory
    used: float
    hard: float
    used_shown: str
    hard_shown: str

    @property
    def over(self) -> bool:
        return self.used > self.hard

    def words(self) -> str:
        return (
            f"namespace {self.namespace} is over its GPU budget: quota {self.quota} allows "
            f"{self.entry}={self.hard_shown}, its pods hold {self.used_shown}"
        )


def budget_figures(
    namespace: str, quotas: Iterable[Quota], used: Mapping[str, GpuUse], whole_gpu: str
) -> list[BudgetFigure]:
    """Each GPU entry of each quota with its use (`used`: per quota name; a quota not in it holds none)."""
    found = []
    for quota in gpu_quotas(list(quotas), whole_gpu):
        for measure in MEASURES:
            key = measure.quota_key(whole_gpu)
            if key not in quota.hard:
                continue
            held, limit = measure.of(used.get(quota.name, NO_GPU)), measure.limit(quota.hard[key])
            shown = (measure.show(held), measure.show(limit))
            found.append(BudgetFigure(namespace, quota.name, key, float(held), float(limit), *shown))
    return found


def quota_use(
    pods: Iterable[Mapping[str, Any]],
    quotas: Iterable[Quota],
    target: CloudMap,
    dialects: Dialects,
) -> dict[str, GpuUse]:
    """Per quota, the GPU use of the not-finished pods it applies to, read as the quota gate reads a pod
    without a cluster (DRA claims, which need their objects, are left out: the server counts them)."""
    quotas = list(quotas)
    used = {q.name: NO_GPU for q in quotas}
    for pod in pods:
        if ((pod.get("status") or {}).get("phase")) in ("Succeeded", "Failed"):
            continue
        use = pod_use(read_demand(pod, dialects), target, dialects.catalogue, shared_claims=False)
        facts = pod_facts(pod)
        for quota in quotas:
            if applies(quota, facts):
                used[quota.name] = used[quota.name] + use
    return used
