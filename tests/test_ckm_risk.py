"""The cell key method's risk analyses on real releases: tuples, pinned truths, IRRs, averaging."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from sdclab import protection
from sdclab.censuses.us2010.catalog import CATALOG
from sdclab.censuses.us2010.population.io import write_population
from sdclab.censuses.us2010.population.synth import synthesize
from sdclab.cli import app
from sdclab.core.tables.relations import partitions
from sdclab.core.tables.tabulate import tabulate
from sdclab.protection.cellkey import CellKeyParameters, assign_record_keys, published_ptable
from sdclab.protection.cellkey_risk import (
    bound_disclosure,
    canonical_parts,
    ckm_risk,
    geographic_tuples,
    pinned_counts,
    redundancy,
    repeated_queries,
    usable_tuples,
)


@pytest.fixture(scope="module")
def population():
    population = synthesize(8_000, seed=21)
    return assign_record_keys(population, 256, np.random.default_rng(5))


def test_partitions_follow_the_query_matrices():
    tables = [CATALOG[n] for n in ("P1", "P6", "P8", "P12", "P14", "PCT12")]
    total = partitions(CATALOG["P1"], tables)
    assert set(total) == {"P1", "P8", "P12", "PCT12"}  # P6 tallies overlap; P14 only under 20
    assert total["P8"].sum() == 63 and total["P12"].sum() == 46
    under_20 = partitions(CATALOG["P14"], tables)
    assert under_20["PCT12"].sum() == 40  # each P14 cell is one PCT12 cell
    canon = canonical_parts(tables)
    labels = CATALOG["PCT12"].cell_labels
    same = [canon["PCT12"][labels.index(label)] for label in CATALOG["P14"].cell_labels]
    assert same == canon["P14"].tolist()  # the same contributor sets: the same noise under SPSN


def test_geographic_tuples_are_children_and_their_parent(population):
    truth = protection.run("none", population, {}, None)
    tuples = geographic_tuples(truth, 2)
    assert len(tuples.values) > 50
    # on exact tables every tuple adds up
    assert (tuples.values[:, 0] + tuples.values[:, 1] == tuples.values[:, 2]).all()


def test_bound_is_never_overestimated_and_pinned_truths_are_right(population):
    release = protection.run(
        "cellkey", population, {"ptable": "maxent", "bound": 1, "variance": "0.5", "spsn": False}, 3
    )
    figures = ckm_risk(release, population)
    a, b = figures["bound_disclosure"], figures["pinned"]
    assert a["bound_estimated"] == 1 and a["bound_disclosed"]
    # D = 1: a tuple is pinned when all three noises are extreme (S = ±3), ≈ 2·0.25³ of tuples
    assert b["pinned"] > 0
    assert b["pinned_correct"] == b["pinned"]
    assert b["inconsistent"] == 0


def test_exact_keys_remove_the_extremes_the_independence_model_expects(population):
    release = protection.run(
        "cellkey", population, {"ptable": "maxent", "bound": 3, "variance": 2}, 3
    )
    a = ckm_risk(release)["bound_disclosure"]
    assert a["p1_independent"] == pytest.approx(5.658e-3, rel=1e-3)
    assert a["p1_exact_keys"] == 0.0
    assert a["bound_estimated"] <= 3


def test_spsn_counts_fewer_representations_than_independent_noise(population):
    release = protection.run(
        "cellkey", population, {"ptable": "maxent", "bound": 3, "variance": 2}, 3
    )
    for level in ("nation", "tract", "block"):
        with_spsn = redundancy(release, CATALOG["P14"], level, spsn=True)
        without = redundancy(release, CATALOG["P14"], level, spsn=False)
        assert (with_spsn.t <= without.t).all()
        assert (with_spsn.t >= 1).all()
    # the nation and its one state hold the same persons: one representation under SPSN
    nation = redundancy(release, CATALOG["P1"], "nation", spsn=True)
    state = redundancy(release, CATALOG["P1"], "state", spsn=True)
    assert nation.t[0, 0] == state.t[0, 0]


def test_averaging_exact_truth_on_exact_tables(population):
    exact = protection.run("none", population, {}, None)
    r = redundancy(exact, CATALOG["P12"], "tract", spsn=True)
    truth = tabulate(population, ["P12"])["P12"].counts["tract"][1].toarray()
    assert np.allclose(np.nan_to_num(r.estimate), truth, rtol=0, atol=1e-9)  # all exact


def test_repeated_queries_recover_the_truth_only_without_spsn(population):
    rng = np.random.default_rng(4)
    with_spsn = CellKeyParameters(ptable="maxent", bound=3, variance=2)
    without = with_spsn.model_copy(update={"spsn": False})
    table = with_spsn.table()
    same = repeated_queries(population, with_spsn, table, 30, rng)
    fresh = repeated_queries(population, without, table, 30, rng)
    assert same["averaged_exact_share"] == same["one_answer_exact_share"] < 0.5
    assert fresh["averaged_exact_share"] > 0.95


def test_cli_ckm_risk(population, tmp_path):
    write_population(population, tmp_path / "pop")
    runner = CliRunner()
    result = runner.invoke(
        app,
        [
            "protect",
            str(tmp_path / "pop"),
            "--mechanism",
            "cellkey",
            "--out",
            str(tmp_path / "rel"),
            "--set",
            "ptable=maxent",
            "--set",
            "bound=2",
            "--set",
            "variance=1.5",
        ],
    )
    assert result.exit_code == 0, result.output
    result = runner.invoke(
        app,
        [
            "ckm-risk",
            str(tmp_path / "rel"),
            "--truth",
            str(tmp_path / "pop"),
            "--out",
            str(tmp_path / "risk"),
        ],
    )
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "risk" / "metrics.json").read_text())
    assert {"bound_disclosure", "pinned", "averaging", "repeated_queries"} <= set(metrics)
    assert "averaging attack" in result.output
    result = runner.invoke(app, ["tabulate", str(tmp_path / "pop"), "--out", str(tmp_path / "ex")])
    assert result.exit_code == 0
    result = runner.invoke(app, ["ckm-risk", str(tmp_path / "ex"), "--out", str(tmp_path / "r2")])
    assert result.exit_code == 2
    assert "risk analysis of its own (cellkey)" in result.output
    assert not (tmp_path / "r2").exists()


ZERO_NOISE = {
    "long": "i,j,p,v,p_int_lb,p_int_ub\n0,0,1,0,0,1\n1,1,1,0,0,1\n",
    "ons": "pcv,ckey,pvalue\n" + "".join(f"{n},{k},0\n" for n in range(1, 751) for k in (0, 1)),
}


@pytest.mark.parametrize("layout", sorted(ZERO_NOISE))
def test_a_ptable_without_noise_is_reported_not_a_crash(population, tmp_path, layout):
    """No noise at large counts: E = 0, and every tuple reveals it (S = 0) and pins its truth
    (the analyses that divided by E; the averaging attack runs the same on any p-table)."""
    (tmp_path / "zero.csv").write_text(ZERO_NOISE[layout])
    settings = {"ptable": str(tmp_path / "zero.csv"), "keys": "drawn"}
    release = protection.run("cellkey", population, settings, 3)
    params = CellKeyParameters.model_validate(release.parameters)
    table = published_ptable(release, params)
    tuples = usable_tuples(release, params)
    a = bound_disclosure(tuples, params, table)
    assert a["large_count_bound"] == a["bound_estimated"] == 0 and a["bound_disclosed"]
    assert a["p1_independent"] == a["p1_exact_keys"] == 1.0
    assert a["tuples_present"] > 0 and a["risk_exact_keys"] == 1.0
    b = pinned_counts(tuples, release, table, population)
    assert b["pinned"] == b["pinned_correct"] == b["tuples"] == a["tuples_present"]
