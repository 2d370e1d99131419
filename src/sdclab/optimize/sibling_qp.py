"""A structure-exploiting ADMM for TopDown's sibling least-squares problems.

Every L2 pass of TopDown (specs/topdown-safetab-h.md A.5) is the convex QP

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

Iterates follow Boyd et al. (2011) and OSQP's step-size rule (Stellato et al. 2020); the returned
histogram is the projected iterate, so it is exactly non-negative and sums exactly to the parent,
and it meets the K bounds to within the primal tolerance (the rounder then enforces them exactly
on the integers).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg as la
import scipy.sparse as sp

from sdclab.optimize.parent_problem import BoolArray, FloatArray, InfeasibleProblem

ABSOLUTE, RELATIVE = 1e-7, 1e-8
"""Stopping tolerances on the primal and dual residuals (in persons)."""
MAX_ITERATIONS = 20_000
CHECK_EVERY = 10
RELAXATION = 1.6
"""Over-relaxation α of the projection steps (OSQP's default)."""
STEP_CHANGE = 5.0
"""Refactor with a new step size ρ when the balanced one differs by more than this factor."""


class NotConverged(RuntimeError):
    """ADMM stopped at its iteration limit before meeting its tolerances."""


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


@dataclass
class _Factor:
    """The x-step's linear operator (2D + ρI + Uᵀ E U)⁻¹ for one step size ρ, by Woodbury."""

    d_inverse: FloatArray  # C × n, 0 outside the mask (those variables stay at 0)
    sqrt_e: FloatArray  # C × m
    g_inverse: FloatArray  # C × m × m: (I + E^½ U D⁻¹ Uᵀ E^½)⁻¹

    @classmethod
    def build(cls, qp: SiblingQP, stacked: sp.csr_matrix, rho: float) -> _Factor:
        d_inverse = np.where(qp.mask, 1.0 / (2 * qp.diag_weight + rho), 0.0)
        m2 = qp.bounds.shape[0]
        sqrt_e = np.sqrt(np.hstack([2 * qp.row_weight, np.full((qp.mask.shape[0], m2), rho)]))
        m = stacked.shape[0]
        g_inverse = np.empty((qp.mask.shape[0], m, m))
        eye = np.eye(m)
        for c in range(qp.mask.shape[0]):
            inner = (stacked @ sp.diags(d_inverse[c]) @ stacked.T).toarray()
            g = eye + sqrt_e[c][:, None] * inner * sqrt_e[c][None, :]
            g_inverse[c] = la.cho_solve(la.cho_factor(g, lower=True), eye)
        return cls(d_inverse, sqrt_e, g_inverse)

    def solve(self, stacked: sp.csr_matrix, rhs: FloatArray) -> FloatArray:
        z = rhs * self.d_inverse
        p = (stacked @ z.T).T * self.sqrt_e
        p = np.matmul(self.g_inverse, p[:, :, None])[:, :, 0] * self.sqrt_e
        return z - self.d_inverse * (stacked.T @ p.T).T


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
    """The pass's optimum (C × n) and the iterations it took; NotConverged past the limit."""
    stacked = sp.vstack([qp.rows, qp.bounds], format="csr")
    k_rows = qp.bounds
    linear = (
        2 * qp.diag_weight * qp.diag_target + 2 * (qp.rows.T @ (qp.row_weight * qp.row_target).T).T
    )
    rho = _initial_step(qp)
    factor = _Factor.build(qp, stacked, rho)
    y = project_cells(np.zeros(qp.mask.shape) if start is None else start, qp.mask, qp.parent)
    u = np.zeros_like(y)
    kz = np.clip((k_rows @ y.T).T, qp.lower, qp.upper)
    kv = np.zeros_like(kz)
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
        primal = max(_norm(x - y), _norm(kx - kz))
        dual = rho * max(_norm(y - y_previous), _norm((k_rows.T @ (kz - kz_previous).T).T))
        primal_scale = max(_norm(x), _norm(y), _norm(kx), _norm(kz))
        dual_scale = max(_norm(linear), rho * _norm(u), rho * _norm(kv))
        if primal <= ABSOLUTE + RELATIVE * primal_scale and dual <= (
            ABSOLUTE + RELATIVE * dual_scale
        ):
            return y, iteration
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


def _initial_step(qp: SiblingQP) -> float:
    weights = np.concatenate([qp.diag_weight[qp.diag_weight > 0], qp.row_weight[qp.row_weight > 0]])
    return float(np.median(weights)) if weights.size else 1.0


def _norm(a: FloatArray) -> float:
    return float(np.abs(a).max(initial=0.0))
