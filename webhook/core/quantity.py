"""Kubernetes resource quantities, parsed by the kubernetes library (never by hand)."""

from decimal import Decimal

from kubernetes.utils import parse_quantity

MIB = 1024 * 1024


class QuantityError(ValueError):
    pass


def parse(value: object) -> Decimal:
    """Parse a quantity as the API server would: '500m', '1.5', 2, '1Ki'."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise QuantityError(f"{value!r} is not a quantity")
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
