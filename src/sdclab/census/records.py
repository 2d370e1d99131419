"""Microdata of a declared census, and its tables tabulated from the records directly.

The persons' file has one row per person: one column per person attribute (its detailed code, as
text) and, for every geography, the column of its bottom level (and, where the geography lists no
units, one column per level, from which the hierarchy is read). Each table is counted over the
marginal domain of the attributes it crosses: a sparse ``geounits × marginal cells`` histogram
times the table's query, then summed up the hierarchy through the parent arrays. Nothing here
builds the product of every attribute or loops over records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import scipy.sparse as sp

from sdclab.arrays import IntArray
from sdclab.census.model import Census, Hierarchy
from sdclab.errors import InputError
from sdclab.population.io import read_csv
from sdclab.tables.catalog import TableDef


@dataclass(frozen=True)
class Units:
    """The geounits of one geography that the records use, level by level."""

    hierarchy: Hierarchy
    codes: Mapping[str, tuple[str, ...]]
    """Geocodes of each level's units, in the order of their positions."""
    parents: Mapping[str, IntArray]
    """Position in the level above of each unit's parent (every level but the top)."""
    bottom: IntArray
    """Position at the bottom level of each record's unit."""

    def step(self, level: str) -> sp.csr_matrix:
        """0/1 matrix units(level above) × units(level): sums children into their parents."""
        parent = self.parents[level]
        above = self.hierarchy.levels[self.hierarchy.level_index(level) - 1]
        shape = (len(self.codes[above]), len(parent))
        return sp.csr_matrix(
            (np.ones(len(parent), np.int64), (parent, np.arange(len(parent)))), shape
        )


@dataclass(frozen=True)
class CensusRecords:
    """The persons of a declared census, encoded: each attribute as positions in its code list."""

    census: Census
    attributes: Mapping[str, IntArray]
    units: Mapping[str, Units]
    """The units of each geography, by the geography's name."""
    households: IntArray | None = None
    """Household number of each person (0 … households − 1), if the census names a household key."""

    @property
    def n_records(self) -> int:
        return len(next(iter(self.units.values())).bottom)


@dataclass(frozen=True)
class Counts:
    """One table at every level it is published: geocodes and a units × cells matrix."""

    table: TableDef
    levels: Mapping[str, tuple[tuple[str, ...], sp.csr_matrix]]


def read_records(census: Census, file: Path) -> CensusRecords:
    """The persons' file (CSV or Parquet) of ``census``, checked against its declaration."""
    file = Path(file)
    frame = read_csv(file) if file.suffix.lower() == ".csv" else _read_parquet(file)
    return encode_records(census, frame, file.name)


def _read_parquet(file: Path) -> pl.DataFrame:
    try:
        frame = pl.read_parquet(file)
    except Exception as exc:  # polars raises many kinds for a file that is no Parquet
        raise InputError(f"{file.name}: not a readable Parquet file ({exc})") from None
    return frame.select(pl.all().cast(pl.String))


def encode_records(census: Census, frame: pl.DataFrame, name: str) -> CensusRecords:
    """Records as text columns → positions, every value checked; ``name`` names the file."""
    attributes = {
        a.name: _positions(frame, name, a.name, a.position)
        for a in census.attributes.values()
        if a.records == "persons"
    }
    units = {g.name: _units(frame, name, g) for g in census.geographies.values()}
    households = None
    if census.household_key is not None:
        column = _column(frame, name, census.household_key)
        households = np.unique(column.to_numpy(), return_inverse=True)[1].astype(np.int64)
    return CensusRecords(census, attributes, units, households)


def _column(frame: pl.DataFrame, name: str, column: str) -> pl.Series:
    if column not in frame.columns:
        raise InputError(f"{name}: no column {column!r} (the census declares it)")
    series = frame.get_column(column)
    missing = series.is_null() | (series.str.strip_chars() == "")
    if missing.any():
        row = int(missing.arg_true()[0]) + 2
        raise InputError(f"{name}: row {row}, column {column!r}: empty (expected a code)")
    return series.str.strip_chars()


def _positions(
    frame: pl.DataFrame, name: str, column: str, position: Mapping[str, int]
) -> IntArray:
    """Position of each record's code in ``position``; an unknown code names its row."""
    series = _column(frame, name, column)
    mapped = series.replace_strict(
        list(position), list(position.values()), default=-1, return_dtype=pl.Int64
    ).to_numpy()
    if (mapped < 0).any():
        row = int(np.flatnonzero(mapped < 0)[0])
        expected = ", ".join(list(position)[:8]) + (", …" if len(position) > 8 else "")
        raise InputError(
            f"{name}: row {row + 2}, column {column!r}: unknown code {series[row]!r} "
            f"(expected one of {expected})"
        )
    return mapped.astype(np.int64)


def _units(frame: pl.DataFrame, name: str, hierarchy: Hierarchy) -> Units:
    if hierarchy.units:
        return _declared_units(frame, name, hierarchy)
    return _units_from_columns(frame, name, hierarchy)


def _declared_units(frame: pl.DataFrame, name: str, hierarchy: Hierarchy) -> Units:
    """Units as the census lists them; levels above the bottom, if given, must agree."""
    levels = hierarchy.levels
    position = {c: i for i, c in enumerate(hierarchy.units[hierarchy.bottom])}
    bottom = _positions(frame, name, hierarchy.bottom, position)
    chain = bottom
    for depth in range(len(levels) - 1, 0, -1):
        chain = hierarchy.parents[levels[depth]][chain]
        level = levels[depth - 1]
        if level in frame.columns:
            given = _positions(
                frame, name, level, {c: i for i, c in enumerate(hierarchy.units[level])}
            )
            wrong = np.flatnonzero(given != chain)
            if len(wrong):
                row = int(wrong[0])
                raise InputError(
                    f"{name}: row {row + 2}, column {level!r}: {frame[level][row]!r} does not "
                    f"hold {hierarchy.bottom} {frame[hierarchy.bottom][row]!r} "
                    f"(the geography puts it in {hierarchy.units[level][chain[row]]!r})"
                )
    return Units(hierarchy, dict(hierarchy.units), dict(hierarchy.parents), bottom)


def _units_from_columns(frame: pl.DataFrame, name: str, hierarchy: Hierarchy) -> Units:
    """Units read from one column per level: each unit must have one parent."""
    codes: dict[str, tuple[str, ...]] = {}
    parents: dict[str, IntArray] = {}
    above_index: IntArray | None = None
    for depth, level in enumerate(hierarchy.levels):
        series = _column(frame, name, level)
        unique, index = np.unique(series.to_numpy().astype(str), return_inverse=True)
        index = index.astype(np.int64)
        codes[level] = tuple(unique.tolist())
        if depth:
            assert above_index is not None
            parent = np.full(len(unique), -1, dtype=np.int64)
            parent[index] = above_index
            split = np.flatnonzero(parent[index] != above_index)
            if len(split):
                row = int(split[0])
                above = hierarchy.levels[depth - 1]
                raise InputError(
                    f"{name}: row {row + 2}, column {above!r}: {level} {series[row]!r} lies in "
                    f"{above} {frame[above][row]!r} here and in "
                    f"{codes[above][parent[index[row]]]!r} on an earlier row"
                )
            parents[level] = parent
        above_index = index
    assert above_index is not None
    return Units(hierarchy, codes, parents, above_index)


def tabulate_records(
    records: CensusRecords, names: Sequence[str] | None = None
) -> dict[str, Counts]:
    """Every table (or those ``names``) at each of its levels, counted from the records."""
    census = records.census
    out = {}
    for table in (census.table(n) for n in (names or list(census.tables))):
        units = records.units[census.geography_of(table.name).name]
        cells = (
            table.schema.cell_index(
                {a.name: records.attributes[a.name] for a in table.schema.attributes}
            )
            if table.schema.attributes
            else np.zeros(records.n_records, dtype=np.int64)
        )
        shape = (len(units.codes[units.hierarchy.bottom]), table.schema.size)
        histogram = sp.csr_matrix(
            (np.ones(len(cells), dtype=np.int64), (units.bottom, cells)), shape=shape
        )
        current = (histogram @ table.query.T).tocsr()
        levels = units.hierarchy.levels
        by_level = {levels[-1]: (units.codes[levels[-1]], current)}
        for depth in range(len(levels) - 1, levels.index(table.top), -1):
            current = (units.step(levels[depth]) @ current).tocsr()
            by_level[levels[depth - 1]] = (units.codes[levels[depth - 1]], current)
        out[table.name] = Counts(table, {level: by_level[level] for level in table.levels})
    return out
