"""The noise-aware attack never rules out what the mechanism could have produced.

For every release the records the tables were computed from — the confidential ones, or the
swapped ones where a swap came first — must be a feasible point of the attack's program: each
published cell's true count within the range the noise model gives, and each (block, class) pair
those records use among the program's variables.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
import scipy.sparse as sp

from sdclab.attacks.knowledge import cell_bounds, measured_query, measurement_bounds
from sdclab.attacks.noise_aware import ColumnSpace, Rows
from sdclab.attacks.reconstruction import (
    class_query,
    reconstruct,
    resolution,
    side_by_side,
    solve_tract,
    tract_problems,
)
from sdclab.censuses.us2010 import schema
from sdclab.censuses.us2010.population import Population
from sdclab.censuses.us2010.population.synth import synthesize
from sdclab.core.randomness import make_rng
from sdclab.pipeline import api
from sdclab.protection import swapping
from sdclab.protection.cellkey import assign_record_keys, has_keys
from sdclab.protection.ptable import create_ptable, ons_10_5_ptable
from sdclab.protection.ptable_analysis import preimage_range
from sdclab.release import Release, exact_release

SEED = 11


@pytest.fixture(scope="module")
def population() -> Population:
    return synthesize(3_000, seed=21)


def swapped(population: Population, preset: str, seed: int) -> Population:
    """The swapped microdata a swap release (or a swap-first cell key release whose population
    already holds record keys) was tabulated from: the same stream, drawn first."""
    mechanism = swapping.SWAP_LOW if preset == "swap-low" else swapping.SWAP_HIGH
    return swapping.swap_population(population, mechanism.parse({}), make_rng(seed)).population


def true_pairs(population: Population, problem, tables) -> np.ndarray:
    """blocks × classes of one tract: whether the records put anyone there."""
    cells = population_cells(population)
    block = population.persons["block"].cast(pl.Int64).to_numpy()
    inside = np.isin(block, problem.blocks)
    row = np.searchsorted(problem.blocks, block[inside])
    classes = resolution(tables)
    used = np.zeros((len(problem.blocks), len(classes.representative)), dtype=bool)
    used[row, classes.class_of[cells[inside]]] = True
    return used


def population_cells(population: Population) -> np.ndarray:
    persons = population.persons
    return schema.PERSON.cell_index({a: persons[a].to_numpy() for a in schema.PERSON.names})


def measured_truth(records: Population, names: tuple[str, ...], level: str) -> np.ndarray:
    """Geounits of ``level`` × the groups of the measured queries ``names``: the records' counts."""
    geography = exact_release(records).geography
    block = records.persons["block"].cast(pl.Int64).to_numpy()
    unit = geography.units(level)[1][np.searchsorted(geography.blocks, block)]
    histogram = sp.csr_matrix(
        (np.ones(len(block)), (unit, population_cells(records))),
        shape=(geography.n_units(level), schema.PERSON.size),
    )
    parts = [(histogram @ measured_query(n).query.T).toarray() for n in names]
    return np.hstack([np.zeros((histogram.shape[0], 0))] + parts)


def assert_feasible(release: Release, records: Population) -> None:
    """The records' exact tables (and measured queries) lie within every cell's range, and their
    pairs are variables."""
    exact = exact_release(records)
    problems = tract_problems(release, knowledge="published")
    assert problems
    for problem in problems:
        for bounds, level, names, measured in (
            (problem.block_bounds, "block", problem.block_tables, problem.block_measured),
            (problem.tract_bounds, "tract", problem.tract_tables, problem.tract_measured),
        ):
            counts = np.hstack(
                [side_by_side(exact, names, level), measured_truth(records, measured, level)]
            )
            units = exact.geography.units(level)[0]
            if level == "block":
                rows = np.searchsorted(exact.geography.blocks, problem.blocks)
            else:
                rows = np.searchsorted(units, [problem.tract])
            truth = counts[rows].reshape(bounds.low.shape)
            outside = (truth < bounds.low) | (truth > bounds.high)
            assert not outside.any(), (
                f"{release.mechanism}: {int(outside.sum())} {level} cells of tract "
                f"{problem.tract} hold a true count outside the attack's range"
            )
        space = ColumnSpace(
            class_query(problem.block_tables + problem.block_measured, problem.tables),
            class_query(problem.tract_tables + problem.tract_measured, problem.tables),
            Rows.of(problem.block_bounds, problem.tract_bounds),
        )
        used = true_pairs(records, problem, problem.tables)
        assert not (used & ~space.allowed()).any(), "a pair the records use is not a variable"


CASES = {
    "exact": ("none", {}),
    "cell key, max-entropy p-table": ("cellkey", {"ptable": "maxent", "bound": 5, "variance": 3}),
    "cell key, ONS 10/5 table": ("cellkey", {}),
    "cell key with a threshold": (
        "cellkey",
        {"ptable": "maxent", "bound": 3, "variance": 1, "threshold": 4},
    ),
    "primary suppression": ("suppress", {}),
    "complementary suppression": ("suppress", {"complementary": True}),
    "suppression without the size rule": ("suppress", {"min_persons": 0, "small_cells": 3}),
    "geometric": ("geometric", {"epsilon": 8}),
    "geometric, clamped": ("geometric", {"epsilon": 2, "nonnegative": True}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_records_behind_the_release_are_feasible(population: Population, case: str) -> None:
    name, settings = CASES[case]
    release = api.protect(population, name, seed=SEED, **settings)
    assert_feasible(release, population)


@pytest.mark.parametrize("preset", ["swap-low", "swap-high"])
def test_swapped_releases_admit_the_swapped_microdata(population: Population, preset: str) -> None:
    release = api.protect(population, preset, seed=SEED)
    assert_feasible(release, swapped(population, preset, SEED))


def test_swap_then_cell_key_admits_the_swapped_microdata(population: Population) -> None:
    settings = {"ptable": "maxent", "bound": 5, "variance": 3, "swap": "swap-low"}
    release = api.protect(population, "cellkey", seed=SEED, **settings)
    rng = make_rng(SEED)  # the mechanism's stream: record keys drawn first, then the swap
    keyed = population if has_keys(population) else assign_record_keys(population, 256, rng)
    records = swapping.swap_population(keyed, swapping.SWAP_LOW.parse({}), rng).population
    assert_feasible(release, records)


def test_the_naive_attack_rules_out_true_records_of_a_cell_key_release(population) -> None:
    """The reason for the noise model: the naive candidates exclude pairs the truth uses."""
    release = api.protect(population, "cellkey", seed=SEED, ptable="maxent", bound=5, variance=3)
    naive = tract_problems(release)
    from sdclab.attacks.reconstruction import candidate_cells

    excluded = 0
    for problem in naive:
        start = np.zeros(
            (len(problem.blocks), len(resolution(problem.tables).representative)), bool
        )
        start[candidate_cells(problem)] = True
        excluded += int((true_pairs(population, problem, problem.tables) & ~start).sum())
    assert excluded > 0


@pytest.fixture(scope="module")
def topdown(population: Population) -> Release:
    return api.protect(population, "topdown", seed=SEED, product="dhc")


def test_topdown_tables_and_measurements_exclude_no_class_the_truth_uses(
    population: Population, topdown: Release
) -> None:
    problem = tract_problems(topdown, knowledge="published")[0]
    assert "dhc:detailed" in problem.block_measured and problem.tract_measured
    tables_only = tract_problems(topdown, knowledge="tables")[0]
    assert not tables_only.block_measured and not tables_only.tract_measured
    assert_feasible(topdown, population)


def test_measured_queries_project_onto_the_person_domain() -> None:
    detailed = measured_query("dhc:detailed")  # quarters × person cells: 8 quarters per group
    assert detailed.query.shape == (schema.PERSON.size, schema.PERSON.size)
    assert set(detailed.cells_per_group.tolist()) == {schema.UNIT_TYPE.size}
    assert measured_query("dhc:hhgq").query.shape[0] == 1  # the quarters alone: the total
    votingage = measured_query("pl94:votingage").query  # under 18 / 18 and over, by age
    ages = schema.PERSON.decode(np.arange(schema.PERSON.size))["age"]
    assert votingage.shape[0] == 2
    assert np.array_equal(votingage[1].toarray().ravel() == 1, ages >= schema.VOTING_AGE)
    for name in ("dhc:sex*age", "dhc:hhgq*sex*agecat", "pl94:detailed"):
        q = measured_query(name).query
        assert np.array_equal(np.asarray(q.sum(axis=0)).ravel(), np.ones(schema.PERSON.size))


def test_measurements_are_the_truth_plus_noise(population: Population, topdown: Release) -> None:
    """A group measured in every cell answers its true count plus noise of the stated
    variance; one measured in part answers less than its count, up to the noise."""
    names = tuple(n for n in tract_problems(topdown, knowledge="published")[0].block_measured)
    published, bounds = measurement_bounds(topdown, names, "block")
    truth = measured_truth(population, names, "block")
    measured = ~np.isnan(published)
    complete = measured & (bounds.above > 0)
    partial = measured & (bounds.above == 0)
    assert complete.sum() > 1000 and partial.sum() > 1000
    z = (published[complete] - truth[complete]) * bounds.weight[complete]  # (noisy − true) / σ
    assert abs(z.mean()) < 5 / np.sqrt(complete.sum())  # mean 0 within 5 standard errors
    assert 0.9 < z.var() < 1.1
    assert np.mean(published[partial] - truth[partial] <= 3 / bounds.weight[partial]) > 0.99


def test_preimage_of_the_ons_table() -> None:
    low, high = preimage_range(ons_10_5_ptable(), 0, 20)
    assert (low[0], high[0]) == (0, 9)  # counts below 10 are published as 0
    assert (low[10], high[10]) == (10, 12)
    assert (low[15], high[15]) == (13, 17)
    assert all(low[j] > high[j] for j in (1, 9, 11, 14))  # never published


def test_preimage_of_a_bounded_table_keeps_true_zeros() -> None:
    table = create_ptable(5, 3.0, 0, None)
    low, high = preimage_range(table, 0, 12)
    assert (low[0], high[0]) == (0, 5)
    assert low[1] == 1 and high[1] == 6  # a published positive cell is a true positive one
    assert (low[12], high[12]) == (7, 17)
    with_threshold = preimage_range(table, 4, 12)
    assert with_threshold[1][0] == 8  # 0 also hides counts the noise took below the threshold
    assert preimage_range(table, 4, 0)[1][0] == 8  # the same when every published count is 0


def _preimage_by_brute_force(table, threshold: int, largest: int):
    """Every true count up to where none can land at or below ``largest`` or the threshold."""
    low = np.full(largest + 1, np.iinfo(np.int64).max)
    high = np.full(largest + 1, -1)
    for true in range(max(largest, threshold) + 2 * table.D + 2):
        values, p = table.row(true)
        for out in true + values[p > 0]:
            out = 0 if out < threshold else out
            if out <= largest:
                low[out], high[out] = min(low[out], true), max(high[out], true)
    return low, high


def test_the_preimage_of_a_threshold_costs_no_more_than_the_noise_reach() -> None:
    table = create_ptable(5, 3.0, 0, None)
    for threshold in (0, 3, 17, 40):
        for got, want in zip(
            preimage_range(table, threshold, 30),
            _preimage_by_brute_force(table, threshold, 30),
            strict=True,
        ):
            np.testing.assert_array_equal(got, want)
    low, high = preimage_range(table, 10**9, 30)  # made an array of 10⁹ true counts (7.45 GiB)
    assert (low[0], high[0]) == (0, 10**9 + 4)  # the symmetry row reaches 5 below
    assert (low[1:] > high[1:]).all()  # nothing below the threshold is shown


def _fits_a_cell_key_release(population: Population) -> None:
    release = api.protect(population, "cellkey", seed=SEED, ptable="maxent", bound=5, variance=3)
    problem = tract_problems(release, knowledge="published")[0]
    result = solve_tract(problem)
    assert result.mode == "noise-aware"
    assert result.elastic == pytest.approx(0.0, abs=1e-6)
    assert result.count.sum() > 0


def test_the_noise_aware_program_fits_a_cell_key_release_no_worse() -> None:
    """The truth is feasible, so the solution keeps every cell within its range (no elastic
    slack) and reconstructs persons (1,500 persons; the 3,000 of the module's population in the
    slow twin, whose integer program takes about 30 s)."""
    _fits_a_cell_key_release(synthesize(1_500, seed=21))


@pytest.mark.slow
def test_the_noise_aware_program_fits_a_cell_key_release_no_worse_at_3000(population) -> None:
    _fits_a_cell_key_release(population)


def test_unknown_noise_is_refused_in_words(population: Population) -> None:
    release = exact_release(population)
    from dataclasses import replace

    from sdclab.core.errors import InputError

    with pytest.raises(InputError, match="no model of this mechanism's noise"):
        cell_bounds(replace(release, mechanism="mystery"), ["P1"], "block", np.zeros((1, 1)))


def test_exact_releases_keep_the_naive_program(population: Population) -> None:
    release = exact_release(population)
    naive = reconstruct(release, workers=1)
    aware = reconstruct(release, workers=1, knowledge="published")
    assert set(aware.tracts["mode"]) == {"exact"}
    assert naive.persons.equals(aware.persons)


def test_a_swapped_release_does_not_admit_the_confidential_records(population: Population) -> None:
    """The check can fail: the confidential records are not what a swap release tabulates."""
    release = api.protect(population, "swap-low", seed=SEED)
    with pytest.raises(AssertionError, match="outside the attack's range"):
        assert_feasible(release, population)


@pytest.mark.parametrize(("complementary", "bounded"), [(False, True), (True, False)])
def test_a_geounit_withheld_for_its_size_is_small_unless_complements_hide_it(
    population: Population, complementary: bool, bounded: bool
) -> None:
    """Without complementary suppression only the size rule withholds P1, so its geounits hold
    1..min_persons − 1 persons; with it a withheld P1 may be a complement of any size."""
    release = api.protect(population, "suppress", seed=SEED, complementary=complementary)
    bounds = [p.block_bounds for p in tract_problems(release, knowledge="published")]
    p1 = [(b.low[:, 0], b.high[:, 0]) for b in bounds]
    low = np.concatenate([lo for lo, _ in p1])
    high = np.concatenate([hi for _, hi in p1])
    withheld = np.concatenate([np.isnan(p.block_counts[:, 0]) for p in tract_problems(release)])
    assert withheld.sum() > 10
    if bounded:
        assert np.all(low[withheld] == 1) and np.all(high[withheld] == 14)
    else:
        assert np.isinf(high[withheld]).all()


def test_a_tract_whose_relaxation_starts_empty_is_solved() -> None:
    """Under heavy geometric noise no row may force a person in (no positive lower bound): the
    first relaxation holds no row and no pair, and its optimum is 0 rather than an error (this
    release made HiGHS report an empty model)."""
    small = synthesize(500, seed=7)
    release = api.protect(small, "geometric", seed=1, epsilon=4)
    result = solve_tract(tract_problems(release, knowledge="published")[0])
    assert result.mode == "noise-aware" and result.count.sum() > 0


def program_cost(problem, result) -> tuple[float, bool]:
    """The noise model's cost of a tract's reconstruction, cell by cell (Σ weight·shortfall +
    above·excess, as the program defines it), and whether every count is within its range."""
    space = ColumnSpace(
        class_query(problem.block_tables + problem.block_measured, problem.tables),
        class_query(problem.tract_tables + problem.tract_measured, problem.tables),
        Rows.of(problem.block_bounds, problem.tract_bounds),
    )
    rows = space.rows
    block = np.searchsorted(problem.blocks, result.block)
    cell = resolution(problem.tables).class_of[result.cell]
    t = space.matrix(block, cell) @ result.count.astype(np.float64)
    below = np.maximum(rows.target - t, 0)
    above = np.maximum(t - rows.target, 0)
    inside = bool(np.all((t >= rows.low) & (t <= rows.high)))
    return float(np.sum(rows.weight * below + rows.above * above)), inside


@pytest.mark.parametrize("case", ["topdown", "cellkey", "suppress"])
def test_the_reported_objective_is_the_cost_of_the_reconstruction(
    population: Population, topdown: Release, case: str
) -> None:
    """The program carries linear costs on its pairs and leaves most cells out; the objective it
    reports must still be the noise model's cost of the records it returns, counted cell by cell
    over every published cell."""
    small = synthesize(400, seed=21)
    release = {
        "topdown": lambda: topdown,
        "cellkey": lambda: api.protect(
            small, "cellkey", seed=SEED, ptable="maxent", bound=5, variance=3
        ),
        "suppress": lambda: api.protect(small, "suppress", seed=SEED),
    }[case]()
    problem = tract_problems(release, knowledge="published")[0]
    result = solve_tract(problem)
    assert result.mode == "noise-aware" and result.count.sum() > 0
    cost, inside = program_cost(problem, result)
    if result.elastic == pytest.approx(0.0, abs=1e-6):
        assert inside
        assert result.deviation == pytest.approx(cost, rel=1e-6, abs=1e-6)
    else:  # an elastic unit costs more than the noise model says: the objective is higher
        assert not inside and result.deviation > cost


@pytest.mark.parametrize(
    ("tract_cell", "persons"),
    [
        ((0.0, np.inf, 0.0, 0.0, 0.0), 0),  # withheld: nothing asks for anyone
        ((0.0, 2.0, 1.0, 0.0, 1.0), 0),  # a shown 0 under suppression: 0..2, each person costs
        ((0.0, 5.0, 1.0, 5.0, 1.0), 5),  # a target at the top of its range: costs fall with it
    ],
)
def test_a_tract_whose_blocks_hold_no_row_is_solved(tract_cell, persons) -> None:
    """One wholly withheld block (its cells hold no row) and one tract cell: the relaxation
    warmed on the block rows holds pairs but no row, and must neither fail nor run unbounded
    (a tract cell whose cost falls with its count bounds the pairs from the start)."""
    from sdclab.attacks.noise_aware import solve_priced
    from sdclab.core.optimize.highs import Limits

    block = (np.zeros(2), np.full(2, np.inf), np.zeros(2), np.zeros(2), np.zeros(2))
    low, high, weight, target, above = (np.r_[b, t] for b, t in zip(block, tract_cell, strict=True))
    rows = Rows(low, high, weight, target, above, n_blocks=1, block_width=2)
    space = ColumnSpace(
        sp.csc_matrix(np.array([[1.0, 1.0], [1.0, 0.0]])),
        sp.csc_matrix(np.array([[1.0, 1.0]])),
        rows,
    )
    priced = solve_priced(space, np.array([[True, False]]), 0, Limits.start(10), 0.0)
    assert priced.objective == pytest.approx(0.0)
    assert priced.count.sum() == persons


def test_holding_adds_exactly_the_held_rows_the_pairs_enter() -> None:
    """Master.hold adds every held row a chosen pair enters, and no other unforced row (a row
    the relaxation leaves out counts 0 for its cost: one a pair enters must be in)."""
    from sdclab.attacks.noise_aware import Master

    release = api.protect(synthesize(500, seed=7), "geometric", seed=1, epsilon=4)
    problem = tract_problems(release, knowledge="published")[0]
    space = ColumnSpace(
        class_query(problem.block_tables, problem.tables),
        class_query(problem.tract_tables, problem.tables),
        Rows.of(problem.block_bounds, problem.tract_bounds),
    )
    none = np.zeros(len(space.rows.low), dtype=bool)
    master = Master(space, none, none)
    block, cell = np.nonzero(space.allowed())
    pick = np.random.default_rng(3).choice(len(cell), size=min(40, len(cell)), replace=False)
    master.add(block[pick], cell[pick])
    master.hold(none)
    entered = space.matrix(block[pick], cell[pick]).tocsr().getnnz(axis=1) > 0  # rows entered
    assert (entered & space.rows.held).any()
    assert np.array_equal(master.position >= 0, entered & space.rows.held)
