"""Truncated discrete Laplace noise: the exact sampler, δ from the truncation, the mechanism."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest

from sdclab import protection
from sdclab.censuses.us2010.population.synth import synthesize
from sdclab.core import noise
from sdclab.core.census.model import cells_per_person
from sdclab.core.tables.tabulate import tabulate
from sdclab.protection import truncated


def closed_form_q(rate: float, bound: int) -> float:
    """P(x = E) of exp(−rate·|x|) on −E..E, summed term by term (independent of the module)."""
    norm = sum(math.exp(-rate * abs(x)) for x in range(-bound, bound + 1))
    return math.exp(-rate * bound) / norm


@pytest.mark.parametrize(
    ("scale", "bound"),
    [(Fraction(2), 7), (Fraction(200), 3), (Fraction(1, 2), 1), (Fraction(5, 3), 12)],
)
def test_the_sampler_draws_the_truncated_distribution(scale, bound) -> None:
    draws = noise.truncated_discrete_laplace(scale, bound, 60_000, np.random.default_rng(5))
    assert np.abs(draws).max() <= bound
    x = np.arange(-bound, bound + 1)
    expected = np.exp(-np.abs(x) / float(scale))
    expected /= expected.sum()
    counts = np.array([(draws == v).sum() for v in x])
    # Pearson's statistic against its χ² distribution: below df + 6√(2·df) fails 1 run in ~10⁴
    df = len(x) - 1
    statistic = float((((counts - 60_000 * expected) ** 2) / (60_000 * expected)).sum())
    assert statistic < df + 6 * math.sqrt(2 * df)


def test_a_bound_of_zero_is_no_noise_and_bad_bounds_are_refused() -> None:
    assert not noise.truncated_discrete_laplace(3, 0, 100, np.random.default_rng(1)).any()
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="bound"):
            noise.truncated_discrete_laplace(3, bad, 10, np.random.default_rng(1))


@pytest.mark.parametrize(("rate", "bound"), [(Fraction(1, 2), 7), (Fraction(3, 2), 3)])
def test_delta_is_the_mass_at_the_bound_from_the_rate_up(rate, bound) -> None:
    q = closed_form_q(float(rate), bound)
    for eps in (float(rate), float(rate) + 0.5, 5.0):
        assert truncated.delta_at(rate, bound, eps) == pytest.approx(q, rel=1e-12)
    assert truncated.delta_at(rate, bound, float(rate) / 2) > q  # below the rate it grows


def test_delta_by_brute_force_over_output_sets() -> None:
    """δ(ε) = sup over output sets S of P(S) − e^ε P′(S), taken over every set of outputs of
    the two neighbouring counts (0 and 1) under noise ∝ exp(−rate·|x|) on −E..E."""
    rate, bound, eps = Fraction(1, 2), 4, 0.3
    weights = {x: math.exp(-float(rate) * abs(x)) for x in range(-bound, bound + 1)}
    total = sum(weights.values())
    first = {x: w / total for x, w in weights.items()}
    second = {x + 1: p for x, p in first.items()}  # the neighbouring count, one more
    outputs = sorted(set(first) | set(second))
    worst = max(
        sum(first.get(y, 0.0) - math.exp(eps) * second.get(y, 0.0) for y in chosen)
        for size in range(len(outputs) + 1)
        for chosen in itertools.combinations(outputs, size)
    )
    assert truncated.delta_at(rate, bound, eps) == pytest.approx(worst, rel=1e-12)


@pytest.mark.parametrize(
    ("rate", "delta"),
    [
        (Fraction(1, 2), 8e-3),
        (Fraction(3, 2), 2e-5),
        (Fraction(1, 2), 2e-5),
        (Fraction(3, 2), 8e-3),
    ],
)
def test_the_smallest_bound_meeting_a_delta(rate, delta) -> None:
    found = truncated.smallest_bound(rate, delta)
    assert found is not None
    assert closed_form_q(float(rate), found) <= delta < closed_form_q(float(rate), found - 1)


def test_the_paper_setups_give_these_bounds() -> None:
    """The four (ε, δ) setups Bach cites: E = 7 for two of them, 3 and 19 for the others."""
    bounds = {
        (eps, delta): truncated.smallest_bound(Fraction(eps), delta)
        for eps in ("0.5", "1.5")
        for delta in (2e-5, 8e-3)
    }
    assert bounds == {("0.5", 2e-5): 19, ("0.5", 8e-3): 7, ("1.5", 2e-5): 7, ("1.5", 8e-3): 3}


def test_parameters_take_a_bound_or_a_delta() -> None:
    entry = protection.get("truncated")
    assert entry.parse({"epsilon": "0.5"}).noise_bound == 7  # the default delta, 0.008
    assert entry.parse({"epsilon": "0.5", "bound": "12"}).noise_bound == 12
    assert entry.parse({"epsilon": "1.5", "delta": "0.00002"}).recorded()["bound"] == 7
    with pytest.raises(Exception, match="bound or delta, not both"):
        entry.parse({"bound": "7", "delta": "0.01"})
    with pytest.raises(Exception, match="no bound up to"):
        entry.parse({"epsilon": "0.001", "delta": "1e-30"})
    with pytest.raises(Exception, match="epsilon = 0.1234567890123456789 has too many"):
        entry.parse({"epsilon": "0.1234567890123456789", "bound": "7"})


@pytest.fixture(scope="module")
def population():
    return synthesize(1_500, seed=21)


def test_every_cell_is_within_the_bound_and_the_card_composes(population) -> None:
    settings = {"epsilon": "0.5", "bound": "4", "tables": "P1,P12"}
    release = protection.run("truncated", population, settings, 7)
    exact = tabulate(population, ["P1", "P12"])
    moved = 0
    for name in ("P1", "P12"):
        for level in release.table(name).levels:
            truth = exact[name].counts[level][1].toarray()
            published = release.table(name).dense(level, suppressed=np.nan)
            error = published - truth
            assert np.abs(error).max() <= 4
            moved += int((error != 0).sum())
    assert moved > 0
    card = release.card
    t = cells_per_person(population.census, ("P1", "P12"))
    composed = 1 - (1 - closed_form_q(0.5, 4)) ** t  # t independent (ε, δ) cells
    assert card.guarantee.loss.delta == pytest.approx(composed, rel=1e-9)
    assert card.guarantee.loss.epsilon == pytest.approx(t * 0.5)


def test_negative_counts_are_clamped_when_asked(population) -> None:
    settings = {"epsilon": "0.1", "bound": "9", "tables": "P12", "nonnegative": "true"}
    release = protection.run("truncated", population, settings, 7)
    assert min(release.table("P12").dense(lv).min() for lv in release.table("P12").levels) == 0
    unclamped = protection.run("truncated", population, {**settings, "nonnegative": "false"}, 7)
    assert min(unclamped.table("P12").dense(lv).min() for lv in unclamped.table("P12").levels) < 0


def test_the_check_refuses_a_count_beyond_the_bound(population) -> None:
    entry = protection.get("truncated")
    params = entry.parse({"epsilon": "0.5", "bound": "3", "tables": "P1"}, population.census)
    release = protection.run("truncated", population, params.recorded(), 2)
    assert entry.check(release, params) is None
    p1 = release.table("P1")
    counts = {level: p1.matrix(level).toarray() for level in p1.levels}
    counts[p1.levels[0]][0, 0] = -4  # no true count ≥ 0 is within 3 of it
    broken = replace(release, tables={"P1": p1.with_counts(counts)})
    assert "within E = 3" in (entry.check(broken, params) or "")


def test_the_attackers_model_holds_the_truth(population) -> None:
    release = protection.run("truncated", population, {"bound": "5", "tables": "P12"}, 4)
    level = release.table("P12").levels[-1]
    published = release.table("P12").dense(level, suppressed=np.nan)
    truth = tabulate(population, ["P12"])["P12"].counts[level][1].toarray()
    model = truncated.cell_model(release, ["P12"], level, published)
    assert (model.low <= truth).all() and (truth <= model.high).all()
    assert (model.low >= 0).all() and (model.high - model.low <= 10).all()


def test_the_summed_noise_is_the_convolution() -> None:
    rate, bound = Fraction(1, 2), 3
    values, pmf = truncated.summed_noise(rate, bound, 2)
    single = truncated.noise_pmf(rate, bound)
    by_hand = {}
    for a in range(-bound, bound + 1):
        for b in range(-bound, bound + 1):
            by_hand[a + b] = by_hand.get(a + b, 0.0) + single[a + bound] * single[b + bound]
    assert list(values) == sorted(by_hand)
    assert np.allclose(pmf, [by_hand[v] for v in values], rtol=1e-12, atol=0)


def test_the_tails_of_bounded_noise(population) -> None:
    release = protection.run("truncated", population, {"bound": "7", "tables": "P1,P12"}, 5)
    (tails,) = truncated.diagnostics(population, release)
    for figures in tails.levels.values():
        assert figures.tail_probability == 0.0  # nothing beyond ±20 with E = 7
        for row in figures.classes:
            # an area of 10 or more persons is never depopulated by noise bounded by 7
            if row.size_class.startswith(("10", "50", "100", "500")):
                assert row.events["depopulated"].expected == 0.0
                assert row.events["depopulated"].sampled == 0


@pytest.mark.parametrize("name", ["truncated-vs-cellkey.toml", "truncated-vs-cellkey-eu.toml"])
def test_the_example_sets_the_cell_key_method_at_the_same_bound_and_variance(name) -> None:
    """The examples compare like with like: every max-entropy cell key entry has the bound and
    the variance of a truncated release of the sweep."""
    from pathlib import Path

    from sdclab.pipeline.experiment.reading import load_experiment

    experiment = load_experiment(Path(__file__).resolve().parent.parent / "examples" / name)
    (noise,) = [m for m in experiment.mechanisms if m.name == "truncated"]
    rate = Fraction(str(noise.settings["epsilon"]))
    swept = noise.settings["bound"]
    bounds = sorted(int(b) for b in (swept if isinstance(swept, list) else [swept]))
    cellkeys = [
        m.settings
        for m in experiment.mechanisms
        if m.name == "cellkey" and m.settings.get("ptable") == "maxent"
    ]
    assert {int(s["bound"]) for s in cellkeys} == set(bounds)
    for settings in cellkeys:
        expected = truncated.variance(rate, int(settings["bound"]))
        assert float(settings["variance"]) == pytest.approx(expected, abs=5e-4)


def test_the_card_names_its_table_and_reads_back() -> None:
    """The δ(ε) rows are not a budget split: the card says so, and its JSON keeps the title."""
    from sdclab.core.accounting import SpecCard

    card = protection.get("truncated").card(protection.get("truncated").parse({"bound": "9"}))
    assert "Delta per count at each epsilon" in card.render()
    assert "Budget allocation" not in card.render()
    again = SpecCard.from_dict(card.to_dict())
    assert again.allocation_title == card.allocation_title and again.render() == card.render()
    assert [row["epsilon per count"] for row in card.allocation] == sorted(
        row["epsilon per count"] for row in card.allocation
    )
