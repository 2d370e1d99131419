"""1980-style suppression (mechanism ``suppress``): small cells zeroed, whole tables withheld.

The rules of the 1980 alternative the 2010 reconstruction study evaluated
(Abowd et al., "A Simulated Reconstruction and Reidentification Attack on the 2010 U.S.
Census"; docs/suppression.md), applied to the exact tabulation of every
catalogue table at every level:

* **small cells** — a cell whose true count is 1..``small_cells`` is published as 0. For the unit
  tables (H1, H3, H4, H13) this is the only rule;
* **minimum population** — every person table of a geounit with 1..``min_persons``−1 persons is
  suppressed there;
* **adult groups** — a table whose universe is the persons 18 and over (P10, P11; recognised from
  its query matrix) is suppressed where any of its non-empty cells — a race group, or Hispanic ×
  race group, of adults — holds fewer than ``group_min`` persons.

A suppressed (table, geounit) publishes every one of its cells as null, true zeros included (a
null beside omitted zeros would tell which cells are empty); an unsuppressed one publishes its
non-zero cells after the small-cell rule and omits zeros, as every release does.

With ``complementary=true`` further cells are withheld (published as null) so that no primary
suppressed cell with a positive count can be recovered exactly from the published cells through
the relations considered — the geography hierarchy and the P1 totals (:data:`PROTECTS` states the
guarantee, :class:`Knowledge` the user's knowledge, :func:`complementary_suppression` the method,
``docs/suppression.md`` all three).

No formal guarantee: which cells are withheld depends on the data, and the rules protect only
against the inferences they were designed for.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Annotated, Any

import numpy as np
import scipy.sparse as sp
from pydantic import Field, model_validator

from sdclab.censuses.us2010 import schema
from sdclab.censuses.us2010.population import Population
from sdclab.core.accounting import SpecCard
from sdclab.core.arrays import BoolArray, FloatArray, IntArray
from sdclab.core.cell_model import CellBounds, bounds, table_columns
from sdclab.core.census.model import Census
from sdclab.core.diagnostics import (
    CellShares,
    Diagnostics,
    LevelSuppression,
    PairShare,
    SuppressionByLevel,
)
from sdclab.core.errors import InputError
from sdclab.core.figures import NotMeasured, Value
from sdclab.core.geography import Geography
from sdclab.core.optimize.exposure import (
    Engine,
    choose_complements,
    lp_fixed,
    network_fixed,
    propagated_fixed,
)
from sdclab.core.privacy import Invariant, no_guarantee
from sdclab.core.randomness import deterministic_record
from sdclab.core.tables.definition import TableDef
from sdclab.core.tables.published import PublishedTable
from sdclab.core.tables.relations import PublishedCells, coverage, is_partition, possible_cells
from sdclab.core.tables.tabulate import TableCounts, tabulate
from sdclab.protection.base import Mechanism, NoisePublication, Unit, WorkloadParameters
from sdclab.protection.checks import counts_problem, whole
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
        return self


MECHANISM = Mechanism(
    "suppress",
    "1980-style cell and table suppression (no formal guarantee)",
    SuppressionParameters,
    any_census=True,
)


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


@MECHANISM.define("diagnostics")
def diagnostics(population: Population, release: Release) -> tuple[Diagnostics, ...]:
    """Evaluation only: ``by_level``, the :func:`level_figures` of a suppression release (with
    ``complement_cells`` per level under complementary suppression), from the confidential
    population it was made from: the rules' plan from its exact tables, the complementary cells
    as the release's other nulls. Shares of non-empty *true* cells: never published."""
    p = MECHANISM.parse(release.parameters, population.census)
    tables = tabulate(population, list(release.tables))
    plan = primary_plan(tables, p)
    withheld = withheld_cells(release, tables, plan)
    by_level = level_figures(tables, plan, p.small_cells, withheld)
    if p.complementary:
        by_level = {
            level: replace(
                figures,
                complement_cells=int(
                    sum(len(levels.get(level, ())) for levels in withheld.values())
                ),
            )
            for level, figures in by_level.items()
        }
    return (SuppressionByLevel(by_level),)


# ---------------------------------------------------------------------------------------------
# Complementary suppression: the cells, the relations a user knows, and what the rules tell
# ---------------------------------------------------------------------------------------------

PROTECTS = (
    "every withheld cell of a suppressed person table with a positive true count has a feasible "
    "interval of positive width (min and max by LP) given: every published positive cell, "
    "published zeros as 0..small_cells, non-negativity, the bounds the rules reveal, parent = sum "
    "of children for every table and cell, and P1 = sum of the cells of P8, P9, P12, PCT12 and "
    "P29 at every geounit. Not covered: other relations between tables (P12 race iterations, "
    "P14, P6/P7 tallies, P10 vs P12A-F adults), integer reasoning, withheld zeros."
)
"""What complementary suppression guarantees, as the release notes state it."""

# The cells of a relation system are a :class:`~sdclab.core.tables.relations.PublishedCells` of the
# exact tabulation (values: the true counts); the relations a user knows are its geography
# relations (parent = sum of children for every table and cell) and, for the tables that
# partition all persons, its partition relations of the totals (P1 = sum of each such table's
# cells at every geounit). Every cell has at most one +1 and one −1 among the geography rows (it
# is a parent once and a child once): they form a network, which
# :func:`sdclab.core.optimize.exposure.network_fixed` exploits.


@dataclass(frozen=True)
class Knowledge:
    """What a user knows beyond the published numbers, for bounding the cells of a space.

    * a published positive count is exact;
    * a published 0 (or an omitted cell) of a table that is not suppressed is 0..``small_cells``
      (the small-cell rule is public) — exactly 0 in an 18+ table when ``group_min`` exceeds
      ``small_cells`` (a small non-empty cell would have suppressed it), and exactly 0 at a
      geounit whose P1 is published as 0;
    * every withheld cell is ≥ 0; at a geounit suppressed for its size (1..min_persons−1 persons)
      every cell is ≤ min_persons−1 and P1 ≥ 1; a withheld P1 elsewhere is ≥ min_persons;
    * no cell exceeds its geounit's P1 when P1 is published.

    The model may know *more* than a real user (it is then stricter, never looser): published
    zeros at geounits of 0 persons and P1 cells shown as 0 are taken as exact.
    """

    small_cells: int
    min_persons: int
    cap: float
    """Upper bound for cells with no other bound (the number of persons + 1: above every truth,
    so it never makes a cell exact that is not)."""
    tiny: BoolArray
    """Geounits (all levels, numbered as :func:`sdclab.core.tables.relations.geounit_offsets`)
    suppressed for their size."""
    persons: IntArray
    """P1 of every geounit."""
    p1_shown: BoolArray
    """Whether P1 is published (not withheld) at every geounit."""
    zero_exact: BoolArray
    """Per table of the space: whether its published zeros are exact."""
    p1_table: int
    """Position of P1 in the space's tables, or −1."""

    def bounds(self, space: PublishedCells, null: BoolArray) -> tuple[FloatArray, FloatArray]:
        """(lower, upper) of every cell of ``space`` (an exact tabulation: its values are the
        true counts) given which cells are withheld (``null``)."""
        truth = space.values.astype(np.float64)
        lo, hi = truth.copy(), truth.copy()
        is_p1 = space.table == self.p1_table
        persons = self.persons[space.geounit]
        zero = ~null & (space.values <= self.small_cells) & ~is_p1 & (persons > 0)
        zero &= ~self.zero_exact[space.table]
        lo[zero] = 0.0
        hi[zero] = self.small_cells
        lo[null] = 0.0
        hi[null] = self.cap
        tiny = null & self.tiny[space.geounit]
        hi[tiny] = self.min_persons - 1
        lo[tiny & is_p1] = 1.0
        big = null & is_p1 & ~self.tiny[space.geounit]
        lo[big] = np.minimum(self.min_persons, truth[big])
        shown = self.p1_shown
        if self.p1_table >= 0:  # P1 is in the space: shown where its cell is not withheld
            shown = shown.copy()
            shown[space.geounit[is_p1 & null]] = False
        capped = (zero | null) & shown[space.geounit]
        hi[capped] = np.minimum(hi[capped], persons[capped])
        if ((truth < lo) | (truth > hi)).any():
            raise AssertionError("a true count lies outside the bounds a user can derive")
        return lo, hi


# ---------------------------------------------------------------------------------------------
# The loop
# ---------------------------------------------------------------------------------------------


@dataclass
class ClusterResult:
    """Withheld cells of one relation system after complementary suppression."""

    null: BoolArray
    rounds: int
    exposed: int
    """Positive primary cells still exact at the end (0 unless no complement could help)."""
    zeros_exact: int
    """Primary cells with a true count of 0 that a user can still recover as 0."""


def protect_cells(
    space: PublishedCells,
    matrix: sp.csr_matrix,
    primary: BoolArray,
    null: BoolArray,
    eligible: BoolArray,
    knowledge: Knowledge,
    engine: Engine,
    final: Engine,
    max_rounds: int = 1_000,
) -> ClusterResult:
    """Add complements to ``null`` until no positive ``primary`` cell is exact (or none can be
    found). Primary cells with a true count of 0 are withheld but not required to stay inexact:
    recovering one reveals an absence, not a count, and making every such zero inexact would take
    the zero cells of every level up to the nation with it (docs/suppression.md)."""
    null = null | primary
    target = primary & (space.values > 0)
    truth = space.values.astype(np.float64)
    exposed = np.zeros_like(null)
    rounds = 0
    while rounds < max_rounds:
        rounds += 1
        lo, hi = knowledge.bounds(space, null)
        fixed = engine(matrix, lo, hi, truth, target)
        exposed = fixed & target
        if not exposed.any():
            break
        # geounits are numbered from the top level down: a coarser cell wins a tie
        new = choose_complements(
            matrix, fixed & null, exposed, eligible & ~null, space.values, space.geounit
        )
        if not len(new):
            break
        null[new] = True
    lo, hi = knowledge.bounds(space, null)
    zeros = primary & (space.values == 0)
    zeros_exact = int((final(matrix, lo, hi, truth, zeros) & zeros).sum()) if zeros.any() else 0
    return ClusterResult(null, rounds, int(exposed.sum()), zeros_exact)


def partner_geounits(plan: Plan, geography: Geography, min_persons: int) -> dict[str, BoolArray]:
    """Geounits whose person tables are withheld as a whole to cover suppressed siblings.

    Under a published parent, the suppressed children's P1 add up to the parent minus the
    published siblings, and each lies in 1..min_persons−1. If that pins them — one suppressed
    child alone, or all at 1, or all at min_persons−1 — their P1 and, with it, their person tables
    could be read off; the sibling with the fewest persons above min_persons is withheld with
    them (above, so that its P1 — known to be at least min_persons — can give way). This is the
    agencies' practice, and far cheaper than finding the cells one by one.
    """
    partners = {level: np.zeros_like(tiny) for level, tiny in plan.tiny.items()}
    levels = list(plan.tiny)
    for parent, child in zip(levels[:-1], levels[1:], strict=True):
        up = geography.parents(parent, child)
        tiny, persons = plan.tiny[child], plan.persons[child]
        n_parent = geography.n_units(parent)
        count = np.bincount(up[tiny], minlength=n_parent)
        total = np.bincount(up[tiny], weights=persons[tiny], minlength=n_parent)
        pinned = (count == 1) | (total == count) | (total == count * (min_persons - 1))
        pinned &= (count > 0) & ~plan.tiny[parent]
        candidate = np.flatnonzero(pinned[up] & (persons > min_persons))
        if not len(candidate):
            continue
        order = np.lexsort((candidate, persons[candidate], up[candidate]))
        chosen = candidate[order]
        first = np.r_[True, up[chosen][1:] != up[chosen][:-1]]
        partners[child][chosen[first]] = True
    return partners


def _engines(totals: bool, rng: np.random.Generator) -> tuple[Engine, Engine]:
    """The exposure tests of a relation system, (during the loop, for the zeros at the end): LPs
    after interval propagation where P1 totals tie the tables, the exact network test where the
    hierarchy alone does."""
    if totals:
        engine: Engine = lambda m, lo, hi, t, ask: lp_fixed(m, lo, hi, t, ask, rng)  # noqa: E731
        return engine, propagated_fixed
    network: Engine = lambda m, lo, hi, t, ask: network_fixed(m, lo, hi, t)  # noqa: E731
    return network, network


def _system_stats(
    names: Sequence[str],
    space: PublishedCells,
    primary: BoolArray,
    result: ClusterResult,
    totals: bool,
) -> dict[str, Any]:
    """What complementary suppression did in one relation system (diagnostics only)."""
    added = result.null & ~primary
    return {
        "tables": list(names),
        "rounds": result.rounds,
        "primary_cells": int(primary.sum()),
        "complement_cells": int(added.sum()),
        "complement_cells_nonzero": int((added & (space.values > 0)).sum()),
        "positive_primary_cells_still_exact": result.exposed,
        "zero_primary_cells_exact": result.zeros_exact,
        "zero_primary_cells_counted": "those interval propagation pins (a lower bound)"
        if totals
        else "all (exact test)",
    }


def complementary_suppression(
    tables: dict[str, TableCounts],
    plan: Plan,
    p: SuppressionParameters,
    geography: Geography,
    rng: np.random.Generator,
) -> tuple[dict[str, dict[str, IntArray]], dict[str, Any]]:
    """Withhold further person-table cells so that no primary cell is exact (see the module notes
    and docs/suppression.md): partner geounits first, then cell by cell with HiGHS.

    Two relation systems are solved apart, as they share no relation: the tables that partition
    all persons (P1, P8, P9, P12, PCT12, P29), tied together by P1 totals (LPs), and every other
    person table, whose relations are the hierarchy alone (one network per cell, solved exactly
    as a graph). Returns the withheld cells (table → level → ``row * n_cells + cell``) and, apart,
    what the run found on the confidential tables (rounds, cells, primary cells still exact,
    partner geounits): diagnostics for evaluation and tests, never in the release.
    """
    partners = partner_geounits(plan, geography, p.min_persons)
    levels = geography.levels
    everywhere = lambda masks: np.concatenate([masks[level] for level in levels])  # noqa: E731
    tiny_all, partner_all = everywhere(plan.tiny), everywhere(partners)
    persons_all = everywhere(plan.persons)
    person = [n for n, tc in tables.items() if is_person_table(tc.table)]
    total = total_name(tables, p.census)
    partition = [total, *(n for n in person if n != total and partitions_persons(tables[n].table))]
    others = [n for n in person if n not in partition]
    cap = float(next(iter(plan.persons.values())).sum() + 1)
    withheld: dict[str, dict[str, IntArray]] = {}
    stats: dict[str, Any] = {}
    p1_shown = np.ones(len(persons_all), dtype=bool)
    for label, names, totals in (("partition", partition, True), ("hierarchy", others, False)):
        if not names:  # every person table partitions the persons: no hierarchy-only system
            continue
        space = PublishedCells.from_tabulation(tables, geography, names)
        matrix = space.relations(partitions="totals" if totals else None).matrix
        primary = np.concatenate(
            [
                np.repeat(plan.suppressed[name][level], tables[name].table.n_cells)
                for name in names
                for level in tables[name].table.levels
            ]
        )
        knowledge = Knowledge(
            small_cells=p.small_cells,
            min_persons=p.min_persons,
            cap=cap,
            tiny=tiny_all,
            persons=persons_all,
            p1_shown=p1_shown,
            zero_exact=np.array(
                [is_adult_table(tables[n].table) and p.group_min > p.small_cells for n in names]
            ),
            p1_table=names.index(total) if total in names else -1,
        )
        eligible = persons_all[space.geounit] > 0
        engine, final = _engines(totals, rng)
        result = protect_cells(
            space, matrix, primary, partner_all[space.geounit], eligible, knowledge, engine, final
        )
        if totals:
            p1 = space.table == 0
            p1_shown = np.ones(len(persons_all), dtype=bool)
            p1_shown[space.geounit[p1 & result.null]] = False
        added = result.null & ~primary
        for block in space.blocks:
            flat = np.flatnonzero(added[block.start : block.stop])
            if len(flat):
                withheld.setdefault(block.table.name, {})[block.level] = flat.astype(np.int64)
        stats[label] = _system_stats(names, space, primary, result, totals)
    stats["partner_geounits"] = {
        level: int(mask.sum()) for level, mask in partners.items() if mask.any()
    }
    return withheld, stats


# ---------------------------------------------------------------------------------------------
# The mechanism
# ---------------------------------------------------------------------------------------------

INTERNAL_SEED = 19_800_401
"""The LP heuristics' random directions come from this fixed seed: the release depends on the data
and the parameters only."""


@MECHANISM.define("protect")
def protect(population: Population, p: SuppressionParameters, rng: np.random.Generator) -> Release:
    """Every catalogue table at every level under the 1980 rules (and complements, if asked).

    Person tables get all three rules (P29 and P42, whose universe is not the adults, all but the
    adult-group rule); the unit tables H1, H3, H4 and H13 only the small-cell rule. The mechanism
    is deterministic: ``rng`` is not used.
    """
    del rng
    tables = tabulate(population, None if p.tables is None else p.workload_names())
    plan = primary_plan(tables, p)
    withheld: dict[str, dict[str, IntArray]] = {}
    adult = ", ".join(name for name, tc in tables.items() if is_adult_table(tc.table))
    units = ", ".join(name for name, tc in tables.items() if not is_person_table(tc.table))
    notes: dict[str, Any] = {
        "rules": {
            "small_cells": f"true counts 1..{p.small_cells} published as 0 (all tables)",
            "min_persons": f"person tables suppressed (all cells null) for geounits of "
            f"1..{p.min_persons - 1} persons",
            "group_min": f"18+ tables ({adult}) suppressed where a non-empty cell has fewer "
            f"than {p.group_min} persons",
            "unit_tables": f"{units}: small-cell rule only",
        },
        "absent_rows": f"an absent cell was published as 0: its true count is 0..{p.small_cells}",
    }
    if p.complementary:
        withheld, _ = complementary_suppression(
            tables, plan, p, population.geography, np.random.default_rng(INTERNAL_SEED)
        )
        notes["complementary"] = {"protects": PROTECTS}
    return Release(
        mechanism="suppress",
        parameters=p.recorded(),
        card=card(p),
        tables={
            name: publish(tc, p.small_cells, plan.suppressed.get(name), withheld.get(name))
            for name, tc in tables.items()
        },
        randomness=deterministic_record(
            "suppression draws no random numbers: a seed has no effect"
        ),
        input_digest=population.digest,
        geography=population.geography,
        notes=notes,
    )


@MECHANISM.define("guarantee")
def card(p: SuppressionParameters) -> SpecCard:
    """No formal guarantee: the suppression pattern is a function of the confidential data."""
    complementary = (
        "complementary suppression: no withheld cell is exact given the hierarchy and P1 totals"
        if p.complementary
        else "no complementary suppression: withheld cells may be recovered from the margins"
    )
    return SpecCard(
        mechanism="suppress",
        domain="person and unit records of the tabulated population",
        multiverse="none stated: every published cell is the exact count (or 0 for a small cell)",
        guarantee=no_guarantee(
            "deterministic, data-dependent cell and table suppression: which cells are withheld "
            "depends on the confidential counts, and published cells are exact",
            invariants=(Invariant("every published positive cell", "every geounit"),),
        ),
        covers=f"small counts 1..{p.small_cells} and tables of small geounits and adult groups; "
        + complementary,
        caveats=(
            "Data-dependent suppression: the pattern of withheld tables itself reveals that a "
            f"geounit has 1..{p.min_persons - 1} persons or an adult group under {p.group_min}.",
            "Published cells are exact, so the reconstruction attack still uses every table of "
            "every geounit that is not suppressed.",
            "Complementary suppression only protects against exact recovery from the margins "
            "considered (the geography hierarchy and the P1 totals of tables that partition the "
            "persons, under LP relaxation); other relations between tables (P12 iterations, P14, "
            "P6/P7 tallies, integer reasoning) can still narrow or pin a withheld cell.",
        ),
    )


@MECHANISM.define("check")
def check_release(release: Release, p: SuppressionParameters) -> str | None:
    """A shown count is exact: a whole number, 0 (which may hide 1..small_cells) or above
    small_cells, and a shown P1 is 0 or at least min_persons (a smaller geounit's person tables
    are withheld); no cell means more records than its geounit's shown total allows."""

    total = p.census.total_table

    def true_range(name: str, _level: str, counts: FloatArray) -> tuple[FloatArray, FloatArray]:
        ok = whole(counts) & ((counts == 0) | (counts > p.small_cells))
        if total is not None and name == total.name:
            ok &= (counts == 0) | (counts >= p.min_persons)
        high = np.where(counts == 0, p.small_cells, counts)
        return np.where(ok, counts, np.inf), np.where(ok, high, -np.inf)

    rule = (
        f"a shown count is 0 or above small_cells = {p.small_cells}, a shown P1 0 or at least "
        f"min_persons = {p.min_persons}"
    )
    return counts_problem(release, true_range, rule)


@MECHANISM.define("noise")
def published_noise(p: SuppressionParameters) -> NoisePublication:
    return NoisePublication(
        distribution="no noise: shown cells are exact, except true counts of 1.."
        f"{p.small_cells} published as 0; suppressed cells are withheld (null)",
        published=(
            "parameters: the thresholds of the three rules and complementary",
            "tables: which cells are suppressed",
        ),
        parameters={
            "small_cells": p.small_cells,
            "min_persons": p.min_persons,
            "group_min": p.group_min,
        },
    )


@MECHANISM.define("cell_model")
def cell_model(
    release: Release, names: Sequence[str], level: str, published: FloatArray
) -> CellBounds:
    """The attacker's model: a shown positive count is exact, a shown 0 is 0..small_cells
    (exactly 0 in an 18+ table whose group rule is stricter, and where the total is shown as 0
    and the size rule is stricter); a withheld cell is free, but without complementary
    suppression a geounit whose total is withheld has 1..min_persons − 1 persons."""
    p = SuppressionParameters.model_validate(release.parameters)
    low, high = published.copy(), published.copy()
    zero = published == 0
    low[zero], high[zero] = 0.0, float(p.small_cells)
    columns = table_columns(release, names)
    for name, cols in zip(names, columns, strict=True):
        if is_adult_table(release.census.table(name)) and p.group_min > p.small_cells:
            high[:, cols] = np.where(zero[:, cols], 0.0, high[:, cols])
    total_table = release.census.total_table  # the US P1
    total = "" if total_table is None else total_table.name
    p1 = columns[list(names).index(total)].start if total in names else None  # its column
    if p1 is not None and p.min_persons > p.small_cells:  # a P1 of 1..small would be withheld
        empty = published[:, p1] == 0
        high[empty] = np.where(zero[empty], 0.0, high[empty])
    result = bounds(published, low, high, zero.astype(np.float64))
    if p.complementary or total not in release.tables:
        return result  # a withheld P1 may be a complementary suppression, of any size
    # only the size rule withholds P1: such a geounit has 1..min_persons − 1 persons
    small = np.isnan(release.tables[total].dense(level, suppressed=np.nan)[:, 0])
    withheld = np.isnan(published) & small[:, None]
    result.high[withheld] = p.min_persons - 1
    if p1 is not None:
        result.low[small, p1] = 1.0
    result.target[:] = np.clip(result.target, result.low, result.high)
    return result
