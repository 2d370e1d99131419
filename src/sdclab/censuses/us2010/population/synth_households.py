"""The synthetic generator's households and housing: occupied units (stage 1), the people in
them — relationship, sex and age (stage 3), tenure (stage 5) and vacant housing units (stage 6),
with the model parameters each stage draws from."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sdclab.censuses.us2010 import schema
from sdclab.censuses.us2010.population.synth_draws import (
    apportion,
    logit_shift_to_mean,
    sample_pmf,
    truncated_normal,
)
from sdclab.censuses.us2010.population.synth_geography import (
    MAX_BLOCKS_PER_BLOCK_GROUP,
    GeographyPlan,
)
from sdclab.censuses.us2010.population.synth_targets import (
    GQ_SHARE,
    HOUSEHOLD_SIZE_SHARES,
    MEAN_HOUSEHOLD_SIZE,
    MORTGAGE_SHARE_OF_OWNERS,
    OWNER_SHARE,
    VACANCY_SHARE,
)
from sdclab.core.arrays import BoolArray, FloatArray, IntArray
from sdclab.core.sampling import sample_rows

HOUSEHOLD_SIZE_MAX = 20
"""Largest household. The 7+ class is a truncated geometric tail over 7..20 whose mean is solved so
that the mean household size is MEAN_HOUSEHOLD_SIZE (the published shares need 7+ households of
about 10 persons on average)."""


# Households.
HOUSEHOLDER_AGE_EDGES = (25, 35, 45, 55, 65, 75)
"""Householder age bands <25, 25–34, …, 65–74, 75+ used by the spouse and tenure models."""
SPOUSE_BY_AGE = (0.45, 0.72, 0.78, 0.77, 0.82, 0.85, 0.74)
"""P(a householder of a household of 2+ persons has a spouse or partner) for householders aged <25,
25–34, …, 65–74, 75+ (roughly 2010 married couples plus unmarried partners)."""
SPOUSE_SIZE_ODDS = {2: 1.0, 3: 0.75, 4: 1.4, 5: 1.3}
"""Odds multipliers of having a spouse in households of 2, 3, 4 and 5+ persons (3-person households
include many single parents; larger ones are mostly couples with children)."""
MEMBER_ROLE_PROBABILITIES = {
    True: (0.87, 0.09, 0.04),
    False: (0.60, 0.24, 0.16),
}
"""P(child, other relative, non-relative) for members other than householder and spouse, by
whether the household has a spouse/partner."""
SAME_SEX_COUPLE_SHARE = 0.012
SPOUSE_AGE_GAP_SD = 4.5
SPOUSE_AGE_GAP_MEAN = 2.2
"""Husbands are on average 2.2 years older than wives."""
CHILD_GAP = (29.0, 6.5, 15, 45)
"""Householder's age minus child's age: normal (mean, sd) truncated to [15, 45]."""
CHILD_AT_HOME_EDGES = (18, 25, 30, 35)
CHILD_AT_HOME = (1.0, 0.42, 0.2, 0.1, 0.05)
"""Relative chance that a child of age <18, 18–24, 25–29, 30–34, 35+ still lives with the parent:
children who left home are not in the household, so co-resident children are mostly minors."""
GRANDCHILD_GAP = (47.0, 9.0, 30, 80)
"""Householder's age minus grandchild's age: normal (mean, sd) truncated to [30, 80]."""
PARENT_GAP = (28.0, 5.0, 15, 45)
"""Parent's age minus householder's age: normal (mean, sd) truncated to [15, 45]."""
PARENT_HEAD_AGE_MAX = 65
"""Householders older than this live with a sibling or other relative rather than a parent."""
ADULT_AGE_MAX = 104
"""Upper bound for ages drawn around another member's age (spouses, siblings, non-relatives)."""
OTHER_RELATIVE_KINDS = (0.46, 0.14, 0.40)
"""Other relatives: P(grandchild, parent, sibling or other); sibling when the first two are
impossible for the householder's age."""
NONRELATIVE_CHILD_SHARE = 0.15
SAME_RACE_IN_HOUSEHOLD = 0.9
"""P(a household member takes the householder's race and Hispanic origin)."""
AGE_BAND_STARTS = (15, 20, 25, 30, 35, 40, 45, 50, 55, 60, 65, 70, 75, 80, 85)
HOUSEHOLDER_AGE_WEIGHTS = {
    1: (0.6, 5.2, 7.8, 6.8, 5.5, 5.5, 7.5, 9.0, 10.0, 9.5, 7.2, 6.8, 6.8, 6.8, 5.4),
    2: (0.7, 5.6, 8.2, 6.2, 4.5, 4.5, 7.0, 10.0, 13.0, 13.0, 9.2, 7.2, 5.4, 3.9, 2.2),
    3: (0.8, 5.5, 10.0, 11.5, 11.5, 12.0, 13.0, 12.5, 9.0, 6.0, 3.2, 2.0, 1.4, 1.0, 0.5),
    4: (0.4, 2.5, 7.0, 13.0, 17.5, 18.5, 15.5, 10.5, 6.0, 3.5, 2.0, 1.3, 0.8, 0.5, 0.2),
    5: (0.3, 2.2, 6.5, 12.5, 17.5, 18.5, 16.0, 11.0, 6.5, 3.8, 2.2, 1.3, 0.8, 0.6, 0.3),
}
"""Relative weights of the 5-year householder age bands 15–19, …, 80–84, 85+ by household size
(1, 2, 3, 4, 5+): one-person households are oldest, households of four are youngest."""
HOUSEHOLDER_FEMALE_WITH_SPOUSE = 0.28
HOUSEHOLDER_FEMALE_ALONE = (0.51, 0.80)
"""P(householder is female) without a spouse: rises linearly from the first value at 40 to the
second at 85 (widows)."""
FEMALE_AT_BIRTH = 0.488
OTHER_FEMALE = 0.50
NONRELATIVE_FEMALE = 0.44
OLDEST_OLD_DECAY = (0.075, 0.012)
"""Ages above 85 (or above any open band) fall off as exp(-a·t - b·t²), t = years past the band's
start: as in 2010, the 90–94 are about 0.4 times the 85–89, about 1% of the 85+ are 100 or over
and well under 0.1% are 105 or over."""


# Group quarters: P(type) of GQ persons, facility size (lognormal median, log sd), P(female), ages.
GQ_TYPE_SHARES = {1: 0.25, 2: 0.02, 3: 0.19, 4: 0.02, 5: 0.32, 6: 0.04, 7: 0.16}
GQ_FACILITY_SIZE = {
    1: (200.0, 1.3),
    2: (25.0, 0.9),
    3: (90.0, 0.6),
    4: (30.0, 1.0),
    5: (180.0, 0.9),
    6: (150.0, 1.2),
    7: (10.0, 1.0),
}


GQ_FACILITY_MAX = 3_000
GQ_FEMALE = {1: 0.09, 2: 0.18, 3: 0.67, 4: 0.45, 5: 0.56, 6: 0.14, 7: 0.42}


AgeSegments = tuple[tuple[int, int, float], ...]
"""(first age, last age, weight) triples; weight is spread evenly over the ages, except that a
segment ending at AGE_MAX decays like the oldest old."""


GQ_AGES: dict[int, AgeSegments] = {
    1: (
        (18, 19, 4),
        (20, 29, 33),
        (30, 39, 28),
        (40, 49, 22),
        (50, 59, 10),
        (60, 64, 2),
        (65, 90, 1),
    ),
    2: ((10, 14, 15), (15, 17, 75), (18, 20, 10)),
    3: ((40, 64, 10), (65, 74, 12), (75, 84, 30), (85, schema.AGE_MAX, 48)),
    4: ((0, 17, 5), (18, 44, 30), (45, 64, 35), (65, 84, 20), (85, schema.AGE_MAX, 10)),
    5: ((17, 17, 2), (18, 19, 45), (20, 21, 35), (22, 24, 14), (25, 34, 4)),
    6: ((17, 19, 18), (20, 24, 50), (25, 29, 18), (30, 39, 12), (40, 49, 2)),
    7: (
        (0, 17, 5),
        (18, 24, 15),
        (25, 44, 30),
        (45, 64, 35),
        (65, 84, 12),
        (85, schema.AGE_MAX, 3),
    ),
}


# Tenure.
OWNER_BY_AGE = (0.16, 0.42, 0.63, 0.72, 0.77, 0.81, 0.78)
"""Owner rate for householders aged <25, 25–34, …, 65–74, 75+ (shifted on the logit scale so the
overall rate meets OWNER_SHARE exactly in expectation)."""
FREE_AND_CLEAR_BY_AGE = (0.08, 0.10, 0.13, 0.20, 0.32, 0.55, 0.72)
"""Free-and-clear rate among owners by the same age bands (shifted like OWNER_BY_AGE)."""


# Vacancy.
VACANT_IN_UNPOPULATED_SHARE = 0.08
"""Share of vacant housing units placed in blocks with no population (design assumption)."""
VACANCY_DISPERSION = 0.7
"""Gamma shape of the block vacancy factor: small values give resort areas and boarded-up blocks."""
POPULATED_BLOCK_SHARE = 0.56
"""Share of blocks with at least one person: 6,207,027 of 11,078,297 blocks in 2010. From 2.0 the
generator adds blocks without any unit until the populated blocks are this share of all blocks."""


def age_pmf(segments: AgeSegments) -> FloatArray:
    """Probability of each single year 0..AGE_MAX from weighted age segments."""
    pmf = np.zeros(schema.AGE_MAX + 1)
    decay_a, decay_b = OLDEST_OLD_DECAY
    for first, last, weight in segments:
        t = np.arange(last - first + 1, dtype=np.float64)
        shape = np.exp(-decay_a * t - decay_b * t**2) if last == schema.AGE_MAX else np.ones_like(t)
        pmf[first : last + 1] += weight * shape / shape.sum()
    return pmf / pmf.sum()


def banded_age_pmf(weights: tuple[float, ...]) -> FloatArray:
    """Age pmf from weights of the 5-year bands of AGE_BAND_STARTS (the last band is open)."""
    ends = [*(s - 1 for s in AGE_BAND_STARTS[1:]), schema.AGE_MAX]
    return age_pmf(tuple(zip(AGE_BAND_STARTS, ends, weights, strict=True)))


def household_size_pmf() -> FloatArray:
    """P(size) for sizes 0..HOUSEHOLD_SIZE_MAX: published shares, 7+ as a geometric tail."""
    shares = np.asarray(HOUSEHOLD_SIZE_SHARES) / sum(HOUSEHOLD_SIZE_SHARES)
    small = np.arange(1, len(shares))
    tail_sizes = np.arange(len(shares), HOUSEHOLD_SIZE_MAX + 1)
    needed = (MEAN_HOUSEHOLD_SIZE - float(shares[:-1] @ small)) / shares[-1]

    def tail(ratio: float) -> FloatArray:
        w = ratio ** (tail_sizes - tail_sizes[0]).astype(np.float64)
        return np.asarray(w / w.sum(), dtype=np.float64)

    low, high = 1e-6, 1.0 - 1e-9
    for _ in range(80):
        mid = (low + high) / 2
        low, high = (mid, high) if float(tail(mid) @ tail_sizes) < needed else (low, mid)
    pmf = np.zeros(HOUSEHOLD_SIZE_MAX + 1)
    pmf[small] = shares[:-1]
    pmf[tail_sizes] = shares[-1] * tail((low + high) / 2)
    return pmf


# =============================================================================================
# Stage 1: occupied units (households and group-quarters facilities) in sequence order
# =============================================================================================


@dataclass(frozen=True)
class OccupiedUnits:
    """Households and GQ facilities in their random sequence order (the order of the output)."""

    sizes: IntArray
    """Persons in each unit."""
    kind: IntArray
    """0 household; 1–7 group-quarters type (the contract's unit_type)."""

    @property
    def starts(self) -> IntArray:
        return np.cumsum(self.sizes) - self.sizes

    @property
    def is_household(self) -> BoolArray:
        return self.kind == 0


def draw_occupied_units(rng: np.random.Generator, n: int) -> OccupiedUnits:
    """Households and GQ facilities holding exactly ``n`` persons, shuffled into one sequence."""
    n_gq = min(round(GQ_SHARE * n), n - 1)
    hh_sizes = household_sizes(rng, n - n_gq)
    gq_kind, gq_sizes = gq_facilities(rng, n_gq)
    sizes = np.concatenate([hh_sizes, gq_sizes])
    kind = np.concatenate([np.zeros(len(hh_sizes), dtype=np.int64), gq_kind])
    order = rng.permutation(len(sizes))
    return OccupiedUnits(sizes=sizes[order], kind=kind[order])


def household_sizes(rng: np.random.Generator, n_persons: int) -> IntArray:
    """I.i.d. household sizes from the target distribution; the last is cut to sum to the total."""
    pmf = household_size_pmf()
    mean = float(pmf @ np.arange(len(pmf)))
    sizes = np.zeros(0, dtype=np.int64)
    while sizes.sum() < n_persons:
        batch = int(1.05 * (n_persons - sizes.sum()) / mean) + 16
        sizes = np.concatenate([sizes, sample_pmf(rng, pmf, batch)])
    total = np.cumsum(sizes)
    last = int(np.searchsorted(total, n_persons, side="left"))
    sizes = sizes[: last + 1].copy()
    sizes[last] = n_persons - (total[last - 1] if last > 0 else 0)
    return sizes


def gq_facilities(rng: np.random.Generator, n_gq: int) -> tuple[IntArray, IntArray]:
    """(type, size) of GQ facilities holding ``n_gq`` persons split by type as GQ_TYPE_SHARES."""
    types = np.array(list(GQ_TYPE_SHARES), dtype=np.int64)
    per_type = apportion(n_gq, np.array(list(GQ_TYPE_SHARES.values())))
    kinds, sizes = [], []
    for gq_type, persons in zip(types, per_type, strict=True):
        if persons == 0:
            continue
        median, log_sd = GQ_FACILITY_SIZE[int(gq_type)]
        drawn = np.zeros(0, dtype=np.int64)
        while drawn.sum() < persons:
            batch = np.clip(np.round(median * rng.lognormal(0.0, log_sd, 32)), 1, GQ_FACILITY_MAX)
            drawn = np.concatenate([drawn, batch.astype(np.int64)])
        total = np.cumsum(drawn)
        last = int(np.searchsorted(total, persons, side="left"))
        drawn = drawn[: last + 1].copy()
        drawn[last] = persons - (total[last - 1] if last > 0 else 0)
        sizes.append(drawn)
        kinds.append(np.full(len(drawn), gq_type, dtype=np.int64))
    if not sizes:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(kinds), np.concatenate(sizes)


# =============================================================================================
# Stage 3: people — relationship, sex and age
# =============================================================================================


@dataclass(frozen=True)
class People:
    """Person attributes in sequence order (persons of unit 0, then unit 1, …)."""

    unit: IntArray
    relationship: IntArray
    sex: IntArray
    age: IntArray


def draw_people(rng: np.random.Generator, units: OccupiedUnits) -> People:
    """Relationship, sex and age of every person, households built around their householder."""
    unit = np.repeat(np.arange(len(units.sizes)), units.sizes)
    position = np.arange(len(unit)) - units.starts[unit]
    kind = units.kind[unit]

    hh_age, hh_female, has_spouse = draw_householders(rng, units)
    relationship = member_relationships(rng, unit, position, kind, has_spouse)
    age = np.zeros(len(unit), dtype=np.int64)
    female = np.zeros(len(unit), dtype=bool)
    head_age, head_female = hh_age[unit], hh_female[unit]

    is_head = relationship == 0
    age[is_head], female[is_head] = head_age[is_head], head_female[is_head]
    for role, drawer in ((1, spouse_age_sex), (2, child_age_sex), (3, relative_age_sex)):
        member = np.flatnonzero(relationship == role)
        age[member], female[member] = drawer(rng, head_age[member], head_female[member])
    member = np.flatnonzero(relationship == 4)
    age[member], female[member] = nonrelative_age_sex(rng, head_age[member])
    for gq_type in GQ_TYPE_SHARES:
        member = np.flatnonzero(kind == gq_type)
        age[member] = sample_pmf(rng, age_pmf(GQ_AGES[gq_type]), len(member))
        female[member] = rng.random(len(member)) < GQ_FEMALE[gq_type]
    sex = np.where(female, 2, 1).astype(np.int64)
    return People(unit=unit, relationship=relationship, sex=sex, age=age)


def draw_householders(
    rng: np.random.Generator, units: OccupiedUnits
) -> tuple[IntArray, BoolArray, BoolArray]:
    """Per unit: householder age, householder is female, a spouse/partner is present."""
    n_units = len(units.sizes)
    size_class = np.minimum(units.sizes, len(HOUSEHOLDER_AGE_WEIGHTS))
    age = np.zeros(n_units, dtype=np.int64)
    for size, weights in HOUSEHOLDER_AGE_WEIGHTS.items():
        member = np.flatnonzero(units.is_household & (size_class == size))
        age[member] = sample_pmf(rng, banded_age_pmf(weights), len(member))
    band = np.searchsorted(np.asarray(HOUSEHOLDER_AGE_EDGES), age, side="right")
    odds = np.asarray(SPOUSE_BY_AGE)[band] / (1 - np.asarray(SPOUSE_BY_AGE)[band])
    size_odds = np.zeros(max(SPOUSE_SIZE_ODDS) + 1)  # one-person households: no spouse
    size_odds[list(SPOUSE_SIZE_ODDS)] = list(SPOUSE_SIZE_ODDS.values())
    odds *= size_odds[size_class]
    has_spouse = units.is_household & (rng.random(n_units) < odds / (1 + odds))
    low, high = HOUSEHOLDER_FEMALE_ALONE
    p_alone = low + (high - low) * np.clip((age - 40) / 45, 0, 1)
    p_female = np.where(has_spouse, HOUSEHOLDER_FEMALE_WITH_SPOUSE, p_alone)
    female = rng.random(n_units) < p_female
    return age, female, has_spouse


def member_relationships(
    rng: np.random.Generator,
    unit: IntArray,
    position: IntArray,
    kind: IntArray,
    has_spouse: BoolArray,
) -> IntArray:
    """0 householder (first member), 1 spouse (second, if present), 2–4 others, 5 GQ resident."""
    spouse_here = has_spouse[unit]
    relationship = np.full(len(unit), schema.GQ_RESIDENT, dtype=np.int64)
    in_household = kind == 0
    relationship[in_household & (position == 0)] = 0
    relationship[in_household & (position == 1) & spouse_here] = 1
    others = np.flatnonzero(in_household & (position > 0) & ~((position == 1) & spouse_here))
    u = rng.random(len(others))
    with_spouse = spouse_here[others]
    for flag, (p_child, p_relative, _) in MEMBER_ROLE_PROBABILITIES.items():
        rows = with_spouse == flag
        role = np.where(u < p_child, 2, np.where(u < p_child + p_relative, 3, 4))
        relationship[others[rows]] = role[rows]
    return relationship


def spouse_age_sex(
    rng: np.random.Generator, head_age: IntArray, head_female: BoolArray
) -> tuple[IntArray, BoolArray]:
    """Spouses: mostly the opposite sex, husbands about two years older than wives."""
    same_sex = rng.random(len(head_age)) < SAME_SEX_COUPLE_SHARE
    female = head_female ^ ~same_sex
    direction = np.where(female & ~head_female, -1.0, np.where(~female & head_female, 1.0, 0.0))
    centre = head_age + SPOUSE_AGE_GAP_MEAN * direction
    return ages_near(rng, centre, SPOUSE_AGE_GAP_SD, 16, ADULT_AGE_MAX), female


def child_age_sex(
    rng: np.random.Generator, head_age: IntArray, head_female: BoolArray
) -> tuple[IntArray, BoolArray]:
    """Children: 15–45 years younger than the householder, mostly still minors."""
    age = sample_rows(rng, child_age_table(), head_age)
    return age, rng.random(len(head_age)) < FEMALE_AT_BIRTH


def child_age_table() -> FloatArray:
    """P(child's age | householder's age): rows householder age, columns child age.

    The parent's age at the birth is a truncated normal (CHILD_GAP), weighted by the chance that a
    child of that age still lives at home (CHILD_AT_HOME).
    """
    mean, sd, low, high = CHILD_GAP
    ages = np.arange(schema.AGE_MAX + 1)
    gap = ages[:, None] - ages[None, :]
    density = np.exp(-0.5 * ((gap - mean) / sd) ** 2) * ((gap >= low) & (gap <= high))
    at_home = np.asarray(CHILD_AT_HOME)[np.searchsorted(CHILD_AT_HOME_EDGES, ages, side="right")]
    table = density * at_home[None, :]
    table[table.sum(axis=1) == 0, 0] = 1.0
    return np.asarray(table / table.sum(axis=1, keepdims=True), dtype=np.float64)


def relative_age_sex(
    rng: np.random.Generator, head_age: IntArray, head_female: BoolArray
) -> tuple[IntArray, BoolArray]:
    """Other relatives: grandchildren, parents, or siblings and others of similar age."""
    n = len(head_age)
    head = head_age.astype(np.float64)
    kind = sample_pmf(rng, np.asarray(OTHER_RELATIVE_KINDS), n)
    g_mean, g_sd, g_low, g_high = GRANDCHILD_GAP
    p_mean, p_sd, p_low, p_high = PARENT_GAP
    kind[(kind == 0) & (head < g_low)] = 2
    kind[(kind == 1) & (head > PARENT_HEAD_AGE_MAX)] = 2
    grandchild = head - truncated_normal(rng, g_mean, g_sd, g_low, np.clip(head, g_low, g_high))
    parent = head + truncated_normal(rng, p_mean, p_sd, p_low, np.full(n, float(p_high)))
    sibling = ages_near(rng, head, 8.0, 0, ADULT_AGE_MAX)
    age = np.select([kind == 0, kind == 1], [np.round(grandchild), np.round(parent)], sibling)
    return np.clip(age, 0, schema.AGE_MAX).astype(np.int64), rng.random(n) < OTHER_FEMALE


def nonrelative_age_sex(rng: np.random.Generator, head_age: IntArray) -> tuple[IntArray, BoolArray]:
    """Non-relatives: mostly adults near the householder's age, some children."""
    n = len(head_age)
    adult = ages_near(rng, head_age.astype(np.float64), 10.0, 15, ADULT_AGE_MAX)
    child = rng.integers(0, 18, n)
    age = np.where(rng.random(n) < NONRELATIVE_CHILD_SHARE, child, adult).astype(np.int64)
    return age, rng.random(n) < NONRELATIVE_FEMALE


def ages_near(
    rng: np.random.Generator, centre: FloatArray, sd: float, low: int, high: int
) -> IntArray:
    """Whole ages normally spread around ``centre``, kept in [low, high] without piling up at the
    bounds (truncated, not clipped)."""
    centre = np.clip(centre, low, high)
    return np.round(truncated_normal(rng, centre, sd, low, high)).astype(np.int64)


# =============================================================================================
# Stage 5: tenure
# =============================================================================================


def draw_tenure(rng: np.random.Generator, units: OccupiedUnits, people: People) -> IntArray:
    """Tenure of each household (0 for GQ): owners more often older, free and clear more so."""
    households = np.flatnonzero(units.is_household)
    head_age = people.age[units.starts[households]]
    band = np.searchsorted(np.asarray(HOUSEHOLDER_AGE_EDGES), head_age, side="right")
    counts = np.bincount(band, minlength=len(OWNER_BY_AGE)).astype(np.float64)
    p_owner = logit_shift_to_mean(np.asarray(OWNER_BY_AGE), counts, OWNER_SHARE)[band]
    owner = rng.random(len(households)) < p_owner
    owner_counts = np.bincount(band[owner], minlength=len(OWNER_BY_AGE)).astype(np.float64)
    p_free = logit_shift_to_mean(
        np.asarray(FREE_AND_CLEAR_BY_AGE), owner_counts + 1e-9, 1 - MORTGAGE_SHARE_OF_OWNERS
    )[band]
    free = rng.random(len(households)) < p_free
    tenure = np.zeros(len(units.sizes), dtype=np.int64)
    tenure[households] = np.where(owner, np.where(free, 2, 1), 3)
    return tenure


# =============================================================================================
# Stage 6: vacant housing units
# =============================================================================================


def with_empty_blocks(
    rng: np.random.Generator, plan: GeographyPlan, populated: IntArray, with_units: IntArray
) -> tuple[GeographyPlan, IntArray]:
    """The plan renumbered with blocks without any unit among its blocks, and their geocodes.

    Blocks without a unit are added until the populated blocks are
    :data:`POPULATED_BLOCK_SHARE` of all blocks (candidate blocks no unit fell into count among
    them); each block group gets a share in proportion to its blocks, at most up to its 999
    block numbers, and the new blocks take random places among the old, whose order (and so the
    order of persons by geocode) is kept. ``populated`` and ``with_units`` are the plan's blocks
    of the persons and of every unit.
    """
    n_candidates = len(plan.block_code)
    wanted = max(0, round(np.unique(populated).size / POPULATED_BLOCK_SHARE) - n_candidates)
    bg_code = plan.block_code // 1_000
    groups, group_of = np.unique(bg_code, return_inverse=True)
    sizes = np.bincount(group_of, minlength=len(groups))
    room = MAX_BLOCKS_PER_BLOCK_GROUP - sizes
    added = np.minimum(rng.multinomial(wanted, sizes / sizes.sum()), room)
    # every slot of a block group, old blocks (0) and new (1), in a random order within the group
    slot_group = np.concatenate([group_of, np.repeat(np.arange(len(groups)), added)])
    is_new = np.concatenate([np.zeros(n_candidates, bool), np.ones(int(added.sum()), bool)])
    order = np.lexsort((rng.random(len(slot_group)), slot_group))
    number = np.empty(len(slot_group), dtype=np.int64)
    first = np.searchsorted(slot_group[order], slot_group[order], side="left")
    number[order] = np.arange(len(order)) - first
    # in that order each group's numbers ascend, so its old-block slots, read in order, are the
    # numbers of its old blocks in theirs (candidates are grouped by block group, ascending)
    old_numbers = number[order][~is_new[order]]
    codes = groups[slot_group] * 1_000 + number
    block_code = groups[group_of] * 1_000 + old_numbers
    used = np.zeros(n_candidates, bool)
    used[np.unique(with_units)] = True
    empty = np.concatenate([codes[is_new], block_code[~used]])
    renumbered = GeographyPlan(plan.block_end, block_code, plan.block_tract, plan.n_tracts)
    return renumbered, empty


def draw_vacant_units(
    rng: np.random.Generator, plan: GeographyPlan, units: OccupiedUnits, unit_block: IntArray
) -> IntArray:
    """Block index of each vacant housing unit (VACANCY_SHARE of all housing units)."""
    n_households = int(units.is_household.sum())
    n_vacant = round(n_households * VACANCY_SHARE / (1 - VACANCY_SHARE))
    n_blocks = len(plan.block_end)
    households = np.bincount(unit_block[units.is_household], minlength=n_blocks)
    populated = np.bincount(unit_block, minlength=n_blocks) > 0
    empty = np.flatnonzero(~populated)
    n_unpopulated = round(VACANT_IN_UNPOPULATED_SHARE * n_vacant) if len(empty) else 0
    weight = households * rng.gamma(VACANCY_DISPERSION, 1.0, n_blocks)
    if weight.sum() <= 0:
        weight = populated.astype(np.float64)
    in_populated = rng.multinomial(n_vacant - n_unpopulated, weight / weight.sum())
    in_empty = np.zeros(n_blocks, dtype=np.int64)
    if n_unpopulated:
        in_empty[empty] = rng.multinomial(n_unpopulated, np.full(len(empty), 1 / len(empty)))
    return np.repeat(np.arange(n_blocks), in_populated + in_empty).astype(np.int64)
