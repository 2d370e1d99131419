"""The US 2010 census's attributes, code lists, age recodes and histogram domains (schemas).

Every attribute has contiguous integer codes (docs/data.md, *Population*); a schema is an ordered
product of them (:class:`sdclab.core.domain.Schema`).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np
import numpy.typing as npt

from sdclab.core.arrays import IntArray
from sdclab.core.domain import Attribute, Edit, Schema

# ---------------------------------------------------------------------------------------------
# Code lists (docs/data.md, *Population*)
# ---------------------------------------------------------------------------------------------

SEX_LABELS = {1: "male", 2: "female"}
AGE_MAX = 115
HISPANIC_LABELS = {0: "not Hispanic", 1: "Hispanic"}

RACE_NAMES = ("white", "black", "aian", "asian", "nhopi", "sor")
"""The six OMB race bits, in bit order: white=1, black=2, aian=4, asian=8, nhopi=16, sor=32."""
RACE_BIT = {name: 1 << i for i, name in enumerate(RACE_NAMES)}
RACE_MAX = 63

RELATIONSHIP_LABELS = {
    0: "householder",
    1: "spouse or partner",
    2: "child",
    3: "other relative",
    4: "non-relative",
    5: "group-quarters resident",
}
GQ_RESIDENT = 5

UNIT_TYPE_LABELS = {
    0: "housing unit",
    1: "correctional facility for adults",
    2: "juvenile facility",
    3: "nursing facility",
    4: "other institutional facility",
    5: "college or university student housing",
    6: "military quarters",
    7: "other non-institutional facility",
}
INSTITUTIONAL_GQ_TYPES = (1, 2, 3, 4)
NONINSTITUTIONAL_GQ_TYPES = (5, 6, 7)

TENURE_LABELS = {
    1: "owned with a mortgage or loan",
    2: "owned free and clear",
    3: "renter occupied",
}

HOUSEHOLD_SIZE_TOP = 7
"""Household sizes are tabulated as 1, 2, …, 6, 7 or more."""

HOUSEHOLD_TYPE_LABELS = {
    1: "married-couple family",
    2: "family, male householder, no spouse present",
    3: "family, female householder, no spouse present",
    4: "non-family, householder living alone",
    5: "non-family, householder not living alone",
}
"""HOUSEHOLD_TYPE of SafeTab-H (occupied housing units), derived from the relationships in the unit
by :attr:`sdclab.censuses.us2010.population.contract.Population.household_type`; 0 there means no
household (vacant housing unit or group-quarters facility). A spouse *or unmarried partner*
(relationship 1) makes a married-couple family: the contract has one code for both."""

VOTING_AGE = 18


# ---------------------------------------------------------------------------------------------
# Race helpers
# ---------------------------------------------------------------------------------------------


def race_label(code: int) -> str:
    """Readable name of a race bitmask, e.g. 3 -> 'white+black'."""
    return "+".join(name for name in RACE_NAMES if code & RACE_BIT[name])


def race_bit_count(race: npt.ArrayLike) -> IntArray:
    """Number of race bits set in each code (1 = 'alone', >= 2 = 'two or more races')."""
    r = np.asarray(race, dtype=np.int64)
    return sum(((r >> i) & 1 for i in range(len(RACE_NAMES))), start=np.zeros_like(r))


def race_codes_by_bit_count() -> list[int]:
    """All 63 race codes ordered as the published file lists them: alone, then two races, …."""
    codes: list[int] = []
    for k in range(1, len(RACE_NAMES) + 1):
        for combo in combinations(range(len(RACE_NAMES)), k):
            codes.append(sum(1 << i for i in combo))
    return codes


# ---------------------------------------------------------------------------------------------
# Detailed race and Hispanic origin (SafeTab-H)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DetailedCode:
    """One detailed race or Hispanic origin code, its label and its relative frequency.

    ``frequency`` is the approximate share of the code among persons of its major race (race codes)
    or among Hispanic persons (origin codes); the frequencies of one list sum to 1. Asian, Pacific
    Islander and Hispanic shares are rounded from published 2010 census counts; white, black and
    AIAN shares are orders of magnitude from published ancestry and tribal counts; "no detail" and
    "other" shares are design guesses. Good enough to make common groups common and rare groups
    rare; not estimates. ``hispanic_write_in``
    marks a Hispanic origin written in the race question (some other race): the synthetic generator
    gives it only to Hispanic persons.
    """

    code: int
    label: str
    frequency: float
    hispanic_write_in: bool = False


DETAILED_RACE_BASE = 1000
"""Detailed race codes of the major race ``RACE_NAMES[i]`` (bit ``1 << i``) are the integers
``(i + 1)·1000 … (i + 1)·1000 + 999``: white 1000–1999, black 2000–2999, aian 3000–3999,
asian 4000–4999, nhopi 5000–5999, some other race 6000–6999. So the major race of a code is
``code // 1000`` (1 = white … 6 = sor) and its race bit ``1 << (code // 1000 - 1)``. Code
``(i + 1)·1000`` itself is the major race reported without detail (e.g. 1000: the White box ticked
with nothing written in)."""
DETAILED_RACE_MAX = 8
"""At most 8 detailed race codes per person (QRACE1…QRACE8; r of SafeTab-H's stability)."""

DETAILED_RACE: dict[str, tuple[DetailedCode, ...]] = {
    "white": (
        DetailedCode(1000, "White, no detail", 0.200),
        DetailedCode(1001, "German", 0.170),
        DetailedCode(1002, "English", 0.150),
        DetailedCode(1003, "Irish", 0.130),
        DetailedCode(1004, "Italian", 0.070),
        DetailedCode(1005, "Polish", 0.035),
        DetailedCode(1006, "French", 0.030),
        DetailedCode(1007, "Scottish", 0.030),
        DetailedCode(1008, "Norwegian", 0.017),
        DetailedCode(1009, "Dutch", 0.016),
        DetailedCode(1010, "Swedish", 0.015),
        DetailedCode(1011, "Russian", 0.011),
        DetailedCode(1012, "Lebanese", 0.004),
        DetailedCode(1013, "Iranian", 0.003),
        DetailedCode(1014, "Egyptian", 0.0015),
        DetailedCode(1015, "Other White (e.g. European, Greek, Armenian)", 0.1175),
    ),
    "black": (
        DetailedCode(2000, "Black, no detail", 0.100),
        DetailedCode(2001, "African American", 0.800),
        DetailedCode(2002, "Jamaican", 0.025),
        DetailedCode(2003, "Haitian", 0.022),
        DetailedCode(2004, "Nigerian", 0.012),
        DetailedCode(2005, "Ethiopian", 0.007),
        DetailedCode(2006, "Somali", 0.004),
        DetailedCode(2007, "Ghanaian", 0.004),
        DetailedCode(2008, "Trinidadian and Tobagonian", 0.004),
        DetailedCode(2009, "Other Black (e.g. Barbadian, Liberian, Kenyan)", 0.022),
    ),
    "aian": (
        DetailedCode(3000, "American Indian or Alaska Native, no detail", 0.250),
        DetailedCode(3001, "Navajo Nation", 0.090),
        DetailedCode(3002, "Cherokee", 0.070),
        DetailedCode(3003, "Sioux", 0.035),
        DetailedCode(3004, "Chippewa", 0.030),
        DetailedCode(3005, "Choctaw", 0.025),
        DetailedCode(3006, "Apache", 0.020),
        DetailedCode(3007, "Lumbee", 0.017),
        DetailedCode(3008, "Pueblo", 0.015),
        DetailedCode(3009, "Mexican American Indian", 0.050),
        DetailedCode(3010, "Yup'ik (Alaska Native)", 0.008),
        DetailedCode(3011, "Inupiat (Alaska Native)", 0.006),
        DetailedCode(3012, "Tlingit-Haida (Alaska Native)", 0.003),
        DetailedCode(3013, "Other American Indian or Alaska Native tribe", 0.381),
    ),
    "asian": (
        DetailedCode(4000, "Asian, no detail", 0.015),
        DetailedCode(4001, "Chinese", 0.225),
        DetailedCode(4002, "Asian Indian", 0.195),
        DetailedCode(4003, "Filipino", 0.175),
        DetailedCode(4004, "Vietnamese", 0.106),
        DetailedCode(4005, "Korean", 0.097),
        DetailedCode(4006, "Japanese", 0.052),
        DetailedCode(4007, "Pakistani", 0.024),
        DetailedCode(4008, "Hmong", 0.017),
        DetailedCode(4009, "Cambodian", 0.016),
        DetailedCode(4010, "Laotian", 0.013),
        DetailedCode(4011, "Thai", 0.011),
        DetailedCode(4012, "Bangladeshi", 0.009),
        DetailedCode(4013, "Taiwanese", 0.008),
        DetailedCode(4014, "Other Asian (e.g. Nepalese, Burmese, Sri Lankan)", 0.037),
    ),
    "nhopi": (
        DetailedCode(5000, "Native Hawaiian or Other Pacific Islander, no detail", 0.100),
        DetailedCode(5001, "Native Hawaiian", 0.290),
        DetailedCode(5002, "Samoan", 0.200),
        DetailedCode(5003, "Chamorro", 0.160),
        DetailedCode(5004, "Tongan", 0.070),
        DetailedCode(5005, "Fijian", 0.060),
        DetailedCode(5006, "Marshallese", 0.040),
        DetailedCode(5007, "Palauan", 0.008),
        DetailedCode(5008, "Other Pacific Islander", 0.072),
    ),
    "sor": (
        DetailedCode(6000, "Some other race, no detail", 0.100),
        DetailedCode(6001, "Mexican (written in as race)", 0.400, hispanic_write_in=True),
        DetailedCode(
            6002, "Hispanic or Latino (written in as race)", 0.220, hispanic_write_in=True
        ),
        DetailedCode(6003, "Puerto Rican (written in as race)", 0.060, hispanic_write_in=True),
        DetailedCode(
            6004, "Other Hispanic origin (written in as race)", 0.120, hispanic_write_in=True
        ),
        DetailedCode(6005, "Multiracial or mixed, no detail", 0.050),
        DetailedCode(6006, "Brazilian", 0.015),
        DetailedCode(6007, "Other write-in (e.g. Cape Verdean, Creole)", 0.035),
    ),
}
"""The detailed race code list, per major race in bit order (see DETAILED_RACE_BASE for the codes
and DetailedCode for what the frequencies mean). A small list in the shape of the Census Bureau's
(which has hundreds of detailed groups); every list ends with an 'other' code so that each major
race is covered."""

DETAILED_RACE_LABELS: dict[int, str] = {
    c.code: c.label for codes in DETAILED_RACE.values() for c in codes
}
"""Label of every detailed race code."""
_DETAILED_RACE_CODES = np.array(sorted(DETAILED_RACE_LABELS), dtype=np.int64)

NOT_HISPANIC_ORIGIN = 0
HISPANIC_ORIGINS: tuple[DetailedCode, ...] = (
    DetailedCode(1, "Mexican", 0.630),
    DetailedCode(2, "Puerto Rican", 0.092),
    DetailedCode(3, "Cuban", 0.035),
    DetailedCode(4, "Salvadoran", 0.033),
    DetailedCode(5, "Dominican", 0.028),
    DetailedCode(6, "Guatemalan", 0.021),
    DetailedCode(7, "Colombian", 0.018),
    DetailedCode(8, "Honduran", 0.013),
    DetailedCode(9, "Spaniard", 0.013),
    DetailedCode(10, "Ecuadorian", 0.011),
    DetailedCode(11, "Peruvian", 0.010),
    DetailedCode(12, "Nicaraguan", 0.007),
    DetailedCode(13, "Venezuelan", 0.004),
    DetailedCode(14, "Argentinean", 0.004),
    DetailedCode(15, "Other Hispanic or Latino (incl. no detail)", 0.081),
)
"""Detailed Hispanic origin codes (QSPAN) 1–15 and their shares among Hispanic persons (2010,
rounded); 0 (NOT_HISPANIC_ORIGIN) is not Hispanic or Latino."""
HISPANIC_ORIGIN_LABELS: dict[int, str] = {
    NOT_HISPANIC_ORIGIN: "not Hispanic or Latino",
    **{c.code: c.label for c in HISPANIC_ORIGINS},
}


def detailed_race_bit(codes: npt.ArrayLike) -> IntArray:
    """The major race bit (1 white … 32 some other race) of each detailed race code.

    ``0`` marks an empty slot and maps to 0; any other code that is not in DETAILED_RACE raises
    ``ValueError``.
    """
    c = np.asarray(codes, dtype=np.int64)
    known = np.isin(c, _DETAILED_RACE_CODES) | (c == 0)
    if not known.all():
        raise ValueError(f"unknown detailed race code {int(c[~known].flat[0])}")
    return np.where(c == 0, 0, 1 << np.maximum(c // DETAILED_RACE_BASE - 1, 0))


def detailed_race_mask(codes: npt.ArrayLike) -> IntArray:
    """The race bitmask implied by each row of detailed codes (last axis; 0 = empty slot)."""
    return np.bitwise_or.reduce(detailed_race_bit(codes), axis=-1)


# ---------------------------------------------------------------------------------------------
# Age recodes
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AgeRecode:
    """A partition of single years 0..AGE_MAX into consecutive bins given by their lower edges."""

    name: str
    lower_edges: tuple[int, ...]

    @property
    def labels(self) -> list[str]:
        edges = [*self.lower_edges, AGE_MAX + 1]
        out = []
        for lo, hi in zip(edges[:-1], edges[1:], strict=True):
            if hi == AGE_MAX + 1:
                out.append(f"{lo}+")
            elif hi - lo == 1:
                out.append(str(lo))
            else:
                out.append(f"{lo}-{hi - 1}")
        return out

    def __len__(self) -> int:
        return len(self.lower_edges)

    def of(self, age: npt.ArrayLike) -> IntArray:
        """Bin index of each age."""
        return np.searchsorted(np.asarray(self.lower_edges), np.asarray(age), side="right") - 1

    def membership(self) -> npt.NDArray[np.int8]:
        """0/1 matrix bins × single ages."""
        m = np.zeros((len(self), AGE_MAX + 1), dtype=np.int8)
        m[self.of(np.arange(AGE_MAX + 1)), np.arange(AGE_MAX + 1)] = 1
        return m


P12_AGES = AgeRecode(
    "p12",
    (0, 5, 10, 15, 18, 20, 21, 22, 25, 30, 35, 40, 45, 50, 55, 60, 62, 65, 67, 70, 75, 80, 85),
)
"""The 23 age bins of SF1 table P12."""

AGEBIN38 = AgeRecode(
    "agebin38",
    (*range(22), 22, 25, 30, 35, 40, 45, 50, 55, 60, 62, 65, 67, 70, 75, 80, 85),
)
"""The 38 block 'agebins' that P12 and P14 together pin down: single years 0–21, then P12's bins."""

PCT12_AGES = AgeRecode("pct12", (*range(100), 100, 105, 110))
"""The 103 ages of SF1 table PCT12: single years 0–99, 100–104, 105–109, 110+."""


def agebin38(age: npt.ArrayLike) -> IntArray:
    """The 38-agebin index of each age."""
    return AGEBIN38.of(age)


# ---------------------------------------------------------------------------------------------
# Attributes and schemas
# ---------------------------------------------------------------------------------------------


def _attr(name: str, labels: dict[int, str]) -> Attribute:
    lo, hi = min(labels), max(labels)
    assert sorted(labels) == list(range(lo, hi + 1)), name
    return Attribute(name, lo, hi, tuple(labels[c] for c in range(lo, hi + 1)))


SEX = _attr("sex", SEX_LABELS)
AGE = _attr("age", {a: str(a) for a in range(AGE_MAX + 1)})
RACE = _attr("race", {c: race_label(c) for c in range(1, RACE_MAX + 1)})
HISPANIC = _attr("hispanic", HISPANIC_LABELS)
RELATIONSHIP = _attr("relationship", RELATIONSHIP_LABELS)
UNIT_TYPE = _attr("unit_type", UNIT_TYPE_LABELS)
OCCUPIED = _attr("occupied", {0: "vacant", 1: "occupied"})
TENURE = _attr("tenure", {0: "none (vacant or group quarters)", **TENURE_LABELS})
HOUSEHOLD_SIZE = _attr(
    "household_size",
    {0: "none", **{s: str(s) for s in range(1, HOUSEHOLD_SIZE_TOP)}, HOUSEHOLD_SIZE_TOP: "7+"},
)
HISPANIC_ORIGIN = _attr("hispanic_origin", HISPANIC_ORIGIN_LABELS)
HOUSEHOLD_TYPE = _attr(
    "household_type", {0: "none (vacant or group quarters)", **HOUSEHOLD_TYPE_LABELS}
)


PERSON = Schema("person", (SEX, AGE, RACE, HISPANIC))
"""Persons by sex × single year of age × race (63) × Hispanic origin: 29,232 cells."""

GROUP_QUARTERS_EDIT = Edit(
    "relationship", (GQ_RESIDENT,), "unit_type", INSTITUTIONAL_GQ_TYPES + NONINSTITUTIONAL_GQ_TYPES
)
"""Reading a population enforces that group-quarters residents (relationship 5) live in group
quarters (unit types 1–7) and everyone else in housing units (unit type 0)."""

PERSON_HHGQ = Schema("person_hhgq", (RELATIONSHIP, UNIT_TYPE), (GROUP_QUARTERS_EDIT,))
"""Persons by relationship to householder × type of the unit they live in: 48 cells."""

VOTING_AGE_ATTR = _attr("votingage", {0: "under 18", 1: "18 and over"})

PL94 = Schema("pl94", (UNIT_TYPE, VOTING_AGE_ATTR, HISPANIC, RACE))
"""The 2020 redistricting (PL 94-171) person histogram: hhgq (the type of the person's unit) ×
voting age × Hispanic origin × race (63): 2,016 cells. Race keeps sdclab's bitmask order."""

DHC = Schema("dhc", (UNIT_TYPE, SEX, AGE, HISPANIC, RACE))
"""sdclab's DHC-persons-like TopDown histogram: hhgq × sex × single year of age × Hispanic origin ×
race (63): 233,856 cells. It keeps sex and age, so every person table can be tabulated from it."""

UNIT = Schema("unit", (UNIT_TYPE, OCCUPIED, TENURE, HOUSEHOLD_SIZE))
"""Units by type × occupancy × tenure × household size: 512 cells."""

HOUSEHOLD = Schema("household", (HOUSEHOLD_TYPE, TENURE))
"""Units by HOUSEHOLD_TYPE × tenure: 24 cells, the domain of SafeTab-H's household tables (T03
household type, T04 tenure); a unit that is no household has type 0 and tenure 0."""
