"""The maximum-entropy rows of a cell key p-table (docs/cellkey.md), solved exactly.

Each row maximises the entropy of the noise v subject to zero mean, a variance bound V (or
equality), a 1e-8 floor, a lower bound on p(0) and, optionally, probabilities non-decreasing up to
v = 0. A linear programme decides whether a row can be built at all. Each feasible row is then
solved as an exponential-cone programme by Clarabel (maximise Σ t_k with (t_k, p_k, 1) in the
exponential cone, i.e. t_k ≤ −p_k ln p_k, under the row's linear constraints) and polished: the
active constraints are read off the conic point, the entropy is minimised on that face by Newton's
method on its dual (the optimum there has the closed form p = exp(−1 − Aᵀy) on the entries off the
floor), constraints are added or released until the KKT conditions of the whole problem hold, and
only such a certified point is returned (the optimum is unique, the objective being strictly
convex), so the probabilities are exact to rounding. Should the polish not certify the conic point,
it runs again as the primal active-set method from a feasible row found by a linear programme. In
the ``pstay`` loop each relaxed row starts from the previous optimum, and the loop ends once the
bound no longer binds (the optimum cannot change when a slack bound is lowered).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import clarabel
import numpy as np
from scipy import optimize, sparse

from sdclab.core.arrays import BoolArray, FloatArray, IntArray
from sdclab.core.errors import InputError

FLOOR = 1e-8
"""Lower bound of every transition probability (ptable's ``epsilon``)."""
MAX_ITER = 20
"""Outer iterations that relax ``pstay`` (ptable's limit)."""
PSTAY_STEP = 0.05
"""Amount ``pstay`` is lowered by in each outer iteration."""
CONIC_TOLERANCE = 1e-10
"""Gap and feasibility tolerance of the conic solve that starts the polish."""
CONIC_MAX_ITER = 200
"""Iteration limit of the conic solve."""
ACTIVE = 1e-9
"""Slack below which the polish first takes a constraint as tight at the conic solution."""


def _mono_matrix(v: IntArray, mono: bool) -> FloatArray:
    """Rows p_k − p_{k+1} (≤ 0) for the entries up to v = 0 (ptable's left-side monotony)."""
    zero = np.flatnonzero(v == 0)
    if not mono or not zero.size or zero[0] == 0:
        return np.zeros((0, v.size))
    z = int(zero[0])
    matrix = np.zeros((z, v.size))
    matrix[np.arange(z), np.arange(z)] = 1.0
    matrix[np.arange(z), np.arange(1, z + 1)] = -1.0
    return matrix


def _variance_lp(
    v: IntArray, lb: FloatArray, mono_rows: FloatArray, sign: float
) -> tuple[float, FloatArray] | None:
    """The smallest (``sign`` 1) or largest (−1) variance of a feasible row, and such a row.

    None when no row meets the other constraints (sum, mean, bounds, mono) at all.
    """
    vf = v.astype(np.float64)
    result = optimize.linprog(
        sign * vf**2,
        A_ub=mono_rows if mono_rows.size else None,
        b_ub=np.zeros(len(mono_rows)) if mono_rows.size else None,
        A_eq=np.vstack([np.ones(v.size), vf]),
        b_eq=np.array([1.0, 0.0]),
        bounds=list(zip(lb, np.ones(v.size), strict=True)),
        method="highs",
        options={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10},
    )
    if result.status != 0:
        return None
    return sign * float(result.fun), np.clip(np.asarray(result.x, dtype=np.float64), lb, 1.0)


def _variance_range(
    v: IntArray, lb: FloatArray, mono_rows: FloatArray, largest: bool
) -> tuple[float, float] | None:
    """Smallest and (if ``largest``, else ∞) largest variance of a feasible row.

    None when no row meets the other constraints (sum, mean, bounds, mono) at all.
    """
    ends = []
    for sign in (1.0, -1.0) if largest else (1.0,):
        result = _variance_lp(v, lb, mono_rows, sign)
        if result is None:
            return None
        ends.append(result[0])
    return ends[0], ends[1] if largest else math.inf


def _feasible_row(
    v: IntArray, variance: float, lb: FloatArray, mono_rows: FloatArray, equality: bool
) -> FloatArray | None:
    """A row meeting every constraint, each inequality with the largest common slack s.

    A linear programme in (p, s): maximise s subject to the equalities and p ≥ lb + s,
    p_k − p_{k+1} + s ≤ 0 (mono) and Σ v² p + s ≤ V; s < 0 only where the row is feasible
    to the tolerance of the feasibility check alone.
    """
    n = v.size
    vf = v.astype(np.float64)
    w = vf**2
    equalities = np.vstack([np.ones(n), vf] + ([w] if equality else []))
    limits = np.concatenate([-lb, np.zeros(len(mono_rows)), [] if equality else [variance]])
    inequalities = np.vstack([-np.eye(n), mono_rows] + ([] if equality else [w[None, :]]))
    result = optimize.linprog(
        np.r_[np.zeros(n), -1.0],
        A_ub=np.hstack([inequalities, np.ones((len(inequalities), 1))]),
        b_ub=limits,
        A_eq=np.hstack([equalities, np.zeros((len(equalities), 1))]),
        b_eq=np.array([1.0, 0.0] + ([variance] if equality else [])),
        bounds=[(0.0, 1.0)] * n + [(-1.0, 1.0)],
        method="highs",
        options={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10},
    )
    if result.status != 0:
        return None
    return np.clip(np.asarray(result.x, dtype=np.float64)[:n], lb, 1.0)


def _conic(
    v: IntArray, variance: float, lb: FloatArray, mono_rows: FloatArray, equality: bool
) -> FloatArray:
    """Clarabel's solution of the entropy problem (close to, not exactly at, the optimum).

    Variables (p, t): maximise Σ t subject to (t_k, p_k, 1) in the exponential cone
    {(x, y, z): y·exp(x/y) ≤ z}, i.e. t_k ≤ −p_k ln p_k, and the linear constraints of the row.
    """
    n = v.size
    vf = v.astype(np.float64)
    w = vf**2
    equalities = np.vstack([np.ones(n), vf] + ([w] if equality else []))
    targets = np.array([1.0, 0.0] + ([variance] if equality else []))
    # a variance bound no row can exceed (V ≥ max v², as Σ v² p ≤ max v²) is left out
    loose = equality or variance >= float(np.max(w))
    eye = np.eye(n)
    inequalities = np.vstack([-eye, eye] + ([] if loose else [w[None, :]]) + [mono_rows])
    limits = np.concatenate(
        [-lb, np.ones(n), [] if loose else [variance], np.zeros(len(mono_rows))]
    )
    rows = np.vstack([equalities, inequalities])
    linear = sparse.hstack([sparse.csc_matrix(rows), sparse.csc_matrix((len(rows), n))])
    # cone k has the slacks (t_k, p_k, 1) = b − A x: rows −t_k, −p_k and an empty row with b = 1
    k = np.arange(n)
    cones_part = sparse.csc_matrix(
        (-np.ones(2 * n), (np.r_[3 * k, 3 * k + 1], np.r_[n + k, k])), shape=(3 * n, 2 * n)
    )
    matrix = sparse.vstack([linear, cones_part], format="csc")
    rhs = np.concatenate([targets, limits, np.tile([0.0, 0.0, 1.0], n)])
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.max_iter = CONIC_MAX_ITER
    settings.tol_gap_abs = settings.tol_gap_rel = settings.tol_feas = CONIC_TOLERANCE
    cones = [
        clarabel.ZeroConeT(len(equalities)),
        clarabel.NonnegativeConeT(len(inequalities)),
    ] + [clarabel.ExponentialConeT()] * n
    solution = clarabel.DefaultSolver(
        sparse.csc_matrix((2 * n, 2 * n)),
        np.r_[np.zeros(n), -np.ones(n)],
        matrix,
        rhs,
        cones,
        settings,
    ).solve()
    p = np.asarray(solution.x, dtype=np.float64)[:n]
    if not np.all(np.isfinite(p)):
        p = np.full(n, 1.0 / n)
    return np.clip(p, lb, 1.0)


def _lstsq(matrix: FloatArray, rhs: FloatArray) -> FloatArray:
    """Least-squares (minimum-norm) solution of matrix · x = rhs."""
    return np.asarray(np.linalg.lstsq(matrix, rhs, rcond=None)[0], dtype=np.float64)


def _solve(matrix: FloatArray, rhs: FloatArray) -> FloatArray:
    """matrix⁻¹ rhs for a symmetric positive (semi)definite matrix; least squares if singular."""
    try:
        factor = np.linalg.cholesky(matrix)
    except np.linalg.LinAlgError:
        return _lstsq(matrix, rhs)
    inner = np.linalg.solve(factor, rhs)
    return np.asarray(np.linalg.solve(factor.T, inner), dtype=np.float64)


def _newton_on_face(
    start: FloatArray, matrix: FloatArray, targets: FloatArray
) -> tuple[FloatArray, FloatArray] | None:
    """Minimise Σ x ln x subject to ``matrix`` x = ``targets``, near ``start``.

    Newton's method on the dual ψ(y) = Σ exp(−1 − matrixᵀ y) + targetsᵀ y, whose minimiser gives
    x = exp(−1 − matrixᵀ y) > 0 with ∇f + matrixᵀ y = 0; the rows are scaled to a largest entry
    of 1 for the iteration. Returns (x, y) once every row holds to 1e-12 of the size of its terms
    (Σ |a_k| x_k, at least 1), or None when the face has no positive point (ψ then decreases
    without bound).
    """
    largest = np.max(np.abs(matrix), axis=1, initial=0.0)
    row_scale = 1.0 / np.where(largest > 0, largest, 1.0)
    rows, goals = matrix * row_scale[:, None], targets * row_scale
    y = _lstsq(rows.T, -np.log(np.maximum(start, 1e-300)) - 1.0)

    def dual(y: FloatArray) -> tuple[float, FloatArray]:
        x = np.exp(np.minimum(-1.0 - rows.T @ y, 700.0))
        return float(x.sum() + goals @ y), x

    value, x = dual(y)
    gradient = goals - rows @ x
    for _ in range(200):
        if value < -1e-9:
            return None  # ψ ≥ −Σ x ln x ≥ 0 for every x ≥ 0 of the face (x ≤ 1): there is none
        size = float(np.max(np.abs(gradient)))
        if size <= 1e-14 * max(1.0, float(np.max(np.abs(rows) @ x))):
            break  # a few dozen ulps of the terms: rounding
        step = -_solve((rows * x) @ rows.T, gradient)
        slope = float(gradient @ step)
        t = 1.0
        while t >= 1e-10:
            trial, x_trial = dual(y + t * step)
            g_trial = goals - rows @ x_trial
            # Armijo on ψ, or (near the optimum, where ψ is flat to rounding) a smaller gradient
            if np.isfinite(trial) and (
                trial <= value + 0.25 * t * slope or np.max(np.abs(g_trial)) < 0.5 * size
            ):
                break
            t /= 2
        else:
            break
        y, x, value, gradient = y + t * step, x_trial, trial, g_trial
    size_of_terms = np.maximum(1.0, np.abs(matrix) @ x)
    if np.max(np.abs(matrix @ x - targets) / size_of_terms, initial=0.0) > 1e-12:
        return None
    return x, y * row_scale


def _equalise(p: FloatArray, tied: BoolArray) -> FloatArray:
    """``p`` with each run of tied mono pairs (entries equal to rounding) set to its largest."""
    block = np.cumsum(np.r_[True, ~tied])  # entries 0..len(tied); pair k joins k and k + 1
    top = np.full(int(block[-1]) + 1, -np.inf)
    np.maximum.at(top, block, p[: block.size])
    out = p.copy()
    out[: block.size] = top[block]
    return out


def _kkt_holds(p: FloatArray, base: FloatArray, tight: FloatArray, floor: BoolArray) -> bool:
    """Whether ln p + 1 + baseᵀy + tightᵀμ − Σ_{k ∈ floor} ν_k e_k = 0 with μ, ν ≥ 0.

    ``base`` holds the equality rows (y of any sign), ``tight`` the rows a of the inequalities
    a·p ≤ b that hold with equality at p. The multipliers are fitted by non-negative least squares
    (y as a difference of two non-negative vectors); the fit must leave no residual above 1e-9.
    """
    columns = np.vstack([base, -base, tight, -np.eye(p.size)[floor]]).T
    gradient = np.log(p) + 1.0
    multipliers = optimize.nnls(columns, -gradient, maxiter=50 * columns.shape[1])[0]
    return bool(np.max(np.abs(columns @ multipliers + gradient)) <= 1e-9)


@dataclass(frozen=True)
class _RowConstraints:
    """One row's constraints as the polish reads them: the equalities every point meets (sum 1,
    mean 0 and, with ``equality``, variance V), the variance bound, the floors and the mono rows."""

    squares: FloatArray
    """v², the coefficients of the variance."""
    variance: float
    lb: FloatArray
    mono_rows: FloatArray
    equality: bool
    scale: float
    """max(1, V): the variance's slacks are relative to it."""
    base: FloatArray
    base_targets: FloatArray
    pair: IntArray
    """Mono row k is p_k − p_{k+1} ≤ 0."""


def _row_constraints(
    v: IntArray, variance: float, lb: FloatArray, mono_rows: FloatArray, equality: bool
) -> _RowConstraints:
    """The constraints of the row of noise values ``v``."""
    vf = v.astype(np.float64)
    w = vf**2
    return _RowConstraints(
        squares=w,
        variance=variance,
        lb=lb,
        mono_rows=mono_rows,
        equality=equality,
        scale=max(1.0, variance),
        base=np.vstack([np.ones(v.size), vf] + ([w] if equality else [])),
        base_targets=np.array([1.0, 0.0] + ([variance] if equality else [])),
        pair=np.arange(len(mono_rows)),
    )


@dataclass(frozen=True)
class _Face:
    """The inequalities held with equality: entries at their floor, mono pairs tied, and whether
    the variance bound binds."""

    floor: BoolArray
    tied: BoolArray
    var_tight: bool

    @property
    def key(self) -> tuple[bytes, bytes, bool]:
        """The face as a hashable value (to notice cycling between faces)."""
        return (self.floor.tobytes(), self.tied.tobytes(), self.var_tight)


def _face_at(row: _RowConstraints, point: FloatArray) -> _Face:
    """The constraints tight at ``point`` to within ``ACTIVE``."""
    floor = point - row.lb <= ACTIVE
    tied = (row.mono_rows @ point >= -ACTIVE) & ~(floor[row.pair] & floor[row.pair + 1])
    var_tight = bool(not row.equality and row.variance - row.squares @ point <= ACTIVE * row.scale)
    return _Face(floor, tied, var_tight)


def _both_floor(row: _RowConstraints, face: _Face) -> BoolArray:
    """The mono pairs whose two entries are both at their floor."""
    return face.floor[row.pair] & face.floor[row.pair + 1]


def _face_system(row: _RowConstraints, face: _Face) -> tuple[FloatArray, FloatArray]:
    """The rows and right-hand sides of the face's equalities."""
    matrix = np.vstack(
        [row.base] + ([row.squares] if face.var_tight else []) + [row.mono_rows[face.tied]]
    )
    targets = np.concatenate(
        [row.base_targets, [row.variance] if face.var_tight else [], np.zeros(int(face.tied.sum()))]
    )
    return matrix, targets


def _face_optimum(
    row: _RowConstraints, face: _Face, current: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray] | None:
    """The entropy optimum on the face, from ``current``: the point, its multipliers and the
    face's equalities; None when the face has no positive point."""
    matrix, targets = _face_system(row, face)
    free, lb = ~face.floor, row.lb
    solved = _newton_on_face(
        current[free], matrix[:, free], targets - matrix[:, face.floor] @ lb[face.floor]
    )
    if solved is None:
        return None
    p = lb.copy()
    p[free], y = solved
    return p, y, matrix


def _violations(
    row: _RowConstraints, face: _Face, p: FloatArray
) -> tuple[BoolArray, BoolArray, bool]:
    """The constraints off the face that ``p`` violates: entries below their floor, mono pairs
    that climb, and the variance bound."""
    low = ~face.floor & (p < row.lb)
    climbing = ~face.tied & (row.mono_rows @ p > 1e-14) & ~_both_floor(row, face)
    over = bool(
        not row.equality
        and not face.var_tight
        and row.squares @ p > row.variance + 1e-13 * row.scale
    )
    return low, climbing, over


def _step_to_blocking(
    row: _RowConstraints, face: _Face, current: FloatArray, p: FloatArray
) -> tuple[FloatArray, _Face]:
    """The last feasible point on the segment from ``current`` (feasible) to ``p``, and the face
    joined by the constraint that blocks the step there (the primal active-set step)."""
    lb, mono_rows, w = row.lb, row.mono_rows, row.squares
    step = p - current
    ratios = [
        np.where(~face.floor & (step < 0), (current - lb) / np.maximum(-step, 1e-300), np.inf),
        np.where(
            ~face.tied & ~_both_floor(row, face) & (mono_rows @ step > 0),
            -(mono_rows @ current) / np.maximum(mono_rows @ step, 1e-300),
            np.inf,
        ),
        np.array(
            [(row.variance - w @ current) / (w @ step)]
            if not row.equality and not face.var_tight and w @ step > 0
            else [np.inf]
        ),
    ]
    kind = int(np.argmin([r.min(initial=np.inf) for r in ratios]))
    index = int(np.argmin(ratios[kind]))
    moved = np.maximum(current + min(max(float(ratios[kind][index]), 0), 1) * step, lb)
    floor, tied, var_tight = face.floor.copy(), face.tied.copy(), face.var_tight
    if kind == 0:
        floor[index] = True
        moved[index] = lb[index]
    elif kind == 1:
        tied[index] = True
    else:
        var_tight = True
    return moved, _Face(floor, tied, var_tight)


def _multipliers(row: _RowConstraints, face: _Face, y: FloatArray) -> tuple[float, FloatArray]:
    """The multipliers of the variance bound (0 when it does not bind) and of the tied mono rows,
    read from those of the face's equalities."""
    k = len(row.base)
    y_var = float(y[k]) if face.var_tight else 0.0
    return y_var, y[k + int(face.var_tight) :]


def _floor_misfit(row: _RowConstraints, face: _Face, residual: FloatArray) -> float:
    """How far non-negative multipliers of the floors (and of the mono rows between two floors)
    fall short of cancelling ``residual`` at the entries on the floor (non-negative least
    squares)."""
    at_floor = np.flatnonzero(face.floor)
    both = np.flatnonzero(_both_floor(row, face))
    system = np.hstack([np.eye(at_floor.size), np.zeros((at_floor.size, both.size))])
    position = np.searchsorted(at_floor, both)
    system[position, at_floor.size + np.arange(both.size)] = -1.0
    system[position + 1, at_floor.size + np.arange(both.size)] = 1.0
    return optimize.nnls(system, residual[at_floor])[1] if at_floor.size else 0.0


def _is_optimal(
    row: _RowConstraints,
    face: _Face,
    p: FloatArray,
    residual: FloatArray,
    y_var: float,
    y_mono: FloatArray,
) -> bool:
    """Whether the face optimum ``p`` meets the KKT conditions of the whole problem.

    ∇f + Σ y a − Σ ν e_l + Σ μ (e_k − e_{k+1}) = 0 with ν, μ ≥ 0: the multipliers of the variance
    and the tied mono rows are the face's, those of the floors (and of mono rows between two
    floors) are fitted. Where the face is degenerate (more tight constraints than it needs, e.g.
    a single feasible point) the face's multipliers are not unique, so all of them are fitted at
    once.
    """
    stationary = np.max(np.abs(residual[~face.floor]), initial=0.0) <= 1e-9
    if (
        y_var >= -1e-9
        and np.all(y_mono >= -1e-9)
        and _floor_misfit(row, face, residual) <= 1e-9
        and stationary
    ):
        return True
    tight = row.mono_rows[face.tied | _both_floor(row, face)]
    return _kkt_holds(
        p, row.base, np.vstack([row.squares[None, :]] * face.var_tight + [tight]), face.floor
    )


def _released(face: _Face, y_var: float, y_mono: FloatArray, residual: FloatArray) -> _Face | None:
    """The face without its tight constraint of most negative multiplier, or None when no
    multiplier is negative."""
    candidates = [(y_var, "var", 0)]
    tied_rows = np.flatnonzero(face.tied)
    candidates += [(float(m), "mono", int(t)) for t, m in zip(tied_rows, y_mono, strict=True)]
    candidates += [(float(residual[r]), "floor", int(r)) for r in np.flatnonzero(face.floor)]
    value, which, index = min(candidates)
    if value >= -1e-9:
        return None
    floor, tied, var_tight = face.floor.copy(), face.tied.copy(), face.var_tight
    if which == "var":
        var_tight = False
    elif which == "mono":
        tied[index] = False
    else:
        floor[index] = False
    return _Face(floor, tied, var_tight)


def _polish(
    guess: FloatArray,
    v: IntArray,
    variance: float,
    lb: FloatArray,
    mono_rows: FloatArray,
    equality: bool,
    feasible: bool = False,
) -> FloatArray | None:
    """The exact optimum, found by an active-set method started from ``guess``.

    Constraints tight at ``guess`` (to ``ACTIVE``) are made equalities and the entropy is minimised
    on that face; violated constraints are then added and constraints with a multiplier of the
    wrong sign released until the KKT conditions of the whole problem hold, which (the objective
    being strictly convex) certifies the unique optimum. From a near-optimal ``guess`` all violated
    constraints join the face at once. With ``feasible`` (``guess`` meets every constraint) the
    iterates stay feasible instead: a face optimum that violates constraints is replaced by the
    last feasible point on the way to it, where the blocking constraint joins the face, so the
    entropy improves from face to face (the primal active-set method). None if no certified
    optimum is reached.
    """
    row = _row_constraints(v, variance, lb, mono_rows, equality)
    current = guess.copy()
    face = _face_at(row, current)
    released: set[tuple[bytes, bytes, bool]] = set()
    for _ in range((4 if feasible else 2) * v.size + 10):
        solved = _face_optimum(row, face, current)
        if solved is None:
            return None
        p, y, matrix = solved
        low, climbing, over = _violations(row, face, p)
        if low.any() or climbing.any() or over:  # primal feasibility: tighten, solve again
            if feasible:
                current, face = _step_to_blocking(row, face, current, p)
            else:
                face = _Face(face.floor | low, face.tied | climbing, face.var_tight or over)
            continue
        current = p
        y_var, y_mono = _multipliers(row, face, y)
        residual = np.log(p) + 1.0 + matrix.T @ y
        if _is_optimal(row, face, p, residual, y_var, y_mono):
            return _equalise(np.maximum(p, lb), face.tied)
        smaller = _released(face, y_var, y_mono, residual)
        if smaller is None or face.key in released:
            return None  # nothing to release, or cycling between faces
        released.add(face.key)
        face = smaller
    return None


def solve_row(
    v: IntArray,
    variance: float,
    lb: FloatArray,
    mono: bool,
    equality: bool,
    start: FloatArray | None = None,
) -> FloatArray | None:
    """The maximum-entropy probabilities of one row, or None if no row meets the constraints.

    Without ``start`` a linear programme decides feasibility and the polish starts from the conic
    point. ``start`` is the optimum of the row under a larger ``pstay`` bound (its p(0) moved to
    the new bound): the row is then feasible (lowering a bound only enlarges the feasible set) and
    the polish tries it first. The last resort is the polish from a feasible row.
    """
    mono_rows = _mono_matrix(v, mono)
    polished = None
    if start is None:
        span = _variance_range(v, lb, mono_rows, largest=equality)
        slack = 1e-9 * max(1.0, variance)
        if span is None or span[0] > variance + slack or (equality and span[1] < variance - slack):
            return None
    else:
        polished = _polish(np.clip(start, lb, 1.0), v, variance, lb, mono_rows, equality)
    if polished is None:
        guess = _conic(v, variance, lb, mono_rows, equality)
        polished = _polish(guess, v, variance, lb, mono_rows, equality)
    if polished is None:  # the conic point was too far off: start from a feasible row
        start = _feasible_row(v, variance, lb, mono_rows, equality)
        if start is not None:
            polished = _polish(start, v, variance, lb, mono_rows, equality, feasible=True)
    if polished is None:
        raise RuntimeError(
            f"the optimum of a p-table row (v = {v[0]}..{v[-1]}, V = {variance:g}) could not be "
            "certified; this is a bug"
        )
    return polished


def build_row(
    i: int, D: int, V: float, js: int, pstay: float, mono: bool, equality: bool
) -> tuple[IntArray, FloatArray, bool]:
    """(v, p, flagged) of row i, with the outer loop that relaxes the ``pstay`` bound."""
    j = np.arange(max(0, i - D), i + D + 1, dtype=np.int64)
    v = j[(j == 0) | (j > js)] - i
    zero = np.flatnonzero(v == 0)
    lb = np.full(v.size, FLOOR)
    lb[zero] = max(pstay, FLOOR)
    iteration = 0
    start = None
    while True:
        iteration += 1
        p = solve_row(v, V, lb, mono, equality, start)
        if p is None:
            raise InputError(
                f"infeasible parameters: row i={i} of the p-table cannot be built with D={D}, "
                f"V={V:g}, js={js}; raise V or D, lower js or pstay, or change mono/optim"
            )
        var = float(p @ v.astype(np.float64) ** 2)
        if round(var, 3) == V or i <= js or iteration >= MAX_ITER:
            break
        relaxed = max(float(lb[zero[0]]) - PSTAY_STEP, FLOOR) if zero.size else FLOOR
        if not zero.size or relaxed == lb[zero[0]]:
            break  # the bound cannot move: further iterations would repeat this solution
        if p[zero[0]] > lb[zero[0]] + ACTIVE:
            break  # the bound does not bind: the optimum stays the same under a lower one
        lb[zero] = relaxed
        start = p.copy()  # close to the new optimum, the bound (if it binds) moved down
        start[zero] = relaxed
    return v, p, round(var, 3) < V
