"""Choosing a budget: the same exact error functions as the cards, and exact inverses."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest
from typer.testing import CliRunner

from sdclab import accounting
from sdclab.budget import answer, noise_of
from sdclab.cli import app
from sdclab.errors import InputError
from sdclab.protection import get
from sdclab.protection.safetab_h import margin_of_error, rho_for_margin
from sdclab.protection.topdown_strategy import PRODUCTS

CASES = [
    ("topdown", "detailed", "block", {}),
    ("topdown", "total", "tract", {"product": "pl94"}),
    ("geometric", "P12", "block", {}),
    ("geometric", "P1", "tract", {"neighbours": "bounded"}),
    ("safetab_h", None, "regional", {}),
    ("safetab_h", None, "detailed-local", {"stability": 5}),
]


@pytest.mark.parametrize(("mechanism", "query", "level", "settings"), CASES)
@pytest.mark.parametrize("margin", [0, 1, 2, 3, 7, 40, 250])
def test_the_budget_for_a_margin_is_the_smallest_that_meets_it(
    mechanism, query, level, settings, margin
) -> None:
    noise = noise_of(mechanism, query, level, settings)
    found = answer(noise, "moe", margin)
    assert found["moe_95"] <= margin
    assert noise.error(found["budget"] * (1 - 1e-6))[1] > margin  # any less misses it


@pytest.mark.parametrize(("mechanism", "query", "level", "settings"), CASES)
def test_the_budget_for_an_rmse_gives_that_rmse(mechanism, query, level, settings) -> None:
    noise = noise_of(mechanism, query, level, settings)
    found = answer(noise, "rmse", 2.5)
    assert found["rmse"] == pytest.approx(2.5, rel=1e-9)


def test_topdown_noise_is_the_strategy_s() -> None:
    strategy = PRODUCTS["dhc"].default
    noise = noise_of("topdown", "sex*age", "block", {})
    found = answer(noise, "budget", float(strategy.rho))
    assert found["sigma2"] == pytest.approx(float(strategy.sigma2("sex*age", "block")))
    assert found["moe_95"] == accounting.gaussian_margin_of_error(
        strategy.sigma2("sex*age", "block")
    )
    assert "before post-processing" in found["what"]


def test_geometric_noise_is_the_card_s() -> None:
    entry = get("geometric")
    card = entry.card(entry.parse({"epsilon": "8"}))
    (row,) = [r for r in card.allocation if r["table"] == "P12" and r["level"] == "block"]
    found = answer(noise_of("geometric", "P12", "block", {}), "budget", 8.0)
    assert found["scale"] == pytest.approx(row["scale"])
    assert found["moe_95"] == row["95% MOE"]
    q = math.exp(-1 / found["scale"])  # the discrete Laplace's variance, summed directly
    y = np.arange(-4000, 4001)
    p = q ** np.abs(y) * (1 - q) / (1 + q)
    assert found["rmse"] == pytest.approx(math.sqrt(float((p * y**2).sum())), rel=1e-9)


def test_safetab_h_margins_are_the_card_s() -> None:
    rho = Fraction("0.006915")  # the production regional budget: ±50 on the card
    found = answer(noise_of("safetab_h", None, "regional", {}), "budget", float(rho))
    assert found["moe_95"] == margin_of_error(rho, 9) == 50
    inverse = answer(noise_of("safetab_h", None, "regional", {}), "moe", 50)
    assert inverse["budget"] == pytest.approx(rho_for_margin(50, 9), rel=1e-12)


@pytest.mark.parametrize(
    ("mechanism", "query", "level", "message"),
    [
        ("topdown", "nope", "block", "query 'nope': the dhc product has total"),
        ("topdown", "total", "blok", "level 'blok': expected one of nation"),
        ("geometric", None, "block", "give the table"),
        ("safetab_h", None, "block", "SafeTab-H's levels are regional"),
        ("cellkey", None, "block", "budgets are chosen for topdown, geometric, safetab_h"),
    ],
)
def test_bad_questions_are_refused_in_words(mechanism, query, level, message) -> None:
    with pytest.raises(InputError, match=message):
        noise_of(mechanism, query, level, {})


def test_the_command_answers_both_ways() -> None:
    runner = CliRunner()
    shown = runner.invoke(app, ["budget", "topdown", "--level", "block", "--moe", "4", "--json"])
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.output)
    assert data["moe_95"] <= 4 and data["asked"] == {"moe": 4.0}
    back = runner.invoke(
        app, ["budget", "topdown", "--level", "block", "--budget", str(data["budget"])]
    )
    assert back.exit_code == 0 and "±4" in back.output
    both = runner.invoke(
        app, ["budget", "topdown", "--level", "block", "--moe", "4", "--rmse", "2"]
    )
    assert both.exit_code == 2 and "exactly one of --budget, --moe and --rmse" in both.output


@pytest.mark.parametrize(("mechanism", "query", "level", "settings"), CASES)
@pytest.mark.parametrize("rmse", [1e-3, 0.3, 17.0, 4e3])
def test_the_budget_for_any_rmse_in_range_is_exact(mechanism, query, level, settings, rmse) -> None:
    noise = noise_of(mechanism, query, level, settings)
    found = answer(noise, "rmse", rmse)
    assert found["rmse"] <= rmse * (1 + 1e-12)
    assert noise.error(found["budget"] * (1 - 1e-6))[2] > rmse  # any less misses it


@pytest.mark.parametrize("margin", [10_000, 1_000_000])
def test_geometric_margins_far_out_are_exact(margin) -> None:
    noise = noise_of("geometric", "P12", "block", {})
    found = answer(noise, "moe", margin)
    assert found["moe_95"] <= margin
    assert noise.error(found["budget"] * (1 - 1e-9))[1] > margin


def test_laplace_margin_holds_where_q_is_near_one() -> None:
    scale = 3.3e7  # q = e^(−1/scale) within 1e-7 of 1: the tail formula checked by hand
    margin = accounting.laplace_margin_of_error(scale)
    q_power = math.exp(-(margin + 1) / scale)
    q = math.exp(-1 / scale)
    assert 2 * q_power / (1 + q) <= 0.05 < 2 * math.exp(-margin / scale) / (1 + q)


@pytest.mark.parametrize(
    ("mechanism", "query", "arguments"),
    [
        ("topdown", None, ["--budget", "1e-11"]),
        ("topdown", None, ["--rmse", "1e7"]),
        ("topdown", None, ["--moe", "100000"]),
        ("geometric", "P12", ["--budget", "1e-16"]),
        ("geometric", "P12", ["--rmse", "1e13"]),
        ("geometric", "P12", ["--rmse", "1e-30"]),
    ],
)
def test_budgets_outside_the_sampler_s_range_are_refused_in_words(
    mechanism, query, arguments
) -> None:
    command = ["budget", mechanism, "--level", "block", *arguments]
    shown = CliRunner().invoke(app, command + (["--query", query] if query else []))
    assert shown.exit_code == 2, shown.output
    assert "exact sampler supports" in shown.output and "Traceback" not in shown.output


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("product=foo", "parameter product: expected one of dhc, pl94"),
        ("bogus=1", "unknown parameter 'bogus'"),
    ],
)
def test_bad_settings_are_refused_in_words(setting, message) -> None:
    command = ["budget", "topdown", "--level", "block", "--budget", "1", "--set", setting]
    shown = CliRunner().invoke(app, command)
    assert shown.exit_code == 2 and message in shown.output, shown.output
