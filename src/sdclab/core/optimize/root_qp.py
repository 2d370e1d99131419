"""TopDown's root problem by a structured primal-dual interior point method.

The root of the geography (the nation) is one histogram with no parent. Its L2 pass is the QP

    minimise   Σ_j d_j (x_j − s_j)²  +  Σ_r w_r (A_r x − t_r)²
    subject to x ≥ 0 on the allowed cells,  lo ≤ K x ≤ hi

over every cell of the histogram (229,320 for the dhc product, whatever the population), with a
few bound rows K (the invariant total, the hhgq bounds, earlier passes' tolerances). The detailed
query puts a diagonal on every cell and the other queries are a few hundred wide rows A, so each
Newton system of an interior point method,

    (2D + X⁻¹Z + 2AᵀWA + Gᵀ(Λ/S)G) Δx = r,

is a diagonal plus a low-rank term. The Sherman–Morrison–Woodbury identity solves it with one dense
Cholesky factorisation of the size of the rows (≈ 680 for the dhc nation) per iteration, where a
general solver factors a sparse KKT matrix over all the cells. Iterates follow Mehrotra's
predictor-corrector method (Nocedal & Wright, *Numerical Optimization*, §16.6).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import scipy.linalg as la
import scipy.sparse as sp

from sdclab.core.arrays import BoolArray, FloatArray, IntArray
from sdclab.core.optimize.sibling_qp import NotConverged, SiblingQP, max_norm

FEASIBILITY = 1e-8
"""Stop when the primal residuals are below this relative to the bounds' scale, the dual
residual relative to the largest of its terms, and ..."""
GAP = 1e-9
"""... the complementarity x·z + s·λ below this relative to the objective (the weighted squared
distance to the answers)."""
ACCEPTABLE = 1e-6
"""Near the optimum the cells at zero make the Newton systems ill-conditioned; when a step makes
the dual residual worse tenfold or not finite, or the iterations run out, the last iterate
measured is returned if it met these looser tolerances (production's optimality tolerance), else
the method has failed."""
MAX_ITERATIONS = 100
MAX_ROUNDS = 50
"""Working-set rounds (each adds every held cell that would fill) before giving up."""
SIGNAL = 2.0
"""Cells whose detailed answer exceeds this many standard deviations start in the working set."""
PER_BOUND_ROW = 10
"""... as do this many cells of each bound row, those with the largest answers."""
STEP_TO_BOUNDARY = 0.99
"""The fraction of the step to the boundary of the positive orthant that is taken."""


@dataclass(frozen=True)
class _Data:
    """The pass over the allowed cells: ½ xᵀ(diag(h) + Aᵀ diag(w) A)x − bᵀx, x ≥ 0, G x ≥ g,
    E x = e, in units that put the largest bound near the number of cells."""

    h: FloatArray
    a: sp.csr_matrix
    w: FloatArray
    b: FloatArray
    g_matrix: sp.csr_matrix
    g: FloatArray
    e_matrix: sp.csr_matrix
    e: FloatArray
    constant: float
    """½ Σ h s² + ½ Σ w t²: with it, the objective is the weighted squared distance itself."""
    answer: FloatArray
    """Each cell's detailed answer, and ..."""
    sigma: FloatArray
    """... its noise's standard deviation (inf where unmeasured)."""

    def on(self, cells: IntArray) -> _Data:
        """The same problem with every other cell held at zero."""
        return replace(
            self,
            h=self.h[cells],
            a=self.a[:, cells],
            b=self.b[cells],
            g_matrix=self.g_matrix[:, cells],
            e_matrix=self.e_matrix[:, cells],
            answer=self.answer[cells],
            sigma=self.sigma[cells],
        )

    def hessian_times(self, x: FloatArray) -> FloatArray:
        """(diag(h) + Aᵀ diag(w) A) x."""
        return self.h * x + self.a.T @ (self.w * (self.a @ x))

    def reduced_gradient(self, x: FloatArray, y: FloatArray, lam: FloatArray) -> FloatArray:
        """∇f(x) − Eᵀy − Gᵀλ: at the optimum, zero where x > 0 and non-negative where x = 0."""
        return self.hessian_times(x) - self.b - self.e_matrix.T @ y - self.g_matrix.T @ lam


def solve_root_qp(qp: SiblingQP) -> FloatArray:
    """The pass's optimum (1 × n); NotConverged if the interior point method does not converge.

    Most cells of the root stay empty, so the method works on a *working set*: the cells whose
    detailed answer is well above its noise and, for each bound row, its cells with the largest
    answers. The problem with every other cell held at zero is solved; every held cell whose
    reduced gradient is negative (the objective falls if it fills) joins the set, and the larger
    problem is solved anew. When no held cell would fill, the solution meets every KKT condition
    of the whole problem to the method's tolerances. If a restricted problem cannot be solved
    (it may be infeasible: a bound row whose cells are all held at zero), the whole problem is.
    """
    if qp.mask.shape[0] != 1 or qp.parent is not None:
        raise ValueError("the root problem has one histogram and no parent")
    allowed = np.flatnonzero(qp.mask[0])
    data, scale = _scaled(qp, allowed)
    working = _initial_working_set(data)
    x = np.zeros(len(allowed))
    for _ in range(MAX_ROUNDS):
        cells = np.flatnonzero(working)
        try:
            x_working, y, lam = _interior_point(data.on(cells))
        except NotConverged:
            x_working, y, lam = _interior_point(data)  # NotConverged here goes to the caller
            working[:] = True
            cells = np.arange(len(allowed))
        x[:] = 0.0
        x[cells] = x_working
        if working.all():
            break
        fills = ~working & (data.reduced_gradient(x, y, lam) < -_dual_tolerance(data))
        if not fills.any():
            break
        working |= fills
    else:
        raise NotConverged(f"the root's working set still grew after {MAX_ROUNDS} rounds")
    out = np.zeros(qp.mask.shape)
    out[0, allowed] = scale * x
    return out


def _initial_working_set(data: _Data) -> BoolArray:
    """Cells whose detailed answer is more than :data:`SIGNAL` standard deviations above zero,
    and the :data:`PER_BOUND_ROW` cells with the largest answers of each bound row (so that the
    restricted problem can meet the bounds)."""
    target = data.answer
    working = target > SIGNAL * data.sigma
    bounds = sp.vstack([data.g_matrix, data.e_matrix], format="csr")
    for row in range(bounds.shape[0]):
        cells = bounds.indices[bounds.indptr[row] : bounds.indptr[row + 1]]
        working[cells[np.argsort(-target[cells])[:PER_BOUND_ROW]]] = True
    return working


def _dual_tolerance(data: _Data) -> float:
    return FEASIBILITY * (1.0 + np.abs(data.b).max(initial=0.0))


def _scaled(qp: SiblingQP, allowed: np.ndarray) -> tuple[_Data, float]:
    """The pass on the allowed cells, in units that make the largest detailed answer or finite
    lower bound (the invariant total) ≈ the number of cells: interior point tolerances are
    relative, and a nation of millions is otherwise lopsided. Upper bounds are left out: the
    hhgq caps (99,999 persons per unit) are far above anything that binds."""
    lower, upper = qp.lower[0], qp.upper[0]
    largest = max(
        float(np.abs(lower[np.isfinite(lower)]).max(initial=0.0)),
        float(np.abs(qp.diag_target[0, allowed]).max(initial=0.0)),
    )
    scale = max(1.0, largest / max(len(allowed), 1))
    bounds = qp.bounds[:, allowed].tocsr().astype(float)
    equal = np.isfinite(lower) & (lower == upper)
    below = np.isfinite(lower) & ~equal
    above = np.isfinite(upper) & ~equal
    rows = qp.rows[:, allowed].tocsr().astype(float)
    measured = qp.row_weight[0] > 0
    a = rows[np.flatnonzero(measured)]
    w = 2 * qp.row_weight[0][measured]
    b = qp.linear()[0, allowed] / scale
    constant = (
        float(
            (qp.diag_weight[0, allowed] * qp.diag_target[0, allowed] ** 2).sum()
            + (qp.row_weight[0] * qp.row_target[0] ** 2).sum()
        )
        / scale**2
    )
    data = _Data(
        h=2 * qp.diag_weight[0, allowed],
        a=a,
        w=w,
        b=b,
        g_matrix=sp.vstack([bounds[below], -bounds[above]], format="csr"),
        g=np.concatenate([lower[below], -upper[above]]) / scale,
        e_matrix=bounds[equal],
        e=lower[equal] / scale,
        constant=constant,
        answer=qp.diag_target[0, allowed] / scale,
        sigma=np.divide(
            1.0,
            np.sqrt(qp.diag_weight[0, allowed]),
            out=np.full(len(allowed), np.inf),
            where=qp.diag_weight[0, allowed] > 0,
        )
        / scale,
    )
    return data, scale


class _Gram:
    """B diag(v) Bᵀ for a fixed sparse B and any weights v, as one sparse product.

    Entry (i, j) is Σ_c B_ic B_jc v_c over the columns both rows touch. Every column of B has a
    few non-zeros (one per query, one per bound row), so the pairs (i ≤ j, c) are listed once and
    each product is a single sparse matrix-vector product over them."""

    def __init__(self, b: sp.csr_matrix) -> None:
        m = b.shape[0]
        csc = b.tocsc(copy=True)
        csc.sum_duplicates()  # one entry per (row, column), sorted
        coo = csc.tocoo()  # by column, then row
        col, row, val = coo.col, coo.row, coo.data
        pairs, columns, values = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)], [np.zeros(0)]
        for offset in range(int(np.diff(csc.indptr).max(initial=0))):
            same = col[: len(col) - offset] == col[offset:]
            first = np.flatnonzero(same)
            second = first + offset
            pairs.append(row[first].astype(np.int64) * m + row[second])
            columns.append(col[first])
            values.append(val[first] * val[second])
        self.m = m
        self.pairs = sp.csr_matrix(
            (np.concatenate(values), (np.concatenate(pairs), np.concatenate(columns))),
            shape=(m * m, b.shape[1]),
        )

    def __call__(self, v: FloatArray) -> FloatArray:
        upper = (self.pairs @ v).reshape(self.m, self.m)
        return upper + upper.T - np.diag(np.diag(upper))


@dataclass
class _Newton:
    """The Newton system at one iterate, factored: its x-block diag(d) + Bᵀ Ω B (B the query
    rows over the inequality rows) by Woodbury, and the Schur complement of the equality rows."""

    d_inverse: FloatArray
    stacked: sp.csr_matrix
    sqrt_omega: FloatArray
    cholesky: tuple[FloatArray, bool]
    e_matrix: sp.csr_matrix
    schur: tuple[FloatArray, bool] | None

    @classmethod
    def build(
        cls, data: _Data, stacked: sp.csr_matrix, gram: _Gram, d: FloatArray, omega: FloatArray
    ) -> _Newton:
        d_inverse = 1.0 / d
        sqrt_omega = np.sqrt(omega)
        inner = sqrt_omega[:, None] * gram(d_inverse) * sqrt_omega[None, :]
        inner[np.diag_indices_from(inner)] += 1.0
        cholesky = la.cho_factor(inner, lower=True)
        newton = cls(d_inverse, stacked, sqrt_omega, cholesky, data.e_matrix, None)
        if data.e_matrix.shape[0] > 0:
            schur = data.e_matrix @ newton.solve_x(data.e_matrix.T.toarray())
            newton.schur = la.cho_factor(schur, lower=True)
        return newton

    def times(self, v: FloatArray) -> FloatArray:
        """(diag(d) + BᵀΩB) v."""
        return v / self.d_inverse + self.stacked.T @ (self.sqrt_omega**2 * (self.stacked @ v))

    def solve_x(self, r: FloatArray) -> FloatArray:
        """(diag(d) + BᵀΩB)⁻¹ r, for a vector or the columns of a matrix."""
        d_inverse = self.d_inverse if r.ndim == 1 else self.d_inverse[:, None]
        omega = self.sqrt_omega if r.ndim == 1 else self.sqrt_omega[:, None]
        scaled = r * d_inverse
        correction = la.cho_solve(self.cholesky, omega * (self.stacked @ scaled))
        return scaled - (self.stacked.T @ (omega * correction)) * d_inverse

    def solve(self, r_x: FloatArray, r_e: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Δx and Δy from M Δx − Eᵀ Δy = r_x, E Δx = r_e."""
        base = self.solve_x(r_x)
        if self.schur is None:
            return base, np.zeros(0)
        dy = la.cho_solve(self.schur, r_e - self.e_matrix @ base)
        return base + self.solve_x(self.e_matrix.T @ dy), dy


@dataclass(frozen=True)
class _Point:
    """An iterate: x and its bound duals z, the slacks s = G x − g and their duals λ, and the
    equality rows' multipliers y."""

    x: FloatArray
    y: FloatArray
    z: FloatArray
    s: FloatArray
    lam: FloatArray

    def moved(self, step: float, d: _Point) -> _Point:
        return _Point(*(v + step * dv for v, dv in zip(self.parts(), d.parts(), strict=True)))

    def parts(self) -> tuple[FloatArray, ...]:
        return self.x, self.y, self.z, self.s, self.lam

    def complementarity(self) -> float:
        return float(self.x @ self.z + self.s @ self.lam)

    def largest_step(self, d: _Point) -> float:
        """The largest step keeping x, z, s and λ positive (inf if none of them falls)."""
        step = np.inf
        for value, change in ((self.x, d.x), (self.z, d.z), (self.s, d.s), (self.lam, d.lam)):
            falling = change < 0
            if falling.any():
                step = min(step, float((-value[falling] / change[falling]).min()))
        return step


@dataclass(frozen=True)
class _Residuals:
    dual: FloatArray  # ∇f − Eᵀy − Gᵀλ − z
    equality: FloatArray  # E x − e
    inequality: FloatArray  # G x − s − g


def _interior_point(data: _Data) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Mehrotra's predictor-corrector method on :class:`_Data`: the optimal x and the
    multipliers of the equality and inequality rows; NotConverged if it fails."""
    n = len(data.h)
    x = np.maximum(data.answer, 1.0)  # a start near the answers converges in fewer steps
    point = _Point(
        x,
        np.zeros(data.e_matrix.shape[0]),
        np.ones(n),
        np.maximum(data.g_matrix @ x - data.g, 1.0),
        np.ones(data.g_matrix.shape[0]),
    )
    stacked = sp.vstack([data.a, data.g_matrix], format="csr")
    gram = _Gram(stacked)
    previous: tuple[_Point, tuple[float, float, float]] | None = None
    for _ in range(MAX_ITERATIONS):
        residuals, measures = _measure(data, point)
        if all(r <= t for r, t in zip(measures, (FEASIBILITY, FEASIBILITY, GAP), strict=True)):
            return point.x, point.y, point.lam
        if previous is not None and measures[0] > 10 * previous[1][0]:
            break
        previous = (point, measures)
        try:
            point = _predictor_corrector(data, stacked, gram, point, residuals)
        except (np.linalg.LinAlgError, ValueError):
            # a singular system (bound rows over no cell of the working set, or equality rows
            # that are not independent) or one no longer finite (an infeasible problem drives
            # slacks to zero and their duals to infinity)
            break
    if previous is not None and max(previous[1]) <= ACCEPTABLE:
        return previous[0].x, previous[0].y, previous[0].lam
    raise NotConverged("the root's interior point method did not converge")


def _predictor_corrector(
    data: _Data, stacked: sp.csr_matrix, gram: _Gram, point: _Point, residuals: _Residuals
) -> _Point:
    """One Mehrotra step from ``point``; ValueError if it is not finite."""
    n, m_g = len(data.h), data.g_matrix.shape[0]
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):  # checked at the end
        newton = _Newton.build(
            data,
            stacked,
            gram,
            data.h + point.z / point.x,
            np.concatenate([data.w, point.lam / point.s]),
        )
        mu = point.complementarity() / (n + m_g)
        affine = _direction(data, point, residuals, newton, point.x * point.z, point.s * point.lam)
        ahead = point.moved(min(1.0, point.largest_step(affine)), affine)
        sigma = (ahead.complementarity() / point.complementarity()) ** 3
        corrected = _direction(
            data,
            point,
            residuals,
            newton,
            point.x * point.z + affine.x * affine.z - sigma * mu,
            point.s * point.lam + affine.s * affine.lam - sigma * mu,
        )
        moved = point.moved(min(1.0, STEP_TO_BOUNDARY * point.largest_step(corrected)), corrected)
    if not all(np.isfinite(v).all() for v in moved.parts()):
        raise ValueError("the interior point step is not finite")
    return moved


def _measure(data: _Data, p: _Point) -> tuple[_Residuals, tuple[float, float, float]]:
    """The residuals at ``p`` and the three measures the stopping rule compares: the dual
    residual relative to its largest term, the primal ones relative to the bounds, and the
    complementarity relative to the objective."""
    hx = data.hessian_times(p.x)
    ey, gl = data.e_matrix.T @ p.y, data.g_matrix.T @ p.lam
    r = _Residuals(
        dual=hx - data.b - ey - gl - p.z,
        equality=data.e_matrix @ p.x - data.e,
        inequality=data.g_matrix @ p.x - p.s - data.g,
    )
    dual_scale = max(1.0, *(max_norm(v) for v in (data.b, hx, p.z, ey, gl)))
    bound_scale = 1.0 + max(max_norm(data.g), max_norm(data.e))
    objective = float(0.5 * p.x @ hx - data.b @ p.x) + data.constant  # the weighted distance, ≥ 0
    return r, (
        max_norm(r.dual) / dual_scale,
        max(max_norm(r.equality), max_norm(r.inequality)) / bound_scale,
        p.complementarity() / max(1.0, abs(objective)),
    )


def _direction(
    data: _Data, p: _Point, r: _Residuals, newton: _Newton, r_xz: FloatArray, r_sl: FloatArray
) -> _Point:
    """The Newton direction for complementarity targets x∘z = x∘z − r_xz and s∘λ = s∘λ − r_sl.

    z, s and λ are eliminated: (H + X⁻¹Z + Gᵀ(Λ/S)G) Δx − Eᵀ Δy = rhs, E Δx = −r_e, solved with
    one step of iterative refinement against the exact matrix."""
    rhs = -r.dual - r_xz / p.x - data.g_matrix.T @ ((r_sl + p.lam * r.inequality) / p.s)
    dx, dy = newton.solve(rhs, -r.equality)
    fix_x, fix_y = newton.solve(
        rhs - newton.times(dx) + data.e_matrix.T @ dy, -r.equality - data.e_matrix @ dx
    )
    dx, dy = dx + fix_x, dy + fix_y
    ds = data.g_matrix @ dx + r.inequality
    return _Point(
        x=dx,
        y=dy,
        z=-(r_xz + p.z * dx) / p.x,
        s=ds,
        lam=-(r_sl + p.lam * ds) / p.s,
    )
