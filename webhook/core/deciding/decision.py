"""What the decision core answers: a small value the HTTP layer turns into an AdmissionReview."""

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

# The API server cuts each warning at 256 characters; kubectl output stays readable under 120.
MAX_WARNING_CHARS = 120


# A read-only view of a dict nobody holds: every decision without audit annotations shares it.
_NO_AUDIT: Mapping[str, str] = MappingProxyType({})


class Decision(NamedTuple):
    """Immutable, and a NamedTuple rather than a frozen dataclass: one is built for every review."""

    allowed: bool
    # Short, stable label for metrics and logs ("ok", "fractional-gpu", ...), never shown to users.
    reason: str
    message: str = ""
    patch: tuple[Mapping[str, Any], ...] = ()
    warnings: tuple[str, ...] = ()
    audit_annotations: Mapping[str, str] = _NO_AUDIT
    # Objects the patched pod refers to, which must exist in its namespace before it is created
    # (ResourceClaimTemplates on a DRA cluster); the adapter creates them, never on a dry run.
    claim_templates: tuple[Mapping[str, Any], ...] = ()


def allow(
    reason: str = "ok",
    *,
    patch: Iterable[Mapping[str, Any]] = (),
    warnings: Iterable[str] = (),
    audit_annotations: Mapping[str, str] | None = None,
    claim_templates: Iterable[Mapping[str, Any]] = (),
) -> Decision:
    return Decision(
        allowed=True,
        reason=reason,
        patch=tuple(patch),
        warnings=tuple(clean_warning(w) for w in warnings),
        audit_annotations=MappingProxyType(dict(audit_annotations)) if audit_annotations else _NO_AUDIT,
        claim_templates=tuple(claim_templates),
    )


def deny(reason: str, message: str, *, warnings: Iterable[str] = ()) -> Decision:
    return Decision(
        allowed=False,
        reason=reason,
        message=message,
        warnings=tuple(clean_warning(w) for w in warnings),
    )


def clean_warning(text: str) -> str:
    """One line, at most MAX_WARNING_CHARS: the API server drops warnings that contain a newline."""
    if len(text) <= MAX_WARNING_CHARS and text.isprintable() and "  " not in text and text.strip(" ") == text:
        # Already one line (every warning gpuport writes): printable text has no whitespace but the
        # ASCII space, so splitting and joining would give it back unchanged.
        return text
    flat = " ".join(text.split())
    if len(flat) <= MAX_WARNING_CHARS:
        return flat
    return flat[: MAX_WARNING_CHARS - 1] + "…"


# The answer to most /validate reviews, built once: a Decision is immutable, and building one per
# review cost /validate more than reading the pod.
CHECKED = allow("checked")
