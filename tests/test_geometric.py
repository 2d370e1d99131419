"""Per-cell geometric noise: budget split, sensitivities, the noise itself and its tails."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from sdclab import protection
from sdclab.censuses.us2010.catalog import CATALOG
from sdclab.censuses.us2010.population.synth import synthesize
from sdclab.core import noise
from sdclab.core.cellkey_analysis import geometric_tail, laplace_tail
from sdclab.core.tables.tabulate import tabulate
from sdclab.protection.geometric import (
    GeometricParameters,
    allocation,
    noise_tails,
    sensitivity,
    summed_laplace_pmf,
)


@pytest.fixture(scope="module")
def population():
    return synthesize(10_000, seed=12)


def test_tail_probabilities_against_the_closed_forms():
    # ε = 0.1, E = 40: 1.740% geometric (computed), 1.832% continuous Laplace (Bach's paper, Eq. 15)
    assert geometric_tail(0.1, 40) == pytest.approx(0.01740, abs=5e-6)
    assert laplace_tail(0.1, 40) == pytest.approx(math.exp(-4), rel=1e-12)
    values, probs = summed_laplace_pmf(10.0, 1)
    assert probs[np.abs(values) > 40].sum() == pytest.approx(geometric_tail(0.1, 40), rel=1e-9)
    # the sum of two: the convolution of the closed-form pmf
    two_v, two_p = summed_laplace_pmf(3.0, 2)
    k = np.arange(-200, 201)
    single = np.tanh(1 / 6) * np.exp(-np.abs(k) / 3)
    direct = np.convolve(single, single)
    at = {int(v): p for v, p in zip(two_v, two_p, strict=True)}
    for value in (0, 1, 5, -7, 20):
        assert at[value] == pytest.approx(direct[value + 400], rel=1e-9)


def test_sampled_tail_frequency_within_binomial_tolerance():
    draws = 400_000
    x = noise.discrete_laplace(Fraction(10), draws, np.random.default_rng(7))
    p = geometric_tail(0.1, 40)
    observed = (np.abs(x) > 40).sum()
    assert abs(observed - draws * p) < 4 * math.sqrt(draws * p * (1 - p))


def test_budget_split_and_sensitivities():
    params = GeometricParameters(epsilon=2)
    shares = allocation(params)
    assert sum(shares.values()) == 2
    person = sum(e for (name, _), e in shares.items() if CATALOG[name].schema.name != "unit")
    assert person == Fraction(2) * Fraction(675, 1000)
    even = allocation(GeometricParameters(epsilon=2, split="even"))
    assert sum(even.values()) == 2
    assert len({e for (_, lv), e in even.items() if lv == "block"}) == 1
    assert sensitivity(CATALOG["P1"], "unbounded") == 1
    assert sensitivity(CATALOG["P6"], "unbounded") == 6  # six race tallies
    assert sensitivity(CATALOG["P8"], "bounded") == 2
    card = protection.get("geometric").guarantee(params)
    assert card.guarantee.loss.epsilon == pytest.approx(2)  # the person and the unit tables
    assert card.guarantee.measure == "pure"


def test_every_cell_gets_noise_of_the_stated_scale(population):
    params = {"epsilon": "40"}
    release = protection.run("geometric", population, params, 3)
    truth = tabulate(population, ["P8"])["P8"].counts["block"][1].toarray()
    published = release.table("P8").dense("block", suppressed=0)  # nothing is suppressed
    x = (published - truth).ravel()
    assert (truth == 0).sum() > 10 * (truth > 0).sum()
    assert (published[truth == 0] != 0).any(), "empty cells must be noised too"
    share = allocation(GeometricParameters(epsilon=40))["P8", "block"]
    scale = float(1 / share)
    values, probs = summed_laplace_pmf(scale, 1)
    mean_abs = float((np.abs(values) * probs).sum())
    var_abs = float((values.astype(float) ** 2 * probs).sum()) - mean_abs**2
    assert abs(np.abs(x).mean() - mean_abs) < 4 * math.sqrt(var_abs / len(x))
    assert abs(x.mean()) < 4 * math.sqrt(float((values**2 * probs).sum()) / len(x))


def test_clamped_release_is_non_negative(population):
    release = protection.run("geometric", population, {"epsilon": "1", "nonnegative": "true"}, 3)
    tables = release.tables.values()
    assert all(table.matrix(level).min() >= 0 for table in tables for level in table.levels)


def test_tail_analysis_sampled_counts_match_the_expectation(population):
    release = protection.run("geometric", population, {"epsilon": "8"}, 5)
    tails = noise_tails(release, population)
    checked = 0
    for level in ("block", "block_group"):
        for row in tails.levels[level].classes:
            for event, tail in row.events.items():
                # a sum of independent indicators: variance ≤ expectation
                bound = 4 * math.sqrt(tail.expected) + 2
                assert abs(tail.sampled - tail.expected) <= bound, (level, row, event)
                checked += 1
    assert checked > 20
    block = {r.size_class: r for r in tails.levels["block"].classes}
    assert block["1-9"].events["depopulated"].sampled > 0  # tiny areas get published as empty


def test_an_epsilon_the_exact_sampler_cannot_take_is_refused_in_words():
    """An ε of 31 significant digits makes noise scales whose numerators pass 2^62: refused when
    the parameters are read (it was an internal error when drawing)."""
    from sdclab import protection
    from sdclab.core.errors import InputError

    geometric = protection.get("geometric")
    with pytest.raises(InputError, match="too many significant digits") as err:
        geometric.parse({"epsilon": "0.1234567890123456789012345678901"})
    assert "\n" not in str(err.value)
    assert geometric.parse({"epsilon": "0.123456789"}).epsilon
