"""Choosing a budget: the same exact error functions as the cards, and exact inverses."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest
from typer.testing import CliRunner

from sdclab.censuses.us2010 import schema
from sdclab.cli import app
from sdclab.core import accounting
from sdclab.core.errors import InputError
from sdclab.pipeline.budget import answer, cell_key_noise, noise_of
from sdclab.protection import get
from sdclab.protection.ptable import create_ptable, ons_10_5_ptable
from sdclab.protection.safetab_h import margin_of_error, rho_for_margin
from sdclab.protection.topdown import product_tables
from sdclab.protection.topdown_strategy import PRODUCTS

CASES = [
    ("topdown", "detailed", "block", {}),
    ("topdown", "total", "tract", {"product": "pl94"}),
    ("geometric", "P12", "block", {}),
    ("geometric", "P1", "tract", {"neighbours": "bounded"}),
    ("safetab_h", None, "regional", {}),
    ("safetab_h", None, "detailed-local", {"stability": 5}),
    ("topdown", "P8", "block", {}),  # a table's cell: the sum of 2 measured cells
    ("topdown", "p12a", "tract", {}),  # the sum of 16 to 496: the figure is for 496
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
        ("topdown", "nope", "block", "query or table 'nope': not a query of the dhc product"),
        ("topdown", "total", "blok", "level 'blok': expected one of nation"),
        ("geometric", None, "block", "give the table"),
        ("safetab_h", None, "block", "SafeTab-H's levels are regional"),
        ("cellkey", None, "block", "budgets are chosen for topdown, geometric, safetab_h; sdclab"),
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


def _sum_of_gaussians(sigma2: float, terms: int) -> tuple[np.ndarray, np.ndarray]:
    """The pmf of a sum of independent N_Z(0, σ²), convolved directly (no FFT)."""
    reach = int(40 * math.sqrt(sigma2)) + 40
    y = np.arange(-reach, reach + 1)
    p = np.exp(-(y**2) / (2 * sigma2))
    p /= p.sum()
    out = np.ones(1)
    for _ in range(terms):
        out = np.convolve(out, p)
    half = len(out) // 2
    return np.arange(-half, half + 1), out


def test_a_table_s_cell_is_answered_from_the_measurements_it_sums() -> None:
    strategy = PRODUCTS["dhc"].default
    rho = float(strategy.rho)
    p12 = answer(noise_of("topdown", "P12", "block", {}), "budget", rho)
    assert p12["table"] == "P12" and p12["query"] == "sex*agecat"  # one measured cell each
    assert p12["measured_cells_summed"] == 1
    assert p12["sigma2"] == pytest.approx(float(strategy.sigma2("sex*agecat", "block")))
    oldest = schema.AGE_MAX - 85 + 1  # P12's last group, 85 and over, in single years
    sizes = {a["query"]: a["cells_summed"] for a in p12["answered_from"]}
    assert sizes == {
        "sex*agecat": [1, 1],
        "sex*age": [1, oldest],
        "detailed": [8 * 2 * 63, 8 * 2 * 63 * oldest],  # hhgq × hispanic × race × ages
    }
    assert "before post-processing" in p12["what"]
    # P8's cell (a race) is the sum of the Hispanic and not Hispanic cells of hispanic*cenrace
    p8 = answer(noise_of("topdown", "P8", "block", {}), "budget", rho)
    assert (p8["query"], p8["measured_cells_summed"]) == ("hispanic*cenrace", 2)
    sigma2 = float(strategy.sigma2("hispanic*cenrace", "block"))
    y, p = _sum_of_gaussians(sigma2, 2)
    assert p8["moe_95"] == accounting.margin_of_error(y, p)
    assert p8["rmse"] == pytest.approx(math.sqrt(float((p * y**2).sum())), rel=1e-9)


@pytest.mark.parametrize("table", ["P12", "P9", "P12A", "P14"])
def test_each_answering_query_sums_to_the_table_s_cells(table) -> None:
    product = PRODUCTS["dhc"]
    cells = product_tables(product)[0][table]
    noise = noise_of("topdown", table, "block", {})
    for answering in noise.answering:
        query = product.query_matrix(answering.query)
        parts = ((cells @ query.T) > 0).astype(np.int64)  # the query cells each cell overlaps
        assert (parts @ query - cells).count_nonzero() == 0  # ... add up to it exactly
        summed = np.asarray(parts.sum(axis=1)).ravel()
        assert (answering.fewest, answering.most) == (summed.min(), summed.max())


def test_geometric_and_topdown_tables_are_named_in_either_case() -> None:
    lower = answer(noise_of("geometric", "pct12", "tract", {}), "moe", 10)
    assert lower == answer(noise_of("geometric", "PCT12", "tract", {}), "moe", 10)
    assert lower["query"] == "PCT12"
    assert noise_of("topdown", "p12", "block", {}) == noise_of("topdown", "P12", "block", {})


@pytest.mark.parametrize(
    ("mechanism", "query", "level", "settings", "message"),
    [
        (
            "topdown",
            "PCT12",
            "block",
            {},
            "table PCT12 is not published at block level; its "
            "tables at block: P1, P6, P7, P8, P9, P10, P11, P12, P12A, P12B, P12C, P12D, P12E, "
            "P12F, P12G, P12H, P12I, P14, P42$",
        ),
        (
            "topdown",
            "P99",
            "block",
            {},
            "'P99': not a query of the dhc product .*; its tables at block: P1, P6, .*, P14, P42$",
        ),
        (
            "topdown",
            "P12",
            "block",
            {"product": "pl94"},
            "table P12: the pl94 product does not "
            "publish it \\(needs sex, age.*\\); its tables at block: P1, P6, P7, P8, P9, P10, P11, "
            "P42$",
        ),
        (
            "geometric",
            "P99",
            "block",
            {},
            "table 'P99': not a catalogue table; the geometric "
            "release publishes at block: P1, P6, .*, P42, H1, H3, H4, H13$",
        ),
        (
            "geometric",
            "pct12",
            "block",
            {},
            "table PCT12 is not published at block level; the "
            "geometric release publishes at block: P1, ",
        ),
    ],
)
def test_an_unknown_table_is_refused_with_the_tables_of_the_level(
    mechanism, query, level, settings, message
) -> None:
    with pytest.raises(InputError, match=message):
        noise_of(mechanism, query, level, settings)


def test_the_cell_key_method_answers_with_the_noise_of_a_cell() -> None:
    found = cell_key_noise({"ptable": "maxent", "bound": "5", "variance": "3"})
    table = create_ptable(5, 3.0)
    values = np.array(list(found["noise"]), dtype=np.int64)
    probabilities = np.array(list(found["noise"].values()))
    np.testing.assert_array_equal(values, np.arange(-5, 6))  # the symmetry row, -D..D
    assert probabilities.sum() == pytest.approx(1, abs=1e-12)
    # the table's probabilities are differences of bounds rounded to 8 decimals
    assert abs(found["variance"] - 3) <= 1e-8 * float((values**2).sum())
    assert found["max_abs"] == found["bound"] == 5
    inside = [probabilities[np.abs(values) <= e].sum() for e in range(6)]
    assert inside[found["moe_95"]] >= 0.95 > inside[found["moe_95"] - 1]
    assert "none" in found["budget"] and "do not compose" in found["budget"]
    assert "docs/cellkey.md" in found["budget"] and found["stated_variance"] == 3
    small = cell_key_noise({"ptable": "maxent", "bound": "5", "variance": "3"}, count=2)
    v, p = table.row(2)
    assert small["noise"] == dict(zip(v.tolist(), p.tolist(), strict=True))
    assert min(small["noise"]) == -2  # a count of 2 cannot go below 0


def test_an_ons_table_shows_a_period_of_large_counts_or_one_count() -> None:
    found = cell_key_noise({})  # the 10/5 table: large counts rounded to a multiple of 5
    assert found["noise"] == {v: pytest.approx(0.2) for v in (-2, -1, 0, 1, 2)}
    assert found["variance"] == pytest.approx(2) and found["max_abs"] == 2
    assert found["bound"] == 9  # a count of 9 is published as 0
    assert found["stated_variance"] is None and "no randomness" in found["budget"]
    assert cell_key_noise({}, count=9)["noise"] == {-9: 1.0}
    assert ons_10_5_ptable().noise(23, 0) == cell_key_noise({}, count=23)["max_abs"] == 2


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            ["cellkey", "--budget", "4"],
            "cellkey has no budget, so --budget has nothing to find; "
            "sdclab budget cellkey [--set ptable=...] [--count N] gives the noise distribution",
        ),
        (["cellkey", "--moe", "3", "--set", "ptable=maxent"], "cellkey has no budget, so --moe"),
        (["cellkey", "--count", "-1"], "count -1: expected a count of 0 or more"),
        (["cellkey", "--level", "blok"], "level 'blok': expected one of nation"),
        (
            ["topdown", "--level", "block", "--budget", "1", "--count", "4"],
            "--count applies to cellkey only",
        ),
        (["topdown", "--budget", "1"], "topdown: give the level (--level block)"),
    ],
)
def test_questions_the_mechanism_cannot_answer_are_refused_in_one_line(arguments, message) -> None:
    shown = CliRunner().invoke(app, ["budget", *arguments])
    assert shown.exit_code == 2, shown.output
    assert message in shown.output and len(shown.output.strip().splitlines()) == 1


def test_the_command_answers_for_a_table_and_for_the_cell_key_method() -> None:
    runner = CliRunner()
    shown = runner.invoke(
        app, ["budget", "topdown", "--level", "block", "--query", "P12", "--moe", "4"]
    )
    assert shown.exit_code == 0, shown.output
    assert shown.output.startswith("topdown, P12 at block: the smallest rho (zCDP)")
    assert "a cell is one measured cell of sex*agecat" in shown.output
    assert "answered at block from: sex*agecat (1 cell); sex*age (1 to 31 cells)" in shown.output
    cells = runner.invoke(
        app,
        [
            "budget",
            "cellkey",
            "--set",
            "ptable=maxent",
            "--set",
            "bound=3",
            "--set",
            "variance=2",
            "--json",
        ],
    )
    assert cells.exit_code == 0, cells.output
    assert json.loads(cells.output)["max_abs"] == 3
    text = runner.invoke(app, ["budget", "cellkey", "--count", "23"])
    assert text.exit_code == 0 and "+2: 1" in text.output and "budget: none" in text.output


@pytest.mark.parametrize("sigma2", [0.3, 2.0, 15.9, 16.0, 40.0])
@pytest.mark.parametrize("terms", [2, 5])
def test_a_sum_of_measured_cells_has_the_exact_margin_and_tail(sigma2, terms) -> None:
    y, p = _sum_of_gaussians(sigma2, terms)
    assert accounting.gaussian_margin_of_error(sigma2, terms=terms) == (
        accounting.margin_of_error(y, p)
    )
    for bound in (0, 1, 4, 9):
        assert accounting.gaussian_tail(sigma2, bound, terms) == pytest.approx(
            p[np.abs(y) > bound].sum(), abs=1e-14
        )
