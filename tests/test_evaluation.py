"""Evaluation: accuracy of releases against the truth, and the evaluate command."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import scipy.sparse as sp
from typer.testing import CliRunner

import sdclab
from sdclab import protection
from sdclab.cli import app
from sdclab.core.diagnostics import SuppressionByLevel
from sdclab.pipeline.evaluation import accuracy, additivity, summarise_accuracy
from sdclab.pipeline.results import SCHEMA_VERSION, NotMeasured, evaluation_only
from sdclab.release import exact_release


def test_exact_release_has_no_error(small_population):
    release = exact_release(small_population)
    figures = accuracy(release, small_population)
    for table in figures.values():
        for values in table.values():
            assert values.mae == values.rmse == values.max_abs_error == 0
            assert values.false_positive_cells == 0
    for shares in additivity(release).values():
        assert set(shares.values()) == {0.0}
    assert {v.mean_mae for v in summarise_accuracy(figures).values()} == {0.0}


def test_known_perturbations_are_measured(tiny_population):
    release = exact_release(tiny_population, ["P1", "P12"])
    p12 = release.tables["P12"]
    first = p12.matrix("block").tocoo()
    row, cell = int(first.row[0]), int(first.col[0])  # the first published block cell
    assert p12.matrix("block")[row, 45] == 0
    # +3 on one published block cell, a new cell of 2 where the truth is 0, one cell suppressed
    counts = {level: p12.matrix(level).tolil() for level in p12.levels}
    counts["block"][row, cell] += 3
    counts["block"][row, 45] = 2
    nation = sp.csr_matrix(([True], ([0], [cell])), shape=(1, 46))
    changed = p12.with_counts(counts, {"nation": nation})
    perturbed = replace(release, tables={**release.tables, "P12": changed})
    figures = accuracy(perturbed, tiny_population)["P12"]
    adds = additivity(perturbed)["P12"]
    n_cells = 4 * 46  # four blocks x 46 cells
    assert figures["block"].mae == pytest.approx(5 / n_cells)  # no block cell is suppressed
    assert figures["block"].max_abs_error == 3
    assert figures["block"].false_positive_cells == 1
    assert figures["block"].share_rel_error_above["100pct"] > 0
    assert figures["nation"].suppressed_share == pytest.approx(1 / 46)
    assert adds["nation"] == 0.0  # the suppressed nation cell is not a violation
    assert adds["block_group"] > 0  # block groups no longer add up
    assert figures["tract"].mae == 0


def test_evaluate_command(tmp_path):
    runner = CliRunner()
    pop, rel, out = tmp_path / "pop", tmp_path / "rel", tmp_path / "eval"
    assert (
        runner.invoke(app, ["synth", "-n", "2000", "--seed", "3", "--out", str(pop)]).exit_code == 0
    )
    args = ["protect", str(pop), "-m", "swap-high", "--seed", "1", "--out", str(rel)]
    assert runner.invoke(app, args).exit_code == 0
    result = runner.invoke(app, ["evaluate", str(rel), "--truth", str(pop), "--out", str(out)])
    assert result.exit_code == 0, result.output
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["mechanism"] == "swap-high"
    assert metrics["schema_version"] == SCHEMA_VERSION
    # the figures an experiment records for a mechanism, under the same keys
    assert metrics["accuracy_by_level"]["state"]["mean_mae"] == 0  # swapping keeps states exact
    assert metrics["accuracy_by_level"]["block"]["mean_mae"] > 0
    assert 0 < metrics["microdata_agreement"]["all"]["agree_agebin"] < 1


def test_suppressed_cells_are_neither_exact_nor_violations(tiny_population):
    release = exact_release(tiny_population, ["P12"])
    p12 = release.tables["P12"]
    # every published block cell suppressed
    counts = {level: p12.matrix(level) for level in p12.levels}
    hidden = p12.with_counts(counts, {"block": p12.matrix("block") != 0})
    withheld = replace(release, tables={"P12": hidden})
    figures = accuracy(withheld, tiny_population)["P12"]
    assert figures["block"].suppressed_share == pytest.approx(p12.matrix("block").nnz / (4 * 46))
    assert figures["block"].mae_shown == 0  # the zeros that are shown are right
    block = p12.matrix("block")
    assert figures["block"].mae == pytest.approx(block.sum() / (4 * 46))  # the withheld cost
    assert figures["block"].mae_nonempty == pytest.approx(block.sum() / block.nnz)
    block_group = additivity(withheld)["P12"]["block_group"]
    assert isinstance(block_group, NotMeasured) or block_group == 0


def test_diagnostics_are_the_mechanisms_figures_of_the_truth(tiny_population):
    release = protection.run("suppress", tiny_population, {}, None)
    evaluation = sdclab.evaluate(release, tiny_population)
    (figures,) = evaluation.diagnostics
    assert isinstance(figures, SuppressionByLevel) and "by_level" not in release.notes
    assert figures.levels["block"].populated_geounits == 3  # block B: a vacant unit
    assert "diagnostics" in evaluation_only(evaluation.to_dict())
    assert sdclab.evaluate(exact_release(tiny_population), tiny_population).diagnostics == ()
