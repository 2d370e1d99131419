"""The 1980 suppression rules as functions of the tables: which tables they treat how (read from
the query matrices, not from names), the (table, geounit) pairs they suppress, what a release of
them publishes, and the evaluation-only figures of what they hid (:mod:`.suppression` is the
mechanism)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated

import numpy as np
import scipy.sparse as sp
from pydantic import Field, model_validator

from sdclab.censuses.us2010 import schema
from sdclab.core.arrays import BoolArray, IntArray
from sdclab.core.census.model import Census
from sdclab.core.diagnostics import (
    CellShares,
    LevelSuppression,
    PairShare,
)
from sdclab.core.errors import InputError
from sdclab.core.figures import NotMeasured, Value
from sdclab.core.tables.definition import TableDef
from sdclab.core.tables.published import PublishedTable
from sdclab.core.tables.relations import coverage, is_partition, possible_cells
from sdclab.core.tables.tabulate import TableCounts
from sdclab.protection.base import Unit, WorkloadParameters
from sdclab.release import Release

REDISTRICTING = ("P1", "P8", "P9", "P10", "P11")
"""The redistricting tables of the 2010 study (P1, P8–P11); the diagnostics count them apart."""


class SuppressionParameters(WorkloadParameters):
    """The three 1980 rules' thresholds and whether to add complementary suppression."""

    small_cells: Annotated[int, Unit("count")] = Field(2, ge=0, le=1_000)
    """cells with true counts 1..small_cells are published as 0"""
    min_persons: Annotated[int, Unit("persons")] = Field(15, ge=0, le=1_000_000)
    """every person table is suppressed for a geounit of 1..min_persons-1 persons"""
    group_min: Annotated[int, Unit("persons")] = Field(15, ge=0, le=1_000_000)
    """an 18+ table is suppressed where one of its non-empty cells (an adult race or
    Hispanic x race group) has fewer than group_min persons"""
    complementary: bool = False
    """also withhold cells so that no suppressed cell can be recovered exactly from the
    published cells through the hierarchy and the totals (HiGHS)"""

    @model_validator(mode="after")
    def _the_total_in_the_workload(self) -> SuppressionParameters:
        total = self.census.total_table
        if self.tables is not None and total is not None and total.name not in self.tables:
            raise ValueError(
                f"tables: the workload needs the total table {total.name}: the rules read each "
                "geounit's persons from it, and complementary suppression protects through it"
            )
        elsewhere = [
            t.name
            for t in self.workload()
            if self.census.geography_of(t.name) is not self.census.geography
        ]
        if elsewhere:
            raise ValueError(
                f"tables: table {elsewhere[0]} lies on geography "
                f"{self.census.geography_of(elsewhere[0]).name}; the rules read each geounit's "
                "persons from the total table on the main geography "
                f"({self.census.geography.name}): give the workload of its tables (tables = ...)"
            )
        return self


# ---------------------------------------------------------------------------------------------
# Which tables the rules treat how (read from the query matrices, not from names)
# ---------------------------------------------------------------------------------------------


def is_person_table(table: TableDef) -> bool:
    """Person tables get all three rules; unit tables (housing units) only the small-cell rule."""
    return table.records == "persons"


def is_adult_table(table: TableDef) -> bool:
    """A table whose universe is exactly the persons 18 and over (P10, P11): a table over the
    US census's single years of age (the 1980 rule is the US Census Bureau's)."""
    names = table.schema.names
    if not is_person_table(table) or "age" not in names:
        return False
    if table.schema.attribute("age") != schema.AGE:
        return False
    possible = possible_cells(table.schema)
    adult = table.schema.decode(np.arange(table.schema.size))["age"] >= schema.VOTING_AGE
    covered = coverage(table) > 0
    return bool(np.array_equal(covered[possible], adult[possible]))


def partitions_persons(table: TableDef) -> bool:
    """Whether the table's cells partition all persons: its query rows are disjoint and cover
    every possible cell of its domain, so its cells sum to the geounit's P1 total."""
    return is_person_table(table) and is_partition(table)


# ---------------------------------------------------------------------------------------------
# Primary suppression
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """The primary suppressions: which (table, geounit) pairs are withheld, and why."""

    persons: dict[str, IntArray]
    """Persons (P1) of every geounit, by level."""
    tiny: dict[str, BoolArray]
    """Geounits of 1..min_persons−1 persons, by level: every person table is suppressed there."""
    suppressed: dict[str, dict[str, BoolArray]]
    """Table → level → geounits where the table is suppressed (person tables only)."""


def total_name(tables: Mapping[str, TableCounts] | Mapping[str, TableDef], census: Census) -> str:
    """The name of the census's total table (the US P1), which the rules read the persons of
    every geounit from; an error in words when the census has none or it is not tabulated."""
    total = census.total_table
    if total is None or total.name not in tables:
        raise InputError(
            f"suppress: census {census.name} has no table of the total of persons (a person table "
            "crossing no attribute), from which the rules read each geounit's persons"
        )
    if total.levels != census.geography.levels:
        raise InputError(
            f"suppress: census {census.name}'s total table {total.name} is published at "
            f"{', '.join(total.levels)}; the rules read each geounit's persons from it at every "
            f"level ({', '.join(census.geography.levels)})"
        )
    return total.name


def persons_by_level(tables: dict[str, TableCounts], total: str) -> dict[str, IntArray]:
    """Persons of every geounit at every level, from the total table (the US P1), from the top
    level down."""
    counts = tables[total]
    return {level: counts.at(level)[1][:, 0].astype(np.int64) for level in counts.counts}


def rows_with_small_cells(matrix: sp.csr_matrix, below: int) -> BoolArray:
    """Rows holding a non-zero cell smaller than ``below``."""
    m = matrix.tocsr()
    rows = np.repeat(np.arange(m.shape[0]), np.diff(m.indptr))
    small = (m.data > 0) & (m.data < below)
    out = np.zeros(m.shape[0], dtype=bool)
    out[rows[small]] = True
    return out


def primary_plan(tables: dict[str, TableCounts], p: SuppressionParameters) -> Plan:
    """Apply the minimum-population and adult-group rules to every person table at every level."""
    persons = persons_by_level(tables, total_name(tables, p.census))
    tiny = {level: (n >= 1) & (n < p.min_persons) for level, n in persons.items()}
    suppressed: dict[str, dict[str, BoolArray]] = {}
    for name, tc in tables.items():
        if not is_person_table(tc.table):
            continue
        adult = is_adult_table(tc.table)
        suppressed[name] = {
            level: tiny[level] | (rows_with_small_cells(matrix, p.group_min) if adult else False)
            for level, (_, matrix) in tc.counts.items()
        }
    return Plan(persons, tiny, suppressed)


# ---------------------------------------------------------------------------------------------
# Publication
# ---------------------------------------------------------------------------------------------


def publish(
    tc: TableCounts,
    small_cells: int,
    suppressed: dict[str, BoolArray] | None,
    withheld: dict[str, IntArray] | None,
) -> PublishedTable:
    """One table as published: every cell of the ``suppressed`` geounits and the ``withheld``
    cells (flat ``row * n_cells + cell`` per level) suppressed, small cells 0."""
    n_cells = tc.table.n_cells
    counts: dict[str, tuple[IntArray, sp.csr_matrix]] = {}
    masks: dict[str, sp.csr_matrix] = {}
    for level, (codes, matrix) in tc.counts.items():
        m = matrix.tocsr(copy=True)
        m.data = np.where(m.data > small_cells, m.data, 0)
        hidden_rows = np.zeros(m.shape[0], dtype=bool) if suppressed is None else suppressed[level]
        null_flat = np.flatnonzero(np.repeat(hidden_rows, n_cells))
        if withheld is not None and level in withheld:
            null_flat = np.union1d(null_flat, withheld[level])
        masks[level] = sp.csr_matrix(
            (np.ones(len(null_flat), dtype=bool), (null_flat // n_cells, null_flat % n_cells)),
            shape=m.shape,
        )
        counts[level] = (codes, m)
    return PublishedTable.from_counts(TableCounts(tc.table, counts, tc.geoids), masks)


# ---------------------------------------------------------------------------------------------
# Diagnostics: what the rules did to the true cells (evaluation only, never in the release)
# ---------------------------------------------------------------------------------------------


def _share(part: int, whole: int) -> Value:
    """``part / whole``, or not measured when there is nothing to share."""
    return part / whole if whole else NotMeasured("none at this level")


CELL_GROUPS: dict[str, Callable[[TableDef], bool]] = {
    "person": is_person_table,
    "redistricting": lambda table: table.name in REDISTRICTING,
    "unit": lambda table: not is_person_table(table),
}
"""The groups of tables whose cells the diagnostics count."""


def cell_figures(
    tables: Sequence[TableCounts],
    level: str,
    plan: Plan,
    small_cells: int,
    withheld: dict[str, dict[str, IntArray]],
) -> CellShares:
    """Non-empty cells of ``tables`` at ``level``: caught by the small-cell rule, published as 0
    (small and not withheld) and published as null (withheld), with their shares."""
    nonempty = small = zeroed = null = 0
    for tc in tables:
        m = tc.counts[level][1].tocsr()
        m.eliminate_zeros()
        rows = np.repeat(np.arange(m.shape[0]), np.diff(m.indptr))
        hidden = np.zeros(len(m.data), dtype=bool)
        if tc.table.name in plan.suppressed:
            hidden = plan.suppressed[tc.table.name][level][rows]
        extra = withheld.get(tc.table.name, {}).get(level)
        if extra is not None:
            hidden |= np.isin(rows * tc.table.n_cells + m.indices, extra)
        is_small = m.data <= small_cells
        nonempty += len(m.data)
        small += int(is_small.sum())
        zeroed += int((is_small & ~hidden).sum())
        null += int(hidden.sum())
    return CellShares(
        nonempty=nonempty,
        small=small,
        small_share=_share(small, nonempty),
        zeroed=zeroed,
        zeroed_share=_share(zeroed, nonempty),
        null=null,
        null_share=_share(null, nonempty),
    )


def level_figures(
    tables: dict[str, TableCounts],
    plan: Plan,
    small_cells: int,
    withheld: dict[str, dict[str, IntArray]],
) -> dict[str, LevelSuppression]:
    """By level: :func:`cell_figures` of the person tables, of the redistricting tables among
    them (P1, P8–P11) and of the unit tables; and the (table, geounit) pairs suppressed by the
    rules, redistricting tables apart from the other person tables, counted over the populated
    geounits (an empty geounit publishes zeros and has no one to protect)."""
    by_level: dict[str, LevelSuppression] = {}
    for level in plan.persons:
        populated = plan.persons[level] > 0
        cells = {
            group: cell_figures(
                [tc for tc in tables.values() if level in tc.counts and member(tc.table)],
                level,
                plan,
                small_cells,
                withheld,
            )
            for group, member in CELL_GROUPS.items()
        }
        pairs: dict[bool, PairShare] = {}
        for redistricting in (True, False):
            masks = [
                m[level]
                for name, m in plan.suppressed.items()
                if level in m and (name in REDISTRICTING) == redistricting
            ]
            total = len(masks) * int(populated.sum())
            hit = sum(int((mask & populated).sum()) for mask in masks)
            pairs[redistricting] = PairShare(total, hit, _share(hit, total))
        by_level[level] = LevelSuppression(
            populated_geounits=int(populated.sum()),
            person_cells=cells["person"],
            redistricting_cells=cells["redistricting"],
            unit_cells=cells["unit"],
            tables_suppressed_redistricting=pairs[True],
            tables_suppressed_others=pairs[False],
        )
    return by_level


def withheld_cells(
    release: Release, tables: dict[str, TableCounts], plan: Plan
) -> dict[str, dict[str, IntArray]]:
    """The complementary cells of a suppression release: its null cells outside the (table,
    geounit) pairs the rules suppress, as :func:`complementary_suppression` returns them (table →
    level → ``row * n_cells + cell``)."""
    out: dict[str, dict[str, IntArray]] = {}
    for name, tc in tables.items():
        published = release.table(name)
        for level in tc.counts:
            nulls = published.suppressed(level).tocoo()
            row = nulls.row.astype(np.int64)
            flat = row * tc.table.n_cells + nulls.col
            if name in plan.suppressed:
                flat = flat[~plan.suppressed[name][level][row]]
            if len(flat):
                out.setdefault(name, {})[level] = np.sort(flat).astype(np.int64)
    return out
