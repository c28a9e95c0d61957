"""Node labels and the capability annotation from a capability record (pure)."""

import json
from collections.abc import Mapping
from typing import Any

from webhook.core.vocabulary.topology import CAPABILITY_ANNOTATION, SHARED_MEMORY_FULL

MANAGED_ANNOTATION = "gpuport.io/managed-labels"
# GPU Feature Discovery stamps its runs; where it runs, its nvidia.com/* labels are left to it.
GFD_MARKERS = ("nvidia.com/gfd.timestamp",)


def gpuport_labels(record: Mapping[str, Any]) -> dict[str, str]:
    gpus = record.get("gpus") or []
    labels = {
        "gpuport.io/gpu-present": "true" if gpus else "false",
        "gpuport.io/healthy-gpus": str(record.get("healthy_gpu_count", 0)),
    }
    if not gpus:
        return labels
    models = {g.get("model") for g in gpus if g.get("model")}
    if len(models) == 1:
        labels["gpuport.io/gpu-model"] = models.pop()
    labels["gpuport.io/nvlink-domain-size"] = str(record.get("nvlink_domain_size", 0))
    if record.get("gpus_per_numa_node") is not None:
        labels["gpuport.io/gpus-per-numa-node"] = str(record["gpus_per_numa_node"])
    if record.get("driver_version"):
        labels["gpuport.io/driver"] = record["driver_version"]
    if record.get("cuda_driver_version"):
        labels["gpuport.io/cuda"] = record["cuda_driver_version"]
    usage = record.get("usage")
    if usage is not None:
        # The webhook keeps new shared-GPU pods off a node labelled "true" (policy.sharing.memory_fill).
        labels[SHARED_MEMORY_FULL] = "true" if usage["shared_memory_full"] else "false"
    return labels


def gfd_labels(record: Mapping[str, Any]) -> dict[str, str]:
    """The GPU Feature Discovery labels gpuport can stand in for where GFD does not run."""
    gpus = record.get("gpus") or []
    if not gpus:
        return {}
    first = gpus[0]
    labels = {"nvidia.com/gpu.count": str(len(gpus))}
    if first.get("name"):
        labels["nvidia.com/gpu.product"] = "".join(
            c if c.isalnum() or c in "-_." else "-" for c in first["name"].replace(" ", "-")
        )
    if first.get("memory_mib") is not None:
        labels["nvidia.com/gpu.memory"] = str(first["memory_mib"])
    if first.get("family"):
        labels["nvidia.com/gpu.family"] = first["family"]
    if first.get("compute_capability"):
        major, minor = first["compute_capability"].split(".")
        labels["nvidia.com/gpu.compute.major"], labels["nvidia.com/gpu.compute.minor"] = major, minor
    driver = record.get("driver_version")
    if driver:
        parts = driver.split(".")
        labels["nvidia.com/cuda.driver-version.full"] = driver
        for key, value in zip(("major", "minor", "revision"), parts, strict=False):
            labels[f"nvidia.com/cuda.driver-version.{key}"] = value
    cuda = record.get("cuda_driver_version")
    if cuda:
        major, minor = cuda.split(".")
        labels.update(
            {
                "nvidia.com/cuda.runtime-version.full": cuda,
                "nvidia.com/cuda.runtime-version.major": major,
                "nvidia.com/cuda.runtime-version.minor": minor,
            }
        )
    labels["nvidia.com/mig.capable"] = (
        "true" if any(g["mig"]["mode"] != "unsupported" for g in gpus) else "false"
    )
    return labels


def desired_metadata(
    record: Mapping[str, Any], node_labels: Mapping[str, str], node_annotations: Mapping[str, str]
) -> dict[str, Any]:
    """A merge patch for the Node's metadata: our labels, the annotation, and removal of labels we set
    before but no longer want. Empty when the node already says all of it."""
    previous = set(json.loads(node_annotations.get(MANAGED_ANNOTATION, "[]")))
    wanted = gpuport_labels(record)
    gfd_runs = any(marker in node_labels for marker in GFD_MARKERS)
    if not gfd_runs:
        # Never overwrite a value someone else set: only keys that are absent or that we own.
        for key, value in gfd_labels(record).items():
            if key not in node_labels or key in previous:
                wanted[key] = value
    labels_patch: dict[str, str | None] = {k: v for k, v in wanted.items() if node_labels.get(k) != v}
    labels_patch.update({k: None for k in previous - set(wanted) if k in node_labels})
    annotations_patch: dict[str, str | None] = {}
    capability = json.dumps(record, sort_keys=True, separators=(",", ":"))
    if node_annotations.get(CAPABILITY_ANNOTATION) != capability:
        annotations_patch[CAPABILITY_ANNOTATION] = capability
    managed = json.dumps(sorted(wanted))
    if node_annotations.get(MANAGED_ANNOTATION) != managed:
        annotations_patch[MANAGED_ANNOTATION] = managed
    patch: dict[str, Any] = {}
    if labels_patch:
        patch["labels"] = labels_patch
    if annotations_patch:
        patch["annotations"] = annotations_patch
    return {"metadata": patch} if patch else {}
