"""1980-style suppression: the three rules, the release format, the diagnostics, and complementary
suppression checked against feasible intervals solved here, independently of the mechanism."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
import scipy.sparse as sp

from conftest import frame, random_population
from sdclab.censuses.us2010.catalog import CATALOG
from sdclab.censuses.us2010.population import PERSONS, UNITS, Population
from sdclab.core.diagnostics import CellShares, PairShare, SuppressionByLevel
from sdclab.core.errors import InputError
from sdclab.core.optimize import exposure
from sdclab.core.optimize.highs import solve_mip
from sdclab.core.tables.published import PublishedTable
from sdclab.core.tables.relations import PublishedCells
from sdclab.core.tables.tabulate import tabulate
from sdclab.pipeline.api import read_release
from sdclab.protection import suppression, suppression_rules
from sdclab.release import Release, write_release

BG1 = "010010001001"  # state 01, county 001, tract 000100, block group 1: blocks BG1 + "xxx"
BG2 = "010010001002"
PARTITION = ("P8", "P9", "P12", "PCT12", "P29")
"""Tables whose cells partition the persons (their cells add up to P1), listed by hand."""
LEVEL_DIGITS = {"nation": 0, "state": 2, "county": 5, "tract": 11, "block_group": 12, "block": 15}


def people(block: str, n: int, sex: int = 1, age: int = 40, race: int = 1, hispanic: int = 0):
    return [(block, sex, age, race, hispanic)] * n


def build(*groups, vacant: tuple[str, ...] = ()) -> Population:
    """Persons each in a one-person housing unit (householders), plus vacant units."""
    rows = [row for group in groups for row in group]
    persons = [(i, i, b, 0, s, a, r, h) for i, (b, s, a, r, h) in enumerate(rows, 1)]
    units = [(i, b, 0, True, 1) for i, (b, *_) in enumerate(rows, 1)]
    units += [(len(rows) + k + 1, b, 0, False, None) for k, b in enumerate(vacant)]
    return Population(persons=frame(persons, PERSONS), units=frame(units, UNITS))


def protect(population: Population, **settings) -> Release:
    params = suppression.MECHANISM.parse(settings)
    return suppression.protect(population, params, np.random.default_rng(0))


def cells(release, name: str, level: str, geoid: str) -> dict[int, int | None]:
    rows = release.table(name).frame(level).filter(pl.col("geoid") == geoid)
    return dict(zip(rows["cell"].to_list(), rows["count"].to_list(), strict=True))


# ---------------------------------------------------------------------------------------------
# The three rules
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rules_population() -> Population:
    return build(
        people(BG1 + "001", 10),  # 10 persons: every person table suppressed
        people(BG1 + "002", 15),  # 15 persons: kept
        # 20 persons: 15 white men, 3 black women (a cell of 3), 2 Asian women (a cell of 2)
        people(BG1 + "003", 15),
        people(BG1 + "003", 3, sex=2, race=2),
        people(BG1 + "003", 2, sex=2, age=50, race=8),
        # adults: 30 white, 15 black (and 5 black children): every adult group ≥ 15
        people(BG2 + "001", 30),
        people(BG2 + "001", 15, race=2),
        people(BG2 + "001", 5, age=10, race=2),
        # adults: 30 white, 14 black (and 5 black children): the black adults are under 15
        people(BG2 + "002", 30),
        people(BG2 + "002", 14, race=2),
        people(BG2 + "002", 5, age=10, race=2),
    )


@pytest.fixture(scope="module")
def rules_release(rules_population):
    return protect(rules_population)


def test_a_block_under_min_persons_has_every_person_table_suppressed(rules_release):
    for name, table in CATALOG.items():
        if "block" not in table.levels:
            continue
        small = cells(rules_release, name, "block", BG1 + "001")
        kept = cells(rules_release, name, "block", BG1 + "002")
        if suppression_rules.is_person_table(table):
            assert small == dict.fromkeys(range(table.n_cells)), name  # every cell, null
            assert None not in kept.values(), name
        else:
            assert None not in small.values(), name


def test_min_persons_is_a_parameter(rules_population):
    release = protect(rules_population, min_persons=10)
    assert cells(release, "P1", "block", BG1 + "001") == {0: 10}
    assert cells(release, "P1", "block", BG1 + "002") == {0: 15}


def test_cells_of_one_and_two_are_zeroed_and_a_cell_of_three_is_not(rules_release):
    p8 = cells(rules_release, "P8", "block", BG1 + "003")
    labels = CATALOG["P8"].cell_labels
    white, black, asian = (labels.index(x) for x in ("white", "black", "asian"))
    assert p8 == {white: 15, black: 3}  # the 2 Asian persons are published as 0 (omitted)
    assert asian not in p8


def test_adult_tables_are_suppressed_when_one_adult_group_is_under_group_min(rules_release):
    for name in ("P10", "P11"):
        kept = cells(rules_release, name, "block", BG2 + "001")
        gone = cells(rules_release, name, "block", BG2 + "002")
        assert kept and None not in kept.values(), name
        assert gone == dict.fromkeys(range(CATALOG[name].n_cells)), name
    # the all-ages tables of the same block are published: the rule counts adults only
    labels = CATALOG["P8"].cell_labels
    assert cells(rules_release, "P8", "block", BG2 + "002")[labels.index("black")] == 19
    assert None not in cells(rules_release, "P12", "block", BG2 + "002").values()


# ---------------------------------------------------------------------------------------------
# Release format, notes and diagnostics
# ---------------------------------------------------------------------------------------------


def test_a_suppressed_table_publishes_every_cell_null_zeros_included(rules_release):
    gone = rules_release.table("P8").frame("block").filter(pl.col("geoid") == BG1 + "001")
    assert gone.height == CATALOG["P8"].n_cells  # 63 rows, though only one cell is non-zero
    assert gone["count"].null_count() == gone.height
    shown = rules_release.table("P8").frame("block").filter(pl.col("geoid") == BG1 + "002")
    assert shown.height == 1 and shown["count"].null_count() == 0  # zeros omitted


def test_the_release_round_trips_with_its_nulls(rules_release, tmp_path):
    write_release(rules_release, tmp_path / "rel")
    back = read_release(tmp_path / "rel")
    assert back.mechanism == "suppress" and back.notes == rules_release.notes
    for name, table in rules_release.tables.items():
        assert back.tables[name].equals(table), name


def test_unit_tables_only_lose_their_small_cells():
    population = build(
        people(BG1 + "001", 10),
        people(BG1 + "002", 20),
        vacant=(BG1 + "002", BG1 + "002", BG1 + "003"),
    )
    release = protect(population)
    exact = tabulate(population)
    key = ["level", "geoid", "cell"]
    for name in ("H1", "H3", "H4", "H13"):
        true = PublishedTable.from_counts(exact[name]).frame(labels=False)
        assert true.filter(pl.col("count") <= 2).height or name != "H3"  # the rule bites
        expected = true.filter(pl.col("count") > 2).sort(key)
        published = release.table(name).frame(labels=False).sort(key)
        assert published["count"].null_count() == 0, name
        assert published.equals(expected), name


def test_diagnostics_count_zeroed_cells_and_suppressed_tables_by_level():
    # block 001: 10 white men aged 40 (tiny); block 002: 18 such men, 2 women of 40, a vacant unit
    population = build(
        people(BG1 + "001", 10),
        people(BG1 + "002", 18),
        people(BG1 + "002", 2, sex=2),
        vacant=(BG1 + "002",),
    )
    release = protect(population)
    assert "by_level" not in release.notes  # shares of non-empty true cells: evaluation only
    (figures,) = suppression.diagnostics(population, release)
    assert isinstance(figures, SuppressionByLevel)
    notes = figures.levels
    block = notes["block"]
    # non-empty person cells of block 002: one each in P1, P6, P7, P8, P9, P10, P11, P29 and two
    # each (men 40-44: 18, women 40-44: 2) in P12, P12A, P12I = 14, three of them 2; block 001:
    # the same 11 tables with one cell each, all suppressed
    assert block.person_cells == CellShares(
        nonempty=25,
        small=3,
        small_share=3 / 25,
        zeroed=3,
        zeroed_share=3 / 25,
        null=11,
        null_share=11 / 25,
    )
    # H1 10 and 21, H3 occupied 10 and 20 and vacant 1 (zeroed), H4 and H13 10 and 20
    assert block.unit_cells.nonempty == 9
    assert block.unit_cells.zeroed == 1
    # 2 populated blocks × 5 redistricting tables, those of block 001 suppressed; 15 others
    assert block.tables_suppressed_redistricting == PairShare(pairs=10, suppressed=5, share=0.5)
    assert block.tables_suppressed_others == PairShare(pairs=30, suppressed=15, share=0.5)
    group = notes["block_group"]
    assert group.tables_suppressed_redistricting.suppressed == 0
    assert group.person_cells.nonempty == 14 and group.person_cells.zeroed == 3
    assert notes["tract"].person_cells.nonempty == 14 + 6  # PCT12, PCT12A, PCT12I: 2 each
    # the JSON form is the results' (and reads back as it was)
    assert notes["block"].to_dict()["person_cells"]["null_share"] == 11 / 25
    assert SuppressionByLevel.from_dict(figures.to_dict()) == figures


def test_parameters_card_and_entry():
    params = suppression.MECHANISM.parse({"small_cells": "3", "complementary": "true"})
    assert params.small_cells == 3 and params.complementary is True
    assert params.min_persons == 15 and params.group_min == 15
    with pytest.raises(InputError, match=r"unknown parameter 'threshold' \(parameters: tables, "):
        suppression.MECHANISM.parse({"threshold": "3"})
    with pytest.raises(InputError, match="small_cells"):
        suppression.MECHANISM.parse({"small_cells": "-1"})
    card = suppression.MECHANISM.guarantee(params)
    assert card.guarantee.measure == "none"
    assert not card.guarantee.is_formal and "data-dependent" in card.guarantee.reason
    assert any("margins considered" in c for c in card.caveats)
    assert suppression.MECHANISM.name == "suppress"


def test_tables_are_classified_from_their_query_matrices():
    adult = {n for n, t in CATALOG.items() if suppression_rules.is_adult_table(t)}
    partition = {n for n, t in CATALOG.items() if suppression_rules.partitions_persons(t)}
    assert adult == {"P10", "P11"}
    assert partition == {"P1", *PARTITION}
    assert not any(suppression_rules.is_person_table(CATALOG[n]) for n in ("H1", "H3", "H4", "H13"))


# ---------------------------------------------------------------------------------------------
# Complementary suppression, checked with intervals solved here
# ---------------------------------------------------------------------------------------------


def geoid(block: str, level: str) -> str:
    return "US" if level == "nation" else block[: LEVEL_DIGITS[level]]


def feasible_intervals(release, population: Population, min_persons: int = 15):
    """(truth, min, max) of every positive primary cell of the person tables, each by two LPs.

    The model is built here from the published tables alone (small_cells must be 0, so every
    published count is exact): every null cell is a variable ≥ 0 (≤ min_persons−1 at geounits
    small enough to be suppressed, with P1 ≥ 1 there); relations: each cell of a parent equals
    the sum over its children, and the cells of P8, P9, P12, PCT12 and P29 add up to P1.
    """
    blocks = population.persons["block"].to_list()
    exact = tabulate(population)
    names = [n for n, t in CATALOG.items() if suppression_rules.is_person_table(t)]
    index: dict[tuple[str, str, str, int], int] = {}
    for name in names:
        table = CATALOG[name]
        for level in table.levels:
            for g in sorted({geoid(b, level) for b in population.units["block"].to_list()}):
                for c in range(table.n_cells):
                    index[(name, level, g, c)] = len(index)
    n = len(index)
    value = np.zeros(n)
    null = np.zeros(n, dtype=bool)
    for name in names:
        for row in release.table(name).frame().iter_rows(named=True):
            k = index[(name, row["level"], row["geoid"], row["cell"])]
            null[k] = row["count"] is None
            value[k] = 0 if row["count"] is None else row["count"]
    truth = np.zeros(n)
    for name in names:
        for row in PublishedTable.from_counts(exact[name]).frame().iter_rows(named=True):
            truth[index[(name, row["level"], row["geoid"], row["cell"])]] = row["count"]
    persons = {}
    for level in LEVEL_DIGITS:
        for b in blocks:
            persons[(level, geoid(b, level))] = persons.get((level, geoid(b, level)), 0) + 1
    tiny = {key for key, count in persons.items() if 1 <= count < min_persons}
    rows: list[list[tuple[int, float]]] = []
    for name in names:
        levels = CATALOG[name].levels
        for parent, child in zip(levels[:-1], levels[1:], strict=True):
            sums: dict[tuple[str, int], list[tuple[int, float]]] = {}
            for (t, level, g, c), k in index.items():
                if t == name and level == parent:
                    sums.setdefault((g, c), []).append((k, 1.0))
            for (t, level, g, c), k in index.items():
                if t == name and level == child:
                    sums[(geoid(g.ljust(15, "0"), parent), c)].append((k, -1.0))
            rows += sums.values()
    for name in PARTITION:
        for level in CATALOG[name].levels:
            totals: dict[str, list[tuple[int, float]]] = {}
            for (t, lv, g, _), k in index.items():
                if t == name and lv == level:
                    totals.setdefault(g, [(index[("P1", level, g, 0)], 1.0)]).append((k, -1.0))
            rows += totals.values()
    coo = [(r, k, a) for r, entries in enumerate(rows) for k, a in entries]
    r_, k_, a_ = (np.array(x) for x in zip(*coo, strict=True))
    full = sp.csr_matrix((a_, (r_, k_)), shape=(len(rows), n))
    var = np.flatnonzero(null)
    a = full[:, var]
    rhs = -(full[:, ~null] @ value[~null])
    lower = np.zeros(len(var))
    upper = np.full(len(var), 1e6)
    keys = list(index)
    for j, k in enumerate(var):
        name, level, g, _ = keys[k]
        if (level, g) in tiny:
            upper[j] = min_persons - 1
            lower[j] = 1 if name == "P1" else 0
    out = {}
    for j, k in enumerate(var):
        name, level, g, _ = keys[k]
        adult_rule = name in ("P10", "P11") and any(
            0 < truth[index[(name, level, g, c)]] < 15 for c in range(CATALOG[name].n_cells)
        )
        if truth[k] <= 0 or not ((level, g) in tiny or adult_rule):
            continue
        cost = np.zeros(len(var))
        cost[j] = 1.0
        bounds = []
        for sign in (1.0, -1.0):
            status, x, objective = solve_mip(
                a, rhs, rhs, sign * cost, upper, np.zeros(len(var)), col_lower=lower
            )
            assert x is not None, status
            bounds.append(sign * objective)
        out[keys[k]] = (truth[k], bounds[0], bounds[1])
    return out


def lone_small_block() -> Population:
    """Block group 1: one block of 10 persons beside blocks of 40 and 25; block group 2: 30."""
    return build(
        people(BG1 + "001", 6),
        people(BG1 + "001", 4, sex=2, age=30, race=2),
        people(BG1 + "002", 30),
        people(BG1 + "002", 20, sex=2, age=30, race=2),
        people(BG1 + "003", 25),
        people(BG2 + "001", 30),
    )


def two_full_small_blocks() -> Population:
    """Two blocks of 14 (the most a suppressed block can hold) beside a block of 30: together
    they hold 28, so each must hold 14."""
    return build(
        people(BG1 + "001", 14),
        people(BG1 + "002", 14),
        people(BG1 + "003", 30),
        people(BG2 + "001", 30),
    )


def no_partner_available() -> Population:
    """A block of 10 beside one of exactly 15: no sibling can be withheld as a partner (a
    withheld P1 of a published geounit is known to be at least 15), so cells are added one by
    one."""
    return build(people(BG1 + "001", 10), people(BG1 + "002", 15), people(BG2 + "001", 30))


def adult_group_alone() -> Population:
    """Block 001 (33 persons) has 3 black adults, so its P10/P11 are suppressed; block 002 (35)
    has 15, so its are not, and neither are the block group's: the 3 are parent minus sibling."""
    return build(
        people(BG1 + "001", 30),
        people(BG1 + "001", 3, race=2),
        people(BG1 + "002", 20),
        people(BG1 + "002", 15, race=2),
    )


BLACK = CATALOG["P10"].cell_labels.index("black")
CASES = [
    (lone_small_block, ("P1", "block", BG1 + "001", 0)),
    (two_full_small_blocks, ("P1", "block", BG1 + "001", 0)),
    (no_partner_available, ("P1", "block", BG1 + "001", 0)),
    (adult_group_alone, ("P10", "block", BG1 + "001", BLACK)),
]


@pytest.mark.parametrize(("make", "key"), CASES)
def test_without_complements_a_primary_cell_is_recoverable(make, key):
    population = make()
    intervals = feasible_intervals(protect(population, small_cells=0), population)
    true, low, high = intervals[key]
    assert low == high == true  # read off the margins: width 0


@pytest.mark.parametrize(("make", "key"), CASES)
def test_complements_leave_no_positive_primary_cell_recoverable(make, key):
    population = make()
    release = protect(population, small_cells=0, complementary=True)
    intervals = feasible_intervals(release, population)
    assert key in intervals
    narrow = {k: v for k, v in intervals.items() if v[2] - v[1] < 1e-6}
    assert not narrow
    for true, low, high in intervals.values():
        assert low - 1e-6 <= true <= high + 1e-6
    assert release.notes["complementary"] == {"protects": suppression.PROTECTS}
    # what the run found on the true tables (diagnostics, not in the release)
    params = suppression.MECHANISM.parse({"small_cells": 0, "complementary": True})
    tables = tabulate(population)
    _, found = suppression.complementary_suppression(
        tables,
        suppression_rules.primary_plan(tables, params),
        params,
        population.geography,
        np.random.default_rng(suppression.INTERNAL_SEED),
    )
    assert found["partition"]["positive_primary_cells_still_exact"] == 0
    assert found["hierarchy"]["positive_primary_cells_still_exact"] == 0
    # evaluation finds the complementary cells among the release's nulls
    (figures,) = suppression.diagnostics(population, release)
    assert isinstance(figures, SuppressionByLevel)
    assert sum(f.complement_cells or 0 for f in figures.levels.values()) == sum(
        found[system]["complement_cells"] for system in ("partition", "hierarchy")
    )


# ---------------------------------------------------------------------------------------------
# The exactness tests behind complementary suppression, against LPs solved here
# ---------------------------------------------------------------------------------------------


def random_system(names: list[str], totals: bool, seed: int):
    """The relations of some tables of a random population, with random bounds around the truth:
    most cells published (constant), the others free, or pinned from one side at their value."""
    population = random_population(seed, n_units=150)
    tables = tabulate(population, names)
    space = PublishedCells.from_tabulation(tables, population.geography, names)
    matrix = space.relations(partitions="totals" if totals else None).matrix
    truth = space.values.astype(float)
    kind = np.random.default_rng(seed).choice(4, len(truth), p=[0.7, 0.1, 0.1, 0.1])
    lo = np.where((kind == 0) | (kind == 2), truth, 0.0)
    hi = np.where((kind == 0) | (kind == 3), truth, 1e4)
    return matrix, lo, hi, truth


def lp_width(matrix, lo, hi, truth, k: int) -> float:
    var = lo < hi
    a = matrix[:, var]
    rhs = -(matrix[:, ~var] @ truth[~var])
    j = int(np.searchsorted(np.flatnonzero(var), k))
    cost = np.zeros(int(var.sum()))
    cost[j] = 1.0
    ends = []
    for sign in (1.0, -1.0):
        _, x, objective = solve_mip(
            a, rhs, rhs, sign * cost, hi[var], np.zeros(len(cost)), col_lower=lo[var]
        )
        assert x is not None
        ends.append(sign * objective)
    return ends[1] - ends[0]


@pytest.mark.parametrize("seed", [1, 2])
def test_the_network_test_is_exact_on_hierarchies(seed):
    matrix, lo, hi, truth = random_system(["P10", "P12A", "P6"], totals=False, seed=seed)
    fixed = exposure.network_fixed(matrix, lo, hi, truth)
    var = np.flatnonzero(lo < hi)
    sample = np.concatenate(
        [
            np.random.default_rng(0).choice(var[fixed[var]], 25, replace=False),
            np.random.default_rng(0).choice(var[~fixed[var]], 25, replace=False),
        ]
    )
    for k in sample:
        assert (lp_width(matrix, lo, hi, truth, k) < 1e-6) == fixed[k], k
    # the LP route finds the same exact cells: propagation pins only exact ones, the LPs the rest
    low, high = exposure.propagate_bounds(matrix, lo, hi, truth)
    pinned = (high - low < 1e-6) & (lo < hi)
    assert fixed[pinned].all()
    rest = (lo < hi) & ~pinned
    by_lp = exposure.lp_fixed(matrix, lo, hi, truth, rest, np.random.default_rng(0))
    assert np.array_equal(by_lp[rest], fixed[rest])


def test_the_lp_test_is_exact_with_totals():
    matrix, lo, hi, truth = random_system(["P1", "P8", "P12", "P29"], totals=True, seed=3)
    ask = lo < hi
    low, high = exposure.propagate_bounds(matrix, lo, hi, truth)
    pinned = (high - low < 1e-6) & ask
    for k in np.random.default_rng(1).choice(np.flatnonzero(pinned), 15, replace=False):
        assert lp_width(matrix, lo, hi, truth, k) < 1e-6  # propagation never pins a free cell
    rest = ask & ~pinned
    fixed = exposure.lp_fixed(matrix, lo, hi, truth, rest, np.random.default_rng(0))
    for k in np.random.default_rng(2).choice(np.flatnonzero(rest), 30, replace=False):
        assert (lp_width(matrix, lo, hi, truth, k) < 1e-6) == fixed[k], k
