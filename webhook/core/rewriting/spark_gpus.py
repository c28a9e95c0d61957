"""Whether a target can serve a Spark operator application's GPUs at all.

The Kubeflow Spark operator asks for a driver's or an executor's GPUs in its own `gpu: {name, quantity}`
field, which gpuport does not rewrite (the webhook translates the pods when they are created). What it
can say offline is whether the target could run them: Spark's GPU scheduling finds GPUs by a vendor
(`spark.{driver,executor}.resource.gpu.vendor`, `nvidia.com` for NVIDIA's) and its GPU SQL engine, the
RAPIDS Accelerator (`spark.plugins` naming `com.nvidia.spark.SQLPlugin`, `spark.rapids.*` settings), is
built on CUDA and runs on NVIDIA GPUs only. Such an application sent to a cluster without NVIDIA GPUs
would start and find none: it is refused instead. Sources:
https://docs.nvidia.com/spark-rapids/user-guide/latest/getting-started/overview.html
https://spark.apache.org/docs/latest/running-on-kubernetes.html#resource-allocation-and-configuration-overview
"""

from collections.abc import Mapping
from typing import Any

from webhook.core.vocabulary.dialects import Dialects
from webhook.core.vocabulary.platform import CloudMap
from webhook.core.vocabulary.templates import kind_key
from webhook.core.vocabulary.workloads import mapping_at

_GROUP = "sparkoperator.k8s.io"
_RAPIDS_PLUGIN = "com.nvidia.spark.SQLPlugin"
_ROLES = ("driver", "executor")


def spark_refusals(doc: Mapping[str, Any], target: CloudMap, dialects: Dialects) -> list[str]:
    """Why `target` cannot run a SparkApplication (a ScheduledSparkApplication's template), or [] (for any
    other document too)."""
    group, kind = kind_key(doc)
    if target.vendor == "nvidia" or group != _GROUP:
        return []
    spec = mapping_at(doc, ("spec", "template") if kind == "ScheduledSparkApplication" else ("spec",))
    if spec is None or kind not in ("SparkApplication", "ScheduledSparkApplication"):
        return []
    conf = spec.get("sparkConf")
    conf = conf if isinstance(conf, Mapping) else {}
    plugins = str(conf.get("spark.plugins", ""))
    rapids = sorted(
        k
        for k in conf
        if str(k).startswith("spark.rapids.") or (k == "spark.plugins" and _RAPIDS_PLUGIN in plugins)
    )
    asked = [f"spec.{role}.gpu {name}" for role, name in _gpu_names(spec) if _nvidia(name, dialects)]
    asked += [
        f"sparkConf {key}"
        for key in (f"spark.{role}.resource.gpu.vendor" for role in _ROLES)
        if str(conf.get(key, "")).startswith("nvidia.com")
    ]
    if rapids:
        return [
            f"the RAPIDS Accelerator ({', '.join(f'sparkConf {k}' for k in rapids)}) runs on NVIDIA GPUs "
            f"only (CUDA); {target.name} has {target.vendor.upper()} GPUs"
        ]
    if asked:
        return [
            f"it asks for NVIDIA GPUs ({', '.join(asked)}); {target.name} has {target.vendor.upper()} GPUs"
        ]
    return []


def _gpu_names(spec: Mapping[str, Any]) -> list[tuple[str, str]]:
    found = []
    for role in _ROLES:
        part = spec.get(role)
        gpu = part.get("gpu") if isinstance(part, Mapping) else None
        if isinstance(gpu, Mapping) and isinstance(gpu.get("name"), str):
            found.append((role, gpu["name"]))
    return found


def _nvidia(name: str, dialects: Dialects) -> bool:
    meaning = dialects.resource_meaning(name)
    return meaning.accelerator and meaning.vendor == "nvidia"
