"""Shared fixtures: a hand-written 10-person population and small random valid populations."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from sdclab.censuses.us2010.population import PERSONS, UNITS, Population
from sdclab.core.execution import _limit_blas, default_workers

TOYLAND = Path(__file__).parents[1] / "examples" / "toyland"

os.environ.setdefault("SDCLAB_DIGEST_KEY", "test-key-not-secret-0123456789abcdef")


def share_the_cores_among_workers() -> None:
    """In a pytest-xdist worker, limit BLAS to the worker's share of the cores, as sdclab does in
    its own worker processes (``execution._limit_blas``): with a thread per core in each of
    ``make test``'s two workers, the cores are oversubscribed and the idle threads spin, which
    doubled the CPU time of TopDown's dense factorisations. Commands the tests start inherit the
    limit through the environment."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers is not None:
        _limit_blas(max(1, default_workers() // int(workers)))


share_the_cores_among_workers()


def frame(rows: list[tuple], specs) -> pl.DataFrame:
    """A frame in contract dtypes from row tuples."""
    columns = list(zip(*rows, strict=True))
    return pl.DataFrame(
        {
            s.name: pl.Series(s.name, list(col), dtype=s.dtype)
            for s, col in zip(specs, columns, strict=True)
        }
    )


# Blocks: A and B in tract 000100 block group 1, C in tract 000100 block group 2, D in tract 000200.
BLOCK_A = "010010001001001"
BLOCK_B = "010010001001002"
BLOCK_C = "010010001002001"
BLOCK_D = "010010002001001"

TINY_UNITS = [
    # unit_id, block, unit_type, occupied, tenure
    (1, BLOCK_A, 0, True, 1),
    (2, BLOCK_A, 0, True, 3),
    (3, BLOCK_B, 0, False, None),
    (4, BLOCK_C, 0, True, 2),
    (5, BLOCK_D, 5, True, None),
    (6, BLOCK_D, 0, True, 3),
]
TINY_PERSONS = [
    # person_id, unit_id, block, relationship, sex, age, race, hispanic
    (1, 1, BLOCK_A, 0, 1, 40, 1, 0),
    (2, 1, BLOCK_A, 1, 2, 38, 1, 0),
    (3, 1, BLOCK_A, 2, 2, 5, 3, 0),
    (4, 2, BLOCK_A, 0, 2, 67, 2, 0),
    (5, 4, BLOCK_C, 0, 1, 19, 8, 0),
    (6, 4, BLOCK_C, 4, 1, 21, 32, 1),
    (7, 5, BLOCK_D, 5, 2, 20, 1, 1),
    (8, 5, BLOCK_D, 5, 1, 18, 1, 1),
    (9, 6, BLOCK_D, 0, 2, 85, 4, 0),
    (10, 6, BLOCK_D, 3, 1, 110, 1, 1),
]


@pytest.fixture
def tiny_population() -> Population:
    return Population(persons=frame(TINY_PERSONS, PERSONS), units=frame(TINY_UNITS, UNITS))


def random_population(seed: int, n_units: int = 400) -> Population:
    """A small valid population with every attribute varied (not realistic, just valid)."""
    rng = np.random.default_rng(seed)
    tracts = np.array(["010010001001", "010010001002", "010010002001", "020030004001"])
    blocks = np.array([f"{tracts[i % 4]}{rng.integers(0, 1000):03d}" for i in range(30)])
    unit_block = rng.choice(blocks, n_units)
    unit_type = np.where(rng.random(n_units) < 0.1, rng.integers(1, 8, n_units), 0)
    occupied = (unit_type > 0) | (rng.random(n_units) < 0.85)
    tenure = np.where(occupied & (unit_type == 0), rng.integers(1, 4, n_units), -1)
    size = np.where(occupied, rng.integers(1, 9, n_units), 0)
    unit_of_person = np.repeat(np.arange(n_units), size)
    first = np.r_[True, unit_of_person[1:] != unit_of_person[:-1]]
    gq = unit_type[unit_of_person] > 0
    relationship = np.where(gq, 5, np.where(first, 0, rng.integers(1, 5, len(unit_of_person))))
    n = len(unit_of_person)
    units = pl.DataFrame(
        {
            "unit_id": np.arange(n_units, dtype=np.int64) + 100,
            "block": unit_block,
            "unit_type": unit_type.astype(np.int8),
            "occupied": occupied,
            "tenure": pl.Series(tenure).replace(-1, None).cast(pl.Int8),
        }
    )
    persons = pl.DataFrame(
        {
            "person_id": np.arange(n, dtype=np.int64),
            "unit_id": (unit_of_person + 100).astype(np.int64),
            "block": unit_block[unit_of_person],
            "relationship": relationship.astype(np.int8),
            "sex": rng.integers(1, 3, n).astype(np.int8),
            "age": rng.integers(0, 116, n).astype(np.int16),
            "race": np.where(rng.random(n) < 0.6, 1, rng.integers(1, 64, n)).astype(np.int8),
            "hispanic": (rng.random(n) < 0.2).astype(np.int8),
        }
    )
    return Population(persons=persons, units=units)


@pytest.fixture
def small_population() -> Population:
    return random_population(7)


SLOWEST_FILES = (
    "test_crash_safety.py",
    "test_experiment.py",
    "test_execution.py",
    "test_topdown.py",
    "test_noise.py",
    "test_noise_aware.py",
    "test_bad_directories.py",
    "test_frontier.py",
    "test_sweeps.py",
    "test_docs.py",
    "test_reconstruction.py",
    "test_security.py",
    "test_suppression.py",
    "test_fuzz_inputs.py",
)
"""The test files that take longest (``--durations=0`` summed per file), slowest first."""


TENURE = """
[attributes.tenure]
records = "households"
codes = ["own", "rent"]

[tables.T5]
title = "Households by tenure"
records = "households"
cells = ["tenure"]
"""


@pytest.fixture
def with_tenure(tmp_path: Path) -> Path:
    """Toyland with a household attribute (tenure, given on every member's row) and a household
    table; households of an even number own."""
    folder = tmp_path / "toyland"
    shutil.copytree(TOYLAND, folder)
    text = (folder / "census.toml").read_text()
    head, tail = text.split("[geographies.admin]", 1)
    (folder / "census.toml").write_text(head + TENURE + "\n[geographies.admin]" + tail)
    persons = pl.read_csv(folder / "persons.csv", infer_schema=False)
    number = persons["household_id"].str.slice(1).cast(pl.Int64)
    persons.with_columns(
        tenure=pl.when(number % 2 == 0).then(pl.lit("own")).otherwise(pl.lit("rent"))
    ).write_csv(folder / "persons.csv")
    return folder


@pytest.fixture
def wide_census(tmp_path):
    """A factory of declared censuses: ``topics`` attributes topic0… of ten codes each, a two-level
    geography (area > place, read from the records' columns), ``tables`` (name → cells) and the
    reconstruction solving ``solved`` (the attacker links on topic0)."""
    from sdclab.core.census.declare import load_census

    def make(topics: int, tables: dict[str, list[str]], solved: list[str]):
        codes = str([str(c) for c in range(10)])
        lines = ['name = "wide"', "[geographies.places]", "levels = ['area', 'place']"]
        for i in range(topics):
            lines += [f"[attributes.topic{i}]", f"codes = {codes}"]
        for name, cells in tables.items():
            lines += [f"[tables.{name}]", f"cells = {cells}"]
        lines += ["[reconstruction]", f"attributes = {solved}"]
        lines += ["[attack]", "quasi_identifiers = ['topic0']"]
        (tmp_path / "wide.toml").write_text("\n".join(lines).replace("'", '"') + "\n")
        return load_census(tmp_path / "wide.toml")

    return make


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Collect the slowest files first, each file's tests in their own order.

    ``make test`` hands whole files to its two workers in collection order (pyproject's
    ``--no-loadscope-reorder``; by default pytest-xdist would hand out the files with most tests
    first, which left a long file of few tests to run alone at the end), so the long files start
    early and the short ones fill in, and the two workers finish together."""
    rank = {name: i for i, name in enumerate(SLOWEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
