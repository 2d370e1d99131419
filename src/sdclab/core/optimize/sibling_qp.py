"""A structure-exploiting ADMM for TopDown's sibling least-squares problems.

Every L2 pass of TopDown (docs/topdown.md, *L2 step*) is the convex QP

    minimise   Σ_c Σ_j d_cj (x_cj − s_cj)²  +  Σ_c Σ_r w_cr (A_r x_c − t_cr)²
    subject to x ≥ 0,  x_cj = 0 where child c may not hold cell j,
               Σ_c x_c = parent                     (the cell sums: couples the children)
               lo_c ≤ K x_c ≤ hi_c                   (hhgq bounds, totals, earlier passes)

over children c and the parent's support cells j. General sparse solvers factor its KKT matrix,
and the cell sums couple every child's query rows into a dense Schur complement: a county with 25
tracts on 4,000 cells takes minutes to factor. Here ADMM splits the problem where it is easy:

* the quadratic is separable by child and each child's Hessian is diagonal plus the low-rank
  ``AᵀWA + KᵀK`` (a few hundred marginal rows), so the x-step is one Woodbury solve per child
  with a small dense m × m matrix factored once;
* the cell sums and non-negativity are a scaled simplex per cell: an exact, vectorised projection;
* the rows of K meet their bounds by clipping.

Iterates follow Boyd et al. (2011) and OSQP's step-size rule (Stellato et al. 2020). ADMM gets
near the optimum quickly and then crawls, so, like OSQP, it *polishes*: at a loose tolerance it
guesses the active set (the zero variables and the K rows at a bound), solves the equality-
constrained QP on that guess exactly (one sparse KKT factorisation) and accepts the result only if
it meets every KKT condition — primal feasibility and the signs of the multipliers of the zero
variables and active rows. A rejected polish lets ADMM go on to a tighter tolerance and try again;
past the last one the projected iterate is returned as it is, exactly non-negative, summing exactly
to the parent, and meeting the K bounds to within the primal tolerance (the rounder then enforces
them exactly on the integers).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt
import scipy.linalg as la
import scipy.sparse as sp

from sdclab.core.arrays import BoolArray, FloatArray
from sdclab.core.optimize.parent_problem import InfeasibleProblem

ABSOLUTE, RELATIVE = 1e-7, 1e-8
"""Stopping tolerances on the primal and dual residuals (in persons)."""
POLISH_AT = (1e-2, 1e-3, 1e-4, 1e-5)
"""Absolute tolerances (relative: a tenth of each) at which ADMM stops to try a polish; the
iterative polish (large children), whose steps cost more, is tried once, at the second."""
KKT_TOLERANCE = 1e-7
"""A polished solution is accepted when every KKT condition holds to within this (in persons for
the bounds, relative to the multipliers' scale for their signs)."""
POLISH_STEPS = 15
"""Active-set corrections a polish may make before it gives up."""
POLISH_WORK = 1e9
"""Each child's KKT system is inverted densely when Σ_c (free variables of child c)³ is at most
this (many small children: blocks); above it the polish solves by conjugate gradients."""
CG_TOLERANCE = 1e-10
"""Conjugate gradients stop when the constraint residual is below this (relative, in persons)."""
CG_GUESS_TOLERANCE = 1e-6
"""The same, for the active-set steps that only guess: their solutions are not certified, and
the exact solve that certifies starts from the last of them."""
CG_ITERATIONS = 600
"""TopDown's multiplier systems converge in ≈ 200; more means a nearly singular system."""
MAX_ITERATIONS = 20_000
CHECK_EVERY = 10
RELAXATION = 1.6
"""Over-relaxation α of the projection steps (OSQP's default)."""
STEP_CHANGE = 5.0
"""Refactor with a new step size ρ when the balanced one differs by more than this factor."""


class NotConverged(RuntimeError):
    """An iterative solver (ADMM, the root's interior point method) stopped before meeting its
    tolerances."""


@dataclass(frozen=True)
class SiblingQP:
    """The data of one pass: C children on n support cells (see the module docstring)."""

    mask: BoolArray
    """C × n: may child c hold cell j?"""
    parent: FloatArray | None
    """n: the parent's histogram (None at the root: then only x ≥ 0)."""
    diag_weight: FloatArray
    """C × n: d, the weight of single-cell rows (the detailed query), 0 where none."""
    diag_target: FloatArray
    """C × n: s, their targets."""
    rows: sp.csr_matrix
    """m₁ × n: the query rows over several cells."""
    row_weight: FloatArray
    """C × m₁: w (0 for rows a child was not measured on)."""
    row_target: FloatArray
    """C × m₁: t."""
    bounds: sp.csr_matrix
    """m₂ × n: the rows of K."""
    lower: FloatArray
    """C × m₂ (−inf where unbounded below)."""
    upper: FloatArray
    """C × m₂ (+inf where unbounded above)."""

    def objective(self, x: FloatArray) -> float:
        diag = self.diag_weight * (x - self.diag_target) ** 2
        rows = self.row_weight * ((self.rows @ x.T).T - self.row_target) ** 2
        return float(diag.sum() + rows.sum())

    def linear(self) -> FloatArray:
        """C × n: b, the objective's linear part (its gradient is H x − b)."""
        weighted = (self.row_weight * self.row_target).T
        return 2 * self.diag_weight * self.diag_target + 2 * (self.rows.T @ weighted).T

    def gradient(self, x: FloatArray) -> FloatArray:
        """C × n: the objective's gradient at ``x``."""
        residual = (self.rows @ x.T).T - self.row_target
        return (
            2 * self.diag_weight * (x - self.diag_target)
            + 2 * (self.rows.T @ (self.row_weight * residual).T).T
        )


@dataclass
class _Factor:
    """The x-step's linear operator (2D + ρI + Uᵀ E U)⁻¹ for one step size ρ, by Woodbury.

    Siblings measured alike and allowed the same cells (most blocks of a block group) have the
    same matrix, so each distinct child is factored once and shared."""

    d_inverse: FloatArray  # C × n, 0 outside the mask (those variables stay at 0)
    sqrt_e: FloatArray  # C × m
    g_inverse: FloatArray  # G × m × m: (I + E^½ U D⁻¹ Uᵀ E^½)⁻¹ of each distinct child
    members: list[npt.NDArray[np.intp]]  # G: the children sharing each

    @classmethod
    def build(cls, qp: SiblingQP, stacked: sp.csr_matrix, rho: float) -> _Factor:
        d_inverse = np.where(qp.mask, 1.0 / (2 * qp.diag_weight + rho), 0.0)
        m2 = qp.bounds.shape[0]
        sqrt_e = np.sqrt(np.hstack([2 * qp.row_weight, np.full((qp.mask.shape[0], m2), rho)]))
        _, first, group = np.unique(
            np.hstack([d_inverse, sqrt_e]), axis=0, return_index=True, return_inverse=True
        )
        m = stacked.shape[0]
        g_inverse = np.empty((len(first), m, m))
        eye = np.eye(m)
        for g, c in enumerate(first.tolist()):
            inner = (stacked @ sp.diags(d_inverse[c]) @ stacked.T).toarray()
            g_inverse[g] = _spd_inverse(eye + sqrt_e[c][:, None] * inner * sqrt_e[c][None, :])
        members = [np.flatnonzero(group.ravel() == g) for g in range(len(first))]
        return cls(d_inverse, sqrt_e, g_inverse, members)

    def solve(self, stacked: sp.csr_matrix, rhs: FloatArray) -> FloatArray:
        z = rhs * self.d_inverse
        p = (stacked @ z.T).T * self.sqrt_e
        for g_inverse, children in zip(self.g_inverse, self.members, strict=True):
            p[children] = p[children] @ g_inverse  # g_inverse is symmetric
        p *= self.sqrt_e
        return z - self.d_inverse * (stacked.T @ p.T).T


def _spd_inverse(g: FloatArray) -> FloatArray:
    """The inverse of a symmetric positive definite matrix from its Cholesky factor (LAPACK
    potrf + potri: a third of the work of solving against the identity)."""
    factor, info = la.lapack.dpotrf(g, lower=True)
    if info == 0:
        inverse, info = la.lapack.dpotri(factor, lower=True)
    if info != 0:
        raise np.linalg.LinAlgError(f"matrix not positive definite (LAPACK info {info})")
    return np.tril(inverse) + np.tril(inverse, -1).T


def project_cells(v: FloatArray, mask: BoolArray, parent: FloatArray | None) -> FloatArray:
    """Euclidean projection of each cell's column onto {x ≥ 0 on the mask, Σ_c x_c = parent}."""
    if parent is None:
        return np.where(mask, np.maximum(v, 0.0), 0.0)
    children = v.shape[0]
    masked = np.where(mask, v, -np.inf)
    ordered = -np.sort(-masked, axis=0)
    finite = np.isfinite(ordered)
    cumulative = np.cumsum(np.where(finite, ordered, 0.0), axis=0)
    k = np.arange(1, children + 1)[:, None]
    positive = finite & (ordered * k > cumulative - parent[None, :])
    count = positive.sum(axis=0)
    if ((count == 0) & (parent > 0)).any():
        raise InfeasibleProblem("a parent cell no child may hold")
    columns = np.arange(v.shape[1])
    safe = np.maximum(count, 1)
    theta = (cumulative[safe - 1, columns] - parent) / safe
    out = np.where(mask, np.maximum(v - theta[None, :], 0.0), 0.0)
    out[:, parent <= 0] = 0.0
    return out


def solve_sibling_qp(qp: SiblingQP, start: FloatArray | None = None) -> tuple[FloatArray, int]:
    """The pass's optimum (C × n) and the ADMM iterations it took; NotConverged past the limit."""
    stacked = sp.vstack([qp.rows, qp.bounds], format="csr")
    k_rows = qp.bounds
    linear = qp.linear()
    rho = _initial_step(qp)
    factor = _Factor.build(qp, stacked, rho)
    y = project_cells(np.zeros(qp.mask.shape) if start is None else start, qp.mask, qp.parent)
    u = np.zeros_like(y)
    kz = np.clip((k_rows @ y.T).T, qp.lower, qp.upper)
    kv = np.zeros_like(kz)
    tolerances = [(a, a / 10) for a in POLISH_AT] + [(ABSOLUTE, RELATIVE)]
    stage = 0
    tried_iterative = False  # the iterative polish is tried once (its steps are costly)
    for iteration in range(1, MAX_ITERATIONS + 1):
        rhs = linear + rho * (y - u) + rho * (k_rows.T @ (kz - kv).T).T
        x = factor.solve(stacked, rhs)
        kx = (k_rows @ x.T).T
        x_hat = RELAXATION * x + (1 - RELAXATION) * y
        kx_hat = RELAXATION * kx + (1 - RELAXATION) * kz
        y_previous, kz_previous = y, kz
        y = project_cells(x_hat + u, qp.mask, qp.parent)
        kz = np.clip(kx_hat + kv, qp.lower, qp.upper)
        u += x_hat - y
        kv += kx_hat - kz
        if iteration % CHECK_EVERY:
            continue
        primal = max(max_norm(x - y), max_norm(kx - kz))
        dual = rho * max(max_norm(y - y_previous), max_norm((k_rows.T @ (kz - kz_previous).T).T))
        primal_scale = max(max_norm(x), max_norm(y), max_norm(kx), max_norm(kz))
        dual_scale = max(max_norm(linear), rho * max_norm(u), rho * max_norm(kv))
        residuals = (primal, primal_scale, dual, dual_scale)
        if _converged(residuals, tolerances[stage]):
            while stage + 1 < len(tolerances) and _converged(residuals, tolerances[stage + 1]):
                stage += 1
            polished = polish(qp, y, kz, iterative=stage > 0 and not tried_iterative)
            tried_iterative |= stage > 0
            if polished is not None:
                return polished, iteration
            if stage == len(tolerances) - 1:
                return y, iteration
            stage += 1
        balanced = rho * np.sqrt(
            (primal / max(primal_scale, 1e-12)) / max(dual / max(dual_scale, 1e-12), 1e-30)
        )
        new_rho = float(np.clip(balanced, 1e-6, 1e6))
        if new_rho != rho and not 1 / STEP_CHANGE <= new_rho / rho <= STEP_CHANGE:
            u *= rho / new_rho  # scaled duals follow the step size
            kv *= rho / new_rho
            rho = new_rho
            factor = _Factor.build(qp, stacked, rho)
    raise NotConverged(f"ADMM did not converge in {MAX_ITERATIONS} iterations")


def _converged(
    residuals: tuple[float, float, float, float], tolerance: tuple[float, float]
) -> bool:
    """Primal and dual residuals within absolute + relative × their scales."""
    primal, primal_scale, dual, dual_scale = residuals
    absolute, relative = tolerance
    return primal <= absolute + relative * primal_scale and dual <= absolute + relative * dual_scale


def polish(
    qp: SiblingQP, y: FloatArray, kz: FloatArray, iterative: bool = True
) -> FloatArray | None:
    """The exact optimum, found from ADMM's iterate by a primal-dual active-set method, or None.

    The first guess: the variables ``y`` holds at zero stay zero, the K rows whose clipped values
    ``kz`` sit at a bound hold there. Each step solves the equality-constrained QP on the guess
    exactly (:func:`_solve_on_active_set`) and checks every KKT condition; a failed check moves
    the offending variables and rows in or out of the guess (Hintermüller, Ito & Kunisch 2002).
    None after :data:`POLISH_STEPS` steps (then ADMM goes on), or at once if the problem needs
    the iterative solve and ``iterative`` is False.
    """
    free = y > 0
    if qp.parent is None:
        return None
    dense = (free.sum(axis=1).astype(float) ** 3).sum() <= POLISH_WORK
    if not (dense or iterative):
        return None
    warm: dict[str, FloatArray] = {}  # the iterative solve starts from the last multipliers

    def solve(
        free: BoolArray, at_lower: BoolArray, at_upper: BoolArray, loose: bool
    ) -> tuple[FloatArray, FloatArray, FloatArray] | None:
        if dense:
            return _solve_on_active_set(qp, free, at_lower, at_upper)
        return _solve_on_active_set_iteratively(qp, free, at_lower, at_upper, warm, loose)

    at_lower = (kz <= qp.lower) & np.isfinite(qp.lower)
    at_upper = (kz >= qp.upper) & np.isfinite(qp.upper)
    occupied = (qp.parent > 0)[None, :] & qp.mask  # a cell of an empty parent is zero anyway
    equality = qp.lower == qp.upper
    total = _total_row(qp)
    ky = (qp.bounds @ y.T).T
    inside = np.where(at_lower, ky - qp.lower, qp.upper - ky)  # how far y is from the held bound
    _keep_one_total_free(qp, total, free, at_lower, at_upper, inside)
    exact = dense  # the iterative solve guesses loosely until the guess stops changing
    for _ in range(POLISH_STEPS):
        solved = solve(free, at_lower, at_upper, loose=not exact)
        if solved is None:
            return None
        x, cell_multiplier, k_multiplier = solved
        gradient = qp.gradient(x)
        reduced = gradient + cell_multiplier[None, :] + (qp.bounds.T @ k_multiplier.T).T
        kx = (qp.bounds @ x.T).T
        tolerance = KKT_TOLERANCE * max(1.0, max_norm(gradient), max_norm(k_multiplier))
        if exact and max_norm(reduced[free]) > tolerance:  # not stationary: the solve failed
            return None
        negative = free & (x < -KKT_TOLERANCE)
        improving = occupied & ~free & (reduced < -tolerance)
        below = ~at_lower & (kx < qp.lower - KKT_TOLERANCE)
        above = ~at_upper & (kx > qp.upper + KKT_TOLERANCE)
        # a row held at its lower bound must push up (multiplier ≤ 0), at its upper one down
        leave_lower = at_lower & ~equality & (k_multiplier > tolerance)
        leave_upper = at_upper & ~equality & (k_multiplier < -tolerance)
        if not (negative.any() or improving.any() or below.any() or above.any()) and not (
            leave_lower.any() or leave_upper.any()
        ):
            if exact:
                return project_cells(np.maximum(x, 0.0), qp.mask, qp.parent)
            exact = True  # the guess holds: solve on it exactly to certify it
            continue
        # how weakly each held row is held: its multiplier's push away from its bound
        weakness = np.where(at_lower, k_multiplier, -k_multiplier)
        free = (free & ~negative) | improving
        at_lower = (at_lower & ~leave_lower) | below
        at_upper = (at_upper & ~leave_upper) | above
        weakness[below | above] = -np.inf  # a row just violated stays held
        _keep_one_total_free(qp, total, free, at_lower, at_upper, weakness)
    return None


def _total_row(qp: SiblingQP) -> int | None:
    """The K row that is every child's total (all ones over the cells), if there is one."""
    full = np.flatnonzero(np.diff(qp.bounds.indptr) == qp.bounds.shape[1])
    for r in full.tolist():
        if (qp.bounds[r].data == 1).all():
            return r
    return None


def _keep_one_total_free(
    qp: SiblingQP,
    total: int | None,
    free: BoolArray,
    at_lower: BoolArray,
    at_upper: BoolArray,
    weakness: FloatArray,
) -> None:
    """If the guess holds every child's total at a bound, free the most weakly held one that can
    move the way the cell sums need.

    The children's totals sum to the parent's (the cell sums imply it), so holding all of them
    makes the multiplier system singular and, unless the held values add up to the parent,
    infeasible: then at least one total lies strictly inside its bounds. If the held values add
    up to more than the parent, a total held at its upper bound must give way (one at its lower
    bound would be pushed below it), and conversely. Among those, the row released is the one
    held most weakly (``weakness``: its multiplier's push away from its bound)."""
    if total is None:
        return
    children = free.any(axis=1)
    held = (at_lower[:, total] | at_upper[:, total]) & children
    movable = qp.lower[:, total] < qp.upper[:, total]
    if not children.any() or not held[children].all() or not movable[children].any():
        return
    assert qp.parent is not None
    value = np.where(at_lower[:, total], qp.lower[:, total], qp.upper[:, total])
    excess = value[children].sum() - qp.parent.sum()
    side = at_upper[:, total] if excess > 0 else at_lower[:, total]
    candidates = held & movable
    if (candidates & side).any():
        candidates &= side
    c = int(np.argmax(np.where(candidates, weakness[:, total], -np.inf)))
    at_lower[c, total] = at_upper[c, total] = False


def _solve_on_active_set(
    qp: SiblingQP, free: BoolArray, at_lower: BoolArray, at_upper: BoolArray
) -> tuple[FloatArray, FloatArray, FloatArray] | None:
    """Minimise the pass over the ``free`` variables (the rest at 0) with the cell sums and the
    K rows at their chosen bounds as equalities: x, the cells' multipliers λ and the K rows' μ
    (stationarity: ∇f + λ + Kᵀμ = 0 on the free variables).

    Each child's KKT system (its dense Hessian 2D + 2AᵀWA on its free cells, its active K rows)
    is inverted on its own; the cell sums then leave one dense system in the cells' multipliers
    λ: Σ_c x_c(λ) = parent, with x_c affine in λ. None if a system is singular.
    """
    assert qp.parent is not None
    children, n = free.shape
    rows, bounds = qp.rows.tocsc(), qp.bounds.tocsc()
    bound_value = np.where(at_lower, qp.lower, qp.upper)
    schur = np.zeros((n, n))
    base = np.zeros((children, n))  # x_c at λ = 0
    local = []
    for c in range(children):
        cells = np.flatnonzero(free[c])
        a = rows[:, cells].toarray()
        w = qp.row_weight[c]
        d = qp.diag_weight[c, cells]
        hessian = 2 * (a.T * w) @ a + np.diag(2 * d)
        gradient0 = -2 * (d * qp.diag_target[c, cells] + a.T @ (w * qp.row_target[c]))
        k = bounds[:, cells].toarray()
        held = np.flatnonzero((at_lower[c] | at_upper[c]) & (k != 0).any(axis=1))
        k = k[held]  # a held row over no free variable stays at 0 (checked as any row is)
        size = len(cells) + len(held)
        kkt = np.zeros((size, size))
        kkt[: len(cells), : len(cells)] = hessian
        kkt[: len(cells), len(cells) :] = k.T
        kkt[len(cells) :, : len(cells)] = k
        try:
            inverse = np.linalg.inv(kkt)
        except np.linalg.LinAlgError:
            return None
        right = np.concatenate([-gradient0, bound_value[c, held]])
        solution0 = inverse @ right
        base[c, cells] = solution0[: len(cells)]
        # ∂x_c/∂λ = −(inverse)_xx on the child's free cells (λ enters as −E_cᵀλ)
        schur[np.ix_(cells, cells)] -= inverse[: len(cells), : len(cells)]
        local.append((cells, held, inverse, solution0))
    occupied = np.flatnonzero(free.any(axis=0))
    try:
        lam_occupied = np.linalg.solve(
            schur[np.ix_(occupied, occupied)], qp.parent[occupied] - base.sum(axis=0)[occupied]
        )
    except np.linalg.LinAlgError:
        return None
    lam = np.zeros(n)
    lam[occupied] = lam_occupied
    x = np.zeros((children, n))
    k_multiplier = np.zeros(qp.lower.shape)
    for c, (cells, held, inverse, solution0) in enumerate(local):
        solution = solution0 - inverse[:, : len(cells)] @ lam[cells]
        x[c, cells] = solution[: len(cells)]
        k_multiplier[c, held] = solution[len(cells) :]
    if not np.isfinite(x).all():
        return None
    return x, lam, k_multiplier


def _solve_on_active_set_iteratively(
    qp: SiblingQP,
    free: BoolArray,
    at_lower: BoolArray,
    at_upper: BoolArray,
    warm: dict[str, FloatArray],
    loose: bool = False,
) -> tuple[FloatArray, FloatArray, FloatArray] | None:
    """As :func:`_solve_on_active_set`, for large children: the Hessian on the free variables is
    applied through ADMM's Woodbury factor (step size 0), and the multipliers y of the cell sums
    and held K rows G solve G H⁻¹ Gᵀ y = G H⁻¹ b − h by Jacobi-preconditioned conjugate gradients
    (x = H⁻¹ (b − Gᵀ y)), starting from the multipliers ``warm`` holds (the previous step's) and
    leaving its own there. None if a free variable has no diagonal weight (H⁻¹ would not exist)
    or the iteration does not converge."""
    assert qp.parent is not None
    if (qp.diag_weight[free] <= 0).any():
        return None
    stacked = sp.vstack([qp.rows, qp.bounds], format="csr")
    factor = _Factor.build(replace(qp, mask=free), stacked, 0.0)
    linear = qp.linear()
    cells = np.flatnonzero(free.any(axis=0))
    k = qp.bounds
    reaches = (k @ free.T.astype(float)).T > 0  # C × m2: the row has a free variable
    held = _independent((at_lower | at_upper) & reaches, k, free)
    bound_value = np.where(at_lower, qp.lower, qp.upper)[held]
    n_cells = len(cells)

    def spread(y: FloatArray) -> FloatArray:  # Gᵀ y as a C × n array
        lam = np.zeros(free.shape[1])
        lam[cells] = y[:n_cells]
        mu = np.zeros(qp.lower.shape)
        mu[held] = y[n_cells:]
        return lam[None, :] + (k.T @ mu.T).T

    def gather(x: FloatArray) -> FloatArray:  # G x
        return np.concatenate([x.sum(axis=0)[cells], (k @ x.T).T[held]])

    x0 = factor.solve(stacked, linear)
    rhs = gather(x0) - np.concatenate([qp.parent[cells], bound_value])
    preconditioner = 1.0 / np.maximum(
        _gather_diagonal(factor.d_inverse, k, cells, held), np.finfo(float).tiny
    )
    start = np.concatenate(
        [
            warm.get("cells", np.zeros(free.shape[1]))[cells],
            warm.get("rows", np.zeros(held.shape))[held],
        ]
    )
    y = _conjugate_gradients(
        lambda v: gather(factor.solve(stacked, spread(v))),
        rhs,
        preconditioner,
        start,
        CG_GUESS_TOLERANCE if loose else CG_TOLERANCE,
    )
    if y is None:
        return None
    warm["cells"] = np.zeros(free.shape[1])
    warm["cells"][cells] = y[:n_cells]
    warm["rows"] = np.zeros(held.shape)
    warm["rows"][held] = y[n_cells:]
    x = x0 - factor.solve(stacked, spread(y))
    return x, warm["cells"], warm["rows"]


def _independent(held: BoolArray, k: sp.csr_matrix, free: BoolArray) -> BoolArray:
    """``held`` without rows equal, on their child's free variables, to another held row of the
    child (e.g. a child's total and its only hhgq type): a repeated row makes the multiplier
    system singular. The row kept carries both; the primal check still tests the other's bound."""
    weights = np.random.default_rng(0).random((1, free.shape[1]))  # a fixed signature
    signature = (k @ (free * weights).T).T
    child, row = np.nonzero(held)
    value = signature[child, row]
    order = np.lexsort((row, value, child))
    repeated = (child[order][1:] == child[order][:-1]) & np.isclose(
        value[order][1:], value[order][:-1], rtol=1e-12, atol=0.0
    )
    out = held.copy()
    out[child[order][1:][repeated], row[order][1:][repeated]] = False
    return out


def _gather_diagonal(
    d_inverse: FloatArray, k: sp.csr_matrix, cells: npt.NDArray[np.int64], held: BoolArray
) -> FloatArray:
    """diag(G D⁻¹ Gᵀ): the Jacobi preconditioner of the polish's multiplier system."""
    return np.concatenate([d_inverse.sum(axis=0)[cells], (k.power(2) @ d_inverse.T).T[held]])


def _conjugate_gradients(
    apply: Callable[[FloatArray], FloatArray],
    rhs: FloatArray,
    preconditioner: FloatArray,
    start: FloatArray,
    relative_tolerance: float = CG_TOLERANCE,
) -> FloatArray | None:
    """Preconditioned conjugate gradients for S y = rhs (S symmetric positive definite)."""
    y = start.copy()
    residual = rhs - apply(y) if start.any() else rhs.copy()
    z = residual * preconditioner
    direction = z.copy()
    rz = float(residual @ z)
    tolerance = relative_tolerance * max(1.0, max_norm(rhs))
    for _ in range(CG_ITERATIONS):
        if max_norm(residual) <= tolerance:
            return y
        s_direction = apply(direction)
        curvature = float(direction @ s_direction)
        if not curvature > 0:  # S is singular (redundant constraints) or not definite
            return None
        step = rz / curvature
        y += step * direction
        residual -= step * s_direction
        z = residual * preconditioner
        rz, previous = float(residual @ z), rz
        direction = z + (rz / previous) * direction
    return None


def _initial_step(qp: SiblingQP) -> float:
    weights = np.concatenate([qp.diag_weight[qp.diag_weight > 0], qp.row_weight[qp.row_weight > 0]])
    return float(np.median(weights)) if weights.size else 1.0


def max_norm(a: FloatArray) -> float:
    """The largest absolute entry (0 for none): the residual norm both solvers stop on."""
    return float(np.abs(a).max(initial=0.0))
