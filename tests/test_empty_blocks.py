"""Blocks without any unit: listed in the optional blocks table, they are geounits with zero
counts in tabulation, releases, mechanisms and attacks; populations without the table read as
before."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from conftest import random_population
from sdclab import protection
from sdclab.censuses.us2010.population import Population
from sdclab.censuses.us2010.population.io import read_population, write_population
from sdclab.core.digest import frames_digest
from sdclab.core.errors import InputError
from sdclab.core.tables.tabulate import tabulate
from sdclab.pipeline import api
from sdclab.pipeline.api import read_release
from sdclab.release import write_release

# three blocks with no unit: two in tracts that have units, one in a tract of its own
EMPTY = ["010010001001998", "010010002001999", "010010003001001"]


@pytest.fixture(scope="module")
def population() -> Population:
    base = random_population(11, n_units=120)
    listed = pl.DataFrame({"block": [*EMPTY, base.units["block"][0]]})  # a block with units too
    return Population(base.persons, base.units, listed)


def test_listed_blocks_are_geounits(population):
    base = Population(population.persons, population.units)
    assert population.geography.n_blocks == base.geography.n_blocks + len(EMPTY)
    assert set(np.asarray(EMPTY, dtype=np.int64)) <= set(population.geography.blocks)
    assert population.geography.n_units("tract") == base.geography.n_units("tract") + 1


def test_a_population_without_blocks_digests_as_before(population):
    base = Population(population.persons, population.units)
    assert base.frames == (base.persons, base.units)
    assert base.digest == frames_digest(base.persons, base.units)
    assert population.digest != base.digest  # the listed blocks are part of the input


def test_empty_blocks_tabulate_to_zero(population):
    counts = tabulate(population, ["P1", "H1", "P12"])
    empty = np.searchsorted(population.geography.blocks, np.asarray(EMPTY, dtype=np.int64))
    for name, table in counts.items():
        _, matrix = table.counts["block"]
        assert matrix.shape[0] == population.geography.n_blocks, name
        assert matrix[empty].nnz == 0, name
        assert matrix.sum() > 0, name


@pytest.mark.parametrize(
    ("mechanism", "settings"),
    [
        ("none", {}),
        ("geometric", {"epsilon": "4"}),
        ("cellkey", {}),
        ("suppress", {}),
        ("swap", {}),
        ("topdown", {"product": "pl94"}),
    ],
)
def test_mechanisms_publish_empty_blocks(population, mechanism, settings, tmp_path):
    release = protection.run(mechanism, population, settings, 5)
    assert np.array_equal(release.geography.blocks, population.geography.blocks)
    write_release(release, tmp_path / "release")
    again = read_release(tmp_path / "release")
    assert np.array_equal(again.geography.blocks, population.geography.blocks)
    for table in release.tables.values():
        for level in table.levels:
            assert table.matrix(level).shape[0] == population.geography.n_units(level)


def test_the_reconstruction_places_nobody_in_an_empty_block(population):
    release = api.tabulate(population, tables=["P1", "P6", "P7", "P9", "P11", "P12"])
    result = api.reconstruct(release)
    blocks = result.persons["block"].unique().to_list()
    assert not set(EMPTY) & set(blocks)
    assert result.persons.height == population.n_persons


def test_blocks_are_written_and_read_back(population, tmp_path):
    write_population(population, tmp_path / "pop")
    assert (tmp_path / "pop" / "blocks.parquet").is_file()
    again = read_population(tmp_path / "pop")
    assert again.blocks is not None and again.digest == population.digest
    csv = tmp_path / "csv"
    csv.mkdir()
    for name in ("persons", "units"):
        pl.read_parquet(tmp_path / "pop" / f"{name}.parquet").write_csv(csv / f"{name}.csv")
    (csv / "blocks.csv").write_text("block\n" + "\n".join(EMPTY) + "\n")
    from_csv = read_population(csv)
    assert from_csv.geography.n_blocks == population.geography.n_blocks


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("block\n01001000100199\n", "blocks.csv row 1, column block"),
        ("block\n990010001001998\n", "blocks.csv row 1, column block"),
        ("block\n010010001001998\n010010001001998\n", "row 2, column block"),
        ("geocode\n010010001001998\n", "blocks.csv: missing column block"),
    ],
)
def test_a_bad_blocks_file_is_one_input_error(population, tmp_path, text, expected):
    write_population(Population(population.persons, population.units), tmp_path / "pop")
    (tmp_path / "pop" / "blocks.csv").write_text(text)
    with pytest.raises(InputError, match=expected) as raised:
        read_population(tmp_path / "pop")
    assert "\n" not in str(raised.value)
