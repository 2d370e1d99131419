"""A declared census's persons in the office's own layout: a CSV file separated by ';', and a
mapping file that names the file's columns and recodes its codes."""

import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from sdclab.censuses import census_named
from sdclab.core.census.records import CensusRecords, read_records, tabulate_records
from sdclab.core.errors import InputError

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
    counts, truth = tabulate_records(read), tabulate_records(expected)
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
