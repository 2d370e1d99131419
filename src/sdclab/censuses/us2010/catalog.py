"""The US 2010 census's table catalogue: the SF1 tables sdclab publishes, declared as data
(:mod:`sdclab.core.tables.definition`).

Adding a table is adding an entry to :data:`CATALOG`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from sdclab.censuses.us2010 import schema
from sdclab.censuses.us2010.geography import LEVELS
from sdclab.core.tables.definition import (
    Dimension,
    Mask,
    Part,
    TableDef,
    all_codes,
    categories,
    codes_mask,
)


def age_recode(recode: schema.AgeRecode) -> Dimension:
    return Dimension("age", tuple(recode.labels), recode.membership())


SEXES = all_codes(schema.SEX)
P12_AGE = age_recode(schema.P12_AGES)
PCT12_AGE = age_recode(schema.PCT12_AGES)
UNDER_20 = categories(schema.AGE, list(range(20)), [str(a) for a in range(20)])
RACE_DETAILED = categories(
    schema.RACE,
    schema.race_codes_by_bit_count(),
    [schema.race_label(c) for c in schema.race_codes_by_bit_count()],
)
RACE_TALLY = Dimension(
    "race",
    tuple(f"{name} alone or in combination" for name in schema.RACE_NAMES),
    ((schema.RACE.codes[None, :] >> np.arange(6)[:, None]) & 1).astype(np.int8),
)
HISPANIC = all_codes(schema.HISPANIC)

ADULT = {"age": codes_mask(schema.AGE, lambda a: a >= schema.VOTING_AGE)}


def race_is(*codes: int) -> Mask:
    return np.isin(schema.RACE.codes, codes)


TWO_OR_MORE = schema.race_bit_count(schema.RACE.codes) >= 2
HISP = np.array([False, True])
NOT_HISP = np.array([True, False])

RACE_ITERATIONS: dict[str, tuple[str, dict[str, Mask]]] = {
    "A": ("white alone", {"race": race_is(1)}),
    "B": ("black alone", {"race": race_is(2)}),
    "C": ("American Indian and Alaska Native alone", {"race": race_is(4)}),
    "D": ("Asian alone", {"race": race_is(8)}),
    "E": ("Native Hawaiian and Other Pacific Islander alone", {"race": race_is(16)}),
    "F": ("some other race alone", {"race": race_is(32)}),
    "G": ("two or more races", {"race": TWO_OR_MORE}),
    "H": ("Hispanic or Latino", {"hispanic": HISP}),
    "I": ("white alone, not Hispanic", {"race": race_is(1), "hispanic": NOT_HISP}),
    "J": ("black alone, not Hispanic", {"race": race_is(2), "hispanic": NOT_HISP}),
    "K": ("AIAN alone, not Hispanic", {"race": race_is(4), "hispanic": NOT_HISP}),
    "L": ("Asian alone, not Hispanic", {"race": race_is(8), "hispanic": NOT_HISP}),
    "M": ("NHOPI alone, not Hispanic", {"race": race_is(16), "hispanic": NOT_HISP}),
    "N": ("some other race alone, not Hispanic", {"race": race_is(32), "hispanic": NOT_HISP}),
    "O": ("two or more races, not Hispanic", {"race": TWO_OR_MORE, "hispanic": NOT_HISP}),
}
"""SF1 race iterations: the universe of tables P12A–I and PCT12A–O."""


BLOCK_TO_NATION = ("nation", "block", LEVELS)
"""Where a table is published by default: every level, from the nation down to blocks."""


def _person_table(
    name: str,
    title: str,
    universe: str,
    parts: Sequence[Part],
    top: str = "nation",
    bottom: str = "block",
) -> TableDef:
    return TableDef(name, title, universe, schema.PERSON, tuple(parts), top, bottom, LEVELS)


def _restrict(part: Part, universe: Mapping[str, Mask]) -> Part:
    """The part with an extra universe restriction (masks on the same attribute are and-ed)."""
    merged = dict(part.universe)
    for attr, mask in universe.items():
        merged[attr] = merged[attr] & mask if attr in merged else mask
    return Part(part.dimensions, merged, part.label)


def _hispanic_by_race(universe: Mapping[str, Mask]) -> tuple[Part, ...]:
    """P9/P11 layout: Hispanic (one cell), then not Hispanic by the 63 detailed races."""
    return (
        _restrict(Part(label="Hispanic", universe={"hispanic": HISP}), universe),
        _restrict(Part((RACE_DETAILED,), {"hispanic": NOT_HISP}, "not Hispanic"), universe),
    )


def _build_catalog() -> dict[str, TableDef]:
    tables: list[TableDef] = [
        _person_table("P1", "Total population", "all persons", [Part()]),
        _person_table("P6", "Race (total races tallied)", "all persons", [Part((RACE_TALLY,))]),
        _person_table(
            "P7",
            "Hispanic or Latino origin by race (total races tallied)",
            "all persons",
            [Part((HISPANIC, RACE_TALLY))],
        ),
        _person_table("P8", "Race", "all persons", [Part((RACE_DETAILED,))]),
        _person_table(
            "P9",
            "Hispanic or Latino, and not Hispanic or Latino by race",
            "all persons",
            _hispanic_by_race({}),
        ),
        _person_table(
            "P10",
            "Race for the population 18 years and over",
            "persons 18+",
            [Part((RACE_DETAILED,), ADULT)],
        ),
        _person_table(
            "P11",
            "Hispanic or Latino, and not Hispanic or Latino by race, 18 years and over",
            "persons 18+",
            _hispanic_by_race(ADULT),
        ),
        _person_table("P12", "Sex by age", "all persons", [Part((SEXES, P12_AGE))]),
    ]
    for letter, (group, universe) in list(RACE_ITERATIONS.items())[:9]:
        tables.append(
            _person_table(
                f"P12{letter}", f"Sex by age ({group})", group, [Part((SEXES, P12_AGE), universe)]
            )
        )
    tables.append(
        _person_table(
            "P14",
            "Sex by age for the population under 20 years",
            "persons under 20",
            [Part((SEXES, UNDER_20))],
        )
    )
    tables.append(
        _person_table(
            "PCT12",
            "Sex by age (single years)",
            "all persons",
            [Part((SEXES, PCT12_AGE))],
            bottom="tract",
        )
    )
    for letter, (group, universe) in RACE_ITERATIONS.items():
        tables.append(
            _person_table(
                f"PCT12{letter}",
                f"Sex by age, single years ({group})",
                group,
                [Part((SEXES, PCT12_AGE), universe)],
                bottom="tract",
            )
        )
    tables += _unit_tables() + _household_gq_tables()
    return {t.name: t for t in tables}


def _unit_tables() -> list[TableDef]:
    housing = {"unit_type": schema.UNIT_TYPE.codes == 0}
    occupied = {**housing, "occupied": np.array([False, True])}
    occupancy = categories(schema.OCCUPIED, [1, 0], ["occupied", "vacant"])
    tenure = categories(schema.TENURE, [1, 2, 3], [schema.TENURE_LABELS[c] for c in (1, 2, 3)])
    sizes = list(range(1, schema.HOUSEHOLD_SIZE_TOP + 1))
    size = categories(
        schema.HOUSEHOLD_SIZE,
        sizes,
        [f"{s}-person household" for s in sizes[:-1]] + [f"{sizes[-1]}-or-more-person household"],
    )

    def unit_table(name: str, title: str, universe: str, part: Part) -> TableDef:
        return TableDef(
            name, title, universe, schema.UNIT, (part,), *BLOCK_TO_NATION, records="households"
        )

    return [
        unit_table("H1", "Housing units", "housing units", Part(universe=housing)),
        unit_table("H3", "Occupancy status", "housing units", Part((occupancy,), housing)),
        unit_table("H4", "Tenure", "occupied housing units", Part((tenure,), occupied)),
        unit_table("H13", "Household size", "occupied housing units", Part((size,), occupied)),
    ]


def _household_gq_tables() -> list[TableDef]:
    s = schema.PERSON_HHGQ
    in_households = {"unit_type": schema.UNIT_TYPE.codes == 0}
    relationship = categories(
        schema.RELATIONSHIP, list(range(5)), [schema.RELATIONSHIP_LABELS[r] for r in range(5)]
    )
    institutional = {"unit_type": np.isin(schema.UNIT_TYPE.codes, schema.INSTITUTIONAL_GQ_TYPES)}
    noninstitutional = {
        "unit_type": np.isin(schema.UNIT_TYPE.codes, schema.NONINSTITUTIONAL_GQ_TYPES)
    }
    gq_types = list(range(1, 8))
    gq_type = categories(schema.UNIT_TYPE, gq_types, [schema.UNIT_TYPE_LABELS[t] for t in gq_types])
    gq = {"relationship": schema.RELATIONSHIP.codes == schema.GQ_RESIDENT}
    return [
        TableDef(
            "P29",
            "Household type and relationship (persons in households by relationship, persons in "
            "group quarters by institutional status)",
            "all persons",
            s,
            (
                Part((relationship,), in_households, "in households"),
                Part(universe={**gq, **institutional}, label="in group quarters, institutional"),
                Part(
                    universe={**gq, **noninstitutional},
                    label="in group quarters, non-institutional",
                ),
            ),
            *BLOCK_TO_NATION,
        ),
        TableDef(
            "P42",
            "Group quarters population by type",
            "persons in group quarters",
            s,
            (Part((gq_type,), gq),),
            *BLOCK_TO_NATION,
        ),
    ]


CATALOG: dict[str, TableDef] = _build_catalog()
"""Every table sdclab can publish, by name, in catalogue order."""

UNIT_CELLS_A_PERSON_MOVES: tuple[dict[str, int], ...] = (
    {"H3": 2, "H4": 1, "H13": 1},
    {"H13": 2},
)
"""The unit-table cells one person added or removed moves, in each way it can happen: entering a
vacant unit (H3 from vacant to occupied, two cells; a tenure in H4; a size in H13), or joining a
household (H13 from one size to the next, two cells). Unit tables depend on persons through
these; a person never moves H1."""

PERSON_TABLES = tuple(name for name, t in CATALOG.items() if t.schema is schema.PERSON)
"""The 34 person tables of the 2010 reconstruction attack (18 block-level, 16 tract-level)."""


def select(names: Sequence[str] | None) -> list[TableDef]:
    """Table definitions by name (all tables when ``names`` is None); unknown names are an error."""
    if names is None:
        return list(CATALOG.values())
    unknown = [n for n in names if n not in CATALOG]
    if unknown:
        raise KeyError(f"unknown table(s) {', '.join(unknown)}; known tables: {', '.join(CATALOG)}")
    return [CATALOG[n] for n in dict.fromkeys(names)]


def catalog_markdown() -> str:
    """The catalogue as a Markdown table (docs/tables.md is generated from this)."""
    lines = [
        "| table | title | universe | schema | cells | levels |",
        "|---|---|---|---|---|---|",
    ]
    for t in CATALOG.values():
        levels = f"{t.bottom} and up" if t.top == "nation" else " to ".join((t.top, t.bottom))
        lines.append(
            f"| {t.name} | {t.title} | {t.universe} | {t.schema.name} | {t.n_cells} | {levels} |"
        )
    return "\n".join(lines) + "\n"
