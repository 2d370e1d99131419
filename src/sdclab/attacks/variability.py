"""Solution variability: how different can two reconstructions that fit the tables be?

For a block with N persons and a first reconstruction x*, a second program looks for another
solution x of the same block constraints that shares as few records with x* as possible:
minimise Σ_c min(x_c, x*_c). Then solvar = (N − Σ_c min(x_c, x*_c)) / N is the largest share of
the block's records that can differ (docs/reconstruction.md, *Solution variability*). solvar = 0
proves the reconstruction of that block is the only one: an attacker knows those records are right
without seeing any confidential data.

Records are compared on what the block tables can tell apart (the classes of
:class:`~sdclab.attacks.reconstruction.Resolution`): {sex, agebin, race, Hispanic origin} when every
block table of the 2010 attack is published (P12 and P14 pin down the 38 agebins), {race, Hispanic
origin, voting age} for a PL 94-171 release — records that differ only in what the tables cannot
see are one and the same as far as the tables go. The constraints are the block-level tables.
Leaving out the tract
tables can only allow more solutions, so the solvar reported is an upper bound of the one with every
table — and solvar = 0 remains a proof. min(x, x*) is written with one binary per record cell of x*:
y ≥ x − M·w and y ≥ x*·w, so that minimising Σ y makes y = min(x, x*).

Blocks are independent, so one program per tract holds all its blocks (the objective separates).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import scipy.sparse as sp

from sdclab.attacks.reconstruction import (
    class_query,
    column_minimum,
    person_tables,
    reconstruct,
    resolution,
    side_by_side,
)
from sdclab.attacks.reconstruction_files import Reconstruction
from sdclab.censuses.us2010.geography import geoid_strings, parse_geoids
from sdclab.core.arrays import FloatArray, IntArray
from sdclab.core.execution import Executor, run_tasks
from sdclab.core.figures import NotMeasured, as_json
from sdclab.core.optimize.highs import (
    INF,
    OPTIMAL_STATUS,
    Limits,
    single_threaded_highs,
    solve_mip,
)
from sdclab.release import Release


@dataclass(frozen=True)
class VariabilityProblem:
    tract: int
    blocks: IntArray
    block_counts: FloatArray
    tables: tuple[str, ...]
    first_block: IntArray  # block index of each cell count of the first solution
    first_cell: IntArray  # class of the block tables
    first_count: IntArray
    seed: int
    time_limit: float = 300.0
    node_limit: int | None = None


def solve_variability(problem: VariabilityProblem) -> tuple[IntArray, IntArray, FloatArray, str]:
    """(block, persons, solvar, status) for every block of one tract."""
    q = class_query(problem.tables, problem.tables)
    n_classes = q.shape[1]
    counts = problem.block_counts
    n_blocks, n_rows = counts.shape
    zero = sp.csr_matrix((counts <= 0).astype(np.int8))
    block, cell = np.nonzero((zero @ q).toarray() == 0)
    part = q[:, cell].tocoo()
    rows = block[part.col] * n_rows + part.row
    a_x = sp.csr_matrix(
        (np.ones(len(rows)), (rows, part.col)), shape=(n_blocks * n_rows, len(cell))
    )
    target = counts.reshape(-1)
    keep = target > 0
    a_x, target = a_x[keep], target[keep]
    persons = np.bincount(problem.first_block, weights=problem.first_count, minlength=n_blocks)
    # variables: x (candidate cells), then y and w for each cell of the first solution
    keys = block * n_classes + cell  # ascending: np.nonzero walks row by row
    x_index = np.searchsorted(keys, problem.first_block * n_classes + problem.first_cell)
    n_x, n_y = len(cell), len(x_index)
    x_upper = column_minimum(a_x.tocsc(), target)
    big = np.minimum(x_upper[x_index], persons[problem.first_block])  # tightest valid big-M
    k = np.arange(n_y)
    # y − x + M w ≥ 0  and  y − x* w ≥ 0
    link = sp.csr_matrix(
        (
            np.r_[np.ones(n_y), -np.ones(n_y), big, np.ones(n_y), -problem.first_count],
            (
                np.r_[k, k, k, n_y + k, n_y + k],
                np.r_[n_x + k, x_index, n_x + n_y + k, n_x + k, n_x + n_y + k],
            ),
        ),
        shape=(2 * n_y, n_x + 2 * n_y),
    )
    matrix = sp.vstack([sp.hstack([a_x, sp.csr_matrix((a_x.shape[0], 2 * n_y))]), link])
    lower = np.r_[target, np.zeros(2 * n_y)]
    upper = np.r_[target, np.full(2 * n_y, INF)]
    cost = np.r_[np.zeros(n_x), np.ones(n_y), np.zeros(n_y)]
    col_upper = np.r_[x_upper, np.full(n_y, INF), np.ones(n_y)]
    integer = np.ones(n_x + 2 * n_y, bool)  # y = min(x, x*) is integral: so is the objective
    status, solution, _ = solve_mip(
        matrix,
        lower,
        upper,
        cost,
        col_upper,
        integer,
        threads=single_threaded_highs(),
        mip_rel_gap=0.0,
        mip_abs_gap=0.99,  # the objective is an integer: a gap below 1 proves optimality
        random_seed=problem.seed % 2_147_483_647,
        **Limits.start(problem.time_limit, problem.node_limit).options(),
    )
    if solution is None:
        return problem.blocks, persons.astype(np.int64), np.full(n_blocks, np.nan), status
    shared = np.bincount(
        problem.first_block, weights=np.rint(solution[n_x : n_x + n_y]), minlength=n_blocks
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        solvar = np.where(persons > 0, (persons - shared) / persons, np.nan)
    return problem.blocks, persons.astype(np.int64), solvar, status


def variability_problems(
    release: Release,
    reconstruction: Reconstruction,
    seed: int = 0,
    time_limit: float = 300.0,
    node_limit: int | None = None,
) -> list[VariabilityProblem]:
    """One problem per tract reconstructed exactly (a least-deviation reconstruction does not
    satisfy the published counts, so "another solution of the same tables" is undefined there)."""
    tables, _ = person_tables(release)
    geography = release.geography
    blocks = geography.blocks
    counts = side_by_side(release, tables, "block")
    persons = reconstruction.persons
    first = (
        persons.with_columns(
            code=pl.Series(parse_geoids(persons["block"], "block")),
            cell=pl.Series(resolution(tables).class_of[reconstruction.domain_cells()]),
        )
        .group_by("code", "cell")
        .len()
    )
    block_index = np.searchsorted(blocks, first["code"].to_numpy())
    first_cell, first_count = first["cell"].to_numpy(), first["len"].to_numpy()
    _, tract_of_block = geography.units("tract")
    tract_codes = geography.codes("tract")
    children = np.random.SeedSequence(seed).spawn(len(tract_codes))
    tract_of_record = tract_of_block[block_index]
    inexact = set(
        parse_geoids(
            reconstruction.tracts.filter(pl.col("mode") != "exact")["tract"], "tract"
        ).tolist()
    )
    # blocks are sorted, so each tract's blocks are one run; records are grouped by tract once
    block_bounds = np.searchsorted(tract_of_block, np.arange(len(tract_codes) + 1))
    record_order = np.argsort(tract_of_record, kind="stable")
    record_bounds = np.searchsorted(tract_of_record[record_order], np.arange(len(tract_codes) + 1))
    problems = []
    for t, code in enumerate(tract_codes):
        rows = np.arange(block_bounds[t], block_bounds[t + 1])
        mine = record_order[record_bounds[t] : record_bounds[t + 1]]
        if not mine.size or int(code) in inexact:
            continue
        local = block_index[mine] - block_bounds[t]
        problems.append(
            VariabilityProblem(
                tract=int(code),
                blocks=blocks[rows],
                block_counts=counts[rows],
                tables=tables,
                first_block=local,
                first_cell=first_cell[mine],
                first_count=first_count[mine].astype(np.int64),
                seed=int(children[t].generate_state(1)[0]),
                time_limit=time_limit,
                node_limit=node_limit,
            )
        )
    return problems


def solution_variability(
    release: Release,
    reconstruction: Reconstruction,
    workers: Executor | int | None = None,
    seed: int = 0,
    time_limit: float = 300.0,
    node_limit: int | None = None,
) -> pl.DataFrame:
    """solvar per populated block: block, persons, solvar, status, unique (proven the only
    reconstruction, :func:`proven_zero`)."""
    problems = variability_problems(release, reconstruction, seed, time_limit, node_limit)
    sizes = [float(np.max(p.block_counts[:, 0], initial=0)) ** 2 for p in problems]
    results = run_tasks(solve_variability, problems, workers, "solution variability", sizes)
    frame = pl.DataFrame(
        {
            "block": geoid_strings(np.concatenate([r[0] for r in results]), "block")
            if results
            else pl.Series([], dtype=pl.String),
            "persons": np.concatenate([r[1] for r in results]) if results else [],
            "solvar": np.concatenate([r[2] for r in results]) if results else [],
            "status": [r[3] for r in results for _ in r[0]],
        },
        schema={"block": pl.String, "persons": pl.Int64, "solvar": pl.Float64, "status": pl.String},
    )
    populated = frame.filter(pl.col("persons") > 0)
    return populated.with_columns(unique=proven_zero(populated))


NO_EXACT_TRACT = (
    "no tract was reconstructed exactly: solution variability is measured for exactly solved "
    "tracts only (a least-deviation reconstruction has no feasible set to vary over)"
)


def proven_zero(solvar: pl.DataFrame) -> pl.Expr:
    """Which rows of ``solvar`` prove their block's reconstruction the only one: solution
    variability 0 from a program solved to optimality. A program stopped early by a limit
    proves nothing (its best solution so far may share every record while another shares
    fewer); a frame without ``status`` (written before statuses were kept) is taken as solved."""
    solved = pl.col("status") == OPTIMAL_STATUS if "status" in solvar.columns else pl.lit(True)
    return (solved & (pl.col("solvar") == 0)).fill_null(False)


def proven_solvar_zero(solvar: pl.DataFrame) -> pl.Series:
    """The blocks (int64 geocodes) whose reconstruction is proven the only one
    (:func:`proven_zero`)."""
    return solvar.filter(proven_zero(solvar))["block"].cast(pl.Int64)


def variability_summary(solvar: pl.DataFrame) -> dict[str, Any]:
    """Share of blocks and persons in proven solvar-0 blocks (:func:`proven_zero`), quantiles
    and maximum; the shares are not measured (with the reason) when no block was."""
    values = solvar["solvar"].drop_nulls().drop_nans()
    zero = solvar.filter(proven_zero(solvar))
    total_persons = int(solvar["persons"].sum())
    none = as_json(NotMeasured(NO_EXACT_TRACT))
    return {
        "blocks": solvar.height,
        "blocks_solvar_zero": zero.height,
        "share_blocks_solvar_zero": zero.height / solvar.height if solvar.height else none,
        "persons_in_solvar_zero_blocks": int(zero["persons"].sum()),
        "share_persons_solvar_zero": int(zero["persons"].sum()) / total_persons
        if total_persons
        else none,
        "person_weighted_solvar": float(values_by_person(solvar)) if total_persons else none,
        "solvar_p75": float(np.quantile(values.to_numpy(), 0.75)) if len(values) else np.nan,
        "solvar_max": float(values.to_numpy().max()) if len(values) else np.nan,
        "cumulative_share_of_blocks": {
            f"{x:g}": float((values.to_numpy() <= x).mean()) if len(values) else np.nan
            for x in CDF_POINTS
        },
    }


def values_by_person(solvar: pl.DataFrame) -> float:
    """The cumulative, person-weighted solution variability: Σ persons × solvar / Σ persons over
    the blocks measured (the 2010 study's 20.1%)."""
    measured = solvar.filter(pl.col("solvar").is_not_null() & pl.col("solvar").is_not_nan())
    persons = measured["persons"].to_numpy().astype(np.float64)
    values = measured["solvar"].to_numpy().astype(np.float64)
    return float(persons @ values / persons.sum()) if persons.sum() else float("nan")


CDF_POINTS = (0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1)
"""solvar values at which the cumulative share of blocks is reported."""


def attack(
    release: Release,
    workers: Executor | int | None,
    seed: int,
    time_limit: float,
    with_variability: bool,
    checkpoint: Path | None = None,
    knowledge: str = "naive",
    draws: int = 0,
    node_limit: int | None = None,
    block_only: bool = False,
) -> tuple[Reconstruction, dict[str, Any], pl.DataFrame | None]:
    """Reconstruct a release (knowing what ``knowledge`` says; with ``block_only``, from its
    block-level tables alone) and, if asked, measure solution variability of the published block
    tables; with their figures."""
    start = time.perf_counter()
    recon = reconstruct(
        release, workers, seed, time_limit, checkpoint, knowledge, draws, node_limit, block_only
    )
    metrics: dict[str, Any] = {
        "mechanism": release.mechanism,
        "knowledge": knowledge,
        "block_only": block_only,
        "draws": draws,
        "time_limit": time_limit,
        "node_limit": node_limit,
        **recon.metrics(),
        "seconds": round(time.perf_counter() - start, 3),
    }
    solvar = None
    if with_variability:
        start = time.perf_counter()
        solvar = solution_variability(release, recon, workers, seed, time_limit, node_limit)
        metrics["variability"] = {
            **variability_summary(solvar),
            "seconds": round(time.perf_counter() - start, 3),
        }
    return recon, metrics, solvar
