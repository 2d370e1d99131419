"""TopDown's engine: measure every geounit, then post-process from the root down.

1. Measure: every geounit's histogram answers the strategy's queries with exact discrete Gaussian
   noise, σ² = 1/ρ_{q,L} (bounded neighbours).
2. Post-process top-down: the root (the nation) is solved alone under its invariant total; then,
   level by level, each parent's children are solved jointly — a multi-pass weighted L2 step
   (:mod:`sdclab.core.optimize.least_squares`) and a multi-pass L1 rounder
   (:mod:`sdclab.core.optimize.rounding`) — so that they are non-negative integers summing exactly
   to the parent and satisfying the invariants (state totals) and constraints (hhgq bounds from the
   block facility counts, no minors in nursing facilities). Every solution is checked before it is
   used.
The run returns every level's histograms and the noisy measurements; the output made of them (the
MDF, the tables, the release) is :mod:`sdclab.protection.topdown`'s.

Bypass: a geounit with a single child has the same persons as that child, so the child copies its
histogram; the chain of single children is solved once, as one child of the parent above, with the
measurements of every unit of the chain combined by inverse-variance weighting (equivalent to
production's merged budget shares).

Only cells where the parent is positive get child variables, and a geounit's noisy answers are drawn
only for the query cells that touch its parent's support: the others cannot move the solution (their
residual is constant), so drawing them would cost time and change nothing. Each geounit draws from
its own random stream (derived from the run's seed, its level and its geocode), so the output does
not depend on how problems are scheduled or on the number of workers.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl
import scipy.sparse as sp

from sdclab.censuses.us2010.geography import LEVELS
from sdclab.censuses.us2010.population import Population
from sdclab.core import accounting
from sdclab.core.arrays import IntArray
from sdclab.core.execution import Checkpoint, Executor, run_tasks, worker_pool
from sdclab.core.geography import Geography
from sdclab.core.noise import discrete_gaussian
from sdclab.core.optimize.least_squares import solve_l2
from sdclab.core.optimize.parent_problem import ParentProblem, check_solution
from sdclab.core.optimize.rounding import round_l1
from sdclab.core.tables.tabulate import block_histogram
from sdclab.protection.topdown_strategy import PRODUCTS, Product, Strategy

UNIT_CAP = 99_999
"""Most persons one housing unit or facility may hold (production's cap)."""
MINIMUM_OCCUPANCY = np.array([0, 1, 1, 1, 1, 1, 1, 1])
"""Housing units may be vacant; every occupied group-quarters facility holds at least one person."""
N_HHGQ = 8


# ---------------------------------------------------------------------------------------------
# The geography tree with bypass
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tree:
    """For each level below the nation: the parent (index at the level above) of every geounit."""

    geography: Geography
    parent: dict[str, IntArray]

    @classmethod
    def of(cls, geography: Geography) -> Tree:
        parent = {}
        levels = geography.levels
        for upper, lower in zip(levels[:-1], levels[1:], strict=True):
            _, lower_of_block = geography.units(lower)
            _, upper_of_block = geography.units(upper)
            first_block = np.unique(lower_of_block, return_index=True)[1]
            parent[lower] = upper_of_block[first_block]
        return cls(geography, parent)

    def children(self, level: str) -> list[IntArray]:
        """The children (indices at the level below) of every geounit of ``level``."""
        lower = self.geography.below(level)
        parent = self.parent[lower]
        order = np.argsort(parent, kind="stable")
        bounds = np.searchsorted(parent[order], np.arange(self.geography.n_units(level) + 1))
        return [order[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]

    def chain(self, level: str, unit: int, children: dict[str, list[IntArray]]) -> list[Member]:
        """The unit and its descendants through single-child links (the bypassed chain)."""
        levels = self.geography.levels
        members = [Member(levels.index(level), unit)]
        while level != levels[-1] and len(children[level][unit]) == 1:
            unit = int(children[level][unit][0])
            level = levels[levels.index(level) + 1]
            members.append(Member(levels.index(level), unit))
        return members


@dataclass(frozen=True)
class Member:
    level: int
    unit: int


# ---------------------------------------------------------------------------------------------
# One parent's problem (runs in a worker)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChildSpec:
    """What a worker needs to know of one child (a bypassed chain)."""

    members: tuple[tuple[int, int], ...]
    """(level index, geocode) of the child and its single-child descendants."""
    cells: IntArray
    counts: IntArray
    """The child's true histogram (sparse: cell indices and counts; confidential)."""
    units: IntArray
    """Housing units and occupied facilities of each of the 8 types (invariant)."""
    total: int
    """Invariant total population, -1 below the state level."""


@dataclass(frozen=True)
class Task:
    product: str | Product
    """A US product by name (workers build their own), a declared census's product itself."""
    strategy: Strategy
    entropy: int = field(repr=False)  # never in a message or a log
    head_level: str
    support: IntArray
    parent: IntArray | None
    children: tuple[ChildSpec, ...]
    keep_measurements: bool


@dataclass(frozen=True)
class Outcome:
    histograms: IntArray
    """children × support cells."""
    measurements: dict[str, IntArray] | None
    seconds: float


def geounit_stream(entropy: int, level: int, code: int) -> np.random.Generator:
    """The random stream of one geounit: a function of the run's entropy, its level and geocode."""
    return np.random.Generator(
        np.random.PCG64(np.random.SeedSequence(entropy, spawn_key=(level, int(code))))
    )


IN_PROCESS_VARIABLES = 100_000
"""A level whose problems have fewer (child, cell) variables than this in all is solved in this
process: less work than starting a pool of workers (each imports sdclab) saves."""
MAX_WEIGHT = 1e6
"""Weights are capped here: a variance below 10⁻⁶ (σ² < 0.035) means the noisy answer is exact
with probability above 1 − 10⁻⁶, and larger weights only spoil the solver's numerics."""


@cache
def _weight(sigma2: Fraction) -> float:
    """1 / the exact variance of the discrete Gaussian, capped at MAX_WEIGHT."""
    return 1.0 / max(accounting.discrete_gaussian_variance(sigma2), 1.0 / MAX_WEIGHT)


def solve_parent(task: Task) -> Outcome:
    """Measure the children, then L2-solve, round and check their histograms on the support."""
    start = time.perf_counter()
    product = task_product(task)
    n = len(task.support)
    totals = np.array([c.total for c in task.children])
    if product.housing_types:
        zero = product.structural_zeros()[task.support]
        hhgq_of_cell = product.schema.decode(task.support)["unit_type"]
        units = np.array([c.units for c in task.children])
        allowed = ~zero[None, :] & (units[:, hhgq_of_cell] > 0)
        lower, upper = MINIMUM_OCCUPANCY[None, :] * units, UNIT_CAP * units
    else:  # one kind of record: its bound is what the child could hold, never binding
        hhgq_of_cell = np.zeros(n, dtype=np.int64)
        allowed = np.ones((len(task.children), n), dtype=bool)
        cap = totals if task.parent is None else np.full(len(totals), task.parent.sum())
        lower, upper = np.zeros((len(totals), 1), np.int64), cap[:, None].astype(np.int64)
    hhgq = sp.csr_matrix(
        (np.ones(n), (hhgq_of_cell, np.arange(n))), shape=(lower.shape[1], n), dtype=np.int64
    )
    names = list(product.query_names)
    full = {q: product.query_matrix(q) for q in names}
    restricted = {}
    rows_of = {}
    for q in names:
        columns = full[q][:, task.support]
        rows = np.flatnonzero(np.diff(columns.indptr) > 0)
        rows_of[q], restricted[q] = rows, columns[rows]
    targets, weights, records = _measure(task, full, rows_of)
    measured = {q for q in names if (weights.get(q, np.zeros(1)) > 0).any()}
    passes = product.l2_passes(task.head_level, [q for q in names if q in measured])
    problem = ParentProblem(
        allowed=allowed,
        parent=task.parent,
        totals=totals,
        hhgq=hhgq,
        hhgq_lower=lower,
        hhgq_upper=upper,
        queries=restricted,
        targets=targets,
        weights=weights,
        l2_passes=tuple(tuple(q for q in p if q in measured) for p in passes),
        rounder_passes=product.rounder_passes(task.head_level),
    )
    histograms = round_l1(problem, solve_l2(problem))
    check_solution(problem, histograms)
    return Outcome(histograms, records, time.perf_counter() - start)


def task_product(task: Task) -> Product:
    """The product a task measures."""
    return PRODUCTS[task.product] if isinstance(task.product, str) else task.product


def _measure(
    task: Task, full: dict[str, sp.csr_matrix], rows_of: dict[str, IntArray]
) -> tuple[dict[str, npt.NDArray[np.float64]], dict[str, npt.NDArray[np.float64]], Any]:
    """Noisy answers of every chain member, combined per child by inverse-variance weighting."""
    size = next(iter(full.values())).shape[1]
    n_children = len(task.children)
    sums = {q: np.zeros((n_children, len(rows_of[q]))) for q in full}
    weights = {q: np.zeros(n_children) for q in full}
    records: list[tuple[int, int, int, IntArray, IntArray, float]] = []
    position = {q: i for i, q in enumerate(full)}  # a query's index in the records
    levels = task.strategy.levels
    groups_at = {level: _queries_by_variance(task.strategy, level) for level in levels}
    truth = sp.csr_matrix(
        (
            np.concatenate([c.counts for c in task.children]),
            (
                np.repeat(np.arange(n_children), [len(c.cells) for c in task.children]),
                np.concatenate([c.cells for c in task.children]),
            ),
        ),
        shape=(n_children, size),
    )
    exact_of = {q: (full[q][rows_of[q]] @ truth.T).T.toarray() for q in full}
    for c, child in enumerate(task.children):
        for level_index, code in child.members:
            stream = geounit_stream(task.entropy, level_index, code)
            for sigma2, group in groups_at[levels[level_index]]:
                sizes = [len(rows_of[q]) for q in group]
                draws = discrete_gaussian(sigma2, sum(sizes), stream)
                w, variance = _weight(sigma2), float(sigma2)
                for q, noise in zip(group, np.split(draws, np.cumsum(sizes)[:-1]), strict=True):
                    noisy = exact_of[q][c] + noise
                    sums[q][c] += w * noisy
                    weights[q][c] += w
                    if task.keep_measurements:
                        noted = (level_index, code, position[q], rows_of[q], noisy, variance)
                        records.append(noted)
    targets = {
        q: np.divide(
            sums[q], weights[q][:, None], out=np.zeros_like(sums[q]), where=weights[q][:, None] > 0
        )
        for q in full
    }
    return targets, weights, _stack_records(records) if task.keep_measurements else None


def _queries_by_variance(strategy: Strategy, level: str) -> list[tuple[Fraction, list[str]]]:
    """The queries measured at ``level`` grouped by their noise variance, in the strategy's order.

    A geounit draws the noise of each group in one call: the draws are i.i.d. either way, and one
    call per group instead of one per query saves the sampler's fixed cost (≈ 0.3 ms a call, most
    of a block's measurement time)."""
    groups: dict[Fraction, list[str]] = {}
    for q in strategy.measured(level):
        groups.setdefault(strategy.sigma2(q, level), []).append(q)
    return list(groups.items())


def block_query_rows(
    product: Product, strategy: Strategy, support: IntArray
) -> dict[str, IntArray]:
    """The rows of each query measured at the block level that touch the ``support`` cells."""
    full = {q: product.query_matrix(q) for q in strategy.measured("block")}
    return {q: np.flatnonzero(np.diff(m[:, support].tocsr().indptr) > 0) for q, m in full.items()}


def measure_blocks(
    product: Product,
    strategy: Strategy,
    entropy: int,
    rows_of: dict[str, IntArray],
    cells: IntArray,
    first_code: int,
) -> npt.NDArray[np.float64]:
    """The block-level noisy measurements of blocks each holding one person, in cell ``cells[i]``
    of block ``first_code + i``: blocks × (the ``rows_of`` each measured query, in order).

    Goes through the same measurement code as a run (streams keyed by the block's code), so that a
    privacy audit observes exactly what TopDown draws."""
    block = LEVELS.index("block")
    children = tuple(
        ChildSpec(
            ((block, first_code + i),),
            np.array([c]),
            np.ones(1, np.int64),
            np.zeros(N_HHGQ, np.int64),
            -1,
        )
        for i, c in enumerate(np.asarray(cells).tolist())
    )
    support = np.unique(np.asarray(cells))
    task = Task(product.name, strategy, entropy, "block", support, None, children, False)
    full = {q: product.query_matrix(q) for q in rows_of}
    targets, _, _ = _measure(task, full, rows_of)
    return np.hstack([targets[q] for q in full])


def _stack_records(
    records: list[tuple[int, int, int, IntArray, IntArray, float]],
) -> dict[str, Any]:
    lengths = [len(r[3]) for r in records]
    return {
        "level": np.repeat([r[0] for r in records], lengths).astype(np.int8),
        "code": np.repeat([r[1] for r in records], lengths).astype(np.int64),
        "query": np.repeat([r[2] for r in records], lengths).astype(np.int16),
        "cell": np.concatenate([r[3] for r in records] or [np.zeros(0, np.int64)]).astype(np.int32),
        "noisy": np.concatenate([r[4] for r in records] or [np.zeros(0, np.int64)]).astype(
            np.int64
        ),
        "variance": np.repeat([r[5] for r in records], lengths),
    }


# ---------------------------------------------------------------------------------------------
# The run: root, then level by level
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TopDownRun:
    """The post-processed histograms of every level, with what the run measured and cost."""

    product: Product
    histograms: dict[str, sp.csr_matrix]
    """geounits × cells integer histograms at every level (blocks last)."""
    measurements: pl.DataFrame | None
    seconds: dict[str, float]
    """Wall time of the problems whose children are at each level (the root under "nation")."""
    problems: dict[str, int]


def unit_counts(population: Population, product: Product | None = None) -> sp.csr_matrix:
    """blocks × 8: housing units (occupied or vacant) and occupied facilities of each GQ type;
    blocks × 0 for a product without housing types."""
    if product is not None and not product.housing_types:
        return sp.csr_matrix((population.geography.n_blocks, 0), dtype=np.int64)
    units = population.units
    unit_type = units["unit_type"].to_numpy().astype(np.int64)
    counted = (unit_type == 0) | units["occupied"].to_numpy()
    return sp.csr_matrix(
        (counted.astype(np.int64), (population.unit_block_index, unit_type)),
        shape=(population.geography.n_blocks, N_HHGQ),
    )


def _level_truth(
    population: Population, product: Product
) -> tuple[dict[str, sp.csr_matrix], dict[str, IntArray]]:
    """Every level's true histograms (geounits × cells) and unit counts (geounits × 8)."""
    geography = population.geography
    levels = geography.levels
    truth_blocks = block_histogram(population, product.schema)
    units_blocks = unit_counts(population, product)
    truth, units = {}, {}
    for level in levels:
        agg = None if level == levels[-1] else geography.aggregation(level)
        truth[level] = truth_blocks if agg is None else (agg @ truth_blocks).tocsr()
        units[level] = (units_blocks if agg is None else agg @ units_blocks).toarray()
    return truth, units


def _root_support(product: Product, top_units: IntArray) -> IntArray:
    """The cells the root solve gets variables for: not structural zeros, and (with housing
    types) of a type the first top-level unit has units of."""
    root_support = np.flatnonzero(~product.structural_zeros())
    if product.housing_types:
        hhgq_of_cell = product.schema.decode(np.arange(product.schema.size))["unit_type"]
        root_support = root_support[top_units[0][hhgq_of_cell[root_support]] > 0]
    return root_support


@dataclass(frozen=True)
class _RunInputs:
    """What every problem of one run is made from: the tree with its bypassed chains, every
    level's truth, the noise's entropy and where the run keeps its checkpoints."""

    product: Product
    strategy: Strategy
    entropy: int = field(repr=False)  # never in a message or a log
    keep_measurements: bool
    levels: tuple[str, ...]
    tree: Tree
    truth: dict[str, sp.csr_matrix]
    """Every level's true histograms (geounits × cells)."""
    units: dict[str, IntArray]
    """Every level's unit counts (geounits × 8)."""
    children: dict[str, list[IntArray]]
    codes: dict[str, npt.NDArray[np.int64]]
    checkpoint: Path | None
    identity: str | None
    """What the outcomes depend on (:func:`run_identity`), with ``checkpoint`` only."""


def _run_inputs(
    population: Population,
    product: Product,
    strategy: Strategy,
    rng: np.random.Generator,
    keep_measurements: bool,
    checkpoint: Path | None,
) -> _RunInputs:
    """The inputs of a run; its only draw from ``rng`` is the entropy of every geounit's stream."""
    geography = population.geography
    levels = geography.levels
    tree = Tree.of(geography)
    truth, units = _level_truth(population, product)
    children = {level: tree.children(level) for level in levels[:-1]}
    entropy = int(rng.integers(2**62)) << 64 | int(rng.integers(2**62))
    return _RunInputs(
        product=product,
        strategy=strategy,
        entropy=entropy,
        keep_measurements=keep_measurements,
        levels=levels,
        tree=tree,
        truth=truth,
        units=units,
        children=children,
        codes={level: geography.codes(level) for level in levels},
        checkpoint=checkpoint,
        identity=(
            None if checkpoint is None else run_identity(population, product, strategy, entropy)
        ),
    )


def _child_spec(run: _RunInputs, level: str, unit: int) -> ChildSpec:
    """What a worker needs to know of ``unit`` (at ``level``) and its bypassed chain."""
    members = run.tree.chain(level, unit, run.children)
    row = run.truth[level][unit]
    return ChildSpec(
        members=tuple((m.level, int(run.codes[run.levels[m.level]][m.unit])) for m in members),
        cells=row.indices.astype(np.int64),
        counts=row.data.astype(np.int64),
        units=run.units[level][unit].astype(np.int64),
        total=int(row.sum()) if level in run.product.invariant_levels else -1,
    )


def _task(
    run: _RunInputs, head_level: str, support: IntArray, parent: IntArray | None, kids: list[int]
) -> Task:
    """The problem of the children ``kids`` (at ``head_level``) of one parent, on ``support``."""
    product = run.product
    return Task(
        product=product.name if product.census is None else product,
        strategy=run.strategy,
        entropy=run.entropy,
        head_level=head_level,
        support=support,
        parent=parent,
        children=tuple(_child_spec(run, head_level, k) for k in kids),
        keep_measurements=run.keep_measurements,
    )


def _level_checkpoint(run: _RunInputs, level: str) -> Checkpoint | None:
    """The level's checkpoint, keyed by everything the level's outcomes depend on."""
    if run.checkpoint is None or run.identity is None:  # (both or neither)
        return None
    key = hashlib.sha256(f"{run.identity}|{run.keep_measurements}|{level}".encode()).hexdigest()
    return Checkpoint(Path(run.checkpoint) / level, key, Outcome)


_Found = dict[str, dict[int, tuple[IntArray, IntArray]]]
"""The histograms found so far: by level and geounit, its nonzero cells and their counts."""


def _keep(
    run: _RunInputs, found: _Found, level: str, unit: int, support: IntArray, counts: IntArray
) -> None:
    """Record a solved child's histogram for it and every unit of its bypassed chain."""
    nonzero = counts > 0
    for m in run.tree.chain(level, unit, run.children):
        found[run.levels[m.level]][m.unit] = (support[nonzero], counts[nonzero])


def _solve_roots(run: _RunInputs, found: _Found, records: list[dict[str, Any]]) -> int:
    """Solve the top level's units (the US nation; a declared census's top units), each alone
    with the whole histogram; the number of problems."""
    top = run.levels[0]
    roots = range(len(run.codes[top]))
    root_support = _root_support(run.product, run.units[top])
    outcomes = run_tasks(
        solve_parent,
        [_task(run, top, root_support, None, [u]) for u in roots],
        1,
        f"TopDown {top}: the root solve (the whole histogram at once)",
        None,
        [f"{top} {run.codes[top][u]}" for u in roots] if len(roots) > 1 else [top],
        _level_checkpoint(run, top),
    )
    for u, root in zip(roots, outcomes, strict=True):
        _keep(run, found, top, u, root_support, root.histograms[0])
        _collect(records, root)
    return len(roots)


def _solve_level(
    run: _RunInputs,
    found: _Found,
    records: list[dict[str, Any]],
    level: str,
    below: str,
    workers: Executor | int | None,
) -> int:
    """Solve the children (at ``below``) of every unit of ``level`` that has more than one, one
    problem per parent, under the parent's histogram; the number of problems."""
    children = run.children[level]
    parents = [u for u, kids in enumerate(children) if len(kids) > 1]
    tasks = []
    for u in parents:
        support, counts = found[level][u]
        tasks.append(_task(run, below, support, counts, children[u].tolist()))
    sizes = [len(t.support) * len(t.children) for t in tasks]
    outcomes = run_tasks(
        solve_parent,
        tasks,
        1 if sum(sizes) < IN_PROCESS_VARIABLES else workers,
        label=f"TopDown {below}",
        sizes=sizes,
        names=[f"{level} {run.codes[level][u]}" for u in parents],
        checkpoint=_level_checkpoint(run, below),
    )
    for t, u, outcome in zip(tasks, parents, outcomes, strict=True):
        for kid, histogram in zip(children[u], outcome.histograms, strict=True):
            _keep(run, found, below, int(kid), t.support, histogram)
        _collect(records, outcome)
    return len(tasks)


def topdown(
    population: Population,
    product: Product,
    strategy: Strategy,
    rng: np.random.Generator,
    *,
    workers: Executor | int | None = None,
    keep_measurements: bool = True,
    checkpoint: Path | None = None,
) -> TopDownRun:
    """Run TopDown on ``population``; the output is fully determined by ``rng``'s state."""
    run = _run_inputs(population, product, strategy, rng, keep_measurements, checkpoint)
    levels = run.levels
    found: _Found = {level: {} for level in levels}
    records: list[dict[str, Any]] = []
    seconds: dict[str, float] = {}
    problems: dict[str, int] = {}
    start = time.perf_counter()
    with worker_pool(workers):  # one pool for every level that needs one
        problems[levels[0]] = _solve_roots(run, found, records)
        seconds[levels[0]] = time.perf_counter() - start
        for level, below in zip(levels[:-1], levels[1:], strict=True):
            start = time.perf_counter()
            problems[below] = _solve_level(run, found, records, level, below, workers)
            seconds[below] = time.perf_counter() - start
    histograms = {level: _matrix(found[level], len(run.codes[level]), product) for level in levels}
    measurements = (
        _measurement_frame(records, product, population.geography) if keep_measurements else None
    )
    return TopDownRun(product, histograms, measurements, seconds, problems)


def run_identity(population: Population, product: Product, strategy: Strategy, entropy: int) -> str:
    """A digest of what a run's outcomes depend on: input, product, strategy and noise entropy.

    Checkpoints are keyed by it, so a checkpoint of another population, strategy or seed is
    refused; being a SHA-256, it reveals neither the entropy nor the input."""
    parts = [
        population.digest,
        product.name,
        str(strategy.rho),
        {level: str(share) for level, share in strategy.level_shares.items()},
        {level: {q: str(s) for q, s in qs.items()} for level, qs in strategy.query_shares.items()},
        str(entropy),
    ]
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def _collect(records: list[dict[str, Any]], outcome: Outcome) -> None:
    if outcome.measurements is not None:
        records.append(outcome.measurements)


def _matrix(
    rows: dict[int, tuple[IntArray, IntArray]], n_units: int, product: Product
) -> sp.csr_matrix:
    if len(rows) != n_units:
        raise AssertionError(f"TopDown left {n_units - len(rows)} geounits without a histogram")
    lengths = [len(rows[u][0]) for u in range(n_units)]
    cells = np.concatenate([rows[u][0] for u in range(n_units)] or [np.zeros(0, np.int64)])
    counts = np.concatenate([rows[u][1] for u in range(n_units)] or [np.zeros(0, np.int64)])
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    return sp.csr_matrix((counts, cells, indptr), shape=(n_units, product.schema.size))


def _measurement_frame(
    records: list[dict[str, Any]], product: Product, geography: Geography
) -> pl.DataFrame:
    """One row per noisy answer: level, geoid, query, query cell, noisy value, noise variance."""
    frame = pl.concat([pl.DataFrame(r) for r in records]) if records else pl.DataFrame()
    names = list(product.query_names)
    parts = []
    for index, level in enumerate(geography.levels):
        part = frame.filter(pl.col("level") == index)
        if part.height == 0:
            continue
        # strings are made once per geounit and query, then gathered (not once per answer)
        unit_codes, unit_of_row = np.unique(part["code"].to_numpy(), return_inverse=True)
        parts.append(
            part.with_columns(
                level=pl.lit(level),
                geoid=geography.geoid_strings(unit_codes, level).gather(unit_of_row),
                query=pl.Series(names).gather(part["query"].to_numpy()),
            ).select("level", "geoid", "query", "cell", "noisy", "variance")
        )
    return pl.concat(parts) if parts else pl.DataFrame()
