"""The reconstruction attack: published person tables → block-level microdata.

As the Census Bureau did with the 2010 tables (specs/reconstruction-reidentification.md §2), but
with a far smaller integer program: one per tract, with a non-negative integer variable
x[block, sex, age, race, hisp] per *count* of records (not per person slot), and only for the cells
that no published zero rules out. Every published cell of a block table (at its block) and of a
tract table (summed over the tract's blocks) is one linear constraint — the rows of the catalogue's
query matrices.

* Consistent releases (exact, swapped, TopDown): equality constraints, a pure feasibility problem.
* Inconsistent releases (noise, cell key): if the equalities are infeasible, the program minimises
  the total absolute deviation from the published counts (a slack pair per cell). Suppressed cells
  (null counts) give no constraint.

The attack reads only the release. Tracts are independent and run in parallel; each gets its own
solver seed, so results do not depend on the number of workers.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl
import scipy.sparse as sp

from sdclab import schema
from sdclab.errors import InputError
from sdclab.execution import run_tasks
from sdclab.fileio import atomic_directory, check_replaceable, write_json, write_parquet
from sdclab.geography import geoid_strings, parse_geoids
from sdclab.optimize.highs import INF, solve_mip
from sdclab.release import Release
from sdclab.tables.catalog import CATALOG, PERSON_TABLES

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

BLOCK_TABLES = tuple(n for n in PERSON_TABLES if CATALOG[n].bottom == "block")
TRACT_TABLES = tuple(n for n in PERSON_TABLES if CATALOG[n].bottom == "tract")
DEVIATION_GAP = 0.01
"""Least-deviation programs stop within 1% of the optimum (their LP bound is tight; the last
percent costs far more time than it changes the reconstruction)."""
TIME_LIMIT = 300.0
"""Seconds one tract's program may take before HiGHS returns its best solution."""


@lru_cache(maxsize=8)
def stacked_query(names: tuple[str, ...]) -> sp.csr_matrix:
    """The query matrices of ``names`` one above the other (rows = all their cells)."""
    if not names:
        return sp.csr_matrix((0, schema.PERSON.size), dtype=np.int64)
    return sp.vstack([CATALOG[n].query for n in names], format="csr")


def release_counts(
    release: Release, names: tuple[str, ...], level: str, codes: IntArray
) -> FloatArray:
    """Published counts as a dense geounits × (cells of all ``names``) array (NaN = suppressed)."""
    widths = [CATALOG[n].n_cells for n in names]
    offsets = np.cumsum([0, *widths])
    out = np.zeros((len(codes), int(offsets[-1])))
    for name, offset in zip(names, offsets[:-1], strict=False):
        frame = release.table(name, level)
        rows = np.searchsorted(codes, parse_geoids(frame["geoid"], level))
        counts = frame["count"].cast(pl.Float64).fill_null(float("nan")).to_numpy()
        out[rows, offset + frame["cell"].to_numpy()] = counts
    return out


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


@dataclass(frozen=True)
class TractResult:
    """Reconstructed cell counts of one tract and how the solve went."""

    tract: int
    block: IntArray  # block geocode of each reconstructed (block, cell) count
    cell: IntArray  # person-domain cell
    count: IntArray
    status: str
    mode: str
    deviation: float
    seconds: float
    variables: int
    constraints: int


@dataclass(frozen=True)
class Program:
    """The linear system of one tract: A x = b over the candidate cells (block, cell)."""

    block: IntArray  # block index (within the tract) of each variable
    cell: IntArray
    matrix: sp.csc_matrix
    target: FloatArray
    upper: FloatArray


def candidate_cells(problem: TractProblem) -> tuple[IntArray, IntArray]:
    """(block index, cell) of every variable: cells that no published zero rules out."""
    qb = stacked_query(problem.block_tables)
    qt = stacked_query(problem.tract_tables)
    zero_b = sp.csr_matrix((problem.block_counts <= 0).astype(np.int8))  # NaN → not zero
    ruled_out = (zero_b @ qb).toarray() > 0
    ruled_out |= (qt.T @ (problem.tract_counts <= 0).astype(np.int8) > 0)[None, :]
    return tuple(np.nonzero(~ruled_out))  # type: ignore[return-value]


def build_program(problem: TractProblem) -> Program:
    """Rows: every published, non-suppressed positive cell; columns: the candidate cells."""
    block, cell = candidate_cells(problem)
    qb = stacked_query(problem.block_tables)
    n_rows_b = qb.shape[0]
    part = qb.tocsc()[:, cell].tocoo()
    rows = block[part.col] * n_rows_b + part.row
    a_block = sp.csr_matrix(
        (np.ones(len(rows)), (rows, part.col)), shape=(len(problem.blocks) * n_rows_b, len(cell))
    )
    b_block = problem.block_counts.reshape(-1)
    keep_b = b_block > 0
    a_tract = stacked_query(problem.tract_tables).tocsc()[:, cell].tocsr()
    keep_t = problem.tract_counts > 0
    matrix = sp.vstack([a_block[keep_b], a_tract[keep_t]], format="csc")
    target = np.r_[b_block[keep_b], problem.tract_counts[keep_t]]
    upper = column_minimum(a_block[keep_b].tocsc(), b_block[keep_b])
    return Program(block, cell, matrix, target, upper)


def column_minimum(matrix: sp.csc_matrix, values: FloatArray) -> FloatArray:
    """For each column, the smallest value of the rows it appears in (inf if none)."""
    data = np.r_[values[matrix.indices], np.inf]
    starts = np.minimum(matrix.indptr[:-1], len(data) - 1)
    lowest = np.minimum.reduceat(data, starts)
    lowest[np.diff(matrix.indptr) == 0] = np.inf
    return lowest


def _solve(
    program: Program, deviation: bool, seed: int, time_limit: float
) -> tuple[str, FloatArray | None, float]:
    """Solve A x = b (or min Σ|A x − b|) over non-negative integers; (status, x, objective).

    x is None when no feasible point was found (for the equalities: they are inconsistent, or
    the time limit came first).
    """
    a, b = program.matrix, program.target
    n, m = a.shape[1], a.shape[0]
    if deviation:  # x, then s⁺ and s⁻ per row: A x + s⁺ − s⁻ = b, minimise Σ s
        eye = sp.identity(m, format="csc")
        a = sp.hstack([a, eye, -eye], format="csc")
        cost = np.r_[np.zeros(n), np.ones(2 * m)]
        upper = np.full(n + 2 * m, INF)
        integer = np.r_[np.ones(n, bool), np.zeros(2 * m, bool)]
    else:
        cost, upper, integer = np.zeros(n), program.upper, np.ones(n, bool)
    status, x, objective = solve_mip(
        a,
        b,
        b,
        cost,
        upper,
        integer,
        threads=1,
        random_seed=seed % 2_147_483_647,
        time_limit=float(time_limit),
        mip_rel_gap=DEVIATION_GAP if deviation else 0.0,
    )
    return status, (None if x is None else x[:n]), objective


def solve_tract(problem: TractProblem) -> TractResult:
    """Reconstruct one tract: equalities first, least absolute deviation if they are infeasible."""
    start = time.perf_counter()
    program = build_program(problem)
    mode = "exact"
    status, x, objective = _solve(program, False, problem.seed, problem.time_limit)
    if x is None:
        mode = "deviation"
        status, x, objective = _solve(program, True, problem.seed, problem.time_limit)
    counts = np.rint(x).astype(np.int64) if x is not None else np.zeros(len(program.cell), np.int64)
    keep = counts > 0
    return TractResult(
        tract=problem.tract,
        block=problem.blocks[program.block[keep]],
        cell=program.cell[keep],
        count=counts[keep],
        status=status,
        mode=mode,
        deviation=objective if mode == "deviation" else 0.0,
        seconds=time.perf_counter() - start,
        variables=len(program.cell),
        constraints=len(program.target),
    )


# ---------------------------------------------------------------------------------------------
# A whole release
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reconstruction:
    """Reconstructed persons (block, sex, age, race, hispanic) and one row of figures per tract."""

    persons: pl.DataFrame
    tracts: pl.DataFrame

    def metrics(self) -> dict[str, Any]:
        statuses = self.tracts.group_by("status").len().sort("status")
        modes = self.tracts.group_by("mode").len().sort("mode")
        return {
            "tracts": self.tracts.height,
            "blocks": self.persons["block"].n_unique(),
            "persons": self.persons.height,
            "solve_seconds_total": round(float(self.tracts["seconds"].sum()), 3),
            "statuses": dict(statuses.iter_rows()),
            "modes": dict(modes.iter_rows()),
            "total_absolute_deviation": float(self.tracts["deviation"].sum()),
            "variables": int(self.tracts["variables"].sum()),
            "constraints": int(self.tracts["constraints"].sum()),
        }


def tract_problems(
    release: Release, seed: int = 0, time_limit: float = TIME_LIMIT
) -> list[TractProblem]:
    """One problem per tract with persons, from the person tables the release publishes."""
    block_tables = tuple(n for n in BLOCK_TABLES if n in release.tables)
    tract_tables = tuple(n for n in TRACT_TABLES if n in release.tables)
    if not block_tables:
        raise InputError(
            f"release ({release.mechanism}) has no block-level person table "
            f"(one of {', '.join(BLOCK_TABLES)}); nothing to reconstruct"
        )
    geography = release.geography
    blocks = geography.blocks
    block_counts = release_counts(release, block_tables, "block", blocks)
    tract_codes, tract_of_block = geography.units("tract")
    tract_counts = release_counts(release, tract_tables, "tract", tract_codes)
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
            )
        )
    return problems


def reconstruct(
    release: Release, workers: int | None = None, seed: int = 0, time_limit: float = TIME_LIMIT
) -> Reconstruction:
    """Reconstruct block-level person records from a release's tables (and nothing else)."""
    problems = tract_problems(release, seed, time_limit)
    sizes = [float(np.nansum(p.block_counts[:, 0])) for p in problems]
    results = run_tasks(solve_tract, problems, workers, "reconstructing tracts", sizes)
    block = np.concatenate([r.block for r in results]) if results else np.zeros(0, np.int64)
    cell = np.concatenate([r.cell for r in results]) if results else np.zeros(0, np.int64)
    count = np.concatenate([r.count for r in results]) if results else np.zeros(0, np.int64)
    return Reconstruction(records_frame(block, cell, count), tract_frame(results))


def records_frame(block: IntArray, cell: IntArray, count: IntArray) -> pl.DataFrame:
    """One row per reconstructed person."""
    block, cell = np.repeat(block, count), np.repeat(cell, count)
    codes = schema.PERSON.decode(cell)
    return pl.DataFrame(
        {
            "block": geoid_strings(block, "block"),
            "sex": codes["sex"].astype(np.int8),
            "age": codes["age"].astype(np.int16),
            "race": codes["race"].astype(np.int8),
            "hispanic": codes["hispanic"].astype(np.int8),
        }
    )


def tract_frame(results: list[TractResult]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "tract": geoid_strings(np.array([r.tract for r in results], np.int64), "tract"),
            "status": [r.status for r in results],
            "mode": [r.mode for r in results],
            "persons": [int(r.count.sum()) for r in results],
            "deviation": [r.deviation for r in results],
            "seconds": [r.seconds for r in results],
            "variables": [r.variables for r in results],
            "constraints": [r.constraints for r in results],
        },
        schema={
            "tract": pl.String,
            "status": pl.String,
            "mode": pl.String,
            "persons": pl.Int64,
            "deviation": pl.Float64,
            "seconds": pl.Float64,
            "variables": pl.Int64,
            "constraints": pl.Int64,
        },
    )


METRICS_FILE = "metrics.json"


def write_reconstruction(
    out: Path,
    reconstruction: Reconstruction,
    metrics: dict[str, Any],
    solvar: pl.DataFrame | None = None,
    protect: tuple[Path, ...] = (),
) -> None:
    """RECON/persons.parquet, tracts.parquet, [solvar.parquet], metrics.json — atomically."""
    check_replaceable(out, METRICS_FILE, protect)
    with atomic_directory(out) as tmp:
        write_parquet(reconstruction.persons, tmp / "persons.parquet")
        write_parquet(reconstruction.tracts, tmp / "tracts.parquet")
        if solvar is not None:
            write_parquet(solvar, tmp / "solvar.parquet")
        write_json(metrics, tmp / METRICS_FILE)


def read_reconstruction(path: Path) -> Reconstruction:
    """Read a reconstruction directory (persons and per-tract figures)."""
    for name in ("persons.parquet", "tracts.parquet", METRICS_FILE):
        if not (path / name).is_file():
            raise InputError(f"{path / name}: missing; {path} is not a reconstruction directory")
    persons = pl.read_parquet(path / "persons.parquet")
    expected = {"block", "sex", "age", "race", "hispanic"}
    if set(persons.columns) != expected:
        raise InputError(
            f"{path / 'persons.parquet'}: columns {persons.columns}, expected {sorted(expected)}"
        )
    return Reconstruction(persons, pl.read_parquet(path / "tracts.parquet"))
