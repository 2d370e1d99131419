"""Classes of geounits by their population (the 2010 study's block-size classes): what the
accuracy, agreement and risk figures are broken down by."""

from __future__ import annotations

import polars as pl

BLOCK_SIZE_CLASSES = ((1, 9), (10, 49), (50, 99), (100, 249), (250, 499), (500, 999), (1000, None))
"""Block population classes of the 2010 study."""


def size_class_label(low: int, high: int | None) -> str:
    return f"{low}+" if high is None else f"{low}-{high}"


def size_class_of(persons: pl.Expr) -> pl.Expr:
    """The block-size class label of a block population."""
    expr = pl.lit(None, dtype=pl.String)
    for low, high in reversed(BLOCK_SIZE_CLASSES):
        inside = persons >= low if high is None else persons.is_between(low, high)
        expr = pl.when(inside).then(pl.lit(size_class_label(low, high))).otherwise(expr)
    return expr
