"""What an attacker may conclude about the true count behind every published cell.

The noise-aware reconstruction (docs/reconstruction.md) reads a release and nothing else: its
tables, the parameters it records and what its mechanism publishes about its noise. From them
each mechanism's model gives, for every published cell, the range its true count must lie in
(``low``..``high``: what the mechanism could have turned into the published value) and the cost
per unit of the distance between the true count and the published one (``weight``: the negative
log-likelihood slope of the noise, 0 where every count in the range is as plausible):

* exact tables (none) and swapped microdata tabulated exactly (swapping, PSA): the published
  count is the count of the (swapped) records, ``low = high``;
* the cell key method: the counts the p-table (and the threshold) can turn into the published
  one — a published positive cell is a true positive one, a zero may hide 1..D (1..9 under the
  ONS 10/5 table); distance weight 1 (the p-table's mass is largest at no change);
* suppression: a shown positive count is exact, a shown 0 is 0..``small_cells`` (exactly 0 in
  an 18+ table whose group rule is stricter than the small-cell rule, and at a geounit whose P1
  is published as 0 when the size rule is stricter than the small-cell rule: a geounit of
  1..``small_cells`` persons would have had its tables withheld), a withheld cell constrains
  nothing;
* geometric noise: any count ≥ 0, weight 1/scale of its table and level (the log-likelihood of
  the two-sided geometric; where negatives were set to 0, the censored likelihood of a 0 has the
  same slope);
* TopDown's tables: any count ≥ 0 (post-processing can move any cell), weight 1.

A suppressed (null) cell is NaN in ``published`` and yields no bound (low 0, high ∞, weight 0).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sdclab.arrays import FloatArray, IntArray
from sdclab.errors import InputError
from sdclab.protection.cellkey import PTABLE_ARTIFACT, CellKeyParameters
from sdclab.protection.ptable import OnsPTable, PTable, pcv, ptable_from_frame
from sdclab.release import Release
from sdclab.tables.catalog import CATALOG

EXACT_MECHANISMS = ("none", "swap", "swap-low", "swap-high", "psa")
"""Mechanisms whose tables are exact tabulations of the records they publish from (the
confidential ones, or the swapped ones)."""


@dataclass(frozen=True)
class CellBounds:
    """Per published cell (same shape as the published array): the range of its true count and
    the cost per unit of distance from the published count."""

    low: FloatArray
    high: FloatArray
    weight: FloatArray
    target: FloatArray
    """The published count moved into [low, high] (the distance is measured from it); 0 where
    the cell is withheld."""

    @property
    def exact(self) -> bool:
        """Whether every cell's true count is its published one (no noise to model)."""
        return bool(np.all(self.low == self.high))

    def take(self, index: int | IntArray) -> CellBounds:
        """The bounds of some geounits (rows)."""
        return CellBounds(self.low[index], self.high[index], self.weight[index], self.target[index])

    def contains(self, counts: FloatArray) -> bool:
        """Whether true ``counts`` (same shape) lie in every cell's range."""
        return bool(np.all((counts >= self.low) & (counts <= self.high)))


def _bounds(
    published: FloatArray, low: FloatArray, high: FloatArray, weight: FloatArray
) -> CellBounds:
    withheld = np.isnan(published)
    low = np.where(withheld, 0.0, low)
    high = np.where(withheld, np.inf, high)
    weight = np.where(withheld, 0.0, weight)
    target = np.clip(np.nan_to_num(published, nan=0.0), low, high)
    return CellBounds(low, high, weight, target)


def cell_bounds(
    release: Release, names: Sequence[str], level: str, published: FloatArray
) -> CellBounds:
    """The attacker's bounds on the true counts behind ``published``: geounits of ``level`` ×
    the cells of the tables ``names`` side by side (NaN where withheld)."""
    published = np.asarray(published, dtype=np.float64)
    model = MODELS.get(release.mechanism)
    if model is None:
        raise InputError(
            f"release ({release.mechanism}): the noise-aware attack has no model of this "
            f"mechanism's noise (it models {', '.join(sorted(MODELS))})"
        )
    return model(release, names, level, published)


def _exact(release: Release, names: Sequence[str], level: str, published: FloatArray) -> CellBounds:
    return _bounds(published, published, published, np.zeros_like(published))


def _post_processed(
    release: Release, names: Sequence[str], level: str, published: FloatArray
) -> CellBounds:
    return _bounds(
        published,
        np.zeros_like(published),
        np.full_like(published, np.inf),
        np.ones_like(published),
    )


def _table_columns(names: Sequence[str]) -> list[slice]:
    """The columns of each table in a side-by-side array."""
    stops = np.cumsum([CATALOG[n].n_cells for n in names])
    return [
        slice(int(stop - CATALOG[n].n_cells), int(stop))
        for n, stop in zip(names, stops, strict=True)
    ]


def _geometric(
    release: Release, names: Sequence[str], level: str, published: FloatArray
) -> CellBounds:
    scales = release.noise.get("parameters", {}).get("scale", {})
    weight = np.ones_like(published)
    for name, columns in zip(names, _table_columns(names), strict=True):
        scale = scales.get(f"{name} {level}")
        if not isinstance(scale, (int, float)) or scale <= 0:
            raise InputError(
                f"release (geometric): its noise publication states no scale for {name} at "
                f"{level} (release.json noise.parameters.scale)"
            )
        weight[:, columns] = 1.0 / scale
    return _bounds(published, np.zeros_like(published), np.full_like(published, np.inf), weight)


def _suppressed(
    release: Release, names: Sequence[str], level: str, published: FloatArray
) -> CellBounds:
    from sdclab.protection.suppression import SuppressionParameters, is_adult_table

    p = SuppressionParameters.model_validate(release.parameters)
    low, high = published.copy(), published.copy()
    zero = published == 0
    low[zero], high[zero] = 0.0, float(p.small_cells)
    columns = _table_columns(names)
    for name, cols in zip(names, columns, strict=True):
        if is_adult_table(CATALOG[name]) and p.group_min > p.small_cells:
            high[:, cols] = np.where(zero[:, cols], 0.0, high[:, cols])
    if "P1" in names and p.min_persons > p.small_cells:  # a P1 of 1..small would be withheld
        empty = published[:, columns[list(names).index("P1")].start] == 0
        high[empty] = np.where(zero[empty], 0.0, high[empty])
    return _bounds(published, low, high, zero.astype(np.float64))


def _cell_key(
    release: Release, names: Sequence[str], level: str, published: FloatArray
) -> CellBounds:
    p = CellKeyParameters.model_validate(release.parameters)
    if PTABLE_ARTIFACT in release.artifacts:
        table = ptable_from_frame(release.artifacts[PTABLE_ARTIFACT], Path(PTABLE_ARTIFACT))
    else:
        table = p.table()
    shown = np.nan_to_num(published, nan=0.0)
    if np.any(shown < 0) or np.any(shown != np.rint(shown)):
        raise InputError("release (cellkey): published counts must be non-negative integers")
    lowest, highest = preimage_range(table, p.threshold, int(shown.max(initial=0)))
    index = shown.astype(np.int64)
    low, high = lowest[index].astype(np.float64), highest[index].astype(np.float64)
    impossible = ~np.isnan(published) & (low > high)
    if impossible.any():
        raise InputError(
            f"release (cellkey): a published count of {int(shown[impossible][0])} at {level} "
            "cannot come from its p-table; the release and its parameters disagree"
        )
    return _bounds(published, low, high, np.ones_like(published))


def preimage_range(
    table: PTable | OnsPTable, threshold: int, largest: int
) -> tuple[IntArray, IntArray]:
    """For every published count 0..``largest``: the smallest and largest true count that the
    p-table (then the threshold, which publishes counts below it as 0) can turn into it; an
    unreachable count has smallest > largest."""
    support, offset, row_of = _noise_support(table)
    reach = int(max(abs(offset), support.shape[1] + offset))
    true = np.arange(max(largest, threshold) + reach + 1)  # all that can land at or below both
    rows, steps = np.nonzero(support[row_of(true)])
    out = true[rows] + offset + steps
    out = np.where(out < threshold, 0, out)
    keep = (out >= 0) & (out <= largest)
    lowest = np.full(largest + 1, np.iinfo(np.int64).max)
    highest = np.full(largest + 1, -1)
    np.minimum.at(lowest, out[keep], true[rows][keep])
    np.maximum.at(highest, out[keep], true[rows][keep])
    return lowest, highest


def _noise_support(
    table: PTable | OnsPTable,
) -> tuple[np.ndarray, int, Callable[[IntArray], IntArray]]:
    """(rows × noise values: whether the noise can occur, the smallest noise value, the row that
    serves each true count)."""
    if isinstance(table, OnsPTable):
        rows = range(table.pvalue.shape[0])
        values = [np.unique(table.pvalue[r]) for r in rows]
        row_of: Callable[[IntArray], IntArray] = pcv
    else:
        rows = range(table.i_max + 1)
        values = [v[p > 0] for v, p in (table.row(r) for r in rows)]
        values[0] = np.array([0])
        i_max = table.i_max
        row_of = lambda n: np.minimum(n, i_max)  # noqa: E731
    offset = int(min(v.min() for v in values))
    width = int(max(v.max() for v in values)) - offset + 1
    support = np.zeros((len(values), width), dtype=bool)
    for r, v in enumerate(values):
        support[r, v - offset] = True
    return support, offset, row_of


MODELS: dict[str, Callable[[Release, Sequence[str], str, FloatArray], CellBounds]] = {
    **dict.fromkeys(EXACT_MECHANISMS, _exact),
    "cellkey": _cell_key,
    "suppress": _suppressed,
    "geometric": _geometric,
    "topdown": _post_processed,
}
"""The attacker's model of each mechanism's published tables, by mechanism name."""
