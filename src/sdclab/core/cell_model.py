"""What an attacker may conclude about the true count behind each published cell, as values.

A mechanism states, for the tables it publishes, the range each true count must lie in and the
cost per unit of distance from the published count (:attr:`~sdclab.protection.base.Mechanism.
cell_model`); the noise-aware reconstruction reads these bounds and nothing else about the
mechanism (docs/reconstruction.md). A suppressed (null) cell is NaN in ``published`` and yields
no bound (low 0, high ∞, weight 0).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from sdclab.core.arrays import FloatArray, IntArray
from sdclab.core.census.model import Census


class Published(Protocol):
    """What a cell model reads of a release besides its published counts (a
    :class:`~sdclab.release.Release`, of which a mechanism's own model may read more)."""

    @property
    def census(self) -> Census: ...


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
    above: FloatArray
    """The cost per unit above the target (``weight`` but for a one-sided measurement, which
    bounds the true count from below only)."""

    @property
    def exact(self) -> bool:
        """Whether every cell's true count is its published one (no noise to model)."""
        return bool(np.all(self.low == self.high))

    def take(self, index: int | IntArray) -> CellBounds:
        """The bounds of some geounits (rows)."""
        return CellBounds(
            self.low[index],
            self.high[index],
            self.weight[index],
            self.target[index],
            self.above[index],
        )

    def beside(self, other: CellBounds) -> CellBounds:
        """These cells' bounds and ``other``'s side by side (the same geounits)."""
        return CellBounds(*(np.hstack([getattr(self, f), getattr(other, f)]) for f in _FIELDS))

    def contains(self, counts: FloatArray) -> bool:
        """Whether true ``counts`` (same shape) lie in every cell's range."""
        return bool(np.all((counts >= self.low) & (counts <= self.high)))


_FIELDS = ("low", "high", "weight", "target", "above")


def bounds(
    published: FloatArray,
    low: FloatArray,
    high: FloatArray,
    weight: FloatArray,
    above: FloatArray | None = None,
) -> CellBounds:
    withheld = np.isnan(published)
    low = np.where(withheld, 0.0, low)
    high = np.where(withheld, np.inf, high)
    weight = np.where(withheld, 0.0, weight)
    above = weight if above is None else np.where(withheld, 0.0, above)
    target = np.clip(np.nan_to_num(published, nan=0.0), low, high)
    return CellBounds(low, high, weight, target, above)


CellModel = Callable[["Published", Sequence[str], str, FloatArray], CellBounds]
"""A mechanism's model of its published cells: (release, tables side by side, level,
published counts — geounits × cells, NaN where withheld) → their bounds."""


def exact(
    release: Published, names: Sequence[str], level: str, published: FloatArray
) -> CellBounds:
    """Exact tables (of the confidential or of the swapped records): low = high = published."""
    return bounds(published, published, published, np.zeros_like(published))


def post_processed(
    release: Published, names: Sequence[str], level: str, published: FloatArray
) -> CellBounds:
    """Tables that post-processing could have moved anywhere: any count ≥ 0, weight 1."""
    return bounds(
        published,
        np.zeros_like(published),
        np.full_like(published, np.inf),
        np.ones_like(published),
    )


def table_columns(release: Published, names: Sequence[str]) -> list[slice]:
    """The columns of each of the release's tables ``names`` in a side-by-side array."""
    sizes = [release.census.table(n).n_cells for n in names]
    stops = np.cumsum(sizes)
    return [slice(int(stop - size), int(stop)) for size, stop in zip(sizes, stops, strict=True)]
