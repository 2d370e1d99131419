"""Traits of the European generator's persons that follow from their age and where they live:
birthplace and citizenship, residence a year before, activity status, education and the size of
their locality.

Birthplace is drawn per *origin unit*: a family household shares one (its children mostly born in
the country), persons in institutions, shared flats or homeless draw their own. The foreign-born
share differs strongly by NUTS 2 region (the capital's high, a rural region's near zero) and
grows with the LAU's size within a region."""

from __future__ import annotations

import numpy as np

from sdclab.censuses.eu2021 import census
from sdclab.censuses.eu2021.synth_draws import bernoulli, sample_pmf
from sdclab.censuses.eu2021.synth_households import (
    CHILD,
    PARTNER,
    SHARED_ORIGIN_TYPES,
    People,
)
from sdclab.core.arrays import FloatArray, IntArray
from sdclab.core.sampling import sample_rows

CAPITAL_FOREIGN_SHARE = 0.30
"""Share of foreign-origin units in the capital's NUTS 2 region (chosen for illustration). Some
partners and most children in a foreign-origin household are born in the country, so the
persons' foreign-born share is about four fifths of a region's share (0.24 here)."""
RURAL_FOREIGN_SHARE = 0.005
"""Share of foreign-origin units in the last NUTS 2 region, a rural one (chosen for
illustration)."""
REGION_FOREIGN_MEDIAN = 0.07
REGION_FOREIGN_LOG_SD = 0.8
REGION_FOREIGN_RANGE = (0.002, 0.25)
"""The other regions' shares of foreign-origin units: lognormal around 7%, clipped (chosen for
illustration)."""
SIZE_ELASTICITY = 0.25
"""Within a region, an LAU's share of foreign-origin units grows as its population to this power
(larger towns attract more migrants; chosen for illustration); the region's share is kept."""
MAX_LAU_FOREIGN_SHARE = 0.8
"""No LAU has more foreign-origin units than this share."""
ORIGINS = ("EU", "EUR", "AFR", "ASI", "AMS", "AMN", "OCE")
ORIGIN_PMF = (0.38, 0.14, 0.18, 0.18, 0.08, 0.03, 0.01)
"""Birthplace of the foreign-born by continent (chosen for illustration; the Americas split into
the Caribbean, South or Central America and North America as the regulation's POB.M does)."""
COUNTRY_RANK_POWER = 1.0
"""Within its continent, a foreign-origin unit's country of birth is the k-th of the continent's
countries in the order of the regulation's POB.H list (its "other country" last) with weight
1 / k ** COUNTRY_RANK_POWER (chosen for illustration: a few countries make up most of a
continent's foreign-born, the rest a long tail)."""
MIXED_COUPLE_SHARE = 0.2
"""Share of foreign-born persons' partners born in the country (chosen for illustration)."""
CHILD_BORN_HERE_SHARE = 0.6
"""Share of foreign-born parents' children born in the country (chosen for illustration)."""
NATURALISED_SHARE = 0.35
"""Share of the foreign-born holding the country's citizenship (chosen for illustration)."""
CHILD_FOREIGN_CITIZEN_SHARE = 0.5
"""Share of children born in the country to foreign-born parents who hold their parents'
citizenship, not the country's (chosen for illustration)."""
STATELESS_SHARE = 0.01
"""Share of non-naturalised persons born outside the EU who are stateless (chosen for
illustration; rare)."""

MOVES = ("SAME", "WITHIN", "ABROAD")
MOVE_PMF_NATIVE = (0.897, 0.10, 0.003)
MOVE_PMF_FOREIGN = (0.78, 0.14, 0.08)
"""Residence a year before of an origin unit born in the country and abroad (chosen for
illustration: about 10% of persons moved within the country and 1% from abroad in a year)."""
SAME_NUTS3_SHARE = 0.6
"""Share of the moves within the country that came from the same NUTS 3 area (chosen for
illustration); the others came from another NUTS 3 area."""

CAS = ("EMP", "UNE", "MIN", "PEN", "STU", "OTH")
CAS_AGE_EDGES = (15, 25, 65)
CAS_BY_AGE = np.array(
    [
        [0.00, 0.00, 1.0, 0.00, 0.00, 0.00],  # under 15: below the minimum age
        [0.30, 0.06, 0.0, 0.00, 0.60, 0.04],  # 15-24: mostly students
        [0.74, 0.06, 0.0, 0.05, 0.03, 0.12],  # 25-64: mostly employed
        [0.05, 0.00, 0.0, 0.90, 0.00, 0.05],  # 65+: mostly pensioners
    ]
)
"""Current activity status by age band (chosen for illustration)."""

EDU = ("ED0", "ED1", "ED2", "ED3", "ED4", "ED5", "ED6", "ED7", "ED8", "NAP")
EDU_AGE_EDGES = (15, 20, 25, 35, 50, 65)
EDU_BY_AGE = np.array(
    [
        [0.00, 0.00, 0.00, 0.00, 0.00, 0.00, 0.00, 0.00, 0.00, 1.0],  # under 15
        [0.00, 0.05, 0.60, 0.35, 0.00, 0.00, 0.00, 0.00, 0.00, 0.0],  # 15-19
        [0.00, 0.00, 0.15, 0.55, 0.05, 0.05, 0.18, 0.02, 0.00, 0.0],  # 20-24
        [0.00, 0.02, 0.13, 0.40, 0.05, 0.05, 0.18, 0.15, 0.02, 0.0],  # 25-34
        [0.01, 0.04, 0.16, 0.42, 0.05, 0.05, 0.13, 0.12, 0.02, 0.0],  # 35-49
        [0.01, 0.08, 0.22, 0.43, 0.04, 0.04, 0.09, 0.08, 0.01, 0.0],  # 50-64
        [0.03, 0.17, 0.27, 0.36, 0.03, 0.03, 0.05, 0.05, 0.01, 0.0],  # 65+
    ]
)
"""Educational attainment (ISCED 2011 levels) by age band: older cohorts lower (chosen for
illustration)."""

LOC_LOWER_BOUNDS = (1_000_000, 500_000, 200_000, 100_000, 50_000, 20_000, 10_000, 5_000, 2_000,
    1_000, 500, 200)  # fmt: skip
"""The lower bounds of the census's locality size bands, in its code order (the last band,
LT200, has none)."""


def region_foreign_shares(rng: np.random.Generator, n_regions: int) -> FloatArray:
    """Each NUTS 2 region's share of foreign-origin units: the capital's (region 0) high, the
    last region's near zero, the others lognormal."""
    low, high = REGION_FOREIGN_RANGE
    share = REGION_FOREIGN_MEDIAN * rng.lognormal(0.0, REGION_FOREIGN_LOG_SD, size=n_regions)
    share = np.clip(share, low, high)
    if n_regions > 1:
        share[-1] = RURAL_FOREIGN_SHARE
    share[0] = CAPITAL_FOREIGN_SHARE
    return share


def lau_foreign_shares(region_share: FloatArray, region: IntArray, persons: IntArray) -> FloatArray:
    """Each LAU's share of foreign-origin units: its region's, tilted towards the larger LAUs so
    that the region's person-weighted share stays as it was."""
    tilt = np.maximum(persons, 1).astype(np.float64) ** SIZE_ELASTICITY
    weighted = np.bincount(region, weights=tilt * persons) / np.bincount(region, weights=persons)
    share = region_share[region] * tilt / weighted[region]
    return np.asarray(np.clip(share, 0.0, MAX_LAU_FOREIGN_SHARE), dtype=np.float64)


def origin_units(people: People) -> IntArray:
    """Each person's origin unit: the household for families and persons living alone, the
    person for residents of institutions, shared flats and the homeless."""
    shared = np.isin(people.kind, SHARED_ORIGIN_TYPES)
    own = people.household.max(initial=-1) + 1 + np.arange(len(people.kind))
    unit = np.where(shared, people.household, own)
    return np.unique(unit, return_inverse=True)[1].astype(np.int64)  # numbered 0, 1, ...


def birthplace_and_citizenship(
    rng: np.random.Generator, people: People, unit: IntArray, foreign_share: FloatArray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """POB and COC codes, and whether each person's origin unit is foreign-born.

    ``foreign_share`` is the share of foreign-origin units in each person's LAU: a foreign-origin
    unit's members are born abroad, except some partners and most children."""
    n_units, n = int(unit.max(initial=-1)) + 1, len(unit)
    first = np.full(n_units, n, dtype=np.int64)
    np.minimum.at(first, unit, np.arange(n))
    unit_foreign = bernoulli(rng, foreign_share[first], n_units)
    unit_origin = np.asarray(ORIGINS)[sample_pmf(rng, ORIGIN_PMF, n_units)]
    foreign, origin = unit_foreign[unit], unit_origin[unit]
    born_here = np.select(
        [people.role == PARTNER, people.role == CHILD],
        [bernoulli(rng, MIXED_COUPLE_SHARE, n), bernoulli(rng, CHILD_BORN_HERE_SHARE, n)],
        False,
    )
    pob = np.where(foreign & ~born_here, origin, "NAT")
    naturalised = bernoulli(rng, NATURALISED_SHARE, n)
    stateless = bernoulli(rng, STATELESS_SHARE, n) & (origin != "EU")
    keeps_parents = foreign & born_here & (people.role == CHILD)
    keeps_parents &= bernoulli(rng, CHILD_FOREIGN_CITIZEN_SHARE, n)
    coc = np.select(
        [pob == "NAT", naturalised, stateless],
        [np.where(keeps_parents, origin, "NAT"), "NAT", "STL"],
        pob,
    )
    return pob, coc, foreign


def countries(
    rng: np.random.Generator, unit: IntArray, pob: np.ndarray, coc: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """POB and COC codes with each continent replaced by a country within it.

    One draw per origin unit, so its members born abroad or holding a foreign citizenship share
    the country. A citizen of a country of birth COC.H does not list (a territory such as
    Greenland or Sark) holds the citizenship of its continent's "other country"."""
    births, citizenships, weights = _countries_by_continent()
    cdf = np.cumsum(weights, axis=1)
    cdf /= cdf[:, -1:]
    last = (weights > 0).sum(axis=1) - 1  # a row's last country (its padding never drawn)
    n_rows, width = cdf.shape
    flat = (cdf + np.arange(n_rows)[:, None]).ravel()
    drawn = rng.random(int(unit.max(initial=-1)) + 1)[unit]  # one draw per origin unit
    order = np.argsort(ORIGINS)
    result = []
    for codes, table in ((pob, births), (coc, citizenships)):
        at = np.minimum(np.searchsorted(np.asarray(ORIGINS)[order], codes), len(ORIGINS) - 1)
        row = order[at]
        is_continent = np.asarray(ORIGINS)[row] == codes
        column = np.searchsorted(flat, row + drawn, side="right") - row * width
        column = np.clip(column, 0, last[row])
        result.append(np.where(is_continent, table[row, column], codes))
    return result[0], result[1]


def _countries_by_continent() -> tuple[np.ndarray, np.ndarray, FloatArray]:
    """Per continent of :data:`ORIGINS`, its POB.H countries in the regulation's order, the COC.H
    code of each country's citizens and its weight (rows padded with weight 0)."""
    pob, coc = census().attribute("POB"), census().attribute("COC")
    pob_m, coc_m = pob.breakdown("M"), coc.breakdown("M")
    members = [np.flatnonzero(pob_m.membership[pob_m.codes.index(c)]) for c in ORIGINS]
    width = max(len(m) for m in members)
    weights = np.zeros((len(ORIGINS), width))
    births = np.full((len(ORIGINS), width), pob.codes[0], dtype=object)
    citizenships = np.full((len(ORIGINS), width), coc.codes[0], dtype=object)
    listed = set(coc.codes)
    for row, (continent, inside) in enumerate(zip(ORIGINS, members, strict=True)):
        other = coc.codes[np.flatnonzero(coc_m.membership[coc_m.codes.index(continent)])[-1]]
        born = [pob.codes[j] for j in inside]
        weights[row, : len(born)] = 1.0 / np.arange(1, len(born) + 1) ** COUNTRY_RANK_POWER
        births[row, : len(born)] = born
        citizenships[row, : len(born)] = [c if c in listed else other for c in born]
    return births.astype(str), citizenships.astype(str), weights


def residence_a_year_before(
    rng: np.random.Generator, age: IntArray, unit: IntArray, foreign: np.ndarray
) -> np.ndarray:
    """ROY codes: one move per origin unit (a family moves together), more often from abroad
    for the foreign-born, from the same NUTS 3 area or another; not applicable under one year."""
    n_units = int(unit.max(initial=-1)) + 1
    native = np.asarray(MOVES)[sample_pmf(rng, MOVE_PMF_NATIVE, n_units)][unit]
    abroad = np.asarray(MOVES)[sample_pmf(rng, MOVE_PMF_FOREIGN, n_units)][unit]
    moved = np.where(foreign, abroad, native)
    nearby = bernoulli(rng, SAME_NUTS3_SHARE, n_units)[unit]
    moved = np.where((moved == "WITHIN") & ~nearby, "WITHIN_OTHER", moved)
    return np.where(age < 1, "NAP", moved)


def by_age_band(
    rng: np.random.Generator,
    age: IntArray,
    edges: tuple[int, ...],
    table: FloatArray,
    codes: tuple[str, ...],
) -> np.ndarray:
    """Codes drawn from the row of ``table`` for each person's age band."""
    band = np.searchsorted(np.asarray(edges), age, side="right").astype(np.int64)
    return np.asarray(codes)[sample_rows(rng, table, band)]


def locality_size(persons: IntArray) -> np.ndarray:
    """LOC code of each LAU from its population."""
    band = (persons[:, None] < np.asarray(LOC_LOWER_BOUNDS)[None, :]).sum(axis=1)
    return np.asarray(census().attribute("LOC").codes)[band]
