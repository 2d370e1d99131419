"""The noise-aware program of one tract, solved by pricing columns in.

The program (docs/reconstruction.md) has a non-negative integer variable for every (block, class)
pair that no published cell rules out — a cell rules a pair out only where the noise model says
its true count is exactly 0 — and, for every published cell r with true count t_r = A_r x,

    low_r ≤ t_r ≤ high_r   and the cost  weight_r · |t_r − target_r|

(:mod:`sdclab.attacks.knowledge`). Its optimum is the most likely reconstruction under the noise
model (for bounded noise: the one nearest the published counts among those the noise allows).

Every class of every block is a variable, far too many to pass to a solver (26,000 classes ×
each block). The linear relaxation is solved instead by column generation: start from the pairs
the published zeros leave (the naive attack's candidates), solve, price every other pair with
the duals — a cell no variable touches yet has the price of its distance cost — and add the
pairs whose reduced cost is negative, until none is. The relaxation's optimum is then that of
the whole program. The integer program is solved over the pairs priced in (price-and-branch).
Elastic slacks of a large cost keep every restricted program feasible; at the optimum they are 0
unless the release contradicts its noise model, and their total is reported.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from sdclab.arrays import BoolArray, FloatArray, IntArray
from sdclab.attacks.knowledge import CellBounds
from sdclab.optimize.highs import INF, single_threaded_highs, solve_lp, solve_mip

MAX_ROUNDS = 3
"""Pricing rounds at most (the program is then solved over the pairs priced in so far)."""
STALL = 0.01
"""Pricing stops when a round lowers the relaxation's objective by less than this share: the
pairs still entering are then alternative optima of a degenerate relaxation (they leave its
objective unchanged), and adding them only grows the integer program."""
ELASTIC_COST = 1000.0
"""Cost per unit of leaving a cell's range (times the largest distance weight): an elastic slack
that keeps every restricted program feasible."""
REDUCED_COST_TOLERANCE = 1e-7


@dataclass(frozen=True)
class Rows:
    """Every published cell of a tract as one row: its bounds and distance cost (block cells
    first, block by block, then the tract cells)."""

    low: FloatArray
    high: FloatArray
    weight: FloatArray
    target: FloatArray
    n_blocks: int
    block_width: int

    @classmethod
    def of(cls, block: CellBounds, tract: CellBounds) -> Rows:
        def joined(name: str) -> FloatArray:
            return np.r_[getattr(block, name).reshape(-1), getattr(tract, name)]

        return cls(
            joined("low"),
            joined("high"),
            joined("weight"),
            joined("target"),
            block.low.shape[0],
            block.low.shape[1],
        )


@dataclass(frozen=True)
class Priced:
    """The outcome of one noise-aware solve."""

    block: IntArray
    cell: IntArray
    count: IntArray
    status: str
    objective: float
    rounds: int
    converged: bool
    variables: int
    constraints: int
    elastic: float
    """Total by which the solution leaves the cells' ranges (0 unless the release contradicts
    its noise model or the pricing did not converge)."""


class ColumnSpace:
    """The (block, class) pairs of a tract and the rows each pair enters."""

    def __init__(self, block_query: sp.csc_matrix, tract_query: sp.csc_matrix, rows: Rows):
        self.qb = block_query.tocsc()
        self.qt = tract_query.tocsc()
        self.rows = rows
        self.n_classes = self.qb.shape[1]

    def matrix(self, block: IntArray, cell: IntArray) -> sp.csc_matrix:
        """Rows (all of them) × the given pairs."""
        width, n_block_rows = self.rows.block_width, self.rows.n_blocks * self.rows.block_width
        part = self.qb[:, cell].tocoo()
        tract = self.qt[:, cell].tocoo()
        rows = np.r_[block[part.col] * width + part.row, n_block_rows + tract.row]
        cols = np.r_[part.col, tract.col]
        shape = (n_block_rows + self.qt.shape[0], len(cell))
        return sp.csc_matrix((np.ones(len(rows)), (rows, cols)), shape=shape)

    def allowed(self) -> BoolArray:
        """blocks × classes: pairs no cell rules out (a cell whose true count must be 0)."""
        zero = self.rows.high == 0
        n_block_rows = self.rows.n_blocks * self.rows.block_width
        zero_b = sp.csr_matrix(zero[:n_block_rows].reshape(self.rows.n_blocks, -1).astype(np.int8))
        ruled_out = (zero_b @ self.qb).toarray() > 0
        ruled_out |= (self.qt.T @ zero[n_block_rows:].astype(np.int8) > 0)[None, :]
        return ~ruled_out

    def reduced_costs(self, prices: FloatArray) -> FloatArray:
        """blocks × classes: −Σ_r A_r y_r of every pair, with ``prices`` y per row."""
        n_block_rows = self.rows.n_blocks * self.rows.block_width
        per_block = prices[:n_block_rows].reshape(self.rows.n_blocks, -1)
        block_part = np.asarray(self.qb.T @ per_block.T).T
        tract_part = np.asarray(self.qt.T @ prices[n_block_rows:])
        return -(block_part + tract_part[None, :])


@dataclass(frozen=True)
class Model:
    """The program over some pairs and rows: x, then per row u⁺ (above the target, up to high),
    u⁻ (below it, down to low) at the distance cost, and the elastic v⁺, v⁻."""

    matrix: sp.csc_matrix
    target: FloatArray
    cost: FloatArray
    upper: FloatArray
    rows: IntArray
    """The rows of the tract the model holds."""
    n: int

    @property
    def m(self) -> int:
        return len(self.rows)


def build_model(space: ColumnSpace, block: IntArray, cell: IntArray, active: BoolArray) -> Model:
    """The program over the pairs (``block``, ``cell``) and the ``active`` rows."""
    rows = space.rows
    index = np.flatnonzero(active)
    a = space.matrix(block, cell)[index]
    m, n = a.shape
    eye = sp.identity(m, format="csc")
    elastic = ELASTIC_COST * max(1.0, float(rows.weight.max(initial=0.0)))
    w = rows.weight[index]
    return Model(
        matrix=sp.hstack([a, -eye, eye, -eye, eye], format="csc"),
        target=rows.target[index],
        cost=np.r_[np.zeros(n), w, w, np.full(2 * m, elastic)],
        upper=np.r_[
            np.full(n, INF),
            rows.high[index] - rows.target[index],
            rows.target[index] - rows.low[index],
            np.full(2 * m, INF),
        ],
        rows=index,
        n=n,
    )


def relaxation(space: ColumnSpace, model: Model) -> tuple[float, FloatArray]:
    """(objective, price of every row of the tract) of the model's linear relaxation; a row the
    model leaves out is priced at its distance cost per unit (it holds no pair, so its count
    rises from its target of 0)."""
    _, _, duals, objective = solve_lp(
        model.matrix,
        model.target,
        model.target,
        model.cost,
        model.upper,
        threads=single_threaded_highs(),
    )
    prices = -space.rows.weight.copy()
    prices[model.rows] = duals
    return objective, prices


def integer_solution(
    model: Model, seed: int, time_limit: float, gap: float, cost: FloatArray | None = None
) -> tuple[str, FloatArray | None, float]:
    """(status, x or None, objective) of the integer program (``cost`` replaces the model's)."""
    flags = np.r_[np.ones(model.n, bool), np.zeros(4 * model.m, bool)]
    return solve_mip(
        model.matrix,
        model.target,
        model.target,
        model.cost if cost is None else cost,
        model.upper,
        flags,
        threads=single_threaded_highs(),
        random_seed=seed % 2_147_483_647,
        time_limit=float(time_limit),
        mip_rel_gap=gap,
    )


def solve_priced(
    space: ColumnSpace,
    start: BoolArray,
    seed: int,
    time_limit: float,
    gap: float,
) -> Priced:
    """Price pairs in from ``start`` (blocks × classes) until the relaxation is optimal over all
    allowed pairs, then solve the integer program over them."""
    rows = space.rows
    allowed = space.allowed()
    chosen = start & allowed
    informative = (rows.target > 0) | (rows.low > 0)
    free = (rows.weight == 0) & (rows.low <= 0) & np.isinf(rows.high)  # withheld: no constraint
    rounds, converged, previous = 0, False, np.inf
    while rounds < MAX_ROUNDS:
        rounds += 1
        block, cell = np.nonzero(chosen)
        active = (informative | _touched(space, block, cell)) & ~free
        objective, prices = relaxation(space, build_model(space, block, cell, active))
        if previous - objective < STALL * max(abs(objective), 1.0):
            break
        previous = objective
        reduced = space.reduced_costs(prices)
        reduced[~allowed | chosen] = np.inf
        entering = reduced < -REDUCED_COST_TOLERANCE
        if not entering.any():
            converged = True
            break
        limit = max(1000, int(chosen.sum()))
        if entering.sum() > limit:
            cut = np.partition(reduced[entering], limit - 1)[limit - 1]
            entering &= reduced <= cut
        chosen |= entering
    block, cell = np.nonzero(chosen)
    active = (informative | _touched(space, block, cell)) & ~free
    model = build_model(space, block, cell, active)
    status, x, objective = integer_solution(model, seed, time_limit, gap)
    n, m = model.n, model.m
    if x is None:
        counts = np.zeros(n, np.int64)
        elastic = float("nan")
    else:
        counts = np.rint(x[:n]).astype(np.int64)
        elastic = float(x[n + 2 * m :].sum())
    keep = counts > 0
    return Priced(
        block[keep], cell[keep], counts[keep], status, objective, rounds, converged, n, m, elastic
    )


def _touched(space: ColumnSpace, block: IntArray, cell: IntArray) -> BoolArray:
    """Rows that at least one of the pairs enters."""
    touched = np.zeros(len(space.rows.low), dtype=bool)
    touched[space.matrix(block, cell).indices] = True
    return touched
