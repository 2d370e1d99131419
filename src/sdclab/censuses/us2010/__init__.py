"""The US 2010 census: the census sdclab was built on, as a :class:`~sdclab.census.Census`.

Its attributes, FIPS geography (nation, state, county, tract, block group, block) and SF1 table
catalogue are those of :mod:`sdclab.schema`, :mod:`sdclab.geography` and
:mod:`sdclab.tables.catalog`; the reconstruction solves for sex × age × race × Hispanic origin in
blocks, and the attacker links on block, sex and age, as in the Census Bureau's simulated attack
on the 2010 census.
"""

from __future__ import annotations

import numpy as np

from sdclab import schema
from sdclab.census.model import Attribute, Breakdown, Census, Hierarchy, Reconstruction
from sdclab.geography import LEVELS
from sdclab.tables.catalog import CATALOG, RACE_TALLY

NAME = "us2010"

PERSON_ATTRIBUTES = (schema.SEX, schema.AGE, schema.RACE, schema.HISPANIC, schema.RELATIONSHIP)
HOUSEHOLD_ATTRIBUTES = (
    schema.UNIT_TYPE,
    schema.OCCUPIED,
    schema.TENURE,
    schema.HOUSEHOLD_SIZE,
    schema.HOUSEHOLD_TYPE,
)


def _attribute(attribute: schema.Attribute, records: str) -> Attribute:
    codes = tuple(str(c) for c in attribute.codes.tolist())
    return Attribute(attribute.name, records, codes, attribute.labels)


def _age_breakdown(recode: schema.AgeRecode) -> Breakdown:
    labels = tuple(recode.labels)
    return Breakdown(recode.name, labels, labels, recode.membership())


def _race_tally() -> Breakdown:
    names = tuple(schema.RACE_NAMES)
    return Breakdown("tally", names, RACE_TALLY.labels, RACE_TALLY.membership)


def census() -> Census:
    """The US 2010 census value."""
    persons = {a.name: _attribute(a, "persons") for a in PERSON_ATTRIBUTES}
    ages = (schema.P12_AGES, schema.AGEBIN38, schema.PCT12_AGES)
    age = persons["age"]
    persons["age"] = Attribute(
        age.name, age.records, age.codes, age.labels, {r.name: _age_breakdown(r) for r in ages}
    )
    race = persons["race"]
    persons["race"] = Attribute(
        race.name, race.records, race.codes, race.labels, {"tally": _race_tally()}
    )
    households = {a.name: _attribute(a, "households") for a in HOUSEHOLD_ATTRIBUTES}
    return Census(
        name=NAME,
        title="United States, 2010 census (SF1 tables, FIPS geography)",
        attributes={**persons, **households},
        geographies={"fips": Hierarchy("fips", LEVELS)},
        tables=dict(CATALOG),
        quasi_identifiers=("sex", "age"),
        reconstruction=Reconstruction(schema.PERSON.names, "block"),
        description=(
            "Blocks are 15-digit FIPS geocodes (state 2, county 3, tract 6, block 4 digits); "
            "the block group is the first digit of the block number."
        ),
    )


assert np.array_equal(RACE_TALLY.membership.sum(axis=0) >= 1, np.ones(schema.RACE.size, bool))
