"""Attributes with integer codes and the histogram domains they span.

A *schema* is an ordered tuple of attributes with contiguous integer codes. Its *domain* is the
Cartesian product of the codes, flattened in C order (the last attribute varies fastest). A
geounit's data is a histogram over a domain; tables are linear queries on it
(:mod:`sdclab.core.tables.definition`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from sdclab.core.arrays import BoolArray, IntArray


@dataclass(frozen=True)
class Attribute:
    """A categorical attribute with contiguous integer codes ``low .. high``."""

    name: str
    low: int
    high: int
    labels: tuple[str, ...]

    @property
    def size(self) -> int:
        return self.high - self.low + 1

    @property
    def codes(self) -> IntArray:
        return np.arange(self.low, self.high + 1, dtype=np.int64)

    def position(self, values: npt.ArrayLike) -> IntArray:
        """Position of each code in the attribute's code list (codes must be valid)."""
        return np.asarray(values, dtype=np.int64) - self.low


@dataclass(frozen=True)
class Edit:
    """A rule every valid record obeys (an edit, in census processing): ``first`` takes one of
    ``first_codes`` exactly when ``second`` takes one of ``second_codes``. The domain cells that
    break it are empty by rule, and a user of the tables knows it."""

    first: str
    first_codes: tuple[int, ...]
    second: str
    second_codes: tuple[int, ...]

    def holds(self, codes: Mapping[str, IntArray]) -> BoolArray:
        """Whether each record (given by its codes) obeys the rule."""
        first = np.isin(codes[self.first], self.first_codes)
        return np.asarray(first == np.isin(codes[self.second], self.second_codes), dtype=bool)


@dataclass(frozen=True)
class Schema:
    """An ordered product of attributes: the domain of a histogram, with the edits its records
    obey (those whose two attributes the schema holds)."""

    name: str
    attributes: tuple[Attribute, ...]
    edits: tuple[Edit, ...] = ()

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(a.size for a in self.attributes)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attributes)

    def attribute(self, name: str) -> Attribute:
        for a in self.attributes:
            if a.name == name:
                return a
        raise KeyError(f"schema {self.name!r} has no attribute {name!r}")

    def cell_index(
        self,
        columns: Mapping[str, npt.ArrayLike],
        leading: npt.ArrayLike | None = None,
        dtype: type[np.signedinteger] = np.int64,
    ) -> npt.NDArray[np.signedinteger]:
        """Flat domain index of each record, from one code array per attribute; with
        ``leading`` (one index per record, as its geounit), ``leading · size + index``: the
        index in a grid of leading values × domain cells. Summed in place, one array of
        ``dtype`` in all (int32 halves the memory traffic where the grid allows it)."""
        attributes = self.attributes
        if leading is not None:
            index = np.array(leading, dtype=dtype)
        elif attributes:  # the first attribute's codes start the sum
            index = np.array(columns[attributes[0].name], dtype=dtype)
            if attributes[0].low:
                index -= attributes[0].low
            attributes = attributes[1:]
        else:
            index = np.zeros(len(np.asarray(next(iter(columns.values())))), dtype=dtype)
        for a in attributes:
            index *= a.size
            codes = np.asarray(columns[a.name])
            index += codes if codes.dtype.kind in "iu" else codes.astype(np.int64)
            if a.low:
                index -= a.low
        return index

    def possible_cells(self) -> BoolArray:
        """The domain cells a valid record can occupy: those every edit allows."""
        possible = np.ones(self.size, dtype=bool)
        if self.edits:
            codes = self.decode(np.arange(self.size))
            for edit in self.edits:
                possible &= edit.holds(codes)
        return possible

    def restricted(self, name: str, names: tuple[str, ...]) -> Schema:
        """The domain of the attributes ``names`` (in this schema's order), with the edits that
        bear on them alone."""
        attributes = tuple(a for a in self.attributes if a.name in names)
        edits = tuple(e for e in self.edits if {e.first, e.second} <= set(names))
        return Schema(name, attributes, edits)

    def decode(self, index: npt.ArrayLike) -> dict[str, IntArray]:
        """Inverse of :meth:`cell_index`: the code of every attribute for each flat index."""
        pos = np.unravel_index(np.asarray(index, dtype=np.int64), self.shape)
        return {
            a.name: p.astype(np.int64) + a.low for a, p in zip(self.attributes, pos, strict=True)
        }
