"""The cell key risk analyses on declared censuses: the EU 2021 hypercubes and toyland.

Every figure is checked against what the census itself says: the tuples against its hierarchy,
the representations against the tables' query matrices over their joint domain, the exact
release's relations against the truth.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from sdclab.censuses.eu2021 import census
from sdclab.censuses.eu2021.synth import synthesize
from sdclab.cli import app
from sdclab.core.census.declare import load_census
from sdclab.core.census.records import CensusRecords, encode_records, read_records
from sdclab.core.tables.relations import joint_domain, joint_partitions
from sdclab.core.tables.tabulate import tabulate
from sdclab.pipeline import api
from sdclab.protection.cellkey import CellKeyParameters
from sdclab.protection.cellkey_risk import ckm_risk, redundancy, risk_analysis, usable_tuples
from sdclab.protection.cellkey_scope import child_counts, contributor_ids, risk_scope
from sdclab.release import Release

TOYLAND = Path(__file__).parents[1] / "examples" / "toyland"


@pytest.fixture(scope="module")
def records() -> CensusRecords:
    return encode_records(census(), synthesize(3_000, 1), "synthetic")


GROUPS_1_TO_4 = "population,1.1,1.2,1.3,1.4,2.1,3.1,3.2,3.3,4.1,4.3,grid"
"""The hypercubes of groups 1 to 4, the total and the grid: every relation the analyses count
(a cell found again in finer hypercubes, tuples of a region and its LAUs, the grid apart), on
few enough tables that the figures below can be checked by hand."""


@pytest.fixture(scope="module")
def release(records: CensusRecords) -> Release:
    return api.protect(records, "cellkey", seed=1, ptable="ess-d2", tables=GROUPS_1_TO_4)


@pytest.fixture(scope="module")
def figures(release: Release, records: CensusRecords) -> dict:
    return risk_analysis(release, records)


def direct_tuple_count(release: Release, frame: pl.DataFrame, tables) -> dict[int, int]:
    """Per number of children c ≥ 2: (parent, cell) pairs with a positive published parent, in
    each table's consecutive levels, counting each parent's children in the persons' file."""
    out: dict[int, int] = {}
    for name in tables:
        table = release.tables[name]
        levels = table.table.levels
        for parent, child in zip(levels[:-1], levels[1:], strict=True):
            kids = dict(frame.group_by(parent).agg(pl.col(child).n_unique()).iter_rows())
            shown = table.dense(parent) > 0
            for row, geoid in enumerate(release.geography.geoids(parent).to_list()):
                if kids[geoid] >= 2:
                    out[kids[geoid]] = out.get(kids[geoid], 0) + int(shown[row].sum())
    return out


def test_eu_tuples_are_those_of_the_census_hierarchy(release, figures):
    scope = risk_scope(release)
    assert "grid" in scope.left_out and "grid" not in scope.tuple_tables
    assert set(scope.children) == {20}  # one NUTS 3 region of 20 LAUs in this population
    frame = pl.DataFrame(synthesize(3_000, 1))
    expected = direct_tuple_count(release, frame, scope.tuple_tables)
    bound = figures["bound_disclosure"]
    assert bound["tuples_present"] == sum(expected.values()) > 0
    by = {int(c): v["tuples"] for c, v in bound["tuples_by_children"].items()}
    assert by == expected
    assert 1 <= bound["bound_estimated"] <= bound["large_count_bound"] == 2
    # 21-tuples: K^20 key tuples are too many (said, never 0); their (2D+1)^20 noise
    # assignments are counted, not enumerated, so the pinned analysis covers them
    assert bound["p1_exact_keys"].startswith("n/a: ")
    pinned = figures["pinned"]
    assert pinned["tuples"] == sum(expected.values())
    assert 0 <= pinned["pinned"] <= pinned["tuples"] and pinned["inconsistent"] == 0
    assert figures["scope"]["left_out"]["grid"].startswith("published on another geography")


def test_eu_tuples_add_up_on_an_exact_release(records):
    exact = api.protect(records, "none")
    params = CellKeyParameters()
    for c in child_counts(exact.geography, [t.table for t in exact.tables.values()][:-1]):
        tuples = usable_tuples(exact, params, c, risk_scope(exact).tuple_tables)
        assert len(tuples.values) > 0
        s = tuples.values[:, :-1].sum(axis=1) - tuples.values[:, -1]
        assert (s == 0).all()  # the children add up to their parent: true identities


def test_eu_hypercubes_repeat_the_same_cells_and_the_identity_holds(records, release):
    tables = list(risk_scope(release).tables)
    by_name = {t.name: t for t in tables}
    found = joint_partitions(by_name["3.1"], tables)
    # GEO.H × SEX × AGE.M is the sum of finer cells of every hypercube over SEX × AGE.M or AGE.H
    # (at the levels they share with it; 2.1 and 15.1 have AGE.L only)
    finer = {t.name for t in tables if {"SEX", "AGE.M"} <= set(t.title.split(" × "))}
    finer |= {t.name for t in tables if {"SEX", "AGE.H"} <= set(t.title.split(" × "))}
    assert set(found) == finer and {"1.1", "4.1"} <= finer
    exact = tabulate(records, list(by_name))
    whole = np.asarray(exact["3.1"].at("country")[1]).ravel()
    for name, inside in found.items():
        domain = joint_domain(by_name["3.1"], by_name[name])
        if domain is not None:  # an identity of the query matrices over the joint domain
            lhs = by_name["3.1"].query_on(domain)
            rhs = inside.T @ by_name[name].query_on(domain)
            assert (lhs != rhs).nnz == 0
        parts = np.asarray(exact[name].at("country")[1]).ravel() @ inside.toarray()
        assert (parts == whole).all()  # and of the true counts
    assert set(joint_partitions(by_name["3.3"], tables)) == {"3.3", "1.1", "1.4", "2.1"}


def test_eu_representations_counted_with_and_without_spsn(release, figures):
    target = release.tables["3.1"].table
    tables = list(risk_scope(release).tables)
    fresh = redundancy(release, target, "country", spsn=False, tables=tables)
    same = redundancy(release, target, "country", spsn=True, tables=tables)
    # 3.1 at the five levels, 1.1-1.3 at the country, 4.1 and 4.3 down to NUTS 2: 5 + 3 + 6
    assert (fresh.t == 14).all()
    # with SPSN the single-child NUTS chain repeats the country's persons, and so its noise:
    # 3.1 at the country and summed over the LAUs, 1.1-1.3, 4.1, 4.3 once each
    assert (same.t == 7).all()
    assert figures["averaging"]["statistics"] > 0
    assert figures["averaging"]["attack"]["cells"] > 0


def test_contributor_ids_match_equal_sets_across_schemas():
    tables = [t for t in census().tables.values() if t.name in ("population", "3.1", "3.3")]
    ids = contributor_ids(tables)
    assert len(set(ids["3.1"].tolist())) == 42 and len(set(ids["3.3"].tolist())) == 10
    assert not set(ids["3.1"].tolist()) & set(ids["population"].tolist())
    # the total of persons is the sum of no single hypercube cell, but each 3.1 cell is itself
    again = contributor_ids(tables[::-1])
    assert all((again[n] == ids[n]).all() for n in ids)


def test_eu_ckm_risk_from_the_command_line(release, records, tmp_path):
    runner = CliRunner()
    shown = runner.invoke(app, ["ckm-risk", "--help"])
    assert shown.exit_code == 0 and "--truth" in shown.output and "--out" in shown.output
    from sdclab.release import write_release

    write_release(release, tmp_path / "rel")
    done = runner.invoke(app, ["ckm-risk", str(tmp_path / "rel"), "--out", str(tmp_path / "r")])
    assert done.exit_code == 0, done.output
    assert "tuples by parent's children: 55 of 20 children" in done.output
    written = json.loads((tmp_path / "r" / "metrics.json").read_text())
    assert written["bound_disclosure"]["tuples_present"] == 55
    assert written["scope"]["tuple_children"] == [20]


def test_toyland_from_the_command_line(tmp_path):
    runner = CliRunner()
    common = ["--census", str(TOYLAND / "census.toml")]
    made = runner.invoke(
        app,
        ["protect", str(TOYLAND / "persons.csv"), "-m", "cellkey", "--set", "ptable=ess-d2"]
        + ["--seed", "1", "--out", str(tmp_path / "rel"), *common],
    )
    assert made.exit_code == 0, made.output
    args = ["ckm-risk", str(tmp_path / "rel"), "--truth", str(TOYLAND / "persons.csv")]
    done = runner.invoke(app, [*args, "--out", str(tmp_path / "risk")])
    assert done.exit_code == 0, done.output
    figures = json.loads((tmp_path / "risk" / "metrics.json").read_text())
    toyland = load_census(TOYLAND / "census.toml")
    units = pl.read_csv(TOYLAND / "units.csv", infer_schema=False)
    assert toyland.geography.levels == ("region", "district", "village")
    assert figures["scope"]["tuple_children"]  # districts and villages of several children
    assert figures["bound_disclosure"]["tuples_present"] > 0 and len(units) > 0
    assert figures["repeated_queries"][1]["averaged_exact_share"] > 0.9  # no SPSN: converges
    again = ckm_risk(
        api.read_release(tmp_path / "rel"), read_records(toyland, TOYLAND / "persons.csv")
    )
    assert again["bound_disclosure"] == figures["bound_disclosure"]


def test_the_report_renders_a_declared_census_with_its_n_a_figures(figures):
    from sdclab.pipeline.report.cell_key import ckm_section

    html = ckm_section("cellkey", figures)
    assert "the children of parents with 20 children" in html
    assert "n/a: exact keys are enumerated for 3-tuples only" in html
    assert "Redundant representations across the tables population, 1.1" in html
    assert "Not analysed: grid: published on another geography" in html


def test_the_us_census_keeps_the_papers_analysis():
    from sdclab import protection
    from sdclab.censuses.us2010.population.synth import synthesize as synthesize_us

    population = synthesize_us(1_500, seed=3)
    settings = {"ptable": "maxent", "bound": 2, "variance": 1}
    release = protection.run("cellkey", population, settings, 3)
    scope = risk_scope(release)
    assert scope.us and scope.children == (2,) and scope.targets == ("P1", "P8", "P12", "P14")
    figures = ckm_risk(release)
    assert "scope" not in figures and "tuples_by_children" not in figures["bound_disclosure"]


@pytest.mark.parametrize("which", ["eu2021", "us2010"])
def test_cell_fingerprints_from_category_sums_are_those_of_the_query(which):
    """Each cell's fingerprint as the product of its categories' weight sums equals the sum of
    the weights' products over the domain cells its query holds, for every built-in table small
    enough to build its query on its own schema (with and without edits)."""
    from sdclab.censuses.us2010 import census as us_census
    from sdclab.protection.cellkey_scope import _fingerprint

    declared = census() if which == "eu2021" else us_census()
    tables = [t for t in declared.tables.values() if t.schema.size <= 2_000_000]
    assert len(tables) >= 10
    prime = 2_147_483_629
    rng = np.random.default_rng(3)
    sizes = {a.name: a.size for t in tables for a in t.schema.attributes}
    weights = {n: rng.integers(1, prime, size) for n, size in sorted(sizes.items())}
    for table in tables:
        w = np.ones(1, np.int64)
        for a in table.schema.attributes:
            w = (w[:, None] * weights[a.name][None, :]).ravel() % prime
        w = np.where(table.schema.possible_cells(), w, 0)
        want = np.asarray(table.query @ w).ravel() % prime * 7 % prime
        assert np.array_equal(_fingerprint(table, weights, prime, 7), want), table.name


def test_a_hypercube_crossing_the_country_lists_is_fingerprinted_without_its_query():
    """26.3 crosses citizenship and birthplace (about 130 million domain cells): its cells'
    contributor ids come from its categories, and its query is never built."""
    from sdclab.protection.cellkey_risk import canonical_parts

    table = census().table("26.3")
    assert table.schema.size > 100_000_000
    ids = canonical_parts((table,))["26.3"]
    assert len(ids) == table.n_cells and len(set(ids.tolist())) == table.n_cells
    assert "query" not in table.__dict__
