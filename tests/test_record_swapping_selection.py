"""Targeted record swapping's selection and donors as recordSwap's (docs/swapping.md): every
risky household swapped whatever the rate, the rest of each bottom unit's share of the rate
filled with households drawn with probability proportional to their risk, quotas adding up to
the rate, donors drawn with probability proportional to their risk, seeded draws."""

from dataclasses import dataclass
from decimal import Decimal

import numpy as np

from sdclab.protection.record_swapping import (
    RecordCandidates,
    area_quotas,
    fill_draws,
    pair_records,
)
from sdclab.protection.swap_pairs import pair_within

AREAS, PER_AREA = 4, 5000


@dataclass(frozen=True)
class Settings:
    rate: Decimal
    risk_threshold: Decimal = Decimal(1)
    noisy_size_key: bool = False
    max_rounds: int = 50


def synthetic(risk: np.ndarray, high: np.ndarray) -> RecordCandidates:
    """AREAS bottom units of PER_AREA households each, every household a possible donor of any
    other unit (one scope, one profile everyone shares): pairing never lacks a donor."""
    n = risk.size
    home = np.repeat(np.arange(AREAS), n // AREAS)
    zeros = np.zeros(n, dtype=np.int64)
    return RecordCandidates(risk, high, zeros, (home,), (zeros,), ((zeros,),), home, (risk,))


def test_every_risky_household_swaps_even_beyond_the_rate():
    rng = np.random.default_rng(0)
    n = AREAS * PER_AREA
    high = np.zeros(n, dtype=bool)
    high[rng.choice(n, size=3000, replace=False)] = True  # 3000 at risk, 1000 pairs asked
    found = synthetic(np.where(high, 1.0, 0.1), high)
    initiators, donors = pair_records(found, Settings(Decimal("0.1")), np.random.default_rng(1))
    moved = np.zeros(n, dtype=bool)
    moved[np.concatenate([initiators, donors])] = True
    assert moved[high].all()
    assert len(initiators) >= 1500 > round(0.1 * n / 2)


def test_with_few_risky_households_the_pairs_are_the_rate_exactly():
    """20 risky households (about 5 a unit, under each unit's quota of 250 pairs): the fill
    makes up each unit's quota less its risky initiators, so the pairs are the rate's."""
    n = AREAS * PER_AREA
    high = np.zeros(n, dtype=bool)
    high[np.arange(0, n, n // 20)] = True
    found = synthetic(np.full(n, 0.5), high)
    for seed in range(3):
        initiators, donors = pair_records(
            found, Settings(Decimal("0.05")), np.random.default_rng(seed)
        )
        assert len(initiators) == round(0.05 * n / 2)
        moved = np.zeros(n, dtype=bool)
        moved[np.concatenate([initiators, donors])] = True
        assert moved[high].all()


def test_quotas_share_the_pairs_by_households_and_add_up_to_them():
    area = np.repeat(np.arange(3), [10, 20, 7])
    for seed in range(10):
        quota = area_quotas(area, 9, np.random.default_rng(seed))
        assert quota.sum() == 9
        share = 9 * np.array([10, 20, 7]) / 37
        assert (quota >= np.floor(share)).all() and (quota <= np.floor(share) + 1).all()


def test_the_fill_favours_the_riskier_households():
    """Half the households have risk 1, half 0.1 (population mean 0.55); 1000 fill pairs.

    Uniform draws: the initiators' mean risk is 0.55 with a standard deviation of at most
    0.45 / √1000 ≈ 0.014, so above 0.75 is a 14-sigma event. Draws proportional to risk: of
    each unit's 250 draws every one faces at least 2250 of its 2500 risk-1 households against
    at most 2500 at 0.1, so is risk 1 with probability at least 2250 / 2500 = 0.9; the mean is
    at least 0.91, with a standard deviation of at most 0.9 · √(0.9 · 0.1 / 1000) ≈ 0.009,
    so below 0.75 is a 17-sigma event."""
    n = AREAS * PER_AREA
    risk = np.where(np.arange(n) % 2 == 0, 1.0, 0.1)
    found = synthetic(risk, np.zeros(n, dtype=bool))
    initiators, _ = pair_records(found, Settings(Decimal("0.1")), np.random.default_rng(7))
    assert len(initiators) == 1000
    assert risk[initiators].mean() > risk.mean() + 0.2


def test_fill_draws_take_the_wanted_number_of_each_unit_and_skip_the_excluded():
    area = np.repeat(np.arange(3), 10)
    excluded = np.zeros(30, dtype=bool)
    excluded[:4] = True
    drawn = fill_draws(np.ones(30), area, np.array([8, -2, 3]), excluded, np.random.default_rng(0))
    np.testing.assert_array_equal(np.bincount(area[drawn], minlength=3), [6, 0, 3])
    assert not excluded[drawn].any() and np.unique(drawn).size == drawn.size


def test_the_same_seed_draws_the_same_pairs():
    n = AREAS * PER_AREA
    rng = np.random.default_rng(3)
    found = synthetic(rng.uniform(0.1, 1.0, n), rng.uniform(size=n) < 0.01)
    one = pair_records(found, Settings(Decimal("0.1")), np.random.default_rng(5))
    two = pair_records(found, Settings(Decimal("0.1")), np.random.default_rng(5))
    other = pair_records(found, Settings(Decimal("0.1")), np.random.default_rng(6))
    for a, b in zip(one, two, strict=True):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(one[0], other[0])


RISKY, DONORS, LOW = 400, 4000, 0.25
"""Donor tests: RISKY households at risk in unit 0; unit 1 holds DONORS households of risk 1
and DONORS of risk LOW, every one a possible donor (one profile, one scope)."""


def riskier_donor_share(low: float, seed: int) -> float:
    """The share of the risky households' donors that come from unit 1's first half (risk 1)
    when its other half has risk ``low`` (no rate: only the risky households swap)."""
    n = RISKY + 2 * DONORS
    home = np.repeat([0, 1], [RISKY, 2 * DONORS])
    high = home == 0
    weight = np.ones(n)
    weight[RISKY + DONORS :] = low
    zeros = np.zeros(n, dtype=np.int64)
    found = RecordCandidates(weight, high, zeros, (home,), (zeros,), ((zeros,),), home, (weight,))
    initiators, donors = pair_records(found, Settings(Decimal(0)), np.random.default_rng(seed))
    assert len(initiators) == RISKY and (home[donors] == 1).all()  # every risky one, from unit 1
    return float((donors < RISKY + DONORS).mean())


def test_donors_are_drawn_in_proportion_to_their_risk():
    """recordSwap draws a donor with probability proportional to its risk.

    Bound: the 400 donors are drawn one after another without replacement (largest risk /
    Exp(1) keys), so each is a risk-1 household with probability r1 / (r1 + 0.25 · r2), r1 and
    r2 the free households of each half (between 3600 and 4000): between
    3600 / (3600 + 1000) = 0.783 and 4000 / (4000 + 900) = 0.816. The count of risk-1 donors
    lies between Binomial(400, 0.783) and Binomial(400, 0.816), whose shares have a standard
    deviation of at most √(0.783 · 0.217 / 400) = 0.021: five of them give [0.679, 0.919].
    Uniform donors: the share is 0.5 with a standard deviation of at most 0.5 / √400 = 0.025, so
    at or above 0.679 is a 7-sigma event: the uniform draw fails this test."""
    for seed in range(2):
        assert 0.679 <= riskier_donor_share(LOW, seed) <= 0.919


def test_donors_of_equal_risk_are_drawn_uniformly():
    """The same households, all of risk 1: the first half's share is 0.5, within five standard
    deviations (0.5 / √400 = 0.025 at most): [0.375, 0.625], below the risk-weighted bound."""
    for seed in range(2):
        assert 0.375 <= riskier_donor_share(1.0, seed) <= 0.625


def test_pair_within_draws_the_weighted_side_in_proportion_to_weight():
    """Group 0: 100 takers, and 2000 of weight 4 and 2000 of weight 1 to take from (group 1's
    500 of weight 4 are nobody's), three seeds: 300 draws.

    Bound: within a call each draw is of weight 4 with probability between
    1900 · 4 / (1900 · 4 + 2000) = 0.792 and 2000 · 4 / (2000 · 4 + 1900) = 0.808, so the
    share of weight 4 lies between those of Binomial(300, 0.792) and Binomial(300, 0.808),
    standard deviation at most √(0.792 · 0.208 / 300) = 0.023: five of them give
    [0.675, 0.925]. Uniform: 0.5 with a standard deviation of at most 0.5 / √300 = 0.029, so
    at or above 0.675 is a 6-sigma event: the uniform draw fails this test."""
    takers = np.zeros(100, dtype=np.int64)
    groups = np.repeat([0, 0, 1], [2000, 2000, 500])
    weight = np.repeat([4.0, 1.0, 4.0], [2000, 2000, 500])
    heavy = []
    for seed in range(3):
        i, j = pair_within(takers, groups, np.random.default_rng(seed), weight)
        assert np.unique(i).size == np.unique(j).size == 100 and (groups[j] == 0).all()
        heavy.append(weight[j] == 4.0)
    assert 0.675 <= np.concatenate(heavy).mean() <= 0.925
