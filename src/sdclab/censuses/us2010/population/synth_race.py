"""The synthetic generator's race and ethnicity: race and Hispanic origin with hierarchical
segregation (stage 4), and the detailed race codes and Hispanic origin drawn last from their own
stream (stage 7), with the model parameters they draw from."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np
import numpy.typing as npt

from sdclab.censuses.us2010 import schema
from sdclab.censuses.us2010.population.synth_draws import dirichlet_rows, sample_pmf
from sdclab.censuses.us2010.population.synth_geography import GeographyPlan
from sdclab.censuses.us2010.population.synth_households import (
    SAME_RACE_IN_HOUSEHOLD,
    OccupiedUnits,
    People,
)
from sdclab.censuses.us2010.population.synth_targets import (
    HISPANIC_RACE_SPLIT,
    HISPANIC_SHARE,
    RACE_ALONE_SHARES,
    RACE_GROUPS,
)
from sdclab.core.arrays import FloatArray, IntArray
from sdclab.core.sampling import sample_rows

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


# Detailed race and Hispanic origin (SafeTab-H); code lists and frequencies in
# sdclab.censuses.us2010.schema.
EXTRA_RACE_CODE_COUNTS = (0.85, 0.11, 0.03, 0.01)
"""P(a person reports 0, 1, 2 or 3 detailed race codes beyond one per major race), e.g. German and
Irish; each extra code goes to one of the person's major races (at most DETAILED_RACE_MAX codes in
all). A design assumption of the right order: multiple ancestries are common among whites."""
DETAILED_SHARED_IN_HOUSEHOLD = 0.95
"""P(a household member whose race bitmask equals the householder's takes the householder's
detailed race codes, and, if both are Hispanic, the householder's Hispanic origin)."""


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
