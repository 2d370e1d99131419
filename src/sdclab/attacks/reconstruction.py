"""The reconstruction attack: published person tables → block-level microdata.

As the Census Bureau did with the 2010 tables (Abowd et al., "A Simulated Reconstruction and
Reidentification Attack on the 2010 U.S. Census"; docs/reconstruction.md), but
with a far smaller integer program: one per tract, with a non-negative integer variable
x[block, sex, age, race, hisp] per *count* of records (not per person slot), and only for the cells
that no published zero rules out. Every published cell of a block table (at its block) and of a
tract table (summed over the tract's blocks) is one linear constraint — the rows of the catalogue's
query matrices.

* Consistent releases (exact, swapped, TopDown): equality constraints, a pure feasibility problem.
* Inconsistent releases (noise, cell key): if the equalities are infeasible, the program minimises
  the total absolute deviation from the published counts (a slack pair per cell). Suppressed cells
  (null counts) give no constraint.

The program's columns are not single person-domain cells but the classes of cells that the
published tables cannot tell apart (:class:`Resolution`): a PL 94-171 release, which publishes no
sex and only the voting-age split of age, cannot say whether a person is a man of 40 or a woman of
70. The reconstruction writes what the tables determine and leaves the rest null (sex; age, with
the bounds the tables do give).

The attack reads only the release. Tracts are independent and run in parallel; each gets its own
solver seed, so results do not depend on the number of workers.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import scipy.sparse as sp

from sdclab.attacks.knowledge import (
    CellBounds,
    cell_bounds,
    is_measured,
    measured_queries,
    measured_query,
    measurement_bounds,
)
from sdclab.attacks.noise_aware import (
    MINIMUM_SOLVE,
    ColumnSpace,
    Rows,
    column_minimum,
    relaxed_draws,
    solve_priced,
)
from sdclab.attacks.reconstruction_files import (
    TIME_LIMITED,
    TRACT_COLUMNS,
    WRITTEN_AS,
    Reconstruction,
)
from sdclab.censuses import is_us2010
from sdclab.censuses.us2010.catalog import CATALOG, PERSON_TABLES
from sdclab.core.arrays import BoolArray, FloatArray, IntArray
from sdclab.core.census.model import Census
from sdclab.core.digest import frames_digest
from sdclab.core.domain import Attribute
from sdclab.core.errors import InputError
from sdclab.core.execution import Checkpoint, Executor, run_tasks
from sdclab.core.optimize.highs import (
    INF,
    TIME_LIMIT_STATUS,
    Limits,
    single_threaded_highs,
    solve_mip,
)
from sdclab.release import Release

BLOCK_TABLES = tuple(n for n in PERSON_TABLES if CATALOG[n].bottom == "block")
TRACT_TABLES = tuple(n for n in PERSON_TABLES if CATALOG[n].bottom == "tract")
"""The US 2010 census's person tables of the attack, published down to blocks and to tracts
(:func:`attack_tables` finds them for any census)."""
KNOWLEDGE = ("naive", "tables", "published")
"""What the attack knows: ``naive`` takes the tables at face value (every count exact, every 0 a
true 0); ``tables`` models the noise the release states for its tables
(:mod:`sdclab.attacks.knowledge`); ``published`` uses TopDown's noisy measurements as well, where
the release carries them (for every other release it is ``tables``)."""
DEVIATION_GAP = 0.01
"""Least-deviation programs stop within 1% of the optimum (their LP bound is tight; the last
percent costs far more time than it changes the reconstruction)."""
TIME_LIMIT = 300.0
"""Seconds one tract's program may take before HiGHS returns its best solution."""
NODE_LIMIT = 10_000
"""Branch-and-bound nodes per integer program in an experiment's reconstructions: a limit of
work, so that a rerun with the same seed stops at the same point (a time limit does not)."""


def _census(census: Census | None) -> Census:
    """``census``, or the US 2010 census by default."""
    if census is not None:
        return census
    from sdclab.censuses import us2010

    return us2010.census()


def attack_tables(census: Census) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The census's person tables over the reconstruction's attributes published at its level,
    and those published at the level of its programs but not at its own (in catalogue order)."""
    settings = census.reconstruction
    over = set(settings.attributes)
    usable = [
        t for t in census.tables.values() if t.records == "persons" and set(t.crossed) <= over
    ]
    return (
        tuple(t.name for t in usable if settings.level in t.levels),
        tuple(
            t.name for t in usable if census.within in t.levels and settings.level not in t.levels
        ),
    )


@lru_cache(maxsize=8)
def stacked_query(names: tuple[str, ...], census: Census | None = None) -> sp.csr_matrix:
    """The query matrices of ``names`` (tables of the census, default the US 2010 one, or
    measured TopDown queries, see :func:`.knowledge.measured_query`) over the reconstruction's
    domain, one above the other (rows = all their cells)."""
    domain = _census(census).reconstruction_domain
    if not names:
        return sp.csr_matrix((0, domain.size), dtype=np.int64)
    return sp.vstack([query_of(n, census).astype(np.int64) for n in names], format="csr")


def query_of(name: str, census: Census | None = None) -> sp.csr_matrix:
    """A table's query over the reconstruction's domain, or a measured query's projection onto
    the person domain."""
    if is_measured(name):
        return measured_query(name, census).query
    chosen = _census(census)
    return chosen.table(name).query_on(chosen.reconstruction_domain)


@dataclass(frozen=True)
class Resolution:
    """What a set of person tables can tell apart.

    Two person-domain cells are indistinguishable when every published cell counts both or neither
    (identical columns of the stacked query): moving a person from one to the other changes no
    count of these tables at any geounit. The classes of indistinguishable cells are the finest
    records a reconstruction can claim. An attribute is *determined* in a class when all its cells
    share its value; age is determined when they share the agebin (the 38 bins the attack links
    on), and the program's single year is then the class's first, as the 2010 attack picked any
    year within a published bin. The youngest and oldest age of a class bound the age either way.
    """

    class_of: IntArray
    """Class of every person-domain cell."""
    representative: IntArray
    """First person-domain cell of every class (classes are numbered in that order)."""
    lowest: dict[str, IntArray]
    """Smallest code of each attribute in each class."""
    highest: dict[str, IntArray]
    category: dict[str, IntArray] = field(default_factory=dict)
    """For an attribute the attack needs only to a breakdown (the US age: its 38 bins), the
    category of each code, by position (:attr:`Reconstruction.resolved`)."""
    low: dict[str, int] = field(default_factory=dict)
    """The first code of each attribute (position 0 of :attr:`category`)."""
    level: str = "block"
    """The level of the reconstructed geounits (the first known attribute)."""

    def determined(self, attribute: str) -> BoolArray:
        """Per class: whether the tables fix ``attribute`` (to one category of its breakdown,
        where the attack needs it only to that)."""
        low, high = self.lowest[attribute], self.highest[attribute]
        if attribute in self.category:
            of = self.category[attribute]
            first = self.low[attribute]
            return of[low - first] == of[high - first]
        return low == high

    def summary(self) -> dict[str, Any]:
        """Known, unknown and partially known attributes; the bounds of an attribute needed
        only to a breakdown (age) where it is unknown."""
        determined = {a: self.determined(a) for a in self.lowest}
        summary: dict[str, Any] = {
            "known_attributes": [self.level, *(a for a, d in determined.items() if d.all())],
            "unknown_attributes": [a for a, d in determined.items() if not d.any()],
            "partially_known_attributes": [
                a for a, d in determined.items() if d.any() and not d.all()
            ],
        }
        for a in self.category:
            vague = ~determined[a]
            bounds = np.unique(np.c_[self.lowest[a][vague], self.highest[a][vague]], axis=0)
            summary[f"{a}_bounds_where_unknown"] = bounds.tolist()
        return summary


@lru_cache(maxsize=8)
def resolution(names: tuple[str, ...], census: Census | None = None) -> Resolution:
    """The classes of the reconstruction domain's cells that the tables ``names`` cannot tell
    apart."""
    chosen = _census(census)
    domain = chosen.reconstruction_domain
    query = stacked_query(names, census)
    # two random integer projections of every column, mixed into one 64-bit key; equal columns
    # have equal keys, and a collision of distinct ones (probability about cells² / 2⁶⁵) is
    # caught by the exact check below
    weights = np.random.default_rng(0).integers(1, 2**31, size=(query.shape[0], 2))
    projections = np.asarray(query.T @ weights).astype(np.uint64)
    # (the two projections mixed into one 64-bit key: a one-dimensional unique sorts far faster)
    signature = projections[:, 0] * np.uint64(0x9E3779B97F4A7C15) + projections[:, 1]
    _, first, inverse = np.unique(signature, return_index=True, return_inverse=True)
    order = np.argsort(first)
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    class_of = rank[inverse.reshape(-1)]
    representative = first[order]
    if (query - query.tocsc()[:, representative[class_of]]).nnz:
        raise AssertionError("distinct columns of the stacked query share a signature")
    codes = domain.decode(np.arange(domain.size))
    lowest, highest = {}, {}
    for name, values in codes.items():
        lowest[name] = np.full(len(representative), np.iinfo(np.int64).max)
        highest[name] = np.full(len(representative), np.iinfo(np.int64).min)
        np.minimum.at(lowest[name], class_of, values)
        np.maximum.at(highest[name], class_of, values)
    category = {
        a: np.argmax(chosen.attribute(a).breakdown(b).membership, axis=0)
        for a, b in chosen.reconstruction.resolved.items()
    }
    first_codes = {a.name: a.low for a in domain.attributes}
    level = chosen.reconstruction.level
    return Resolution(class_of, representative, lowest, highest, category, first_codes, level)


@lru_cache(maxsize=16)
def class_query(
    names: tuple[str, ...], within: tuple[str, ...], census: Census | None = None
) -> sp.csc_matrix:
    """The query matrices of ``names`` over the classes of the tables ``within`` (which include
    ``names``): one column per class, its first cell's."""
    return stacked_query(names, census).tocsc()[:, resolution(within, census).representative]


def person_tables(
    release: Release, block_only: bool = False
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The block-level and tract-level person tables the release publishes (with
    ``block_only``, no tract table: the attack paper's reconstruction from block tables alone);
    for another census, its tables down to the reconstruction's level and to its programs'."""
    block_tables, tract_tables = attack_tables(release.census)
    return (
        tuple(n for n in block_tables if n in release.tables),
        () if block_only else tuple(n for n in tract_tables if n in release.tables),
    )


# ---------------------------------------------------------------------------------------------
# One tract
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TractProblem:
    """Everything needed to reconstruct one tract: compact arrays only."""

    tract: int
    blocks: IntArray
    block_counts: FloatArray  # blocks × block-table cells
    tract_counts: FloatArray  # tract-table cells
    block_tables: tuple[str, ...]
    tract_tables: tuple[str, ...]
    seed: int
    time_limit: float = TIME_LIMIT
    block_bounds: CellBounds | None = None
    """The noise model's bounds on the block cells' true counts (None: the naive attack, which
    takes every published count as exact and every published 0 as a true 0)."""
    tract_bounds: CellBounds | None = None
    draws: int = 0
    """Further diverse reconstructions drawn to rank the records (:data:`DRAWS`)."""
    block_measured: tuple[str, ...] = ()
    """Measured TopDown queries at block level whose groups follow the block tables' cells in
    ``block_bounds`` (their answers are not in ``block_counts``)."""
    tract_measured: tuple[str, ...] = ()
    node_limit: int | None = None
    """Branch-and-bound nodes each integer program may explore (None: no limit but time)."""
    census: Census | None = None
    """The census of the release (None: the US 2010 census)."""

    @property
    def tables(self) -> tuple[str, ...]:
        """Every query the program holds (its classes are those these cannot tell apart)."""
        return self.block_tables + self.tract_tables + self.block_measured + self.tract_measured

    @property
    def noise_aware(self) -> bool:
        """Whether the program must model noise (the release's counts are not all exact)."""
        bounds = (self.block_bounds, self.tract_bounds)
        return any(b is not None and not b.exact for b in bounds)


@dataclass(frozen=True)
class TractResult:
    """Reconstructed cell counts of one tract and how the solve went."""

    tract: int
    block: IntArray  # block geocode of each reconstructed (block, cell) count
    cell: IntArray  # person-domain cell (the first of its class)
    count: IntArray
    status: str
    mode: str
    deviation: float
    seconds: float
    variables: int
    constraints: int
    drawn: IntArray = field(default_factory=lambda: np.zeros((0, 0), np.int64))
    """Each reconstructed (block, cell) count in every further draw (counts × draws), from
    which each record's confidence is its share of draws that hold it."""
    rounds: int = 0
    """Pricing rounds of the noise-aware program (0: not priced)."""
    elastic: float = 0.0
    """Total by which the noise-aware solution leaves the cells' ranges."""
    time_limited: bool = False
    """Whether wall time stopped one of the tract's solves: its reconstruction may then differ
    between runs with the same seed (a node limit stops a solve at the same point every time)."""


@dataclass(frozen=True)
class Program:
    """The linear system of one tract: A x = b over the candidate (block, class) pairs."""

    block: IntArray  # block index (within the tract) of each variable
    cell: IntArray  # class (of the tract's and blocks' tables together)
    matrix: sp.csc_matrix
    target: FloatArray
    upper: FloatArray


def candidate_cells(problem: TractProblem) -> tuple[IntArray, IntArray]:
    """(block index, class) of every variable: classes that no published zero rules out."""
    qb = class_query(problem.block_tables, problem.tables, problem.census)
    qt = class_query(problem.tract_tables, problem.tables, problem.census)
    zero_b = sp.csr_matrix((problem.block_counts <= 0).astype(np.int8))  # NaN → not zero
    ruled_out = (zero_b @ qb).toarray() > 0
    ruled_out |= (qt.T @ (problem.tract_counts <= 0).astype(np.int8) > 0)[None, :]
    return tuple(np.nonzero(~ruled_out))  # type: ignore[return-value]


def build_program(problem: TractProblem) -> Program:
    """Rows: every published, non-suppressed positive cell; columns: the candidate classes."""
    block, cell = candidate_cells(problem)
    qb = class_query(problem.block_tables, problem.tables, problem.census)
    n_rows_b = qb.shape[0]
    part = qb[:, cell].tocoo()
    rows = block[part.col] * n_rows_b + part.row
    a_block = sp.csr_matrix(
        (np.ones(len(rows)), (rows, part.col)), shape=(len(problem.blocks) * n_rows_b, len(cell))
    )
    b_block = problem.block_counts.reshape(-1)
    keep_b = b_block > 0
    a_tract = class_query(problem.tract_tables, problem.tables, problem.census)[:, cell].tocsr()
    keep_t = problem.tract_counts > 0
    matrix = sp.vstack([a_block[keep_b], a_tract[keep_t]], format="csc")
    target = np.r_[b_block[keep_b], problem.tract_counts[keep_t]]
    upper = column_minimum(a_block[keep_b].tocsc(), b_block[keep_b])
    return Program(block, cell, matrix, target, upper)


def _solve(
    program: Program, deviation: bool, seed: int, limits: Limits
) -> tuple[str, FloatArray | None, float]:
    """Solve A x = b (or min Σ|A x − b|) over non-negative integers within ``limits`` (at least
    :data:`.noise_aware.MINIMUM_SOLVE` seconds); (status, x, objective).

    x is None when no feasible point was found (for the equalities: they are inconsistent, or
    a limit came first).
    """
    a, cost, upper = _columns(program, deviation)
    n = len(program.cell)
    integer = np.r_[np.ones(n, bool), np.zeros(a.shape[1] - n, bool)]
    status, x, objective = solve_mip(
        a,
        program.target,
        program.target,
        cost,
        upper,
        integer,
        threads=single_threaded_highs(),
        random_seed=seed % 2_147_483_647,
        mip_rel_gap=DEVIATION_GAP if deviation else 0.0,
        **limits.options(MINIMUM_SOLVE),
    )
    return status, (None if x is None else x[:n]), objective


def _columns(program: Program, deviation: bool) -> tuple[sp.csc_matrix, FloatArray, FloatArray]:
    """(matrix, cost, upper bounds) of the equalities, or with ``deviation`` of x, then s⁺ and
    s⁻ per row: A x + s⁺ − s⁻ = b, minimising Σ s."""
    a = program.matrix
    n, m = a.shape[1], a.shape[0]
    if not deviation:
        return a, np.zeros(n), program.upper
    eye = sp.identity(m, format="csc")
    a = sp.hstack([a, eye, -eye], format="csc")
    return a, np.r_[np.zeros(n), np.ones(2 * m)], np.full(n + 2 * m, INF)


def solve_tract(problem: TractProblem) -> TractResult:
    """Reconstruct one tract: equalities first, least absolute deviation if they are infeasible;
    with a noise model that is not exact, the noise-aware program."""
    if problem.noise_aware:
        return solve_noise_aware(problem)
    start = time.perf_counter()
    limits = Limits(start + problem.time_limit, problem.node_limit)
    program = build_program(problem)
    mode = "exact"
    status, x, objective = _solve(program, False, problem.seed, limits)
    stopped = status == TIME_LIMIT_STATUS
    if x is None:
        mode = "deviation"
        status, x, objective = _solve(program, True, problem.seed, limits)
        stopped |= status == TIME_LIMIT_STATUS
    counts = np.rint(x).astype(np.int64) if x is not None else np.zeros(len(program.cell), np.int64)
    keep = counts > 0
    drawn, draws_stopped = _draws(program, mode == "deviation", problem, limits)
    return TractResult(
        tract=problem.tract,
        block=problem.blocks[program.block[keep]],
        cell=resolution(problem.tables, problem.census).representative[program.cell[keep]],
        count=counts[keep],
        status=status,
        mode=mode,
        deviation=objective if mode == "deviation" else 0.0,
        seconds=time.perf_counter() - start,
        variables=len(program.cell),
        constraints=len(program.target),
        drawn=drawn[keep],
        time_limited=stopped or draws_stopped,
    )


def _draws(
    program: Program, deviation: bool, problem: TractProblem, limits: Limits
) -> tuple[IntArray, bool]:
    """The naive program's further draws (:func:`.noise_aware.relaxed_draws`, at least
    :data:`.noise_aware.MINIMUM_SOLVE` seconds in all), and whether wall time stopped one."""
    n = len(program.cell)
    if not problem.draws or not n:
        return np.zeros((n, problem.draws), np.int64), False
    a, cost, upper = _columns(program, deviation)
    after = Limits(max(limits.deadline, time.perf_counter() + MINIMUM_SOLVE), limits.nodes)
    target = program.target
    return relaxed_draws(a, target, target, cost, upper, n, problem.draws, problem.seed, after)


def starting_pairs(problem: TractProblem, n_classes: int, limits: Limits) -> BoolArray:
    """blocks × classes: the pairs the noise-aware relaxation starts from — the naive attack's
    candidates, but in a block whose every cell is withheld (which rules nothing out: every
    class a candidate) only the pairs the naive reconstruction puts there."""
    start = np.zeros((len(problem.blocks), n_classes), dtype=bool)
    start[candidate_cells(problem)] = True
    withheld = np.asarray(np.isnan(problem.block_counts).all(axis=1), dtype=bool)
    if withheld.any():
        start[withheld] = False
        block, cell = naive_pairs(problem, limits)
        start[block[withheld[block]], cell[withheld[block]]] = True
    return start


def naive_pairs(problem: TractProblem, limits: Limits) -> tuple[IntArray, IntArray]:
    """(block index, class) of the pairs the naive attack's reconstruction uses (its candidates
    when it finds none within ``limits``)."""
    program = build_program(problem)
    _, x, _ = _solve(program, False, problem.seed, limits)
    if x is None:
        _, x, _ = _solve(program, True, problem.seed, limits)
    if x is None:
        return program.block, program.cell
    used = np.rint(x) > 0
    return program.block[used], program.cell[used]


def solve_noise_aware(problem: TractProblem) -> TractResult:
    """Reconstruct one tract with the noise model's bounds and likelihood (:mod:`.noise_aware`),
    starting from the naive attack's candidates (:func:`starting_pairs`)."""
    assert problem.block_bounds is not None and problem.tract_bounds is not None
    start_time = time.perf_counter()
    space = ColumnSpace(
        class_query(problem.block_tables + problem.block_measured, problem.tables, problem.census),
        class_query(problem.tract_tables + problem.tract_measured, problem.tables, problem.census),
        Rows.of(problem.block_bounds, problem.tract_bounds),
    )
    limits = Limits(start_time + problem.time_limit, problem.node_limit)
    start = starting_pairs(problem, space.n_classes, limits)
    priced = solve_priced(space, start, problem.seed, limits, DEVIATION_GAP, problem.draws)
    return TractResult(
        tract=problem.tract,
        block=problem.blocks[priced.block],
        cell=resolution(problem.tables, problem.census).representative[priced.cell],
        count=priced.count,
        status=priced.status if priced.converged else f"{priced.status} (pricing not converged)",
        mode="noise-aware",
        deviation=priced.objective,
        seconds=time.perf_counter() - start_time,
        variables=priced.variables,
        constraints=priced.constraints,
        drawn=priced.drawn,
        rounds=priced.rounds,
        elastic=priced.elastic,
        time_limited=priced.time_limited,
    )


# ---------------------------------------------------------------------------------------------
# A whole release
# ---------------------------------------------------------------------------------------------


def side_by_side(release: Release, names: Sequence[str], level: str) -> FloatArray:
    """Geounits of ``level`` × the cells of every table ``names``, side by side, as published; a
    suppressed cell is NaN (it constrains nothing)."""
    n = release.geography.n_units(level)
    return np.hstack(
        [np.zeros((n, 0))] + [release.tables[t].dense(level, suppressed=np.nan) for t in names]
    )


def tract_problems(
    release: Release,
    seed: int = 0,
    time_limit: float = TIME_LIMIT,
    knowledge: str = "naive",
    draws: int = 0,
    node_limit: int | None = None,
    block_only: bool = False,
) -> list[TractProblem]:
    """One problem per tract with persons, from the person tables the release publishes (with
    ``block_only``, its block-level ones alone); with ``knowledge`` other than naive each carries
    the noise model's bounds on its cells (and with ``published`` TopDown's measured queries)."""
    block_tables, tract_tables = person_tables(release, block_only)
    census = release.census
    level, within = census.reconstruction.level, census.within
    if not block_tables:
        raise InputError(
            f"release ({release.mechanism}) has no {level}-level person table "
            f"(one of {', '.join(attack_tables(census)[0])}); nothing to reconstruct"
        )
    geography = release.geography
    blocks = geography.codes(level)
    tract_codes = geography.codes(within)
    tract_of_block = geography.parents(within, level)
    # geounits × the cells of every table side by side; a suppressed cell is NaN (no constraint)
    block_counts = side_by_side(release, block_tables, level)
    tract_counts = side_by_side(release, tract_tables, within)
    if knowledge not in KNOWLEDGE:
        raise InputError(f"knowledge {knowledge!r}: expected one of {', '.join(KNOWLEDGE)}")
    aware = knowledge != "naive"
    block_measured, tract_measured = used_measurements(release, knowledge, block_only)
    if aware:
        block_bounds = cell_bounds(release, block_tables, level, block_counts)
        tract_bounds = cell_bounds(release, tract_tables, within, tract_counts)
        if block_measured:
            block_bounds = block_bounds.beside(
                measurement_bounds(release, block_measured, level)[1]
            )
        if tract_measured:
            tract_bounds = tract_bounds.beside(
                measurement_bounds(release, tract_measured, within)[1]
            )
    order = np.argsort(tract_of_block, kind="stable")
    bounds = np.searchsorted(tract_of_block[order], np.arange(len(tract_codes) + 1))
    children = np.random.SeedSequence(seed).spawn(len(tract_codes))
    problems = []
    for t, code in enumerate(tract_codes):
        rows = order[bounds[t] : bounds[t + 1]]
        counts = block_counts[rows]
        if not np.nansum(np.abs(counts)) and not np.nansum(np.abs(tract_counts[t])):
            continue
        problems.append(
            TractProblem(
                tract=int(code),
                blocks=blocks[rows],
                block_counts=counts,
                tract_counts=tract_counts[t],
                block_tables=block_tables,
                tract_tables=tract_tables,
                seed=int(children[t].generate_state(1)[0]),
                time_limit=time_limit,
                block_bounds=block_bounds.take(rows) if aware else None,
                tract_bounds=tract_bounds.take(t) if aware else None,
                draws=draws,
                block_measured=block_measured,
                tract_measured=tract_measured,
                node_limit=node_limit,
                census=census,
            )
        )
    return problems


def used_measurements(
    release: Release, knowledge: str, block_only: bool = False
) -> tuple[tuple[str, ...], ...]:
    """The measured TopDown queries the attack holds at block and tract level (with
    ``published`` knowledge of a release that carries them; none otherwise, and none at tract
    level with ``block_only``)."""
    if knowledge != "published":
        return (), ()
    census = release.census
    within = () if block_only else measured_queries(release, census.within)
    return measured_queries(release, census.reconstruction.level), within


def reconstruct(
    release: Release,
    workers: Executor | int | None = None,
    seed: int = 0,
    time_limit: float = TIME_LIMIT,
    checkpoint: Path | None = None,
    knowledge: str = "naive",
    draws: int = 0,
    node_limit: int | None = None,
    block_only: bool = False,
) -> Reconstruction:
    """Reconstruct block-level person records from a release's tables (and nothing else, with
    ``knowledge="published"`` what the release states about its noise too); with a
    ``checkpoint`` directory every finished tract is kept and a re-run resumes.

    ``block_only``: from the block-level tables (and measurements) alone, as the attack paper's
    second reconstruction (rHDF_b) did: ages above 21 are then known to their agebin only, and
    each record's ``age`` is its bin's first year, between ``age_min`` and ``age_max``.

    Each tract's solves stop at ``time_limit`` seconds in all and, with a ``node_limit``, at that
    many branch-and-bound nodes per integer program. A node limit stops a solve at the same point
    on every run, so the same seed gives the same reconstruction; a tract stopped by wall time
    may differ between runs, and its row says so (``time_limited``)."""
    problems = tract_problems(release, seed, time_limit, knowledge, draws, node_limit, block_only)
    block_tables, tract_tables = person_tables(release, block_only)
    measured = used_measurements(release, knowledge, block_only)
    census = release.census
    known = resolution(block_tables + tract_tables + measured[0] + measured[1], census)
    sizes = [float(np.nansum(p.block_counts[:, 0])) for p in problems]
    within = census.within
    codes = release.geography.geoid_strings([p.tract for p in problems], within).to_list()
    names = [f"{within} {code}" for code in codes]
    saved = None
    if checkpoint is not None:
        identity = json.dumps(
            [
                frames_digest(*(t.frame(labels=False) for t in release.tables.values())),
                frames_digest(*release.artifacts.values()) if any(measured) else None,
                release.parameters,
                seed,
                time_limit,
                knowledge,
                draws,
                node_limit,
                *(["block only"] if block_only else []),  # earlier checkpoints stay valid
            ],
            sort_keys=True,
            default=str,
        )
        key = hashlib.sha256(identity.encode()).hexdigest()
        saved = Checkpoint(Path(checkpoint) / "tracts", key, TractResult)
    results = run_tasks(
        solve_tract, problems, workers, "reconstructing tracts", sizes, names, saved
    )
    block = np.concatenate([r.block for r in results]) if results else np.zeros(0, np.int64)
    cell = np.concatenate([r.cell for r in results]) if results else np.zeros(0, np.int64)
    count = np.concatenate([r.count for r in results]) if results else np.zeros(0, np.int64)
    drawn = (
        np.concatenate([r.drawn for r in results]) if results else np.zeros((0, draws), np.int64)
    )
    confidence = record_confidence(count, drawn) if draws else None
    block, cell = np.repeat(block, count), np.repeat(cell, count)
    persons = records_frame(block, cell, known, release)
    if confidence is not None:
        persons = persons.with_columns(confidence=pl.Series(confidence, dtype=pl.Float64))
    declared = None if is_us2010(census) else census
    return Reconstruction(persons, tract_frame(results, release), known.summary(), cell, declared)


def record_confidence(count: IntArray, drawn: IntArray) -> FloatArray:
    """Per reconstructed record (the j-th of a (block, cell) count, j = 1..count): the share of
    the further draws that hold at least j records there."""
    pair = np.repeat(np.arange(len(count)), count)
    starts = np.repeat(np.cumsum(count) - count, count)
    copy = np.arange(len(pair)) - starts + 1
    return (drawn[pair] >= copy[:, None]).mean(axis=1)


def records_frame(
    block: IntArray, cell: IntArray, known: Resolution, release: Release
) -> pl.DataFrame:
    """One row per reconstructed person: its geounit (column ``block``, whatever the census
    calls the level) and the code of every attribute, null where the tables do not determine
    it; an attribute needed only to a breakdown (age) also has its bounds (``age_min``,
    ``age_max``). A census with fixed integer codes (the US) writes them as integers, any
    other its codes as text."""
    census = release.census
    domain = census.reconstruction_domain
    codes = domain.decode(cell)
    group = known.class_of[cell]
    columns: dict[str, pl.Series] = {
        "block": release.geography.geoid_strings(block, census.reconstruction.level)
    }
    for a in domain.attributes:
        values = {
            a.name: codes[a.name],
            **(
                {
                    f"{a.name}_min": known.lowest[a.name][group],
                    f"{a.name}_max": known.highest[a.name][group],
                }
                if a.name in known.category
                else {}
            ),
        }
        for name, value in values.items():
            columns[name] = _written_codes(census, a, value, a.name in known.category)
    frame = pl.DataFrame(columns)
    return frame.with_columns(
        pl.when(pl.Series(known.determined(a)[group], dtype=pl.Boolean)).then(pl.col(a)).alias(a)
        for a in domain.names
    )


def _written_codes(census: Census, axis: Attribute, values: IntArray, resolved: bool) -> pl.Series:
    """Codes as a reconstruction writes them: integers where the census fixes them (16 bits
    for an attribute with bounds or codes above 127, else 8), else the census's text codes."""
    if census.reconstruction.domain is None:
        text = np.asarray(census.attribute(axis.name).codes, dtype=object)
        return pl.Series(text[values - axis.low], dtype=pl.String)
    wide = resolved or axis.high > np.iinfo(np.int8).max
    return pl.Series(values.astype(np.int16 if wide else np.int8))


def tract_frame(results: list[TractResult], release: Release) -> pl.DataFrame:
    tracts = np.array([r.tract for r in results], np.int64)
    return pl.DataFrame(
        {
            "tract": release.geography.geoid_strings(tracts, release.census.within),
            "status": [r.status for r in results],
            "mode": [r.mode for r in results],
            "persons": [int(r.count.sum()) for r in results],
            "deviation": [r.deviation for r in results],
            "seconds": [r.seconds for r in results],
            "variables": [r.variables for r in results],
            "constraints": [r.constraints for r in results],
            TIME_LIMITED: [r.time_limited for r in results],
        },
        schema={name: WRITTEN_AS[kind] for name, kind in TRACT_COLUMNS.items()}
        | {TIME_LIMITED: pl.Boolean},
    )


DRAWS = 10
"""Further reconstructions drawn per tract to rank the records by confidence."""
MAX_DRAWS = 100
"""Most further reconstructions per tract: a record's confidence is its share of the draws, which
100 resolve to 1%, while every draw costs one more linear program per tract and one more column
of the tract's counts (10⁹ draws asked for a 10⁹-column array)."""
