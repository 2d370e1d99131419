"""The conversion of a population table's columns to the contract's types and ranges: strict text
conversion for CSV (and text Parquet) columns, whole-number checks of floats, booleans and block
geocodes, each failure a problem naming its row and value."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from sdclab.censuses.us2010.geography import BLOCK_DIGITS
from sdclab.censuses.us2010.population.columns import PUERTO_RICO, STATE_CODES, ColumnSpec
from sdclab.censuses.us2010.population.problems import Table, expected_text, spec_dtype
from sdclab.core.findings import ROW, Findings, Rule, apply_rules, show, single, where

TRUE_TEXT = ("true", "True", "TRUE", "1")
FALSE_TEXT = ("false", "False", "FALSE", "0")
EXACT_FLOAT_LIMIT = 2**53
"""Floats beyond this magnitude do not hold every integer exactly, so they are not accepted."""
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
"""The range of a column without a stated range (its values are held as Int64)."""
WHOLE_DECIMAL = r"^(-?[0-9]+)\.0*$"
"""A whole number written with a decimal point (``12.0``, ``12.``); group 1 is its integer."""
WHOLE_TEXT = r"-?[0-9]+(\.0*)?"
PLUS_SIGN_TEXT = r"\+[0-9]+(\.0*)?"
EXPONENT_TEXT = r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)[eE][+-]?[0-9]+"
BLOCK_PATTERN = f"^[0-9]{{{BLOCK_DIGITS}}}$"
STATE_DIGITS = 2
STATE_PREFIXES = [f"{code:0{STATE_DIGITS}d}" for code in STATE_CODES]
_STATES = [code for code in STATE_CODES if code != PUERTO_RICO]
STATE_CODES_TEXT = (
    f"{STATE_PREFIXES[0]}–{max(_STATES)} except "
    + ", ".join(
        f"{code:02d}" for code in range(min(_STATES), max(_STATES)) if code not in STATE_CODES
    )
    + f" (the states and DC), or {PUERTO_RICO} (Puerto Rico)"
)
"""The state codes a block geocode may start with, for messages."""
EXAMPLE_BLOCK = "010010201001001"


def value_column(name: str) -> str:
    return f"__value_{name}"


def clean_column(name: str) -> str:
    return f"__clean_{name}"


@dataclass(frozen=True)
class Conversion:
    """How one column becomes its contract dtype, and the rules checked on the way.

    ``value`` is null where the input is missing or cannot be converted; ``missing`` marks missing
    input. Two costly steps run only for columns where some row needs them: ``retry`` marks text
    rows that might convert once surrounding spaces are stripped, and ``fallback`` converts what
    ``value`` could not (whole numbers written as floats in text).
    """

    value: pl.Expr
    missing: pl.Expr
    rules: tuple[Rule, ...]
    retry: pl.Expr | None = None
    fallback: pl.Expr | None = None


def convert(table: Table) -> tuple[pl.DataFrame, Findings]:
    """Convert every contract column, checking types, missing values, codes and ranges.

    Returns the frame in contract order and dtypes (plus the row number) and the problems found.
    Work is staged so that costly string operations run only on columns that need them: parse
    the input as it is, strip spaces and parse again, then parse the leftovers as floats.
    """
    frame = table.frame.select(
        pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias(ROW), *[s.name for s in table.specs]
    )
    if typed_and_in_range(frame, table.specs):
        return frame, Findings()
    kinds = {spec.name: dtype_kind(frame.schema[spec.name]) for spec in table.specs}
    found = Findings()
    conversions: list[tuple[ColumnSpec, Conversion]] = []
    for position, spec in enumerate(table.specs):
        result = column_conversion(spec, frame.schema[spec.name], kinds[spec.name], table, position)
        if isinstance(result, Findings):
            found = found + result
        else:
            conversions.append((spec, result))
    cleaning = [cleaned(spec.name, kinds[spec.name]) for spec, _ in conversions]
    checked = frame.with_columns([expr for expr in cleaning if expr is not None]).with_columns(
        [conversion.value.alias(value_column(spec.name)) for spec, conversion in conversions]
    )
    checked = with_stripped_text(checked, conversions)
    checked = with_fallbacks(checked, conversions)
    found = found + apply_rules(checked, [r for _, c in conversions for r in c.rules])
    if found.total:
        return frame, found
    typed = checked.select(
        ROW,
        *[pl.col(value_column(s.name)).cast(spec_dtype(s)).alias(s.name) for s in table.specs],
    )
    return typed, found


def typed_and_in_range(frame: pl.DataFrame, specs: Sequence[ColumnSpec]) -> bool:
    """Whether every contract column already has its dtype and every value passes the checks of
    :func:`convert` (present where required, in range, a block geocode of a state), found in one
    pass of aggregates: a frame the library made (or a typed Parquet file) then needs no
    conversion. Otherwise the conversion runs and words every problem."""
    if any(frame.schema[s.name] != spec_dtype(s) for s in specs):
        return False
    checks = []
    for spec in specs:
        column = pl.col(spec.name)
        if not spec.nullable:
            checks.append(column.null_count() == 0)
        if spec.name == "block":
            checks.append(column.str.contains(BLOCK_PATTERN).all())
            checks.append(column.str.head(STATE_DIGITS).is_in(STATE_PREFIXES).all())
        elif spec.low is not None and spec.high is not None:
            checks.append((column.min() >= spec.low).fill_null(True))
            checks.append((column.max() <= spec.high).fill_null(True))
    return not checks or bool(frame.select(pl.all_horizontal(checks)).item())


def cleaned(name: str, kind: str) -> pl.Expr | None:
    """Stage one: any text type as String, floats as Float64 with NaN as null."""
    if kind == "text":
        return pl.col(name).cast(pl.String).alias(clean_column(name))
    if kind == "float":
        return pl.col(name).cast(pl.Float64).fill_nan(None).alias(clean_column(name))
    return None


def needing(
    checked: pl.DataFrame, candidates: Sequence[tuple[ColumnSpec, Conversion, pl.Expr]]
) -> list[tuple[ColumnSpec, Conversion]]:
    """The candidate columns where some row of ``checked`` needs a costly step (each candidate's
    expression is true on those rows), found in one pass over the frame."""
    if not candidates:
        return []
    needed = checked.select([rows.any() for _, _, rows in candidates]).row(0)
    return [(spec, c) for (spec, c, _), need in zip(candidates, needed, strict=True) if need]


def with_stripped_text(
    checked: pl.DataFrame, conversions: Sequence[tuple[ColumnSpec, Conversion]]
) -> pl.DataFrame:
    """Strip surrounding spaces and convert again, in the text columns where some row needs it."""
    redo = needing(checked, [(s, c, c.retry) for s, c in conversions if c.retry is not None])
    if not redo:
        return checked
    stripped = checked.with_columns(
        pl.col(clean_column(s.name)).str.strip_chars().alias(clean_column(s.name)) for s, _ in redo
    )
    return stripped.with_columns(c.value.alias(value_column(s.name)) for s, c in redo)


def with_fallbacks(
    checked: pl.DataFrame, conversions: Sequence[tuple[ColumnSpec, Conversion]]
) -> pl.DataFrame:
    """Apply each column's fallback conversion, but only to columns where some row needs it."""
    unconverted = [
        (s, c, pl.col(value_column(s.name)).is_null() & ~c.missing)
        for s, c in conversions
        if c.fallback is not None
    ]
    return checked.with_columns(
        pl.coalesce(pl.col(value_column(s.name)), c.fallback).alias(value_column(s.name))
        for s, c in needing(checked, unconverted)
        if c.fallback is not None
    )


def column_conversion(
    spec: ColumnSpec, dtype: pl.DataType, kind: str, table: Table, position: int
) -> Conversion | Findings:
    """The conversion for one column, or a column-level problem if its type cannot hold it."""
    if spec.name == "block":
        conversion = block_conversion(spec, kind, table, position)
    elif spec_dtype(spec) == pl.Boolean:
        conversion = bool_conversion(spec, kind, table, position)
    else:
        conversion = int_conversion(spec, kind, table, position)
    if conversion is not None:
        return conversion
    text = wrong_type_text(spec, str(dtype), kind, table.source)
    return single(table.index, text, column=position)


def wrong_type_text(spec: ColumnSpec, dtype: str, kind: str, source: str) -> str:
    """Message for a column whose type cannot hold the contract's values."""
    if spec.name == "block" and kind in ("int", "float"):
        return (
            f"{where(source, column=spec.name)}: has type {dtype}, but block must be a "
            f"{BLOCK_DIGITS}-character string of digits (e.g. '{EXAMPLE_BLOCK}'; leading zeros "
            "matter)"
        )
    return (
        f"{where(source, column=spec.name)}: has type {dtype}, which cannot hold "
        f"{kind_words(spec)} (expected {expected_text(spec)})"
    )


def kind_words(spec: ColumnSpec) -> str:
    """What a column holds, in words: whole numbers, booleans or text."""
    if spec_dtype(spec) == pl.Boolean:
        return "booleans"
    return "text" if spec_dtype(spec) == pl.String else "whole numbers"


def dtype_kind(dtype: pl.DataType) -> str:
    """Group a polars dtype by how it converts: int, float, bool, text or other."""
    if dtype.is_integer():
        return "int"
    if dtype.is_float() or dtype.is_decimal():
        return "float"
    if dtype == pl.Boolean:
        return "bool"
    if dtype in (pl.String, pl.Categorical, pl.Null) or isinstance(dtype, pl.Enum):
        return "text"
    return "other"


def _missing(name: str, kind: str) -> pl.Expr:
    """Missing input: null, NaN (floats) or empty text once spaces are stripped."""
    if kind == "text":
        clean = pl.col(clean_column(name))
        return clean.is_null() | (clean == "")
    if kind == "float":
        return pl.col(clean_column(name)).is_null()
    return pl.col(name).is_null()


def int_conversion(spec: ColumnSpec, kind: str, table: Table, position: int) -> Conversion | None:
    """Whole numbers from integers, whole floats or text; rules: missing, not whole, range."""
    name, clean = spec.name, pl.col(clean_column(spec.name))
    got = pl.col(value_column(name))
    retry = fallback = None
    if kind == "int":
        value = pl.col(name).cast(pl.Int64, strict=False)
    elif kind == "float":
        value = _whole(clean)
    elif kind == "text":
        # polars' cast takes digits with an optional sign; the contract has no plus sign
        value = pl.when(~clean.str.starts_with("+")).then(clean.cast(pl.Int64, strict=False))
        retry = got.is_null() & (clean != "")
        fallback = clean.str.extract(WHOLE_DECIMAL, 1).cast(pl.Int64, strict=False)
    else:
        return None
    missing = _missing(name, kind)
    expected = expected_text(spec)
    rules = [
        Rule(
            ~missing & got.is_null(),
            lambda row: (
                f"{where(table.source, row[ROW], name)}: {show(row[name])} "
                f"{unconverted_text(row[name], spec)}"
            ),
            table.index,
            position,
        ),
    ]
    if not spec.nullable:
        rules.append(missing_rule(spec, missing, table, position))
    if spec.low is not None and spec.high is not None:
        rules.append(
            Rule(
                (got < spec.low) | (got > spec.high),
                lambda row: (
                    f"{where(table.source, row[ROW], name)}: {row[value_column(name)]} is out of "
                    f"range (expected {expected})"
                ),
                table.index,
                position,
            )
        )
    return Conversion(value, missing, tuple(rules), retry, fallback)


def unconverted_text(raw: Any, spec: ColumnSpec) -> str:
    """Why a value that is present did not convert to a whole number, and what was expected."""
    expected = expected_text(spec)
    out_of_range = f"is out of range (expected {range_text(spec)})"
    if isinstance(raw, str):
        text = raw.strip()
        if re.fullmatch(PLUS_SIGN_TEXT, text):
            return f"has a plus sign (expected {expected}, written without +)"
        if re.fullmatch(WHOLE_TEXT, text):  # digits that an Int64 cannot hold
            return out_of_range
        if re.fullmatch(EXPONENT_TEXT, text):
            return f"is in exponent notation (expected {expected}, written in plain digits)"
        return f"is not a whole number (expected {expected})"
    if isinstance(raw, int):  # an unsigned integer beyond Int64
        return out_of_range
    try:
        number = float(raw)
    except (TypeError, ValueError):
        return f"is not a whole number (expected {expected})"
    if not (math.isfinite(number) and number.is_integer()):
        return f"is not a whole number (expected {expected})"
    low, high = value_range(spec)
    if not low <= number <= high:
        return out_of_range
    return (
        f"is too large to be held exactly as a float (expected {expected}, written as an integer)"
    )


def value_range(spec: ColumnSpec) -> tuple[int, int]:
    """The lowest and highest value of an integer column (Int64's range if it states none)."""
    low = INT64_MIN if spec.low is None else spec.low
    return low, INT64_MAX if spec.high is None else spec.high


def range_text(spec: ColumnSpec) -> str:
    """The ``(expected …)`` part of an out-of-range message."""
    if spec.low is not None and spec.high is not None:
        return expected_text(spec)
    low, high = value_range(spec)
    text = f"a whole number from {low} to {high}"
    return f"{text} or empty" if spec.nullable else text


def missing_rule(spec: ColumnSpec, missing: pl.Expr, table: Table, position: int) -> Rule:
    """A value is required (the caller skips this rule for nullable columns)."""
    expected = expected_text(spec)
    return Rule(
        missing,
        lambda row: (
            f"{where(table.source, row[ROW], spec.name)}: value is missing (expected {expected})"
        ),
        table.index,
        position,
    )


def _whole(number: pl.Expr) -> pl.Expr:
    """A float expression as Int64 where it holds a whole number exactly, else null."""
    exact = number.is_finite() & (number == number.floor()) & (number.abs() <= EXACT_FLOAT_LIMIT)
    return pl.when(exact).then(number).cast(pl.Int64)


def bool_conversion(spec: ColumnSpec, kind: str, table: Table, position: int) -> Conversion | None:
    """Booleans from booleans, 0/1 numbers or the words listed in the module docstring."""
    name, clean = spec.name, pl.col(clean_column(spec.name))
    got = pl.col(value_column(name))
    if kind == "bool":
        value = pl.col(name)
    elif kind == "int":
        value = pl.col(name).replace_strict(
            {1: True, 0: False}, default=None, return_dtype=pl.Boolean
        )
    elif kind == "float":
        value = pl.when(clean == 1).then(True).when(clean == 0).then(False)
    elif kind == "text":
        value = pl.when(clean.is_in(TRUE_TEXT)).then(True).when(clean.is_in(FALSE_TEXT)).then(False)
    else:
        return None
    missing = _missing(name, kind)
    rules = (
        missing_rule(spec, missing, table, position),
        Rule(
            ~missing & got.is_null(),
            lambda row: (
                f"{where(table.source, row[ROW], name)}: {show(row[name], quote=True)} is not true "
                "or false (expected true/false, True/False or 1/0)"
            ),
            table.index,
            position,
        ),
    )
    retry = got.is_null() & (clean != "") if kind == "text" else None
    return Conversion(value.cast(pl.Boolean), missing, rules, retry)


def block_conversion(spec: ColumnSpec, kind: str, table: Table, position: int) -> Conversion | None:
    """Block geocodes: text of exactly 15 ASCII digits (an integer column has lost its zeros)."""
    if kind != "text":
        return None
    name, clean = spec.name, pl.col(clean_column(spec.name))
    missing = _missing(name, kind)
    digits = clean.str.contains(BLOCK_PATTERN)
    rules = (
        missing_rule(spec, missing, table, position),
        Rule(
            ~missing & ~digits,
            lambda row: (
                f"{where(table.source, row[ROW], name)}: {show(row[name], quote=True)} is not a "
                f"{BLOCK_DIGITS}-digit block geocode (expected exactly {BLOCK_DIGITS} digits 0–9, "
                f"leading zeros included, e.g. {EXAMPLE_BLOCK})"
            ),
            table.index,
            position,
        ),
        Rule(
            ~missing & digits & ~clean.str.head(STATE_DIGITS).is_in(STATE_PREFIXES),
            lambda row: (
                f"{where(table.source, row[ROW], name)}: {show(row[name], quote=True)} starts with "
                f"{row[name].strip()[:STATE_DIGITS]}, which is not a state FIPS code (expected a "
                f"state code as the first two digits: {STATE_CODES_TEXT})"
            ),
            table.index,
            position,
        ),
    )
    retry = (clean.str.len_bytes() != BLOCK_DIGITS) & (clean != "")
    return Conversion(clean, missing, rules, retry)
