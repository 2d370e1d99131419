"""TopDown's rounder: the L2 solution to integers, per parent, by a multi-pass L1 integer program.

Each child keeps the floor f_c of its continuous histogram; the parent's leftover
d = parent − Σ_c f_c (a non-negative integer per cell) is handed out as binaries b_c
(Σ_c b_c = d), so every child gets f_c or f_c + 1 per cell (docs/topdown.md, *Rounder*).
Pass by pass, b minimises Σ_q Σ_c ||Q_q b_c − round(Q_q r_c)||₁ (r_c = x_c − f_c the fractional
parts) with the queries of earlier passes held at the values those passes chose; the children's
invariant totals and hhgq bounds are kept on f_c + b_c. Solved by HiGHS.

Binaries are offered first only where a child has a fractional part (Σ_c r_c = d, so that always
covers the leftover); if the bounds then cannot be met, every allowed child is offered. A row over
a single binary costs |b − t|, which is linear in b, so only rows over several binaries need an
auxiliary variable.

At the root (no parent) binaries exist for the cells with a fractional part and the root's invariant
total fixes how many of them are one.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from sdclab.core.arrays import FloatArray, IntArray
from sdclab.core.optimize.highs import INF, solve_mip
from sdclab.core.optimize.parent_problem import (
    INTEGRAL_WITHIN,
    InfeasibleProblem,
    ParentProblem,
    cell_sum_operator,
    child_operator,
    child_sum_operator,
)

GAP = 1e-3
"""Relative optimality gap at which a rounder pass stops. HiGHS measures it on the objective as
passed, which leaves out the constant of the single-binary rows (|b − 1| is passed as −b): that
objective is negative and larger in magnitude than the L1 distance itself, so the gap allowed is a
few times 0.1% of the distance (16 persons of 3,580, 0.45%, on the second pass of a 69-tract
county at 1M persons) — a few tenths of a person per child, far inside the measurement noise."""
NODES = 1
"""Branch-and-bound node limit of one rounder pass (the root node: its LP, cuts and heuristics;
on TopDown's sibling problems HiGHS usually proves optimality there); the best integer solution
found by then is taken (every feasible solution meets all the constraints: only the accuracy
of the split is at stake). A pass with no integer solution by then runs on until its first one.
A node limit, unlike a time limit, keeps the output independent of the machine's load and the
number of workers."""


INTERIOR_POINT_ABOVE = 5000
"""Relaxations with more columns than this are solved by HiGHS's interior point method with
crossover (a vertex, as simplex gives): the rounder's LPs are highly degenerate, and on large
ones (a county's 55 tracts: 38,000 columns) dual simplex is about five times slower."""


def round_l1(problem: ParentProblem, x: FloatArray) -> IntArray:
    """Children × n integer histograms from the L2 solution ``x`` (children × n)."""
    snapped = np.where(np.abs(x - np.rint(x)) < INTEGRAL_WITHIN, np.rint(x), x)
    floor = np.floor(snapped).astype(np.int64)
    fraction: FloatArray = (snapped - floor).astype(np.float64)
    if problem.parent is not None:
        leftover = problem.parent - floor.sum(axis=0)
        if (leftover < 0).any():
            raise InfeasibleProblem("the L2 solution exceeds its parent after flooring")
        cells = leftover > 0
    else:
        leftover = None
        cells = (fraction > 0).any(axis=0)
    try:
        return _round(problem, floor, fraction, leftover, cells, fraction > 0)
    except InfeasibleProblem:
        # rare: the bounds need a child to take a cell it has no fraction of
        return _round(problem, floor, fraction, leftover, cells, problem.allowed)


def _round(
    problem: ParentProblem,
    floor: IntArray,
    fraction: FloatArray,
    leftover: IntArray | None,
    cells: npt.NDArray[np.bool_],
    candidates: npt.NDArray[np.bool_],
) -> IntArray:
    """Hand out the leftover as binaries on the candidate (child, cell) pairs."""
    index = problem.variables(cells, candidates)
    n_b = int((index >= 0).sum())
    if n_b == 0:
        if cells.any():
            raise InfeasibleProblem("leftover persons but no candidate child")
        return floor
    rows: list[tuple[sp.csr_matrix, FloatArray, FloatArray]] = []
    if leftover is not None:
        d = leftover[cells].astype(float)
        rows.append((cell_sum_operator(index, cells), d, d))
    fixed_total = problem.total_of_fixed()
    if fixed_total.any():
        assert problem.totals is not None
        need = (problem.totals - floor.sum(axis=1))[fixed_total].astype(float)
        rows.append((child_sum_operator(index)[np.flatnonzero(fixed_total)], need, need))
    hhgq_floor = (problem.hhgq @ floor.T).T
    rows.append(
        (
            child_operator(problem.hhgq, index),
            (problem.hhgq_lower - hhgq_floor).ravel().astype(float),
            (problem.hhgq_upper - hhgq_floor).ravel().astype(float),
        )
    )
    b = np.zeros(n_b)
    for queries in problem.rounder_passes:
        b = _solve_pass(problem, index, fraction, queries, rows)
        for name in queries:
            op = child_operator(problem.queries[name], index)
            value = np.rint(op @ b)
            rows.append((op, value, value))
    out = floor.copy()
    out[index >= 0] += np.rint(b[index[index >= 0]]).astype(np.int64)
    return out


def _solve_pass(
    problem: ParentProblem,
    index: IntArray,
    fraction: FloatArray,
    queries: tuple[str, ...],
    rows: list[tuple[sp.csr_matrix, FloatArray, FloatArray]],
) -> FloatArray:
    n_b = int((index >= 0).sum())
    cost_b = np.zeros(n_b)
    ops, targets = [], []
    for name in queries:
        q = problem.queries[name]
        op = child_operator(q, index)
        target = np.rint(q @ fraction.T).T.ravel()
        per_row = np.diff(op.indptr)
        # a row over one binary: |b − t| is linear in b (b − t if t ≤ 0, t − b if t ≥ 1)
        single = np.flatnonzero(per_row == 1)
        np.add.at(cost_b, op.indices[op.indptr[single]], np.where(target[single] <= 0, 1.0, -1.0))
        wide = np.flatnonzero(per_row > 1)
        ops.append(op[wide])
        targets.append(target[wide])
    objective = sp.vstack(ops, format="csr") if ops else sp.csr_matrix((0, n_b))
    target = np.concatenate([np.zeros(0), *targets])
    n_e = objective.shape[0]
    eye = sp.identity(n_e, format="csr")
    blocks = [sp.hstack([m, sp.csr_matrix((m.shape[0], n_e))]) for m, _, _ in rows]
    # e ≥ |objective·b − target|:  objective·b − e ≤ target  and  objective·b + e ≥ target
    matrix = sp.vstack(
        [*blocks, sp.hstack([objective, -eye]), sp.hstack([objective, eye])], format="csc"
    )
    lower = np.concatenate([*(lo for _, lo, _ in rows), np.full(n_e, -INF), target])
    upper = np.concatenate([*(hi for _, _, hi in rows), target, np.full(n_e, INF)])
    cost = np.concatenate([cost_b, np.ones(n_e)])
    col_upper = np.concatenate([np.ones(n_b), np.full(n_e, INF)])
    integer = np.concatenate([np.ones(n_b, bool), np.zeros(n_e, bool)])
    status, solution = _fix_and_solve(matrix, lower, upper, cost, col_upper, integer)
    if solution is None:
        status, solution, _ = solve_mip(
            matrix, lower, upper, cost, col_upper, integer, mip_rel_gap=GAP, mip_max_nodes=NODES
        )
    if solution is None and status != "Infeasible":
        # nothing feasible yet: go on without a limit, up to the first integer solution
        status, solution, _ = solve_mip(
            matrix, lower, upper, cost, col_upper, integer, mip_max_improving_sols=1
        )
    if solution is None:
        raise InfeasibleProblem(f"rounder pass {queries}: HiGHS status {status}")
    return solution[:n_b]


def _fix_and_solve(
    matrix: sp.csc_matrix,
    lower: FloatArray,
    upper: FloatArray,
    cost: FloatArray,
    col_upper: FloatArray,
    integer: npt.NDArray[np.bool_],
) -> tuple[str, FloatArray | None]:
    """The LP relaxation, then the integer program over the binaries it left fractional only.

    The rounder's relaxations are nearly integral (≈ 2% of the binaries fractional on a county's
    tracts, with the LP bound within one unit of the integer optimum), and HiGHS spends seconds
    to minutes in the root node of the full program. Fixing the binaries the LP settled keeps
    every constraint (the rest are re-solved as integers); None when that restricted program has
    no solution, and the full program is solved instead.
    """
    solver = "ipm" if matrix.shape[1] > INTERIOR_POINT_ABOVE else "simplex"
    status, relaxed, _ = solve_mip(
        matrix, lower, upper, cost, col_upper, integer, solve_relaxation=True, solver=solver
    )
    if relaxed is None:
        return status, None
    settled = integer & (np.abs(relaxed - np.rint(relaxed)) < INTEGRAL_WITHIN)
    col_lower = np.where(settled, np.rint(relaxed), 0.0)
    col_upper = np.where(settled, np.rint(relaxed), col_upper)
    status, solution, _ = solve_mip(
        matrix,
        lower,
        upper,
        cost,
        col_upper,
        integer,
        col_lower=col_lower,
        mip_rel_gap=GAP,
        mip_max_nodes=NODES,
    )
    return status, solution
