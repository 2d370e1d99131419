"""A census geography: its bottom-level units (blocks) and, for each level above, the geounit
each block belongs to.

Internally geocodes are int64, so aggregating a level is a sparse product; strings appear only at
the edges (files and labels). How a block's code gives its geounit at a level is the census's:
the US census's FIPS geography (:class:`sdclab.censuses.us2010.geography.FipsGeography`) cuts
15-digit geocodes by integer division, a declared hierarchy
(:class:`sdclab.core.census.records.DeclaredGeography`) reads explicit parent arrays.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import numpy.typing as npt
import polars as pl
import scipy.sparse as sp


@dataclass(frozen=True)
class Geography(ABC):
    """The block list of a population and, for each level, which geounit each block belongs to.

    ``blocks`` are the integer codes of the bottom level's units (here called blocks, whatever the
    census calls them) in ascending order; a record's block index is its position in this array.
    Sorted blocks are grouped by every coarser level. ``levels`` name the levels from the top
    down. How a block's code gives its geounit at a level, and how codes are written as geoids,
    is the census's: the US census's
    :class:`~sdclab.censuses.us2010.geography.FipsGeography` (15-digit geocodes cut by integer
    division), :class:`sdclab.core.census.records.DeclaredGeography` for a declared hierarchy.
    """

    blocks: npt.NDArray[np.int64]
    levels: tuple[str, ...]
    _cache: dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]] = field(
        default_factory=dict, repr=False, compare=False
    )
    _containments: dict[tuple[str, str], sp.csr_matrix] = field(
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

    @property
    def all_levels(self) -> tuple[str, ...]:
        """Every level whose geounits it knows: :attr:`levels`, and those of the further
        geographies a census may publish on beside its main one (a grid)."""
        return self.levels

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
        geounits into the ones containing them (built once: every table is summed by it)."""
        if (level, below) not in self._containments:
            parent = self.parents(level, below)
            n = len(parent)
            ones = np.ones(n, dtype=np.int64)
            matrix = sp.csr_matrix((ones, (parent, np.arange(n))), shape=(self.n_units(level), n))
            for array in (matrix.data, matrix.indices, matrix.indptr):
                array.flags.writeable = False  # shared: no caller may change it
            self._containments[(level, below)] = matrix
        return self._containments[(level, below)]

    @cached_property
    def summary(self) -> dict[str, int]:
        """Number of geounits at each level."""
        return {level: self.n_units(level) for level in self.levels}
