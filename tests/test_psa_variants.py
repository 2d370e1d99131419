"""The PSA's variants (probabilistic unit matching, pre-swap perturbation) and its budgets per
attribute: what each changes and keeps, its card, its audit, and the defaults left alone."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from sdclab import protection
from sdclab.attacks.audit import audit
from sdclab.censuses.us2010.population.synth import synthesize
from sdclab.cli import app
from sdclab.core import accounting, noise
from sdclab.core.census.declare import load_census
from sdclab.core.census.records import read_records
from sdclab.core.errors import InputError
from sdclab.core.tables.published import PublishedTable
from sdclab.core.tables.tabulate import tabulate
from sdclab.pipeline import api
from sdclab.protection.households import Households
from sdclab.protection.psa_variants import (
    largest_groups,
    perturbed,
    randomized_response,
    rr_epsilon,
)
from sdclab.protection.swap_pairs import group_ids
from sdclab.protection.swapping import psa_draw, psa_partners, psa_swap

PSA = protection.get("psa")


@pytest.fixture(scope="module")
def county():
    return synthesize(8_000, seed=5)


def swapped(population, seed: int, **settings):
    params = PSA.parse({k: str(v) for k, v in settings.items()})
    return psa_swap(population, params, np.random.default_rng(seed))


def same(a, b, name: str, level: str) -> bool:
    """Whether two exact tabulations agree on a table at a level."""

    def cells(tables):
        frame = PublishedTable.from_counts(tables[name]).frame(labels=False)
        return frame.filter(pl.col("level") == level).sort("geoid", "cell")

    return cells(a).equals(cells(b))


def sizes_by_block(population) -> list[tuple[str, int]]:
    households = Households(population)
    return sorted(zip(households.block_code.tolist(), households.size.tolist(), strict=True))


# ---------------------------------------------------------------------------------------------
# Defaults: the PSA itself is unchanged
# ---------------------------------------------------------------------------------------------


def test_the_variants_off_leave_the_swap_its_record_and_its_guarantee_as_they_were(county):
    plain = swapped(county, 3, rate=0.2)
    zero = swapped(county, 3, rate=0.2, cross_match=0, perturb_rate=0)
    assert plain.population.persons.equals(zero.population.persons)
    assert plain.population.units.equals(zero.population.units)
    assert plain.diagnostics == zero.diagnostics
    recorded = PSA.parse({"rate": "0.2", "cross_match": "0"}).recorded()
    assert not {"cross_match", "perturb_rate", "perturb"} & set(recorded)
    card = PSA.card(PSA.parse({"rate": "0.05", "largest_group": "11700"}))
    assert card.guarantee.loss is not None
    assert card.guarantee.loss.epsilon == accounting.psa_epsilon(0.05, 11_700)


def test_the_draw_with_the_variants_off_is_the_psas_own():
    """Selection, then one permutation key per household, from the same stream: the variants
    off draw nothing more and nothing else."""
    group = group_ids(np.random.default_rng(1).integers(0, 40, 2_000))
    params = PSA.parse({"rate": "0.2", "cross_match": "0", "perturb_rate": "0"})
    partner, _, _ = psa_draw(group, params, np.random.default_rng(7))
    rng = np.random.default_rng(7)
    selected = noise.bernoulli(Fraction(1, 5), len(group), rng)
    assert np.array_equal(partner, psa_partners(group, selected, rng.permutation(len(group))))
    assert (partner != np.arange(len(group))).any()


# ---------------------------------------------------------------------------------------------
# Probabilistic unit matching
# ---------------------------------------------------------------------------------------------


def test_cross_matching_moves_households_across_sizes_and_keeps_each_county(county):
    truth = tabulate(county)
    out = swapped(county, 4, rate=0.5, cross_match=1, matching_level="county")
    tables = tabulate(out.population)
    # every statistic of each county and above stays; households per block stay (units never
    # move); households by size in a block do not (the invariant the variant removes)
    for name in ("P1", "P12", "H4", "H13"):
        for level in ("nation", "state", "county"):
            assert same(tables, truth, name, level), (name, level)
    assert same(tables, truth, "H3", "block")
    assert sizes_by_block(out.population) != sizes_by_block(county)
    assert not same(tables, truth, "H13", "block")
    # and without it (the same draws otherwise) they do stay
    plain = swapped(county, 4, rate=0.5, matching_level="county")
    assert sizes_by_block(plain.population) == sizes_by_block(county)


def test_cross_matched_share_of_the_selected_is_binomial(county):
    alpha = 0.3
    out = swapped(county, 6, rate=0.5, cross_match=alpha)
    n, k = out.diagnostics["selected"], out.diagnostics["cross_matched"]
    assert abs(k - alpha * n) <= 5 * math.sqrt(n * alpha * (1 - alpha))


@pytest.mark.parametrize(("rate", "alpha"), [("0.5", "0.5"), ("0.3", "1")])
def test_a_one_and_a_two_person_household_exchange_places_with_probability_p2_a2_over_2(
    rate, alpha
):
    """The audit's pair: in each of many areas a one- and a two-person household; they exchange
    places only if both are selected and cross-matched and the permutation of two moves them."""
    copies = 200_000
    area = np.repeat(np.arange(copies), 2)
    size = np.tile([1, 2], copies)
    params = PSA.parse({"rate": rate, "cross_match": alpha, "matching_level": "tract"})
    partner, _, _ = psa_draw(group_ids(area, size), params, np.random.default_rng(11), area)
    exchanged = int((partner[0::2] == np.arange(1, 2 * copies, 2)).sum())
    x = float(Fraction(rate) ** 2 * Fraction(alpha) ** 2 / 2)
    assert abs(exchanged - x * copies) <= 5 * math.sqrt(copies * x * (1 - x))
    assert (partner[0::2] != np.arange(0, 2 * copies, 2)).sum() == exchanged  # nothing else


def test_cross_matching_over_a_declared_census_keeps_its_matching_areas(with_tenure):
    census = load_census(with_tenure / "census.toml")
    records = read_records(census, with_tenure / "persons.csv")
    exact = api.tabulate(records)
    release = api.protect(
        records, "psa", seed=4, rate="0.5", matching_level="district", cross_match="1"
    )
    assert release.parameters["cross_match"] == "1"
    for name, table in release.tables.items():
        for level in ("region", "district"):
            if level in table.levels:
                assert (table.matrix(level) != exact.table(name).matrix(level)).nnz == 0, name
    assert release.card.guarantee.loss is None and release.card.guarantee.open


# ---------------------------------------------------------------------------------------------
# Pre-swap perturbation
# ---------------------------------------------------------------------------------------------


def test_perturbation_noises_the_listed_attributes_of_households_only(county):
    params = PSA.parse({"perturb_rate": "0.5", "perturb": "tenure,sex"})
    households = Households(county)
    out = perturbed(county, households, params, np.random.default_rng(8))
    rows = households.unit_rows
    before, after = county.units["tenure"].to_numpy(), out.units["tenure"].to_numpy()
    # a household's tenure changes w.p. r(1 − 1/k) = 1/3 (k = 3): a binomial count
    n, q = len(rows), 1 / 3
    changed = int((before[rows] != after[rows]).sum())
    assert abs(changed - q * n) <= 5 * math.sqrt(n * q * (1 - q))
    others = np.setdiff1d(np.arange(county.n_units), rows)
    assert county.units[others.tolist()].equals(out.units[others.tolist()])  # vacant, GQ
    in_household = np.isin(county.person_unit_row, rows)
    sex_before, sex_after = county.persons["sex"].to_numpy(), out.persons["sex"].to_numpy()
    m, q = int(in_household.sum()), 1 / 4
    changed = int((sex_before[in_household] != sex_after[in_household]).sum())
    assert abs(changed - q * m) <= 5 * math.sqrt(m * q * (1 - q))
    assert (sex_before[~in_household] == sex_after[~in_household]).all()  # GQ residents
    assert county.persons.drop("sex").equals(out.persons.drop("sex"))


def test_the_perturbed_swap_keeps_sizes_by_block_and_loses_the_perturbed_totals(county):
    truth = tabulate(county)
    out = swapped(county, 8, rate=0.05, perturb_rate=0.5, perturb="tenure")
    tables = tabulate(out.population)
    assert sizes_by_block(out.population) == sizes_by_block(county)
    assert same(tables, truth, "H13", "block") and same(tables, truth, "P12", "nation")
    assert not same(tables, truth, "H4", "nation")  # tenure noised


def test_randomized_response_changes_a_share_r_of_values_to_a_uniform_code(county):
    """Exactly the share r(1 − 1/k) of values change, each to one of the other codes alike."""
    values = np.ones(300_000, dtype=np.int64)
    out = randomized_response(values, (1, 2, 3), Fraction(3, 10), np.random.default_rng(2))
    counts = np.bincount(out, minlength=4)[1:]
    n, q = len(values), 0.3 / 3
    for c in counts[1:]:
        assert abs(c - q * n) <= 5 * math.sqrt(n * q * (1 - q))
    assert rr_epsilon(3, Fraction(1, 2)) == pytest.approx(math.log(4))
    assert rr_epsilon(2, Fraction(1, 5)) == pytest.approx(math.log(1 + 2 * 0.8 / 0.2))


# ---------------------------------------------------------------------------------------------
# Cards, budgets per attribute, the audit, errors
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("b", "epsilon"), [(11_700, 12.31), (13_700_000, 19.38)])
def test_the_card_gives_every_swapped_attribute_the_papers_epsilon(b, epsilon):
    """The paper (§3.1): at p = 5%, b from 11.7 thousand to 13.7 million give 12.31 to 19.38."""
    card = PSA.card(PSA.parse({"rate": "0.05", "largest_group": str(b)}))
    rows = {row["role"]: row for row in card.per_attribute}
    for role in ("swapping variable", "matching variable", "holding variables"):
        assert round(rows[role]["epsilon"], 2) == epsilon
    assert rows["matching variable (area)"]["epsilon"] == "unprotected"
    assert rows["swapping variable"]["attribute"] == "location below the state"
    assert "Budgets per attribute" in card.render()


def test_a_variant_s_card_states_no_epsilon_and_why_and_keeps_the_right_invariants():
    card = PSA.card(PSA.parse({"largest_group": "100", "cross_match": "0.1"}))
    g = card.guarantee
    assert g.loss is None and g.open and "future work" in g.reason
    assert g.text().startswith("unknown: no closed form")
    assert card.common_text().startswith("not comparable")
    texts = [i.text() for i in g.invariants]
    assert "households by size (every block)" not in texts
    assert "the number of households (every block)" in texts
    assert "every statistic (each state and above)" in texts
    perturbed = PSA.card(PSA.parse({"largest_group": "100", "perturb_rate": "0.25"}))
    rows = {row["attribute"]: row for row in perturbed.per_attribute}
    assert rows["tenure"]["epsilon"] == pytest.approx(math.log(1 + 3 * 0.75 / 0.25))
    texts = [i.text() for i in perturbed.guarantee.invariants]
    assert "households by size (every block)" in texts
    assert "every statistic (each state and above)" not in texts
    assert "every statistic not involving tenure (each state and above)" in texts


def test_the_audit_bounds_each_variant_below_its_pairs_loss():
    crossed = audit("psa", {"cross_match": "0.5"}, trials=4_000, seed=0)
    exact = math.log(31)  # x = p²α²/2 = 1/32 at p = α = 1/2
    assert 2.5 < crossed.lower_bound <= exact
    assert crossed.claim.value == pytest.approx(exact) and not crossed.violated
    noised = audit("psa", {"perturb_rate": "0.5"}, trials=4_000, seed=0)
    assert noised.claim.value == pytest.approx(math.log(4))
    assert 0.5 < noised.lower_bound <= noised.claim.value
    sex = audit("psa", {"perturb_rate": "0.5", "perturb": "sex"}, trials=4_000, seed=1)
    assert sex.claim.value == pytest.approx(math.log(3)) and "sex" in sex.claim.neighbours
    assert 0.3 < sex.lower_bound <= sex.claim.value


def test_the_cross_match_audit_flags_a_variant_that_crosses_less_than_it_says(monkeypatch):
    """Its claim is the pair's exact loss: an implementation crossing with α/4 leaks more."""
    from sdclab.protection import psa_variants

    honest = psa_variants.cross_matched

    def fewer(group, area, selected, alpha, rng):
        return honest(group, area, selected, alpha / 4, rng)

    monkeypatch.setattr(psa_variants, "cross_matched", fewer)
    assert audit("psa", {"cross_match": "0.5"}, trials=4_000, seed=0).violated


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"cross_match": "1.5"}, "cross_match"),
        ({"perturb": "sex"}, "perturb: give perturb_rate"),
        ({"perturb_rate": "0.1", "perturb": "age"}, "perturb"),
        ({"perturb_rate": "0.1", "perturb": "sex,sex"}, "name each attribute once"),
    ],
)
def test_bad_variant_settings_are_one_line_errors(settings, message):
    with pytest.raises(InputError, match=message) as caught:
        PSA.parse(settings)
    assert "\n" not in str(caught.value)


def test_both_variants_in_one_audit_and_us_only_settings_elsewhere_are_refused(with_tenure):
    with pytest.raises(InputError, match="one variant at a time"):
        audit("psa", {"cross_match": "0.5", "perturb_rate": "0.5"}, trials=100)
    records = read_records(load_census(with_tenure / "census.toml"), with_tenure / "persons.csv")
    with pytest.raises(InputError, match="perturb_rate: a setting for the US 2010 census only"):
        api.protect(records, "psa", seed=1, perturb_rate="0.1")


def test_the_cli_runs_the_variants(tmp_path):
    pop = tmp_path / "pop"
    runner = CliRunner()
    assert (
        runner.invoke(app, ["synth", "-n", "2000", "--seed", "1", "--out", str(pop)]).exit_code == 0
    )
    out = runner.invoke(
        app,
        [
            "protect",
            str(pop),
            "-m",
            "psa",
            "--set",
            "cross_match=0.2",
            "--set",
            "perturb_rate=0.1",
            "--seed",
            "3",
            "--out",
            str(tmp_path / "rel"),
        ],
    )
    assert out.exit_code == 0, out.output
    shown = runner.invoke(
        app, ["spec", "-m", "psa", "--set", "largest_group=50", "--set", "cross_match=0.2"]
    )
    assert "unknown: no closed form" in shown.output
    bad = runner.invoke(
        app, ["spec", "-m", "psa", "--set", "largest_group=50", "--set", "cross_match=2"]
    )
    assert bad.exit_code != 0 and len(bad.output.strip().splitlines()) == 1


def test_the_granularity_figures_are_the_psas_own_b_and_shrink_with_finer_invariants(county):
    rows = largest_groups(Households(county))
    b = {row["key"]: row["b"] for row in rows}
    for level in ("state", "county", "tract"):
        release = protection.run("psa", county, {"matching_level": level}, 1)
        assert release.notes["largest_matching_group"] == b[f"{level} x size"]
        adults = swapped(county, 1, matching_level=level, match_adults="true")
        assert adults.notes["largest_matching_group"] == b[f"{level} x size x adults"]
        assert b[level] >= b[f"{level} x size"] >= b[f"{level} x size x adults"]
    assert b["state"] == Households(county).count  # one state
    assert b["state x size"] >= b["county x size"] >= b["tract x size"]


def test_an_open_guarantee_and_per_attribute_rows_survive_the_release_json():
    card = PSA.card(PSA.parse({"largest_group": "100", "perturb_rate": "0.25"}))
    back = accounting.SpecCard.from_dict(card.to_dict())
    assert back == card and back.guarantee.open
    assert back.render() == card.render()
    plain = PSA.card(PSA.parse({"largest_group": "100"}))
    assert not plain.guarantee.open and "open" not in plain.to_dict()["guarantee"]


def test_an_open_guarantee_reads_unknown_wherever_it_is_shown():
    """Not 'no formal guarantee': the paper leaves it open; the card, the common axis, the
    report's cell and the release's summary say so alike."""
    from types import SimpleNamespace

    from sdclab.pipeline.report.reading import guarantee_cell

    card = PSA.card(PSA.parse({"largest_group": "100", "cross_match": "0.1"}))
    assert card.common_text().startswith("not comparable: no closed form known")

    shown = SimpleNamespace(evaluation=SimpleNamespace(card=card))  # (what the cell reads)
    assert guarantee_cell(shown) == "unknown: no closed form"
