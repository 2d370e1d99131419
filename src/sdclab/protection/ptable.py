"""Perturbation tables (p-tables) of the cell key method: construction, lookup, files and (ε, δ).

A p-table gives, for every true count n, the distribution of the noise x added to it; the cell key
u ∈ [0, 1) of a cell (a function of its contributors only) picks x deterministically, so the same
contributors always get the same noise. Two formats are supported:

* **Destatis long format** (R packages ptable and cellKey): one row per transition i → j with
  noise v = j − i and the half-open key interval [p_int_lb, p_int_ub). Rows i = 1..i_max come from
  the maximum-entropy construction (:func:`create_ptable`): for each row maximise the entropy of
  the noise subject to zero mean, variance ≤ V (= V for ``optim=4``), |v| ≤ D, no target count in
  1..js, a 1e-8 floor, an optional lower bound ``pstay`` on p(i → i) that is relaxed in steps of
  0.05 until the variance reaches V, and (``mono``) probabilities non-decreasing up to v = 0. Row
  i_max (the symmetry row) serves every n ≥ i_max.
* **ONS format** (cell_key_perturbation): a pvalue for every (pcv, ckey) with integer cell keys
  ckey ∈ 0..K−1 and pcv the count folded onto 1..750 (:func:`pcv`).

A linear programme decides whether a row can be built at all. Each feasible row is then solved as
an exponential-cone programme by Clarabel (maximise Σ t_k with (t_k, p_k, 1) in the exponential
cone, i.e. t_k ≤ −p_k ln p_k, under the row's linear constraints) and polished: the active
constraints are read off the conic point, the entropy is minimised on that face by Newton's method
on its dual (the optimum there has the closed form p = exp(−1 − Aᵀy) on the entries off the floor),
constraints are added or released until the KKT conditions of the whole problem hold, and only
such a certified point is returned (the optimum is unique, the objective being strictly convex),
so the probabilities are exact to rounding. Should the polish not certify the conic point, it
runs again as the primal active-set method from a feasible row found by a linear programme. In
the ``pstay`` loop each relaxed row starts from the previous optimum, and the loop ends once the
bound no longer binds (the optimum cannot change when a slack bound is lowered).

:func:`delta_pairs` gives δ(ε) of neighbouring counts (n, n + 1): a bounded p-table can never be
ε-DP, since a count's neighbour cannot reach its extreme outputs.
"""

from __future__ import annotations

import io
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Literal

import clarabel
import numpy as np
import numpy.typing as npt
import polars as pl
from scipy import optimize, sparse

from sdclab.arrays import BoolArray, FloatArray, IntArray
from sdclab.errors import InputError
from sdclab.fileio import atomic_file, read_settings_file

FLOOR = 1e-8
"""Lower bound of every transition probability (ptable's ``epsilon``)."""
DIGITS = 8
"""Decimals the interval bounds are rounded to."""
MAX_ITER = 20
"""Outer iterations that relax ``pstay`` (ptable's limit)."""
PSTAY_STEP = 0.05
"""Amount ``pstay`` is lowered by in each outer iteration."""
SUM_TOLERANCE = 1e-6
"""How far the probabilities of a row read from a file may sum from 1."""
ONS_PCV_MAX = 750
"""Largest pcv of an ONS table; larger counts are folded onto 501..750 (period 250)."""
ONS_DELTA_MAX = 1000
"""Last n of the pairs (n, n + 1) checked for an ONS table; pairs beyond repeat (period 250)."""
FILE_LIMIT = ONS_PCV_MAX
"""Largest row i and largest |noise| a p-table file may hold (either format): 750, the counts an
ONS table distinguishes. Whatever uses a table (its card's δ, the attacker's preimages) builds
arrays of rows × noise values, so both are bounded; the max-entropy construction stays far
inside (i_max ≤ D + js + 1 ≤ 201, |v| ≤ D ≤ 100)."""
CONIC_TOLERANCE = 1e-10
"""Gap and feasibility tolerance of the conic solve that starts the polish."""
CONIC_MAX_ITER = 200
"""Iteration limit of the conic solve."""
ACTIVE = 1e-9
"""Slack below which the polish first takes a constraint as tight at the conic solution."""

LONG_COLUMNS = ("i", "j", "p", "v", "p_int_lb", "p_int_ub")
ONS_COLUMNS = ("pcv", "ckey", "pvalue")


# ---------------------------------------------------------------------------------------------
# Destatis long format
# ---------------------------------------------------------------------------------------------


def _frozen(values: npt.ArrayLike, dtype: type) -> npt.NDArray[np.generic]:
    """A read-only 1-D copy of ``values``."""
    array: npt.NDArray[np.generic] = np.array(values, dtype=dtype)
    if array.ndim != 1:
        raise InputError(f"p-table columns must be one-dimensional, got shape {array.shape}")
    array.setflags(write=False)
    return array


@dataclass(frozen=True, eq=False)
class PTable:
    """Destatis/ptable long format: one row per (i, j) transition.

    The entries are sorted by i, then j; ``lb``/``ub`` are ``p_int_lb``/``p_int_ub`` rounded to 8
    decimals and ``p = ub - lb``. ``flagged`` lists the rows whose variance stayed below V after
    the outer loop of the construction (the variance bound V could not be reached there).
    """

    i: IntArray
    j: IntArray
    p: FloatArray
    v: IntArray
    lb: FloatArray
    ub: FloatArray
    D: int
    V: float
    js: int
    flagged: tuple[int, ...] = ()
    _starts: IntArray = field(init=False, repr=False)
    _keys: FloatArray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        for name, dtype in (("i", np.int64), ("j", np.int64), ("v", np.int64)):
            object.__setattr__(self, name, _frozen(getattr(self, name), dtype))
        for name in ("p", "lb", "ub"):
            object.__setattr__(self, name, _frozen(getattr(self, name), np.float64))
        sizes = {len(getattr(self, name)) for name in ("i", "j", "p", "v", "lb", "ub")}
        if len(sizes) != 1 or not self.i.size:
            raise InputError("p-table columns i, j, p, v, lb, ub must be non-empty, equal length")
        steps = np.diff(self.i)
        if self.i[0] != 0 or np.any((steps < 0) | (steps > 1)):
            raise InputError("p-table rows must be i = 0, 1, ..., i_max in this order")
        if np.any((steps == 0) & (np.diff(self.j) <= 0)):
            raise InputError("p-table entries of a row must have strictly ascending j")
        starts = np.searchsorted(self.i, np.arange(self.i_max + 2)).astype(np.int64)
        object.__setattr__(self, "_starts", starts)
        keys = self.i + self.ub  # the rows' intervals side by side: must ascend
        if np.any(self.ub < 0) or np.any(self.ub > 1) or np.any(np.diff(keys) < 0):
            raise InputError("p-table p_int_ub must lie in [0, 1] and ascend within each row")
        object.__setattr__(self, "_keys", keys)

    @property
    def i_max(self) -> int:
        """The symmetry row: the row used for every count n ≥ i_max."""
        return int(self.i[-1])

    def row(self, n: int) -> tuple[IntArray, FloatArray]:
        """(v, p) of the row serving count ``n``, by ascending v; n = 0 gives ([0], [1])."""
        if int(n) < 0:
            raise InputError(f"counts must be non-negative, got {n}")
        r = min(int(n), self.i_max)
        rows = slice(self._starts[r], self._starts[r + 1])
        return self.v[rows].copy(), self.p[rows].copy()

    def noise(self, n: npt.ArrayLike, u: npt.ArrayLike, strict: bool = True) -> IntArray:
        """Noise of cells with true counts ``n`` and cell keys ``u`` ∈ [0, 1) (cellKey's lookup).

        0 where n = 0; otherwise v of the first entry of row min(n, i_max), by ascending j, with
        u < p_int_ub (``strict``) or u ≤ p_int_ub (legacy). One ``searchsorted`` finds the entry
        for all cells in a key offset by the row number (row + ub); a vectorised correction then
        settles the rare cells that rounding of row + u moved across a bound.
        """
        counts, keys = np.broadcast_arrays(np.asarray(n), np.asarray(u, dtype=np.float64))
        if counts.size and not np.issubdtype(counts.dtype, np.integer):
            raise InputError(f"counts must be integers, got dtype {counts.dtype}")
        counts = counts.astype(np.int64, copy=False).ravel()
        keys = keys.ravel()
        if counts.size and counts.min() < 0:
            raise InputError(f"counts must be non-negative, got {counts.min()}")
        top = 1.0 if strict else np.nextafter(1.0, 2.0)
        if keys.size and not bool(np.all((keys >= 0) & (keys < top))):
            interval = "[0, 1)" if strict else "[0, 1]"
            raise InputError(f"cell keys must lie in {interval}")
        rows = np.minimum(counts, self.i_max)
        side: Literal["left", "right"] = "right" if strict else "left"
        idx = np.searchsorted(self._keys, rows + keys, side=side)
        first, last = self._starts[rows], self._starts[rows + 1] - 1
        idx = np.clip(idx, first, last)
        ub = self.ub
        while True:
            if strict:
                right = (idx < last) & (keys >= ub[idx])
                left = (idx > first) & (keys < ub[idx - 1])
            else:
                right = (idx < last) & (keys > ub[idx])
                left = (idx > first) & (keys <= ub[idx - 1])
            if not (right.any() or left.any()):
                break
            idx += right.astype(np.int64) - left.astype(np.int64)
        out = np.where(counts == 0, 0, self.v[idx])
        return out.reshape(np.broadcast_shapes(np.shape(n), np.shape(u)))

    def to_frame(self) -> pl.DataFrame:
        """The table in ptable's column layout, type "destatis"."""
        return pl.DataFrame(
            {
                "i": pl.Series(self.i, dtype=pl.Int64),
                "j": pl.Series(self.j, dtype=pl.Int64),
                "p": pl.Series(self.p, dtype=pl.Float64),
                "v": pl.Series(self.v, dtype=pl.Int64),
                "p_int_lb": pl.Series(self.lb, dtype=pl.Float64),
                "p_int_ub": pl.Series(self.ub, dtype=pl.Float64),
                "type": pl.Series(["destatis"] * self.i.size, dtype=pl.String),
            }
        )


# ---------------------------------------------------------------------------------------------
# Maximum-entropy construction
# ---------------------------------------------------------------------------------------------


def _integer(value: object, name: str, minimum: int) -> int:
    """``value`` as an int ≥ ``minimum`` (integral floats accepted, booleans not)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InputError(f"{name} must be an integer, got {value!r}")
    if isinstance(value, numbers.Integral):
        number = int(value)
    elif math.isfinite(float(value)) and float(value).is_integer():
        number = int(float(value))
    else:
        raise InputError(f"{name} must be an integer, got {value!r}")
    if number < minimum:
        raise InputError(f"{name} must be at least {minimum}, got {number}")
    return number


def _per_row(value: object, name: str, rows: int) -> list[object]:
    """A scalar repeated for every row, or a sequence with one value per row."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)):
        return [value] * rows
    values = list(value)
    if len(values) != rows:
        raise InputError(
            f"{name} has {len(values)} values but the table has i_max = {rows} rows; give one "
            "value per row or a scalar"
        )
    return values


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
    n = v.size
    vf = v.astype(np.float64)
    w = vf**2
    scale = max(1.0, variance)
    base = np.vstack([np.ones(n), vf] + ([w] if equality else []))
    base_targets = np.array([1.0, 0.0] + ([variance] if equality else []))
    pair = np.arange(len(mono_rows))  # mono row k is p_k − p_{k+1} ≤ 0
    current = guess.copy()
    floor = current - lb <= ACTIVE
    tied = (mono_rows @ current >= -ACTIVE) & ~(floor[pair] & floor[pair + 1])
    var_tight = bool(not equality and variance - w @ current <= ACTIVE * scale)
    released: set[tuple[bytes, bytes, bool]] = set()
    for _ in range((4 if feasible else 2) * n + 10):
        matrix = np.vstack([base] + ([w] if var_tight else []) + [mono_rows[tied]])
        targets = np.concatenate(
            [base_targets, [variance] if var_tight else [], np.zeros(int(tied.sum()))]
        )
        free = ~floor
        solved = _newton_on_face(
            current[free], matrix[:, free], targets - matrix[:, floor] @ lb[floor]
        )
        if solved is None:
            return None
        p = lb.copy()
        p[free], y = solved
        # primal feasibility: make violated constraints tight and solve again
        both_floor = floor[pair] & floor[pair + 1]
        low = free & (p < lb)
        climbing = ~tied & (mono_rows @ p > 1e-14) & ~both_floor
        over = bool(not equality and not var_tight and w @ p > variance + 1e-13 * scale)
        if (low.any() or climbing.any() or over) and not feasible:
            floor |= low
            tied |= climbing
            var_tight = var_tight or over
            continue
        if low.any() or climbing.any() or over:
            step = p - current
            ratios = [
                np.where(free & (step < 0), (current - lb) / np.maximum(-step, 1e-300), np.inf),
                np.where(
                    ~tied & ~both_floor & (mono_rows @ step > 0),
                    -(mono_rows @ current) / np.maximum(mono_rows @ step, 1e-300),
                    np.inf,
                ),
                np.array(
                    [(variance - w @ current) / (w @ step)]
                    if not equality and not var_tight and w @ step > 0
                    else [np.inf]
                ),
            ]
            kind = int(np.argmin([r.min(initial=np.inf) for r in ratios]))
            index = int(np.argmin(ratios[kind]))
            current = np.maximum(current + min(max(float(ratios[kind][index]), 0), 1) * step, lb)
            if kind == 0:
                floor[index] = True
                current[index] = lb[index]
            elif kind == 1:
                tied[index] = True
            else:
                var_tight = True
            continue
        current = p
        # dual feasibility: ∇f + Σ y a − Σ ν e_l + Σ μ (e_k − e_{k+1}) = 0 with ν, μ ≥ 0; the
        # multipliers of variance and tied mono rows are in y, those of the floors (and of mono
        # rows between two floors) are fitted by non-negative least squares
        k = len(base)
        y_var = float(y[k]) if var_tight else 0.0
        y_mono = y[k + int(var_tight) :]
        residual = np.log(p) + 1.0 + matrix.T @ y
        at_floor = np.flatnonzero(floor)
        both = np.flatnonzero(both_floor)
        system = np.hstack([np.eye(at_floor.size), np.zeros((at_floor.size, both.size))])
        position = np.searchsorted(at_floor, both)
        system[position, at_floor.size + np.arange(both.size)] = -1.0
        system[position + 1, at_floor.size + np.arange(both.size)] = 1.0
        misfit = optimize.nnls(system, residual[at_floor])[1] if at_floor.size else 0.0
        stationary = np.max(np.abs(residual[free]), initial=0.0) <= 1e-9
        if (y_var >= -1e-9 and np.all(y_mono >= -1e-9) and misfit <= 1e-9 and stationary) or (
            # y is not unique where the face is degenerate (more tight constraints than it
            # needs, e.g. a single feasible point): fit all the multipliers at once
            _kkt_holds(
                p, base, np.vstack([w[None, :]] * var_tight + [mono_rows[tied | both_floor]]), floor
            )
        ):
            return _equalise(np.maximum(p, lb), tied)
        # release the tight constraint with the most negative multiplier
        candidates = [(y_var, "var", 0)]
        tied_rows = np.flatnonzero(tied)
        candidates += [(float(m), "mono", int(t)) for t, m in zip(tied_rows, y_mono, strict=True)]
        candidates += [(float(residual[r]), "floor", int(r)) for r in at_floor]
        value, which, index = min(candidates)
        face = (floor.tobytes(), tied.tobytes(), var_tight)
        if value >= -1e-9 or face in released:
            return None  # nothing to release, or cycling between faces
        released.add(face)
        if which == "var":
            var_tight = False
        elif which == "mono":
            tied[index] = False
        else:
            floor[index] = False
    return None


def _solve_row(
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


def _build_row(
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
        p = _solve_row(v, V, lb, mono, equality, start)
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


def create_ptable(
    D: int,
    V: float,
    js: int = 0,
    pstay: float | Sequence[float] | None = None,
    mono: bool | Sequence[bool] = True,
    optim: int = 1,
) -> PTable:
    """The maximum-entropy p-table of ptable's ``create_cnt_ptable`` (docs/cellkey.md).

    Rows i = 1..i_max with i_max = D if js = 0, else D + js + 1; ``pstay`` and ``mono`` are
    scalars or one value per row; ``optim`` 1–3 bound the variance by V (the three differ only in
    how nloptr was told the bounds 0 ≤ p ≤ 1), 4 requires it to equal V.
    """
    D = _integer(D, "D", 1)
    js = _integer(js, "js", 0)
    if isinstance(V, bool) or not isinstance(V, numbers.Real) or not 0 < float(V) < math.inf:
        raise InputError(f"V must be a positive number, got {V!r}")
    V = float(V)
    if isinstance(optim, bool) or not isinstance(optim, numbers.Integral) or not 1 <= optim <= 4:
        raise InputError(f"optim must be 1, 2, 3 or 4, got {optim!r}")
    i_max = D if js == 0 else D + js + 1
    stays: list[float] = []
    for value in _per_row(pstay, "pstay", i_max):
        if value is None:
            stays.append(0.0)
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value < 1:
            raise InputError(f"pstay must lie strictly between 0 and 1, got {value!r}")
        stays.append(float(value))
    monos: list[bool] = []
    for value in _per_row(mono, "mono", i_max):
        if not isinstance(value, (bool, np.bool_)):
            raise InputError(f"mono must be True or False, got {value!r}")
        monos.append(bool(value))

    i_parts, v_parts, ub_parts = [np.zeros(1, np.int64)], [np.zeros(1, np.int64)], [np.ones(1)]
    flagged = []
    for i in range(1, i_max + 1):
        v, p, low = _build_row(i, D, V, js, stays[i - 1], monos[i - 1], optim == 4)
        ub = np.round(np.cumsum(p), DIGITS)
        ub[-1] = 1.0
        i_parts.append(np.full(v.size, i, np.int64))
        v_parts.append(v)
        ub_parts.append(ub)
        if low:
            flagged.append(i)
    i_all, v_all, ub_all = (np.concatenate(x) for x in (i_parts, v_parts, ub_parts))
    first = np.r_[True, i_all[1:] != i_all[:-1]]
    lb_all = np.where(first, 0.0, np.r_[0.0, ub_all[:-1]])
    return PTable(
        i=i_all,
        j=i_all + v_all,
        p=ub_all - lb_all,
        v=v_all,
        lb=lb_all,
        ub=ub_all,
        D=D,
        V=V,
        js=js,
        flagged=tuple(flagged),
    )


def symmetry_row(D: int, V: float) -> FloatArray:
    """Closed form of the symmetry row: p(v) ∝ r^{v²} on v = −D..D with variance V.

    r = e^{−λ} is found by a root finder; V ≥ D(D+1)/3 gives the uniform row. Probabilities below
    the 1e-8 floor are raised to it and the row is renormalised.
    """
    D = _integer(D, "D", 1)
    if isinstance(V, bool) or not isinstance(V, numbers.Real) or not 0 < float(V) < math.inf:
        raise InputError(f"V must be a positive number, got {V!r}")
    w = np.arange(-D, D + 1, dtype=np.float64) ** 2
    if V >= D * (D + 1) / 3:
        return np.full(2 * D + 1, 1.0 / (2 * D + 1))

    def excess(lam: float) -> float:
        weights = np.exp(-lam * w)
        return float(weights @ w / weights.sum()) - float(V)

    high = 1.0
    while excess(high) > 0:
        high *= 2
    lam = optimize.brentq(excess, 0.0, high, xtol=1e-15, rtol=4 * np.finfo(float).eps)
    p = np.maximum(np.exp(-lam * w) / np.exp(-lam * w).sum(), FLOOR)
    return np.asarray(p / p.sum(), dtype=np.float64)


# ---------------------------------------------------------------------------------------------
# ONS format
# ---------------------------------------------------------------------------------------------


def pcv(n: npt.ArrayLike) -> IntArray:
    """ONS perturbation count value: n if n ≤ 750, else ((n − 1) mod 250) + 501."""
    counts = np.asarray(n)
    if counts.size and not np.issubdtype(counts.dtype, np.integer):
        raise InputError(f"counts must be integers, got dtype {counts.dtype}")
    counts = counts.astype(np.int64, copy=False)
    if counts.size and counts.min() < 0:
        raise InputError(f"counts must be non-negative, got {counts.min()}")
    return np.where(counts <= ONS_PCV_MAX, counts, (counts - 1) % 250 + 501)


@dataclass(frozen=True, eq=False)
class OnsPTable:
    """ONS format: pvalue for every (pcv, ckey); pcv 1..750, ckey 0..K-1.

    ``pvalue`` has shape (751, K); its row 0 is all zeros (an empty cell is never perturbed).
    """

    pvalue: IntArray

    def __post_init__(self) -> None:
        table = np.array(self.pvalue, dtype=np.int64)
        if table.ndim != 2 or table.shape[0] != ONS_PCV_MAX + 1 or table.shape[1] < 1:
            raise InputError(f"ONS pvalue must have shape (751, K ≥ 1), got {table.shape}")
        if np.any(table[0] != 0):
            raise InputError("ONS pvalue row 0 (pcv 0) must be all zeros")
        table.setflags(write=False)
        object.__setattr__(self, "pvalue", table)

    @property
    def key_space(self) -> int:
        """K, the number of cell keys (ONS uses max(ckey) + 1)."""
        return int(self.pvalue.shape[1])

    def noise(self, n: npt.ArrayLike, ckey: npt.ArrayLike) -> IntArray:
        """pvalue[pcv(n), ckey] for every cell; 0 where n = 0."""
        counts, keys = np.broadcast_arrays(np.asarray(n), np.asarray(ckey))
        if keys.size and not np.issubdtype(keys.dtype, np.integer):
            raise InputError(f"cell keys must be integers, got dtype {keys.dtype}")
        if keys.size and (keys.min() < 0 or keys.max() >= self.key_space):
            raise InputError(f"cell keys must lie in 0..{self.key_space - 1}")
        return self.pvalue[pcv(counts), keys]

    def row(self, n: int) -> tuple[IntArray, FloatArray]:
        """The noise pmf of count ``n``: distinct pvalues of row pcv(n) and their shares of K."""
        values, counts = np.unique(self.pvalue[int(pcv(np.int64(n)))], return_counts=True)
        return values.astype(np.int64), counts / self.key_space

    def to_frame(self) -> pl.DataFrame:
        """Columns pcv, ckey, pvalue (Int64), sorted by pcv then ckey, pcv 1..750."""
        k = self.key_space
        return pl.DataFrame(
            {
                "pcv": pl.Series(np.repeat(np.arange(1, ONS_PCV_MAX + 1), k), dtype=pl.Int64),
                "ckey": pl.Series(np.tile(np.arange(k), ONS_PCV_MAX), dtype=pl.Int64),
                "pvalue": pl.Series(self.pvalue[1:].ravel(), dtype=pl.Int64),
            }
        )


def large_count_noise(table: PTable | OnsPTable) -> tuple[IntArray, FloatArray]:
    """The noise pmf of a large true count: the symmetry row (every count from i_max up), or for
    an ONS table, whose rows repeat with period 250 above 750, the mixture of its rows over one
    period of counts (rows 501–750, each count equally likely)."""
    if isinstance(table, PTable):
        return table.row(table.i_max)
    values, counts = np.unique(table.pvalue[501:751].ravel(), return_counts=True)
    return values.astype(np.int64), counts / counts.sum()


def ons_10_5_ptable(key_space: int = 256) -> OnsPTable:
    """ONS's "10_5" table: counts below 10 go to 0, the rest to the nearest multiple of 5."""
    key_space = _integer(key_space, "key_space", 1)
    counts = np.arange(ONS_PCV_MAX + 1)
    by_residue = np.array([0, -1, -2, 2, 1])[counts % 5]
    values = np.where(counts < 10, -counts, by_residue)
    return OnsPTable(np.repeat(values[:, None], key_space, axis=1))


def to_ons(table: PTable, key_space: int = 256) -> OnsPTable:
    """The ONS table of a long-format table for integer keys: pvalue = noise(pcv, ckey/K)."""
    key_space = _integer(key_space, "key_space", 1)
    counts = np.arange(ONS_PCV_MAX + 1)[:, None]
    keys = np.arange(key_space)[None, :] / key_space
    return OnsPTable(table.noise(counts, keys))


# ---------------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------------


def _read_strings(path: Path) -> pl.DataFrame:
    """The CSV file as string columns, or an InputError naming the file (a regular file of at
    most :data:`sdclab.fileio.SETTINGS_FILE_LIMIT` bytes)."""
    data = read_settings_file(Path(path), "p-table file")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (invalid byte at offset {exc.start})") from None
    if not text.strip():
        raise InputError(f"{path}: empty p-table file")
    try:
        frame = pl.read_csv(io.StringIO(text), infer_schema=False)
    except Exception as exc:  # polars raises several exception types for malformed CSV
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"{path}: not a readable CSV file ({reason})") from None
    return frame.rename({name: name.strip() for name in frame.columns})


def _where(path: Path, index: int, column: str) -> str:
    return f"{path}: row {index + 1} (line {index + 2}), column {column}"


def _column(frame: pl.DataFrame, column: str, path: Path, integer: bool) -> npt.NDArray[np.generic]:
    """One column parsed as Int64 or finite Float64; the first bad value is reported."""
    raw = frame[column].str.strip_chars()
    parsed = raw.cast(pl.Int64 if integer else pl.Float64, strict=False)
    bad = parsed.is_null()
    if not integer:
        bad = bad | ~parsed.fill_null(0.0).is_finite()
    if bad.any():
        index = int(np.flatnonzero(bad.to_numpy())[0])
        value = raw[index]
        what = "an integer" if integer else "a finite number"
        shown = "an empty value" if value is None or value == "" else repr(value)
        raise InputError(f"{_where(path, index, column)}: {shown} is not {what}")
    return parsed.to_numpy()


def _first_duplicate(keys: list[IntArray]) -> tuple[int, int] | None:
    """Positions (first, repeat) of the first repeated key tuple, or None."""
    order = np.lexsort(keys[::-1])
    same = np.ones(order.size - 1, dtype=bool)
    for key in keys:
        same &= key[order[1:]] == key[order[:-1]]
    if not same.any():
        return None
    hits = np.flatnonzero(same)
    pairs = np.sort(np.stack([order[hits], order[hits + 1]], axis=1), axis=1)
    first = pairs[np.argmin(pairs[:, 1])]
    return int(first[0]), int(first[1])


def _read_long(frame: pl.DataFrame, path: Path) -> PTable:
    i = _column(frame, "i", path, integer=True).astype(np.int64)
    j = _column(frame, "j", path, integer=True).astype(np.int64)
    v = _column(frame, "v", path, integer=True).astype(np.int64)
    p, lb, ub = (
        _column(frame, name, path, integer=False).astype(np.float64)
        for name in ("p", "p_int_lb", "p_int_ub")
    )
    if not i.size:
        raise InputError(f"{path}: the p-table has no rows (expected rows i = 0..i_max)")
    for name, values, ok, rule in (
        ("i", i, (i >= 0) & (i <= FILE_LIMIT), f"must lie in 0..{FILE_LIMIT}"),
        ("j", j, j >= 0, "must be non-negative"),
        ("v", v, v == j - i, "must equal j - i"),
        ("v", v, np.abs(v) <= FILE_LIMIT, f"must lie in -{FILE_LIMIT}..{FILE_LIMIT}"),
        ("p", p, (p >= 0) & (p <= 1), "must lie in [0, 1]"),
        ("p_int_lb", lb, (lb >= 0) & (lb <= 1), "must lie in [0, 1]"),
        ("p_int_ub", ub, (ub >= lb) & (ub <= 1), "must lie in [p_int_lb, 1]"),
    ):
        if not ok.all():
            index = int(np.flatnonzero(~ok)[0])
            raise InputError(f"{_where(path, index, name)}: {values[index]} {rule}")
    duplicate = _first_duplicate([i, j])
    if duplicate is not None:
        a, b = duplicate
        raise InputError(
            f"{path}: rows {a + 1} and {b + 1} are both the transition i={i[a]} -> j={j[a]}"
        )
    order = np.lexsort((j, i))
    i, j, v = i[order], j[order], v[order]
    p, lb, ub = p[order], lb[order], ub[order]
    present = np.unique(i)
    i_max = int(present[-1])
    if present.size != i_max + 1:
        missing = int(np.setdiff1d(np.arange(i_max + 1), present)[0])
        raise InputError(f"{path}: no rows for i={missing} (rows must cover i = 0..{i_max})")
    if i_max < 1:
        raise InputError(f"{path}: a p-table needs rows i = 0..i_max with i_max >= 1")
    starts = np.searchsorted(i, np.arange(i_max + 1))
    sums = np.add.reduceat(p, starts)
    off = np.abs(sums - 1) > SUM_TOLERANCE
    if off.any():
        k = int(np.flatnonzero(off)[0])
        raise InputError(f"{path}: probabilities p of row i={k} sum to {sums[k]:.9g}, not 1")
    if starts[1] != 1 or j[0] != 0:
        raise InputError(f"{path}: row i=0 must be the single transition 0 -> 0 with p = 1")
    first = np.zeros(i.size, dtype=bool)
    first[starts] = True
    last = np.r_[first[1:], True]
    previous = np.r_[0.0, ub[:-1]]
    for ok, message in (
        (~first | (np.abs(lb) <= 1e-9), "p_int_lb of the first entry of a row must be 0"),
        (
            first | (np.abs(lb - previous) <= 1e-9),
            "p_int_lb must equal the previous entry's p_int_ub (bounds not contiguous)",
        ),
        (~last | (np.abs(ub - 1) <= SUM_TOLERANCE), "p_int_ub of the last entry must be 1"),
        (np.abs(p - (ub - lb)) <= SUM_TOLERANCE, "p must equal p_int_ub - p_int_lb"),
    ):
        if not ok.all():
            index = int(order[np.flatnonzero(~ok)[0]])
            raise InputError(f"{path}: row {index + 1} (i={i[~ok][0]}, j={j[~ok][0]}): {message}")
    symmetric = slice(starts[i_max], None)
    D = int(np.abs(v[symmetric]).max())
    js = int(j[j > 0].min()) - 1
    variances = np.add.reduceat(p * v.astype(np.float64) ** 2, starts)
    V = round(float(variances[-1]), 6)
    flagged = tuple(k for k in range(1, i_max + 1) if round(float(variances[k]), 3) < round(V, 3))
    return PTable(i=i, j=j, p=ub - lb, v=v, lb=lb, ub=ub, D=D, V=V, js=js, flagged=flagged)


def _read_ons(frame: pl.DataFrame, path: Path) -> OnsPTable:
    pcvs, ckeys, pvalues = (
        _column(frame, name, path, integer=True).astype(np.int64) for name in ONS_COLUMNS
    )
    for name, values, ok, rule in (
        ("pcv", pcvs, (pcvs >= 1) & (pcvs <= ONS_PCV_MAX), f"must lie in 1..{ONS_PCV_MAX}"),
        ("ckey", ckeys, ckeys >= 0, "must be non-negative"),
        ("pvalue", pvalues, pvalues <= FILE_LIMIT, f"must be at most {FILE_LIMIT}"),
    ):
        if not ok.all():
            index = int(np.flatnonzero(~ok)[0])
            raise InputError(f"{_where(path, index, name)}: {values[index]} {rule}")
    if not pcvs.size:
        raise InputError(f"{path}: the ONS p-table has no rows")
    # every ckey 0..K−1 comes with every pcv 1..750: the rows bound K (checked before the
    # pcv × ckey array is made)
    keys = max(1, pcvs.size // ONS_PCV_MAX)
    if ckeys.max() >= keys:
        index = int(np.argmax(ckeys >= keys))
        raise InputError(
            f"{_where(path, index, 'ckey')}: {ckeys[index]} must lie in 0..{keys - 1} (an ONS "
            f"p-table holds every pcv 1..{ONS_PCV_MAX} with every ckey 0..K-1, and its "
            f"{pcvs.size:,} rows make K at most {keys:,})"
        )
    # the smallest count folded onto a pcv is the pcv itself (pcv(n) = n for n ≤ 750, larger
    # counts land on 501..750), so pvalue ≥ −pcv is exactly "no count is published negative"
    negative = pvalues < -pcvs
    if negative.any():
        index = int(np.flatnonzero(negative)[0])
        raise InputError(
            f"{_where(path, index, 'pvalue')}: {pvalues[index]} at pcv {pcvs[index]} would "
            f"publish a negative count ({pcvs[index] + pvalues[index]}); expected pvalue >= -pcv"
        )
    duplicate = _first_duplicate([pcvs, ckeys])
    if duplicate is not None:
        a, b = duplicate
        raise InputError(
            f"{path}: rows {a + 1} and {b + 1} both give pcv={pcvs[a]}, ckey={ckeys[a]}"
        )
    k = int(ckeys.max()) + 1
    table = np.zeros((ONS_PCV_MAX + 1, k), dtype=np.int64)
    seen = np.zeros((ONS_PCV_MAX + 1, k), dtype=bool)
    table[pcvs, ckeys] = pvalues
    seen[pcvs, ckeys] = True
    seen[0] = True
    if not seen.all():
        missing_pcv, missing_key = (int(x[0]) for x in np.nonzero(~seen))
        raise InputError(
            f"{path}: no row for pcv={missing_pcv}, ckey={missing_key}; an ONS p-table needs "
            f"every pcv 1..{ONS_PCV_MAX} with every ckey 0..{k - 1} exactly once"
        )
    return OnsPTable(table)


def read_ptable(path: Path) -> PTable | OnsPTable:
    """A p-table CSV file in long (Destatis) or ONS format, told apart by the header."""
    return ptable_from_frame(_read_strings(path), Path(path))


def ptable_from_frame(frame: pl.DataFrame, path: Path) -> PTable | OnsPTable:
    """A p-table from its columns (as a file or :meth:`PTable.to_frame` has them), checked as a
    file is; ``path`` names where it came from in messages."""
    frame = frame.select(pl.all().cast(pl.String))
    columns = set(frame.columns)
    if len(columns) == len(frame.columns):
        if columns in (set(LONG_COLUMNS), set(LONG_COLUMNS) | {"type"}):
            return _read_long(frame, Path(path))
        if columns == set(ONS_COLUMNS):
            return _read_ons(frame, Path(path))
    raise InputError(
        f"{path}: unknown p-table header {','.join(frame.columns)}; expected "
        f"{','.join(LONG_COLUMNS)}[,type] (long format) or {','.join(ONS_COLUMNS)} (ONS)"
    )


def write_ptable(table: PTable | OnsPTable, path: Path) -> None:
    """Write ``table`` as CSV in its own format, atomically."""
    if not isinstance(table, (PTable, OnsPTable)):
        raise TypeError(f"expected a PTable or OnsPTable, got {type(table).__name__}")
    frame = table.to_frame()
    if isinstance(table, PTable):  # p is p_int_ub − p_int_lb: print it without float noise
        frame = frame.with_columns(pl.col("p").round(DIGITS))
    with atomic_file(Path(path)) as tmp:
        frame.write_csv(tmp)


# ---------------------------------------------------------------------------------------------
# Which true counts a published count can come from
# ---------------------------------------------------------------------------------------------

PREIMAGE_CHUNK = 1 << 20
"""Candidate (published count, noise value) pairs examined at once."""


@dataclass(frozen=True)
class NoiseSupport:
    """Every noise a p-table can add (probability above 0), by row. A true count n is served by
    the row :meth:`row_of` (n): its own up to ``last_exact``, then rows that repeat — the symmetry
    row i_max of a long table serves every larger n, ONS pcvs 501..750 fold them with period
    250."""

    rows: IntArray
    noise: IntArray
    """(row, index into ``values``) of every noise that can occur, in ascending order."""
    values: IntArray
    """The distinct noise values, ascending."""
    last_exact: int
    """The largest true count with a row of its own."""
    period: int
    """Rows repeat with this period above ``last_exact`` (1: one row serves every larger n)."""

    @classmethod
    def of(cls, table: PTable | OnsPTable) -> NoiseSupport:
        if isinstance(table, OnsPTable):
            rows = np.repeat(np.arange(table.pvalue.shape[0]), table.pvalue.shape[1])
            pairs = [(rows, table.pvalue.ravel())]
            last_exact, period = ONS_PCV_MAX, 250
        else:
            pairs = [(np.zeros(1, np.int64), np.zeros(1, np.int64))]  # 0 publishes 0
            for r in range(1, table.i_max + 1):
                v, prob = table.row(r)
                pairs.append((np.full(int((prob > 0).sum()), r), v[prob > 0]))
            last_exact, period = table.i_max - 1, 1
        row = np.concatenate([r for r, _ in pairs]).astype(np.int64)
        value = np.concatenate([v for _, v in pairs]).astype(np.int64)
        values, index = np.unique(value, return_inverse=True)
        keys = np.unique(row * len(values) + index.reshape(-1))
        return cls(keys // len(values), keys % len(values), values, last_exact, period)

    def row_of(self, n: IntArray) -> IntArray:
        """The row serving each true count n ≥ 0."""
        if self.period == 1:
            return np.minimum(n, self.last_exact + 1)
        first = self.last_exact - self.period + 1  # the first of the repeating rows
        return np.where(n <= self.last_exact, n, (n - 1) % self.period + first)

    def can_add(self, n: IntArray, index: IntArray) -> BoolArray:
        """Whether noise ``values[index]`` can be added to true count ``n`` (elementwise)."""
        keys = self.rows * len(self.values) + self.noise
        wanted = self.row_of(n) * len(self.values) + index
        at = np.minimum(np.searchsorted(keys, wanted), len(keys) - 1)
        return keys[at] == wanted

    def highest_below(self, limit: int) -> int:
        """The largest true count that some noise takes to at most ``limit`` (0 at least)."""
        value = self.values[self.noise]
        own = self.rows <= self.last_exact  # rows serving n = row
        fits = own & (self.rows + value <= limit)
        best = int(self.rows[fits].max(initial=0))
        first = int(self.row_of(np.array([self.last_exact + 1]))[0])
        for row, v in zip(self.rows[self.rows >= first], value[self.rows >= first], strict=True):
            top = int(limit - v)  # the largest n > last_exact this row serves with n + v ≤ limit
            if self.period > 1:  # n ≡ row − first + last_exact + 1 (mod period)
                top -= (top - (int(row) - first + self.last_exact + 1)) % self.period
            if top > self.last_exact:
                best = max(best, top)
        return best


@lru_cache(maxsize=8)
def noise_support(table: PTable | OnsPTable) -> NoiseSupport:
    """The noise support of ``table`` (the same table object: computed once)."""
    return NoiseSupport.of(table)


def preimage_bounds(
    table: PTable | OnsPTable, threshold: int, published: npt.ArrayLike
) -> tuple[IntArray, IntArray]:
    """For every published count: the smallest and largest true count that the p-table (then the
    threshold, which publishes counts below it as 0) can turn into it; a count nothing turns
    into (not whole, negative, below the threshold, beyond the noise's reach of every count) has
    smallest > largest.

    The work is the distinct counts given times the distinct noise values of the table, however
    large the counts."""
    counts = np.asarray(published, dtype=np.float64)
    distinct, where = np.unique(counts, return_inverse=True)
    low = np.full(len(distinct), np.iinfo(np.int64).max)
    high = np.full(len(distinct), -1, dtype=np.int64)
    support = noise_support(table)
    whole = np.isfinite(distinct) & (distinct == np.round(distinct)) & (distinct >= 0)
    whole &= distinct < 2.0**62  # no population has more
    shown = np.flatnonzero(whole & (distinct >= max(threshold, 1)))
    index = np.arange(len(support.values))
    step = max(1, PREIMAGE_CHUNK // len(index))
    for start in range(0, len(shown), step):
        part = shown[start : start + step]
        n = distinct[part].astype(np.int64)[:, None] - support.values[None, :]
        ok = n >= 0
        ok[ok] = support.can_add(n[ok], np.broadcast_to(index, n.shape)[ok])
        low[part] = np.where(ok, n, np.iinfo(np.int64).max).min(axis=1)
        high[part] = np.where(ok, n, -1).max(axis=1)
    zero = np.flatnonzero(whole & (distinct == 0))
    low[zero] = 0  # a true 0 publishes 0
    high[zero] = support.highest_below(max(threshold, 1) - 1)
    where = where.reshape(counts.shape)
    return low[where], high[where]


def preimage_range(
    table: PTable | OnsPTable, threshold: int, largest: int
) -> tuple[IntArray, IntArray]:
    """:func:`preimage_bounds` of every published count 0..``largest``."""
    return preimage_bounds(table, threshold, np.arange(largest + 1))


# ---------------------------------------------------------------------------------------------
# (ε, δ) of neighbouring counts
# ---------------------------------------------------------------------------------------------


def _row_matrix(table: PTable | OnsPTable, counts: IntArray) -> tuple[FloatArray, int]:
    """Noise pmfs of ``counts`` as rows over v = −W..W, and W."""
    rows = [table.row(int(n)) for n in np.unique(counts)]
    width = max(int(np.abs(v).max()) for v, _ in rows)
    dense = np.zeros((len(rows), 2 * width + 1))
    for k, (v, p) in enumerate(rows):
        np.add.at(dense[k], v + width, p)
    return dense[np.searchsorted(np.unique(counts), counts)], width


def delta_pairs(table: PTable | OnsPTable, epsilon: float) -> FloatArray:
    """δ_n(ε) of the neighbouring counts (n, n + 1), n = 0..N (docs/cellkey.md, *The card*).

    N = i_max for a long-format table (the last pair is two symmetry-row outputs, which every
    larger pair repeats) and 1000 for an ONS table (pcv repeats with period 250 above 750).
    With y = n + v, δ_n = max(Σ_y [P_n(y) − e^ε P_{n+1}(y)]₊, Σ_y [P_{n+1}(y) − e^ε P_n(y)]₊).
    """
    if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real):
        raise InputError(f"epsilon must be a number, got {epsilon!r}")
    if not 0 <= float(epsilon) < math.inf:
        raise InputError(f"epsilon must be finite and non-negative, got {epsilon}")
    last = table.i_max if isinstance(table, PTable) else ONS_DELTA_MAX
    counts = np.arange(last + 2, dtype=np.int64)
    if isinstance(table, OnsPTable):
        counts = pcv(counts)
    dense, _ = _row_matrix(table, counts)
    # output y − n on the grid −W..W+1: P_n is the row itself, P_{n+1} the next row shifted by one
    lower = np.pad(dense[:-1], ((0, 0), (0, 1)))
    upper = np.pad(dense[1:], ((0, 0), (1, 0)))
    factor = math.exp(min(float(epsilon), 700.0))
    forward = np.maximum(lower - factor * upper, 0.0).sum(axis=1)
    backward = np.maximum(upper - factor * lower, 0.0).sum(axis=1)
    return np.asarray(np.maximum(forward, backward), dtype=np.float64)


def _last_row(table: PTable | OnsPTable) -> int:
    """The last count whose row (and pair with the next count) can differ from a smaller one's."""
    return table.i_max if isinstance(table, PTable) else ONS_DELTA_MAX


def _rows_of(table: PTable | OnsPTable, counts: IntArray) -> IntArray:
    """The counts whose rows serve ``counts`` (an ONS table's pcv; a long table's own)."""
    return pcv(counts) if isinstance(table, OnsPTable) else counts


def is_deterministic(table: PTable | OnsPTable) -> bool:
    """Whether every count has one published value of probability 1: the noise then does not
    depend on the cell key (deterministic rounding, as in the ONS 10/5 table)."""
    counts = np.arange(_last_row(table) + 2, dtype=np.int64)
    dense, _ = _row_matrix(table, _rows_of(table, counts))
    return bool(np.all(dense.max(axis=1) >= 1 - 1e-12))


def is_invertible(table: PTable | OnsPTable) -> bool:
    """Whether the noise is a fixed function of the count that an attacker can undo: every count
    has one published value (:func:`is_deterministic`) and no two counts share it (the identity,
    a constant shift; not a rounding, which maps many counts to one).

    Counts from 0 to the last distinct row and 2W + 2 beyond it are compared (W the largest
    noise): above that, the rows repeat and a published value n + v is at least W beyond every
    smaller count's.
    """
    if not is_deterministic(table):
        return False
    last = _last_row(table)
    _, width = _row_matrix(table, _rows_of(table, np.arange(last + 2, dtype=np.int64)))
    counts = np.arange(last + 2 * width + 3, dtype=np.int64)
    dense, width = _row_matrix(table, _rows_of(table, counts))
    published = counts + dense.argmax(axis=1) - width
    return bool(np.unique(published).size == counts.size)


def smallest_shown(table: PTable | OnsPTable) -> int:
    """The smallest count a deterministic table (:func:`is_deterministic`) publishes for a true
    count of 1 or more: a threshold at or below it withholds nothing."""
    last = _last_row(table)
    _, width = _row_matrix(table, _rows_of(table, np.arange(last + 2, dtype=np.int64)))
    counts = np.arange(1, last + 2 * width + 3, dtype=np.int64)
    dense, width = _row_matrix(table, _rows_of(table, counts))
    return int((counts + dense.argmax(axis=1) - width).min())


def delta_for_epsilon(table: PTable | OnsPTable, epsilon: float) -> float:
    """δ(ε) of the whole mechanism: the largest δ_n(ε) over neighbouring counts."""
    return float(delta_pairs(table, epsilon).max())


__all__ = [
    "OnsPTable",
    "PTable",
    "create_ptable",
    "delta_for_epsilon",
    "delta_pairs",
    "large_count_noise",
    "ons_10_5_ptable",
    "pcv",
    "read_ptable",
    "symmetry_row",
    "to_ons",
    "write_ptable",
]
