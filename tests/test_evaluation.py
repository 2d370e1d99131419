"""Evaluation: accuracy of releases against the truth, and the evaluate command."""

from __future__ import annotations

import json
from dataclasses import replace

import polars as pl
import pytest
from typer.testing import CliRunner

from sdclab import protection
from sdclab.cli import app
from sdclab.evaluation import accuracy, diagnostics, evaluation_only, summarise_accuracy
from sdclab.release import exact_release


def test_exact_release_has_no_error(small_population):
    figures = accuracy(exact_release(small_population), small_population)
    for table in figures.values():
        for level, values in table.items():
            if level == "additivity":
                assert set(values.values()) == {0.0}
            else:
                assert values["mae"] == values["rmse"] == values["max_abs_error"] == 0
                assert values["false_positive_cells"] == 0
    assert {v["mean_mae"] for v in summarise_accuracy(figures).values()} == {0.0}


def test_known_perturbations_are_measured(tiny_population):
    release = exact_release(tiny_population, ["P1", "P12"])
    p12 = release.tables["P12"]
    block = p12.filter(pl.col("level") == "block")
    first = block.row(0, named=True)
    # +3 on one published block cell, a new cell of 2 where the truth is 0, one cell suppressed
    changed = pl.concat(
        [
            p12.with_columns(
                count=pl.when(
                    (pl.col("level") == "block")
                    & (pl.col("geoid") == first["geoid"])
                    & (pl.col("cell") == first["cell"])
                )
                .then(pl.col("count") + 3)
                .otherwise(pl.col("count"))
            ),
            pl.DataFrame(
                {"level": ["block"], "geoid": [first["geoid"]], "cell": [45], "count": [2]},
                schema=p12.schema,
            ),
        ]
    )
    changed = changed.with_columns(
        count=pl.when((pl.col("level") == "nation") & (pl.col("cell") == first["cell"]))
        .then(None)
        .otherwise(pl.col("count"))
    )
    figures = accuracy(
        replace(release, tables={**release.tables, "P12": changed}), tiny_population
    )["P12"]
    n_cells = 4 * 46  # four blocks x 46 cells
    assert figures["block"]["mae"] == pytest.approx(5 / n_cells)  # no block cell is suppressed
    assert figures["block"]["max_abs_error"] == 3
    assert figures["block"]["false_positive_cells"] == 1
    assert figures["block"]["share_rel_error_above_100pct"] > 0
    assert figures["nation"]["suppressed_share"] == pytest.approx(1 / 46)
    assert figures["additivity"]["nation"] == 0.0  # the suppressed nation cell is not a violation
    assert figures["additivity"]["block_group"] > 0  # block groups no longer add up
    assert figures["tract"]["mae"] == 0


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
    assert metrics["accuracy_summary"]["state"]["mean_mae"] == 0  # swapping keeps states exact
    assert metrics["accuracy_summary"]["block"]["mean_mae"] > 0
    assert 0 < metrics["microdata_agreement"]["all"]["agree_agebin"] < 1


def test_suppressed_cells_are_neither_exact_nor_violations(tiny_population):
    release = exact_release(tiny_population, ["P12"])
    p12 = release.tables["P12"]
    hidden = p12.with_columns(
        count=pl.when(pl.col("level") == "block").then(None).otherwise(pl.col("count"))
    )
    figures = accuracy(replace(release, tables={"P12": hidden}), tiny_population)["P12"]
    assert figures["block"]["suppressed_share"] == pytest.approx(
        p12.filter(pl.col("level") == "block").height / (4 * 46)
    )
    assert figures["block"]["mae"] == 0  # the zeros that are shown are right
    assert figures["additivity"]["block_group"] is None or figures["additivity"]["block_group"] == 0


def test_diagnostics_are_the_mechanisms_figures_of_the_truth(tiny_population):
    release = protection.run("suppress", tiny_population, {}, None)
    figures = diagnostics(release, tiny_population)
    assert set(figures) == {"by_level"} and "by_level" not in release.notes
    assert figures["by_level"]["block"]["populated_geounits"] == 3  # block B: a vacant unit
    assert evaluation_only({"diagnostics": figures}) == ["diagnostics"]
    assert diagnostics(exact_release(tiny_population), tiny_population) == {}
