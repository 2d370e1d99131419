"""Accounting: published values, conversions against opendp, error distributions, cards."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest
from typer.testing import CliRunner

from sdclab.cli import app
from sdclab.core import accounting as acc
from sdclab.core import noise
from sdclab.core.accounting import SpecCard, no_protection_card
from sdclab.core.errors import InputError
from sdclab.core.privacy import Invariant, Loss, person_guarantee
from sdclab.protection import MECHANISMS, get, parse_settings

BLOCKS = ("1. Domain", "2. Multiverse", "3. Input premetric", "4. Output premetric", "5. Budget")


def test_standard_conversion_of_the_2020_person_budget():
    # ρ = 55.371 ↔ ε = 126.78 at δ = 1e-10: the 2020 budget as Bailie, Gong & Meng, "A Refreshment
    # Stirred, Not Shaken (III): Can Swapping Be Differentially Private?" state it
    assert acc.epsilon_standard(55.371, 1e-10) == pytest.approx(126.78, abs=0.005)
    # the DHC default ρ = 15.30 converts to the 52.83 quoted for the 2020 person products
    assert acc.epsilon_standard(15.30, 1e-10) == pytest.approx(52.83, abs=0.01)


def test_tight_conversion_of_the_pl94_production_budget():
    # ρ_global = (542/339)² reported as ε ≈ 17.14 at δ = 1e-10 by the 2020 production certificate
    # (docs/topdown.md, *Production values*)
    rho = float(Fraction(542, 339) ** 2)
    assert acc.epsilon_for_delta(rho, 1e-10) == pytest.approx(17.14, abs=0.005)
    assert acc.epsilon_for_delta(rho, 1e-10) < acc.epsilon_standard(rho, 1e-10)


@pytest.mark.parametrize(
    ("rate", "b", "epsilon"),
    [
        (0.02, 11_700, 13.259),
        (0.04, 11_700, 12.545),
        (0.05, 11_700, 12.312),
        (0.5, 11_700, 9.367),
        (0.02, 3_650_000, 19.002),
        (0.04, 3_650_000, 18.288),
        (0.05, 3_650_000, 18.055),
        (0.5, 3_650_000, 15.110),
        (0.02, 13_700_000, 20.325),
        (0.04, 13_700_000, 19.611),
        (0.05, 13_700_000, 19.377),
        (0.5, 13_700_000, 16.433),
    ],
)
def test_psa_epsilon_reference_table(rate, b, epsilon):
    assert acc.psa_epsilon(rate, b) == pytest.approx(epsilon, abs=0.0005)


@pytest.mark.parametrize("b", [1, 10, 3_650_000])
def test_psa_epsilon_at_half_and_its_minimum(b):
    assert acc.psa_epsilon(0.5, b) == pytest.approx(math.log(b + 1))
    best = math.sqrt(b + 1) / (1 + math.sqrt(b + 1))
    assert acc.psa_epsilon(best, b) == pytest.approx(0.5 * math.log(b + 1))
    assert all(
        acc.psa_epsilon(p, b) >= 0.5 * math.log(b + 1) - 1e-12 for p in np.linspace(0.01, 0.99, 99)
    )


def test_delta_and_epsilon_are_inverse_and_monotone():
    for rho in (0.01, 0.5, 2.556, 55.371):
        for delta in (1e-5, 1e-10):
            eps = acc.epsilon_for_delta(rho, delta)
            assert acc.delta_for_epsilon(rho, eps) == pytest.approx(delta, rel=1e-6)
        eps = acc.epsilon_for_delta(rho, 1e-5)
        assert acc.delta_for_epsilon(rho, eps) > acc.delta_for_epsilon(rho, eps + 1)


def test_conversions_agree_with_opendp():
    dp = pytest.importorskip("opendp.prelude")
    dp.enable_features("contrib")
    for scale in (0.5, 1.0, 10.0, 100.0):
        meas = dp.m.make_gaussian(dp.atom_domain(T=int), dp.absolute_distance(T=int), scale=scale)
        rho = acc.gaussian_rho(scale**2)
        assert float(rho) == pytest.approx(meas.map(1), rel=1e-12)
        curve = dp.c.make_zCDP_to_approxDP(meas).map(1)
        for delta in (1e-6, 1e-10):
            assert acc.epsilon_for_delta(float(rho), delta) == pytest.approx(
                curve.epsilon(delta), rel=1e-6
            )


def test_rho_composition_and_neighbours():
    assert acc.gaussian_rho(Fraction(1, 3)) == Fraction(3, 2)
    per_query = acc.gaussian_rho(4, acc.histogram_sensitivity_l2_squared("bounded"))
    assert per_query == 2 * acc.gaussian_rho(4, acc.histogram_sensitivity_l2_squared("unbounded"))
    assert per_query == Fraction(1, 4)
    assert acc.compose_rho(per_query, per_query, Fraction(1, 2)) == Fraction(1)
    assert acc.laplace_epsilon(2, acc.histogram_sensitivity_l1("bounded")) == 1.0


def test_margin_of_error_and_tails_from_the_exact_distributions():
    rng = np.random.default_rng(1)
    for sigma2 in (0.5, 1, 100, 1e6):
        moe = acc.gaussian_margin_of_error(sigma2)
        assert acc.gaussian_tail(sigma2, moe) <= 0.05 < acc.gaussian_tail(sigma2, moe - 1)
        draws = np.abs(noise.discrete_gaussian(sigma2, 200_000, rng))
        p = acc.gaussian_tail(sigma2, moe)
        assert abs((draws > moe).mean() - p) < 5 * math.sqrt(p * (1 - p) / 200_000)
    # large σ: the continuous 1.96σ rule
    assert acc.gaussian_margin_of_error(1e6) in (1959, 1960)
    for scale in (0.5, 1, 10):
        moe = acc.laplace_margin_of_error(scale, 0.9)
        assert acc.laplace_tail(scale, moe) <= 0.1 < acc.laplace_tail(scale, moe - 1)
        draws = np.abs(noise.discrete_laplace(scale, 200_000, rng))
        p = acc.laplace_tail(scale, 3)
        assert abs((draws > 3).mean() - p) < 5 * math.sqrt(p * (1 - p) / 200_000)


def test_exact_variance():
    assert acc.discrete_gaussian_variance(100) == pytest.approx(100, rel=1e-12)
    # small σ: below σ², computed independently by direct summation
    y = np.arange(-50, 51)
    w = np.exp(-(y**2) / (2 * 0.5))
    assert acc.discrete_gaussian_variance(0.5) == pytest.approx((w * y**2).sum() / w.sum())
    assert acc.discrete_gaussian_variance(0.5) < 0.5


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: acc.psa_epsilon(0, 10), "swap rate"),
        (lambda: acc.psa_epsilon(0.1, 0), "largest matching group"),
        (lambda: acc.epsilon_standard(-1, 1e-10), "rho must be positive"),
        (lambda: acc.epsilon_for_delta(1, 1.5), "delta must lie"),
        (lambda: acc.gaussian_margin_of_error(1, 1.0), "confidence level"),
    ],
)
def test_accounting_rejects_bad_values(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# ---------------------------------------------------------------------------------------------
# Specification cards
# ---------------------------------------------------------------------------------------------


def test_none_card_renders_five_blocks_and_no_protection():
    text = no_protection_card().render()
    assert all(block in text for block in BLOCKS)
    assert "no formal guarantee" in text and "no protection" in text
    assert "epsilon" not in text


def test_card_round_trips_through_json_dict():
    guarantee = person_guarantee(
        Loss("zcdp", rho=Fraction(5, 2)),
        "replace",
        invariants=(Invariant("total population", "each state"),),
    )
    card = SpecCard(
        mechanism="example",
        domain="census edited files",
        multiverse="datasets sharing state totals",
        guarantee=guarantee,
        covers="all person tables",
        caveats=("example only",),
    )
    assert SpecCard.from_dict(json.loads(json.dumps(card.to_dict()))) == card
    assert "rho = 2.5 (zCDP)" in card.render()
    assert "total population (each state)" in card.render()
    assert not no_protection_card().guarantee.is_formal and guarantee.is_formal


SETTINGS = {
    "none": [],
    "psa": ["rate=0.05", "largest_group=11700"],
    "gaussian": ["sigma2=100", "queries=3"],
}


@pytest.mark.parametrize("name", list(MECHANISMS))
def test_every_registered_card_renders_all_blocks(name):
    entry = get(name)
    card = entry.guarantee(entry.parse(parse_settings(SETTINGS.get(name, []))))
    text = card.render()
    assert all(block in text for block in BLOCKS)
    assert card.guarantee.is_formal or "no formal guarantee" in text
    assert "Common axis" in text


def test_psa_and_gaussian_card_budgets():
    psa = get("psa")
    card = psa.guarantee(psa.parse({"rate": "0.05", "largest_group": "11700"}))
    assert card.guarantee.loss.epsilon == pytest.approx(12.312, abs=5e-4)
    assert card.guarantee.unit == "household" and card.guarantee.measure == "pure"
    gauss = get("gaussian")
    card = gauss.guarantee(gauss.parse({"sigma2": "100", "queries": "3"}))
    assert card.guarantee.loss.rho == Fraction(3 * 2, 200)  # bounded: Δ₂² = 2 per query
    params = gauss.parse({"rho": "0.03", "queries": "3"})
    assert params.noise_variance() == 100
    assert any("delta = 1e-10" in c for c in card.caveats)


@pytest.mark.parametrize(
    ("name", "pairs", "message"),
    [
        ("psa", ["rate=1.5", "largest_group=3"], "parameter rate"),
        ("psa", ["largest_group=ten"], "largest_group"),
        ("gaussian", ["sigma2=1", "rho=1"], "exactly one of sigma2 and rho"),
        ("gaussian", ["sigma2=-1"], "sigma2"),
        ("none", ["x=1"], "(parameters: tables)"),
    ],
)
def test_bad_parameters_are_input_errors(name, pairs, message):
    entry = get(name)
    with pytest.raises(InputError, match=message):
        entry.parse(parse_settings(pairs))


def test_psa_card_without_data_needs_the_largest_group():
    psa = get("psa")
    with pytest.raises(InputError, match="largest_group"):
        psa.guarantee(psa.parse({"rate": "0.1"}))


def test_spec_command():
    runner = CliRunner()
    result = runner.invoke(
        app, ["spec", "-m", "psa", "--set", "rate=0.04", "--set", "largest_group=3650000", "--json"]
    )
    assert result.exit_code == 0, result.output
    card = json.loads(result.output)
    assert card["guarantee"]["loss"]["epsilon"]["value"] == pytest.approx(18.288, abs=5e-4)
    assert card["common_axis"]["epsilon"] == pytest.approx(2 * 18.288, abs=1e-3)  # nearest pair
    result = runner.invoke(app, ["spec", "-m", "none"])
    assert result.exit_code == 0 and "no protection" in result.output
    for args in (["-m", "nope"], ["-m", "psa", "--set", "rate"], ["-m", "psa", "--set", "rate=2"]):
        result = runner.invoke(app, ["spec", *args])
        assert result.exit_code == 2 and result.output.startswith("error: ")
