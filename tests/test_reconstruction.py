"""Reconstruction and solution variability: worked examples, exactness, brute force, noise."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import polars as pl
import pytest
import scipy.sparse as sp
from typer.testing import CliRunner

from conftest import frame
from sdclab.attacks.reconstruction import reconstruct, stacked_query
from sdclab.attacks.variability import solution_variability
from sdclab.censuses.us2010 import schema
from sdclab.censuses.us2010.catalog import PERSON_TABLES
from sdclab.censuses.us2010.population import PERSONS, UNITS, Population
from sdclab.censuses.us2010.population.synth import synthesize
from sdclab.cli import app
from sdclab.core.execution import Executor
from sdclab.core.fileio import OUTPUT_MARKER
from sdclab.pipeline.evaluation import agreement, block_agebin_agreement
from sdclab.release import exact_release

BLOCK = "010010001001001"


def one_block_population(people: list[tuple[int, int, int, int]]) -> Population:
    """Persons (sex, age, race, hispanic) living alone in housing units of one block."""
    units = [(i, BLOCK, 0, True, 1) for i in range(len(people))]
    persons = [(i, i, BLOCK, 0, *p) for i, p in enumerate(people)]
    return Population(persons=frame(persons, PERSONS), units=frame(units, UNITS))


def agebin_records(records: pl.DataFrame) -> list[tuple]:
    ages = schema.agebin38(records["age"].to_numpy())
    rows = zip(records["sex"], ages, records["race"], records["hispanic"], strict=True)
    return sorted((int(s), int(a), int(r), int(h)) for s, a, r, h in rows)


def test_worked_example_one_person_block():
    release = exact_release(one_block_population([(1, 27, 1, 0)]), ["P1", "P7", "P12A"])
    persons = reconstruct(release, workers=1).persons
    assert persons.height == 1
    row = persons.row(0, named=True)
    assert (row["sex"], row["race"], row["hispanic"]) == (1, 1, 0)
    assert 25 <= row["age"] <= 29


SIXTEEN = [
    # males: P12 30-34, 45-49, 55-59, 67-69; P14 ages 1 and 17
    (1, 1, 2, 0),
    (1, 17, 2, 0),
    (1, 32, 2, 0),
    (1, 47, 2, 0),
    (1, 57, 2, 0),
    (1, 68, 1, 0),
    # females: 18 (P14), 30-34, 35-39, 45-49, 55-59 x3, 70-74 x2, 75-79
    (2, 18, 2, 0),
    (2, 31, 2, 0),
    (2, 37, 2, 0),
    (2, 46, 2, 0),
    (2, 56, 1, 0),
    (2, 57, 2, 0),
    (2, 58, 2, 0),
    (2, 71, 1, 0),
    (2, 73, 1, 0),
    (2, 77, 2, 0),
]


def test_worked_example_sixteen_person_block_is_unique():
    truth = one_block_population(SIXTEEN)
    release = exact_release(truth, ["P1", "P8", "P9", "P12", "P12B", "P12I", "P14"])
    recon = reconstruct(release, workers=1)
    assert agebin_records(recon.persons) == agebin_records(truth.persons)
    solvar = solution_variability(release, recon, workers=1)
    assert solvar["solvar"].to_list() == [0.0]


def representative_cells() -> np.ndarray:
    """For each cell of sex × agebin (38) × race (63) × Hispanic origin — the classes of a
    release with every block table — the person-domain cell of the first single age of its bin."""
    sex, agebin, race, hisp = np.unravel_index(
        np.arange(2 * len(schema.AGEBIN38) * 63 * 2), (2, len(schema.AGEBIN38), 63, 2)
    )
    ages = np.asarray(schema.AGEBIN38.lower_edges)[agebin]
    return schema.PERSON.cell_index(
        {"sex": sex + 1, "age": ages, "race": race + 1, "hispanic": hisp}
    )


def brute_force_solvar(truth: Population, release) -> float:
    """Largest share of records that can differ, by enumerating every consistent block."""
    from sdclab.attacks.reconstruction import stacked_query

    tables = tuple(n for n in PERSON_TABLES if n in release.tables)
    # the block tables' rows over agebin-level cells (every row is constant within an agebin)
    q = stacked_query(tables)[:, representative_cells()].toarray()
    counts = published_counts(release, tables, "block")[0]
    allowed = np.flatnonzero(q[counts <= 0].sum(axis=0) == 0)
    n = truth.n_persons
    solutions = []
    for combo in itertools.combinations_with_replacement(allowed, n):
        x = np.bincount(combo, minlength=q.shape[1])
        if np.array_equal(q @ x, counts):
            solutions.append(x)
    first = solutions[0]
    return max((n - np.minimum(first, x).sum()) / n for x in solutions)


@pytest.mark.parametrize(
    ("people", "tables", "expected"),
    [
        # two records whose races can trade places: two solutions, every record can differ
        ([(1, 31, 1, 0), (1, 42, 2, 0)], ["P1", "P8", "P12"], 1.0),
        # the white-alone iteration pins which one is white, P9 pins ethnicity: unique
        ([(1, 31, 1, 0), (1, 42, 2, 0)], ["P1", "P8", "P9", "P12", "P12A"], 0.0),
        # P12B pins the black man; white and asian can trade between the other two
        ([(1, 41, 2, 0), (2, 31, 1, 0), (1, 52, 8, 0)], ["P1", "P8", "P9", "P12", "P12B"], 2 / 3),
    ],
)
def test_solvar_against_brute_force(people, tables, expected):
    truth = one_block_population(people)
    release = exact_release(truth, tables)
    recon = reconstruct(release, workers=1)
    solvar = solution_variability(release, recon, workers=1)["solvar"].item()
    assert brute_force_solvar(truth, release) == pytest.approx(expected)
    assert solvar == pytest.approx(expected)


@pytest.fixture(scope="module")
def synthetic():
    population = synthesize(12_000, seed=8)
    release = exact_release(population)
    return population, release, reconstruct(release, workers=1)


def test_exact_release_is_reproduced_cell_by_cell(synthetic):
    population, release, recon = synthetic
    assert recon.persons.height == population.n_persons
    assert set(recon.tracts["status"]) == {"Optimal"}
    persons = recon.persons
    cells = schema.PERSON.cell_index({c: persons[c].to_numpy() for c in schema.PERSON.names})
    blocks = release.geography.blocks
    block_index = np.searchsorted(blocks, persons["block"].cast(pl.Int64).to_numpy())
    for bottom, tables in (("block", "block"), ("tract", "tract")):
        names = tuple(n for n in PERSON_TABLES if release.tables and _bottom(n) == tables)
        q = stacked_query(names)
        if bottom == "block":
            codes, rows = blocks, block_index
        else:
            codes, tract_of_block = release.geography.units("tract")
            rows = tract_of_block[block_index]
        ones = np.ones(len(rows))
        hist = sp.csr_matrix((ones, (rows, cells)), shape=(len(codes), schema.PERSON.size))
        published = published_counts(release, names, bottom)
        assert published.shape[0] == len(codes)
        assert np.array_equal((hist @ q.T).toarray(), published), bottom


def published_counts(release, names, level):
    """The tables ``names`` at ``level`` side by side (geounits × their cells; NaN suppressed)."""
    return np.hstack([release.tables[n].dense(level, suppressed=np.nan) for n in names])


def with_noise(release, rng):
    """Every published (non-zero) count of every table plus −1, 0 or +1 (0 with p = 0.8)."""
    tables = {}
    for name, table in release.tables.items():
        n = sum(table.matrix(level).nnz for level in table.levels)
        noise = rng.integers(-1, 2, n) * (rng.random(n) < 0.2)
        counts, start = {}, 0
        for level in table.levels:
            matrix = table.matrix(level).copy()
            matrix.data = matrix.data + noise[start : start + matrix.nnz]
            start += matrix.nnz
            counts[level] = matrix
        tables[name] = table.with_counts(counts)
    return replace(release, tables=tables)


def _bottom(name: str) -> str:
    return "tract" if name.startswith("PCT") else "block"


def test_agreement_on_block_sex_agebin_is_total(synthetic):
    population, _, recon = synthetic
    assert block_agebin_agreement(recon.persons, population) == 1.0
    figures = agreement(recon.persons, population)
    assert figures.all.persons == population.n_persons
    assert 0.5 < figures.all.agree_agebin <= 1.0
    assert figures.all.agree_exact_age <= figures.all.agree_agebin


def test_noisy_release_reconstructs_with_reported_deviation():
    population = synthesize(1_200, seed=9)
    release = exact_release(population)
    noisy = replace(with_noise(release, np.random.default_rng(3)), mechanism="test-noise")
    recon = reconstruct(noisy, workers=1, time_limit=10)
    assert set(recon.tracts["mode"]) == {"deviation"}
    assert recon.metrics()["total_absolute_deviation"] > 0
    assert abs(recon.persons.height - population.n_persons) < 0.05 * population.n_persons


def test_results_do_not_depend_on_the_number_of_workers_or_the_executor():
    population = synthesize(6_000, seed=4)
    release = exact_release(population)
    one = reconstruct(release, workers=1, seed=5).persons
    two = reconstruct(release, workers=2, seed=5).persons
    dask = reconstruct(release, workers=Executor.parse("dask-local:2"), seed=5).persons
    assert one.equals(two) and one.equals(dask)


def test_release_without_block_tables_is_an_input_error():
    from sdclab.core.errors import InputError

    release = exact_release(one_block_population([(1, 30, 1, 0)]), ["PCT12", "H1"])
    with pytest.raises(InputError, match="no block-level person table"):
        reconstruct(release, workers=1)


def test_reconstruct_command(tmp_path):
    runner = CliRunner()
    pop, rel, recon = tmp_path / "pop", tmp_path / "rel", tmp_path / "recon"
    assert (
        runner.invoke(app, ["synth", "-n", "3000", "--seed", "2", "--out", str(pop)]).exit_code == 0
    )
    assert runner.invoke(app, ["tabulate", str(pop), "--out", str(rel)]).exit_code == 0
    result = runner.invoke(
        app, ["reconstruct", str(rel), "--out", str(recon), "--workers", "1", "--variability"]
    )
    assert result.exit_code == 0, result.output
    assert {p.name for p in recon.iterdir()} == {
        "persons.parquet",
        "tracts.parquet",
        "solvar.parquet",
        "metrics.json",
        OUTPUT_MARKER,
    }
    assert pl.read_parquet(recon / "persons.parquet").height == 3000
    result = runner.invoke(app, ["reconstruct", str(pop), "--out", str(tmp_path / "x")])
    assert result.exit_code == 2 and "release.json" in result.output


def test_variability_is_not_applicable_to_least_deviation_tracts():
    population = synthesize(1_200, seed=9)
    release = exact_release(population)
    noisy = with_noise(release, np.random.default_rng(3))
    recon = reconstruct(noisy, workers=1, time_limit=10)
    assert set(recon.tracts["mode"]) == {"deviation"}
    assert solution_variability(noisy, recon, workers=2).height == 0


def test_no_tasks_with_several_workers():
    from sdclab.core.execution import run_tasks

    assert run_tasks(abs, [], 2, "nothing", []) == []


def test_reconstruction_resumes_from_its_checkpoint(tmp_path, monkeypatch):
    import sdclab.attacks.reconstruction as rec
    from sdclab.core.execution import TaskFailed

    population = synthesize(9_000, seed=6)
    release = exact_release(population)
    whole = reconstruct(release, workers=1, seed=2).persons
    real = rec.solve_tract
    failing = {"tract": None}

    def solve_or_fail(problem):
        if failing["tract"] is None:
            failing["tract"] = problem.tract  # the first tract solved fails every time
        if problem.tract == failing["tract"]:
            raise RuntimeError("node lost")
        return real(problem)

    monkeypatch.setattr(rec, "solve_tract", solve_or_fail)
    with pytest.raises(TaskFailed, match="node lost"):
        reconstruct(release, workers=1, seed=2, checkpoint=tmp_path)
    kept = len(list((tmp_path / "tracts").glob("task-*.npz")))
    assert kept == population.geography.n_units("tract") - 1
    solved = []
    monkeypatch.setattr(rec, "solve_tract", lambda p: solved.append(p.tract) or real(p))
    again = reconstruct(release, workers=1, seed=2, checkpoint=tmp_path).persons
    assert solved == [failing["tract"]]  # only the lost tract is solved again
    assert again.equals(whole)
