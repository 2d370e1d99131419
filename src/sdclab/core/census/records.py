"""Microdata of a declared census, and its tables tabulated from the records directly.

The persons' file has one row per person: one column per person attribute (its detailed code, as
text) and, for every geography, the column of its bottom level (and, where the geography lists no
units, one column per level, from which the hierarchy is read). Each table is counted over the
marginal domain of the attributes it crosses: a sparse ``geounits × marginal cells`` histogram
times the table's query, then summed up the hierarchy through the parent arrays. Nothing here
builds the product of every attribute or loops over records.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

import numpy as np
import numpy.typing as npt
import polars as pl

from sdclab.core.arrays import IntArray
from sdclab.core.census.mapping import census_columns, read_mapping
from sdclab.core.census.model import Census, Hierarchy
from sdclab.core.csv_files import read_csv
from sdclab.core.digest import frames_digest
from sdclab.core.errors import InputError
from sdclab.core.geography import Geography
from sdclab.core.tables.definition import TableDef


@dataclass(frozen=True)
class DeclaredGeography(Geography):
    """A declared hierarchy's units as a :class:`~sdclab.core.geography.Geography`.

    Each level's units are numbered 0 … n − 1 in the order of their parent's number, then of
    their geocode (the top level: by geocode), so sorted bottom units (the "blocks") are grouped
    by every coarser level; a unit's integer code is its number and its geoid its geocode.
    """

    ancestors: Mapping[str, IntArray] = field(default_factory=dict)
    """The number at each level of each bottom unit's ancestor (at the bottom: itself)."""
    names: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """The geocode of each numbered unit, by level."""
    others: Mapping[str, DeclaredGeography] = field(default_factory=dict)
    """The census's further geographies by name (a grid beside the administrative units): the
    main geography answers for their levels too, since a release's tables may lie on any."""

    @property
    def all_levels(self) -> tuple[str, ...]:
        return (*self.levels, *(level for g in self.others.values() for level in g.levels))

    def _owner(self, level: str) -> DeclaredGeography | None:
        """The further geography whose level ``level`` is (None: a main level, or none)."""
        return next((g for g in self.others.values() if level in g.levels), None)

    def units(self, level: str) -> tuple[IntArray, IntArray]:
        owner = self._owner(level)
        return super().units(level) if owner is None else owner.units(level)

    def parents(self, level: str, below: str) -> IntArray:
        owner = self._owner(level)
        return super().parents(level, below) if owner is None else owner.parents(level, below)

    def block_codes_at(self, level: str) -> IntArray:
        return self.ancestors[self.check_level(level)]

    def geoid_strings(self, codes: npt.ArrayLike, level: str) -> pl.Series:
        owner = self._owner(level)
        if owner is not None:
            return owner.geoid_strings(codes, level)
        names = np.asarray(self.names[self.check_level(level)], dtype=object)
        return pl.Series("geoid", names[np.asarray(codes, dtype=np.int64)], dtype=pl.String)

    def parse_geoids(self, geoids: pl.Series, level: str) -> IntArray:
        """Numbers of geocodes at ``level``; -1 for a geocode that is no unit of the level."""
        owner = self._owner(level)
        if owner is not None:
            return owner.parse_geoids(geoids, level)
        names = list(self.names[self.check_level(level)])
        numbers = geoids.cast(pl.String).replace_strict(
            names, list(range(len(names))), default=-1, return_dtype=pl.Int64
        )
        return numbers.to_numpy().astype(np.int64)


def declared_geography(
    hierarchy: Hierarchy, codes: Mapping[str, tuple[str, ...]], parents: Mapping[str, IntArray]
) -> tuple[DeclaredGeography, IntArray]:
    """The geography of units listed per level (``parents``: position of each unit's parent in
    the level above), and the number it gives each bottom unit of the listing."""
    levels = hierarchy.levels
    rank: dict[str, IntArray] = {}
    for depth, level in enumerate(levels):
        text = np.asarray(codes[level], dtype=str)
        parent_rank = rank[levels[depth - 1]][parents[level]] if depth else np.zeros(len(text), int)
        order = np.lexsort((text, parent_rank))
        rank[level] = np.empty(len(text), dtype=np.int64)
        rank[level][order] = np.arange(len(text), dtype=np.int64)
    bottom = levels[-1]
    n = len(codes[bottom])
    ancestors: dict[str, IntArray] = {bottom: np.arange(n, dtype=np.int64)}
    listed = np.empty(n, dtype=np.int64)  # listing position of each numbered bottom unit
    listed[rank[bottom]] = np.arange(n)
    chain = listed
    for depth in range(len(levels) - 1, 0, -1):
        chain = parents[levels[depth]][chain]
        ancestors[levels[depth - 1]] = rank[levels[depth - 1]][chain]
    names = {}
    for level in levels:
        named = np.empty(len(codes[level]), dtype=object)
        named[rank[level]] = np.asarray(codes[level], dtype=object)
        names[level] = tuple(named.tolist())
    geography = DeclaredGeography(
        np.arange(n, dtype=np.int64), levels, ancestors=ancestors, names=names
    )
    return geography, rank[bottom]


@dataclass(frozen=True)
class CensusRecords:
    """The persons of a declared census, encoded: each attribute as positions in its code list,
    each person's bottom unit as a number of each geography; and its households, if it declares
    household attributes (read from the persons' rows, one value per household). It can be
    tabulated like a US :class:`~sdclab.censuses.us2010.population.Population`
    (:func:`sdclab.core.tables.tabulate.tabulate`)."""

    census: Census
    attributes: Mapping[str, IntArray]
    geographies: Mapping[str, DeclaredGeography]
    blocks: Mapping[str, IntArray]
    """The bottom unit of each person in each geography, by the geography's name."""
    households: IntArray | None = None
    """Household number of each person (0 … households − 1), if the census names a household key."""
    sources: tuple[Path, ...] = field(default=(), compare=False)
    """The file the records were read from, if any (kept in memory, never written): what is
    made from them may not be written over it."""

    record_key: IntArray | None = None
    """The cell key method's record key of each person, if drawn or given."""
    household_key_values: IntArray | None = None
    """The cell key method's record key of each household, if drawn or given."""
    household_attributes: Mapping[str, IntArray] = field(default_factory=dict)
    """Each household attribute's position, one per household (households in key order)."""

    @property
    def n_persons(self) -> int:
        return len(next(iter(self.blocks.values())))

    @property
    def n_households(self) -> int:
        return 0 if self.households is None else int(self.households.max(initial=-1)) + 1

    def n_records(self, records: str) -> int:
        return self.n_persons if records == "persons" else self.n_households

    def record_ids(self, records: str) -> IntArray:
        """Record numbers: persons in file order, households by their key's order."""
        return np.arange(self.n_records(records), dtype=np.int64)

    def record_keys(self, records: str) -> IntArray | None:
        return self.record_key if records == "persons" else self.household_key_values

    def with_record_keys(self, persons: IntArray, households: IntArray) -> CensusRecords:
        return replace(self, record_key=persons, household_key_values=households)

    def aimed_at(self, target: str) -> CensusRecords:
        """The records as the census's attack ``target`` sees them: the same persons (and
        digest), the target's geography their main one."""
        return replace(self, census=self.census.aimed_at(target))

    @property
    def geography(self) -> DeclaredGeography:
        """The main geography (the census's first)."""
        return self.geographies[self.census.geography.name]

    def geography_of(self, table: TableDef) -> DeclaredGeography:
        return self.geographies[self.census.geography_of(table.name).name]

    def columns(self, records: str) -> Mapping[str, IntArray]:
        """Every attribute's position of ``records``: one per person (with their household's
        attributes), or one per household."""
        if records == "persons":
            return self._person_columns
        if self.households is None:
            raise ValueError(f"census {self.census.name!r} names no household key")
        return self.household_attributes

    @cached_property
    def _person_columns(self) -> Mapping[str, IntArray]:
        """The persons' attributes and their households' (spread to the members once)."""
        if not self.household_attributes:
            return self.attributes
        assert self.households is not None
        own = {n: v[self.households] for n, v in self.household_attributes.items()}
        return {**self.attributes, **own}

    def block_index(self, records: str, geography: Geography | None = None) -> IntArray:
        """The bottom unit in ``geography`` (default: the main one) of each person, or of each
        household (its members')."""
        self.columns(records)
        chosen = geography if geography is not None else self.geography
        name = next(n for n, g in self.geographies.items() if g is chosen)
        if records == "persons":
            return self.blocks[name]
        assert self.households is not None
        return _first_of_each(self.households, self.blocks[name], self.n_households)

    @property
    def frames(self) -> tuple[pl.DataFrame, ...]:
        """The encoded records: what their digest covers (the households', when the census
        declares household attributes)."""
        columns = {**self.attributes, **{f"geography:{n}": b for n, b in self.blocks.items()}}
        persons = pl.DataFrame(columns)
        if not self.household_attributes:
            return (persons,)
        assert self.households is not None
        return persons.with_columns(household=self.households), pl.DataFrame(
            dict(self.household_attributes)
        )

    @property
    def digest(self) -> str:
        """The keyed digest of :attr:`frames` (:func:`sdclab.core.digest.frames_digest`), under the
        digest key in force."""
        return frames_digest(*self.frames)


def read_records(census: Census, file: Path, mapping: Path | None = None) -> CensusRecords:
    """The persons' file (CSV, separated by ',' or ';', or Parquet) of ``census``, checked against
    its declaration; ``mapping``: a mapping file (:mod:`sdclab.core.census.mapping`) for a file
    that names its columns and writes its codes its own way."""
    file = Path(file)
    layout = None if mapping is None else read_mapping(census, mapping)
    expected = census_columns(census)
    if file.suffix.lower() == ".csv":
        columns = expected if layout is None else layout.file_columns(expected)
        frame = read_csv(file, columns, semicolons=True)
    else:
        frame = _read_parquet(file)
    if layout is not None:
        frame = layout.apply(frame, file.name)
    sources = (file, *(() if mapping is None else (Path(mapping),)))
    try:
        records = encode_records(census, frame, file.name)
    except InputError as error:
        if layout is None:
            raise
        raise layout.in_file_terms(error) from None
    return replace(records, sources=tuple(p.absolute() for p in sources))


def _read_parquet(file: Path) -> pl.DataFrame:
    try:
        frame = pl.read_parquet(file)
    except Exception as exc:  # polars raises many kinds for a file that is no Parquet
        raise InputError(f"{file.name}: not a readable Parquet file ({exc})") from None
    return frame.select(pl.all().cast(pl.String))


def encode_records(census: Census, frame: pl.DataFrame, name: str) -> CensusRecords:
    """Records as text columns → positions, every value checked; ``name`` names the file."""
    if frame.height == 0:
        raise InputError(f"{name}: no person (expected one row per person)")
    attributes = {
        a.name: _positions(frame, name, a.name, a.position)
        for a in census.attributes.values()
        if a.records == "persons"
    }
    geographies, blocks = {}, {}
    for hierarchy in census.geographies.values():
        codes, parents, listed = _units(frame, name, hierarchy)
        geography, number = declared_geography(hierarchy, codes, parents)
        geographies[hierarchy.name] = geography
        blocks[hierarchy.name] = number[listed]
    main = census.geography.name
    geographies[main] = with_others(geographies[main], geographies)
    households = None
    if census.household_key is not None:
        column = _column(frame, name, census.household_key)
        households = np.unique(column.to_numpy(), return_inverse=True)[1].astype(np.int64)
    household_attributes = _household_attributes(census, frame, name, households, blocks)
    return CensusRecords(
        census,
        attributes,
        geographies,
        blocks,
        households,
        household_attributes=household_attributes,
    )


def _household_attributes(
    census: Census,
    frame: pl.DataFrame,
    name: str,
    households: IntArray | None,
    blocks: Mapping[str, IntArray],
) -> dict[str, IntArray]:
    """Each household attribute, one value per household, read from its members' rows: every
    member must give the same value, and live in the same unit of every geography (whether or not
    the census declares household attributes: a household moves whole, in the PSA)."""
    declared = [a for a in census.attributes.values() if a.records == "households"]
    if households is None:
        if declared:  # (a census file refuses this too; a census from a document may not)
            raise InputError(
                f"{name}: census {census.name} declares household attributes "
                f"({', '.join(a.name for a in declared)}) but no household_key to group persons by"
            )
        return {}
    n = int(households.max(initial=-1)) + 1
    key = census.household_key
    assert key is not None  # (households are numbered by it)
    out = {}
    columns = {a.name: _positions(frame, name, a.name, a.position) for a in declared}
    columns |= {f"the {g} unit": b for g, b in blocks.items()}
    for column, values in columns.items():
        first = _first_of_each(households, values, n)
        differs = np.flatnonzero(first[households] != values)
        if differs.size:
            row = int(differs[0])
            what = f"column {column!r}" if column in census.attributes else column
            raise InputError(
                f"{name}: row {row + 2}, {what}: household {frame[key][row]!r} has more than "
                "one value (a household's members share it)"
            )
        if column in census.attributes:
            out[column] = first
    return out


def _first_of_each(groups: IntArray, values: IntArray, n: int) -> IntArray:
    """The value of the first record of each of ``n`` groups (every group has a record)."""
    found, index = np.unique(groups, return_index=True)
    assert len(found) == n, "every group has a record"
    return values[index]


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


Listing = tuple[dict[str, tuple[str, ...]], dict[str, IntArray], IntArray]
"""Units per level, the position of each unit's parent in the level above, and the listing
position of each record's bottom unit."""


def _units(frame: pl.DataFrame, name: str, hierarchy: Hierarchy) -> Listing:
    if hierarchy.units:
        return _declared_units(frame, name, hierarchy)
    return _units_from_columns(frame, name, hierarchy)


def _declared_units(frame: pl.DataFrame, name: str, hierarchy: Hierarchy) -> Listing:
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
    return dict(hierarchy.units), dict(hierarchy.parents), bottom


def _units_from_columns(frame: pl.DataFrame, name: str, hierarchy: Hierarchy) -> Listing:
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
                    f"{codes[above][parent[index[row]]]!r} on another row"
                )
            parents[level] = parent
        above_index = index
    assert above_index is not None
    return codes, parents, above_index


def with_others(
    main: DeclaredGeography, geographies: Mapping[str, DeclaredGeography]
) -> DeclaredGeography:
    """The main geography answering for the levels of the census's other ``geographies`` too
    (those given by name, the main one among them)."""
    others = {n: g for n, g in geographies.items() if g is not main}
    return replace(main, others=others) if others else main


def geography_frame(geography: DeclaredGeography) -> pl.DataFrame:
    """Every bottom unit with its geocode at each level (how a release stores its geography)."""
    return pl.DataFrame(
        {
            level: geography.geoid_strings(geography.block_codes_at(level), level)
            for level in geography.levels
        }
    )


def geography_from_frame(hierarchy: Hierarchy, frame: pl.DataFrame, name: str) -> DeclaredGeography:
    """The geography a :func:`geography_frame` holds (checked like microdata columns)."""
    if frame.columns != list(hierarchy.levels) or any(dtype != pl.String for dtype in frame.dtypes):
        raise InputError(f"{name}: expected one text column per level: {list(hierarchy.levels)}")
    codes, parents, _ = _units_from_columns(frame, name, hierarchy)
    return declared_geography(hierarchy, codes, parents)[0]
