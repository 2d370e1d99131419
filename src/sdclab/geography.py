"""Census geography: 15-digit block geocodes and the levels above them.

A block geocode is state(2) county(3) tract(6) block(4); the block group is the first digit of the
block number. Internally geocodes are int64 (15 digits fit), so the geounit of a block at any level
is an integer division, and strings appear only at the edges (files and labels).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import numpy.typing as npt
import polars as pl
import scipy.sparse as sp

LEVELS = ("nation", "state", "county", "tract", "block_group", "block")
"""Geography levels from the top down."""

GEOID_LENGTH = {"nation": 0, "state": 2, "county": 5, "tract": 11, "block_group": 12, "block": 15}
"""Number of leading geocode digits that identify a geounit at each level."""

NATION_GEOID = "US"
BLOCK_DIGITS = 15


def check_level(level: str) -> str:
    """Return ``level`` if it is a known level, else raise ValueError naming the choices."""
    if level not in GEOID_LENGTH:
        raise ValueError(f"unknown geography level {level!r}; expected one of {', '.join(LEVELS)}")
    return level


def levels_from(top: str, bottom: str) -> tuple[str, ...]:
    """The levels from ``top`` down to ``bottom`` inclusive."""
    i, j = LEVELS.index(check_level(top)), LEVELS.index(check_level(bottom))
    return LEVELS[i : j + 1]


def truncate(block_codes: npt.ArrayLike, level: str) -> npt.NDArray[np.int64]:
    """The integer geocode at ``level`` of each integer block geocode."""
    drop = BLOCK_DIGITS - GEOID_LENGTH[check_level(level)]
    return np.asarray(block_codes, dtype=np.int64) // (10**drop)


def geoid_strings(codes: npt.ArrayLike, level: str) -> pl.Series:
    """Zero-padded geoid strings for integer codes at ``level`` ('US' for the nation)."""
    codes = np.asarray(codes, dtype=np.int64)
    if check_level(level) == "nation":
        return pl.Series("geoid", [NATION_GEOID] * len(codes), dtype=pl.String)
    return pl.Series("geoid", codes).cast(pl.String).str.zfill(GEOID_LENGTH[level])


def parse_geoids(geoids: pl.Series, level: str) -> npt.NDArray[np.int64]:
    """Integer codes of geoid strings at ``level`` (the inverse of :func:`geoid_strings`)."""
    if check_level(level) == "nation":
        return np.zeros(len(geoids), dtype=np.int64)
    return geoids.cast(pl.Int64).to_numpy()


@dataclass(frozen=True)
class Geography(ABC):
    """The block list of a population and, for each level, which geounit each block belongs to.

    ``blocks`` are the integer codes of the bottom level's units (here called blocks, whatever the
    census calls them) in ascending order; a record's block index is its position in this array.
    Sorted blocks are grouped by every coarser level. ``levels`` name the levels from the top
    down. How a block's code gives its geounit at a level, and how codes are written as geoids,
    is the census's: :class:`FipsGeography` for the US (15-digit geocodes cut by integer
    division), :class:`sdclab.census.records.DeclaredGeography` for a declared hierarchy.
    """

    blocks: npt.NDArray[np.int64]
    levels: tuple[str, ...]
    _cache: dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]] = field(
        default_factory=dict, repr=False, compare=False
    )

    @abstractmethod
    def block_codes_at(self, level: str) -> npt.NDArray[np.int64]:
        """The integer code at ``level`` of each block's geounit."""

    @abstractmethod
    def geoid_strings(self, codes: npt.ArrayLike, level: str) -> pl.Series:
        """The geoids (text) of integer geounit codes at ``level``."""

    @abstractmethod
    def parse_geoids(self, geoids: pl.Series, level: str) -> npt.NDArray[np.int64]:
        """Integer codes of geoids at ``level`` (the inverse of :meth:`geoid_strings`)."""

    def check_level(self, level: str) -> str:
        """Return ``level`` if it is one of :attr:`levels`, else raise ValueError naming them."""
        if level not in self.levels:
            raise ValueError(
                f"unknown geography level {level!r}; expected one of {', '.join(self.levels)}"
            )
        return level

    def below(self, level: str) -> str:
        """The level just below ``level``."""
        return self.levels[self.levels.index(self.check_level(level)) + 1]

    @property
    def n_blocks(self) -> int:
        return len(self.blocks)

    def block_index(self, block_codes: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Position of each block code in :attr:`blocks` (codes must be present)."""
        idx = np.searchsorted(self.blocks, np.asarray(block_codes, dtype=np.int64))
        return idx.astype(np.int64)

    def units(self, level: str) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(geounit codes at ``level`` in ascending order, geounit index of every block)."""
        if level not in self._cache:
            codes = self.block_codes_at(level)
            self._cache[level] = np.unique(codes, return_inverse=True)
        return self._cache[level]

    def codes(self, level: str) -> npt.NDArray[np.int64]:
        return self.units(level)[0]

    def geoids(self, level: str) -> pl.Series:
        """The geoids of the geounits at ``level``, in the order of :meth:`codes`."""
        return self.geoid_strings(self.codes(level), level)

    def n_units(self, level: str) -> int:
        return len(self.codes(level))

    def aggregation(self, level: str) -> sp.csr_matrix:
        """0/1 matrix geounits × blocks: left-multiplying block rows sums them into ``level``."""
        codes, parent = self.units(level)
        data = np.ones(self.n_blocks, dtype=np.int64)
        return sp.csr_matrix(
            (data, (parent, np.arange(self.n_blocks))), shape=(len(codes), self.n_blocks)
        )

    def parents(self, level: str, below: str) -> npt.NDArray[np.int64]:
        """Index at ``level`` of the geounit holding each geounit of the lower level ``below``."""
        out = np.empty(self.n_units(below), dtype=np.int64)
        out[self.units(below)[1]] = self.units(level)[1]
        return out

    def containment(self, level: str, below: str) -> sp.csr_matrix:
        """0/1 matrix geounits(level) × geounits(below): left-multiplying sums the lower
        geounits into the ones containing them."""
        parent = self.parents(level, below)
        n = len(parent)
        return sp.csr_matrix(
            (np.ones(n, dtype=np.int64), (parent, np.arange(n))), shape=(self.n_units(level), n)
        )

    @cached_property
    def summary(self) -> dict[str, int]:
        """Number of geounits at each level."""
        return {level: self.n_units(level) for level in self.levels}


@dataclass(frozen=True)
class FipsGeography(Geography):
    """The US census geography: 15-digit FIPS block geocodes and :data:`LEVELS` above them."""

    levels: tuple[str, ...] = LEVELS

    @classmethod
    def from_block_codes(cls, block_codes: npt.ArrayLike) -> FipsGeography:
        return cls(np.unique(np.asarray(block_codes, dtype=np.int64)))

    def block_codes_at(self, level: str) -> npt.NDArray[np.int64]:
        return truncate(self.blocks, level)

    def geoid_strings(self, codes: npt.ArrayLike, level: str) -> pl.Series:
        return geoid_strings(codes, level)

    def parse_geoids(self, geoids: pl.Series, level: str) -> npt.NDArray[np.int64]:
        return parse_geoids(geoids, level)
