"""The population data contract (DESIGN.md §4): columns, types, code ranges.

One place states what a valid persons or units table is; the reader validates against it, the
synthetic generator casts its output to it, and the docs are generated from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt
import polars as pl

from sdclab import schema
from sdclab.geography import Geography


@dataclass(frozen=True)
class ColumnSpec:
    """One column of the contract: its polars type, allowed range and whether nulls are allowed."""

    name: str
    dtype: type[pl.DataType] | pl.DataType
    meaning: str
    low: int | None = None
    high: int | None = None
    nullable: bool = False


PERSONS: tuple[ColumnSpec, ...] = (
    ColumnSpec("person_id", pl.Int64, "unique person identifier"),
    ColumnSpec("unit_id", pl.Int64, "the unit the person lives in (must exist in units)"),
    ColumnSpec("block", pl.String, "15-digit block geocode, equal to the unit's block"),
    ColumnSpec("relationship", pl.Int8, "0 householder … 4 non-relative, 5 GQ resident", 0, 5),
    ColumnSpec("sex", pl.Int8, "1 male, 2 female", 1, 2),
    ColumnSpec("age", pl.Int16, "age in years", 0, schema.AGE_MAX),
    ColumnSpec("race", pl.Int8, "bitmask of the six OMB races", 1, schema.RACE_MAX),
    ColumnSpec("hispanic", pl.Int8, "0 not Hispanic, 1 Hispanic", 0, 1),
)

UNITS: tuple[ColumnSpec, ...] = (
    ColumnSpec("unit_id", pl.Int64, "unique unit identifier"),
    ColumnSpec("block", pl.String, "15-digit block geocode"),
    ColumnSpec("unit_type", pl.Int8, "0 housing unit; 1–7 group-quarters type", 0, 7),
    ColumnSpec("occupied", pl.Boolean, "housing units: occupied or vacant; GQ: true"),
    ColumnSpec(
        "tenure",
        pl.Int8,
        "1 mortgage, 2 free and clear, 3 rented; null when vacant or GQ",
        1,
        3,
        nullable=True,
    ),
)


RECORD_KEY = ColumnSpec(
    "record_key",
    pl.Int64,
    "optional: the record's cell key method key (integer 0..K−1; a real key with d decimals is "
    "stored as key·10^d), assigned once and kept with the record",
    0,
    2**32 - 1,
)
"""An optional column of persons and units: kept when present, never required."""


def with_optional(specs: tuple[ColumnSpec, ...], columns: list[str]) -> tuple[ColumnSpec, ...]:
    """The contract columns of a table, plus the optional ones the frame has."""
    return specs + ((RECORD_KEY,) if RECORD_KEY.name in columns else ())


def block_codes(frame: pl.DataFrame) -> npt.NDArray[np.int64]:
    """The ``block`` column of a validated frame as int64 geocodes."""
    return frame.get_column("block").cast(pl.Int64).to_numpy()


@dataclass(frozen=True)
class Population:
    """A validated persons table and units table (polars frames in the contract's dtypes)."""

    persons: pl.DataFrame
    units: pl.DataFrame

    @cached_property
    def geography(self) -> Geography:
        """Every block that has a unit (populated or not)."""
        return Geography.from_block_codes(block_codes(self.units))

    @cached_property
    def person_block_index(self) -> npt.NDArray[np.int64]:
        return self.geography.block_index(block_codes(self.persons))

    @cached_property
    def unit_block_index(self) -> npt.NDArray[np.int64]:
        return self.geography.block_index(block_codes(self.units))

    @cached_property
    def person_unit_row(self) -> npt.NDArray[np.int64]:
        """Row of ``units`` that each person lives in."""
        unit_ids = self.units.get_column("unit_id").to_numpy()
        order = np.argsort(unit_ids, kind="stable")
        pos = np.searchsorted(unit_ids[order], self.persons.get_column("unit_id").to_numpy())
        return order[pos].astype(np.int64)

    @cached_property
    def household_size(self) -> npt.NDArray[np.int64]:
        """Number of persons in each unit, aligned with the rows of ``units``."""
        return np.bincount(self.person_unit_row, minlength=self.n_units).astype(np.int64)

    @property
    def n_persons(self) -> int:
        return self.persons.height

    @property
    def n_units(self) -> int:
        return self.units.height


def contract_markdown() -> str:
    """The column contract as Markdown tables (docs/data.md is generated from this)."""
    out = []
    for title, specs in (("units", UNITS), ("persons", PERSONS)):
        out += [f"### `{title}`", "", "| column | type | values | meaning |", "|---|---|---|---|"]
        for s in (*specs, RECORD_KEY):
            values = f"{s.low}–{s.high}" if s.low is not None else ""
            if s.nullable:
                values += ", or null"
            out.append(f"| `{s.name}` | {s.dtype} | {values} | {s.meaning} |")
        out.append("")
    return "\n".join(out)
