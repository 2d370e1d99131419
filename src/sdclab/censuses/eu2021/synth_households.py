"""Households of the European generator and the persons in them: ages, sexes and the household,
family and legal marital status that follow from each person's place in the household.

A household has a type (:data:`TYPES`) and, by type, up to two partners, children, relatives of
the nucleus and persons outside any nucleus. The first partner (the mother in a couple with
children, the lone parent) is the household's *reference*: partners' ages follow hers, children's
ages are hers less an age at birth of 16 to 45, relatives are a generation older. Persons in
institutions and the primarily homeless are households of their own type."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sdclab.censuses.eu2021.synth_draws import (
    Component,
    bernoulli,
    mixture_ages,
    sample_pmf,
    truncated_normal,
)
from sdclab.core.arrays import FloatArray, IntArray
from sdclab.core.sampling import sample_rows

TYPES = (
    "one_person",
    "couple",
    "couple_children",
    "lone_parent",
    "with_relatives",
    "non_relatives",
    "institution",
    "homeless",
)
"""Household types; the first six are private households."""
ONE, COUPLE, COUPLE_CHILDREN, LONE, RELATIVES, NON_RELATIVES, INSTITUTION, HOMELESS = range(8)
SHARED_ORIGIN_TYPES = (ONE, COUPLE, COUPLE_CHILDREN, LONE, RELATIVES)
"""Types whose members share a birthplace and a move (a family); the others draw their own."""

PRIVATE_TYPE_SHARES = (0.33, 0.24, 0.23, 0.08, 0.07, 0.05)
"""Shares of private households by type (chosen for illustration, roughly the EU pattern: about a
third live alone, couples with and without children next). With the sizes below they give about
2.3 persons per private household (Eurostat, household composition statistics: average private
household size in the EU, 2021, about 2.3)."""
CHILDREN_PMF = {
    COUPLE_CHILDREN: (0.0, 0.40, 0.42, 0.13, 0.05),
    LONE: (0.0, 0.62, 0.29, 0.09),
    RELATIVES: (0.40, 0.35, 0.25),
}
"""Number of children (index = count) by household type (chosen for illustration)."""
RELATIVES_PMF = (0.0, 0.75, 0.25)
"""Relatives of the nucleus (mostly a widowed grandparent) in a household with relatives."""
NON_RELATIVES_PMF = (0.0, 0.0, 0.70, 0.20, 0.10)
"""Persons sharing a household of non-relatives (students, flatmates)."""
INSTITUTION_PERSONS_SHARE = 0.008
"""Share of persons in institutional households (chosen for illustration: about 1% in most EU
countries, most of them in care homes)."""
INSTITUTION_SIZE_RANGE = (10, 60)
"""Residents of one institution (uniform; chosen for illustration)."""
HOMELESS_PERSONS_SHARE = 0.0001
"""Share of persons primarily homeless (a handful; chosen for illustration)."""

PARTNER_KINDS = ("MAR", "REG", "CU")
PARTNER_KIND_PMF = (0.70, 0.02, 0.28)
"""Married couples, registered partnerships and consensual unions (chosen for illustration)."""
SAME_SEX_COUPLE_SHARE = 0.01
"""Share of couples without children who are of the same sex (chosen for illustration)."""
PARTNER_GAP = (2.5, 3.0)
"""Mean and standard deviation of the second partner's age less the first's (the man is usually
a little older; chosen for illustration)."""
AGE_AT_BIRTH = (31.0, 5.0, 16.0, 45.0)
"""Mother's (lone parent's) age at a child's birth: mean, sd, lowest, highest (chosen for
illustration; Eurostat reports a mean age of women at childbirth of about 31 in the EU)."""
RELATIVE_GAP = (27.0, 5.0, 18.0, 40.0)
"""A relative's age less the reference partner's (a parent of hers): mean, sd, lowest, highest."""
MALE_BIRTH_SHARE = 0.512
"""Share of boys among children (the usual sex ratio at birth of about 105 boys per 100 girls)."""
LONE_MOTHER_SHARE = 0.84
"""Share of lone parents who are mothers (chosen for illustration)."""
FEMALE_SHARE = {ONE: 0.55, RELATIVES: 0.65, NON_RELATIVES: 0.5, INSTITUTION: 0.7, HOMELESS: 0.2}
"""Share of women among persons living alone, relatives, non-relatives, institutional residents
and the homeless (chosen for illustration)."""

REFERENCE_AGES: dict[int, list[Component]] = {
    COUPLE: [(0.35, 30, 5, 19, 45), (0.65, 64, 11, 40, 95)],
    COUPLE_CHILDREN: [(1.0, 41, 7, 20, 60)],
    LONE: [(1.0, 42, 9, 20, 75)],
    RELATIVES: [(1.0, 44, 8, 24, 60)],
}
"""The reference partner's age in a family household: mixtures of truncated normals, components
(weight, mean, sd, lowest, highest); chosen for illustration."""
SOLO_AGES: dict[int, list[Component]] = {
    ONE: [(0.45, 34, 9, 18, 64), (0.55, 72, 11, 50, 100)],
    NON_RELATIVES: [(1.0, 27, 6, 18, 65)],
    INSTITUTION: [(0.85, 87, 6, 80, 100), (0.15, 50, 18, 18, 79)],
    HOMELESS: [(1.0, 42, 12, 18, 80)],
}
"""Ages of persons outside any family nucleus by household type (institutions: mostly care homes
for the 80+); chosen for illustration."""

LMS = ("NM", "MAR", "REG", "WID", "DIV")
"""Legal marital status codes the draws below use (the census's MAR_SS, REG_SS and NS come
from the partners' sexes, or not at all)."""
LMS_UNPARTNERED = np.array(
    [
        [1.00, 0, 0, 0.00, 0.00],  # under 15
        [0.95, 0, 0, 0.00, 0.05],  # 15-29
        [0.60, 0, 0, 0.05, 0.35],  # 30-49
        [0.30, 0, 0, 0.25, 0.45],  # 50-69
        [0.15, 0, 0, 0.70, 0.15],  # 70+
    ]
)
"""Legal marital status of persons not living with a partner, by age band (chosen for
illustration: never married when young, widowed when old)."""
LMS_BAND_EDGES = (15, 30, 50, 70)
LMS_CONSENSUAL = (0.70, 0, 0, 0.05, 0.25)
"""Legal marital status of partners in a consensual union (never married, widowed, divorced)."""
LMS_LONE_PARENT = (0.45, 0, 0, 0.10, 0.45)
"""Legal marital status of lone parents."""
LMS_ADULT_CHILD = (0.95, 0, 0, 0.00, 0.05)
"""Legal marital status of sons and daughters aged 25 or over (a few divorced returners)."""

REFERENCE, PARTNER, CHILD, RELATIVE, SOLO = range(5)
"""Roles of a person in a household."""


@dataclass(frozen=True)
class Households:
    """One entry per household: its type and how many members of each role it has."""

    kind: IntArray
    partners: IntArray
    children: IntArray
    relatives: IntArray
    solos: IntArray

    @property
    def size(self) -> IntArray:
        """Persons per household."""
        return self.partners + self.children + self.relatives + self.solos


@dataclass(frozen=True)
class People:
    """One entry per person, households in order: the person's household, role and traits."""

    household: IntArray
    role: IntArray
    kind: IntArray
    age: IntArray
    female: np.ndarray
    hst: np.ndarray
    fst: np.ndarray
    lms: np.ndarray


def draw_households(rng: np.random.Generator, persons: int) -> Households:
    """Households holding exactly ``persons`` persons: institutions and the homeless take their
    shares, private households of random types the rest (topped up with one-person ones)."""
    institutional = int(round(persons * INSTITUTION_PERSONS_SHARE))
    homeless = int(round(persons * HOMELESS_PERSONS_SHARE))
    private = _private_households(rng, persons - institutional - homeless)
    sizes = _institution_sizes(rng, institutional)
    ones = np.ones(homeless, dtype=np.int64)
    zeros = np.zeros(len(sizes) + homeless, dtype=np.int64)
    kind = np.concatenate([np.full(len(sizes), INSTITUTION), np.full(homeless, HOMELESS)])
    return Households(
        kind=np.concatenate([private.kind, kind]).astype(np.int64),
        partners=np.concatenate([private.partners, zeros]),
        children=np.concatenate([private.children, zeros]),
        relatives=np.concatenate([private.relatives, zeros]),
        solos=np.concatenate([private.solos, sizes, ones]),
    )


def _private_households(rng: np.random.Generator, persons: int) -> Households:
    """Private households of random types whose sizes add up to exactly ``persons``."""
    n = persons // 2 + 16  # more than enough: the mean size is above 2
    kind = sample_pmf(rng, PRIVATE_TYPE_SHARES, n)
    partners = np.select(
        [np.isin(kind, (COUPLE, COUPLE_CHILDREN, RELATIVES)), kind == LONE], [2, 1], 0
    )
    children = np.zeros(n, dtype=np.int64)
    for k, pmf in CHILDREN_PMF.items():
        children[kind == k] = sample_pmf(rng, pmf, int((kind == k).sum()))
    relatives = np.where(kind == RELATIVES, sample_pmf(rng, RELATIVES_PMF, n), 0)
    solos = np.select(
        [kind == ONE, kind == NON_RELATIVES], [1, sample_pmf(rng, NON_RELATIVES_PMF, n)], 0
    )
    size = partners + children + relatives + solos
    keep = np.cumsum(size) <= persons
    extra = persons - int(size[keep].sum())
    pad = np.zeros(extra, dtype=np.int64)
    return Households(
        kind=np.concatenate([kind[keep], np.full(extra, ONE)]).astype(np.int64),
        partners=np.concatenate([partners[keep], pad]).astype(np.int64),
        children=np.concatenate([children[keep], pad]).astype(np.int64),
        relatives=np.concatenate([relatives[keep], pad]).astype(np.int64),
        solos=np.concatenate([solos[keep], pad + 1]).astype(np.int64),
    )


def _institution_sizes(rng: np.random.Generator, persons: int) -> IntArray:
    """Institutions of random sizes holding exactly ``persons`` residents."""
    low, high = INSTITUTION_SIZE_RANGE
    sizes = rng.integers(low, high + 1, size=persons // low + 1)
    cut = int(np.searchsorted(np.cumsum(sizes), persons, side="left"))
    sizes = sizes[: cut + 1].copy()
    sizes[-1] -= int(sizes.sum()) - persons
    return sizes[sizes > 0].astype(np.int64)


def draw_people(rng: np.random.Generator, households: Households) -> People:
    """Every household's members, in household order, with their ages, sexes and statuses."""
    size = households.size
    household = np.repeat(np.arange(len(size)), size)
    start = np.cumsum(size) - size
    position = np.arange(len(household)) - start[household]
    role = _roles(position, households, household)
    kind = households.kind[household]
    age, female = _ages_and_sexes(rng, households, household, role)
    union = sample_pmf(rng, PARTNER_KIND_PMF, len(size))
    couple = np.where(households.kind == LONE, -1, union)[household]  # -1: no partner
    same_sex = _same_sex_partners(household, role, female)
    hst, fst = _household_and_family_status(role, kind, age, female, couple, same_sex)
    lms = _legal_marital_status(rng, role, age, couple, same_sex)
    return People(household, role, kind, age, female, hst, fst, lms)


def _roles(position: IntArray, households: Households, household: IntArray) -> IntArray:
    """Each member's role from their position in the household: partners, children, relatives,
    then persons outside the nucleus."""
    p = households.partners[household]
    c = p + households.children[household]
    r = c + households.relatives[household]
    choices = [(position == 0) & (p > 0), position < p, position < c, position < r]
    return np.select(choices, [REFERENCE, PARTNER, CHILD, RELATIVE], SOLO).astype(np.int64)


def _ages_and_sexes(
    rng: np.random.Generator, households: Households, household: IntArray, role: IntArray
) -> tuple[IntArray, np.ndarray]:
    """Ages: the reference partner's by type, the others' relative to hers; sexes by role."""
    n_households, kind = len(households.kind), households.kind
    reference_age = np.zeros(n_households, dtype=np.int64)
    for k, mixture in REFERENCE_AGES.items():
        reference_age[kind == k] = mixture_ages(rng, mixture, int((kind == k).sum()))
    mother = reference_age[household].astype(np.float64)
    gap = np.rint(rng.normal(*PARTNER_GAP, size=len(role)))
    mean, sd, low, high = AGE_AT_BIRTH
    at_birth = truncated_normal(rng, mean, sd, low, np.minimum(high, mother))
    rel_mean, rel_sd, rel_low, rel_high = RELATIVE_GAP
    older = truncated_normal(rng, rel_mean, rel_sd, rel_low, rel_high)
    solo = np.zeros(len(role), dtype=np.int64)
    person_kind = kind[household]
    for k, mixture in SOLO_AGES.items():
        solo[person_kind == k] = mixture_ages(rng, mixture, int((person_kind == k).sum()))
    age = np.select(
        [role == REFERENCE, role == PARTNER, role == CHILD, role == RELATIVE],
        [
            mother,
            np.clip(mother + gap, 18, 100),
            np.floor(mother - at_birth),
            np.minimum(mother + older, 100),
        ],
        solo,
    ).astype(np.int64)
    return np.clip(age, 0, 100), _sexes(rng, households, household, role)


def _sexes(
    rng: np.random.Generator, households: Households, household: IntArray, role: IntArray
) -> np.ndarray:
    """Women as reference partners (lone parents mostly mothers), men as second partners except in
    same-sex couples; children by the sex ratio at birth; others by their type's share."""
    kind = households.kind
    same_sex = (kind == COUPLE) & bernoulli(rng, SAME_SEX_COUPLE_SHARE, len(kind))
    same_sex_female = bernoulli(rng, 0.5, len(kind))
    reference_female = np.where(same_sex, same_sex_female, True)
    reference_female = np.where(
        kind == LONE, bernoulli(rng, LONE_MOTHER_SHARE, len(kind)), reference_female
    )
    partner_female = np.where(same_sex, same_sex_female, False)
    share = np.zeros(len(TYPES))
    for k, p in FEMALE_SHARE.items():
        share[k] = p
    own = bernoulli(rng, share[kind[household]], len(role))
    own = np.where(role == CHILD, bernoulli(rng, 1 - MALE_BIRTH_SHARE, len(role)), own)
    return np.select(
        [role == REFERENCE, role == PARTNER],
        [reference_female[household], partner_female[household]],
        own,
    )


def _same_sex_partners(household: IntArray, role: IntArray, female: np.ndarray) -> np.ndarray:
    """Whether each person is a partner in a couple of two men or two women."""
    sexes = np.zeros((int(household.max(initial=-1)) + 1, 2), dtype=np.int64)  # men, women
    partner = (role == REFERENCE) | (role == PARTNER)
    np.add.at(sexes, (household[partner], female[partner].astype(np.int64)), 1)
    return partner & (sexes[household].max(axis=1) == 2)


def _sex_of_union(union: np.ndarray, same_sex: np.ndarray) -> np.ndarray:
    """A marriage's or registered partnership's code, ``_SS`` added for a same-sex couple (the
    regulation's FST and LMS tell same-sex from opposite-sex unions, not marriages from
    registered partnerships)."""
    formal = np.isin(union, ["MAR", "REG"]) & same_sex
    return np.where(formal, np.char.add(union.astype(str), "_SS"), union)


def _household_and_family_status(
    role: IntArray,
    kind: IntArray,
    age: IntArray,
    female: np.ndarray,
    couple: IntArray,
    same_sex: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """HST and FST codes from each person's role: partners by their union (FST also by whether
    the couple is of the same sex), lone parents by sex, children by age (FST: by whether their
    parent is a lone parent), everyone else by the type of household they live in."""
    partner = (role == REFERENCE) | (role == PARTNER)
    lone = partner & (kind == LONE)
    union = np.asarray(PARTNER_KINDS)[couple]
    outside = np.asarray(["ALONE", "", "", "", "REL", "NREL", "INST", "HOMELESS"])[kind]
    hst = np.select(
        [lone, partner, role == CHILD, role == RELATIVE],
        [np.where(female, "LM", "LF"), union, np.where(age < 25, "C_LT25", "C_GE25"), "REL"],
        outside,
    )
    child = np.where(kind == LONE, "CHILD_LP", "CHILD")
    fst = np.select(
        [lone, partner, role == CHILD], ["LONE", _sex_of_union(union, same_sex), child], "NAP"
    )
    return hst, fst


def _legal_marital_status(
    rng: np.random.Generator, role: IntArray, age: IntArray, couple: IntArray, same_sex: np.ndarray
) -> np.ndarray:
    """LMS codes: married and registered partners as such, consensual partners and lone parents
    never married, divorced or widowed, children mostly never married, others by age band."""
    band = np.searchsorted(np.asarray(LMS_BAND_EDGES), age, side="right")
    table: FloatArray = np.vstack(
        [LMS_UNPARTNERED, LMS_CONSENSUAL, LMS_LONE_PARENT, LMS_ADULT_CHILD]
    )
    n_bands = len(LMS_UNPARTNERED)
    partner = (role == REFERENCE) | (role == PARTNER)
    is_lone = partner & (couple < 0)
    row = np.select(
        [partner & (couple == 2), is_lone, (role == CHILD) & (age >= 25), role == CHILD],
        [n_bands, n_bands + 1, n_bands + 2, 0],
        band,
    ).astype(np.int64)
    drawn = np.asarray(LMS)[sample_rows(rng, table, row)]
    union = _sex_of_union(np.asarray(PARTNER_KINDS)[np.maximum(couple, 0)], same_sex)
    return np.where(partner & ((couple == 0) | (couple == 1)), union, drawn)
