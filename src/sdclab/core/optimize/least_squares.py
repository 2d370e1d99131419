"""TopDown's L2 step: multi-pass weighted non-negative least squares per parent (a sparse QP).

Per pass (docs/topdown.md, *Post-processing*) the children's continuous histograms x_c ≥ 0 minimise
Σ_q Σ_c w_{q,c} ||Q_q x_c − ỹ_{q,c}||² over the pass's queries, subject to Σ_c x_c = parent, the
children's invariant totals and hhgq bounds, and — for every query of an earlier pass — the
tolerance |Q_q x_c − ŷ_{q,c}| ≤ τ around the values that pass chose.

The quadratic stays sparse: a query row over a few variables enters the Hessian directly; a wider
row gets one auxiliary variable z = Q_q x_c (a total over thousands of cells costs one row, not a
dense block).

On τ: production sets τ = (minimum feasible tolerance, from an auxiliary LP) + 0.1. The previous
pass's own solution meets the tolerance constraints at τ = 0 by construction, so that minimum is the
solver's residual; sdclab uses τ = 0.1 plus the previous pass's measured primal residual and skips
the auxiliary LP.
"""

from __future__ import annotations

from dataclasses import dataclass

import clarabel
import numpy as np
import osqp
import scipy.sparse as sp

from sdclab.core.arrays import FloatArray, IntArray
from sdclab.core.optimize.parent_problem import (
    ZERO_BELOW,
    InfeasibleProblem,
    ParentProblem,
    cell_sum_operator,
    child_operator,
    child_sum_operator,
)
from sdclab.core.optimize.root_qp import solve_root_qp
from sdclab.core.optimize.sibling_qp import (
    NotConverged,
    SiblingQP,
    project_cells,
    solve_sibling_qp,
)

TOLERANCE = 0.1
"""τ added to the minimum feasible tolerance for queries fixed in an earlier pass."""
OPTIMALITY, FEASIBILITY = 1e-6, 1e-7
"""Production's solver tolerances (relative gap, primal/dual feasibility)."""

ACCEPTED = {"Solved", "AlmostSolved"}
SCALE_ABOVE = 1e5
"""Bounds above this many persons: the QP is solved in units of (largest bound / SCALE_ABOVE)."""
OSQP_EPS = 1e-5
"""OSQP's ADMM stops at this tolerance; its polish step then solves the KKT system of the active
set it found exactly, and only a successfully polished solution is accepted (else Clarabel runs at
the production tolerances). On TopDown's block problems the polished objective agrees with the
one at 10⁻⁷ to eight significant digits, and is reached sooner."""
OSQP_ITERATIONS = 1500
"""OSQP solves TopDown's sibling problems in a few hundred iterations; one that needs more (the
root's single large histogram converges slowly) goes to the interior point method instead."""
ROOT_OSQP_MAX_VARIABLES = 50_000
"""A root (one histogram, no parent) that :mod:`root_qp` could not solve goes, if it has more
variables than this, straight to the general interior point method: on a root this large (the
dhc nation has 229,320 cells) OSQP reaches its iteration limit, and the time it spends getting
there is lost."""
DIRECT_MAX_CELLS = 1500
"""Sibling problems on more support cells than this go to the structured ADMM: the general
solvers' KKT factorisation fills in over the cells the children share (a county of 25 tracts on
4,198 cells did not finish factoring in several minutes)."""
SMALL_CHILD = 500
"""Children holding at most this many persons on average (blocks) go to ADMM on any number of
cells: OSQP's factorisation grows with the number of children sharing the cells (a block group
of 53 blocks on 1,034 cells is hundreds of times slower by OSQP than by ADMM, whose polish is
cheap on small children), while on a few large children (69 tracts of a PL94 county on 808
cells) OSQP is the faster."""
DIRECT_MAX_VARIABLES = 4000
"""Problems with at most this many (child, cell) variables always go to OSQP."""
DIRECT_ROW_CELLS = 8
"""Query rows over at most this many variables enter the Hessian directly; wider rows get an
auxiliary variable (a dense k × k block would cost more than one extra variable and row)."""


@dataclass(frozen=True)
class _Rows:
    """Weighted objective rows: Σ weight·(matrix·x − target)²."""

    matrix: sp.csr_matrix
    weight: FloatArray
    target: FloatArray

    @staticmethod
    def stack(parts: list[_Rows], n: int) -> tuple[sp.csr_matrix, FloatArray, FloatArray]:
        if not parts:
            return sp.csr_matrix((0, n)), np.zeros(0), np.zeros(0)
        return (
            sp.vstack([p.matrix for p in parts], format="csr"),
            np.concatenate([p.weight for p in parts]),
            np.concatenate([p.target for p in parts]),
        )


def solve_l2(problem: ParentProblem) -> FloatArray:
    """Children × n continuous non-negative histograms after all L2 passes (tiny entries zeroed).

    A pass over type-level queries only (the totals-first pass) is reduced exactly to persons
    per child and hhgq type. The root's passes go to the structured interior point method of
    :mod:`root_qp`. Other passes go to the general sparse QP solvers (OSQP, Clarabel)
    when :func:`_direct` says so (one child, a small problem, or few cells shared by large
    children), and otherwise to the structured ADMM of :mod:`sibling_qp` (the general solvers'
    factorisation fills in over the cells the children share); a pass ADMM cannot finish within
    its iteration limit (or a root :mod:`root_qp` cannot solve) goes to the general solvers.
    """
    if problem.n_cells == 0 or not problem.allowed.any():
        return np.zeros(problem.allowed.shape)  # an empty parent: nothing to split
    fixed: dict[str, FloatArray] = {}
    x: FloatArray | None = None
    slack = 0.0
    for queries in problem.l2_passes:
        qp = sibling_pass(problem, queries, fixed, TOLERANCE + slack)
        type_rows = None if fixed else by_type(problem, queries)
        if type_rows is not None:
            x = _solve_by_type(problem, queries, type_rows)
        elif problem.parent is None:
            try:
                x = solve_root_qp(qp)
            except NotConverged:
                x = _solve_generic(problem, queries, fixed, TOLERANCE + slack)
        elif _direct(problem):
            x = _solve_generic(problem, queries, fixed, TOLERANCE + slack)
        else:
            try:
                x, _ = solve_sibling_qp(qp, start=x)
            except NotConverged:
                x = _solve_generic(problem, queries, fixed, TOLERANCE + slack)
        slack = bound_violation(qp, x)
        for name in queries:
            fixed[name] = (problem.queries[name] @ x.T).T
    out = np.zeros(problem.allowed.shape) if x is None else np.where(problem.allowed, x, 0.0)
    out[out < ZERO_BELOW] = 0.0
    return out


def _direct(problem: ParentProblem) -> bool:
    """Whether a pass goes to the general QP solvers rather than the structured ADMM."""
    if problem.n_children == 1 or problem.allowed.size <= DIRECT_MAX_VARIABLES:
        return True
    assert problem.parent is not None  # only the root has no parent, and it has one child
    small_children = problem.parent.sum() <= SMALL_CHILD * problem.n_children
    return problem.n_cells <= DIRECT_MAX_CELLS and not small_children


def sibling_pass(
    problem: ParentProblem,
    queries: tuple[str, ...],
    fixed: dict[str, FloatArray],
    tolerance: float,
) -> SiblingQP:
    """One pass of ``problem`` in the form of :class:`SiblingQP`.

    Query rows over one support cell (the detailed query) become diagonal weights; wider rows
    stay rows. The bounds are the invariant totals, the binding hhgq bounds and the values of
    earlier passes' queries ± ``tolerance``.
    """
    children, n = problem.allowed.shape
    diag_weight = np.zeros((children, n))
    diag_sum = np.zeros((children, n))
    rows, row_weight, row_target = [], [], []
    for name in queries:
        matrix = problem.queries[name]
        weight = problem.weights[name]
        target = problem.targets[name]
        single = np.flatnonzero(np.diff(matrix.indptr) == 1)
        cells = matrix.indices[matrix.indptr[single]]
        np.add.at(diag_weight.T, cells, np.broadcast_to(weight, (len(cells), children)))
        np.add.at(diag_sum.T, cells, (weight[:, None] * target[:, single]).T)
        wide = np.flatnonzero(np.diff(matrix.indptr) > 1)
        rows.append(matrix[wide])
        row_weight.append(np.repeat(weight[:, None], len(wide), axis=1))
        row_target.append(target[:, wide])
    bounds, lower, upper = [], [], []
    fixed_total = problem.total_of_fixed()
    if fixed_total.any():
        assert problem.totals is not None
        bounds.append(sp.csr_matrix(np.ones((1, n))))
        total = problem.totals.astype(float)[:, None]
        lower.append(np.where(fixed_total[:, None], total, -np.inf))
        upper.append(np.where(fixed_total[:, None], total, np.inf))
    hhgq_upper = problem.binding_upper()
    hhgq_lower = np.where(problem.hhgq_lower > 0, problem.hhgq_lower.astype(float), -np.inf)
    binding = np.flatnonzero(
        np.isfinite(hhgq_upper).any(axis=0) | np.isfinite(hhgq_lower).any(axis=0)
    )
    bounds.append(problem.hhgq[binding].astype(float))
    lower.append(hhgq_lower[:, binding])
    upper.append(hhgq_upper[:, binding])
    for name, value in fixed.items():
        bounds.append(problem.queries[name].astype(float))
        lower.append(value - tolerance)
        upper.append(value + tolerance)
    return SiblingQP(
        mask=problem.allowed,
        parent=None if problem.parent is None else problem.parent.astype(float),
        diag_weight=diag_weight,
        diag_target=np.divide(
            diag_sum, diag_weight, out=np.zeros_like(diag_sum), where=diag_weight > 0
        ),
        rows=sp.vstack(rows, format="csr").astype(float) if rows else sp.csr_matrix((0, n)),
        row_weight=np.hstack(row_weight) if rows else np.zeros((children, 0)),
        row_target=np.hstack(row_target) if rows else np.zeros((children, 0)),
        bounds=sp.vstack(bounds, format="csr"),
        lower=np.hstack(lower),
        upper=np.hstack(upper),
    )


def by_type(problem: ParentProblem, queries: tuple[str, ...]) -> dict[str, sp.csr_matrix] | None:
    """The queries as rows over hhgq types, if every row is a union of whole types, else None.

    Such a pass (e.g. the totals-first pass) depends on each child only through its persons per
    type, and every split of the parent's persons per type among the children is the type sums
    of some children's histograms: the pass reduces exactly to children × 8 variables.
    """
    if problem.parent is None:
        return None
    sizes = np.asarray(problem.hhgq.sum(axis=1)).ravel()
    allowed_per_type = problem.allowed.astype(float) @ problem.hhgq.T
    if not ((allowed_per_type == 0) | (allowed_per_type == sizes[None, :])).all():
        return None  # a child may hold some cells of a type and not others
    out = {}
    for name in queries:
        per_type = (problem.queries[name] @ problem.hhgq.T).toarray()
        if not ((per_type == 0) | (per_type == sizes[None, :])).all():
            return None
        out[name] = sp.csr_matrix((per_type > 0).astype(float))
    return out


def _solve_by_type(
    problem: ParentProblem, queries: tuple[str, ...], rows: dict[str, sp.csr_matrix]
) -> FloatArray:
    """A pass over type-level queries: solve for persons per (child, type), then split each
    child's type total over the type's cells in proportion to the parent."""
    assert problem.parent is not None
    type_of_cell = problem.hhgq.tocsc().indices
    parent_by_type = problem.hhgq @ problem.parent
    present = np.flatnonzero(parent_by_type > 0)
    allowed = np.zeros((problem.n_children, len(present)), bool)
    for k, h in enumerate(present):
        allowed[:, k] = problem.allowed[:, type_of_cell == h].any(axis=1)
    aggregated = ParentProblem(
        allowed=allowed,
        parent=parent_by_type[present],
        totals=problem.totals,
        hhgq=sp.csr_matrix(np.eye(problem.hhgq.shape[0])[:, present]),
        hhgq_lower=problem.hhgq_lower,
        hhgq_upper=problem.hhgq_upper,
        queries={name: rows[name][:, present] for name in queries},
        targets={name: problem.targets[name] for name in queries},
        weights={name: problem.weights[name] for name in queries},
        l2_passes=(queries,),
    )
    y = _solve_generic(aggregated, queries, {}, TOLERANCE)
    position = np.zeros(problem.hhgq.shape[0], np.int64)
    position[present] = np.arange(len(present))
    column = position[type_of_cell]
    split = y[:, column] * (problem.parent / parent_by_type[type_of_cell])[None, :]
    return project_cells(split, problem.allowed, problem.parent.astype(float))


def bound_violation(qp: SiblingQP, x: FloatArray) -> float:
    """The largest amount by which ``x`` misses a bound row of ``qp``."""
    kx = (qp.bounds @ x.T).T
    return float(np.maximum(np.maximum(qp.lower - kx, kx - qp.upper), 0.0).max(initial=0.0))


def _solve_generic(
    problem: ParentProblem,
    queries: tuple[str, ...],
    fixed: dict[str, FloatArray],
    tolerance: float,
) -> FloatArray:
    """One pass through the general sparse QP solvers (OSQP, then Clarabel), children × n."""
    index = problem.variables()
    operators = {name: child_operator(q, index) for name, q in problem.queries.items()}
    flat = {name: value.ravel() for name, value in fixed.items()}
    v, _ = _solve_pass(problem, index, operators, queries, flat, tolerance)
    out = np.zeros(problem.allowed.shape)
    out[index >= 0] = v[index[index >= 0]]
    return out


def _solve_pass(
    problem: ParentProblem,
    index: IntArray,
    operators: dict[str, sp.csr_matrix],
    queries: tuple[str, ...],
    fixed: dict[str, FloatArray],
    tolerance: float,
) -> tuple[FloatArray, float]:
    n_x = int((index >= 0).sum())
    narrow: list[_Rows] = []
    wide: list[_Rows] = []
    for name in queries:
        op = operators[name]
        weight = np.repeat(problem.weights[name], problem.queries[name].shape[0])
        target = problem.targets[name].ravel()
        per_row = np.diff(op.indptr)
        for chosen, out in (
            ((per_row >= 1) & (per_row <= DIRECT_ROW_CELLS), narrow),
            (per_row > DIRECT_ROW_CELLS, wide),
        ):
            pick = np.flatnonzero((weight > 0) & chosen)
            out.append(_Rows(op[pick], weight[pick], target[pick]))
    direct, dw, dt = _Rows.stack(narrow, n_x)
    aux, w, t = _Rows.stack(wide, n_x)
    n_z = aux.shape[0]
    # Σ w·(row·x − t)²: rows of few cells enter the Hessian directly, wide rows via z = row·x
    hessian = sp.block_diag(
        [(direct.T @ sp.diags(2 * dw) @ direct).tocsc(), sp.diags(2 * w)], format="csc"
    )
    linear = np.concatenate([-2 * (direct.T @ (dw * dt)), -2 * w * t])

    def pad(m: sp.spmatrix, z_part: sp.spmatrix | None = None) -> sp.csr_matrix:
        right = z_part if z_part is not None else sp.csr_matrix((m.shape[0], n_z))
        return sp.hstack([m, right], format="csr")

    constraints: list[tuple[sp.csr_matrix, FloatArray, FloatArray]] = []

    def equal(m: sp.spmatrix, value: FloatArray) -> None:
        constraints.append((m, value, value))

    def between(m: sp.spmatrix, low: FloatArray, high: FloatArray) -> None:
        constraints.append((m, low, high))

    equal(pad(-aux, sp.identity(n_z)), np.zeros(n_z))
    if problem.parent is not None:
        equal(pad(cell_sum_operator(index)), problem.parent.astype(float))
    fixed_total = problem.total_of_fixed()
    if fixed_total.any():
        assert problem.totals is not None
        sums = child_sum_operator(index)[np.flatnonzero(fixed_total)]
        equal(pad(sums), problem.totals[fixed_total].astype(float))
    between(pad(sp.identity(n_x, format="csr")), np.zeros(n_x), np.full(n_x, np.inf))
    hhgq = child_operator(problem.hhgq, index)
    upper = problem.binding_upper().ravel()
    lower = problem.hhgq_lower.ravel().astype(float)
    bounded = np.flatnonzero(np.isfinite(upper) | (lower > 0))
    between(pad(hhgq[bounded]), lower[bounded], upper[bounded])
    for name, value in fixed.items():
        between(pad(operators[name]), value - tolerance, value + tolerance)
    matrix = sp.vstack([m for m, _, _ in constraints], format="csc")
    low = np.concatenate([lo for _, lo, _ in constraints])
    high = np.concatenate([hi for _, _, hi in constraints])
    large_root = problem.parent is None and n_x > ROOT_OSQP_MAX_VARIABLES
    v = solve_qp(
        hessian, linear, matrix, low, high, label=f"L2 pass {queries}", first_order=not large_root
    )
    equalities = low == high
    residual = float(np.abs(matrix[equalities] @ v - low[equalities]).max(initial=0.0))
    return v[:n_x], residual


def solve_qp(
    hessian: sp.csc_matrix,
    linear: FloatArray,
    matrix: sp.csc_matrix,
    low: FloatArray,
    high: FloatArray,
    label: str = "QP",
    first_order: bool = True,
) -> FloatArray:
    """min ½ vᵀHv + cᵀv subject to low ≤ A v ≤ high (a convex QP).

    OSQP (ADMM, then an active-set polish that makes the solution exact up to round-off) solves
    nearly all of TopDown's problems several times faster than an interior point method; when it
    does not end with a polished solution, or ``first_order`` is False, Clarabel (interior point)
    solves the problem.

    Problems with bounds above :data:`SCALE_ABOVE` (nations and states of millions) are solved
    in units of ``scale`` persons: the same problem (its set of minimisers), which the interior
    point method, whose tolerances are relative, otherwise reports infeasible.
    """
    finite = np.abs(np.concatenate([low[np.isfinite(low)], high[np.isfinite(high)]]))
    scale = max(1.0, float(finite.max(initial=0.0)) / SCALE_ABOVE)
    if scale > 1.0:
        linear, low, high = linear / scale, low / scale, high / scale
    if not first_order:
        return scale * _clarabel(hessian, linear, matrix, low, high, label)
    solver = osqp.OSQP()
    solver.setup(
        P=sp.triu(hessian, format="csc"),
        q=linear,
        A=matrix,
        l=low,
        u=high,
        verbose=False,
        eps_abs=OSQP_EPS,
        eps_rel=OSQP_EPS,
        max_iter=OSQP_ITERATIONS,
        polishing=True,
    )
    result = solver.solve(raise_error=False)
    if result.info.status == "solved" and result.info.status_polish == 1:
        return scale * np.asarray(result.x)
    return scale * _clarabel(hessian, linear, matrix, low, high, label)


def _clarabel(
    hessian: sp.csc_matrix,
    linear: FloatArray,
    matrix: sp.csc_matrix,
    low: FloatArray,
    high: FloatArray,
    label: str,
) -> FloatArray:
    equal = low == high
    upper = ~equal & np.isfinite(high)
    lower = ~equal & np.isfinite(low)
    a = sp.vstack([matrix[equal], matrix[upper], -matrix[lower]], format="csc")
    b = np.concatenate([high[equal], high[upper], -low[lower]])
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.tol_gap_rel = OPTIMALITY
    settings.tol_feas = FEASIBILITY
    cones = [
        clarabel.ZeroConeT(int(equal.sum())),
        clarabel.NonnegativeConeT(int(upper.sum() + lower.sum())),
    ]
    solution = clarabel.DefaultSolver(
        sp.triu(hessian, format="csc"), linear, a, b, cones, settings
    ).solve()
    status = str(solution.status)
    if status not in ACCEPTED:
        raise InfeasibleProblem(f"{label}: solver status {status}")
    return np.asarray(solution.x)
