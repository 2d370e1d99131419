"""TopDown: the L2 step and rounder on hand-made parents, and whole runs against the invariants."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import polars as pl
import pytest
import scipy.sparse as sp

from sdclab.censuses.us2010 import schema
from sdclab.censuses.us2010.geography import LEVELS, geoid_strings
from sdclab.censuses.us2010.population import Population
from sdclab.censuses.us2010.population.synth import synthesize
from sdclab.core import accounting
from sdclab.core.execution import Executor
from sdclab.core.optimize.least_squares import TOLERANCE, solve_l2
from sdclab.core.optimize.parent_problem import ParentProblem, check_solution
from sdclab.core.optimize.rounding import round_l1
from sdclab.core.tables.tabulate import block_histogram
from sdclab.protection import run
from sdclab.protection.topdown import product_tables
from sdclab.protection.topdown_engine import topdown, unit_counts
from sdclab.protection.topdown_strategy import DHC_DEFAULT, PRODUCTION, PRODUCTS, Strategy

# ---------------------------------------------------------------------------------------------
# Hand-made parents
# ---------------------------------------------------------------------------------------------


def parent_problem(targets, weights, parent, *, passes=(("detailed",),), totals=None, lower=None):
    """Children × n problem with the detailed (identity) and total queries, one hhgq type."""
    targets = {k: np.asarray(v, float) for k, v in targets.items()}
    children, n = targets["detailed"].shape
    return ParentProblem(
        allowed=np.ones((children, n), bool),
        parent=None if parent is None else np.asarray(parent),
        totals=None if totals is None else np.asarray(totals),
        hhgq=sp.csr_matrix(np.vstack([np.ones(n)] + [np.zeros(n)] * 7)),
        hhgq_lower=np.zeros((children, 8), int) if lower is None else np.asarray(lower),
        hhgq_upper=np.full((children, 8), 99_999),
        queries={"detailed": sp.identity(n, format="csr"), "total": sp.csr_matrix(np.ones((1, n)))},
        targets={"total": targets["detailed"].sum(axis=1, keepdims=True), **targets},
        weights={k: np.asarray(v, float) for k, v in weights.items()},
        l2_passes=passes,
        rounder_passes=passes,
    )


def test_l2_weighted_split_of_a_parent_cell():
    """min 3(x₁−3)² + (x₂−3)² with x₁ + x₂ = 4: the Lagrange solution is (2.5, 1.5)."""
    problem = parent_problem({"detailed": [[3], [3]]}, {"detailed": [3, 1], "total": [0, 0]}, [4])
    assert solve_l2(problem) == pytest.approx(np.array([[2.5], [1.5]]), abs=1e-5)


def test_l2_non_negativity_binds():
    """Targets (5, −3) with x₁ + x₂ = 1: the unconstrained split (4.5, −3.5) is cut to (1, 0)."""
    problem = parent_problem({"detailed": [[5], [-3]]}, {"detailed": [1, 1], "total": [0, 0]}, [1])
    assert solve_l2(problem) == pytest.approx(np.array([[1.0], [0.0]]), abs=1e-5)


def test_l2_consistent_targets_are_returned_exactly():
    truth = [[2, 0, 1], [1, 3, 0]]
    problem = parent_problem({"detailed": truth}, {"detailed": [1, 1], "total": [0, 0]}, [3, 3, 1])
    assert solve_l2(problem) == pytest.approx(np.array(truth, float), abs=1e-5)


def test_l2_second_pass_keeps_the_first_pass_totals_within_tolerance():
    """Pass 0 fits the totals (4 and 2: exactly the parent's 6); pass 1 fits cells that would
    rather move persons from child 0 to child 1, but may shift the totals by at most τ."""
    problem = ParentProblem(
        allowed=np.ones((2, 2), bool),
        parent=np.array([3, 3]),
        totals=None,
        hhgq=sp.csr_matrix(np.vstack([np.ones(2)] + [np.zeros(2)] * 7)),
        hhgq_lower=np.zeros((2, 8), int),
        hhgq_upper=np.full((2, 8), 99_999),
        queries={"detailed": sp.identity(2, format="csr"), "total": sp.csr_matrix(np.ones((1, 2)))},
        targets={"total": np.array([[4.0], [2.0]]), "detailed": np.array([[1.0, 1.0], [2.0, 2.0]])},
        weights={"total": np.array([1.0, 1.0]), "detailed": np.array([1.0, 1.0])},
        l2_passes=(("total",), ("detailed",)),
    )
    x = solve_l2(problem)
    assert x.sum(axis=0) == pytest.approx([3, 3], abs=1e-6)
    assert x[0].sum() == pytest.approx(4 - TOLERANCE, abs=1e-4)  # pushed to the edge of τ
    single_pass = ParentProblem(**{**problem.__dict__, "l2_passes": (("total", "detailed"),)})
    assert solve_l2(single_pass)[0].sum() < 4 - 0.2  # without the first pass it moves further


def test_l2_respects_hhgq_lower_bounds_and_invariant_totals():
    # child 1 has 2 facilities (≥ 2 persons of type 0); child 0's total is invariant at 1
    problem = parent_problem(
        {"detailed": [[3, 0], [0, 0]]},
        {"detailed": [1, 1], "total": [0, 0]},
        [2, 2],
        totals=[1, -1],
        lower=[[0] * 8, [2] + [0] * 7],
    )
    x = solve_l2(problem)
    assert x[0].sum() == pytest.approx(1, abs=1e-6)
    assert x[1].sum() >= 2 - 1e-6


def test_a_large_root_falls_back_straight_to_the_interior_point_method(monkeypatch):
    """When the root's structured solver fails, the general solvers take the root: above
    ROOT_OSQP_MAX_VARIABLES it skips OSQP (which stalls on the dhc nation); below it, and for any
    problem with a parent, OSQP runs first. The optimum is the same."""
    from sdclab.core.optimize import least_squares
    from sdclab.core.optimize.sibling_qp import NotConverged

    def fails(qp):
        raise NotConverged("forced")

    monkeypatch.setattr(least_squares, "solve_root_qp", fails)
    started = []
    real_osqp = least_squares.osqp.OSQP
    monkeypatch.setattr(least_squares.osqp, "OSQP", lambda: started.append(1) or real_osqp())
    targets, weights = {"detailed": [[4, -1, 2]]}, {"detailed": [1], "total": [1]}
    root = parent_problem(targets, weights, None, totals=[5])
    small = solve_l2(root)
    assert len(started) == 1
    monkeypatch.setattr(least_squares, "ROOT_OSQP_MAX_VARIABLES", 2)
    assert solve_l2(root) == pytest.approx(small, abs=1e-5)
    assert len(started) == 1  # the large root did not start OSQP
    assert small == pytest.approx(np.array([[3.5, 0.0, 1.5]]), abs=1e-5)
    solve_l2(parent_problem({"detailed": [[3], [3]]}, {"detailed": [3, 1], "total": [0, 0]}, [4]))
    assert len(started) == 2  # a problem with a parent still starts with OSQP


def test_rounder_follows_the_fractional_parts():
    problem = parent_problem(
        {"detailed": [[0, 0], [0, 0]]}, {"detailed": [1, 1], "total": [0, 0]}, [1, 1]
    )
    x = np.array([[0.7, 0.3], [0.3, 0.7]])
    out = round_l1(problem, x)
    assert out.tolist() == [[1, 0], [0, 1]]
    check_solution(problem, out)


def test_rounder_first_pass_settles_totals():
    """Each cell 1.5/1.5 over two children: the total pass gives one child 2 and the other 1 of
    the three cells... and the detailed pass can then only choose which cells."""
    problem = parent_problem(
        {"detailed": [[0, 0, 0], [0, 0, 0]]},
        {"detailed": [1, 1], "total": [1, 1]},
        [1, 1, 1],
        passes=(("total",), ("detailed",)),
    )
    x = np.array([[0.9, 0.9, 0.1], [0.1, 0.1, 0.9]])
    out = round_l1(problem, x)
    assert out.tolist() == [[1, 1, 0], [0, 0, 1]]
    check_solution(problem, out)


def test_rounder_keeps_integers_and_invariant_totals():
    problem = parent_problem(
        {"detailed": [[0, 0, 0], [0, 0, 0]]},
        {"detailed": [1, 1], "total": [0, 0]},
        [2, 1, 3],
        totals=[3, 3],
    )
    x = np.array([[1.0, 0.5, 1.5], [1.0, 0.5, 1.5]])
    out = round_l1(problem, x)
    assert out.sum(axis=1).tolist() == [3, 3] and out.sum(axis=0).tolist() == [2, 1, 3]
    check_solution(problem, out)


def test_check_solution_catches_violations():
    problem = parent_problem(
        {"detailed": [[0, 0], [0, 0]]}, {"detailed": [1, 1], "total": [0, 0]}, [1, 1]
    )
    with pytest.raises(AssertionError, match="sum to their parent"):
        check_solution(problem, np.array([[1, 1], [0, 1]]))
    with pytest.raises(AssertionError, match="negative"):
        check_solution(problem, np.array([[2, 1], [-1, 0]]))


# ---------------------------------------------------------------------------------------------
# Whole runs
# ---------------------------------------------------------------------------------------------


def two_state_population(n: int, seed: int) -> Population:
    """A synthetic population whose tracts are spread over 2 states and up to 4 counties, so that
    most levels have parents with several children and states have invariant totals."""
    population = synthesize(n, seed=seed)

    def recode(frame: pl.DataFrame) -> pl.DataFrame:
        tract = pl.col("block").str.slice(5, 6).cast(pl.Int64) // 100  # tracts are 000100, 000200…
        state = (tract % 2 + 1).cast(pl.String).str.zfill(2)
        county = ((tract // 2) % 2 + 1).cast(pl.String).str.zfill(3)
        return frame.with_columns(block=state + county + pl.col("block").str.slice(5))

    return Population(persons=recode(population.persons), units=recode(population.units))


@pytest.fixture(scope="module")
def states() -> Population:
    population = two_state_population(12_000, seed=8)
    assert population.geography.summary["state"] == 2
    assert population.geography.summary["county"] == 3
    return population


def pl94_topdown(population: Population, seed: int):
    """TopDown's pl94 product at the production budget, in this process."""
    return topdown(population, PRODUCTS["pl94"], PRODUCTION, np.random.default_rng(seed), workers=1)


@pytest.fixture(scope="module")
def pl94_run(states):
    return pl94_topdown(states, 1)


def check_run(run, population: Population) -> None:
    """Every invariant and constraint of docs/topdown.md (*Constraints*) on a run's histograms."""
    product = run.product
    geography = population.geography
    blocks = run.histograms["block"]
    truth = block_histogram(population, product.schema)
    for level in LEVELS:
        h = run.histograms[level]
        assert h.dtype.kind == "i" and (h.data >= 0).all()
        if level != "block":  # every parent equals the sum of its children (hence of its blocks)
            assert (geography.aggregation(level) @ blocks != h).nnz == 0, level
    for level in ("nation", "state"):
        exact = (geography.aggregation(level) @ truth).sum(axis=1)
        assert np.array_equal(run.histograms[level].sum(axis=1), exact), level
    hhgq = product.schema.decode(np.arange(product.schema.size))["unit_type"]
    to_hhgq = sp.csr_matrix((np.ones(len(hhgq)), (np.arange(len(hhgq)), hhgq)))
    persons_by_type = (blocks @ to_hhgq).toarray()
    units = unit_counts(population).toarray()
    assert (persons_by_type[:, 1:] >= units[:, 1:]).all()  # every occupied facility is occupied
    assert (persons_by_type[units == 0] == 0).all()  # nobody where there is no unit of the type
    assert blocks[:, np.flatnonzero(product.structural_zeros())].nnz == 0  # no minors in nursing


def test_pl94_run_meets_every_invariant_and_constraint(pl94_run, states):
    check_run(pl94_run, states)
    # one problem per parent with several children; single children are bypassed
    _, bg_of_block = states.geography.units("block_group")
    assert pl94_run.problems["block"] == (np.bincount(bg_of_block) > 1).sum()
    assert pl94_run.problems["state"] == 1 and pl94_run.problems["tract"] == 0


def test_pl94_measurements_file_has_the_production_noise_scales(pl94_run):
    m = pl94_run.measurements
    assert set(m["level"].unique()) == set(LEVELS)
    block_detailed = m.filter((pl.col("level") == "block") & (pl.col("query") == "detailed"))
    assert block_detailed["variance"][0] == pytest.approx(
        float(PRODUCTION.sigma2("detailed", "block"))
    )
    assert m.filter((pl.col("level") == "nation") & (pl.col("query") == "total")).height == 0


@pytest.mark.parametrize("query", ["total", "votingage", "votingage*hispanic"])
def test_measurements_are_exact_answers_plus_noise_of_the_stated_variance(pl94_run, states, query):
    """Block answers: noisy − true has mean 0 and the discrete Gaussian's variance. The three
    queries share one variance, so a block draws their noise in one call (total first)."""
    m = pl94_run.measurements.filter((pl.col("level") == "block") & (pl.col("query") == query))
    answers = (
        block_histogram(states, schema.PL94) @ PRODUCTS["pl94"].query_matrix(query).T
    ).toarray()
    codes, _ = states.geography.units("block")
    index = {g: i for i, g in enumerate(geoid_strings(codes, "block").to_list())}
    blocks = np.array([index[g] for g in m["geoid"].to_list()])
    errors = m["noisy"].to_numpy() - answers[blocks, m["cell"].to_numpy()]
    n = errors.size
    var = float(accounting.discrete_gaussian_variance(PRODUCTION.sigma2(query, "block")))
    fourth_bound = 3 * var**2 + var  # E[X^4] of a discrete Gaussian is at most this
    assert np.unique(blocks).size == len(codes)  # every block is measured
    assert abs(errors.mean()) < 5 * np.sqrt(var / n)
    assert abs(errors.var() - var) < 5 * np.sqrt(fourth_bound / n)


def test_queries_drawn_in_one_call_get_independent_noise(pl94_run, states):
    """A block's total and its minors' count (drawn in one call) have uncorrelated noise."""
    codes, _ = states.geography.units("block")
    histograms = block_histogram(states, schema.PL94)
    geoids = geoid_strings(codes, "block").to_list()
    errors = []
    for query, cell in (("total", 0), ("votingage", 0)):
        m = pl94_run.measurements.filter(
            (pl.col("level") == "block") & (pl.col("query") == query) & (pl.col("cell") == cell)
        )
        answers = (histograms @ PRODUCTS["pl94"].query_matrix(query)[cell].T).toarray().ravel()
        noisy = dict(zip(m["geoid"].to_list(), m["noisy"].to_list(), strict=True))
        errors.append(np.array([noisy.get(g, np.nan) for g in geoids]) - answers)
    both = ~np.isnan(errors[0]) & ~np.isnan(errors[1])
    n = int(both.sum())
    var = float(accounting.discrete_gaussian_variance(PRODUCTION.sigma2("total", "block")))
    assert n > 0.9 * len(codes)
    covariance = np.mean(errors[0][both] * errors[1][both])
    assert abs(covariance) < 5 * var / np.sqrt(n)  # the same noise twice would give ≈ var


def test_dhc_run_meets_every_invariant_and_constraint():
    population = two_state_population(3_000, seed=5)
    dhc = topdown(population, PRODUCTS["dhc"], DHC_DEFAULT, np.random.default_rng(2), workers=1)
    check_run(dhc, population)


def test_huge_budget_returns_the_truth():
    population = two_state_population(3_000, seed=6)
    strategy = PRODUCTION.with_rho(Fraction(10**8))
    out = topdown(population, PRODUCTS["pl94"], strategy, np.random.default_rng(3), workers=1)
    truth = block_histogram(population, schema.PL94)
    assert (out.histograms["block"] != truth).nnz == 0


def test_one_and_two_workers_and_dask_give_identical_output(monkeypatch):
    from sdclab.protection import topdown_engine as topdown_module

    monkeypatch.setattr(topdown_module, "IN_PROCESS_VARIABLES", 0)  # every level to the workers
    population = two_state_population(4_000, seed=7)
    outs = [
        topdown(population, PRODUCTS["pl94"], PRODUCTION, np.random.default_rng(4), workers=w)
        for w in (1, 2, Executor.parse("dask-local:2"))
    ]
    for other in outs[1:]:
        for level in ("county", "tract", "block"):
            assert (outs[0].histograms[level] != other.histograms[level]).nnz == 0
        assert outs[0].measurements.equals(other.measurements)


def test_county_and_tract_totals_are_as_accurate_as_the_noise(states, pl94_run):
    """docs/topdown.md: the raw total measurement alone has E|error| = σ·√(2/π) ≈ 1.7 (county)
    and 2.0 (tract); post-processed totals, which also borrow from the other queries, must be of
    that order. Over 6 seeds, the mean absolute error must stay below 3σ√(2/π) (and exceed 0:
    noise). Seed 1 is the module's run (``pl94_run``), not made again."""
    geography = states.geography
    errors = {"county": [], "tract": []}
    truth = block_histogram(states, schema.PL94)
    for seed in range(6):
        out = pl94_run if seed == 1 else pl94_topdown(states, seed)
        for level in errors:
            exact = np.asarray((geography.aggregation(level) @ truth).sum(axis=1)).ravel()
            found = np.asarray(out.histograms[level].sum(axis=1)).ravel()
            errors[level].extend(np.abs(found - exact))
    for level, errs in errors.items():
        bound = float(PRODUCTION.sigma2("total", level)) ** 0.5 * np.sqrt(2 / np.pi)
        assert 0 < np.mean(errs) < 3 * bound, (level, np.mean(errs), bound)


def test_tables_the_products_determine():
    pl94, omitted = product_tables(PRODUCTS["pl94"])
    assert {"P1", "P8", "P9", "P10", "P11", "P42"} <= set(pl94)
    assert "P12" not in pl94 and "sex" in omitted["P12"]
    assert "P29" in omitted  # relationship is in neither product
    dhc, _ = product_tables(PRODUCTS["dhc"])
    from sdclab.censuses.us2010.catalog import PERSON_TABLES

    assert set(PERSON_TABLES) <= set(dhc)


def test_product_tables_equal_the_exact_tabulation(states):
    """Tabulating the true product histogram through the derived matrices reproduces the
    catalogue's own tables: the matrices are right, not just shaped right."""
    from sdclab.core.tables.tabulate import tabulate

    exact = tabulate(states)
    for name in ("pl94", "dhc"):
        product = PRODUCTS[name]
        histogram = block_histogram(states, product.schema)
        for table, matrix in product_tables(product)[0].items():
            level = exact[table].table.levels[-1]
            at_level = (
                histogram if level == "block" else states.geography.aggregation(level) @ histogram
            )
            assert ((at_level @ matrix.T) != exact[table].counts[level][1]).nnz == 0, table


def test_release_through_the_registry(states, tmp_path):
    from sdclab.pipeline.api import read_release
    from sdclab.release import write_release

    release = run("topdown", states, {"product": "pl94"}, seed=11)
    assert release.card.guarantee.loss.rho == PRODUCTION.total_rho()
    assert "17.14" in release.card.render()
    mdf = release.artifacts["mdf"]
    assert mdf.height == states.n_persons and release.person_microdata is mdf
    assert sorted(release.artifacts) == ["mdf", "measurements"]
    assert set(mdf.columns) == {
        "person_id",
        "block",
        "unit_type",
        "votingage",
        "hispanic",
        "race",
    }
    write_release(release, tmp_path / "rel")
    back = read_release(tmp_path / "rel")
    assert back.artifacts["mdf"].equals(mdf)
    assert back.artifacts["measurements"].equals(release.artifacts["measurements"])
    assert (tmp_path / "rel" / "artifacts" / "mdf.parquet").is_file()
    assert not (tmp_path / "rel" / "microdata").exists()
    p1 = back.table("P1").frame("state").sort("geoid")
    exact = states.persons.group_by(pl.col("block").str.slice(0, 2)).len().sort("block")
    assert p1["count"].to_list() == exact["len"].to_list()  # state totals are invariant


def test_dhc_card_converts_to_the_quoted_epsilon():
    rho = float(DHC_DEFAULT.total_rho())
    assert rho == pytest.approx(15.30)
    assert accounting.epsilon_standard(rho, 1e-10) == pytest.approx(52.83, abs=0.01)


def test_strategy_file(tmp_path):
    from sdclab.core.errors import InputError
    from sdclab.protection.topdown_strategy import load_strategy

    lines = ["rho = '1/2'", "[level_shares]"]
    lines += [f"{level} = '1/6'" for level in LEVELS]
    for level in LEVELS:
        lines += [f"[query_shares.{level}]", "total = 0.5", "detailed = 0.5"]
    good = tmp_path / "good.toml"
    good.write_text("\n".join(lines))
    strategy = load_strategy(good, PRODUCTS["dhc"])
    assert strategy.total_rho() == Fraction(1, 2)
    assert strategy.sigma2("detailed", "block") == 24
    bad = tmp_path / "bad.toml"
    bad.write_text("\n".join(lines).replace("detailed = 0.5", "sex = 0.5"))
    with pytest.raises(InputError, match="bad.toml: not a valid dhc strategy"):
        load_strategy(bad, PRODUCTS["dhc"])
    assert isinstance(PRODUCTION, Strategy)


def test_topdown_resumes_from_its_checkpoint(tmp_path, monkeypatch):
    import sdclab.protection.topdown_engine as td
    from sdclab.core.execution import TaskFailed

    population = two_state_population(3_000, seed=9)
    args = (population, PRODUCTS["pl94"], PRODUCTION)
    whole = topdown(*args, np.random.default_rng(5), workers=1)
    real = td.solve_parent
    lost = {"block": 0}

    def fail_one_block_parent(task):
        if task.head_level == "block" and lost["block"] == 0:
            lost["block"] = task.children[0].members[0][1]  # the first block-level parent
        if task.head_level == "block" and task.children[0].members[0][1] == lost["block"]:
            raise RuntimeError("worker died")
        return real(task)

    monkeypatch.setattr(td, "solve_parent", fail_one_block_parent)
    with pytest.raises(TaskFailed, match="worker died"):
        topdown(*args, np.random.default_rng(5), workers=1, checkpoint=tmp_path)
    levels_done = sorted(p.name for p in tmp_path.iterdir())
    assert "block_group" in levels_done
    solved = []
    monkeypatch.setattr(td, "solve_parent", lambda t: solved.append(t.head_level) or real(t))
    again = topdown(*args, np.random.default_rng(5), workers=1, checkpoint=tmp_path)
    assert solved == ["block"]  # everything else came from the checkpoint
    for level in LEVELS:
        assert (again.histograms[level] != whole.histograms[level]).nnz == 0
    assert again.measurements.equals(whole.measurements)
