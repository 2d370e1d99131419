"""The checks of a population's frames against the contract (docs/data.md), in stages: columns,
values, uniqueness, detailed race and ethnicity, then the links between persons and units. A stage
runs only when the one before it passed."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from sdclab.censuses.us2010 import schema
from sdclab.censuses.us2010.population.columns import (
    BLOCKS,
    DETAILED_RACE_ETHNICITY_COLUMNS,
    PERSONS,
    RACE_CODE_COLUMNS,
    RECORD_KEY,
    UNITS,
    with_optional,
)
from sdclab.censuses.us2010.population.conversion import convert
from sdclab.censuses.us2010.population.problems import Table
from sdclab.core.findings import (
    ROW,
    Findings,
    Problem,
    Rule,
    apply_rules,
    column_name,
    input_error,
    single,
    where,
)

HOUSEHOLDER = 0
HOUSING_UNIT = 0


def checked_frames(
    persons: pl.DataFrame,
    units: pl.DataFrame,
    *,
    persons_source: str = "persons",
    units_source: str = "units",
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The persons and units frames checked and typed as :func:`validate` returns them."""
    if not isinstance(persons, pl.DataFrame) or not isinstance(units, pl.DataFrame):
        kinds = ", ".join(type(f).__name__ for f in (persons, units))
        raise input_error(
            f"a population is made of two polars DataFrames (persons, units); got {kinds}"
        )
    tables = (
        Table(persons, with_optional(PERSONS, persons.columns), persons_source, 0),
        Table(units, with_optional(UNITS, units.columns), units_source, 1),
    )
    sum((missing_columns(t) for t in tables), record_keys_in_both(*tables)).raise_if_any()
    converted = [convert(t) for t in tables]
    sum((found for _, found in converted), Findings()).raise_if_any()
    typed_persons, typed_units = (frame for frame, _ in converted)
    (
        duplicates(typed_persons, "person_id", tables[0])
        + duplicates(typed_units, "unit_id", tables[1])
        + detailed_race_ethnicity(typed_persons, tables[0])
    ).raise_if_any()
    links(typed_persons, typed_units, persons_source, units_source).raise_if_any()
    return typed_persons.drop(ROW), typed_units.drop(ROW)


def checked_blocks(blocks: pl.DataFrame, *, source: str = "blocks") -> pl.DataFrame:
    """The optional blocks table checked and typed: one ``block`` column of 15-digit geocodes
    (other columns dropped), each listed once, sorted."""
    if not isinstance(blocks, pl.DataFrame):
        raise input_error(f"{source}: a blocks table is a polars DataFrame; got {type(blocks)}")
    table = Table(blocks, BLOCKS, source, 2)
    missing_columns(table).raise_if_any()
    typed, found = convert(table)
    found.raise_if_any()
    duplicates(typed, "block", table).raise_if_any()
    return typed.drop(ROW).select(s.name for s in BLOCKS).sort("block")


def record_keys_in_both(persons: Table, units: Table) -> Findings:
    """``record_key`` is in both tables or in neither: the cell key method needs the key of every
    person and every unit, and keys for one table alone would be drawn afresh for both."""
    keyed = [t for t in (persons, units) if RECORD_KEY.name in t.frame.columns]
    if len(keyed) != 1:
        return Findings()
    has, lacks = (persons, units) if keyed[0] is persons else (units, persons)
    return single(
        has.index,
        f"{has.source}: has a record_key column but {lacks.source} has none (expected "
        "record_key in both tables or in neither: the cell key method needs the key of every "
        "person and every unit)",
    )


def missing_columns(table: Table) -> Findings:
    """Every contract column must be present; the message lists what the table has instead."""
    present = table.frame.columns
    missing = [spec.name for spec in table.specs if spec.name not in present]
    if not missing:
        return Findings()
    label = "column" if len(missing) == 1 else "columns"
    text = f"{table.source}: missing {label} {', '.join(missing)}"
    together = [name for name in DETAILED_RACE_ETHNICITY_COLUMNS if name in present]
    if together and set(missing) <= set(DETAILED_RACE_ETHNICITY_COLUMNS):
        return single(
            table.index,
            f"{text} (it has {', '.join(together)}: the detailed race and Hispanic origin "
            "columns race_code1–race_code8 and hispanic_origin are optional, but all or none "
            "must be present)",
        )
    hints = [
        f"{name!r} for {spec}"
        for spec in missing
        for name in present
        if name != spec and name.strip().lower() == spec
    ]
    if hints:
        text += f" (found {', '.join(hints)}: check spaces and capitals)"
    else:
        shown = ", ".join(column_name(c) for c in present[:12]) + (
            ", …" if len(present) > 12 else ""
        )
        text += f" (the table has: {shown or 'no columns'})"
    return single(table.index, text)


def duplicates(frame: pl.DataFrame, key: str, table: Table) -> Findings:
    """Identifiers must be unique; each repeat is reported with the row of its first use."""
    if frame.get_column(key).n_unique() == frame.height:  # the usual case, and much faster
        return Findings()
    repeat = ~pl.col(key).is_first_distinct()
    found = apply_rules(
        frame,
        [Rule(repeat, lambda row: "", table.index, [s.name for s in table.specs].index(key))],
    )
    if not found.total:
        return found
    keys = [frame.item(p.row - 1, key) for p in found.problems]
    first = dict(
        frame.filter(pl.col(key).is_in(keys) & pl.col(key).is_first_distinct())
        .select(key, ROW)
        .iter_rows()
    )
    problems = tuple(
        Problem(
            p.table,
            p.row,
            p.column,
            f"{where(table.source, p.row, key)}: {k} is a duplicate (first in row {first[k]}; "
            f"expected each {key} once)",
        )
        for p, k in zip(found.problems, keys, strict=True)
    )
    return Findings(problems, found.total)


FIRST_UNKNOWN = "__first_unknown_code"
FIRST_GAP = "__first_gap"
FIRST_REPEAT = "__first_repeat"
FIRST_FOREIGN = "__first_foreign_code"
CODES_RACE = "__race_of_codes"


def detailed_race_ethnicity(frame: pl.DataFrame, table: Table) -> Findings:
    """Rules on the optional detailed race and Hispanic origin columns of a typed persons frame.

    Every code must be known; codes fill race_code1 onwards with no gap and no repeat (race_code1
    is required by the conversion stage); the major races of the codes must be exactly the
    ``race`` bitmask (checked only on rows whose codes are all known, so that an unknown code is
    reported once; a race without a code only when no code is of another race, so that a wrong
    code is reported once); ``hispanic_origin`` must be 0 exactly when ``hispanic`` is 0. Each
    kind of defect is reported once per row, at its first column.
    """
    if RACE_CODE_COLUMNS[0] not in frame.columns:
        return Findings()
    race = pl.col("race").cast(pl.Int64)
    all_known = pl.col(FIRST_UNKNOWN).is_null()
    position = {spec.name: i for i, spec in enumerate(table.specs)}
    first_code = position[RACE_CODE_COLUMNS[0]]
    source = table.source
    rules = [
        Rule(~all_known, partial(_unknown_text, source), table.index, first_code),
        Rule(pl.col(FIRST_GAP).is_not_null(), partial(_gap_text, source), table.index, first_code),
        Rule(
            pl.col(FIRST_REPEAT).is_not_null(),
            partial(_repeat_text, source),
            table.index,
            first_code,
        ),
        Rule(
            all_known & pl.col(FIRST_FOREIGN).is_not_null(),
            partial(_foreign_text, source),
            table.index,
            first_code,
        ),
        Rule(
            all_known & pl.col(FIRST_FOREIGN).is_null() & ((race & ~pl.col(CODES_RACE)) != 0),
            partial(_uncovered_text, source),
            table.index,
            position["race"],
        ),
        Rule(
            (pl.col("hispanic_origin") == schema.NOT_HISPANIC_ORIGIN) != (pl.col("hispanic") == 0),
            partial(_origin_text, source),
            table.index,
            position["hispanic_origin"],
        ),
    ]
    return apply_rules(_race_code_helpers(frame), rules)


def _first_true(conditions: Sequence[pl.Expr], offset: int = 0) -> pl.Expr:
    """The 1-based column number of the first true condition (null if none)."""
    return pl.coalesce([pl.when(c).then(pl.lit(k + 1 + offset)) for k, c in enumerate(conditions)])


def _race_code_helpers(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with the helper columns the detailed race rules read: the first unknown, gap,
    repeated and foreign code's column number, and the races the codes cover."""
    codes = [pl.col(name) for name in RACE_CODE_COLUMNS]
    known = list(schema.DETAILED_RACE_LABELS)
    bit = {code: int(b) for code, b in zip(known, schema.detailed_race_bit(known), strict=True)}
    bits = [c.replace_strict(bit, default=0, return_dtype=pl.Int64).fill_null(0) for c in codes]
    race = pl.col("race").cast(pl.Int64)
    return frame.with_columns(
        _first_true([c.is_not_null() & ~c.is_in(known) for c in codes]).alias(FIRST_UNKNOWN),
        _first_true(
            [
                now.is_not_null() & before.is_null()
                for before, now in zip(codes[:-1], codes[1:], strict=True)
            ],
            offset=1,
        ).alias(FIRST_GAP),
        _first_true(
            [
                pl.any_horizontal([now == before for before in codes[:k]])
                for k, now in enumerate(codes)
                if k
            ],
            offset=1,
        ).alias(FIRST_REPEAT),
        _first_true([(b != 0) & ((b & race) == 0) for b in bits]).alias(FIRST_FOREIGN),
        pl.reduce(lambda a, b: a | b, bits).alias(CODES_RACE),
    )


def _code_at(row: dict[str, Any], helper: str) -> tuple[str, int]:
    """The column and code a helper column points at."""
    name = RACE_CODE_COLUMNS[row[helper] - 1]
    return name, row[name]


def _unknown_text(source: str, row: dict[str, Any]) -> str:
    name, code = _code_at(row, FIRST_UNKNOWN)
    return (
        f"{where(source, row[ROW], name)}: {code} is not a known detailed race code "
        "(expected a code of the list in docs/data.md, e.g. 1001 German, 2001 African "
        "American, 4001 Chinese)"
    )


def _gap_text(source: str, row: dict[str, Any]) -> str:
    name, code = _code_at(row, FIRST_GAP)
    return (
        f"{where(source, row[ROW], name)}: {code} follows an empty "
        f"{RACE_CODE_COLUMNS[row[FIRST_GAP] - 2]} (expected the codes filled from race_code1 "
        "on, with no empty column between them)"
    )


def _repeat_text(source: str, row: dict[str, Any]) -> str:
    name, code = _code_at(row, FIRST_REPEAT)
    earlier = next(n for n in RACE_CODE_COLUMNS if row[n] == code)
    return (
        f"{where(source, row[ROW], name)}: {code} repeats {earlier} (expected each detailed "
        "race code at most once per person)"
    )


def _foreign_text(source: str, row: dict[str, Any]) -> str:
    name, code = _code_at(row, FIRST_FOREIGN)
    major = schema.race_label(int(schema.detailed_race_bit(code)))
    return (
        f"{where(source, row[ROW], name)}: {code} ({schema.DETAILED_RACE_LABELS[code]}) is of "
        f"race {major} but race is {row['race']} ({schema.race_label(row['race'])}) (expected "
        "only codes of the races in race)"
    )


def _uncovered_text(source: str, row: dict[str, Any]) -> str:
    lacking = schema.race_label(row["race"] & ~row[CODES_RACE])
    return (
        f"{where(source, row[ROW], 'race')}: {row['race']} ({schema.race_label(row['race'])}) "
        f"but no detailed race code is {lacking.replace('+', ' or ')} (expected at least one "
        "code of each race in race)"
    )


def _origin_text(source: str, row: dict[str, Any]) -> str:
    at = where(source, row[ROW], "hispanic_origin")
    origin = row["hispanic_origin"]
    if origin == schema.NOT_HISPANIC_ORIGIN:
        top = max(schema.HISPANIC_ORIGIN_LABELS)
        return f"{at}: 0 (not Hispanic) but hispanic is 1 (expected a Hispanic origin 1–{top})"
    label = schema.HISPANIC_ORIGIN_LABELS[origin]
    return f"{at}: {origin} ({label}) but hispanic is 0 (expected 0, not Hispanic)"


def links(persons: pl.DataFrame, units: pl.DataFrame, p_source: str, u_source: str) -> Findings:
    """Rules joining the tables: units exist, blocks agree, households and GQ are coherent."""
    unit_side = units.select(
        "unit_id",
        pl.col(ROW).alias("unit_row"),
        pl.col("block").alias("unit_block"),
        "unit_type",
        "occupied",
    )
    joined = persons.select(ROW, "person_id", "unit_id", "block", "relationship").join(
        unit_side, on="unit_id", how="left"
    )
    counts = householder_counts(joined, units.height)
    shared = bool(counts.max() > 1) if len(counts) else False
    if shared:
        joined = joined.with_columns(first_householder_row())
    counted = units.with_columns(pl.Series("householders", counts))
    return apply_rules(joined, person_rules(p_source, u_source, shared)) + apply_rules(
        counted, unit_rules(u_source, p_source)
    )


def householder_counts(joined: pl.DataFrame, n_units: int) -> npt.NDArray[np.int64]:
    """Number of persons with relationship 0 in each unit, in the units' row order."""
    unit_rows = (
        joined.filter(pl.col("relationship") == HOUSEHOLDER)
        .get_column("unit_row")
        .drop_nulls()
        .to_numpy()
    )
    return np.bincount(unit_rows - 1, minlength=n_units).astype(np.int64)


def first_householder_row() -> pl.Expr:
    """The row of the first householder of each person's unit (null if it has none)."""
    householder = pl.col("relationship") == HOUSEHOLDER
    return pl.when(householder).then(pl.col(ROW)).min().over("unit_id").alias("first_householder")


def person_rules(p_source: str, u_source: str, shared: bool) -> list[Rule]:
    """Rules on each person joined with their unit.

    ``shared`` says whether some unit has several householders; the rule that finds them is
    costly, so it runs only then.
    """
    position = {spec.name: i for i, spec in enumerate(PERSONS)}
    known = pl.col("unit_row").is_not_null()
    housing = known & (pl.col("unit_type") == HOUSING_UNIT)
    gq = known & (pl.col("unit_type") != HOUSING_UNIT)
    relationship = pl.col("relationship")
    householder = housing & pl.col("occupied") & (relationship == HOUSEHOLDER)
    later_householder = (
        householder & (pl.col(ROW) > pl.col("first_householder")) if shared else pl.lit(False)
    )

    def at(row: dict[str, Any], column: str) -> str:
        return where(p_source, row[ROW], column)

    return [
        Rule(
            ~known,
            lambda r: (
                f"{at(r, 'unit_id')}: {r['unit_id']} is not a unit_id in {u_source} "
                "(expected the unit the person lives in)"
            ),
            0,
            position["unit_id"],
        ),
        Rule(
            known & (pl.col("block") != pl.col("unit_block")),
            lambda r: (
                f"{at(r, 'block')}: {r['block']} differs from the block of unit "
                f"{r['unit_id']} ({r['unit_block']}, {u_source} row {r['unit_row']})"
            ),
            0,
            position["block"],
        ),
        Rule(
            housing & ~pl.col("occupied"),
            lambda r: (
                f"{at(r, 'unit_id')}: person {r['person_id']} lives in unit {r['unit_id']}, "
                f"which is a vacant housing unit ({u_source} row {r['unit_row']}; expected no "
                "persons in vacant units)"
            ),
            0,
            position["unit_id"],
        ),
        Rule(
            housing & (relationship == schema.GQ_RESIDENT),
            lambda r: (
                f"{at(r, 'relationship')}: 5 (group-quarters resident) but unit "
                f"{r['unit_id']} is a housing unit (expected 0–4)"
            ),
            0,
            position["relationship"],
        ),
        Rule(
            gq & (relationship != schema.GQ_RESIDENT),
            lambda r: (
                f"{at(r, 'relationship')}: {r['relationship']} but unit {r['unit_id']} is a "
                "group-quarters facility (expected 5, group-quarters resident)"
            ),
            0,
            position["relationship"],
        ),
        Rule(
            later_householder,
            lambda r: (
                f"{at(r, 'relationship')}: 0 but unit {r['unit_id']} already has a "
                f"householder in row {r['first_householder']} (expected exactly one person with "
                "relationship 0 per occupied housing unit)"
            ),
            0,
            position["relationship"],
        ),
    ]


def unit_rules(u_source: str, p_source: str) -> list[Rule]:
    """Rules on each unit with its number of householders."""
    position = {spec.name: i for i, spec in enumerate(UNITS)}
    housing = pl.col("unit_type") == HOUSING_UNIT
    occupied_housing = housing & pl.col("occupied")
    tenure = pl.col("tenure")

    def at(row: dict[str, Any], column: str | None) -> str:
        return where(u_source, row[ROW], column)

    return [
        Rule(
            occupied_housing & (pl.col("householders") == 0),
            lambda r: (
                f"{at(r, None)}: occupied housing unit {r['unit_id']} has no householder in "
                f"{p_source} (expected exactly one person with relationship 0)"
            ),
            1,
            position["occupied"],
        ),
        Rule(
            occupied_housing & tenure.is_null(),
            lambda r: (
                f"{at(r, 'tenure')}: value is missing but unit {r['unit_id']} is an occupied "
                "housing unit (expected 1–3)"
            ),
            1,
            position["tenure"],
        ),
        Rule(
            housing & ~pl.col("occupied") & tenure.is_not_null(),
            lambda r: (
                f"{at(r, 'tenure')}: {r['tenure']} but unit {r['unit_id']} is a vacant "
                "housing unit (expected empty)"
            ),
            1,
            position["tenure"],
        ),
        Rule(
            ~housing & ~pl.col("occupied"),
            lambda r: (
                f"{at(r, 'occupied')}: false but unit {r['unit_id']} is a group-quarters "
                "facility (expected true)"
            ),
            1,
            position["occupied"],
        ),
        Rule(
            ~housing & tenure.is_not_null(),
            lambda r: (
                f"{at(r, 'tenure')}: {r['tenure']} but unit {r['unit_id']} is a "
                "group-quarters facility (expected empty)"
            ),
            1,
            position["tenure"],
        ),
    ]
