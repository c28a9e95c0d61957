"""A pod's charge annotations are fixed once it exists, where there is a GPU budget (pure).

Pod metadata is mutable: an update may add, raise, lower or remove an annotation a scheduler reads as a
GPU ask (KAI's `gpu-fraction`, HAMi's `nvidia.com/use-gputype`, ...). Once the pod is bound its
container keeps what it was given at start whatever the annotation says afterwards, so a lowered or
removed share frees the quota while the GPU stays in use, and an added model annotation re-reads whole
GPUs as a smaller model. gpuport refuses such an update in the namespaces with a GPU budget rather than
keep a second record of what each pod was charged: one rule, visible in the refusal, nothing to repair
after a restart. Elsewhere there is no budget to undercut, and the update passes.
"""

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from webhook.core.asks.charged_templates import CLAIM_TEMPLATES
from webhook.core.vocabulary.platform import CloudMap


def charge_annotations(maps: Iterable[CloudMap]) -> frozenset[str]:
    """Every pod annotation a loaded map reads as (part of) a GPU ask: gpuport reads a pod by every
    dialect, so an annotation any of them reads may change its charge; and the uids of the claim
    templates a pod was charged (charged_templates), which its claims are held to."""
    return frozenset({CLAIM_TEMPLATES}).union(*(m.annotation_keys() for m in maps))


def per_container_charge(maps: Iterable[CloudMap]) -> Callable[[str], bool]:
    """Whether an annotation key is one a loaded map reads per container (KAI's
    nvidia.com/container.<name>.gpu-memory.request / .limit): named by a pattern, not listed."""
    forms = tuple(m.shared for m in maps if m.shared.container_memory_prefix)
    return lambda key: any(form.names_container_annotation(key) for form in forms)


def changed_charge_annotations(
    before: Mapping[str, Any] | None,
    after: Mapping[str, Any] | None,
    keys: frozenset[str],
    per_container: Callable[[str], bool] = lambda key: False,
) -> tuple[str, ...]:
    """The charge annotations an update adds, changes or removes, sorted; () when it leaves them be."""
    old, new = _annotations(before), _annotations(after)
    named = keys | {k for k in (*old, *new) if isinstance(k, str) and per_container(k)}
    return tuple(sorted(k for k in named if old.get(k) != new.get(k)))


def frozen_message(subject: str, namespace: str, changed: tuple[str, ...]) -> str:
    """The refusal, naming each annotation and what to do instead."""
    named = ", ".join(changed)
    return (
        f"{subject} is forbidden: namespace {namespace} has a GPU budget, and gpuport reads {named} as "
        "part of this pod's GPU charge; a running pod keeps the GPUs it started with whatever the "
        "annotation says afterwards, so it cannot be added, changed or removed by an update here "
        "(delete the pod and create it again with the new value)"
    )


def _annotations(pod: Mapping[str, Any] | None) -> Mapping[str, Any]:
    metadata = (pod or {}).get("metadata")
    found = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    return found if isinstance(found, Mapping) else {}
