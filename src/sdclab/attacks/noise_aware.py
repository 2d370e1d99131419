"""The noise-aware program of one tract, solved by pricing columns in.

The program (docs/reconstruction.md) has a non-negative integer variable for every (block, class)
pair that no published cell rules out — a cell rules a pair out only where the noise model says
its true count is exactly 0 — and, for every published cell r with true count t_r = A_r x,

    low_r ≤ t_r ≤ high_r   and the cost  weight_r · |t_r − target_r|

(above the target at ``above_r`` instead, 0 for a one-sided measurement;
:mod:`sdclab.attacks.knowledge`). Its optimum is the most likely reconstruction under the noise
model (for bounded noise: the one nearest the published counts among those the noise allows).

Every class of every block is a variable, far too many to pass to a solver (26,000 classes ×
each block). The linear relaxation is solved instead by column generation: start from the pairs
the published zeros leave (the naive attack's candidates), solve, price every other pair with
the duals — a cell no variable touches yet has the price of its distance cost — and add the
pairs whose reduced cost is negative, until none is. The relaxation's optimum is then that of
the whole program. The integer program is solved over the pairs priced in (price-and-branch).
Elastic slacks of a large cost keep every restricted program feasible; at the optimum they are 0
unless the release contradicts its noise model, and their total is reported.

Every solve stops at the tract's :class:`~sdclab.optimize.highs.Limits`: the pricing rounds take
at most :data:`PRICING_SHARE` of its time, the integer program the rest (at least
:data:`MINIMUM_SOLVE`), and the further draws what is left (at least :data:`MINIMUM_SOLVE` in
all). A solve stopped by wall time makes the outcome depend on the machine's speed and load:
:attr:`Priced.time_limited` says so.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import highspy
import numpy as np
import scipy.sparse as sp

from sdclab.arrays import BoolArray, FloatArray, IntArray
from sdclab.attacks.knowledge import CellBounds
from sdclab.optimize.highs import (
    INF,
    TIME_LIMIT_STATUS,
    Limits,
    lp_instance,
    quiet_highs,
    run,
    single_threaded_highs,
    solve_mip,
)

MAX_ROUNDS = 10
"""Pricing rounds at most (the program is then solved over the pairs priced in so far)."""
STALL = 0.01
"""Pricing stops when a round lowers the relaxation's objective by less than this share: the
pairs still entering are then alternative optima of a degenerate relaxation (they leave its
objective unchanged), and adding them only grows the integer program."""
ELASTIC_COST = 1000.0
"""Cost per unit of leaving a cell's range (times the largest distance weight): an elastic slack
that keeps every restricted program feasible."""
REDUCED_COST_TOLERANCE = 1e-7
LP_ZERO = 1e-9
PRICING_SHARE = 0.5
"""Share of a tract's time limit the pricing rounds may take; the integer program gets the rest."""
MINIMUM_SOLVE = 1.0
"""Seconds the integer program gets at least, and the further draws together."""
ENTERING = 2000
"""Pairs added per pricing round at most, the most negative reduced costs first: a degenerate
relaxation prices many pairs negative that would leave its objective unchanged."""


@dataclass(frozen=True)
class Rows:
    """Every published cell of a tract as one row: its bounds and distance cost (block cells
    first, block by block, then the tract cells)."""

    low: FloatArray
    high: FloatArray
    weight: FloatArray
    target: FloatArray
    above: FloatArray
    n_blocks: int
    block_width: int

    @property
    def elastic(self) -> float:
        """Cost per unit of an elastic slack (:data:`ELASTIC_COST` times the largest weight)."""
        return ELASTIC_COST * max(1.0, float(self.weight.max(initial=0.0)))

    def slacks(self, index: IntArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        """(coefficient, cost, upper bound) of the four slacks of the rows ``index``, in the
        order u⁺ (above the target, up to high), u⁻ (below it, down to low), v⁺, v⁻ (elastic),
        each a block of len(index) columns."""
        m, target = len(index), self.target[index]
        return (
            np.repeat([-1.0, 1.0, -1.0, 1.0], m),
            np.r_[self.above[index], self.weight[index], np.full(2 * m, self.elastic)],
            np.r_[self.high[index] - target, target - self.low[index], np.full(2 * m, INF)],
        )

    @classmethod
    def of(cls, block: CellBounds, tract: CellBounds) -> Rows:
        def joined(name: str) -> FloatArray:
            return np.r_[getattr(block, name).reshape(-1), getattr(tract, name)]

        return cls(
            joined("low"),
            joined("high"),
            joined("weight"),
            joined("target"),
            joined("above"),
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
    drawn: IntArray
    """Each reconstructed pair's count in every further draw (pairs × draws); a draw that wall
    time stopped holds nothing."""
    time_limited: bool = False
    """Whether wall time stopped a solve (a pricing round, the integer program or a draw): the
    outcome may then differ between runs with the same seed."""


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

    def completed(self, counts: FloatArray) -> FloatArray:
        """A feasible point with the pairs at ``counts``: each row's distance taken up by its
        slacks within the range first, the rest by the elastic ones."""
        residual = self.target - self.matrix[:, : self.n] @ counts  # > 0: below the target
        below_room = self.upper[self.n + self.m : self.n + 2 * self.m]
        above_room = self.upper[self.n : self.n + self.m]
        u_minus = np.minimum(np.maximum(residual, 0), below_room)
        u_plus = np.minimum(np.maximum(-residual, 0), above_room)
        v_minus = np.maximum(residual, 0) - u_minus
        v_plus = np.maximum(-residual, 0) - u_plus
        return np.r_[counts, u_plus, u_minus, v_plus, v_minus]


def build_model(space: ColumnSpace, block: IntArray, cell: IntArray, active: BoolArray) -> Model:
    """The program over the pairs (``block``, ``cell``) and the ``active`` rows."""
    index = np.flatnonzero(active)
    a = space.matrix(block, cell)[index]
    m, n = a.shape
    coefficient, cost, upper = space.rows.slacks(index)
    slacks = sp.csc_matrix(
        (coefficient, (np.tile(np.arange(m), 4), np.arange(4 * m))), shape=(m, 4 * m)
    )
    return Model(
        matrix=sp.hstack([a, slacks], format="csc"),
        target=space.rows.target[index],
        cost=np.r_[np.zeros(n), cost],
        upper=np.r_[np.full(n, INF), upper],
        rows=index,
        n=n,
    )


def integer_solution(
    model: Model,
    seed: int,
    limits: Limits,
    gap: float,
    cost: FloatArray | None = None,
    counts: FloatArray | None = None,
) -> tuple[str, FloatArray | None, float]:
    """(status, x or None, objective) of the integer program (``cost`` replaces the model's),
    started from whole ``counts`` of its pairs when given, within ``limits`` (at least
    :data:`MINIMUM_SOLVE` seconds)."""
    flags = np.r_[np.ones(model.n, bool), np.zeros(4 * model.m, bool)]
    return solve_mip(
        model.matrix,
        model.target,
        model.target,
        model.cost if cost is None else cost,
        model.upper,
        flags,
        threads=single_threaded_highs(),
        start=None if counts is None else model.completed(counts),
        random_seed=seed % 2_147_483_647,
        mip_rel_gap=gap,
        **limits.options(MINIMUM_SOLVE),
    )


class Master:
    """The relaxation over the pairs priced in so far, kept in one HiGHS instance: each round
    adds the rows the new pairs enter (with their slacks) and the pairs, and the simplex starts
    from the last round's basis. A row no pair enters yet stays out: its count is 0, its cost a
    constant, and its price that of its first unit (:meth:`solve`)."""

    def __init__(self, space: ColumnSpace, forced: BoolArray) -> None:
        self.space = space
        self.highs = quiet_highs(threads=single_threaded_highs())
        self.position = np.full(len(space.rows.low), -1, dtype=np.int64)  # row → HiGHS row
        self.pairs: list[tuple[IntArray, IntArray]] = []
        self.x_columns: list[IntArray] = []
        self.n_columns = 0
        self.elastic = space.rows.elastic
        self._add_rows(np.flatnonzero(forced))

    def _add_rows(self, rows: IntArray) -> None:
        rows = rows[self.position[rows] < 0]
        if not len(rows):
            return
        first = int(self.position.max(initial=-1)) + 1
        target = self.space.rows.target[rows]
        self.highs.addRows(
            len(rows), target, target, 0, np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0)
        )
        self.position[rows] = first + np.arange(len(rows))
        m = len(rows)
        coefficient, cost, upper = self.space.rows.slacks(rows)
        self.highs.addCols(
            4 * m,
            cost,
            np.zeros(4 * m),
            upper,
            4 * m,
            np.arange(4 * m, dtype=np.int32),
            np.tile(self.position[rows], 4).astype(np.int32),
            coefficient,
        )
        self.n_columns += 4 * m

    def add(self, block: IntArray, cell: IntArray) -> None:
        """Add pairs (and first the rows they enter)."""
        if not len(cell):
            return
        a = self.space.matrix(block, cell)
        self._add_rows(np.unique(a.indices))
        a = sp.csc_matrix(
            (a.data, self.position[a.indices], a.indptr),
            shape=(int(self.position.max()) + 1, len(cell)),
        )
        n = len(cell)
        self.highs.addCols(
            n,
            np.zeros(n),
            np.zeros(n),
            np.full(n, INF),
            a.nnz,
            a.indptr[:-1].astype(np.int32),
            a.indices.astype(np.int32),
            a.data,
        )
        self.x_columns.append(self.n_columns + np.arange(n))
        self.pairs.append((block, cell))
        self.n_columns += n

    def solve(self, seconds: float) -> tuple[float, FloatArray, FloatArray] | None:
        """(objective, price of every row of the tract, value of every pair in order of
        addition), or None when ``seconds`` ran out first; a row not in the relaxation (its
        count is 0) is priced at what its first unit saves: its distance weight when its target
        is positive, or, at a target of 0, minus its cost above."""
        objective, duals, values = 0.0, np.zeros(0), np.zeros(0)
        if self.n_columns:  # else no row is in yet: the empty relaxation's optimum is 0
            run(self.highs, seconds)
            status = self.highs.getModelStatus()
            if status == highspy.HighsModelStatus.kTimeLimit:
                return None
            if status != highspy.HighsModelStatus.kOptimal:
                text = self.highs.modelStatusToString(status)
                raise RuntimeError(f"HiGHS found no optimum of the relaxation: {text}")
            solution = self.highs.getSolution()
            duals = np.asarray(solution.row_dual, dtype=np.float64)
            values = np.asarray(solution.col_value, dtype=np.float64)
            objective = float(self.highs.getInfo().objective_function_value)
        rows = self.space.rows
        prices = np.where(rows.target > 0, rows.weight, -rows.above)
        inside = self.position >= 0
        prices[inside] = duals[self.position[inside]]
        x = values[np.concatenate(self.x_columns)] if self.x_columns else np.zeros(0)
        absent = float(np.sum((rows.weight * rows.target)[~inside]))  # their counts are 0
        return objective + absent, prices, x

    def chosen(self) -> tuple[IntArray, IntArray]:
        """(block, cell) of every pair, in order of addition."""
        return (
            np.concatenate([b for b, _ in self.pairs]),
            np.concatenate([c for _, c in self.pairs]),
        )


def solve_priced(
    space: ColumnSpace,
    start: BoolArray,
    seed: int,
    limits: Limits,
    gap: float,
    draws: int = 0,
) -> Priced:
    """Price pairs in from ``start`` (blocks × classes) until the relaxation is optimal over all
    allowed pairs, then solve the integer program over them, all within ``limits``."""
    rows = space.rows
    allowed = space.allowed()
    chosen = start & allowed
    forced = rows.low > 0  # a count of 0 leaves its range: held from the start
    free = (rows.weight == 0) & (rows.above == 0) & (rows.low <= 0) & np.isinf(rows.high)
    master = Master(space, forced)
    master.add(*np.nonzero(chosen))
    pricing = Limits.start(PRICING_SHARE * limits.seconds_left())
    rounds, converged, previous, timed_out = 0, False, np.inf, False
    relaxed = np.zeros(0)
    while True:
        rounds += 1
        solved = master.solve(pricing.seconds_left())
        if solved is None:  # wall time stopped the round: the last relaxation's values stand
            timed_out = True
            break
        objective, prices, relaxed = solved
        reduced = space.reduced_costs(prices)
        reduced[~allowed | chosen] = np.inf
        entering = reduced < -REDUCED_COST_TOLERANCE
        converged = not entering.any()
        stalled = previous - objective < STALL * max(abs(objective), 1.0)
        timed_out = pricing.seconds_left() <= 0
        if converged or stalled or rounds >= MAX_ROUNDS or timed_out:
            break  # the last relaxation holds every pair chosen so far
        previous = objective
        if entering.sum() > ENTERING:
            cut = np.partition(reduced[entering], ENTERING - 1)[ENTERING - 1]
            entering &= reduced <= cut
        chosen |= entering
        master.add(*np.nonzero(entering))
    block, cell = master.chosen()
    relaxed = np.r_[relaxed, np.zeros(len(cell) - len(relaxed))]  # pairs added since: 0
    # the integer program over the pairs the relaxation uses and the starting ones
    used = np.zeros_like(chosen)
    used[block[relaxed > LP_ZERO], cell[relaxed > LP_ZERO]] = True
    values = np.zeros(chosen.shape)
    values[block, cell] = relaxed
    block, cell = np.nonzero(used | (start & allowed))
    active = (forced | _touched(space, block, cell)) & ~free
    model = build_model(space, block, cell, active)
    untouched = float(np.sum((rows.weight * rows.target)[~active]))  # their counts stay 0
    rounded = np.floor(values[block, cell] + LP_ZERO)
    status, x, objective = integer_solution(model, seed, limits, gap, counts=rounded)
    n, m = model.n, model.m
    if x is None:
        counts = np.zeros(n, np.int64)
        elastic = float("nan")
    else:
        counts = np.rint(x[:n]).astype(np.int64)
        elastic = float(x[n + 2 * m :].sum())
    keep = counts > 0
    after = Limits(max(limits.deadline, time.perf_counter() + MINIMUM_SOLVE), limits.nodes)
    drawn, draws_stopped = relaxed_draws(
        model.matrix, model.target, model.cost, model.upper, n, draws, seed, after
    )
    return Priced(
        block[keep],
        cell[keep],
        counts[keep],
        status,
        objective + untouched,
        rounds,
        converged,
        n,
        m,
        elastic,
        drawn[keep],
        timed_out or status == TIME_LIMIT_STATUS or draws_stopped,
    )


def relaxed_draws(
    matrix: sp.csc_matrix,
    target: FloatArray,
    cost: FloatArray,
    upper: FloatArray,
    n: int,
    draws: int,
    seed: int,
    limits: Limits,
) -> tuple[IntArray, bool]:
    """Whole counts of the first ``n`` columns (pairs) in ``draws`` diverse reconstructions:
    vertices of the relaxation A z = target under the cost plus a random one per draw on the
    pairs (uniform, a hundredth of the smallest positive cost; all of it for a feasibility
    program), rounded down; one HiGHS instance, each draw starting from the last basis.
    (Columns × draws, whether ``limits``' wall time stopped a draw: that one and the rest hold
    nothing.)"""
    rng = np.random.default_rng(seed)
    positive = cost[cost > 0]
    scale = 0.01 * float(positive.min()) if len(positive) else 1.0
    out = np.zeros((n, draws), dtype=np.int64)
    if not draws:
        return out, False
    highs = lp_instance(matrix, target, target, cost, upper, threads=single_threaded_highs())
    columns = np.arange(n, dtype=np.int32)
    for d in range(draws):
        highs.changeColsCost(n, columns, cost[:n] + scale * rng.random(n))
        run(highs, limits.seconds_left())
        status = highs.getModelStatus()
        if status == highspy.HighsModelStatus.kTimeLimit:
            return out, True
        if status != highspy.HighsModelStatus.kOptimal:
            text = highs.modelStatusToString(status)
            raise RuntimeError(f"HiGHS found no optimum of a ranking draw: {text}")
        x = np.asarray(highs.getSolution().col_value, dtype=np.float64)
        out[:, d] = np.floor(x[:n] + LP_ZERO).astype(np.int64)
    return out, False


def _touched(space: ColumnSpace, block: IntArray, cell: IntArray) -> BoolArray:
    """Rows that at least one of the pairs enters."""
    touched = np.zeros(len(space.rows.low), dtype=bool)
    touched[space.matrix(block, cell).indices] = True
    return touched
