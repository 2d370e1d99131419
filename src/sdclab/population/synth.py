"""Seeded synthetic census population, calibrated to published 2010 national marginals.

Real census microdata is confidential, so the lab ships a generator whose output looks like a census
edited file where it matters for disclosure control: many small blocks, segregated neighbourhoods,
households of related people, group-quarters facilities and rare race combinations
(docs/synthetic-population.md).

The generator works on one random *sequence* of occupied units (households and group-quarters
facilities). Every level of geography is a run of consecutive positions in that sequence, measured
in persons: blocks are runs of lognormal length, block groups and tracts runs of bounded length,
counties groups of tracts and states groups of counties. A unit belongs to the block that contains
its midpoint, so the hierarchy nests by construction and persons come out in geocode order.

Everything is vectorised numpy; the only Python loops run over a handful of categories (household
size classes, group-quarters types, relationship roles). Each stage draws from its own child stream
of one PCG64 generator, so a change to one stage does not reshuffle the others.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl
from scipy import special

from sdclab import schema
from sdclab.arrays import BoolArray, FloatArray, IntArray
from sdclab.errors import InputError
from sdclab.geography import truncate
from sdclab.population.contract import (
    HISPANIC_ORIGIN,
    PERSONS,
    RACE_CODE_COLUMNS,
    UNITS,
    Population,
)
from sdclab.randomness import make_rng

GENERATOR_VERSION = "2.0"
"""The version :func:`synthesize` makes unless told; bumped whenever a change alters the output
for a given seed. 1.1 added the detailed race and Hispanic origin columns; every column of 1.0 is
unchanged for every seed. 1.2 added the geography counts (a population made without them is
unchanged). 2.0 makes tracts diverse or dominated by one group, mixes race and ethnicity within
households as the 2010 census found them and adds blocks without any unit (:data:`RACE_MIXING`,
:data:`POPULATED_BLOCK_SHARE`)."""
GENERATOR_VERSIONS = ("1.2", "2.0")
"""The versions :func:`synthesize` can make, so that a study of an earlier version reproduces
byte for byte (1.0 and 1.1 are the populations 1.2 makes without geography counts)."""

# =============================================================================================
# Targets: published 2010 national figures (and one design assumption), with test tolerances
# =============================================================================================

RACE_GROUPS = ("white", "black", "aian", "asian", "nhopi", "sor", "two_or_more")
"""The seven race groups: the six OMB races alone (in bit order), then two or more races."""

RACE_ALONE_SHARES = {
    "white": 0.724,
    "black": 0.126,
    "aian": 0.009,
    "asian": 0.048,
    "nhopi": 0.002,
    "sor": 0.062,
    "two_or_more": 0.029,
}
"""Share of all persons in each race group (2010)."""

HISPANIC_SHARE = 0.163
HISPANIC_RACE_SPLIT = {
    "white": 0.530,
    "black": 0.025,
    "aian": 0.014,
    "asian": 0.004,
    "nhopi": 0.001,
    "sor": 0.367,
    "two_or_more": 0.060,
}
"""How Hispanic persons split over the race groups (2010; renormalised on use)."""

FEMALE_SHARE = 0.508
MEDIAN_AGE = 37.2
UNDER_18_SHARE = 0.240
AGE_65_PLUS_SHARE = 0.130

HOUSEHOLD_SIZE_SHARES = (0.267, 0.336, 0.158, 0.135, 0.062, 0.024, 0.017)
"""Share of households with 1, 2, …, 6 and 7 or more persons (2010; sums to 0.999 by rounding)."""
MEAN_HOUSEHOLD_SIZE = 2.58
OWNER_SHARE = 0.651
"""Owner-occupied share of occupied housing units."""
MORTGAGE_SHARE_OF_OWNERS = 2 / 3
"""About two thirds of owner-occupied units are owned with a mortgage or loan."""
VACANCY_SHARE = 0.114
"""Vacant share of all housing units."""
GQ_SHARE = 0.026
"""Share of persons living in group quarters."""
MEAN_PERSONS_PER_POPULATED_BLOCK = 50.0
"""308,745,538 persons / 6,207,027 populated blocks ≈ 49.7."""
SMALL_BLOCK_SHARE = 0.30
"""Share of populated blocks with 1–9 persons. No published figure in our sources: a design
assumption that gives the many tiny blocks the disclosure literature relies on."""


@dataclass(frozen=True)
class Target:
    """One marginal the generator aims at, and how far the tests let a generated value stray.

    ``tolerance`` is absolute, in the target's unit, unless ``relative`` is true, in which case it
    is a fraction of ``value`` (see TOLERANCES for how they were chosen).
    """

    value: float
    tolerance: float
    unit: str
    description: str
    relative: bool = False
    source: str = "2010 census"

    def bounds(self) -> tuple[float, float]:
        """The closed interval of accepted generated values."""
        width = self.tolerance * abs(self.value) if self.relative else self.tolerance
        return self.value - width, self.value + width

    def accepts(self, generated: float) -> bool:
        low, high = self.bounds()
        return low <= generated <= high


TOLERANCES = {
    "race_white_pct": 0.8,
    "race_black_pct": 0.6,
    "race_aian_pct": 0.2,
    "race_asian_pct": 0.4,
    "race_nhopi_pct": 0.1,
    "race_sor_pct": 0.4,
    "race_two_or_more_pct": 0.3,
    "hispanic_pct": 0.6,
    "female_pct": 0.5,
    "median_age": 0.6,
    "under_18_pct": 0.7,
    "age_65_plus_pct": 0.7,
    "household_size_1_pct": 0.9,
    "household_size_2_pct": 0.8,
    "household_size_3_pct": 0.7,
    "household_size_4_pct": 0.7,
    "household_size_5_pct": 0.5,
    "household_size_6_pct": 0.35,
    "household_size_7_plus_pct": 0.25,
    "mean_household_size": 0.035,
    "owner_occupied_pct": 0.9,
    "mortgage_pct_of_owners": 1.2,
    "vacancy_pct": 0.05,
    "gq_persons_pct": 0.05,
    "mean_persons_per_populated_block": 0.15,
    "blocks_1_to_9_persons_pct": 0.15,
}
"""Test tolerances at TOLERANCE_N_PERSONS persons, in the target's unit: at least five standard
deviations of the generated value over seeds (measured over 140 seeds, see
docs/synthetic-population.md) plus the generator's remaining bias, rounded up. Vacancy and group
quarters are fixed counts, so their tolerance only allows for rounding. The two block-size figures
are relative (±15%); for the mean block size that is about four standard deviations, because a
heavy-tailed block-size distribution makes the block count vary by about 4% at this size."""
TOLERANCE_N_PERSONS = 200_000


def _build_targets() -> dict[str, Target]:
    """All marginals the tests check, keyed by the names used in ``synth.json``."""
    spec: dict[str, tuple[float, str, str]] = {}
    for group, share in RACE_ALONE_SHARES.items():
        label = "two or more races" if group == "two_or_more" else f"{group} alone"
        spec[f"race_{group}_pct"] = (100 * share, "% of persons", f"race: {label}")
    spec["hispanic_pct"] = (100 * HISPANIC_SHARE, "% of persons", "Hispanic or Latino")
    spec["female_pct"] = (100 * FEMALE_SHARE, "% of persons", "female")
    spec["median_age"] = (MEDIAN_AGE, "years", "median age (single years as intervals)")
    spec["under_18_pct"] = (100 * UNDER_18_SHARE, "% of persons", "aged under 18")
    spec["age_65_plus_pct"] = (100 * AGE_65_PLUS_SHARE, "% of persons", "aged 65 and over")
    top = len(HOUSEHOLD_SIZE_SHARES)
    for size, share in enumerate(HOUSEHOLD_SIZE_SHARES, start=1):
        label = f"{size} or more persons" if size == top else f"{size} person(s)"
        key = f"household_size_{size}{'_plus' if size == top else ''}_pct"
        spec[key] = (100 * share, "% of households", f"households of {label}")
    spec["mean_household_size"] = (MEAN_HOUSEHOLD_SIZE, "persons", "persons per household")
    spec["owner_occupied_pct"] = (100 * OWNER_SHARE, "% of households", "owner occupied")
    spec["mortgage_pct_of_owners"] = (
        100 * MORTGAGE_SHARE_OF_OWNERS,
        "% of owner-occupied units",
        "owned with a mortgage or loan",
    )
    spec["vacancy_pct"] = (100 * VACANCY_SHARE, "% of housing units", "vacant")
    spec["gq_persons_pct"] = (100 * GQ_SHARE, "% of persons", "living in group quarters")
    spec["mean_persons_per_populated_block"] = (
        MEAN_PERSONS_PER_POPULATED_BLOCK,
        "persons",
        "mean persons per populated block",
    )
    spec["blocks_1_to_9_persons_pct"] = (
        100 * SMALL_BLOCK_SHARE,
        "% of populated blocks",
        "populated blocks with 1-9 persons",
    )
    sources = {
        "mortgage_pct_of_owners": "approximate (about two thirds of owners)",
        "mean_persons_per_populated_block": "2010 census (308.7 million / 6.2 million blocks)",
        "blocks_1_to_9_persons_pct": "design assumption (no published figure in our sources)",
    }
    relative = {"mean_persons_per_populated_block", "blocks_1_to_9_persons_pct"}
    return {
        name: Target(
            value=round(value, 6),  # 100 * 0.724 is 72.39999… in binary
            tolerance=TOLERANCES[name],
            unit=unit,
            description=description,
            relative=name in relative,
            source=sources.get(name, "2010 census"),
        )
        for name, (value, unit, description) in spec.items()
    }


TARGETS: dict[str, Target] = _build_targets()
"""Every checked marginal: the single place the tests and ``synth.json`` read targets from."""

# =============================================================================================
# Model parameters (tuned so that the generated marginals meet TARGETS)
# =============================================================================================

HOUSEHOLD_SIZE_MAX = 20
"""Largest household. The 7+ class is a truncated geometric tail over 7..20 whose mean is solved so
that the mean household size is MEAN_HOUSEHOLD_SIZE (the published shares need 7+ households of
about 10 persons on average)."""

# Geography: persons per geounit.
BLOCK_LOG_MEAN = 2.85
BLOCK_LOG_SD = 1.41
BLOCK_CAPACITY_MAX = 4_000.0
"""Lognormal block capacities in persons (capped), before units are packed into them. Packing
leaves some tiny blocks empty, so the parameters are tuned on the realised figures: mean ≈ 50
persons per populated block, ≈ 30% of populated blocks with 1–9 persons, ≈ 0.25% with 1,000+."""
TRACT_PERSONS = 4_000
TRACT_LOG_SD = 0.35
TRACT_PERSONS_RANGE = (1_500, 7_500)
"""Tract targets: lognormal around 4,000, clipped so realised tracts stay within 1,200–8,000."""
BLOCK_GROUP_PERSONS = 1_400
BLOCK_GROUP_WEIGHT_RANGE = (0.7, 1.3)
MAX_BLOCK_GROUPS_PER_TRACT = 9
MAX_BLOCKS_PER_BLOCK_GROUP = 1_000
COUNTY_PERSONS = 100_000
COUNTY_LOG_SD = 1.4
"""Counties: about one per 100,000 persons, with heavy-tailed sizes (2010: 3,143 counties, median
≈ 26,000, mean ≈ 98,000 persons)."""
STATE_PERSONS = 6_000_000
STATE_LOG_SD = 0.5
STATE_FIPS = (
    1, 2, 4, 5, 6, 8, 9, 10, 11, 12, 13, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28,
    29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 44, 45, 46, 47, 48, 49, 50, 51, 53, 54,
    55, 56,
)  # fmt: skip
"""FIPS codes of the 50 states and DC, in order."""

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

# Segregation: tract mix ~ Dirichlet(TRACT · national), block mix ~ Dirichlet(BLOCK · tract mix).
TRACT_CONCENTRATION = 2.0
BLOCK_CONCENTRATION = 4.0
MIX_FLOOR = 1e-3
"""Weight of the national mix blended into every block mix, so every group can occur anywhere."""


@dataclass(frozen=True)
class HouseholdMixing:
    """How a household member's race and Hispanic origin relate to the householder's (2.0)."""

    same: tuple[float, float, float, float]
    """P(a spouse or partner, a child, another relative, a non-relative takes the householder's
    race and Hispanic origin); otherwise the member keeps their own draw from the block's mix."""
    child_of_both: float
    """P(a child of a couple of different race or origin takes both parents' races (the union of
    the bitmasks) and one parent's origin, at random); otherwise one parent's race and origin."""


@dataclass(frozen=True)
class TractKinds:
    """Tracts of two kinds (2.0): diverse ones, whose mix is close to the national mix, and ones
    dominated by one of :data:`DOMINANT_GROUPS`, whose blocks are nearly all of that group."""

    diverse_share: float
    """Share of tracts that are diverse (made exactly, rounded; the others are dominated)."""
    diverse_concentration: float
    """A diverse tract's mix is Dirichlet(this × national mix)."""
    dominance: float
    """A dominated tract's mix is Dirichlet(tract_concentration × national mix + this × its
    group's profile): with 10 and 80, its group makes about 96% of a white tract, 90% of a black
    or Hispanic one. Dominant groups are dealt to the dominated tracts in proportion to their
    persons (systematic sampling), so that a population of a few tracts still has the country's
    kinds of places and the raking to national totals need not mix them."""


@dataclass(frozen=True)
class RaceMixing:
    """Segregation between tracts and blocks and mixing within households: one version's."""

    tract_concentration: float
    """A tract's mix is Dirichlet(this × national mix) (1.x); with ``tracts``, the part of a
    dominated tract's that is not its group's."""
    block_concentration: float
    mix_floor: float
    household: HouseholdMixing | None
    """None: every member copies the householder with P = :data:`SAME_RACE_IN_HOUSEHOLD` (1.x)."""
    tracts: TractKinds | None = None
    """None: every tract's mix is drawn alike (1.x)."""


RACE_MIXING = {
    "1.2": RaceMixing(TRACT_CONCENTRATION, BLOCK_CONCENTRATION, MIX_FLOOR, None),
    "2.0": RaceMixing(
        tract_concentration=10.0,
        block_concentration=20.0,
        mix_floor=0.005,
        household=HouseholdMixing(same=(0.71, 0.95, 0.85, 0.3), child_of_both=0.15),
        tracts=TractKinds(diverse_share=0.45, diverse_concentration=50.0, dominance=80.0),
    ),
}
"""Race and ethnicity mixing by generator version. 2.0: neighbourhoods are of two kinds, as in
2010: diverse ones, where every group lives (in the most multi-ethnic metropolitan regions about
half the residents lived in neighbourhoods where whites, blacks, Hispanics and Asians all lived;
Logan and Zhang, "Global Neighborhoods: New Evidence from Census 2010", US2010 Project, 2011),
and ones dominated by white, black or Hispanic persons (:data:`DOMINANT_GROUPS`). 45% of tracts
are diverse and 55% dominated; blocks follow their tract's mix (Dirichlet(20 × tract mix)), with
0.5% of the national mix blended in so that every group is possible everywhere. These shares and
concentrations are design assumptions, calibrated so that the proportional guesser's precision
on nonmodal persons and the blocks the exact tables pin down fall in the attack paper's ranges.
The average white person's tract is then 78–79% white, the average black person's 52–54% black
and the average Hispanic person's 54–56% Hispanic, against 79%, 46% and 45% nationally in
2005–2009 (Frey, Brookings, 2010): black and Hispanic persons a little more isolated than they
were. About 10% of married and 18% of unmarried opposite-sex
couples were of different race or Hispanic origin in 2010 (Census Bureau, "Households and
Families: 2010", C2010BR-14): a spouse or partner copies the householder with P = 0.71 and
otherwise keeps their own draw from the block, which makes about 10.5% of couples differ.
docs/synthetic-population.md has every figure."""
DOMINANT_GROUPS = ("white", "black", "hispanic")
"""The groups that dominate tracts (2.0): non-Hispanic white, non-Hispanic black and Hispanic
persons, the three large groups whose average member's tract was mostly or nearly half their own
group (79%, 46% and 45% in 2005–2009; Frey, Brookings, 2010). Smaller groups (Asian persons, 4.8%
of the country, and the rest) live in the diverse tracts and as minorities: a design assumption
that leaves out the few tracts of Asian, American Indian or Pacific Islander enclaves."""
POPULATED_BLOCK_SHARE = 0.56
"""Share of blocks with at least one person: 6,207,027 of 11,078,297 blocks in 2010. From 2.0 the
generator adds blocks without any unit until the populated blocks are this share of all blocks."""
IPF_ITERATIONS = 200
IPF_TOLERANCE = 1e-9

TWO_RACE_WEIGHTS = {
    ("white", "black"): 1834,
    ("white", "sor"): 1741,
    ("white", "asian"): 1623,
    ("white", "aian"): 1432,
    ("black", "sor"): 315,
    ("black", "aian"): 269,
    ("asian", "sor"): 234,
    ("black", "asian"): 186,
    ("white", "nhopi"): 170,
    ("asian", "nhopi"): 166,
    ("aian", "asian"): 59,
    ("nhopi", "sor"): 59,
    ("aian", "sor"): 58,
    ("black", "nhopi"): 50,
    ("aian", "nhopi"): 11,
}
"""Relative sizes of the 15 two-race combinations (2010, thousands of persons)."""
MULTI_RACE_BIT_COUNT_SHARES = {2: 0.917, 3: 0.075, 4: 0.0065, 5: 0.001, 6: 0.0001}
"""Share of the two-or-more-races population by number of races reported (2010, approximately)."""
RACE_PROPENSITY = {
    "white": 1.0,
    "black": 0.6,
    "aian": 0.55,
    "asian": 0.45,
    "nhopi": 0.3,
    "sor": 0.35,
}
"""Weights of the combinations of three or more races are products of these."""
HISPANIC_SOR_BOOST = 4.0
"""Among Hispanic persons of two or more races, combinations with 'some other race' weigh more."""

# Detailed race and Hispanic origin (SafeTab-H); code lists and frequencies in sdclab.schema.
EXTRA_RACE_CODE_COUNTS = (0.85, 0.11, 0.03, 0.01)
"""P(a person reports 0, 1, 2 or 3 detailed race codes beyond one per major race), e.g. German and
Irish; each extra code goes to one of the person's major races (at most DETAILED_RACE_MAX codes in
all). A design assumption of the right order: multiple ancestries are common among whites."""
DETAILED_SHARED_IN_HOUSEHOLD = 0.95
"""P(a household member whose race bitmask equals the householder's takes the householder's
detailed race codes, and, if both are Hispanic, the householder's Hispanic origin)."""

STAGES = (
    "households",
    "geography",
    "people",
    "race",
    "tenure",
    "vacancy",
    "detailed_race",
    "empty_blocks",
)
"""The child streams, in spawn order. New stages go at the end: SeedSequence children are keyed by
their index, so appending a stage leaves every earlier stream (and column) unchanged."""


# =============================================================================================
# Public entry points
# =============================================================================================


@dataclass(frozen=True)
class GeographyCounts:
    """How many tracts, counties and states to make (None: about one per
    :data:`TRACT_PERSONS`, :data:`COUNTY_PERSONS` and :data:`STATE_PERSONS` persons), so that a
    small population can still have a hierarchy to study."""

    tracts: int | None = None
    counties: int | None = None
    states: int | None = None

    def check(self, n: int) -> None:
        """ValueError in words for counts the population cannot hold."""
        tracts = self.tracts if self.tracts is not None else max(1, round(n / TRACT_PERSONS))
        counties = (
            self.counties
            if self.counties is not None
            else int(np.clip(round(n / COUNTY_PERSONS), 1, tracts))
        )
        if self.tracts is not None and not 1 <= self.tracts <= n // MIN_TRACT_PERSONS:
            raise ValueError(
                f"tracts {self.tracts}: expected 1 to {max(1, n // MIN_TRACT_PERSONS):,} for "
                f"{n:,} persons (at least {MIN_TRACT_PERSONS} persons per tract)"
            )
        if self.tracts is not None and n / self.tracts > MAX_TRACT_MEAN_PERSONS:
            raise ValueError(
                f"tracts {self.tracts}: at least {math.ceil(n / MAX_TRACT_MEAN_PERSONS):,} for "
                f"{n:,} persons (at most {MAX_TRACT_MEAN_PERSONS:,} persons per tract on average, "
                f"so that no block group exceeds {MAX_BLOCKS_PER_BLOCK_GROUP - 1} blocks)"
            )
        if self.counties is not None and not 1 <= self.counties <= tracts:
            raise ValueError(f"counties {self.counties}: expected 1 to {tracts} (the tracts)")
        if tracts > MAX_TRACTS_PER_COUNTY * counties:
            raise ValueError(
                f"counties {counties}: at least {math.ceil(tracts / MAX_TRACTS_PER_COUNTY)} for "
                f"{tracts:,} tracts (a county's tract codes hold at most {MAX_TRACTS_PER_COUNTY:,})"
            )
        if self.states is not None and not 1 <= self.states <= min(counties, len(STATE_FIPS)):
            raise ValueError(
                f"states {self.states}: expected 1 to {min(counties, len(STATE_FIPS))} (the "
                "counties, and at most the 50 states and DC)"
            )
        needed = math.ceil(counties / MAX_COUNTIES_PER_STATE)  # states
        given = self.counties is not None or self.states is not None  # else the size sets both
        if given and (self.states or 1) < needed:
            raise ValueError(
                f"counties {counties}: a state's county codes hold at most "
                f"{MAX_COUNTIES_PER_STATE}; give states {needed} or more"
            )

    def to_dict(self) -> dict[str, int]:
        """The counts given (for ``synth.json`` and digests; none given: empty)."""
        return {k: v for k, v in vars(self).items() if v is not None}


MIN_TRACT_PERSONS = 100
"""Persons per tract at least when the number of tracts is given."""
MAX_TRACT_MEAN_PERSONS = 40_000
"""Persons per tract at most on average when the number of tracts is given (ten times the usual
size): a tract has at most 9 block groups, whose blocks must number fewer than 1,000."""
MAX_TRACTS_PER_COUNTY = 9_999
"""Tracts 000100 to 999900 of a county."""
MAX_COUNTIES_PER_STATE = 500
"""Counties 001 to 999 (odd) of a state."""


def synthesize(
    n_persons: int,
    seed: int | None = None,
    geography: GeographyCounts | None = None,
    version: str = GENERATOR_VERSION,
) -> Population:
    """Seeded synthetic census population of exactly n_persons persons.

    The same seed gives identical frames; ``seed=None`` draws from OS entropy. ``geography``
    sets the number of tracts, counties or states (otherwise they follow the population's size).
    ``version`` is one of :data:`GENERATOR_VERSIONS`: an earlier version's population is made
    byte for byte as that version made it. :func:`build_report` measures it against
    :data:`TARGETS` for ``synth.json``.
    """
    check_version(version)
    if isinstance(n_persons, bool) or not isinstance(n_persons, int | np.integer):
        raise TypeError(f"n_persons must be an integer, got {type(n_persons).__name__}")
    if n_persons < 1:
        raise ValueError(f"n_persons must be at least 1, got {n_persons}")
    n = int(n_persons)
    geography = geography or GeographyCounts()
    geography.check(n)
    streams = dict(zip(STAGES, make_rng(seed).spawn(len(STAGES)), strict=True))

    units = draw_occupied_units(streams["households"], n)
    plan = plan_geography(streams["geography"], n, geography)
    unit_block = place_in_blocks(units.sizes, plan.block_end)
    people = draw_people(streams["people"], units)
    mixing = RACE_MIXING[version]
    race, hispanic = draw_race_ethnicity(streams["race"], plan, units, unit_block, people, mixing)
    tenure = draw_tenure(streams["tenure"], units, people)
    vacant_block = draw_vacant_units(streams["vacancy"], plan, units, unit_block)
    detailed = draw_detailed_race(streams["detailed_race"], units, people, race, hispanic)
    empty: IntArray | None = None
    if version != "1.2":
        populated = unit_block[units.sizes > 0]
        with_units = np.concatenate([unit_block, vacant_block])
        plan, empty = with_empty_blocks(streams["empty_blocks"], plan, populated, with_units)
    population = assemble(
        plan, units, unit_block, people, race, hispanic, tenure, vacant_block, detailed, empty
    )
    summary = population.geography.summary
    for level, given in (("tract", "tracts"), ("county", "counties"), ("state", "states")):
        asked = getattr(geography, given)
        if asked is not None and summary[level] != asked:  # a unit wider than a small tract
            raise InputError(
                f"{given} {asked}: this seed makes {summary[level]}, as a tract's persons all "
                f"fell into a neighbour's large unit (a group-quarters facility); ask for fewer "
                f"{given} or give another seed"
            )
    return population


def check_version(version: str) -> None:
    """ValueError in words for a version the generator cannot make."""
    if version not in GENERATOR_VERSIONS:
        raise ValueError(
            f"generator version {version!r}: expected one of {', '.join(GENERATOR_VERSIONS)}"
        )


def measure_marginals(population: Population) -> dict[str, float]:
    """Every marginal named in :data:`TARGETS`, computed from the frames of ``population``."""
    persons, units = population.persons, population.units
    n = persons.height
    race = persons.get_column("race").to_numpy().astype(np.int64)
    bits = schema.race_bit_count(race)
    out: dict[str, float] = {}
    for i, group in enumerate(RACE_GROUPS):
        in_group = bits >= 2 if group == "two_or_more" else race == (1 << i)
        out[f"race_{group}_pct"] = 100 * float(in_group.mean())
    out["hispanic_pct"] = 100 * float(persons.get_column("hispanic").to_numpy().mean())
    out["female_pct"] = 100 * float((persons.get_column("sex").to_numpy() == 2).mean())
    age = persons.get_column("age").to_numpy()
    out["median_age"] = interpolated_median_age(age)
    out["under_18_pct"] = 100 * float((age < 18).mean())
    out["age_65_plus_pct"] = 100 * float((age >= 65).mean())

    unit_type = units.get_column("unit_type").to_numpy()
    occupied = units.get_column("occupied").to_numpy()
    is_household = (unit_type == 0) & occupied
    sizes = population.household_size[is_household]
    top = len(HOUSEHOLD_SIZE_SHARES)
    size_counts = np.bincount(np.minimum(sizes, top), minlength=top + 1)[1:]
    for size in range(1, top + 1):
        key = f"household_size_{size}{'_plus' if size == top else ''}_pct"
        out[key] = 100 * float(size_counts[size - 1] / max(len(sizes), 1))
    out["mean_household_size"] = float(sizes.mean()) if len(sizes) else 0.0
    tenure = units.get_column("tenure").to_numpy()[is_household]
    owners = int(np.isin(tenure, (1, 2)).sum())
    out["owner_occupied_pct"] = 100 * owners / max(len(tenure), 1)
    out["mortgage_pct_of_owners"] = 100 * int((tenure == 1).sum()) / max(owners, 1)
    housing = unit_type == 0
    out["vacancy_pct"] = 100 * float((~occupied[housing]).mean()) if housing.any() else 0.0
    relationship = persons.get_column("relationship").to_numpy()
    out["gq_persons_pct"] = 100 * float((relationship == schema.GQ_RESIDENT).mean())

    block_sizes = np.bincount(
        population.person_block_index, minlength=population.geography.n_blocks
    )
    populated = block_sizes[block_sizes > 0]
    out["mean_persons_per_populated_block"] = n / len(populated)
    out["blocks_1_to_9_persons_pct"] = 100 * float((populated <= 9).mean())
    return out


def interpolated_median_age(age: npt.ArrayLike) -> float:
    """Median age as the Census Bureau states it: single years read as intervals [a, a + 1)."""
    counts = np.bincount(np.asarray(age, dtype=np.int64), minlength=schema.AGE_MAX + 1)
    cumulative = np.cumsum(counts)
    half = cumulative[-1] / 2
    year = int(np.searchsorted(cumulative, half, side="right"))
    below = cumulative[year - 1] if year > 0 else 0
    return float(year + (half - below) / counts[year])


def nonmodal_share(block_index: npt.ArrayLike, group: npt.ArrayLike) -> float:
    """Share of persons whose group differs from their block's most common group."""
    block_index = np.asarray(block_index, dtype=np.int64)
    group = np.asarray(group, dtype=np.int64)
    n_groups = int(group.max()) + 1
    counts = np.bincount(
        block_index * n_groups + group, minlength=(block_index.max() + 1) * n_groups
    )
    modal = counts.reshape(-1, n_groups).max(axis=1).sum()
    return float(1 - modal / len(group))


def race_ethnicity_group(race: npt.ArrayLike, hispanic: npt.ArrayLike) -> IntArray:
    """The 14 race-ethnicity groups: 2 × race group index (0–6) + Hispanic origin."""
    race = np.asarray(race, dtype=np.int64)
    bits = schema.race_bit_count(race)
    group7 = np.where(bits >= 2, 6, np.log2(np.maximum(race, 1)).astype(np.int64))
    return 2 * group7 + np.asarray(hispanic, dtype=np.int64)


# =============================================================================================
# Small distributions
# =============================================================================================


def sample_pmf(rng: np.random.Generator, pmf: FloatArray, size: int) -> IntArray:
    """Indices drawn from the probability vector ``pmf`` (inverse CDF)."""
    cdf = np.cumsum(pmf)
    return np.searchsorted(cdf, rng.random(size) * cdf[-1], side="right").astype(np.int64)


def sample_rows(rng: np.random.Generator, probabilities: FloatArray, row: IntArray) -> IntArray:
    """For each entry of ``row``, a column index drawn from that row of ``probabilities``.

    Rows are laid end to end on one axis (row r occupies [r, r + 1)), so one binary search serves
    all rows without materialising a draws × columns array.
    """
    n_rows, n_cols = probabilities.shape
    cdf = np.cumsum(probabilities, axis=1)
    cdf /= cdf[:, -1:]
    cdf[:, -1] = 1.0
    flat = (cdf + np.arange(n_rows)[:, None]).ravel()
    position = np.searchsorted(flat, row + rng.random(len(row)), side="right")
    return np.clip(position - row * n_cols, 0, n_cols - 1).astype(np.int64)


def truncated_normal(
    rng: np.random.Generator,
    mean: float | FloatArray,
    sd: float,
    low: float | FloatArray,
    high: float | FloatArray,
) -> FloatArray:
    """Normal(mean, sd) draws truncated to [low, high], elementwise (inverse CDF)."""
    a = special.ndtr((low - mean) / sd)
    b = special.ndtr((high - mean) / sd)
    u = a + (b - a) * rng.random(np.broadcast(mean, low, high).shape)
    x = mean + sd * special.ndtri(np.clip(u, 1e-12, 1 - 1e-12))
    return np.clip(x, low, high)


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


def logit_shift_to_mean(base: FloatArray, counts: FloatArray, target: float) -> FloatArray:
    """``base`` probabilities shifted on the logit scale to a count-weighted mean of ``target``."""
    logit = special.logit(base)
    low, high = -10.0, 10.0
    for _ in range(60):
        mid = (low + high) / 2
        mean = float(np.average(special.expit(logit + mid), weights=counts))
        low, high = (mid, high) if mean < target else (low, mid)
    return np.asarray(special.expit(logit + (low + high) / 2), dtype=np.float64)


def apportion(total: int, shares: FloatArray) -> IntArray:
    """Integers summing to ``total`` in proportion to ``shares`` (largest remainder)."""
    exact = total * shares / shares.sum()
    whole = np.floor(exact).astype(np.int64)
    remainder = total - int(whole.sum())
    whole[np.argsort(whole - exact, kind="stable")[:remainder]] += 1
    return whole


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


def multi_race_codes(hispanic: bool) -> tuple[IntArray, FloatArray]:
    """The 57 race codes with two or more bits and their probabilities."""
    names = schema.RACE_NAMES
    codes, weights = [], []
    for k, class_share in MULTI_RACE_BIT_COUNT_SHARES.items():
        combos = list(combinations(names, k))
        if k == 2:
            w = np.array([TWO_RACE_WEIGHTS[(c[0], c[1])] for c in combos], dtype=np.float64)
        else:
            w = np.array([np.prod([RACE_PROPENSITY[r] for r in c]) for c in combos])
        w = class_share * w / w.sum()
        codes += [sum(schema.RACE_BIT[r] for r in c) for c in combos]
        weights.append(w)
    code_array = np.array(codes, dtype=np.int64)
    weight = np.concatenate(weights)
    if hispanic:
        weight = weight * np.where(code_array & schema.RACE_BIT["sor"], HISPANIC_SOR_BOOST, 1.0)
    return code_array, weight / weight.sum()


def national_group_shares() -> FloatArray:
    """Share of persons in each of the 14 race-ethnicity groups (2 × race group + Hispanic)."""
    split = np.array([HISPANIC_RACE_SPLIT[g] for g in RACE_GROUPS])
    hispanic = HISPANIC_SHARE * split / split.sum()
    race = np.array([RACE_ALONE_SHARES[g] for g in RACE_GROUPS])
    return np.column_stack([race - hispanic, hispanic]).ravel()


def dirichlet_rows(rng: np.random.Generator, concentration: FloatArray) -> FloatArray:
    """One Dirichlet draw per row of ``concentration`` (normalised gammas; robust to tiny α)."""
    g = rng.standard_gamma(concentration)
    total = g.sum(axis=1, keepdims=True)
    empty = total[:, 0] <= 0
    g[empty] = concentration[empty]
    return np.asarray(g / g.sum(axis=1, keepdims=True), dtype=np.float64)


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
# Stage 2: geography, as runs of the person sequence
# =============================================================================================


@dataclass(frozen=True)
class GeographyPlan:
    """Candidate blocks in sequence (= geocode) order, before units are placed in them."""

    block_end: FloatArray
    """Cumulative capacity: block b covers sequence positions [block_end[b-1], block_end[b])."""
    block_code: IntArray
    """15-digit integer geocode of each block."""
    block_tract: IntArray
    """Tract index of each block."""
    n_tracts: int


def plan_geography(
    rng: np.random.Generator, n: int, counts: GeographyCounts | None = None
) -> GeographyPlan:
    """Blocks nested in block groups, tracts, counties and states for ``n`` persons."""
    counts = counts or GeographyCounts()
    tract_persons = tract_targets(rng, n, counts.tracts)
    bg_tract, bg_number, bg_end = block_group_targets(rng, tract_persons)
    block_end = block_capacities(rng, n)
    if counts.to_dict():  # counts asked for: every block group ends a block, so none is empty
        inner = bg_end[:-1][bg_end[:-1] < block_end[-1]]
        block_end = np.unique(np.concatenate([block_end, inner]))
    block_mid = block_end - np.diff(block_end, prepend=0.0) / 2
    block_bg = np.minimum(np.searchsorted(bg_end, block_mid, side="right"), len(bg_end) - 1)
    first_in_bg = np.searchsorted(block_bg, block_bg, side="left")
    block_number = np.arange(len(block_bg)) - first_in_bg
    if block_number.max() >= MAX_BLOCKS_PER_BLOCK_GROUP:
        raise RuntimeError("a block group received more than 999 blocks")
    tract_code = tract_codes(rng, tract_persons, counts.counties, counts.states)
    tract = bg_tract[block_bg]
    block_code = tract_code[tract] * 10_000 + bg_number[block_bg] * 1_000 + block_number
    return GeographyPlan(block_end, block_code, tract, len(tract_persons))


def tract_targets(rng: np.random.Generator, n: int, n_tracts: int | None = None) -> FloatArray:
    """Persons per tract: about TRACT_PERSONS each (or ``n_tracts`` tracts of the same spread
    around n / n_tracts), summing to ``n``."""
    mean = float(TRACT_PERSONS) if n_tracts is None else n / n_tracts
    n_tracts = n_tracts or max(1, round(n / TRACT_PERSONS))
    low, high = (mean * r / TRACT_PERSONS for r in TRACT_PERSONS_RANGE)
    raw = np.clip(mean * rng.lognormal(0.0, TRACT_LOG_SD, n_tracts), low, high)
    return np.asarray(n * raw / raw.sum(), dtype=np.float64)


def block_group_targets(
    rng: np.random.Generator, tract_persons: FloatArray
) -> tuple[IntArray, IntArray, FloatArray]:
    """Block groups of each tract: (tract index, number 1–9, cumulative end in persons)."""
    per_tract = np.clip(
        np.round(tract_persons / BLOCK_GROUP_PERSONS), 1, MAX_BLOCK_GROUPS_PER_TRACT
    ).astype(np.int64)
    bg_tract = np.repeat(np.arange(len(tract_persons)), per_tract)
    weight = rng.uniform(*BLOCK_GROUP_WEIGHT_RANGE, len(bg_tract))
    weight_in_tract = np.bincount(bg_tract, weights=weight)
    persons = tract_persons[bg_tract] * weight / weight_in_tract[bg_tract]
    first = np.cumsum(per_tract) - per_tract
    bg_number = np.arange(len(bg_tract)) - first[bg_tract] + 1
    end = np.cumsum(persons)
    end[-1] = np.inf
    return bg_tract, bg_number, end


def block_capacities(rng: np.random.Generator, n: int) -> FloatArray:
    """Cumulative lognormal block capacities covering the sequence positions [0, n)."""
    mean = float(np.exp(BLOCK_LOG_MEAN + BLOCK_LOG_SD**2 / 2))
    capacities = np.zeros(0)
    while capacities.sum() < n:
        batch = int(1.1 * (n - capacities.sum()) / mean) + 16
        drawn = np.minimum(rng.lognormal(BLOCK_LOG_MEAN, BLOCK_LOG_SD, batch), BLOCK_CAPACITY_MAX)
        capacities = np.concatenate([capacities, drawn])
    end = np.cumsum(capacities)
    needed = int(np.searchsorted(end, n, side="left")) + 1
    return np.asarray(end[:needed], dtype=np.float64)


def tract_codes(
    rng: np.random.Generator,
    tract_persons: FloatArray,
    n_counties: int | None = None,
    n_states: int | None = None,
) -> IntArray:
    """11-digit state+county+tract code of each tract: tracts grouped into counties, counties
    into states, numbered 000100, 000200, … within a county and 001, 003, … within a state (the
    numbers of counties and states follow the population's size unless given)."""
    n = float(tract_persons.sum())
    n_tracts = len(tract_persons)
    if n_counties is None:
        n_counties = int(np.clip(round(n / COUNTY_PERSONS), 1, n_tracts))
    county_weight = rng.lognormal(0.0, COUNTY_LOG_SD, n_counties)
    tracts_per_county = _allocate(rng, n_tracts, county_weight, MAX_TRACTS_PER_COUNTY)
    tract_county = np.repeat(np.arange(n_counties), tracts_per_county)
    county_persons = np.bincount(tract_county, weights=tract_persons, minlength=n_counties)

    if n_states is None:
        n_states = int(np.clip(round(n / STATE_PERSONS), 1, len(STATE_FIPS)))
        state_weight = rng.lognormal(0.0, STATE_LOG_SD, n_states)
        state_end = np.cumsum(state_weight) / state_weight.sum() * n
        county_mid = np.cumsum(county_persons) - county_persons / 2
        county_state = np.minimum(
            np.searchsorted(state_end, county_mid, side="right"), n_states - 1
        )
        _, county_state = np.unique(county_state, return_inverse=True)  # empty states vanish
    else:  # as many states as asked, each with a county at least
        state_weight = rng.lognormal(0.0, STATE_LOG_SD, n_states)
        counties_per_state = _allocate(rng, n_counties, state_weight, MAX_COUNTIES_PER_STATE)
        county_state = np.repeat(np.arange(n_states), counties_per_state)
    county_number = np.arange(n_counties) - np.searchsorted(county_state, county_state, side="left")
    if county_number.max() >= MAX_COUNTIES_PER_STATE:
        raise RuntimeError(f"a state received more than {MAX_COUNTIES_PER_STATE} counties")
    tract_number = np.arange(n_tracts) - np.searchsorted(tract_county, tract_county, side="left")
    state = np.asarray(STATE_FIPS, dtype=np.int64)[county_state[tract_county]]
    county = 2 * county_number[tract_county] + 1
    return np.asarray(state * 10**9 + county * 10**6 + 100 * (tract_number + 1), dtype=np.int64)


def _allocate(rng: np.random.Generator, items: int, weight: FloatArray, cap: int) -> IntArray:
    """``items`` shared among groups in proportion to ``weight``: at least one and at most
    ``cap`` each (needs len(weight) ≤ items ≤ cap · len(weight)). What a draw puts above the
    cap is drawn again among the groups below it."""
    counts = 1 + rng.multinomial(items - len(weight), weight / weight.sum())
    while (over := counts > cap).any():
        excess = int((counts[over] - cap).sum())
        counts[over] = cap
        room = np.where(counts < cap, weight, 0.0)
        counts += rng.multinomial(excess, room / room.sum())
    return np.asarray(counts, dtype=np.int64)


def place_in_blocks(sizes: IntArray, block_end: FloatArray) -> IntArray:
    """Block index of each unit: the block whose capacity run contains the unit's midpoint."""
    midpoint = np.cumsum(sizes) - sizes / 2
    return np.searchsorted(block_end, midpoint, side="right").astype(np.int64)


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
# Stage 4: race and Hispanic origin with hierarchical segregation
# =============================================================================================


def draw_race_ethnicity(
    rng: np.random.Generator,
    plan: GeographyPlan,
    units: OccupiedUnits,
    unit_block: IntArray,
    people: People,
    mixing: RaceMixing = RACE_MIXING["1.2"],
) -> tuple[IntArray, IntArray]:
    """Race bitmask and Hispanic origin of every person.

    Tract mixes are drawn around the national mix (:func:`tract_mixes`) and block mixes around
    their tract's; the block × group matrix is then raked to the national group totals, so
    national shares hit the targets in expectation whatever the tract-level draws. Householders
    and GQ residents draw from their block's mix; other household members relate to their
    householder as ``mixing`` says.
    """
    person_block = unit_block[people.unit]
    blocks, person_row = np.unique(person_block, return_inverse=True)
    block_persons = np.bincount(person_row).astype(np.float64)
    national = national_group_shares()
    tract_mix = tract_mixes(rng, plan.n_tracts, national, mixing)
    block_mix = dirichlet_rows(
        rng, mixing.block_concentration * tract_mix[plan.block_tract[blocks]]
    )
    block_mix = (1 - mixing.mix_floor) * block_mix + mixing.mix_floor * national
    expected = rake(block_persons[:, None] * block_mix, block_persons, national * len(person_row))
    group = sample_rows(rng, expected, person_row)
    race, hispanic = race_of_groups(rng, group)
    if mixing.household is not None:
        return mix_households(rng, units, people, race, hispanic, mixing.household)
    head = units.starts[people.unit]
    copies = (people.relationship >= 1) & (people.relationship <= 4)
    copies &= rng.random(len(copies)) < SAME_RACE_IN_HOUSEHOLD
    race[copies] = race[head[copies]]
    hispanic[copies] = hispanic[head[copies]]
    return race.astype(np.int64), hispanic.astype(np.int64)


def tract_mixes(
    rng: np.random.Generator, n_tracts: int, national: FloatArray, mixing: RaceMixing
) -> FloatArray:
    """Each tract's race-ethnicity mix (tracts × groups): Dirichlet(:func:`tract_alpha`)."""
    return dirichlet_rows(rng, tract_alpha(rng, n_tracts, national, mixing))


def tract_alpha(
    rng: np.random.Generator, n_tracts: int, national: FloatArray, mixing: RaceMixing
) -> FloatArray:
    """Dirichlet parameters of each tract's mix (tracts × groups): tract_concentration × national
    mix, or, with ``mixing.tracts``, diverse_concentration × national mix for the diverse share
    of the tracts (exactly, rounded) and, for the others, that plus dominance × the profile of
    their dominant group, dealt in proportion to the groups' persons (:class:`TractKinds`)."""
    alpha = mixing.tract_concentration * np.tile(national, (n_tracts, 1))
    kinds = mixing.tracts
    if kinds is not None:
        order = rng.permutation(n_tracts)
        n_diverse = round(kinds.diverse_share * n_tracts)
        diverse, dominated = order[:n_diverse], order[n_diverse:]
        alpha[diverse] = kinds.diverse_concentration * national
        profiles, weights = dominant_profiles(national)
        position = (rng.random() + np.arange(len(dominated))) / max(len(dominated), 1)
        dominant = np.searchsorted(np.cumsum(weights), position, side="right")
        alpha[dominated] += kinds.dominance * profiles[np.minimum(dominant, len(weights) - 1)]
    return alpha


def dominant_profiles(national: FloatArray) -> tuple[FloatArray, FloatArray]:
    """The groups that dominate tracts (:data:`DOMINANT_GROUPS`), as profiles over the 14
    race-ethnicity groups (Hispanic persons in their national race split), and their shares of
    the persons those groups hold (the weights with which they are dealt to tracts)."""
    hispanic = np.arange(len(national)) % 2 == 1
    profiles = np.zeros((len(DOMINANT_GROUPS), len(national)))
    for row, group in enumerate(DOMINANT_GROUPS):
        if group == "hispanic":
            profiles[row, hispanic] = national[hispanic] / national[hispanic].sum()
        else:
            profiles[row, 2 * RACE_GROUPS.index(group)] = 1.0  # non-Hispanic, race alone
    weights = (profiles > 0) @ national
    return profiles, weights / weights.sum()


def race_of_groups(rng: np.random.Generator, group: IntArray) -> tuple[IntArray, IntArray]:
    """Race bitmask and Hispanic origin of race-ethnicity groups (7 races × origin), the
    two-or-more group spread over the multi-race codes."""
    race7, hispanic = group // 2, group % 2
    race = np.where(race7 < 6, 1 << np.minimum(race7, 5), 0)
    for flag in (0, 1):
        multi = np.flatnonzero((race7 == 6) & (hispanic == flag))
        codes, weights = multi_race_codes(bool(flag))
        race[multi] = codes[sample_pmf(rng, weights, len(multi))]
    return race, hispanic


def mix_households(
    rng: np.random.Generator,
    units: OccupiedUnits,
    people: People,
    race: IntArray,
    hispanic: IntArray,
    mixing: HouseholdMixing,
) -> tuple[IntArray, IntArray]:
    """Household members' race and origin from their own draws (from the block's mix) and the
    householder's: spouses and partners first, then a child of a couple of different race or
    origin takes both parents' races or one parent's, and other members copy the householder
    with their relationship's probability. A member who does not copy keeps a draw from the
    block's mix, so mixing leaves the national shares as raked (but for the children who take
    both parents' races)."""
    race, hispanic = race.astype(np.int64), hispanic.astype(np.int64)
    relationship = people.relationship
    head = units.starts[people.unit]
    spouse = np.flatnonzero(relationship == 1)
    alike = spouse[rng.random(len(spouse)) < mixing.same[0]]
    race[alike], hispanic[alike] = race[head[alike]], hispanic[head[alike]]
    spouse_of_unit = np.full(len(units.sizes), -1, dtype=np.int64)
    spouse_of_unit[people.unit[spouse]] = spouse
    partner = spouse_of_unit[people.unit]
    has_partner = partner >= 0
    partner = np.where(has_partner, partner, head)
    mixed_couple = (race[partner] != race[head]) | (hispanic[partner] != hispanic[head])
    member = (relationship >= 2) & (relationship <= 4)
    same = np.zeros(len(race))
    same[member] = np.asarray(mixing.same)[relationship[member] - 1]
    draws = rng.random((3, len(race)))
    child_of_mixed = (relationship == 2) & has_partner & mixed_couple
    copies = member & ~child_of_mixed & (draws[0] < same)
    both = child_of_mixed & (draws[1] < mixing.child_of_both)
    one = np.flatnonzero(child_of_mixed & ~both)
    parent = np.where(draws[2][one] < 0.5, head[one], partner[one])
    race[one], hispanic[one] = race[parent], hispanic[parent]
    rows = np.flatnonzero(both)
    race[rows] = race[head[rows]] | race[partner[rows]]
    hispanic[rows] = np.where(draws[2][rows] < 0.5, hispanic[head[rows]], hispanic[partner[rows]])
    rows = np.flatnonzero(copies)
    race[rows], hispanic[rows] = race[head[rows]], hispanic[head[rows]]
    return race, hispanic


def rake(seed_matrix: FloatArray, row_totals: FloatArray, column_totals: FloatArray) -> FloatArray:
    """Iterative proportional fitting of a non-negative matrix to row and column totals."""
    m = seed_matrix.copy()
    for _ in range(IPF_ITERATIONS):
        m *= column_totals / m.sum(axis=0)
        m *= (row_totals / m.sum(axis=1))[:, None]
        if np.max(np.abs(m.sum(axis=0) / column_totals - 1)) < IPF_TOLERANCE:
            break
    return m


# =============================================================================================
# Stage 7: detailed race codes and Hispanic origin (drawn last, from their own stream)
# =============================================================================================


@dataclass(frozen=True)
class DetailedRace:
    """Detailed race codes (persons × DETAILED_RACE_MAX, 0 = empty slot) and Hispanic origin."""

    codes: npt.NDArray[np.int16]
    origin: IntArray


def detailed_code_tables() -> tuple[IntArray, FloatArray]:
    """Every distribution a detailed race code is drawn from, as rows of a codes table and a
    probability table (padded with probability 0).

    Row ``12·extra + 2·group + hispanic``: the codes of major race ``group`` (bit index) for a
    person's first code in that race (``extra`` 0) or an extra one (1), for a non-Hispanic (0) or
    Hispanic (1) person. Non-Hispanic persons never draw a Hispanic write-in; an extra code is
    never the 'no detail' code (the first of each list).
    """
    n_groups = len(schema.RACE_NAMES)
    width = max(len(codes) for codes in schema.DETAILED_RACE.values())
    codes_table = np.zeros((4 * n_groups, width), dtype=np.int64)
    probabilities = np.zeros((4 * n_groups, width))
    for group, name in enumerate(schema.RACE_NAMES):
        codes = schema.DETAILED_RACE[name]
        for extra in (0, 1):
            for hispanic in (0, 1):
                row = 2 * n_groups * extra + 2 * group + hispanic
                weight = np.array([c.frequency for c in codes])
                if not hispanic:
                    weight[[c.hispanic_write_in for c in codes]] = 0.0
                if extra:
                    weight[0] = 0.0
                codes_table[row, : len(codes)] = [c.code for c in codes]
                probabilities[row, : len(codes)] = weight / weight.sum()
    return codes_table, probabilities


def draw_detailed_race(
    rng: np.random.Generator,
    units: OccupiedUnits,
    people: People,
    race: IntArray,
    hispanic: IntArray,
) -> DetailedRace:
    """Detailed race codes consistent with each race bitmask, and Hispanic origin consistent with
    ``hispanic``.

    Household members with the householder's race and Hispanic origin mostly copy the
    householder's codes and origin (DETAILED_SHARED_IN_HOUSEHOLD). Everybody else gets one code
    per major race of the bitmask, in bit order (with the frequencies of schema.DETAILED_RACE;
    Hispanic write-ins only for Hispanic persons), then sometimes extra codes
    (EXTRA_RACE_CODE_COUNTS) in one of their races: none where that race has no detail, repeats
    dropped, at most DETAILED_RACE_MAX in all, each placed after the codes of its race. Hispanic
    persons draw an origin from schema.HISPANIC_ORIGINS. Uses only ``rng``, so the other columns
    do not depend on this stage.
    """
    n = len(race)
    width = schema.DETAILED_RACE_MAX
    n_races = len(schema.RACE_NAMES)
    is_hispanic = hispanic == 1
    head = units.starts[people.unit]
    share = (people.relationship >= 1) & (people.relationship <= 4)
    share &= (race == race[head]) & (hispanic == hispanic[head])
    share &= rng.random(n) < DETAILED_SHARED_IN_HOUSEHOLD
    own = np.flatnonzero(~share)
    own_race, own_hispanic = race[own], hispanic[own].astype(np.int64)
    n_groups = schema.race_bit_count(own_race)
    codes_table, probabilities = detailed_code_tables()

    person = np.repeat(np.arange(len(own)), n_groups)
    slot = np.arange(len(person)) - np.repeat(np.cumsum(n_groups) - n_groups, n_groups)
    table_row = 2 * nth_set_bit(own_race[person], slot) + own_hispanic[person]
    slots = np.zeros((len(own), width), dtype=np.int64)
    slots[person, slot] = codes_table[table_row, sample_rows(rng, probabilities, table_row)]

    filled = n_groups.copy()
    n_extra = sample_pmf(rng, np.asarray(EXTRA_RACE_CODE_COUNTS), len(own))
    for round_ in range(1, len(EXTRA_RACE_CODE_COUNTS)):
        rows = np.flatnonzero(n_extra >= round_)
        pick = (rng.random(len(rows)) * n_groups[rows]).astype(np.int64)
        group = nth_set_bit(own_race[rows], pick)
        table_row = 2 * n_races + 2 * group + own_hispanic[rows]
        extra = codes_table[table_row, sample_rows(rng, probabilities, table_row)]
        held = slots[rows]
        no_detail = np.any(held == ((group + 1) * schema.DETAILED_RACE_BASE)[:, None], axis=1)
        keep = ~no_detail & ~np.any(held == extra[:, None], axis=1) & (filled[rows] < width)
        rows, extra = rows[keep], extra[keep]
        slots[rows, filled[rows]] = extra
        filled[rows] += 1

    mixed = np.flatnonzero((filled > n_groups) & (n_groups > 1))
    key = np.where(slots[mixed] == 0, n_races + 1, slots[mixed] // schema.DETAILED_RACE_BASE)
    order = np.argsort(key, axis=1, kind="stable")
    slots[mixed] = np.take_along_axis(slots[mixed], order, axis=1)

    codes = np.zeros((n, width), dtype=np.int16)
    codes[own] = slots
    codes[share] = codes[head[share]]  # householders are never copies

    origin = np.zeros(n, dtype=np.int64)
    drawn = np.flatnonzero(is_hispanic & ~share)
    origin_codes = np.array([c.code for c in schema.HISPANIC_ORIGINS], dtype=np.int64)
    origin_pmf = np.array([c.frequency for c in schema.HISPANIC_ORIGINS])
    origin[drawn] = origin_codes[sample_pmf(rng, origin_pmf, len(drawn))]
    origin[share] = origin[head[share]]
    return DetailedRace(codes=codes, origin=origin)


def nth_set_bit(mask: IntArray, nth: IntArray) -> IntArray:
    """Index of the ``nth`` (0-based) set bit of each race bitmask."""
    out = np.zeros(len(mask), dtype=np.int64)
    seen = np.zeros(len(mask), dtype=np.int64)
    for bit in range(len(schema.RACE_NAMES)):
        here = ((mask >> bit) & 1).astype(bool)
        out[here & (seen == nth)] = bit
        seen += here
    return out


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


# =============================================================================================
# Assembly and report
# =============================================================================================


def assemble(
    plan: GeographyPlan,
    units: OccupiedUnits,
    unit_block: IntArray,
    people: People,
    race: IntArray,
    hispanic: IntArray,
    tenure: IntArray,
    vacant_block: IntArray,
    detailed: DetailedRace,
    empty: IntArray | None = None,
) -> Population:
    """Contract frames: units ordered by block (occupied first), ids 0.. in that order; persons
    carry the optional detailed race and Hispanic origin columns; the blocks table lists the
    blocks ``empty`` (geocodes of blocks without any unit), when given."""
    all_block = np.concatenate([unit_block, vacant_block])
    is_vacant = np.concatenate([np.zeros(len(unit_block), bool), np.ones(len(vacant_block), bool)])
    order = np.lexsort((is_vacant, all_block))
    unit_id = np.empty(len(order), dtype=np.int64)
    unit_id[order] = np.arange(len(order))

    used, block_row = np.unique(all_block, return_inverse=True)
    code_strings = pl.Series("block", plan.block_code[used]).cast(pl.String).str.zfill(15)
    unit_type = np.concatenate([units.kind, np.zeros(len(vacant_block), dtype=np.int64)])
    all_tenure = np.concatenate([tenure, np.zeros(len(vacant_block), dtype=np.int64)])
    unit_frame = pl.DataFrame(
        {
            "unit_id": np.arange(len(order), dtype=np.int64),
            "block": code_strings.gather(block_row[order]),
            "unit_type": unit_type[order].astype(np.int8),
            "occupied": ~is_vacant[order],
            "tenure": all_tenure[order].astype(np.int8),
        },
        schema={spec.name: spec.dtype for spec in UNITS},
    ).with_columns(pl.col("tenure").replace(0, None))

    n = len(people.unit)
    person_frame = pl.DataFrame(
        {
            "person_id": np.arange(n, dtype=np.int64),
            "unit_id": unit_id[people.unit],
            "block": code_strings.gather(block_row[people.unit]),
            "relationship": people.relationship.astype(np.int8),
            "sex": people.sex.astype(np.int8),
            "age": people.age.astype(np.int16),
            "race": race.astype(np.int8),
            "hispanic": hispanic.astype(np.int8),
        },
        schema={spec.name: spec.dtype for spec in PERSONS},
    ).with_columns(
        *[
            pl.Series(name, detailed.codes[:, i], dtype=pl.Int16).replace(0, None)
            for i, name in enumerate(RACE_CODE_COLUMNS)
        ],
        pl.Series(HISPANIC_ORIGIN.name, detailed.origin, dtype=pl.Int16),
    )
    blocks = None
    if empty is not None:
        blocks = pl.DataFrame(
            {"block": pl.Series("block", np.sort(empty)).cast(pl.String).str.zfill(15)}
        )
    return Population._trusted(person_frame, unit_frame, blocks)  # valid by construction


def geography_counts(population: Population) -> dict[str, int]:
    """Number of units, blocks and geounits at every level."""
    geo = population.geography
    person_blocks = np.unique(population.person_block_index)
    unit_blocks = np.unique(population.unit_block_index)
    unit_type = population.units.get_column("unit_type").to_numpy()
    occupied = population.units.get_column("occupied").to_numpy()
    return {
        "persons": population.n_persons,
        "units": population.n_units,
        "housing_units": int((unit_type == 0).sum()),
        "occupied_housing_units": int(((unit_type == 0) & occupied).sum()),
        "vacant_housing_units": int(((unit_type == 0) & ~occupied).sum()),
        "gq_facilities": int((unit_type > 0).sum()),
        "blocks": geo.n_blocks,
        "populated_blocks": len(person_blocks),
        "blocks_with_units_only": len(unit_blocks) - len(person_blocks),
        "blocks_without_units": geo.n_blocks - len(unit_blocks),
        "block_groups": geo.n_units("block_group"),
        "tracts": geo.n_units("tract"),
        "counties": geo.n_units("county"),
        "states": geo.n_units("state"),
    }


def geounit_size_summary(population: Population) -> dict[str, dict[str, float]]:
    """Min, median and max persons per populated geounit at block, block group, tract, county."""
    geo = population.geography
    block_index = population.person_block_index
    summary = {}
    for level in ("block", "block_group", "tract", "county"):
        codes = truncate(geo.blocks, level)[block_index]
        _, sizes = np.unique(codes, return_counts=True)
        summary[level] = {
            "min": int(sizes.min()),
            "median": float(np.median(sizes)),
            "max": int(sizes.max()),
        }
    return summary


def build_report(
    population: Population,
    seed: int | None,
    geography: GeographyCounts | None = None,
    version: str = GENERATOR_VERSION,
) -> dict[str, Any]:
    """The ``synth.json`` document: parameters (with the geography counts given and the
    generator ``version`` that made the population), counts and marginals against targets."""
    generated = measure_marginals(population)
    persons = population.persons
    group = race_ethnicity_group(
        persons.get_column("race").to_numpy(), persons.get_column("hispanic").to_numpy()
    )
    block_sizes = np.bincount(population.person_block_index)
    return {
        "generator": "sdclab.population.synth",
        "parameters": {
            "n_persons": population.n_persons,
            "seed": seed,
            "randomness": "os-entropy" if seed is None else "seed",
            "generator_version": version,
            **(geography.to_dict() if geography else {}),
        },
        "counts": geography_counts(population),
        "geounit_persons": geounit_size_summary(population),
        "blocks_1000_plus_persons": int((block_sizes >= 1000).sum()),
        "nonmodal_share": round(nonmodal_share(population.person_block_index, group), 4),
        "marginals": {
            name: {
                "description": target.description,
                "unit": target.unit,
                "target": target.value,
                "generated": round(generated[name], 4),
                "tolerance": target.tolerance,
                "tolerance_is_relative": target.relative,
                "within_tolerance": target.accepts(generated[name]),
                "source": target.source,
            }
            for name, target in TARGETS.items()
        },
    }
