"""One TopDown post-processing problem: a parent geounit and all its children, on its support.

TopDown solves the children of one parent jointly (docs/topdown.md, *Post-processing*). Only the
cells where the parent's histogram is positive can be positive in a child, so a problem lives on the
parent's *support* (n cells); a child may also exclude cells (structural zeros: no facility of that
type in the child, no minors in nursing facilities). The L2 step (:mod:`least_squares`) and the
rounder (:mod:`rounding`) both work on this description; nothing in it is confidential except the
invariants (the children's unit counts and, at the state level, their totals).

The root is a problem with one child and no parent histogram.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from sdclab.core.arrays import BoolArray, FloatArray, IntArray

ZERO_BELOW = 1e-7
"""L2 entries below this are set to zero (production's threshold)."""
INTEGRAL_WITHIN = 1e-6
"""L2 entries this close to an integer are taken as that integer before rounding."""


class InfeasibleProblem(RuntimeError):
    """A parent's problem has no solution under its constraints (TopDown's fail-safe case)."""


@dataclass(frozen=True)
class ParentProblem:
    """Children of one parent on the parent's support.

    ``queries[name]`` is a 0/1 matrix (query rows × n support cells), already restricted to the
    rows that touch the support; ``targets[name]`` (children × rows) are the noisy answers
    (weighted means when a child carries the measurements of a bypassed chain) and
    ``weights[name]`` (children) their inverse variances — 0 where the child was not measured.
    """

    allowed: BoolArray
    """children × n: may the child have persons in the support cell?"""
    parent: IntArray | None
    """The parent's histogram on the support (None at the root)."""
    totals: IntArray | None
    """Invariant total of each child, -1 where none (only states and the nation have one)."""
    hhgq: sp.csr_matrix
    """types × n: the type of each support cell (the 8 hhgq types of the US products; one for a
    declared census, whose records are all persons)."""
    hhgq_lower: IntArray
    """children × types lower bounds of the type marginal (persons ≥ occupied facilities)."""
    hhgq_upper: IntArray
    """children × types upper bounds (99,999 per unit; 0 for types the child has no unit of)."""
    queries: dict[str, sp.csr_matrix]
    targets: dict[str, FloatArray] = field(default_factory=dict)
    weights: dict[str, FloatArray] = field(default_factory=dict)
    l2_passes: tuple[tuple[str, ...], ...] = ()
    rounder_passes: tuple[tuple[str, ...], ...] = ()

    @property
    def n_children(self) -> int:
        return self.allowed.shape[0]

    @property
    def n_cells(self) -> int:
        return self.allowed.shape[1]

    def variables(self, cells: BoolArray | None = None, pairs: BoolArray | None = None) -> IntArray:
        """children × n index of each (child, cell) variable, -1 where there is none.

        Variables exist for allowed pairs, restricted to the support cells in ``cells`` and to the
        (child, cell) ``pairs`` if given.
        """
        mask = self.allowed if cells is None else self.allowed & cells[None, :]
        if pairs is not None:
            mask = mask & pairs
        index = np.full(mask.shape, -1, dtype=np.int64)
        index[mask] = np.arange(int(mask.sum()))
        return index

    def binding_upper(self) -> FloatArray:
        """children × 8 hhgq upper bounds, +inf where the bound cannot bind.

        A bound at or above what the child could ever hold (the parent's persons of that type, or
        the child's invariant total) only hurts the solver's numerics (99,999 per unit is huge).
        """
        upper = self.hhgq_upper.astype(float)
        if self.parent is not None:
            cap = np.broadcast_to(self.hhgq @ self.parent, upper.shape)
        elif self.totals is not None:
            cap = np.where(self.totals >= 0, self.totals, np.inf)[:, None] * np.ones_like(upper)
        else:
            return upper
        return np.where(upper >= cap, np.inf, upper)

    def total_of_fixed(self) -> BoolArray:
        """Which children have an invariant total."""
        return np.zeros(self.n_children, bool) if self.totals is None else self.totals >= 0


def child_operator(matrix: sp.csr_matrix, index: IntArray) -> sp.csr_matrix:
    """Block-diagonal (children·rows × variables) form of a per-child cell operator.

    Row c·rows + r of the result applies ``matrix[r]`` to child c's variables (``index`` from
    :meth:`ParentProblem.variables`); cells without a variable drop out.
    """
    coo = matrix.tocoo()
    children, rows = index.shape[0], matrix.shape[0]
    child = np.repeat(np.arange(children), coo.nnz)
    row = np.tile(coo.row, children) + child * rows
    col = index[child, np.tile(coo.col, children)]
    keep = col >= 0
    data = np.tile(coo.data, children)[keep].astype(np.float64)
    n_vars = int(index.max()) + 1 if index.size else 0
    return sp.csr_matrix((data, (row[keep], col[keep])), shape=(children * rows, max(n_vars, 0)))


def cell_sum_operator(index: IntArray, cells: BoolArray | None = None) -> sp.csr_matrix:
    """(support cells × variables): row j sums cell j over the children."""
    child, cell = np.nonzero(index >= 0)
    n_vars = int(index.max()) + 1 if index.size else 0
    matrix = sp.csr_matrix(
        (np.ones(len(cell)), (cell, index[child, cell])), shape=(index.shape[1], n_vars)
    )
    return matrix if cells is None else matrix[np.flatnonzero(cells)]


def child_sum_operator(index: IntArray) -> sp.csr_matrix:
    """(children × variables): row c sums child c's variables."""
    child, cell = np.nonzero(index >= 0)
    n_vars = int(index.max()) + 1 if index.size else 0
    return sp.csr_matrix(
        (np.ones(len(cell)), (child, index[child, cell])), shape=(index.shape[0], n_vars)
    )


def check_solution(problem: ParentProblem, children: IntArray) -> None:
    """Assert every constraint on integer child histograms (children × n); raise on a violation.

    Non-negative integers, zero outside the allowed cells, children summing exactly to the parent,
    invariant totals, and the hhgq bounds.
    """
    if children.shape != problem.allowed.shape:
        raise AssertionError(f"solution shape {children.shape} != {problem.allowed.shape}")
    if (children < 0).any():
        raise AssertionError("a child cell is negative")
    if (children[~problem.allowed] != 0).any():
        raise AssertionError("a child has persons in a structurally zero cell")
    if problem.parent is not None and not np.array_equal(children.sum(axis=0), problem.parent):
        raise AssertionError("children do not sum to their parent")
    fixed = problem.total_of_fixed()
    if problem.totals is not None and not np.array_equal(
        children.sum(axis=1)[fixed], problem.totals[fixed]
    ):
        raise AssertionError("a child's invariant total is not kept")
    hhgq = (problem.hhgq @ children.T).T
    if (hhgq < problem.hhgq_lower).any() or (hhgq > problem.hhgq_upper).any():
        raise AssertionError("a child's hhgq marginal is outside its bounds")
