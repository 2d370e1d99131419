"""Perturbation tables (p-tables) of the cell key method: the two formats, lookup and files.

A p-table gives, for every true count n, the distribution of the noise x added to it; the cell key
u ∈ [0, 1) of a cell (a function of its contributors only) picks x deterministically, so the same
contributors always get the same noise. Two formats are supported:

* **Destatis long format** (R packages ptable and cellKey): one row per transition i → j with
  noise v = j − i and the half-open key interval [p_int_lb, p_int_ub). Rows i = 1..i_max come from
  the maximum-entropy construction (:func:`create_ptable`): for each row maximise the entropy of
  the noise subject to zero mean, variance ≤ V (= V for ``optim=4``), |v| ≤ D, no target count in
  1..js, a 1e-8 floor, an optional lower bound ``pstay`` on p(i → i) that is relaxed in steps of
  0.05 until the variance reaches V, and (``mono``) probabilities non-decreasing up to v = 0. Row
  i_max (the symmetry row) serves every n ≥ i_max. Each row is solved exactly by
  :mod:`sdclab.core.optimize.ptable_solver`.
* **ONS format** (cell_key_perturbation): a pvalue for every (pcv, ckey) with integer cell keys
  ckey ∈ 0..K−1 and pcv the count folded onto 1..750 (:func:`pcv`).

What a table reveals (the true counts behind a published count, δ(ε) of neighbouring counts,
whether its noise can be undone) is :mod:`sdclab.protection.ptable_analysis`.
"""

from __future__ import annotations

import io
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt
import polars as pl
from scipy import optimize

from sdclab.core.arrays import FloatArray, IntArray
from sdclab.core.errors import InputError
from sdclab.core.fileio import atomic_file, read_settings_file
from sdclab.core.optimize.ptable_solver import FLOOR, build_row

DIGITS = 8
"""Decimals the interval bounds are rounded to."""
SUM_TOLERANCE = 1e-6
"""How far the probabilities of a row read from a file may sum from 1."""
ONS_PCV_MAX = 750
"""Largest pcv of an ONS table; larger counts are folded onto 501..750 (period 250)."""
FILE_LIMIT = ONS_PCV_MAX
"""Largest row i and largest |noise| a p-table file may hold (either format): 750, the counts an
ONS table distinguishes. Whatever uses a table (its card's δ, the attacker's preimages) builds
arrays of rows × noise values, so both are bounded; the max-entropy construction stays far
inside (i_max ≤ D + js + 1 ≤ 201, |v| ≤ D ≤ 100)."""

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
        v, p, low = build_row(i, D, V, js, stays[i - 1], monos[i - 1], optim == 4)
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
    most :data:`sdclab.core.fileio.SETTINGS_FILE_LIMIT` bytes)."""
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


__all__ = [
    "OnsPTable",
    "PTable",
    "create_ptable",
    "large_count_noise",
    "ons_10_5_ptable",
    "pcv",
    "read_ptable",
    "symmetry_row",
    "to_ons",
    "write_ptable",
]
