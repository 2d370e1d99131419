"""Budgets as settings take them: the range of budgets an exact sampler can serve, and a
budget written back as decimal text."""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from fractions import Fraction


def check_budget_range(
    name: str,
    value: Decimal | Fraction,
    scales: Iterable[Fraction],
    supported: tuple[Fraction, Fraction],
    scale_name: str,
) -> None:
    """Refuse a budget whose noise lies outside what the exact sampler supports.

    Every noise ``scale`` a budget ``value`` sets is inversely proportional to it, so the range
    of budgets the sampler can serve follows from the scales at this value; a ValueError names it.
    """
    scales = list(scales)
    if not scales:
        return
    low, high = supported
    smallest, largest = min(scales), max(scales)
    if low <= smallest and largest <= high:
        return
    budget = Fraction(value)
    lowest, highest = budget * largest / high, budget * smallest / low
    shown = value if isinstance(value, Decimal) else _show(value)
    raise ValueError(
        f"{name} = {shown} needs noise of {scale_name} outside the {_show(low)}..{_show(high)} "
        f"the exact sampler supports; expected {name} from {_show(lowest)} to {_show(highest)}"
    )


def _show(value: Fraction) -> str:
    """A rational number for a message, at any magnitude."""
    try:
        return f"{float(value):.4g}"
    except OverflowError:
        return "a number beyond 1e308"


def decimal_text(value: Fraction, digits: int = 6) -> str:
    """A budget as a setting takes it: decimal text of ``digits`` significant digits."""
    return format(Decimal(value.numerator) / Decimal(value.denominator), f".{digits}g")
