"""What the decision core answers: a small value the HTTP layer turns into an AdmissionReview."""

import re
from collections.abc import Callable, Iterable, Mapping
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
    """One line, at most MAX_WARNING_CHARS: the API server drops warnings that contain a newline, and
    kubectl cuts each at 120 characters. A longer one is made shorter where it enumerates (`brief`); the
    whole text stays in the pod's gpuport.io/rewrites annotation and its Translated Event."""
    if len(text) <= MAX_WARNING_CHARS and text.isprintable() and "  " not in text and text.strip(" ") == text:
        # Already one line (every warning gpuport writes): printable text has no whitespace but the
        # ASCII space, so splitting and joining would give it back unchanged.
        return text
    return brief(" ".join(text.split()))


# Shorter ways to say the same, tried in order until a warning fits: a list of label values becomes its
# first value and how many; the selectors a required affinity replaces lose their values (the record of
# the original ask keeps them); of several things replaced (asks, selectors) the first is named and the
# others counted; a list is only counted; "node selector" goes before the keys it names; the explanation in
# parentheses at the end goes.
_LIST = re.compile(r"([^\s|,;]+)((?:\|[^\s|,;]+)+)")
_SELECTORS = re.compile(r"(?<=node selector )[^→]*(?= →)")
_COUNTED = re.compile(r"[^\s|,;]+\|…\((\d+)\)")
_NOTE = re.compile(r" \([^()]*\)$")


def _first_replaced(text: str) -> str:
    was, arrow, now = text.partition(" → ")
    first, *others = was.split(", ")
    return f"{first} (+{len(others)}){arrow}{now}" if arrow and others else text


_SHORTER: tuple[Callable[[str], str], ...] = (
    lambda text: _LIST.sub(lambda m: f"{m.group(1)}|…({m.group(0).count('|') + 1})", text),
    lambda text: text.replace(" replaced by required node affinity ", " → required affinity "),
    lambda text: _SELECTORS.sub(lambda m: re.sub(r"=[^\s,]+", "", m.group(0)), text),
    _first_replaced,
    lambda text: _COUNTED.sub(lambda m: f"{m.group(1)} values", text),
    # The selector's keys then say on their own what was replaced (EKS's ten L4 instance types).
    lambda text: text.replace("gpuport: node selector ", "gpuport: ", 1),
    lambda text: _NOTE.sub("", text),
)


def brief(text: str) -> str:
    """`text` in at most MAX_WARNING_CHARS, its beginning (what changed) kept: shortened as `_SHORTER`
    says while too long, then cut with an ellipsis."""
    for shorter in _SHORTER:
        if len(text) <= MAX_WARNING_CHARS:
            return text
        text = shorter(text)
    if len(text) <= MAX_WARNING_CHARS:
        return text
    return text[: MAX_WARNING_CHARS - 1].rstrip(" ,;") + "…"


# The answer to most /validate reviews, built once: a Decision is immutable, and building one per
# review cost /validate more than reading the pod.
CHECKED = allow("checked")
