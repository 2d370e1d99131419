"""Guarantees as values and the common axis: each conversion against published or reference
values, and every mechanism's card giving the common figure (or null and a reason) as fields."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import pytest
from typer.testing import CliRunner

from sdclab import protection
from sdclab.censuses.us2010.catalog import CATALOG
from sdclab.cli import app
from sdclab.core import accounting
from sdclab.core.privacy import (
    Guarantee,
    Loss,
    add_remove_to_replace,
    common_axis,
    compose,
    group,
    person_guarantee,
)
from sdclab.pipeline.results import NotMeasured
from sdclab.protection import geometric

DELTA = 1e-10


# ---------------------------------------------------------------------------------------------
# zCDP → (ε, δ)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rho", "standard", "tight"),
    [
        # the 2020 person budget of the redistricting and DHC person products (ρ = 15.3) and the
        # 2020 total as Bailie, Gong & Meng state it (ρ = 55.371), at δ = 1e-10
        (Fraction(153, 10), 52.84, 51.58),
        (Fraction(55371, 1000), 126.78, 125.07),
    ],
)
def test_zcdp_to_epsilon_by_the_standard_bound_and_the_tight_conversion(rho, standard, tight):
    figure = common_axis(person_guarantee(Loss("zcdp", rho=rho), "replace"))
    assert not isinstance(figure, NotMeasured)
    assert figure.epsilon_standard == pytest.approx(standard, abs=0.005)  # ρ + 2√(ρ ln 1/δ)
    assert figure.epsilon == pytest.approx(tight, abs=0.005)  # Canonne, Kamath & Steinke
    assert figure.rho == rho and figure.delta == DELTA


def test_the_tight_conversion_is_opendps_zcdp_to_approximate_dp_map():
    dp = pytest.importorskip("opendp.prelude")
    dp.enable_features("contrib")
    for rho in (Fraction(153, 10), Fraction(55371, 1000)):
        scale = math.sqrt(1 / (2 * float(rho)))  # ρ = Δ²/(2σ²) with Δ = 1
        meas = dp.m.make_gaussian(dp.atom_domain(T=int), dp.absolute_distance(T=int), scale=scale)
        assert meas.map(1) == pytest.approx(float(rho), rel=1e-12)
        curve = dp.c.make_zCDP_to_approxDP(meas).map(1)
        figure = common_axis(person_guarantee(Loss("zcdp", rho=rho), "replace"))
        assert figure.epsilon == pytest.approx(curve.epsilon(DELTA), rel=1e-6)


# ---------------------------------------------------------------------------------------------
# Relations, units, groups, composition
# ---------------------------------------------------------------------------------------------


def test_add_remove_to_replace():
    # pure: a replace is a removal and an addition, 2ε
    pure, step = add_remove_to_replace(Loss("pure", epsilon=Fraction(3, 2)))
    assert pure.epsilon == 3 and "2ε" in step
    # zCDP in general: group privacy of two, 4ρ; with the mechanism's own sensitivity (a
    # Gaussian histogram: Δ₂² 1 → 2) 2ρ
    assert add_remove_to_replace(Loss("zcdp", rho=Fraction(1, 2)))[0].rho == 2
    assert add_remove_to_replace(Loss("zcdp", rho=Fraction(1, 2)), zcdp_factor=2)[0].rho == 1
    # approximate: (2ε, (1 + e^ε)δ), never above 1
    approx, _ = add_remove_to_replace(Loss("approximate", epsilon=1.0, delta=1e-6))
    assert approx.epsilon == 2 and approx.delta == pytest.approx((1 + math.e) * 1e-6)
    assert add_remove_to_replace(Loss("approximate", epsilon=1.0, delta=0.5))[0].delta == 1


def test_the_gaussian_mechanisms_own_sensitivity_gives_twice_its_rho():
    # the reference histogram: σ² = 1 under add/remove neighbours is ρ = 1/2; replacing a record
    # moves one count down and one up, Δ₂² = 2, so ρ = 1 exactly (not the generic 4ρ = 2)
    entry = protection.get("gaussian")
    card = entry.guarantee(entry.parse({"sigma2": "1", "neighbours": "unbounded"}))
    assert card.guarantee.loss.rho == Fraction(1, 2)
    assert card.guarantee.person_replace.rho == 1
    bounded = entry.guarantee(entry.parse({"sigma2": "1", "neighbours": "bounded"}))
    assert bounded.guarantee.person_replace.rho == 1  # the same loss stated directly


def test_group_privacy_and_composition():
    assert group(Loss("pure", epsilon=Fraction(1, 4)), 3)[0].epsilon == Fraction(3, 4)
    assert group(Loss("zcdp", rho=Fraction(1, 10)), 5)[0].rho == Fraction(5, 2)  # k²ρ
    approx, _ = group(Loss("approximate", epsilon=0.1, delta=1e-8), 2)
    assert approx.epsilon == pytest.approx(0.2)
    assert approx.delta == pytest.approx(2 * math.exp(0.1) * 1e-8)
    assert compose(Loss("zcdp", rho=Fraction(1, 3)), Loss("zcdp", rho=Fraction(2, 3))).rho == 1
    with pytest.raises(ValueError, match="different measures"):
        compose(Loss("zcdp", rho=Fraction(1)), Loss("pure", epsilon=Fraction(1)))


def test_approximate_dp_reaches_the_axis_only_with_a_small_enough_delta():
    small = common_axis(person_guarantee(Loss("approximate", epsilon=2.0, delta=1e-12), "replace"))
    assert small.epsilon == 2.0
    large = common_axis(person_guarantee(Loss("approximate", epsilon=2.0, delta=0.61), "replace"))
    assert isinstance(large, NotMeasured) and large.reason.startswith("bounded noise: δ ≥ 0.61")


def test_a_guarantee_says_why_it_has_no_loss():
    with pytest.raises(ValueError, match="says why"):
        Guarantee("none", "none", None, None, NotMeasured("x"))
    with pytest.raises(ValueError, match="has no rho"):
        Loss("pure", epsilon=Fraction(1), rho=Fraction(1))


# ---------------------------------------------------------------------------------------------
# Every mechanism: the fields of sdclab spec --json
# ---------------------------------------------------------------------------------------------

SPEC = [
    ("none", [], None, "no protection"),
    # no dataset of the PSA's universe differs in one record: the nearest pair, 2ε
    ("psa", ["largest_group=100"], 2 * accounting.psa_epsilon(0.05, 100), None),
    ("swap", [], None, "data-dependent"),
    ("swap-high", [], None, "data-dependent"),
    ("gaussian", ["rho=0.5"], accounting.epsilon_for_delta(0.5, DELTA), None),
    ("topdown", [], 51.58, None),
    ("topdown", ["product=pl94"], 17.14, None),
    ("geometric", ["epsilon=4"], 8.0, None),  # add/remove → replace: 2ε
    ("geometric", ["epsilon=4", "neighbours=bounded"], 4.0, None),
    ("cellkey", [], None, "deterministic rounding"),
    ("cellkey", ["ptable=maxent", "bound=5", "variance=3"], None, "same participants"),
    ("cellkey", ["ptable=maxent", "bound=5", "variance=3", "keys=ids"], None, "keys=ids"),
    ("cellkey", ["ptable=maxent", "bound=5", "variance=3", "spsn=false"], None, "bounded noise"),
    ("cellkey", ["swap=swap-low"], None, "open problem"),
    # (1 + e^ε)δ at tε = 976: computed in logarithms, δ capped at 1
    ("cellkey", ["ptable=maxent", "bound=3", "variance=2", "spsn=false", "epsilon=4"], None, "δ ≥"),
    ("cellkey", ["ptable=maxent", "bound=5", "variance=3", "spsn=false", "keys=ids"], None, "δ ≥"),
    ("safetab_h", [], None, None),
    ("safetab_h", ["t01001=noisy"], None, None),
    ("suppress", [], None, "deterministic"),
]


@pytest.mark.parametrize(("name", "settings", "epsilon", "reason"), SPEC)
def test_spec_json_gives_measure_unit_relation_invariants_and_the_common_figure(
    name, settings, epsilon, reason
):
    args = ["spec", "-m", name, "--json"] + [a for s in settings for a in ("--set", s)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    card = json.loads(result.output)
    g = card["guarantee"]
    assert g["measure"] in ("pure", "approximate", "zcdp", "none")
    assert g["unit"] in ("person", "household", "cell", "none")
    assert g["relation"] in ("add_remove", "replace", None)
    assert all({"statistic", "levels"} == set(i) for i in g["invariants"])
    common = card["common_axis"]
    if reason is not None:
        assert set(common) == {"not_measured"} and reason in common["not_measured"], common
    else:
        assert common["delta"] == DELTA and common["derivation"], common
    if epsilon is not None:
        assert common["epsilon"] == pytest.approx(epsilon, abs=0.005)


@pytest.mark.parametrize("name", sorted(protection.MECHANISMS))
def test_every_card_survives_json(name):
    from sdclab.core.accounting import SpecCard

    entry = protection.get(name)
    settings = {"psa": {"largest_group": "100"}, "gaussian": {"rho": "0.5"}}.get(name, {})
    card = entry.guarantee(entry.parse(settings))
    back = SpecCard.from_dict(json.loads(json.dumps(card.to_dict())))
    assert back == card
    assert json.loads(json.dumps(back.to_dict())) == card.to_dict()  # the JSON form is stable


def test_a_forged_guarantee_is_refused():
    g = person_guarantee(Loss("zcdp", rho=Fraction(1)), "replace").to_dict()
    with pytest.raises(ValueError, match="unknown unit 'martian'"):
        Guarantee.from_dict({**g, "unit": "martian"})


def test_topdown_holds_its_totals_invariant():
    card = protection.get("topdown").guarantee(protection.get("topdown").parse({}))
    statistics = {i.statistic: i.levels for i in card.guarantee.invariants}
    assert statistics["total population"] == "nation, state"
    assert card.guarantee.relation == "replace"  # no add/remove neighbour keeps the totals


# ---------------------------------------------------------------------------------------------
# Geometric noise: one person costs the unit tables too
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("split", ["census2020", "even"])
def test_geometric_person_loss_counts_the_unit_tables_a_person_moves(split):
    p = geometric.MECHANISM.parse({"epsilon": "4", "split": split})
    shares = geometric.allocation(p)
    by_hand = Fraction(0)
    for level in {lv for _, lv in shares}:
        at = {n: e for (n, lv), e in shares.items() if lv == level}
        person = sum(e for n, e in at.items() if CATALOG[n].schema.name != "unit")
        vacant = 2 * at["H3"] + at["H4"] + at["H13"]  # a person entering a vacant unit
        by_hand += person + max(vacant, 2 * at["H13"])
    loss, _ = geometric.person_loss(p)
    assert loss == by_hand
    card = geometric.MECHANISM.guarantee(p)
    assert card.guarantee.loss.epsilon == loss
    # the census2020 split gives the unit tables what a person costs them: the asked ε
    if split == "census2020":
        assert loss == 4 and card.guarantee.asked is None
    shown = [c for c in card.caveats if c.startswith("Asked epsilon = 4")]
    assert shown, card.caveats


def test_a_card_prints_no_budget_figure_that_guarantees_nothing():
    """The ONS 10/5 table's δ is 1 at every ε: its text says no guarantee is in effect rather
    than "epsilon = 1, delta = 1"; a max-entropy table's per-cell ε shows only beside its δ."""
    from sdclab import protection

    cellkey = protection.get("cellkey")
    ons = cellkey.card(cellkey.parse({})).guarantee.text()
    assert ons.startswith("none in effect: delta = 1") and "epsilon = 1," not in ons
    maxent = cellkey.parse({"ptable": "maxent", "bound": "5", "variance": "3"})
    text = cellkey.card(maxent).guarantee.text()
    assert text.startswith("per released cell: delta = ") and "at epsilon = 1" in text


def test_composition_over_independent_cells() -> None:
    """(tε, 1 − (1 − δ)^t): below basic composition's tδ, equal to it for t = 1."""
    from sdclab.core.privacy import composed_over_cells

    per_cell = Loss("approximate", epsilon=Fraction(1, 2), delta=0.01)
    once = composed_over_cells(per_cell, 1).loss
    assert once is not None and once.delta == pytest.approx(0.01) and once.epsilon == Fraction(1, 2)
    many = composed_over_cells(per_cell, 100).loss
    assert many is not None and many.epsilon == 50
    assert many.delta == pytest.approx(1 - 0.99**100, rel=1e-12) and many.delta < 1.0
    with pytest.raises(ValueError, match="epsilon, delta"):
        composed_over_cells(Loss("pure", epsilon=Fraction(1)), 3)
