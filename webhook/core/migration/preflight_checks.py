"""The preflight's per-workload checks that need only the workload's asks and the target: GPU model,
memory, MIG/sharing mode, driver and CUDA, topology. Each returns (compat in [0, 1], why); the
checks that need every workload at once (capacity, quota) stay in preflight.py.
"""

from collections.abc import Mapping, Sequence
from typing import Any

from webhook.core.asks.checks import is_extended_resource
from webhook.core.asks.demand import ContainerAsk
from webhook.core.vocabulary import quantity
from webhook.core.vocabulary.catalogue import Catalogue
from webhook.core.vocabulary.cuda import container_cuda, driver_runs, max_cuda_for, parse_version
from webhook.core.vocabulary.inventory import Inventory, Node
from webhook.core.vocabulary.platform import CloudMap
from webhook.core.vocabulary.workloads import mapping_at, resource_entries


def model_check(
    models: set[str], target: CloudMap, catalogue: Catalogue, present: set[str] | None = None
) -> tuple[float, str]:
    """Whether the target offers the pinned models; with an inventory (`present`: the models its nodes
    have), whether a node has one too."""
    if not models:
        return 1.0, "no GPU model pinned"
    offered = target.models_offered(catalogue)
    same = sorted(models & set(offered))
    if same and present is not None and not set(same) & present:
        have = ", ".join(sorted(present)) or "none"
        return (
            0.5,
            f"{', '.join(same)} offered by {target.name}, but no node of the inventory has it "
            f"(it has {have})",
        )
    if same:
        return 1.0, f"same model offered: {', '.join(same)}"
    for model_id in sorted(models):
        best = catalogue.equivalent(model_id, offered)
        if best is not None:
            return 0.7, f"{model_id} not offered; equivalent with ≥ memory: {best.id} ({best.memory_gb} GB)"
    return (
        0.0,
        f"{' / '.join(sorted(models))} not offered and nothing with as much memory ({', '.join(offered)})",
    )


def memory_check(
    asks: list[ContainerAsk], models: set[str], target: CloudMap, catalogue: Catalogue
) -> tuple[float, str]:
    worst = (1.0, "every ask gets at least the memory it had")
    for ask in asks:
        if ask.kind == "mig":
            candidates = [
                catalogue.models[m]
                for m in (models & set(target.models_offered(catalogue)) or target.models_offered(catalogue))
            ]
            fits = [p for m in candidates if m.mig_capable and (p := m.smallest_fit(ask.mig_profile))]
            if not target.mig_offered or not fits:
                result = (0.0, f"no slice with ≥ {ask.mig_profile.memory_gb} GB on {target.name}")
            else:
                result = (1.0, f"{ask.mig_profile.name} → {min(fits).name}: ≥ {ask.mig_profile.memory_gb} GB")
        elif ask.kind == "shared" and ask.share and ask.share.memory_mib:
            traits = target.shared.traits
            if not target.shared.offered:
                result = (0.0, f"{target.name} offers no shared GPUs")
            else:
                result = (
                    1.0 if traits.caps_memory else 0.5,
                    f"{ask.share.memory_mib} MiB {traits.memory_fate}",
                )
        elif ask.kind == "shared" and target.shared.traits.needs_size and not _sized(ask):
            result = (0.0, f"{target.name} shares GPUs by size ({target.shared.form}) and the ask names none")
        else:
            continue
        worst = min(worst, result, key=lambda r: r[0])
    return worst


def _sized(ask: ContainerAsk) -> bool:
    """Whether a share says how much of a GPU: memory, or a percentage of memory or cores."""
    share = ask.share
    return share is not None and (share.memory_mib, share.memory_percent, share.core_percent) != (None,) * 3


def mode_check(asks: list[ContainerAsk], target: CloudMap) -> tuple[float, str]:
    worst = (1.0, "whole GPUs" if all(a.kind == "whole" for a in asks) else "the form asked for is offered")
    for ask in asks:
        if ask.kind == "mig":
            if target.mig_offered:
                result = (1.0, f"MIG offered ({target.mig_offered})")
            elif target.mig_to_whole == "allow":
                result = (0.5, "no MIG: whole GPUs by policy")
            else:
                result = (0.0, f"{target.name} offers no MIG")
        elif ask.kind == "shared":
            result = (
                (1.0, f"sharing offered ({target.shared.form})")
                if target.shared.offered
                else (0.0, f"{target.name} offers no GPU sharing")
            )
        elif ask.kind == "fraction":
            result = (
                (0.5, f"fraction by policy ({target.fractional_policy})")
                if target.fractional_policy != "deny"
                else (0.0, "fractional GPU")
            )
        else:
            continue
        worst = min(worst, result, key=lambda r: r[0])
    return worst


def node_cuda(node: Node) -> tuple[tuple[int, ...] | None, str, str]:
    """(version, "runtime" or "driver", the label text): GFD's runtime labels give the newest CUDA the
    driver runs; without them the driver version goes through the table in webhook/core/vocabulary/cuda.py."""
    labels = node.labels
    major, minor = (
        labels.get("nvidia.com/cuda.runtime-version.major"),
        labels.get("nvidia.com/cuda.runtime-version.minor"),
    )
    if major and minor:
        return (int(major), int(minor)), "runtime", f"{major}.{minor}"
    full = labels.get("nvidia.com/cuda.driver-version.full") or ".".join(
        labels[k]
        for k in (
            "nvidia.com/cuda.driver-version.major",
            "nvidia.com/cuda.driver-version.minor",
            "nvidia.com/cuda.driver-version.revision",
        )
        if k in labels
    )
    driver = parse_version(full) if full else None
    return (driver, "driver", full) if driver else (None, "", "")


def driver_check(
    templates: Sequence[Mapping[str, Any]], target: CloudMap, inventory: Inventory | None
) -> tuple[float, str]:
    """Whether the target's drivers run the CUDA the pod templates were built for."""
    needs = [container_cuda(t) for t in templates]
    cuda = max((c for c, _ in needs if c), default=None)
    if cuda is None:
        return 0.5, needs[0][1] if needs else "no containers"
    where = next(w for c, w in needs if c == cuda)
    versions: list[tuple[float, str]] = []
    nodes = [
        n
        for n in (inventory.nodes if inventory else ())
        if any(is_extended_resource(r) for r in n.allocatable)
    ]
    for node in nodes:
        version, kind, text = node_cuda(node)
        if version is None:
            continue
        if kind == "runtime":
            versions.append(
                (1.0 if version >= cuda else 0.0, f"{node.name} runs CUDA ≤ {version[0]}.{version[1]}")
            )
        else:
            top = max_cuda_for(version)
            shown = f"{top[0]}.{top[1]}" if top else "none"
            versions.append(
                (
                    driver_runs(version, cuda),
                    f"{node.name} driver {text} (CUDA ≤ {shown})",
                )
            )
    if not versions and target.driver_version:
        driver = parse_version(target.driver_version)
        if driver is not None:
            versions.append(
                (driver_runs(driver, cuda), f"{target.name} default driver {target.driver_version}")
            )
    if not versions:
        return (
            0.5,
            f"CUDA {cuda[0]}.{cuda[1]} ({where}); target driver unknown (no inventory labels or map default)",
        )
    compat, why = min(versions, key=lambda v: v[0])
    return compat, f"CUDA {cuda[0]}.{cuda[1]} ({where}) on {why}" + (
        " — minor-version compatibility only" if compat == 0.5 else ""
    )


def topology_check(
    translated: Sequence[Mapping[str, Any]],
    inventory: Inventory | None,
    models: set[str],
    catalogue: Catalogue,
    per_pod: int | None = None,
    whole_gpu: str = "nvidia.com/gpu",
) -> tuple[float, str]:
    """Whether a node of the target holds the most GPUs one translated pod asks for, over NVLink.
    `per_pod` when the translated pods ask by DRA claim, not by resource. Only the target's whole-GPU
    resource is counted, on pods and nodes alike: an EFA or RDMA count beside the GPUs is no GPU."""
    k = per_pod or 0
    for template in translated if per_pod is None else ():
        spec = mapping_at(template, ("spec",)) or {}
        for _, name, value in resource_entries(spec, "limits", ("containers",)):
            if name == whole_gpu:
                k = max(k, int(quantity.parse(value)))
    if k <= 1:
        return 1.0, "one GPU per pod: no topology needs"
    if inventory is None:
        return 0.5, f"{k} GPUs per pod; not checked: no inventory"
    widest, nvlink = 0, None
    for node in inventory.nodes:
        gpus = max(
            (int(v) for n, v in node.allocatable.items() if n == whole_gpu),
            default=0,
        )
        widest = max(widest, gpus)
        domain = node.capability.get("nvlink_domain_size") if node.capability else None
        if domain is not None:
            nvlink = max(nvlink or 0, int(domain))
    if widest < k:
        return 0.0, f"{k} GPUs per pod but the largest node has {widest}"
    if nvlink is None:
        return 0.8, f"{k} GPUs per pod fit on one node; NVLink unknown (no node-agent data)"
    if nvlink >= k:
        return 1.0, f"{k} GPUs per pod; NVLink domains of {nvlink}"
    return 0.5, f"{k} GPUs per pod but NVLink domains hold {nvlink}: traffic crosses PCIe"
