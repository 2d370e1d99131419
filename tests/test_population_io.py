"""Tests for sdclab.population.io: the bad-input corpus, good inputs, writing, robustness, CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

import sdclab
from sdclab.errors import InputError
from sdclab.population import PERSONS, UNITS, Population
from sdclab.population import io as population_io
from sdclab.population.io import MAX_SHOWN, read_population, validate, write_population

DATA = Path(__file__).parent / "data"
BAD_CASES = sorted(p for p in (DATA / "bad" / "population").iterdir() if p.is_dir())
GOOD_CASES = sorted(p for p in (DATA / "good" / "population").iterdir() if p.is_dir())
BASE_CSV = DATA / "good" / "population" / "base_csv"


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
        ("age", ["40", "1e400"], "persons row 2, column age: 1e400 is not a whole number"),
        ("person_id", [1, 2**63], "persons row 2, column person_id: 9223372036854775808 is too"),
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
    write_population(tiny_population, out)
    (out / "stale.txt").write_text("old")
    write_population(tiny_population, out)
    assert sorted(p.name for p in out.iterdir()) == ["persons.parquet", "units.parquet"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pop"]


def test_write_refuses_a_directory_that_is_not_a_population(
    tmp_path: Path, tiny_population: Population
) -> None:
    out = tmp_path / "notes"
    out.mkdir()
    (out / "thesis.tex").write_text("mine")
    with pytest.raises(InputError, match="not an earlier sdclab output"):
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
