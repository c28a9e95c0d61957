"""Kubernetes resource quantities, parsed by the kubernetes library (never by hand)."""

import functools
from decimal import Decimal

from kubernetes.utils import parse_quantity

from webhook.core.vocabulary.errors import BadInput

MIB = 1024 * 1024


class QuantityError(BadInput):
    pass


def parse(value: object) -> Decimal:
    """Parse a quantity as the API server would: '500m', '1.5', 2, '1Ki'."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise QuantityError(f"{value!r} is not a quantity")
    if type(value) is str and len(value) <= 32:
        # Pods repeat a handful of amounts ("1", "8", "500m"): each is parsed once per worker. A
        # Decimal is immutable, so sharing one is safe; longer strings are not worth remembering.
        return _parse_text(value)
    return _parse(value)


@functools.lru_cache(maxsize=512)
def _parse_text(value: str) -> Decimal:
    return _parse(value)


def _parse(value: str | int | float) -> Decimal:
    try:
        # The client library ships no type hints; it returns a Decimal.
        return Decimal(parse_quantity(value))  # type: ignore[no-untyped-call]
    except (ValueError, ArithmeticError) as exc:
        raise QuantityError(f"{value!r} is not a quantity") from exc


def as_written(amount: Decimal) -> str:
    """The plain decimal a user would have typed: the API server turns 0.5 into '500m'."""
    text = format(amount.normalize(), "f")
    return text


def is_whole(amount: Decimal) -> bool:
    return amount == amount.to_integral_value()
