"""The columns of the data contract (docs/data.md): each column's type, range and meaning, and the
code lists they use. The contract's checks (:mod:`sdclab.censuses.us2010.population.validation`) and
the population (:mod:`sdclab.censuses.us2010.population.contract`) read them from here."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import polars as pl

from sdclab.censuses.us2010 import schema


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

BLOCKS: tuple[ColumnSpec, ...] = (
    ColumnSpec(
        "block",
        pl.String,
        "15-digit block geocode of a block the population holds, with or without units "
        "(optional table: blocks without a unit exist only through it)",
    ),
)
"""The optional blocks table: blocks of the geography, listed so that blocks without any unit
(2010: 44% of blocks had no population, many no housing unit) are geounits with zero counts."""


PUERTO_RICO = 72
STATE_CODES: tuple[int, ...] = (
    1, 2, 4, 5, 6, 8, 9, 10, 11, 12, 13, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28,
    29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 44, 45, 46, 47, 48, 49, 50, 51, 53, 54,
    55, 56, PUERTO_RICO,
)  # fmt: skip
"""The state FIPS codes a block geocode may start with: the 50 states, DC (11) and Puerto Rico
(72). The codes in the gaps (03, 07, 14, 43, 52) belong to no state, and the other island areas
(60 American Samoa, 66 Guam, 69 Northern Mariana Islands, 78 Virgin Islands) are not accepted."""

RECORD_KEY = ColumnSpec(
    "record_key",
    pl.Int64,
    "optional: the record's cell key method key (integer 0..K−1; a real key with d decimals is "
    "stored as key·10^d), assigned once and kept with the record",
    0,
    2**32 - 1,
)
"""An optional column of persons and units, in both tables or in neither: kept when present."""

DATA_DEFINED = ColumnSpec(
    "data_defined",
    pl.Boolean,
    "optional: whether the person's record is data-defined — enough of the response to link it "
    "to a name, not wholly imputed; absent, every person is",
)
"""An optional column of persons: the attack paper's data-defined persons, those whose census
record a record linkage can tie to a name (a distinct identifier in their block). Imputed and
unlinkable records are tabulated like every other but cannot be reidentified, so the paper
counts its headline group among data-defined persons only (docs/reidentification.md).
Synthetic persons are all data-defined: the generator writes no such column."""

_FIRST_RACE_CODE = min(schema.DETAILED_RACE_LABELS)
_LAST_RACE_CODE = max(schema.DETAILED_RACE_LABELS)

RACE_CODES: tuple[ColumnSpec, ...] = tuple(
    ColumnSpec(
        f"race_code{i}",
        pl.Int16,
        (
            "optional (with the other detailed columns): the first detailed race code "
            "(schema.DETAILED_RACE; major race = code // 1000)"
            if i == 1
            else f"optional: detailed race code {i}; codes fill race_code1 onwards with no gap "
            "and no repeat"
        ),
        _FIRST_RACE_CODE,
        _LAST_RACE_CODE,
        nullable=i > 1,
    )
    for i in range(1, schema.DETAILED_RACE_MAX + 1)
)
"""The person's detailed race codes QRACE1…QRACE8: at least one, filled left to right, trailing
nulls. The range is only the span of the code list; the reader also checks each code is known."""
HISPANIC_ORIGIN = ColumnSpec(
    "hispanic_origin",
    pl.Int16,
    "optional (with the detailed race codes): detailed Hispanic origin QSPAN "
    "(schema.HISPANIC_ORIGINS); 0 exactly when hispanic is 0",
    schema.NOT_HISPANIC_ORIGIN,
    max(schema.HISPANIC_ORIGIN_LABELS),
)
DETAILED_RACE_ETHNICITY: tuple[ColumnSpec, ...] = (*RACE_CODES, HISPANIC_ORIGIN)
"""Optional person columns for SafeTab-H: all present or all absent. When present, the reader
also checks that every code is known, that there is at least one code, with no gap and no repeat,
that the codes' major races are exactly the ``race`` bitmask and that ``hispanic_origin`` is 0 iff
``hispanic`` is 0."""
RACE_CODE_COLUMNS: tuple[str, ...] = tuple(s.name for s in RACE_CODES)
DETAILED_RACE_ETHNICITY_COLUMNS: tuple[str, ...] = tuple(s.name for s in DETAILED_RACE_ETHNICITY)


def with_optional(specs: tuple[ColumnSpec, ...], columns: list[str]) -> tuple[ColumnSpec, ...]:
    """The contract columns of a table, plus the optional ones the frame has.

    The detailed race and ethnicity columns (persons only) go together: if the frame has any of
    them, all of them are expected, so a reader reports the others as missing.
    """
    optional: tuple[ColumnSpec, ...] = ()
    if specs == PERSONS and any(name in columns for name in DETAILED_RACE_ETHNICITY_COLUMNS):
        optional += DETAILED_RACE_ETHNICITY
    if specs == PERSONS and DATA_DEFINED.name in columns:
        optional += (DATA_DEFINED,)
    if RECORD_KEY.name in columns:
        optional += (RECORD_KEY,)
    return specs + optional


def block_codes(frame: pl.DataFrame) -> npt.NDArray[np.int64]:
    """The ``block`` column of a validated frame as int64 geocodes."""
    return frame.get_column("block").cast(pl.Int64).to_numpy()
