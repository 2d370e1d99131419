"""Attributes, code lists and histogram domains.

A *schema* is an ordered tuple of attributes with contiguous integer codes. Its *domain* is the
Cartesian product of the codes, flattened in C order (the last attribute varies fastest).
A geounit's data is a histogram over the domain; tables are linear queries on it
(see ``sdclab.tables``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]

# ---------------------------------------------------------------------------------------------
# Code lists (DESIGN.md §4)
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


@dataclass(frozen=True)
class Attribute:
    """A categorical attribute with contiguous integer codes ``low .. high``."""

    name: str
    low: int
    high: int
    labels: tuple[str, ...]

    @property
    def size(self) -> int:
        return self.high - self.low + 1

    @property
    def codes(self) -> IntArray:
        return np.arange(self.low, self.high + 1, dtype=np.int64)

    def position(self, values: npt.ArrayLike) -> IntArray:
        """Position of each code in the attribute's code list (codes must be valid)."""
        return np.asarray(values, dtype=np.int64) - self.low


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


@dataclass(frozen=True)
class Schema:
    """An ordered product of attributes: the domain of a histogram."""

    name: str
    attributes: tuple[Attribute, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(a.size for a in self.attributes)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attributes)

    def attribute(self, name: str) -> Attribute:
        for a in self.attributes:
            if a.name == name:
                return a
        raise KeyError(f"schema {self.name!r} has no attribute {name!r}")

    def cell_index(self, columns: Mapping[str, npt.ArrayLike]) -> IntArray:
        """Flat domain index of each record, from one code array per attribute."""
        index = np.zeros(len(np.asarray(columns[self.attributes[0].name])), dtype=np.int64)
        for a in self.attributes:
            index = index * a.size + a.position(columns[a.name])
        return index

    def decode(self, index: npt.ArrayLike) -> dict[str, IntArray]:
        """Inverse of :meth:`cell_index`: the code of every attribute for each flat index."""
        pos = np.unravel_index(np.asarray(index, dtype=np.int64), self.shape)
        return {
            a.name: p.astype(np.int64) + a.low for a, p in zip(self.attributes, pos, strict=True)
        }


PERSON = Schema("person", (SEX, AGE, RACE, HISPANIC))
"""Persons by sex × single year of age × race (63) × Hispanic origin: 29,232 cells."""

PERSON_HHGQ = Schema("person_hhgq", (RELATIONSHIP, UNIT_TYPE))
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
