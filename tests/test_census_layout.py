"""A declared census's persons in the office's own layout: a CSV file separated by ';', and a
mapping file that names the file's columns and recodes its codes."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from sdclab.censuses import census_named
from sdclab.core.census.records import CensusRecords, read_records
from sdclab.core.errors import InputError
from sdclab.core.tables.tabulate import tabulate

TOYLAND = Path(__file__).parents[1] / "examples" / "toyland"


@pytest.fixture
def toyland(tmp_path: Path) -> Path:
    """A copy of the example census that a test may change."""
    shutil.copytree(TOYLAND, tmp_path / "toyland")
    return tmp_path / "toyland"


def same_records(read: CensusRecords, expected: CensusRecords) -> None:
    """The same encoded persons, households and geography, and the same counts."""
    assert read.attributes.keys() == expected.attributes.keys()
    for name, positions in expected.attributes.items():
        assert np.array_equal(read.attributes[name], positions), name
    for name, blocks in expected.blocks.items():
        assert np.array_equal(read.blocks[name], blocks), name
    assert read.households is not None and expected.households is not None
    assert np.array_equal(read.households, expected.households)
    assert read.digest == expected.digest
    counts, truth = tabulate(read), tabulate(expected)
    for table, counted in truth.items():
        for level, (_, matrix) in counted.counts.items():
            assert (counts[table].counts[level][1] != matrix).nnz == 0, (table, level)


def test_a_file_separated_by_semicolons_reads_to_the_same_records(toyland):
    census = census_named(toyland / "census.toml")
    expected = read_records(census, toyland / "persons.csv")
    persons = toyland / "semicolons.csv"
    pl.read_csv(toyland / "persons.csv", infer_schema=False).write_csv(persons, separator=";")
    assert persons.read_text().startswith("person_id;household_id;village;sex;age;")
    same_records(read_records(census, persons), expected)


def test_bad_input_separated_by_semicolons_names_file_row_and_column(toyland):
    census = census_named(toyland / "census.toml")
    persons = toyland / "semicolons.csv"
    text = (toyland / "persons.csv").read_text().replace(",", ";")
    persons.write_text(text.replace("P0005;H002;V100;1;", "P0005;H002;V100;7;", 1))
    with pytest.raises(InputError, match=r"^semicolons.csv: row 6, column 'sex': unknown code '7'"):
        read_records(census, persons)
    lines = text.splitlines()
    persons.write_text("\n".join([*lines[:3], lines[3] + ";extra", *lines[4:]]) + "\n")
    with pytest.raises(InputError, match=r"semicolons.csv.* row 3 has 7 fields \(expected 6"):
        read_records(census, persons)


MAPPING = """
[columns]
sex = "sex_code"
village = "gemeinde"
household_id = "hh"

[recode.sex]
m = "1"
f = "2"
"""


def office_layout(toyland: Path, separator: str = ",") -> Path:
    """Toyland's persons with renamed columns and sex written m/f, and its mapping file."""
    frame = pl.read_csv(toyland / "persons.csv", infer_schema=False)
    frame = frame.rename({"sex": "sex_code", "village": "gemeinde", "household_id": "hh"})
    frame = frame.with_columns(pl.col("sex_code").replace({"1": "m", "2": "f"}))
    frame.write_csv(toyland / "office.csv", separator=separator)
    (toyland / "mapping.toml").write_text(MAPPING)
    return toyland / "office.csv"


@pytest.mark.parametrize("separator", [",", ";"])
def test_renamed_columns_and_recoded_sex_read_to_the_same_records(toyland, separator):
    census = census_named(toyland / "census.toml")
    expected = read_records(census, toyland / "persons.csv")
    office = office_layout(toyland, separator)
    assert f"{separator}sex_code{separator}" in office.read_text().splitlines()[0]
    assert {"m", "f"} <= set(pl.read_csv(office, separator=separator)["sex_code"])
    read = read_records(census, office, mapping=toyland / "mapping.toml")
    same_records(read, expected)
    assert (toyland / "mapping.toml").absolute() in read.sources
    with pytest.raises(InputError, match=r"^office.csv: no column 'sex' \(the census declares"):
        read_records(census, office)  # without the mapping, the file is not the census's


def test_a_parquet_file_takes_a_mapping_too(toyland):
    census = census_named(toyland / "census.toml")
    expected = read_records(census, toyland / "persons.csv")
    pl.read_csv(office_layout(toyland), infer_schema=False).write_parquet(toyland / "office.pq")
    same_records(read_records(census, toyland / "office.pq", toyland / "mapping.toml"), expected)


def test_a_code_the_recode_does_not_list_passes_through_and_is_checked(toyland):
    census = census_named(toyland / "census.toml")
    office = office_layout(toyland)
    lines = office.read_text().splitlines()
    # codes already the census's pass through unchanged
    office.write_text("\n".join([lines[0], *(line.replace(",m,", ",1,") for line in lines[1:])]))
    same_records(
        read_records(census, office, toyland / "mapping.toml"),
        read_records(census, toyland / "persons.csv"),
    )
    office.write_text("\n".join([lines[0], lines[1].replace(",m,", ",x,"), *lines[2:]]))
    with pytest.raises(
        InputError, match=r"^office.csv: row 2, column 'sex_code' \(sex\): unknown code 'x'"
    ):
        read_records(census, office, toyland / "mapping.toml")
    # a renamed level's unknown unit is named by the file's column too
    office.write_text("\n".join([*lines[:2], lines[2].replace(",V100,", ",V101,"), *lines[3:]]))
    with pytest.raises(
        InputError, match=r"^office.csv: row 3, column 'gemeinde' \(village\): unknown code 'V101'"
    ):
        read_records(census, office, toyland / "mapping.toml")


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            'sex = "sex_code"',
            'gender = "sex_code"',
            "mapping.toml: columns.gender: not an attribute, level or household key of census "
            "toyland (known: sex, age, country_of_birth, region, district, village, household_id)",
        ),
        (
            'village = "gemeinde"',
            'municipality = "gemeinde"',
            "mapping.toml: columns.municipality: not an attribute, level or household key",
        ),
        (
            'village = "gemeinde"',
            'village = "commune"',
            "mapping.toml: columns.village: office.csv has no column 'commune'",
        ),
        (
            'household_id = "hh"',
            'household_id = "sex_code"',
            "mapping.toml: columns.household_id: column 'sex_code' is already given for sex",
        ),
        ('hh"', 'hh"\nage = 3', "mapping.toml: columns.age: expected the data file's column"),
        (
            'f = "2"',
            'f = "3"',
            "mapping.toml: recode.sex.f: '3' is not a code of sex (expected one of 1, 2)",
        ),
        (
            "[recode.sex]",
            "[recode.gender]",
            "mapping.toml: recode.gender: not an attribute of census toyland (known: sex, age, ",
        ),
        ("[recode.sex]", "[recodes.sex]", "mapping.toml: unknown key 'recodes' (a mapping file"),
        ("[columns]", "columns = 1\n[x]", "mapping.toml: unknown key 'x'"),
        ("[columns]", "[columns", "mapping.toml: the mapping file is not valid TOML"),
    ],
)
def test_each_mistake_of_a_mapping_file_is_refused_in_one_line(toyland, old, new, message):
    census = census_named(toyland / "census.toml")
    office = office_layout(toyland)
    mapping = toyland / "mapping.toml"
    assert old in MAPPING
    mapping.write_text(MAPPING.replace(old, new, 1))
    with pytest.raises(InputError) as info:
        read_records(census, office, mapping)
    assert message in info.value.one_line() and "\n" not in info.value.one_line()


def test_the_command_line_and_the_api_take_a_mapping(toyland):
    from sdclab.pipeline import api

    def sdclab(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "sdclab", *args], capture_output=True, text=True, cwd=toyland
        )

    office = office_layout(toyland, ";")
    census = ["--census", "census.toml"]
    done = sdclab("tabulate", office.name, *census, "--mapping", "mapping.toml", "--out", "exact")
    assert done.returncode == 0, done.stderr
    exact = api.tabulate(
        read_records(census_named(toyland / "census.toml"), TOYLAND / "persons.csv")
    )
    mapped = api.read_release(toyland / "exact")
    assert mapped.input_digest == exact.input_digest
    for name, table in exact.tables.items():
        for level in table.levels:
            assert (mapped.table(name).matrix(level) != table.matrix(level)).nnz == 0
    # the truth of an evaluation is read with the mapping too, and refused without it
    done = sdclab(
        "evaluate", "exact", "--truth", office.name, "--out", "ev", "--mapping", "mapping.toml"
    )
    assert done.returncode == 0, done.stderr
    done = sdclab("evaluate", "exact", "--truth", office.name, "--out", "ev2")
    assert done.returncode == 2 and "office.csv: no column 'sex'" in done.stderr
    # the API: a declared census's persons with their mapping; none for the US population
    read = api.read_population(
        office, census=toyland / "census.toml", mapping=toyland / "mapping.toml"
    )
    assert read.digest == exact.input_digest
    with pytest.raises(InputError, match="^mapping: a mapping file names the columns and codes"):
        api.read_population(toyland, mapping=toyland / "mapping.toml")
    done = sdclab("ckm-risk", "exact", "--mapping", "mapping.toml", "--out", "risk")
    assert done.returncode == 2 and "--mapping names the columns and codes of the" in done.stderr


def test_a_mapping_for_the_truth_of_a_us_release_is_refused(toyland):
    from types import SimpleNamespace

    from sdclab.censuses import us2010
    from sdclab.cli.pipeline import read_truth

    release = SimpleNamespace(census=us2010.census())
    with pytest.raises(InputError, match="^--mapping: a mapping file names the columns and codes"):
        read_truth(toyland, release, toyland, toyland / "mapping.toml")


EXPERIMENT = """
[population]
census = "census.toml"
path = "office.csv"
mapping = "mapping.toml"

[[mechanisms]]
name = "geometric"
seed = 2

[attacks]
reconstruct = false
"""


def test_an_experiment_reads_its_persons_with_the_mapping(toyland):
    import sdclab
    from sdclab.pipeline.experiment import load_experiment
    from sdclab.pipeline.experiment.cache import _file_digest

    office_layout(toyland, ";")
    (toyland / "exp.toml").write_text(EXPERIMENT)
    spec = load_experiment(toyland / "exp.toml").population
    assert spec.mapping == str((toyland / "mapping.toml").resolve())
    assert spec.source()["mapping"] == spec.mapping
    results = sdclab.run_experiment(toyland / "exp.toml", toyland / "out")
    assert results.population.persons == 297
    # the same release as from the census's own file, without a mapping
    (toyland / "own.toml").write_text(
        EXPERIMENT.replace('path = "office.csv"\nmapping = "mapping.toml"', 'path = "persons.csv"')
    )
    own = sdclab.run_experiment(toyland / "own.toml", toyland / "own")
    assert results.releases["geometric"].to_dict() == own.releases["geometric"].to_dict()
    # a changed mapping file is a changed population (its steps are not reused)
    before = _file_digest(spec)
    (toyland / "mapping.toml").write_text(MAPPING.replace("[columns]", "[columns]  # renamed"))
    assert _file_digest(spec) != before


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('mapping = "mapping.toml"', 'mapping = "missing.toml"', "population.mapping: "),
        (
            'census = "census.toml"\npath = "office.csv"',
            "persons = 1000",  # a synthetic US population
            "mapping: a mapping file names the columns and codes of a declared census's",
        ),
    ],
)
def test_an_experiment_refuses_a_mapping_it_cannot_use(toyland, old, new, message):
    from sdclab.pipeline.experiment import load_experiment

    office_layout(toyland)
    (toyland / "mapping.toml").write_text(MAPPING.replace('f = "2"', 'f = "3"'))
    (toyland / "exp.toml").write_text(EXPERIMENT)
    with pytest.raises(InputError, match=r"exp.toml: population.mapping: mapping.toml: recode"):
        load_experiment(toyland / "exp.toml")
    (toyland / "exp.toml").write_text(EXPERIMENT.replace(old, new))
    with pytest.raises(InputError, match=message):
        load_experiment(toyland / "exp.toml")


def test_the_guide_s_mapping_file_reads_the_office_s_layout(toyland):
    # the mapping shown in docs/census.md is one that works
    page = (Path(__file__).parents[1] / "docs" / "census.md").read_text()
    blocks = re.findall(r"^```toml\n(.*?)^```$", page, flags=re.S | re.M)
    shown = [block for block in blocks if "[recode." in block]
    assert len(shown) == 1
    office = office_layout(toyland, ";")
    (toyland / "mapping.toml").write_text(shown[0])
    census = census_named(toyland / "census.toml")
    same_records(
        read_records(census, office, toyland / "mapping.toml"),
        read_records(census, toyland / "persons.csv"),
    )
