"""How the checks of a US population word what a contract column accepts (docs/data.md); the
findings themselves are :mod:`sdclab.core.findings`."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from sdclab.censuses.us2010.geography import BLOCK_DIGITS
from sdclab.censuses.us2010.population.columns import RACE_CODE_COLUMNS, ColumnSpec


def expected_text(spec: ColumnSpec) -> str:
    """What a column accepts, for the ``(expected …)`` part of a message."""
    dtype = spec_dtype(spec)
    if dtype == pl.Boolean:
        text = "true or false"
    elif spec.name == "block":
        text = f"a {BLOCK_DIGITS}-digit block geocode"
    elif spec.name in RACE_CODE_COLUMNS:
        text = f"a detailed race code, {spec.low}–{spec.high}"
    elif spec.low is not None and spec.high is not None:
        text = f"{spec.low}–{spec.high}"
    else:
        text = "a whole number"
    return f"{text} or empty" if spec.nullable else text


def spec_dtype(spec: ColumnSpec) -> pl.DataType:
    """The polars type a column of ``spec`` is held as."""
    return spec.dtype if isinstance(spec.dtype, pl.DataType) else spec.dtype()


@dataclass(frozen=True)
class Table:
    """A frame to validate, with the name its messages use and its place in the sort order."""

    frame: pl.DataFrame
    specs: tuple[ColumnSpec, ...]
    source: str
    index: int
