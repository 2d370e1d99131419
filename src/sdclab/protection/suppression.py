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

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import scipy.sparse as sp

from sdclab.censuses.us2010.population import Population
from sdclab.core.accounting import SpecCard
from sdclab.core.arrays import BoolArray, FloatArray, IntArray
from sdclab.core.cell_model import CellBounds, bounds, table_columns
from sdclab.core.diagnostics import (
    Diagnostics,
    SuppressionByLevel,
)
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
from sdclab.core.tables.relations import PublishedCells
from sdclab.core.tables.tabulate import TableCounts, tabulate
from sdclab.protection.base import Mechanism, NoisePublication
from sdclab.protection.checks import counts_problem, whole
from sdclab.protection.suppression_rules import (
    Plan,
    SuppressionParameters,
    is_adult_table,
    is_person_table,
    level_figures,
    partitions_persons,
    primary_plan,
    publish,
    total_name,
    withheld_cells,
)
from sdclab.release import Release

MECHANISM = Mechanism(
    "suppress",
    "1980-style cell and table suppression (no formal guarantee)",
    SuppressionParameters,
    any_census=True,
)


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
    p = SuppressionParameters.model_validate(
        release.parameters, context={"census": release.mechanism_census}
    )
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
