"""Tests for sdclab.censuses.us2010.population.io: the bad-input corpus, good inputs, writing,
robustness, CLI."""

from __future__ import annotations

import decimal
import json
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

import sdclab
from sdclab.censuses.us2010.population import PERSONS, UNITS, Population, synth, synth_geography
from sdclab.censuses.us2010.population import io as population_io
from sdclab.censuses.us2010.population.columns import STATE_CODES
from sdclab.censuses.us2010.population.io import read_population, validate, write_population
from sdclab.core.errors import InputError
from sdclab.core.fileio import OUTPUT_MARKER
from sdclab.core.findings import MAX_SHOWN

DATA = Path(__file__).parent / "data"
BAD_CASES = sorted(p for p in (DATA / "bad" / "population").iterdir() if p.is_dir())
GOOD_CASES = sorted(p for p in (DATA / "good" / "population").iterdir() if p.is_dir())
BASE_CSV = DATA / "good" / "population" / "base_csv"
BASE_PARQUET = DATA / "good" / "population" / "base_parquet"
INT64_RANGE = "a whole number from -9223372036854775808 to 9223372036854775807"


def expected_message(case: Path) -> str:
    return (case / "expected.txt").read_text(encoding="utf-8").strip()


def assert_contract(population: Population) -> None:
    """Frames hold exactly the contract columns, in order, in the contract dtypes."""
    for frame, specs in ((population.persons, PERSONS), (population.units, UNITS)):
        assert frame.columns == [s.name for s in specs]
        assert frame.dtypes == [s.dtype for s in specs]


def snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


# ---------------------------------------------------------------------------------------------
# The corpus
# ---------------------------------------------------------------------------------------------


def test_corpus_is_large_enough() -> None:
    assert len(BAD_CASES) >= 20
    assert all((case / "expected.txt").is_file() for case in BAD_CASES)
    assert len(GOOD_CASES) >= 2


@pytest.mark.parametrize("case", BAD_CASES, ids=lambda p: p.name)
def test_bad_input_raises_one_clear_line(case: Path) -> None:
    with pytest.raises(InputError) as info:
        read_population(case)
    line = info.value.one_line()
    assert expected_message(case) in line
    assert "\n" not in line and "\r" not in line
    assert len(info.value.details) <= MAX_SHOWN


@pytest.mark.parametrize("case", GOOD_CASES, ids=lambda p: p.name)
def test_good_input_loads_in_contract_dtypes(case: Path) -> None:
    assert_contract(read_population(case))


def test_formats_and_spellings_give_the_same_population() -> None:
    """CSV, typed Parquet (float ages, UInt8 unit types) and a lenient CSV agree exactly."""
    base = read_population(BASE_CSV)
    for name in ("base_parquet", "lenient_csv"):
        other = read_population(DATA / "good" / "population" / name)
        assert_frame_equal(other.persons, base.persons)
        assert_frame_equal(other.units, base.units)
    assert base.units.get_column("occupied").to_list() == [True, True, True, False]
    assert base.units.get_column("tenure").to_list() == [1, 3, None, None]
    assert base.persons.get_column("block").to_list()[0] == "010010201001001"


def test_population_without_persons_is_valid_when_no_unit_is_an_occupied_household() -> None:
    """Decision: zero persons is fine for vacant units and empty group quarters; see also the
    corpus case persons_header_only_with_households, where occupied units make it an error."""
    population = read_population(DATA / "good" / "population" / "units_only")
    assert population.n_persons == 0
    assert population.n_units == 2
    assert population.household_size.tolist() == [0, 0]


def test_missing_directory_and_file_instead_of_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        read_population(tmp_path / "nowhere")
    file = tmp_path / "persons.csv"
    file.write_text("person_id\n")
    with pytest.raises(InputError, match="is not a directory"):
        read_population(file)


# ---------------------------------------------------------------------------------------------
# Validation of frames
# ---------------------------------------------------------------------------------------------


def test_validate_returns_contract_columns_only(tiny_population: Population) -> None:
    persons = tiny_population.persons.with_columns(pl.lit("x").alias("name"))
    persons = persons.select(reversed(persons.columns))
    units = tiny_population.units.select(reversed(tiny_population.units.columns))
    population = validate(persons, units)
    assert_contract(population)
    assert_frame_equal(population.persons, tiny_population.persons)
    assert_frame_equal(population.units, tiny_population.units)


def test_validate_converts_lossless_types(tiny_population: Population) -> None:
    persons = tiny_population.persons.with_columns(
        pl.col("age").cast(pl.Float64),
        pl.col("person_id").cast(pl.String),
        " " + pl.col("unit_id").cast(pl.String) + ".0 ",
        pl.col("race").cast(pl.UInt64),
        pl.col("sex").cast(pl.Decimal(4, 1)),
        pl.col("block").cast(pl.Categorical),
    )
    units = tiny_population.units.with_columns(
        pl.col("occupied").cast(pl.Int8),
        pl.col("tenure").cast(pl.Float32).fill_null(float("nan")),
        pl.col("block").cast(pl.Enum(sorted(set(tiny_population.units["block"])))),
    )
    population = validate(persons, units)
    assert_contract(population)
    assert_frame_equal(population.persons, tiny_population.persons)
    assert_frame_equal(population.units, tiny_population.units)


def test_up_to_five_problems_and_a_count_of_the_rest(tiny_population: Population) -> None:
    persons = tiny_population.persons.with_columns(pl.lit(200, dtype=pl.Int16).alias("age"))
    with pytest.raises(InputError) as info:
        validate(persons, tiny_population.units, persons_source="p.parquet")
    assert str(info.value) == "p.parquet row 1, column age: 200 is out of range (expected 0–115)"
    assert info.value.details == [
        f"p.parquet row {row}, column age: 200 is out of range (expected 0–115)"
        for row in range(2, 6)
    ] + ["and 5 more problems"]


def test_problems_are_listed_in_file_order(tiny_population: Population) -> None:
    persons = tiny_population.persons.with_columns(
        pl.when(pl.col("person_id") == 2).then(0).otherwise(pl.col("race")).alias("race"),
        pl.when(pl.col("person_id") == 1).then(9).otherwise(pl.col("sex")).alias("sex"),
    )
    units = tiny_population.units.with_columns(pl.lit(9, dtype=pl.Int8).alias("unit_type"))
    with pytest.raises(InputError) as info:
        validate(persons, units)
    lines = [str(info.value), *info.value.details]
    assert lines[0].startswith("persons row 1, column sex: 9")
    assert lines[1].startswith("persons row 2, column race: 0")
    assert lines[2].startswith("units row 1, column unit_type: 9")
    assert lines[-1] == "and 3 more problems"  # 2 persons + 6 units - 5 shown


def test_link_checks_wait_for_valid_values(tiny_population: Population) -> None:
    """A bad value is reported alone, not echoed by the cross-table rules it would upset."""
    persons = tiny_population.persons.with_columns(
        pl.when(pl.col("person_id") == 1).then(None).otherwise(pl.col("unit_id")).alias("unit_id")
    )
    with pytest.raises(InputError) as info:
        validate(persons, tiny_population.units)
    assert info.value.one_line() == (
        "persons row 1, column unit_id: value is missing (expected a whole number)"
    )


@pytest.mark.parametrize(
    ("column", "values", "expected"),
    [
        ("age", [40.0, 38.5], "persons row 2, column age: 38.5 is not a whole number"),
        ("age", [40.0, float("inf")], "persons row 2, column age: inf is not a whole number"),
        ("age", ["40", "1e400"], "persons row 2, column age: 1e400 is in exponent notation"),
        (
            "age",
            ["40", "1.0000000000000000001"],
            "persons row 2, column age: 1.0000000000000000001 is not a whole number",
        ),
        ("age", ["40", "4.5"], "persons row 2, column age: 4.5 is not a whole number"),
        ("age", ["40", " +4 "], "persons row 2, column age: +4 has a plus sign"),
        ("age", ["40", "+4.0"], "persons row 2, column age: +4.0 has a plus sign"),
        ("age", ["40", "-1e0"], "persons row 2, column age: -1e0 is in exponent notation"),
        (
            "age",
            pl.Series([40, 2**64 - 1], dtype=pl.UInt64),
            "persons row 2, column age: 18446744073709551615 is out of range (expected 0–115)",
        ),
        (
            "age",
            ["40", "1" * 30],
            "persons row 2, column age: 111111111111111111111111111111 is out of range "
            "(expected 0–115)",
        ),
        (
            "age",
            [40.0, 1e300],
            "persons row 2, column age: 1e+300 is out of range (expected 0–115)",
        ),
        (
            "person_id",
            [1, 2**63],
            f"persons row 2, column person_id: 9223372036854775808 is out of range (expected "
            f"{INT64_RANGE})",
        ),
        (
            "person_id",
            ["1", "-9223372036854775809.0"],
            f"persons row 2, column person_id: -9223372036854775809.0 is out of range (expected "
            f"{INT64_RANGE})",
        ),
        (
            "person_id",
            [1.0, 2.0**60],
            "persons row 2, column person_id: 1.152921504606847e+18 is too large to be held",
        ),
        ("block", ["010010001001001", " "], "persons row 2, column block: value is missing"),
        ("block", ["010010001001001", "０10010001001001"], "persons row 2, column block: '０1"),
        ("age", ["40", "4\n0"], "persons row 2, column age: '4\\n0' is not a whole number"),
    ],
)
def test_values_that_do_not_convert_exactly(
    tiny_population: Population, column: str, values: list, expected: str
) -> None:
    persons = tiny_population.persons.head(2).with_columns(pl.Series(column, values))
    units = tiny_population.units.filter(pl.col("unit_id") == 1)
    with pytest.raises(InputError) as info:
        validate(persons, units)
    assert info.value.one_line().startswith(expected)


def test_whole_numbers_in_text_convert_exactly(tiny_population: Population) -> None:
    """``12.0`` is read as the integer it writes, not through a float: 2⁵³ + 1 stays itself."""
    persons = tiny_population.persons.head(2).with_columns(
        pl.Series("person_id", ["9007199254740993.0", "-3."]),
        pl.Series("age", ["40.000", "0"]),
    )
    units = tiny_population.units.filter(pl.col("unit_id") == 1)
    population = validate(persons, units)
    assert population.persons.get_column("person_id").to_list() == [2**53 + 1, -3]
    assert population.persons.get_column("age").to_list() == [40, 0]


@pytest.mark.parametrize("state", [f"{code:02d}" for code in STATE_CODES])
def test_every_state_code_is_accepted(tiny_population: Population, state: str) -> None:
    block = (state + pl.col("block").str.slice(2)).alias("block")
    population = validate(
        tiny_population.persons.with_columns(block), tiny_population.units.with_columns(block)
    )
    assert population.units.get_column("block").str.head(2).unique().to_list() == [state]


@pytest.mark.parametrize("state", ["00", "03", "07", "14", "43", "52", "57", "60", "78", "99"])
def test_block_with_an_unknown_state_code_is_rejected(
    tiny_population: Population, state: str
) -> None:
    """Codes in the gaps of the FIPS list, island areas other than Puerto Rico, and 00 or 99."""
    units = tiny_population.units.with_columns(
        pl.when(pl.col("unit_id") == 3)
        .then(state + pl.col("block").str.slice(2))
        .otherwise(pl.col("block"))
        .alias("block")
    )
    with pytest.raises(InputError) as info:
        validate(tiny_population.persons, units)
    assert info.value.one_line() == (
        f"units row 3, column block: '{state}0010001001002' starts with {state}, which is not a "
        "state FIPS code (expected a state code as the first two digits: 01–56 except 03, 07, "
        "14, 43, 52 (the states and DC), or 72 (Puerto Rico))"
    )


def test_synthetic_populations_use_accepted_state_codes() -> None:
    assert set(synth_geography.STATE_FIPS) <= set(STATE_CODES)


@pytest.mark.parametrize("keyed", ["persons", "units"])
def test_record_keys_of_one_table_alone_are_rejected(
    tiny_population: Population, keyed: str
) -> None:
    """The cell key method needs keys of persons and units: keys of one table alone would be
    replaced by fresh ones for both, so they are refused rather than silently dropped."""
    frames = {"persons": tiny_population.persons, "units": tiny_population.units}
    frames[keyed] = frames[keyed].with_row_index("record_key")
    other = "units" if keyed == "persons" else "persons"
    with pytest.raises(InputError) as info:
        validate(frames["persons"], frames["units"])
    assert info.value.one_line() == (
        f"{keyed}: has a record_key column but {other} has none (expected record_key in both "
        "tables or in neither: the cell key method needs the key of every person and every unit)"
    )


def test_record_keys_of_both_tables_are_kept(tmp_path: Path) -> None:
    for name in ("persons.csv", "units.csv"):
        lines = (BASE_CSV / name).read_text().splitlines()
        keyed = [lines[0] + ",record_key"] + [f"{line},{9 * i}" for i, line in enumerate(lines[1:])]
        (tmp_path / name).write_text("\n".join(keyed) + "\n")
    population = read_population(tmp_path)
    assert population.persons.get_column("record_key").to_list() == [9 * i for i in range(6)]
    assert population.units.get_column("record_key").to_list() == [9 * i for i in range(4)]


def test_data_defined_is_kept_and_absent_means_every_person(tmp_path: Path) -> None:
    """The optional data_defined column of persons is read as a boolean, kept through a write,
    and a population without it has every person data-defined."""
    assert read_population(BASE_CSV).data_defined.to_list() == [True] * 6
    assert "data_defined" not in read_population(BASE_CSV).persons.columns
    lines = (BASE_CSV / "persons.csv").read_text().splitlines()
    flags = ["true", "0", "TRUE", "False", "1", "true"]
    rows = [f"{r},{f}" for r, f in zip(lines[1:], flags, strict=True)]
    rows = [lines[0] + ",data_defined", *rows]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "persons.csv").write_text("\n".join(rows) + "\n")
    (tmp_path / "in" / "units.csv").write_bytes((BASE_CSV / "units.csv").read_bytes())
    population = read_population(tmp_path / "in")
    expected = [True, False, True, False, True, True]
    assert population.persons.schema["data_defined"] == pl.Boolean
    assert population.data_defined.to_list() == expected
    write_population(population, tmp_path / "out")
    assert read_population(tmp_path / "out").data_defined.to_list() == expected


def copy_base_csv(target: Path, edit: dict[str, bytes] | None = None) -> Path:
    """The base CSV population in ``target``, with some files' bytes replaced."""
    target.mkdir(exist_ok=True)
    for name in ("persons.csv", "units.csv"):
        data = (edit or {}).get(name, (BASE_CSV / name).read_bytes())
        (target / name).write_bytes(data)
    return target


@pytest.mark.parametrize("ending", [b"\r", b"\r\n"])
def test_cr_only_and_crlf_line_endings_are_read(tmp_path: Path, ending: bytes) -> None:
    """Classic Mac OS files (CR alone) are read as lines, like LF and CRLF files."""
    names = ("persons.csv", "units.csv")
    edit = {name: (BASE_CSV / name).read_bytes().replace(b"\n", ending) for name in names}
    population = read_population(copy_base_csv(tmp_path / "pop", edit))
    base = read_population(BASE_CSV)
    assert_frame_equal(population.persons, base.persons)
    assert_frame_equal(population.units, base.units)


def test_a_carriage_return_inside_a_field_of_an_lf_file_is_still_an_error(tmp_path: Path) -> None:
    data = (BASE_CSV / "persons.csv").read_bytes().replace(b",44,", b",4\r4,")
    with pytest.raises(InputError) as info:
        read_population(copy_base_csv(tmp_path / "pop", {"persons.csv": data}))
    assert info.value.one_line().startswith("persons.csv row 1, column age: '4\\r4'")


def with_extra_column(name: bytes, value: bytes) -> bytes:
    lines = (BASE_CSV / "persons.csv").read_bytes().splitlines()
    return b"\n".join([lines[0] + b"," + name] + [line + b"," + value for line in lines[1:]])


@pytest.mark.parametrize("name", [b"age_duplicated_0", b"block_duplicated_12", b"_duplicated_0"])
def test_extra_column_named_like_a_polars_renaming_is_an_extra_column(
    tmp_path: Path, name: bytes
) -> None:
    data = with_extra_column(name, b"7")
    population = read_population(copy_base_csv(tmp_path / "pop", {"persons.csv": data}))
    assert_frame_equal(population.persons, read_population(BASE_CSV).persons)


@pytest.mark.parametrize(
    ("names", "repeated"),
    [(b"age", "age"), (b"x,x", "x"), (b'"age"', "age"), (b"age,age_duplicated_0", "age")],
)
def test_repeated_header_names_are_found_in_the_header(
    tmp_path: Path, names: bytes, repeated: str
) -> None:
    data = with_extra_column(names, b",".join(b"1" for _ in names.split(b",")))
    with pytest.raises(InputError) as info:
        read_population(copy_base_csv(tmp_path / "pop", {"persons.csv": data}))
    assert info.value.one_line() == f"persons.csv header: column {repeated} appears more than once"


# Arrow types polars cannot convert (it raises, or panics and prints Rust text on stderr), and
# types it converts that cannot hold whole numbers: all are one line naming the column and type.
EXOTIC_AGE = [
    (pa.array([decimal.Decimal(44)] * 6, pa.decimal256(50, 0)), "decimal256(50, 0)"),
    (
        pa.array([{"x": decimal.Decimal(1)}] * 6, pa.struct([("x", pa.decimal256(40, 0))])),
        "struct<x: decimal256(40, 0)>",
    ),
    (pa.array([[44]] * 6, pa.list_view(pa.int64())), "list_view<element: int64>"),
    (pa.array([[44]] * 6, pa.large_list_view(pa.int64())), "large_list_view<element: int64>"),
    (
        pa.array([datetime(2020, 1, 1)] * 6, pa.timestamp("us", tz="Mars/Olympus")),
        "timestamp[us, tz=Mars/Olympus]",
    ),
    (
        pa.array([datetime(2020, 1, 1)] * 6, pa.timestamp("ms", tz="+05:30")),
        "timestamp[ms, tz=+05:30]",
    ),
    (
        pa.array([datetime(2020, 1, 1)] * 6, pa.timestamp("ms", tz="America/New_York")),
        "Datetime(time_unit='ms', time_zone='America/New_York')",
    ),
    (pa.array([44] * 6, pa.duration("s")), "Duration("),
    (pa.array([[44]] * 6, pa.list_(pa.int64())), "List(Int64)"),
    (pa.array([{"x": 44}] * 6, pa.struct([("x", pa.int64())])), "Struct({'x': Int64})"),
    (pa.array([b"44"] * 6, pa.binary()), "Binary"),
    (pa.array([1_000_000] * 6, pa.int64()).cast(pa.time64("us")), "Time"),
    (pa.array([[("k", 44)]] * 6, pa.map_(pa.string(), pa.int64())), "Map(String, Int64)"),
]


def parquet_population(target: Path, table: str, column: str, values: pa.Array) -> Path:
    """The base Parquet population with one column of one table replaced (or added)."""
    target.mkdir()
    for name in ("persons", "units"):
        data = pq.read_table(BASE_PARQUET / f"{name}.parquet")
        if name == table:
            names = data.column_names
            data = (
                data.set_column(names.index(column), column, values)
                if column in names
                else data.append_column(column, values)
            )
        pq.write_table(data, target / f"{name}.parquet")
    return target


@pytest.mark.parametrize(("values", "shown"), EXOTIC_AGE, ids=lambda v: str(getattr(v, "type", v)))
def test_parquet_column_of_an_exotic_type_is_one_line_naming_the_type(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], values: pa.Array, shown: str
) -> None:
    directory = parquet_population(tmp_path / "pop", "persons", "age", values)
    with pytest.raises(InputError) as info:
        read_population(directory)
    line = info.value.one_line()
    assert line.startswith(f"persons.parquet, column age: has type {shown}")
    assert line.endswith("which cannot hold whole numbers (expected 0–115)")
    assert "panic" not in capfd.readouterr().err


@pytest.mark.parametrize("values", [v for v, _ in EXOTIC_AGE], ids=lambda v: str(v.type))
def test_parquet_extra_column_of_an_exotic_type_is_ignored(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], values: pa.Array
) -> None:
    population = read_population(parquet_population(tmp_path / "pop", "persons", "note", values))
    assert_frame_equal(population.persons, read_population(BASE_CSV).persons)
    assert "panic" not in capfd.readouterr().err


@pytest.mark.parametrize(
    "values",
    [
        pa.array([decimal.Decimal(a) for a in (44, 41, 12, 67, 19, 20)], pa.decimal128(10, 2)),
        pa.array(["44", "41", "12", "67", "19", "20"]).dictionary_encode(),
        pa.array([44, 41, 12, 67, 19, 20], pa.int64()).dictionary_encode(),
        pa.array([44, 41, 12, 67, 19, 20], pa.float16()),
        pa.array(["44", "41", "12", "67", "19", "20"], pa.large_string()),
        pa.array(["44", "41", "12", "67", "19", "20"], pa.string_view()),
    ],
    ids=lambda v: str(v.type),
)
def test_parquet_types_that_hold_the_values_exactly_load(tmp_path: Path, values: pa.Array) -> None:
    population = read_population(parquet_population(tmp_path / "pop", "persons", "age", values))
    assert_frame_equal(population.persons, read_population(BASE_CSV).persons)


def test_parquet_repeated_column_names_are_one_line(tmp_path: Path) -> None:
    directory = parquet_population(tmp_path / "pop", "persons", "x", pa.array([1] * 6))
    table = pq.read_table(directory / "persons.parquet")
    table = table.rename_columns([("age" if n == "x" else n) for n in table.column_names])
    pq.write_table(table, directory / "persons.parquet")
    with pytest.raises(InputError) as info:
        read_population(directory)
    assert info.value.one_line() == "persons.parquet: column age appears more than once"


def test_integer_block_column_is_rejected(tiny_population: Population) -> None:
    persons = tiny_population.persons.with_columns(pl.col("block").cast(pl.Int64))
    with pytest.raises(InputError, match="must be a 15-character string"):
        validate(persons, tiny_population.units)


def test_validates_a_larger_population(small_population: Population) -> None:
    """Fifty renumbered copies of a random population (~100k persons) are still valid."""
    persons = pl.concat(
        [
            small_population.persons.with_columns(
                pl.col("person_id") + k * 1_000_000, pl.col("unit_id") + k * 1_000_000
            )
            for k in range(50)
        ]
    )
    units = pl.concat(
        [small_population.units.with_columns(pl.col("unit_id") + k * 1_000_000) for k in range(50)]
    )
    population = validate(persons, units)
    assert population.n_persons == persons.height


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------


def test_round_trip_gives_identical_frames(tmp_path: Path, small_population: Population) -> None:
    out = tmp_path / "pop"
    write_population(small_population, out, {"synth.json": {"seed": 7, "note": "é"}})
    assert sorted(p.name for p in out.iterdir()) == [
        OUTPUT_MARKER,
        "persons.parquet",
        "synth.json",
        "units.parquet",
    ]
    back = read_population(out)
    assert_frame_equal(back.persons, small_population.persons)
    assert_frame_equal(back.units, small_population.units)
    assert json.loads((out / "synth.json").read_text(encoding="utf-8")) == {
        "seed": 7,
        "note": "é",
    }


def test_write_replaces_previous_content(tmp_path: Path, tiny_population: Population) -> None:
    out = tmp_path / "pop"
    write_population(tiny_population, out, {"synth.json": {"seed": 1}})
    write_population(tiny_population, out)
    assert sorted(p.name for p in out.iterdir()) == [
        OUTPUT_MARKER,
        "persons.parquet",
        "units.parquet",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pop"]
    (out / "stale.txt").write_text("a file of the user's")
    with pytest.raises(InputError, match="stale.txt, which sdclab did not write"):
        write_population(tiny_population, out)


def test_write_refuses_a_directory_that_is_not_a_population(
    tmp_path: Path, tiny_population: Population
) -> None:
    out = tmp_path / "notes"
    out.mkdir()
    (out / "thesis.tex").write_text("mine")
    with pytest.raises(InputError, match="not an sdclab output"):
        write_population(tiny_population, out)
    assert [p.name for p in out.iterdir()] == ["thesis.tex"]


def failing_after_first_write(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the second Parquet write of write_population fail, as a full disk would."""
    real = population_io.write_parquet
    calls: list[Path] = []

    def write(frame: pl.DataFrame, target: Path) -> None:
        if calls:
            raise OSError("disk full")
        calls.append(target)
        real(frame, target)

    monkeypatch.setattr(population_io, "write_parquet", write)


def test_failed_write_leaves_previous_output_untouched(
    tmp_path: Path, tiny_population: Population, small_population: Population, monkeypatch
) -> None:
    out = tmp_path / "pop"
    write_population(tiny_population, out, {"a.json": {"v": 1}})
    before = snapshot(out)
    failing_after_first_write(monkeypatch)
    with pytest.raises(OSError, match="disk full"):
        write_population(small_population, out, {"b.json": {"v": 2}})
    assert snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pop"]


def test_failed_write_creates_nothing(
    tmp_path: Path, tiny_population: Population, monkeypatch: pytest.MonkeyPatch
) -> None:
    failing_after_first_write(monkeypatch)
    with pytest.raises(OSError):
        write_population(tiny_population, tmp_path / "pop")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["../x.json", "sub/x.json", ".hidden.json", "x.txt", ""])
def test_extra_file_names_must_be_plain_json(
    tmp_path: Path, tiny_population: Population, name: str
) -> None:
    with pytest.raises(ValueError, match="plain file name"):
        write_population(tiny_population, tmp_path / "pop", {name: {}})
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------------------------
# Robustness: one corrupted cell never causes anything but a clean load or an InputError
# ---------------------------------------------------------------------------------------------

BASE_FILES = {name: (BASE_CSV / name).read_bytes() for name in ("persons.csv", "units.csv")}

replacement = st.one_of(
    st.text(max_size=20),
    st.text(alphabet='0123456789-.,"\n\r eE', max_size=20),
    st.binary(max_size=8),
    st.sampled_from(
        ["", " ", "-1", "1.5", "NaN", "1e3", "true", '"', '""', "99999999999999999999"]
    ),
)


def corrupt(data: bytes, line: int, field: int, value: bytes) -> bytes:
    """Replace one comma-separated field of one line (the header included) with raw bytes."""
    lines = data.split(b"\n")
    fields = lines[line % (len(lines) - 1)].split(b",")
    fields[field % len(fields)] = value
    lines[line % (len(lines) - 1)] = b",".join(fields)
    return b"\n".join(lines)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    table=st.sampled_from(sorted(BASE_FILES)),
    line=st.integers(min_value=0, max_value=20),
    field=st.integers(min_value=0, max_value=20),
    value=replacement,
)
def test_corrupting_one_cell_loads_or_raises_input_error(
    table: str, line: int, field: int, value: str | bytes
) -> None:
    raw = value.encode("utf-8") if isinstance(value, str) else value
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        for name, data in BASE_FILES.items():
            (root / name).write_bytes(corrupt(data, line, field, raw) if name == table else data)
        try:
            population = read_population(root)
        except InputError as err:
            assert "\n" not in err.one_line() and "\r" not in err.one_line()
        else:
            assert_contract(population)


# ---------------------------------------------------------------------------------------------
# Command line: bad input exits 2 with one line and writes nothing
# ---------------------------------------------------------------------------------------------

PACKAGE = Path(sdclab.__file__).parent
CLI_EXISTS = (PACKAGE / "cli.py").is_file() and (PACKAGE / "__main__.py").is_file()


@pytest.mark.skipif(not CLI_EXISTS, reason="the sdclab command line is not written yet")
@pytest.mark.parametrize(
    "name", ["age_too_high", "stray_quote_unclosed", "parquet_truncated", "missing_units_file"]
)
def test_cli_rejects_bad_input_with_one_line(tmp_path: Path, name: str) -> None:
    case = DATA / "bad" / "population" / name
    result = subprocess.run(
        [sys.executable, "-m", "sdclab", "tabulate", str(case), "--out", str(tmp_path / "rel")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert expected_message(case) in lines[0]
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------------------------
# A CSV file separated by semicolons; a Population validates itself when made
# ---------------------------------------------------------------------------------------------


def test_a_semicolon_separated_csv_says_so(tmp_path: Path, tiny_population: Population) -> None:
    tiny_population.persons.write_csv(tmp_path / "persons.csv", separator=";")
    tiny_population.units.write_csv(tmp_path / "units.csv")
    with pytest.raises(InputError) as info:
        read_population(tmp_path)
    message = info.value.one_line()
    assert message.startswith("persons.csv: the header reads as 1 column, 'person_id;unit_id;")
    assert "the file seems to use ';' as its delimiter, and sdclab reads comma-separated" in message
    assert "\n" not in message
    # a comma-separated file with a ';' in an extra column's name is read as usual
    tiny_population.persons.with_columns(pl.lit(1).alias("a;b")).write_csv(tmp_path / "persons.csv")
    assert read_population(tmp_path).n_persons == tiny_population.n_persons


def test_a_population_made_of_invalid_frames_is_refused(tiny_population: Population) -> None:
    old = tiny_population.persons
    persons = old.with_columns(age=pl.when(pl.col("person_id") == 3).then(999).otherwise("age"))
    with pytest.raises(InputError) as info:
        Population(persons, tiny_population.units)
    assert str(info.value) == "persons row 3, column age: 999 is out of range (expected 0–115)"
    with pytest.raises(InputError, match="persons row 2, column unit_id: 99 is not a unit_id"):
        Population(
            old.with_columns(
                unit_id=pl.when(pl.col("person_id") == 2).then(99).otherwise("unit_id")
            ),
            tiny_population.units,
        )
    with pytest.raises(InputError, match="two polars DataFrames"):
        Population(old.to_dict(), tiny_population.units)  # type: ignore[arg-type]


def test_a_population_is_kept_in_the_contract_dtypes(tiny_population: Population) -> None:
    wide = tiny_population.persons.with_columns(pl.col("age").cast(pl.Int64), note=pl.lit("x"))
    population = Population(wide, tiny_population.units)
    assert population.persons.equals(tiny_population.persons)
    assert_contract(population)


def test_a_population_shows_its_size(tiny_population: Population) -> None:
    assert repr(tiny_population) == "<Population: 10 persons, 6 units in 4 blocks>"
    population = synth.synthesize(5000, seed=3)
    assert repr(population).startswith("<Population: 5,000 persons, ")


def test_populations_the_library_derives_are_valid() -> None:
    """The generator and the derivations that skip the check (Population._trusted) keep the
    contract: each output validates, unchanged."""
    import numpy as np

    from sdclab import protection
    from sdclab.protection.cellkey import assign_record_keys, keys_from_ids
    from sdclab.protection.swapping import swap_population
    from sdclab.release import publishable_microdata

    population = synth.synthesize(3000, seed=5)
    rng = np.random.default_rng(1)
    derived = [
        population,
        assign_record_keys(population, 256, rng),
        keys_from_ids(population, 4096),
        swap_population(population, protection.get("swap-high").parse({}), rng).population,
        publishable_microdata(population, rng),
    ]
    for made in derived:
        checked = validate(made.persons, made.units)
        assert checked.persons.equals(made.persons)
        assert checked.units.equals(made.units)
