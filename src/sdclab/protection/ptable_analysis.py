"""What a cell key p-table reveals: the true counts a published count can come from, δ(ε) of
neighbouring counts (a bounded p-table can never be ε-DP, since a count's neighbour cannot reach
its extreme outputs) and whether its noise is a fixed function an attacker can undo."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from sdclab.core.arrays import BoolArray, FloatArray, IntArray
from sdclab.core.errors import InputError
from sdclab.protection.ptable import ONS_PCV_MAX, OnsPTable, PTable, pcv

ONS_DELTA_MAX = 1000
"""Last n of the pairs (n, n + 1) checked for an ONS table; pairs beyond repeat (period 250)."""
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
