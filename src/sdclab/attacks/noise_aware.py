"""The noise-aware program of one tract, solved by pricing columns in.

The program (docs/reconstruction.md) has a non-negative integer variable for every (block, class)
pair that no published cell rules out — a cell rules a pair out only where the noise model says
its true count is exactly 0 — and, for every published cell r with true count t_r = A_r x,

    low_r ≤ t_r ≤ high_r   and the cost  weight_r · |t_r − target_r|

(above the target at ``above_r`` instead, 0 for a one-sided measurement;
:mod:`sdclab.attacks.knowledge`). Its optimum is the most likely reconstruction under the noise
model (for bounded noise: the one nearest the published counts among those the noise allows).

A cell whose target is an end of its range (a published 0 at its lower bound of 0: most cells)
costs linearly over the whole range, so its cost rides on the pairs that enter it and it is a
row only where its range can bind; a cell whose cost bends inside its range is a row with a slack
each side of its target (:class:`Rows`). Every class of every block is a variable, far too many
to pass to a solver (26,000 classes × each block), so the linear relaxation is solved by column
generation: start from the naive attack's pairs, solve (first on the block rows alone, then with
the tract rows that tie the blocks together), price every other pair with the duals — a bent
cell no variable touches yet has the price of its distance cost — and add the pairs whose
reduced cost is negative, until none is. The relaxation's optimum is then that of the whole
program; when it is integral it is the integer program's optimum too, else the integer program is
solved over the pairs priced in (price-and-branch). An elastic slack of a large cost below every
range that excludes 0 keeps every restricted program feasible; at the optimum it is 0 unless
the release contradicts its noise model, and its total is reported.

Every solve stops at the tract's :class:`~sdclab.core.optimize.highs.Limits`: the pricing rounds
take at most :data:`PRICING_SHARE` of its time, the integer program the rest (at least
:data:`MINIMUM_SOLVE`), and the further draws what is left (at least :data:`MINIMUM_SOLVE` in
all). A solve stopped by wall time makes the outcome depend on the machine's speed and load:
:attr:`Priced.time_limited` says so.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cached_property

import highspy
import numpy as np
import scipy.sparse as sp

from sdclab.attacks.knowledge import CellBounds
from sdclab.core.arrays import BoolArray, FloatArray, IntArray
from sdclab.core.optimize.highs import (
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
INTEGRAL_TOLERANCE = 1e-6
"""A relaxation's value this close to a whole number counts as whole."""
OPTIMAL_RELAXATION = "Optimal"
"""The status of a tract whose relaxation's optimum was integral (no integer program needed)."""
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
    first, block by block, then the tract cells).

    A row's cost is linear over its whole range where its target is an end of the range (a
    published 0 at its lower bound of 0, say): that cost is carried by the pairs entering it
    (:attr:`slope`), and the row is held only where its range can bind. A row whose cost bends
    inside its range (:attr:`kinked`) is held with a slack each side of its target."""

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

    @cached_property
    def kinked(self) -> BoolArray:
        """Rows whose cost bends at a target inside their range."""
        inside = (self.low < self.target) & (self.target < self.high)
        return inside & ((self.weight > 0) | (self.above > 0))

    @cached_property
    def slope(self) -> FloatArray:
        """Cost per unit of each row's count where it is linear over the whole range: ``above``
        where the target is the range's low end, −``weight`` where it is its high end, 0 where
        the cost bends."""
        at_low = self.target <= self.low
        at_high = ~at_low & (self.target >= self.high)
        return np.where(at_low, self.above, np.where(at_high, -self.weight, 0.0))

    @cached_property
    def held(self) -> BoolArray:
        """Rows the program must hold once a pair enters them: a bent cost or a range that can
        bind."""
        return self.kinked | (self.low > 0) | np.isfinite(self.high)

    @cached_property
    def offset(self) -> float:
        """The constant of the linear costs: Σ slope·(−target), so that a row's cost is
        slope·(count − target)."""
        return float(-np.sum(self.slope * self.target))

    @cached_property
    def bent_at_zero(self) -> FloatArray:
        """Each bent row's cost at a count of 0 (below its target), 0 for any other row."""
        return np.where(self.kinked, self.weight * self.target, 0.0)

    @cached_property
    def price_outside(self) -> FloatArray:
        """Each row's price while no pair enters it: what the first unit saves (a bent row's
        distance weight: its count 0 lies below its target), 0 for any other row."""
        return np.where(self.kinked, self.weight, 0.0)

    @cached_property
    def bent_total(self) -> float:
        """The bent cost of every row at a count of 0."""
        return float(self.bent_at_zero.sum())

    def cost_outside(self, held: IntArray) -> float:
        """The bent cost of every row but the ``held`` ones, whose counts are 0."""
        return self.bent_total - float(self.bent_at_zero[held].sum())

    def columns(self, index: IntArray) -> tuple[FloatArray, FloatArray, Slacks]:
        """(lower, upper) of the rows ``index`` and their slacks: u⁺ and u⁻ each side of a bent
        row's target (the row is then an equality at its target), and an elastic v below a row
        whose range excludes 0 (so that any restricted program is feasible at x = 0)."""
        kinked = self.kinked[index]
        target, low, high = self.target[index], self.low[index], self.high[index]
        lower = np.where(kinked, target, low)
        upper = np.where(kinked, target, high)
        bent = np.flatnonzero(kinked)
        short = np.flatnonzero(low > 0)
        slacks = Slacks(
            row=np.r_[bent, bent, short],
            coefficient=np.r_[-np.ones(len(bent)), np.ones(len(bent)), np.ones(len(short))],
            cost=np.r_[
                self.above[index][bent], self.weight[index][bent], np.full(len(short), self.elastic)
            ],
            upper=np.r_[(high - target)[bent], (target - low)[bent], low[short]],
            elastic=np.r_[np.zeros(2 * len(bent), bool), np.ones(len(short), bool)],
        )
        return lower, upper, slacks

    @classmethod
    def of(cls, block: CellBounds, tract: CellBounds) -> Rows:
        def joined(name: str) -> FloatArray:
            return np.r_[getattr(block, name).reshape(-1), getattr(tract, name)]

        costs = np.r_[joined("weight"), joined("above")]
        if not np.all(np.isfinite(costs) & (costs >= 0)):
            raise ValueError(
                "the noise model gives a cell a cost per unit that is not a finite number ≥ 0 "
                "(a measurement of variance 0?): the program would have no meaning"
            )
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
class Slacks:
    """Slack columns of some rows: the row (position among them) each enters."""

    row: IntArray
    coefficient: FloatArray
    cost: FloatArray
    upper: FloatArray
    elastic: BoolArray


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

    def through(self, values: FloatArray) -> FloatArray:
        """blocks × classes: Σ_r A_r values_r over the rows each pair enters."""
        n_block_rows = self.rows.n_blocks * self.rows.block_width
        per_block = values[:n_block_rows].reshape(self.rows.n_blocks, -1)
        block_part = np.asarray(self.qb.T @ per_block.T).T
        tract_part = np.asarray(self.qt.T @ values[n_block_rows:])
        return block_part + tract_part[None, :]


@dataclass(frozen=True)
class Model:
    """The program over some pairs and held rows: the pairs x (costed by the linear rows they
    enter), then the rows' slacks."""

    matrix: sp.csc_matrix
    lower: FloatArray
    upper_row: FloatArray
    cost: FloatArray
    upper: FloatArray
    rows: IntArray
    """The rows of the tract the model holds."""
    slacks: Slacks
    n: int

    def completed(self, counts: FloatArray) -> FloatArray:
        """A point with the pairs at ``counts``: each bent row's distance taken up by its
        slacks, a count short of a range by the elastic slack."""
        t = self.matrix[:, : self.n] @ counts
        s = self.slacks
        value = np.zeros(len(s.row))
        residual = (self.lower - t)[s.row]  # > 0: below the target (or the range)
        below = ~s.elastic & (s.coefficient > 0)
        value[below] = np.minimum(np.maximum(residual[below], 0), s.upper[below])
        above = ~s.elastic & (s.coefficient < 0)
        value[above] = np.minimum(np.maximum(-residual[above], 0), s.upper[above])
        covered = np.zeros(len(self.lower))
        np.add.at(covered, s.row[below], value[below])
        left = (self.lower - t - covered)[s.row]
        value[s.elastic] = np.maximum(left[s.elastic], 0)
        return np.r_[counts, value]


def build_model(space: ColumnSpace, block: IntArray, cell: IntArray, forced: BoolArray) -> Model:
    """The program over the pairs (``block``, ``cell``): the ``forced`` rows and the held rows
    the pairs enter."""
    rows = space.rows
    whole = space.matrix(block, cell)
    cost = whole.T @ rows.slope
    entered = np.zeros(len(rows.low), dtype=bool)
    entered[whole.indices] = True
    index = np.flatnonzero(forced | (entered & rows.held))
    a = whole[index]
    lower, upper_row, slacks = rows.columns(index)
    m, n = a.shape
    columns = sp.csc_matrix(
        (slacks.coefficient, (slacks.row, np.arange(len(slacks.row)))), shape=(m, len(slacks.row))
    )
    bounded = np.isfinite(upper_row) & ~rows.kinked[index]
    pair_upper = column_minimum(a[bounded].tocsc(), upper_row[bounded])
    return Model(
        matrix=sp.hstack([a, columns], format="csc"),
        lower=lower,
        upper_row=upper_row,
        cost=np.r_[cost, slacks.cost],
        upper=np.r_[np.where(np.isfinite(pair_upper), pair_upper, INF), slacks.upper],
        rows=index,
        slacks=slacks,
        n=n,
    )


def column_minimum(matrix: sp.csc_matrix, values: FloatArray) -> FloatArray:
    """For each column, the smallest value of the rows it appears in (inf if none)."""
    data = np.r_[values[matrix.indices], np.inf]
    starts = np.minimum(matrix.indptr[:-1], len(data) - 1)
    lowest = np.minimum.reduceat(data, starts)
    lowest[np.diff(matrix.indptr) == 0] = np.inf
    return lowest


def integer_solution(
    model: Model,
    seed: int,
    limits: Limits,
    gap: float,
    counts: FloatArray | None = None,
) -> tuple[str, FloatArray | None, float]:
    """(status, x or None, objective) of the integer program, started from whole ``counts`` of
    its pairs when given, within ``limits`` (at least :data:`MINIMUM_SOLVE` seconds)."""
    flags = np.r_[np.ones(model.n, bool), np.zeros(len(model.slacks.row), bool)]
    return solve_mip(
        model.matrix,
        model.lower,
        model.upper_row,
        model.cost,
        model.upper,
        flags,
        threads=single_threaded_highs(),
        start=None if counts is None else model.completed(counts),
        random_seed=seed % 2_147_483_647,
        mip_rel_gap=gap,
        **limits.options(MINIMUM_SOLVE),
    )


@dataclass(frozen=True)
class Relaxation:
    """The optimum of a relaxation over the pairs priced in so far."""

    objective: float
    prices: FloatArray
    """The price (dual) of every row of the tract."""
    values: FloatArray
    """The value of every pair, in order of addition."""
    elastic: float


class Master:
    """The relaxation over the pairs priced in so far, kept in one HiGHS instance: each round
    adds the held rows the new pairs enter (with their slacks) and the pairs, and the simplex
    starts from the last round's basis. A row no pair enters yet stays out: its count is 0, its
    cost a constant, and its price that of its first unit (:meth:`solve`)."""

    def __init__(self, space: ColumnSpace, forced: BoolArray, holding: BoolArray) -> None:
        self.space = space
        self.holding = space.rows.held & holding
        """The rows the relaxation holds when a pair enters them (:meth:`hold` widens it)."""
        self.highs = quiet_highs(threads=single_threaded_highs())
        self.position = np.full(len(space.rows.low), -1, dtype=np.int64)  # row → HiGHS row
        self.pairs: list[tuple[IntArray, IntArray]] = []
        self.x_columns: list[IntArray] = []
        self.elastic_columns: list[IntArray] = []
        self.n_columns = 0
        self._add_rows(np.flatnonzero(forced & self.holding))

    def _add_rows(self, rows: IntArray, existing: sp.csr_matrix | None = None) -> None:
        """Add ``rows`` with their slacks; ``existing``: their coefficients on the pairs already
        in (rows × pairs in order of addition), where those enter them."""
        rows = rows[self.position[rows] < 0]
        if not len(rows):
            return
        first = int(self.position.max(initial=-1)) + 1
        lower, upper, slacks = self.space.rows.columns(rows)
        if existing is None:
            existing = sp.csr_matrix((len(rows), 0))
        x_columns = np.concatenate(self.x_columns) if self.x_columns else np.zeros(0, np.int64)
        self.highs.addRows(
            len(rows),
            lower,
            upper,
            existing.nnz,
            existing.indptr[:-1].astype(np.int32),
            x_columns[existing.indices].astype(np.int32),
            existing.data,
        )
        self.position[rows] = first + np.arange(len(rows))
        k = len(slacks.row)
        if k:
            self.highs.addCols(
                k,
                slacks.cost,
                np.zeros(k),
                slacks.upper,
                k,
                np.arange(k, dtype=np.int32),
                (first + slacks.row).astype(np.int32),
                slacks.coefficient,
            )
        self.elastic_columns.append(self.n_columns + np.flatnonzero(slacks.elastic))
        self.n_columns += k

    def hold(self, forced: BoolArray) -> None:
        """Hold every held row from now on: those the pairs in enter, and the ``forced`` ones."""
        self.holding = self.space.rows.held
        entered = np.zeros(len(self.position), dtype=bool)
        whole = self.space.matrix(*self.chosen()) if self.pairs else None  # rows × pairs, CSC
        if whole is not None:
            entered[whole.indices] = True
        pairs = None if whole is None else whole.tocsr()
        rows = np.flatnonzero((entered & self.holding | forced) & (self.position < 0))
        self._add_rows(rows, None if pairs is None else pairs[rows])

    def add(self, block: IntArray, cell: IntArray) -> None:
        """Add pairs (and first the held rows they enter)."""
        if not len(cell):
            return
        whole = self.space.matrix(block, cell)
        cost = whole.T @ self.space.rows.slope
        held_rows = np.flatnonzero(self.holding)
        a = whole[held_rows].tocsc()
        self._add_rows(held_rows[np.unique(a.indices)])
        a = sp.csc_matrix(
            (a.data, self.position[held_rows[a.indices]], a.indptr),
            shape=(int(self.position.max(initial=-1)) + 1, len(cell)),
        )
        n = len(cell)
        self.highs.addCols(
            n,
            cost,
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

    def solve(self, seconds: float) -> Relaxation | None:
        """The relaxation's optimum, or None when ``seconds`` ran out first; a bent row not in
        the relaxation (its count is 0, below its target) is priced at its distance weight, any
        other at 0."""
        rows = self.space.rows
        objective, duals, values = 0.0, np.zeros(0), np.zeros(0)
        if self.n_columns:  # else nothing is in yet: the empty relaxation's optimum is 0
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
        inside = self.position >= 0
        prices = rows.price_outside.copy()
        prices[inside] = duals[self.position[inside]]
        x = values[np.concatenate(self.x_columns)] if self.x_columns else np.zeros(0)
        elastic_columns = np.concatenate([np.zeros(0, np.int64), *self.elastic_columns])
        elastic = float(values[elastic_columns].sum()) if len(values) else 0.0
        objective += rows.offset + rows.cost_outside(np.flatnonzero(inside))
        return Relaxation(objective, prices, x, elastic)

    def chosen(self) -> tuple[IntArray, IntArray]:
        """(block, cell) of every pair, in order of addition."""
        if not self.pairs:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
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
    allowed pairs, then solve the integer program over them, all within ``limits``.

    Every row's cost is at least 0 (0 at its target), so a relaxation of cost 0 is optimal
    whatever pairs are left out: pricing stops there."""
    rows = space.rows
    allowed = space.allowed()
    chosen = start & allowed
    forced = rows.low > 0  # a count of 0 leaves its range: held from the start
    pricing = _price_in(space, chosen, allowed, forced, limits)
    relaxation, timed_out = pricing.relaxation, pricing.timed_out
    block, cell, whole = _program_pairs(pricing.master, relaxation, chosen, start, allowed)
    model = build_model(space, block, cell, forced)
    constant = rows.offset + rows.cost_outside(model.rows)
    if relaxation is not None and not timed_out and _integral(whole):
        # an integral optimum of the relaxation is the integer program's optimum
        status, counts = OPTIMAL_RELAXATION, np.rint(whole).astype(np.int64)
        objective, elastic = relaxation.objective, relaxation.elastic
    else:
        status, counts, objective, elastic = _integer_counts(
            model, whole, constant, seed, limits, gap
        )
    keep = counts > 0
    after = Limits(max(limits.deadline, time.perf_counter() + MINIMUM_SOLVE), limits.nodes)
    drawn, draws_stopped = relaxed_draws(
        model.matrix,
        model.lower,
        model.upper_row,
        model.cost,
        model.upper,
        model.n,
        draws,
        seed,
        after,
    )
    return Priced(
        block[keep],
        cell[keep],
        counts[keep],
        status,
        objective,
        pricing.rounds,
        pricing.converged,
        model.n,
        len(model.rows),
        elastic,
        drawn[keep],
        timed_out or status == TIME_LIMIT_STATUS or draws_stopped,
    )


@dataclass(frozen=True)
class _Pricing:
    """How the pricing rounds ended: the relaxation over the pairs priced in, its last optimum
    (None if wall time stopped the first round), the rounds and whether they converged."""

    master: Master
    relaxation: Relaxation | None
    rounds: int
    converged: bool
    timed_out: bool


def _price_in(
    space: ColumnSpace, chosen: BoolArray, allowed: BoolArray, forced: BoolArray, limits: Limits
) -> _Pricing:
    """Add the pairs of negative reduced cost to the relaxation over ``chosen`` (marked in it as
    they enter) round by round, within :data:`PRICING_SHARE` of ``limits``, until none is left,
    the objective stalls, or the rounds or the time run out."""
    rows = space.rows
    linear = space.through(rows.slope)
    pricing = Limits.start(PRICING_SHARE * limits.seconds_left())
    master = _warmed(space, chosen, forced, pricing)
    rounds, converged, previous, timed_out = 0, False, np.inf, False
    relaxation = None
    while True:
        rounds += 1
        solved = master.solve(pricing.seconds_left())
        if solved is None:  # wall time stopped the round: the last relaxation's values stand
            timed_out = True
            break
        relaxation = solved
        reduced = linear - space.through(solved.prices)
        reduced[~allowed | chosen] = np.inf
        entering = reduced < -REDUCED_COST_TOLERANCE
        converged = not entering.any() or solved.objective <= REDUCED_COST_TOLERANCE
        stalled = solved.elastic <= LP_ZERO and (
            previous - solved.objective < STALL * max(abs(solved.objective), 1.0)
        )
        timed_out = pricing.seconds_left() <= 0
        if converged or stalled or rounds >= MAX_ROUNDS or timed_out:
            break  # the last relaxation holds every pair chosen so far
        previous = solved.objective
        if entering.sum() > ENTERING:
            cut = np.partition(reduced[entering], ENTERING - 1)[ENTERING - 1]
            entering &= reduced <= cut
        chosen |= entering
        master.add(*np.nonzero(entering))
    return _Pricing(master, relaxation, rounds, converged, timed_out)


def _program_pairs(
    master: Master,
    relaxation: Relaxation | None,
    chosen: BoolArray,
    start: BoolArray,
    allowed: BoolArray,
) -> tuple[IntArray, IntArray, FloatArray]:
    """The pairs of the integer program, those the relaxation uses and the allowed starting
    ones, and the relaxation's value of each (0 for a pair priced in after its last optimum)."""
    block, cell = master.chosen()
    relaxed = relaxation.values if relaxation is not None else np.zeros(0)
    relaxed = np.r_[relaxed, np.zeros(len(cell) - len(relaxed))]  # pairs added since: 0
    used = np.zeros_like(chosen)
    used[block[relaxed > LP_ZERO], cell[relaxed > LP_ZERO]] = True
    values = np.zeros(chosen.shape)
    values[block, cell] = relaxed
    block, cell = np.nonzero(used | (start & allowed))
    return block, cell, values[block, cell]


def _integer_counts(
    model: Model, whole: FloatArray, constant: float, seed: int, limits: Limits, gap: float
) -> tuple[str, IntArray, float, float]:
    """(status, counts of the pairs, objective, elastic total) of the integer program, started
    from the relaxation's values rounded down (``constant``: the cost of the rows it leaves
    out); a program without a solution has no counts and an unknown elastic total."""
    rounded = np.floor(whole + LP_ZERO)
    status, x, objective = integer_solution(model, seed, limits, gap, counts=rounded)
    objective += constant
    if x is None:
        counts, elastic = np.zeros(model.n, np.int64), float("nan")
    else:
        counts = np.rint(x[: model.n]).astype(np.int64)
        elastic = float(x[model.n :][model.slacks.elastic].sum())
    return status, counts, objective, elastic


def _warmed(space: ColumnSpace, chosen: BoolArray, forced: BoolArray, limits: Limits) -> Master:
    """The relaxation over the ``chosen`` pairs, its simplex warmed on the block rows alone.

    The tract rows tie every block's pairs together and make each simplex iteration costly;
    the block rows alone solve fast, block by block, and their basis is a good start once
    the tract rows join."""
    rows = space.rows
    block_rows = np.arange(len(rows.low)) < rows.n_blocks * rows.block_width
    # a row whose cost falls with its count bounds the pairs that enter it: held from the start
    master = Master(space, forced, holding=block_rows | (rows.slope < 0))
    master.add(*np.nonzero(chosen))
    master.solve(limits.seconds_left())
    master.hold(forced)
    return master


def _integral(values: FloatArray) -> bool:
    return bool(np.all(np.abs(values - np.rint(values)) <= INTEGRAL_TOLERANCE))


def relaxed_draws(
    matrix: sp.csc_matrix,
    lower: FloatArray,
    upper_row: FloatArray,
    cost: FloatArray,
    upper: FloatArray,
    n: int,
    draws: int,
    seed: int,
    limits: Limits,
) -> tuple[IntArray, bool]:
    """Whole counts of the first ``n`` columns (pairs) in ``draws`` diverse reconstructions:
    vertices of the relaxation lower ≤ A z ≤ upper_row under the cost plus a random one per draw
    on the pairs (uniform, a hundredth of the smallest positive cost; all of it for a feasibility
    program), rounded down; one HiGHS instance, each draw starting from the last basis.
    (Columns × draws, whether ``limits``' wall time stopped a draw: that one and the rest hold
    nothing.)"""
    rng = np.random.default_rng(seed)
    positive = cost[cost > 0]
    scale = 0.01 * float(positive.min()) if len(positive) else 1.0
    out = np.zeros((n, draws), dtype=np.int64)
    if not draws:
        return out, False
    highs = lp_instance(matrix, lower, upper_row, cost, upper, threads=single_threaded_highs())
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
