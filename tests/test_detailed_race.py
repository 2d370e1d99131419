"""Detailed race and Hispanic origin codes (SafeTab-H inputs) and the derived household type."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal
from typer.testing import CliRunner

from conftest import BLOCK_A, BLOCK_B, BLOCK_D, frame
from sdclab.censuses.us2010 import schema
from sdclab.censuses.us2010.population import PERSONS, UNITS, Population, synth, synth_geography
from sdclab.censuses.us2010.population.columns import (
    DETAILED_RACE_ETHNICITY,
    DETAILED_RACE_ETHNICITY_COLUMNS,
    RACE_CODE_COLUMNS,
)
from sdclab.censuses.us2010.population.contract import detailed_codes_markdown
from sdclab.censuses.us2010.population.io import read_population, validate, write_population
from sdclab.cli import app
from sdclab.core.errors import InputError

DOCS = Path(__file__).parents[1] / "docs"
N_SYNTH = 200_000
Z = 5.0
"""Binomial tolerance in standard deviations: a fixed seed passes or fails for ever, and a correct
generator fails a 5-sigma check with probability below 1e-6 per check."""


@pytest.fixture(scope="module")
def population() -> Population:
    return synth.synthesize(N_SYNTH, seed=11)


# ---------------------------------------------------------------------------------------------
# Code lists
# ---------------------------------------------------------------------------------------------


def test_detailed_race_lists_are_well_formed():
    assert tuple(schema.DETAILED_RACE) == schema.RACE_NAMES
    all_codes = [c.code for codes in schema.DETAILED_RACE.values() for c in codes]
    assert len(all_codes) == len(set(all_codes)) == len(schema.DETAILED_RACE_LABELS)
    for i, (name, codes) in enumerate(schema.DETAILED_RACE.items()):
        assert math.isclose(sum(c.frequency for c in codes), 1.0, abs_tol=1e-9), name
        assert all(c.frequency > 0 and c.label for c in codes)
        group = (i + 1) * schema.DETAILED_RACE_BASE
        assert codes[0].code == group and "no detail" in codes[0].label
        assert all(group <= c.code < group + schema.DETAILED_RACE_BASE for c in codes)
        bits = schema.detailed_race_bit([c.code for c in codes])
        assert (bits == schema.RACE_BIT[name]).all()
        assert all(not c.hispanic_write_in for c in codes) or name == "sor"
        assert len(codes) >= 6
    assert np.iinfo(np.int16).max > max(all_codes)


def test_hispanic_origin_list_is_well_formed():
    codes = [c.code for c in schema.HISPANIC_ORIGINS]
    assert codes == list(range(1, len(codes) + 1))
    assert math.isclose(sum(c.frequency for c in schema.HISPANIC_ORIGINS), 1.0, abs_tol=1e-9)
    assert schema.HISPANIC_ORIGIN_LABELS[schema.NOT_HISPANIC_ORIGIN] == "not Hispanic or Latino"
    labels = {c.label for c in schema.HISPANIC_ORIGINS}
    assert {"Mexican", "Puerto Rican", "Cuban", "Dominican", "Salvadoran", "Spaniard"} <= labels


def test_household_type_labels():
    assert list(schema.HOUSEHOLD_TYPE_LABELS) == [1, 2, 3, 4, 5]
    assert schema.HOUSEHOLD_TYPE.size == 6 and schema.HOUSEHOLD_TYPE.low == 0


def test_code_helpers():
    assert schema.detailed_race_bit([1001, 2001, 3010, 4008, 5006, 6002, 0]).tolist() == [
        1,
        2,
        4,
        8,
        16,
        32,
        0,
    ]
    assert schema.detailed_race_mask([[1001, 1003, 4001, 0], [0, 0, 0, 0]]).tolist() == [9, 0]
    with pytest.raises(ValueError, match="unknown detailed race code 1999"):
        schema.detailed_race_bit([1001, 1999])


# ---------------------------------------------------------------------------------------------
# The synthetic population
# ---------------------------------------------------------------------------------------------


def test_synthetic_codes_agree_with_race_and_hispanic(population):
    persons = population.persons
    assert persons.columns == [s.name for s in (*PERSONS, *DETAILED_RACE_ETHNICITY)]
    codes = population.race_codes
    present = codes > 0
    race = persons["race"].to_numpy()
    hispanic = persons["hispanic"].to_numpy()
    origin = persons["hispanic_origin"].to_numpy()
    assert present[:, 0].all()
    assert (present[:, :-1] >= present[:, 1:]).all(), "codes are filled left to right"
    assert np.isin(codes[present], list(schema.DETAILED_RACE_LABELS)).all()
    assert (schema.detailed_race_mask(codes) == race).all()
    ordered = np.sort(np.where(present, codes, 9999), axis=1)
    assert not (present[:, 1:] & (ordered[:, 1:] == ordered[:, :-1])).any(), "no repeats"
    major = np.where(present, codes // schema.DETAILED_RACE_BASE, 9)
    assert (np.diff(major, axis=1) >= 0).all(), "codes are grouped by major race"
    assert ((origin == 0) == (hispanic == 0)).all()
    assert np.isin(origin[hispanic == 1], [c.code for c in schema.HISPANIC_ORIGINS]).all()
    write_ins = [c.code for c in schema.DETAILED_RACE["sor"] if c.hispanic_write_in]
    assert not np.isin(codes[hispanic == 0], write_ins).any()
    n_codes = present.sum(axis=1)
    assert n_codes.max() <= schema.DETAILED_RACE_MAX
    extra = n_codes - schema.race_bit_count(race)
    assert 0.08 < (extra > 0).mean() < 0.2 and extra.max() >= 2


def test_synthetic_population_validates(population):
    again = validate(population.persons, population.units)
    assert_frame_equal(again.persons, population.persons)


def binomial_ok(count: int, n: int, p: float) -> bool:
    return abs(count - n * p) <= Z * math.sqrt(n * p * (1 - p))


@pytest.mark.parametrize(
    ("race", "code"),
    [("white", 1000), ("white", 1001), ("white", 1003), ("white", 1012), ("black", 2001)]
    + [("black", 2003), ("asian", 4001), ("asian", 4003), ("asian", 4008), ("aian", 3001)],
)
def test_common_codes_have_their_documented_frequency(population, race, code):
    """Householders and GQ residents draw their codes independently (other members mostly copy
    the householder), and the first code of a one-race person is drawn with the documented
    frequency, so its count among them is binomial."""
    persons = population.persons
    independent = persons.filter(
        pl.col("relationship").is_in([0, schema.GQ_RESIDENT])
        & (pl.col("race") == schema.RACE_BIT[race])
    )
    frequency = {c.code: c.frequency for c in schema.DETAILED_RACE[race]}[code]
    count = int((independent["race_code1"] == code).sum())
    assert binomial_ok(count, independent.height, frequency), (count, independent.height)


@pytest.mark.parametrize("origin", [1, 2, 3, 5, 9])
def test_hispanic_origins_have_their_documented_frequency(population, origin):
    persons = population.persons.filter(
        pl.col("relationship").is_in([0, schema.GQ_RESIDENT]) & (pl.col("hispanic") == 1)
    )
    frequency = schema.HISPANIC_ORIGINS[origin - 1].frequency
    count = int((persons["hispanic_origin"] == origin).sum())
    assert binomial_ok(count, persons.height, frequency), (count, persons.height)


def test_household_members_mostly_share_the_householders_codes(population):
    persons = population.persons
    heads = population.householder_row[population.person_unit_row]
    codes = population.race_codes
    member = np.isin(persons["relationship"].to_numpy(), [1, 2, 3, 4])
    same_race = persons["race"].to_numpy() == persons["race"].to_numpy()[heads.clip(0)]
    same = (codes == codes[heads.clip(0)]).all(axis=1)
    shared = same[member & same_race].mean()
    assert shared > 0.9, shared
    assert same[member].mean() > 0.8


def test_same_seed_same_codes_and_new_stream_only():
    a = synth.synthesize(5_000, seed=4)
    b = synth.synthesize(5_000, seed=4)
    assert_frame_equal(a.persons, b.persons)
    assert synth.STAGES[6] == "detailed_race"  # later stages are appended after it


def column_digest(frame_: pl.DataFrame, names: list[str]) -> str:
    """SHA-256 of the named columns (names, dtypes, nulls and values) of a frame."""
    h = hashlib.sha256()
    h.update(f"{frame_.height}|".encode())
    for name in names:
        series = frame_.get_column(name)
        h.update(f"{name}:{series.dtype}|".encode())
        if series.dtype == pl.String:
            h.update("\x00".join(series.fill_null("\x01").to_list()).encode())
        else:
            h.update(series.is_null().to_numpy().tobytes())
            h.update(series.cast(pl.Int64).fill_null(0).to_numpy().tobytes())
    return h.hexdigest()


def test_existing_columns_are_unchanged_for_a_fixed_seed():
    """Guards every figure computed from synthetic populations (test tolerances, documented
    measurements): the digests below were computed from synthesize(20_000, seed=3) with generator
    1.0, before the detailed race columns were added. The new columns come from their own stream,
    so the contract columns must stay bit for bit the same. If this fails, an earlier stream was
    disturbed."""
    population = synth.synthesize(20_000, seed=3, version="1.2")
    persons = column_digest(population.persons, [s.name for s in PERSONS])
    units = column_digest(population.units, [s.name for s in UNITS])
    assert persons == "72d0e6adb73a4b8f7b6fbf493165802a7ad72b7cb342d54185dc43aa0720db49"
    assert units == "547c324f4a8241248f211ed0a672ca83d303e8520a14ae7fa13388642128b552"


@pytest.mark.parametrize(
    ("n", "seed", "geography", "persons", "units"),
    [
        (
            20_000,
            3,
            None,
            "cd3794646a1255fcf700eeab64db68e7e800100c0d6296a741d16863af9ccd6d",
            "547c324f4a8241248f211ed0a672ca83d303e8520a14ae7fa13388642128b552",
        ),
        (
            5_000,
            7,
            synth_geography.GeographyCounts(tracts=6, counties=2),
            "97557a98050d5c7387622e31bf5d50a720dead4eecaedb1154e3775fc7d23d8a",
            "8bb556ae53b0ffb85ee498fa8c90b2dae8e857bb4048bcd364c916a7a2a9b68d",
        ),
    ],
)
def test_version_1_2_is_byte_identical_to_what_it_made_before_2_0(
    n, seed, geography, persons, units
):
    """Every column of generator 1.2 (the detailed ones too), as 1.2 made them before version 2.0
    existed (digests computed with the code of commit 08a8d09): old studies reproduce."""
    population = synth.synthesize(n, seed=seed, geography=geography, version="1.2")
    assert column_digest(population.persons, population.persons.columns) == persons
    assert column_digest(population.units, population.units.columns) == units
    assert population.blocks is None


# ---------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------

# One valid set of codes for each person of conftest's tiny population (race in the comment).
TINY_CODES = [
    ([1001], 0),  # white
    ([1003, 1001], 0),  # white, two codes
    ([1001, 2001], 0),  # white+black
    ([2001], 0),  # black
    ([4001], 0),  # asian
    ([6001], 1),  # some other race, Hispanic
    ([1000], 2),  # white, Hispanic
    ([1000], 2),  # white, Hispanic
    ([3001], 0),  # aian
    ([1015], 1),  # white, Hispanic
]


def with_codes(persons: pl.DataFrame, rows=TINY_CODES) -> pl.DataFrame:
    columns = {
        name: pl.Series(
            name, [codes[i] if i < len(codes) else None for codes, _ in rows], dtype=pl.Int16
        )
        for i, name in enumerate(RACE_CODE_COLUMNS)
    }
    origin = pl.Series("hispanic_origin", [o for _, o in rows], dtype=pl.Int16)
    return persons.with_columns(*columns.values(), origin)


def change(rows, person: int, codes: list[int | None], origin: int | None = None):
    out = list(rows)
    out[person] = (codes, out[person][1] if origin is None else origin)
    return out


def test_tiny_population_with_codes_is_valid(tiny_population):
    persons = with_codes(tiny_population.persons)
    population = validate(persons, tiny_population.units)
    assert population.persons.columns == list(persons.columns)
    assert population.race_codes[1].tolist() == [1003, 1001, 0, 0, 0, 0, 0, 0]
    with pytest.raises(ValueError, match="no detailed race codes"):
        _ = tiny_population.race_codes


@pytest.mark.parametrize(
    ("person", "codes", "origin", "expected"),
    [
        (
            0,
            [1999],
            None,
            "p.csv row 1, column race_code1: 1999 is not a known detailed race code",
        ),
        (
            0,
            [None, 1001],
            None,
            "p.csv row 1, column race_code1: value is missing (expected a detailed race code",
        ),
        (
            1,
            [1003, None, 1001],
            None,
            "p.csv row 2, column race_code3: 1001 follows an empty race_code2 (expected the codes "
            "filled from race_code1 on",
        ),
        (
            1,
            [1003, 1001, 1003],
            None,
            "p.csv row 2, column race_code3: 1003 repeats race_code1 (expected each detailed race "
            "code at most once per person)",
        ),
        (
            3,
            [2001, 4001],
            None,
            "p.csv row 4, column race_code2: 4001 (Chinese) is of race asian but race is 2 (black)",
        ),
        (
            2,
            [1001, 1003],
            None,
            "p.csv row 3, column race: 3 (white+black) but no detailed race code is black",
        ),
        (
            5,
            [6001],
            0,
            "p.csv row 6, column hispanic_origin: 0 (not Hispanic) but hispanic is 1 (expected a "
            "Hispanic origin 1–15)",
        ),
        (
            0,
            [1001],
            3,
            "p.csv row 1, column hispanic_origin: 3 (Cuban) but hispanic is 0 (expected 0",
        ),
        (
            0,
            [1001],
            16,
            "p.csv row 1, column hispanic_origin: 16 is out of range (expected 0–15)",
        ),
    ],
)
def test_each_rule_gives_one_line_naming_row_and_column(
    tiny_population, person, codes, origin, expected
):
    persons = with_codes(tiny_population.persons, change(TINY_CODES, person, codes, origin))
    with pytest.raises(InputError) as info:
        validate(persons, tiny_population.units, persons_source="p.csv")
    line = info.value.one_line()
    assert line.startswith(expected), line
    assert "\n" not in line
    assert info.value.details == []


def test_a_ninth_code_column_is_not_part_of_the_contract(tiny_population):
    persons = with_codes(tiny_population.persons).with_columns(
        pl.lit(1002, dtype=pl.Int16).alias("race_code9")
    )
    population = validate(persons, tiny_population.units)  # an unknown column is ignored
    assert "race_code9" not in population.persons.columns


def test_unknown_code_is_not_echoed_as_a_race_mismatch(tiny_population):
    persons = with_codes(tiny_population.persons, change(TINY_CODES, 2, [1001, 2999]))
    with pytest.raises(InputError) as info:
        validate(persons, tiny_population.units)
    assert "2999 is not a known detailed race code" in str(info.value)
    assert info.value.details == []


def test_several_problems_are_listed_in_file_order(tiny_population):
    rows = change(change(TINY_CODES, 4, [1001]), 0, [1001], 5)
    with pytest.raises(InputError) as info:
        validate(with_codes(tiny_population.persons, rows), tiny_population.units)
    assert str(info.value).startswith("persons row 1, column hispanic_origin: 5 (Dominican)")
    assert info.value.details[0].startswith("persons row 5, column race_code1: 1001 (German) is of")


def test_detailed_columns_are_all_or_none(tiny_population):
    persons = with_codes(tiny_population.persons).drop("race_code8", "hispanic_origin")
    with pytest.raises(InputError) as info:
        validate(persons, tiny_population.units, persons_source="p.csv")
    assert info.value.one_line().startswith(
        "p.csv: missing columns race_code8, hispanic_origin (it has race_code1, race_code2, "
    )
    assert "all or none must be present" in str(info.value)
    only_origin = tiny_population.persons.with_columns(pl.lit(0).alias("hispanic_origin"))
    with pytest.raises(InputError, match="missing columns race_code1, race_code2"):
        validate(only_origin, tiny_population.units)


def test_csv_with_empty_trailing_codes_loads(tmp_path, tiny_population):
    population = Population(with_codes(tiny_population.persons), tiny_population.units)
    out = tmp_path / "pop"
    out.mkdir()
    population.persons.write_csv(out / "persons.csv")
    population.units.write_csv(out / "units.csv")
    assert ",1003,1001,,,,,,,0" in (out / "persons.csv").read_text()
    back = read_population(out)
    assert_frame_equal(back.persons, population.persons)


def test_cli_rejects_bad_codes_with_exit_code_2(tmp_path, tiny_population):
    rows = change(TINY_CODES, 3, [2001, 2001])
    persons = with_codes(tiny_population.persons, rows)
    pop = tmp_path / "pop"
    pop.mkdir()
    persons.write_parquet(pop / "persons.parquet")
    tiny_population.units.write_parquet(pop / "units.parquet")
    result = CliRunner().invoke(app, ["tabulate", str(pop), "--out", str(tmp_path / "rel")])
    assert result.exit_code == 2
    assert "persons.parquet row 4, column race_code2: 2001 repeats race_code1" in result.output
    assert not (tmp_path / "rel").exists()


def test_round_trip_keeps_the_detailed_columns(tmp_path):
    population = synth.synthesize(3_000, seed=5)
    write_population(population, tmp_path / "pop")
    back = read_population(tmp_path / "pop")
    assert set(DETAILED_RACE_ETHNICITY_COLUMNS) <= set(back.persons.columns)
    assert_frame_equal(back.persons, population.persons)
    assert_frame_equal(back.units, population.units)


# ---------------------------------------------------------------------------------------------
# Household type
# ---------------------------------------------------------------------------------------------

HH_UNITS = [
    # unit_id, block, unit_type, occupied, tenure
    (1, BLOCK_A, 0, True, 1),  # married couple with a child -> 1
    (2, BLOCK_A, 0, True, 3),  # father and child -> 2
    (3, BLOCK_A, 0, True, 3),  # mother and her sister -> 3
    (4, BLOCK_B, 0, True, 2),  # woman alone -> 4
    (5, BLOCK_B, 0, True, 3),  # two roommates -> 5
    (6, BLOCK_B, 0, False, None),  # vacant -> 0
    (7, BLOCK_D, 3, True, None),  # nursing facility -> 0
    (8, BLOCK_D, 0, True, 1),  # unmarried partners, no children -> 1 (partners count as spouses)
    (9, BLOCK_D, 5, True, None),  # empty college dormitory -> 0
]
HH_PERSONS = [
    # person_id, unit_id, block, relationship, sex, age, race, hispanic
    (1, 1, BLOCK_A, 0, 2, 40, 1, 0),
    (2, 1, BLOCK_A, 1, 1, 42, 1, 0),
    (3, 1, BLOCK_A, 2, 2, 9, 1, 0),
    (4, 2, BLOCK_A, 2, 1, 12, 2, 0),  # the child comes first in the file
    (5, 2, BLOCK_A, 0, 1, 45, 2, 0),
    (6, 3, BLOCK_A, 0, 2, 30, 8, 0),
    (7, 3, BLOCK_A, 3, 2, 33, 8, 0),
    (8, 4, BLOCK_B, 0, 2, 80, 1, 0),
    (9, 5, BLOCK_B, 0, 1, 25, 1, 1),
    (10, 5, BLOCK_B, 4, 1, 26, 1, 0),
    (11, 7, BLOCK_D, 5, 2, 90, 1, 0),
    (12, 7, BLOCK_D, 5, 2, 88, 1, 0),
    (13, 8, BLOCK_D, 0, 1, 30, 1, 0),
    (14, 8, BLOCK_D, 1, 1, 31, 1, 0),
]


def test_household_type_of_each_kind():
    population = validate(frame(HH_PERSONS, PERSONS), frame(HH_UNITS, UNITS))
    assert population.household_type.tolist() == [1, 2, 3, 4, 5, 0, 0, 1, 0]
    assert population.householder_row.tolist() == [0, 4, 5, 7, 8, -1, -1, 12, -1]


def test_household_type_of_the_tiny_population(tiny_population):
    assert tiny_population.household_type.tolist() == [1, 4, 0, 5, 0, 3]


def test_household_types_agree_with_relationships(population):
    """Check the vectorised derivation against a polars group_by on the same rules."""
    units = population.units.with_columns(
        pl.Series("type", population.household_type), pl.Series("size", population.household_size)
    )
    per_unit = population.persons.group_by("unit_id").agg(
        spouse=(pl.col("relationship") == 1).any(),
        relatives=pl.col("relationship").is_in([2, 3]).sum(),
        non_relatives=(pl.col("relationship") == 4).sum(),
        head_sex=pl.col("sex").filter(pl.col("relationship") == 0).first(),
    )
    joined = units.join(per_unit, on="unit_id", how="left")
    household = (pl.col("unit_type") == 0) & pl.col("occupied")
    expected = (
        pl.when(~household)
        .then(0)
        .when(pl.col("spouse"))
        .then(1)
        .when(pl.col("relatives") > 0)
        .then(pl.when(pl.col("head_sex") == 1).then(2).otherwise(3))
        .when(pl.col("size") == 1)
        .then(4)
        .otherwise(5)
    )
    checked = joined.with_columns(expected=expected)
    assert (checked["type"] == checked["expected"]).all()
    by_type = {t: checked.filter(pl.col("type") == t) for t in range(6)}
    assert all(by_type[t]["size"].min() >= 2 for t in (1, 2, 3, 5))
    assert (by_type[4]["size"] == 1).all()
    five = by_type[5]
    assert (five["relatives"] == 0).all() and (five["non_relatives"] == five["size"] - 1).all()
    assert (by_type[0]["occupied"].not_() | (by_type[0]["unit_type"] > 0)).all()
    shares = np.bincount(population.household_type, minlength=6)[1:] / household_count(population)
    assert 0.4 < shares[0] < 0.65 and 0.2 < shares[3] < 0.33  # married couples; living alone


def household_count(population: Population) -> int:
    units = population.units
    return int(((units["unit_type"] == 0) & units["occupied"]).sum())


# ---------------------------------------------------------------------------------------------
# Docs
# ---------------------------------------------------------------------------------------------


def test_data_docs_list_the_codes():
    assert detailed_codes_markdown() in (DOCS / "data.md").read_text(), "regenerate docs/data.md"
