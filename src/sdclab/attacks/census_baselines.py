"""Baselines of the reidentification of a declared census: what its published tables alone give.

The counterpart, for any census, of the US guessers of :mod:`sdclab.attacks.linkage` (which read
P8, P9, P12 and P14). Everything comes from the census: the reconstruction's level and attributes,
the quasi-identifiers, the breakdowns the attack resolves them to, and its tables.

A *usable* table counts persons, on the main geography, in a part without a universe, each of its
dimensions a recode (every code in one category) of an attribute the reconstruction solves for;
each such part of a table of several (the 1 km grid's variables) is read as a table of its own. A
one-dimension part that leaves some codes out (the grid's employed persons) is usable when its
table also counts the total: its left-out codes are then one more category, counted as the total
less the part's cells (clipped at 0; 0 where the total or a cell of the part is withheld). At the
reconstruction's level the **records table** is the usable table that crosses the most
quasi-identifiers (ties: the first in census order). The MDG file holds, for each geounit, as many
records of each of its cells as it publishes (rounded, clipped at 0, a suppressed cell 0: as the US
baseline reads P12 and P14). A record takes from the records table every attribute it pins to what
the link needs (a quasi-identifier to one code, or one category of the breakdown the attack
resolves it to; an inferred attribute to any category, its first code standing for it as the
reconstruction's representative does). Every other attribute is *guessed* from a **source table**:
the usable table crossing it (pinning it, for a quasi-identifier) published at the lowest level
from the reconstruction's up, sharing the most attributes with the records table (ties: the first
in census order), its counts taken only over the cells compatible with the record's categories of
the shared attributes (e.g. EU 3.3 SEX × LMS.L given the record's SEX). MDG takes the modal
category of the record's geounit, falling back up the levels the source table is published at on a
tie (or, at the reconstruction's level, fewer than two persons), then to the national counts, as
the US modal guesser falls back from block to block group to nation. PRG draws the category in
proportion to those counts (an empty geounit borrows its parent's). An attribute no usable table
gives is null: such a record is never linked on it (or, for an inferred attribute, never
confirmed).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from sdclab.core.arrays import IntArray
from sdclab.core.census.model import Census
from sdclab.core.census.records import CensusRecords
from sdclab.core.tables.definition import TableDef
from sdclab.release import Release, exact_release

GEOUNIT = "block"
"""The column of a record's geounit (that of :mod:`sdclab.attacks.census_linkage`)."""
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, eq=False)
class Cells:
    """A usable table's cells: for each dimension its attribute and its membership (categories ×
    codes); cells are ordered with the first dimension slowest, as the table's are."""

    table: str
    attributes: tuple[str, ...]
    memberships: tuple[npt.NDArray[np.int8], ...]
    levels: tuple[str, ...]
    start: int = 0
    """The table's column of the part's first cell (0: the table's only part)."""
    total: int | None = None
    """The table's column of its total, when the last category is the codes the part leaves
    out (counted as the total less the part's cells)."""

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(m.shape[0] for m in self.memberships)

    @property
    def size(self) -> int:
        return prod(self.shape)

    def categories(self) -> IntArray:
        """cells × dimensions: each cell's category along each dimension."""
        if not self.shape:
            return np.zeros((1, 0), dtype=np.int64)
        return np.indices(self.shape).reshape(len(self.shape), -1).T.astype(np.int64)

    def membership(self, attribute: str) -> npt.NDArray[np.int8]:
        return self.memberships[self.attributes.index(attribute)]


def usable(table: TableDef, census: Census) -> list[Cells]:
    """The cells of each part of the table a baseline can read (see the module docstring)."""
    if table.records != "persons" or census.geography_of(table.name) is not census.geography:
        return []
    solved = census.reconstruction.attributes
    sizes = [prod(len(d.labels) for d in part.dimensions) for part in table.parts]
    starts = np.cumsum([0, *sizes[:-1]]).tolist()
    total = next(
        (
            s
            for s, p in zip(starts, table.parts, strict=True)
            if not p.dimensions and not p.universe
        ),
        None,
    )
    out = []
    for start, part in zip(starts, table.parts, strict=True):
        dims = part.dimensions
        if part.universe or any(d.attribute not in solved for d in dims):
            continue
        covered = [d.membership.sum(axis=0) for d in dims]
        if all((c == 1).all() for c in covered):
            memberships = tuple(np.asarray(d.membership) for d in dims)
            out.append(
                Cells(
                    table.name, tuple(d.attribute for d in dims), memberships, table.levels, start
                )
            )
        elif len(dims) == 1 and total is not None and (covered[0] <= 1).all():
            rest = (covered[0] == 0).astype(np.int8)[None, :]
            membership = np.vstack([np.asarray(dims[0].membership), rest])
            out.append(
                Cells(table.name, (dims[0].attribute,), (membership,), table.levels, start, total)
            )
    return out


def needed_category(census: Census, attribute: str) -> IntArray:
    """Per code of a quasi-identifier: what the link needs to know of it (its code, or its
    category of the breakdown the attack resolves it to)."""
    resolved = census.reconstruction.resolved.get(attribute)
    if resolved is None:
        return np.arange(census.attribute(attribute).size, dtype=np.int64)
    return np.argmax(census.attribute(attribute).breakdown(resolved).membership, axis=0)


def pins(census: Census, attribute: str, membership: npt.NDArray[np.int8]) -> bool:
    """Whether every category of ``membership`` fixes what the link needs of ``attribute`` (an
    inferred attribute: always, its first code standing for the category)."""
    if attribute not in census.quasi_identifiers:
        return True
    needed = needed_category(census, attribute)
    inside = membership > 0
    low = np.where(inside, needed[None, :], np.iinfo(np.int64).max).min(axis=1)
    high = np.where(inside, needed[None, :], -1).max(axis=1)
    return bool((low == high).all())


@dataclass(frozen=True, eq=False)
class Source:
    """Where a guessed attribute comes from: a usable table and the lowest level it is read at."""

    cells: Cells
    level: str


@dataclass(frozen=True, eq=False)
class Plan:
    """How a census's baseline files are made (see the module docstring)."""

    level: str
    records: Cells
    given: tuple[str, ...]
    """Attributes the records table gives."""
    sources: Mapping[str, Source]
    """Guessed attributes and their source tables."""
    unknown: tuple[str, ...]
    """Attributes no usable table gives (null)."""

    def tables(self) -> tuple[str, ...]:
        return tuple(
            dict.fromkeys([self.records.table, *(s.cells.table for s in self.sources.values())])
        )


def usable_tables(census: Census, published: tuple[str, ...]) -> list[Cells]:
    """The usable tables among ``published``, in census order."""
    return [c for t in census.tables.values() if t.name in published for c in usable(t, census)]


def plan(census: Census, published: tuple[str, ...]) -> Plan | str:
    """The plan of a release publishing tables ``published``, or why it has no baseline."""
    level = census.reconstruction.level
    tables = usable_tables(census, published)
    here = [c for c in tables if level in c.levels]
    if not here:
        return (
            f"the release publishes no usable person table at {level} (a part without a "
            "universe crossing recodes of the reconstruction's attributes)"
        )
    quasi = census.quasi_identifiers
    records = max(here, key=lambda c: sum(a in c.attributes for a in quasi))
    given, sources, unknown = [], {}, []
    for a in census.reconstruction.attributes:
        if a in records.attributes and pins(census, a, records.membership(a)):
            given.append(a)
            continue
        source = find_source(census, tables, records, a)
        if source is None:
            unknown.append(a)
        else:
            sources[a] = source
    return Plan(level, records, tuple(given), sources, tuple(unknown))


def find_source(
    census: Census, tables: list[Cells], records: Cells, attribute: str
) -> Source | None:
    """The source table of a guessed attribute (see the module docstring), or None."""
    levels = census.geography.levels
    for level in reversed(levels[: levels.index(census.reconstruction.level) + 1]):
        options = [
            c
            for c in tables
            if level in c.levels
            and attribute in c.attributes
            and pins(census, attribute, c.membership(attribute))
        ]
        if options:
            shared = lambda c: len(set(c.attributes) & set(records.attributes))  # noqa: E731
            return Source(max(options, key=shared), level)
    return None


def compatible(records: Cells, source: Cells) -> BoolArray:
    """records cells × source cells: whether the two share a category of every attribute both
    cross (a code counted in both)."""
    ok = np.ones((records.size, source.size), dtype=bool)
    mine, theirs = records.categories(), source.categories()
    for i, a in enumerate(records.attributes):
        if a in source.attributes:
            j = source.attributes.index(a)
            overlap = (records.memberships[i].astype(np.int64) @ source.memberships[j].T) > 0
            ok &= overlap[mine[:, i]][:, theirs[:, j]]
    return ok


def whole(counts: npt.NDArray[Any]) -> IntArray:
    """Published counts as counts of persons: rounded, and clipped at 0 (noise)."""
    return np.maximum(np.rint(counts), 0).astype(np.int64)


def published(release: Release, cells: Cells, level: str) -> IntArray:
    """geounits × cells of a usable table (or part) at ``level``, as counts of persons (a
    suppressed cell: 0)."""
    table = release.tables[cells.table]
    if cells.total is None:
        return whole(table.dense(level, suppressed=0)[:, cells.start : cells.start + cells.size])
    counts = table.dense(level, suppressed=np.nan)
    part = counts[:, cells.start : cells.start + cells.size - 1]
    rest = counts[:, cells.total] - part.sum(axis=1)  # NaN where the total or a part is withheld
    return whole(np.nan_to_num(np.column_stack([part, rest]), nan=0.0))


def chain(
    release: Release,
    source: Source,
    attribute: str,
    compat: BoolArray,
    unit: IntArray,
    cell: IntArray,
) -> tuple[list[IntArray], IntArray]:
    """Per record, the source's counts of each category of ``attribute`` compatible with its
    cell, at each level from the source's up (where the table is published), and nationally."""
    cells = source.cells
    axis = cells.attributes.index(attribute)
    onehot = np.eye(cells.shape[axis], dtype=np.int64)[cells.categories()[:, axis]]
    weights = compat[:, :, None] * onehot[None, :, :]  # records cells × source cells × categories
    geography = release.geography
    bottom = release.census.reconstruction.level
    levels = release.census.geography.levels
    up = [lv for lv in reversed(levels[: levels.index(source.level) + 1]) if lv in cells.levels]
    out = []
    national = np.zeros((compat.shape[0], cells.shape[axis]), dtype=np.int64)
    for level in up:
        counts = published(release, cells, level)
        by_cell = np.einsum("us,rsk->urk", counts, weights)
        out.append(by_cell[geography.parents(level, bottom)[unit], cell])
        national = by_cell.sum(axis=0)
    return out, national[cell]


def mode_of(counts: IntArray, min_persons: int) -> IntArray:
    """Index of the unique largest count per row, −1 on a tie or with too few persons."""
    top = counts.max(axis=1)
    ties = (counts == top[:, None]).sum(axis=1) > 1
    return np.where(
        ties | (counts.sum(axis=1) < min_persons) | (top == 0), -1, counts.argmax(axis=1)
    )


def modal(levels: list[IntArray], national: IntArray, at_bottom: bool) -> IntArray:
    """The modal category, falling back up the levels and then to the national mode (the first
    of a national tie)."""
    result = np.full(len(national), -1, dtype=np.int64)
    for depth, counts in enumerate(levels):
        found = mode_of(counts, 2 if depth == 0 and at_bottom else 1)
        result = np.where(result < 0, found, result)
    return np.where(result < 0, national.argmax(axis=1), result)


def proportional(levels: list[IntArray], national: IntArray, rng: np.random.Generator) -> IntArray:
    """A category drawn in proportion to the first non-empty counts up the levels (then the
    national ones; nothing at all: the first category)."""
    counts = national.copy()
    for found in reversed(levels):
        counts = np.where(found.sum(axis=1, keepdims=True) > 0, found, counts)
    counts[counts.sum(axis=1) == 0, 0] = 1
    cumulative = np.cumsum(counts, axis=1)
    draw = rng.random(len(counts)) * cumulative[:, -1]
    return (cumulative <= draw[:, None]).sum(axis=1)


def first_last(membership: npt.NDArray[np.int8]) -> tuple[IntArray, IntArray]:
    """The first and the last code of each category."""
    first = np.argmax(membership, axis=1)
    last = membership.shape[1] - 1 - np.argmax(membership[:, ::-1], axis=1)
    return first, last


def code_columns(
    census: Census, attribute: str, membership: npt.NDArray[np.int8], category: IntArray
) -> dict[str, pl.Series]:
    """A record's text code of ``attribute`` (its category's first code) and, for a
    quasi-identifier the attack resolves to a breakdown, the category's first and last codes
    (``<attribute>_min``, ``_max``: a record pinned to a category only is linked on it)."""
    codes = np.asarray(census.attribute(attribute).codes, dtype=object)
    first, last = first_last(membership)
    out = {attribute: pl.Series(codes[first[category]], dtype=pl.String)}
    if attribute in census.quasi_identifiers and attribute in census.reconstruction.resolved:
        out[f"{attribute}_min"] = out[attribute].alias(f"{attribute}_min")
        out[f"{attribute}_max"] = pl.Series(codes[last[category]], dtype=pl.String)
    return out


def guessed(
    release: Release,
    plan: Plan,
    records: Cells,
    sources: Mapping[str, Source],
    where: tuple[IntArray, IntArray],
    kind: str,
    rng: np.random.Generator,
) -> dict[str, pl.Series]:
    """The guessed attributes of records in geounits and cells ``where`` of ``records``: modal
    (``mdg``) or drawn in proportion (``prg``)."""
    unit, cell = where
    out: dict[str, pl.Series] = {}
    for a, source in sources.items():
        levels, national = chain(release, source, a, compatible(records, source.cells), unit, cell)
        if kind == "mdg":
            category = modal(levels, national, source.level == plan.level)
        elif kind == "prg":
            category = proportional(levels, national, rng)
        else:
            raise ValueError(kind)
        out |= code_columns(release.census, a, source.cells.membership(a), category)
    return out


def nulls(attributes: tuple[str, ...], n: int) -> dict[str, pl.Series]:
    """Attributes no table gives: null for every record."""
    return {a: pl.Series(a, [None] * n, dtype=pl.String) for a in attributes}


def baseline_records(
    release: Release, plan: Plan, kind: str, rng: np.random.Generator
) -> pl.DataFrame:
    """The MDG (``mdg``) or PRG (``prg``) file of a release: in each geounit of the
    reconstruction's level, as many records of each cell of the records table as it publishes,
    each with the attributes that table gives and the others guessed."""
    census = release.census
    counts = published(release, plan.records, plan.level)
    unit, cell = np.nonzero(counts)
    n = counts[unit, cell]
    unit, cell = np.repeat(unit, n), np.repeat(cell, n)
    categories = plan.records.categories()[cell]
    columns = {GEOUNIT: release.geography.geoids(plan.level).gather(unit).alias(GEOUNIT)}
    for a in plan.given:
        axis = plan.records.attributes.index(a)
        columns |= code_columns(census, a, plan.records.membership(a), categories[:, axis])
    columns |= guessed(release, plan, plan.records, plan.sources, (unit, cell), kind, rng)
    columns |= nulls(plan.unknown, len(unit))
    return pl.DataFrame(columns)


NO_CELLS = Cells("", (), (), ())
"""No table's cells: a guess compatible with every source cell (the geounit's own mode)."""


def drawn_resolution(
    census: Census, attribute: str, codes: IntArray
) -> tuple[npt.NDArray[np.int8], IntArray]:
    """The categories a random record states of a quasi-identifier, and the persons' own: those
    the reconstruction resolves it to (a breakdown's, each person in one), else its codes — so
    that the random draw is linked as precisely as the reconstruction's records are."""
    attribute_def = census.attribute(attribute)
    breakdown = census.reconstruction.resolved.get(attribute)
    if breakdown is None:
        return np.eye(attribute_def.size, dtype=np.int8), codes
    membership = attribute_def.breakdown(breakdown).membership
    return membership, membership.argmax(axis=0)[codes]


def random_draw_records(
    truth: CensusRecords, exact: Release, plan: Plan, rng: np.random.Generator
) -> pl.DataFrame:
    """As many records per geounit of the reconstruction's level as it has persons, each
    quasi-identifier drawn from the national distribution of its codes (of its categories, for
    one the reconstruction resolves to a breakdown only), every other attribute
    the geounit's mode in the ``exact`` tables (as the US random draw takes the block's modal
    race-ethnicity)."""
    census = truth.census
    geography = truth.geography
    unit = np.sort(geography.units(plan.level)[1][truth.block_index("persons")])
    columns = {GEOUNIT: geography.geoids(plan.level).gather(unit).alias(GEOUNIT)}
    for a in census.quasi_identifiers:
        membership, values = drawn_resolution(census, a, truth.attributes[a])
        drawn = rng.choice(values, len(unit)) if len(values) else unit
        columns |= code_columns(census, a, membership, drawn)
    inferred = [a for a in census.reconstruction.attributes if a not in census.quasi_identifiers]
    sources = {
        a: plan.sources.get(a, Source(plan.records, plan.level))
        for a in inferred
        if a not in plan.unknown
    }
    where = (unit, np.zeros(len(unit), dtype=np.int64))
    columns |= guessed(exact, plan, NO_CELLS, sources, where, "mdg", rng)
    columns |= nulls(tuple(a for a in inferred if a in plan.unknown), len(unit))
    return pl.DataFrame(columns)


FIXED_BASELINE_SEED = 2021
"""Seed of the fixed baselines' draws (PRG on the exact tables, random draw): their own stream,
so that they are the same for every release of a population."""


def fixed_files(truth: CensusRecords, rng: np.random.Generator) -> dict[str, pl.DataFrame]:
    """The files of the fixed baselines (``mdg_exact``, ``prg_exact``, ``random_draw``): the
    guessers on the exact tables of every usable table, and random quasi-identifiers; none when
    the census has no usable table at the reconstruction's level."""
    census = truth.census
    found = plan(census, tuple(census.tables))
    if isinstance(found, str):
        return {}
    exact = exact_release(truth, list(found.tables()))  # type: ignore[arg-type]
    return {
        "mdg_exact": baseline_records(exact, found, "mdg", rng),
        "prg_exact": baseline_records(exact, found, "prg", rng),
        "random_draw": random_draw_records(truth, exact, found, rng),
    }
