"""Which cells of a table system a user can pin exactly, and which cell to withhold next.

The programs behind complementary suppression (docs/suppression.md): given linear relations
``A·x = 0`` among the cells, bounds on each and the true values, which cells take one value in every
table the relations and bounds allow — a graph test where the relations form a network (a
hierarchy), interval propagation then linear programmes (HiGHS) otherwise — and, for each cluster of
exact withheld cells, the cheapest published cell to withhold with them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import highspy
import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from sdclab.core.arrays import BoolArray, FloatArray, IntArray
from sdclab.core.optimize.highs import quiet_highs, run

TOL = 1e-6
"""Deviations below this are numerical noise (all true counts are integers)."""
Engine = Callable[[sp.csr_matrix, FloatArray, FloatArray, FloatArray, BoolArray], BoolArray]
"""(relations, lower, upper, truth, cells that must be settled exactly) → exact cells."""


def network_fixed(
    matrix: sp.csr_matrix, lo: FloatArray, hi: FloatArray, truth: FloatArray
) -> BoolArray:
    """Exactly the cells whose value every feasible table shares, for hierarchy relations only.

    Each cell has one +1 (the relation where it is the parent) and one −1 (where it is a child):
    the relations are flow conservation. Make every relation a node and every cell an edge
    between its two relations — or a free "ground" node where it has none (bottom-level and top
    cells). Per table and cell the relations form a tree, so every cycle passes through ground.
    Around the true table a feasible change is a circulation of residual arcs (a cell may rise if
    below its upper bound, fall if above its lower bound; published cells have no arcs), so a cell
    can rise iff ground reaches its child side inside that side and its parent side reaches ground
    inside that side (and mirrored to fall). Two passes over the trees — up for what each subtree
    reaches, down for what the rest of the tree reaches — settle every cell at once.
    """
    n_eq, n = matrix.shape
    coo = matrix.tocoo()
    plus, minus = coo.data > 0, coo.data < 0
    own_eq = np.full(n, -1, dtype=np.int64)  # the relation where the cell is the parent
    own_eq[coo.col[plus]] = coo.row[plus]
    up_eq = np.full(n, -1, dtype=np.int64)  # the relation where the cell is a child
    up_eq[coo.col[minus]] = coo.row[minus]
    rise, fall = truth < hi - TOL, truth > lo + TOL
    own = np.full(n_eq, -1, dtype=np.int64)  # every relation's parent cell
    own[own_eq[own_eq >= 0]] = np.flatnonzero(own_eq >= 0)
    parent = up_eq[own]
    depth = np.zeros(n_eq, dtype=np.int64)
    while True:  # as many passes as there are levels
        deeper = np.where(parent >= 0, depth[np.maximum(parent, 0)] + 1, 0)
        if np.array_equal(deeper, depth):
            break
        depth = deeper
    # up pass: does ground reach the relation (into) / the relation reach ground (out) inside
    # its subtree? Children are cells whose −1 is in the relation.
    into = np.zeros(n_eq, dtype=bool)
    out = np.zeros(n_eq, dtype=bool)
    n_into = np.zeros(n_eq, dtype=np.int64)
    n_out = np.zeros(n_eq, dtype=np.int64)
    child = np.flatnonzero(up_eq >= 0)
    below = own_eq[child]
    has_below = below >= 0
    child_depth = depth[up_eq[child]]
    gives_into = np.zeros(len(child), dtype=bool)
    gives_out = np.zeros(len(child), dtype=bool)
    for d in range(int(depth.max(initial=0)), -1, -1):
        at = child_depth == d
        gives_into[at] = rise[child[at]] & (~has_below[at] | into[np.maximum(below[at], 0)])
        gives_out[at] = fall[child[at]] & (~has_below[at] | out[np.maximum(below[at], 0)])
        n_into += np.bincount(up_eq[child[at & gives_into]], minlength=n_eq)
        n_out += np.bincount(up_eq[child[at & gives_out]], minlength=n_eq)
        level = depth == d
        into[level] = n_into[level] > 0
        out[level] = n_out[level] > 0
    # down pass: does ground reach the relation (from_above) / the relation reach ground
    # (to_above) through its own parent cell, outside its subtree?
    from_above = np.zeros(n_eq, dtype=bool)
    to_above = np.zeros(n_eq, dtype=bool)
    sibling_into = np.zeros(n, dtype=bool)  # the rest of the parent relation, without the cell
    sibling_out = np.zeros(n, dtype=bool)
    for d in range(int(depth.max(initial=0)) + 1):
        level = np.flatnonzero(depth == d)
        cell = own[level]
        top = parent[level] < 0
        from_above[level] = fall[cell] & (top | sibling_into[cell])
        to_above[level] = rise[cell] & (top | sibling_out[cell])
        at = child_depth == d
        p = up_eq[child[at]]
        sibling_into[child[at]] = from_above[p] | (n_into[p] - gives_into[at] > 0)
        sibling_out[child[at]] = to_above[p] | (n_out[p] - gives_out[at] > 0)
    has_own, has_up = own_eq >= 0, up_eq >= 0
    reach_child_side = ~has_own | into[np.maximum(own_eq, 0)]
    leave_child_side = ~has_own | out[np.maximum(own_eq, 0)]
    reach_parent_side = ~has_up | sibling_into
    leave_parent_side = ~has_up | sibling_out
    movable = (rise & reach_child_side & leave_parent_side) | (
        fall & reach_parent_side & leave_child_side
    )
    return np.asarray(~movable, dtype=bool)


def propagate_bounds(
    matrix: sp.csr_matrix, lo: FloatArray, hi: FloatArray, truth: FloatArray, rounds: int = 30
) -> tuple[FloatArray, FloatArray]:
    """Bounds tightened by interval propagation over the relations (valid, not always tight).

    Works on deviations y = x − truth, so every relation reads A·y = 0 with y in [lo−t, hi−t];
    a coefficient of ±1 lets each cell take the negated range of the rest of its relation.
    """
    a = sp.csc_matrix(matrix)
    a.sort_indices()
    coo = a.tocoo()
    row, col, sign = coo.row, coo.col, coo.data
    ly, hy = lo - truth, hi - truth
    starts = a.indptr[:-1][np.diff(a.indptr) > 0]
    cols_with = np.flatnonzero(np.diff(a.indptr) > 0)
    for _ in range(rounds):
        low_term = np.where(sign > 0, ly[col], -hy[col])
        high_term = np.where(sign > 0, hy[col], -ly[col])
        row_low = np.bincount(row, low_term, minlength=a.shape[0])
        row_high = np.bincount(row, high_term, minlength=a.shape[0])
        # sign·y_j = −(rest); rest ranges over [row_low − low_term, row_high − high_term]
        rest_low, rest_high = row_low[row] - low_term, row_high[row] - high_term
        new_low = np.where(sign > 0, -rest_high, rest_low)
        new_high = np.where(sign > 0, -rest_low, rest_high)
        tight_low = ly.copy()
        tight_high = hy.copy()
        tight_low[cols_with] = np.maximum(ly[cols_with], np.maximum.reduceat(new_low, starts))
        tight_high[cols_with] = np.minimum(hy[cols_with], np.minimum.reduceat(new_high, starts))
        changed = (tight_low > ly + TOL).any() or (tight_high < hy - TOL).any()
        ly, hy = tight_low, tight_high
        if not changed:
            break
    return ly + truth, hy + truth


def propagated_fixed(
    matrix: sp.csr_matrix, lo: FloatArray, hi: FloatArray, truth: FloatArray, ask: BoolArray
) -> BoolArray:
    """The cells interval propagation pins (all exact; not necessarily all the exact cells)."""
    low, high = propagate_bounds(matrix, lo, hi, truth)
    return np.asarray(high - low <= TOL, dtype=bool)


@dataclass
class _Lp:
    """One LP over deviations y (A·y = 0, bounds) solved repeatedly with new objectives (HiGHS
    keeps the basis between solves)."""

    highs: highspy.Highs
    n: int

    @classmethod
    def build(cls, a: sp.spmatrix, low: FloatArray, high: FloatArray) -> _Lp:
        m = sp.csc_matrix(a)
        highs = quiet_highs()
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = m.shape[1], m.shape[0]
        lp.col_cost_ = np.zeros(m.shape[1])
        lp.col_lower_ = np.asarray(low, dtype=np.float64)
        lp.col_upper_ = np.asarray(high, dtype=np.float64)
        lp.row_lower_ = np.zeros(m.shape[0])
        lp.row_upper_ = np.zeros(m.shape[0])
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = m.indptr
        lp.a_matrix_.index_ = m.indices
        lp.a_matrix_.value_ = m.data.astype(np.float64)
        highs.passModel(lp)
        return cls(highs, m.shape[1])

    def solve(self, cost: FloatArray) -> FloatArray | None:
        """The deviations minimising ``cost``·y, or None if HiGHS did not reach optimality."""
        idx = np.arange(self.n, dtype=np.int32)
        self.highs.changeColsCost(self.n, idx, np.asarray(cost, dtype=np.float64))
        run(self.highs)
        if self.highs.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return None
        return np.asarray(self.highs.getSolution().col_value, dtype=np.float64)


def lp_movable(
    a: sp.csr_matrix, low: FloatArray, high: FloatArray, ask: BoolArray, rng: np.random.Generator
) -> BoolArray:
    """Which columns flagged in ``ask`` can move (A·y = 0, low ≤ y ≤ high, y = 0 feasible).

    Each LP solution y certifies every column with y_j ≠ 0. Cheap rounds first push all uncertain
    columns at once (up where y cannot fall, down where it cannot rise, a random direction
    otherwise); the columns left are settled by the two LPs of the definition, max y_j and min
    y_j. A column is reported movable only on a solution that moves it, so the test is exact up
    to HiGHS's tolerances (a failed solve counts as "cannot move": stricter, never looser).
    """
    lp = _Lp.build(a, low, high)
    movable = np.zeros(a.shape[1], dtype=bool)
    pending = ask.copy()
    while pending.any():
        cost = np.zeros(a.shape[1])
        sign = np.where(
            low >= -TOL, -1.0, np.where(high <= TOL, 1.0, rng.choice([-1.0, 1.0], a.shape[1]))
        )
        cost[pending] = sign[pending]
        y = lp.solve(cost)
        if y is None:
            break
        moved = pending & (np.abs(y) > 1e-5)
        movable |= moved
        pending &= ~moved
        if moved.sum() < max(1, pending.sum() // 50):
            break
    for j in np.flatnonzero(pending):
        if movable[j]:
            continue
        for direction in (-1.0, 1.0):
            cost = np.zeros(a.shape[1])
            cost[j] = direction
            y = lp.solve(cost)
            if y is None:
                continue
            movable |= ask & (np.abs(y) > 1e-5)
            if movable[j]:
                break
    return movable


def row_column_clusters(a: sp.csr_matrix) -> tuple[IntArray, IntArray]:
    """Connected components of the bipartite graph of rows and columns linked by the non-zeros of
    ``a``: the cluster label of every row and of every column (one numbering for both)."""
    pattern = sp.csr_matrix((np.ones(a.nnz), a.indices, a.indptr), shape=a.shape)
    graph = sp.bmat([[None, pattern], [pattern.T, None]], format="csr")
    _, label = csgraph.connected_components(graph, directed=False)
    return label[: a.shape[0]], label[a.shape[0] :]


def lp_fixed(
    matrix: sp.csr_matrix,
    lo: FloatArray,
    hi: FloatArray,
    truth: FloatArray,
    ask: BoolArray,
    rng: np.random.Generator,
) -> BoolArray:
    """Cells that take one value in every table satisfying the relations and the bounds (the
    feasible interval computed by LP has zero width): exactly for the cells flagged in ``ask``,
    partly (those interval propagation pins) for the others.

    Interval propagation first: the cells it pins are exact for sure, and if it pins an asked
    cell the answer is returned at once (the caller acts on some exposed cells, then asks again).
    Then, per connected cluster of the remaining variable cells, :func:`lp_movable`.
    """
    lo, hi = propagate_bounds(matrix, lo, hi, truth)
    fixed = hi - lo <= TOL
    if (fixed & ask).any():
        return fixed
    var = np.flatnonzero(~fixed)
    a = matrix[:, var].tocsr()
    used = np.flatnonzero(np.diff(a.indptr) > 0)
    a = a[used]
    row_label, col_label = row_column_clusters(a)
    wanted = np.unique(col_label[ask[var]])
    order = np.argsort(col_label, kind="stable")
    bounds = np.searchsorted(col_label[order], [wanted, wanted + 1])
    row_order = np.argsort(row_label, kind="stable")
    row_bounds = np.searchsorted(row_label[row_order], [wanted, wanted + 1])
    t = truth[var]
    for k in range(len(wanted)):
        cols = order[bounds[0, k] : bounds[1, k]]
        eqs = row_order[row_bounds[0, k] : row_bounds[1, k]]
        sub = a[eqs][:, cols]
        movable = lp_movable(
            sub, lo[var][cols] - t[cols], hi[var][cols] - t[cols], ask[var][cols], rng
        )
        fixed[var[cols[~movable & ask[var][cols]]]] = True
    return fixed


# ---------------------------------------------------------------------------------------------
# Choosing complements
# ---------------------------------------------------------------------------------------------


def choose_complements(
    matrix: sp.csr_matrix,
    fixed_null: BoolArray,
    exposed: BoolArray,
    eligible: BoolArray,
    cost: IntArray,
    level_rank: IntArray,
) -> IntArray:
    """One new withheld cell per cluster of exact withheld cells that holds an exposed one.

    Exact withheld cells with positive counts that share a relation form a cluster (they pin one
    another; exact zeros are left out, as a relation summing to 0 pins its cells whatever the
    others do); the candidates are the published cells in the relations that touch the cluster,
    and the cheapest is taken: the smallest positive count, coarser levels first on ties; a
    published zero only when no positive cell is left (it can still help by rising).
    """
    f = np.flatnonzero(fixed_null & (cost > 0))
    b = matrix[:, f].tocsr()
    touching = np.flatnonzero(np.diff(b.indptr) > 0)
    b = b[touching]
    row_label, col_label = row_column_clusters(b)
    cell_label = np.full(matrix.shape[1], -1, dtype=np.int64)
    cell_label[f] = col_label
    wanted = np.unique(cell_label[exposed])
    wanted = wanted[wanted >= 0]
    rows = matrix[touching].tocoo()
    comp = row_label[rows.row]
    cand = rows.col
    keep = eligible[cand] & np.isin(comp, wanted)
    comp, cand = comp[keep], cand[keep]
    if not len(cand):
        return np.empty(0, dtype=np.int64)
    order = np.lexsort((cand, level_rank[cand], cost[cand], cost[cand] == 0, comp))
    comp, cand = comp[order], cand[order]
    first = np.r_[True, comp[1:] != comp[:-1]]
    return np.unique(cand[first])
