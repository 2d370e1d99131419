"""The US 2010 census: the census sdclab was built on, as a :class:`~sdclab.core.census.Census`.

Its attributes, FIPS geography (nation, state, county, tract, block group, block) and SF1 table
catalogue are those of this package's :mod:`.schema`, :mod:`.geography` and :mod:`.catalog`;
the reconstruction solves for sex × age × race × Hispanic origin in
blocks, and the attacker links on block, sex and age, as in the Census Bureau's simulated attack
on the 2010 census.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Protocol

import numpy as np

from sdclab.censuses.us2010 import schema
from sdclab.censuses.us2010.catalog import CATALOG, RACE_TALLY
from sdclab.censuses.us2010.geography import LEVELS
from sdclab.core.census.model import (
    Attribute,
    Breakdown,
    Census,
    Hierarchy,
    HouseholdChange,
    Reconstruction,
)
from sdclab.core.domain import Attribute as DomainAttribute

if TYPE_CHECKING:
    import polars as pl

    from sdclab.core.arrays import IntArray


class UsRecords(Protocol):
    """What :func:`record_columns` reads of a US population (a
    :class:`~sdclab.censuses.us2010.population.Population`)."""

    @property
    def persons(self) -> pl.DataFrame: ...
    @property
    def units(self) -> pl.DataFrame: ...
    @property
    def person_unit_row(self) -> IntArray: ...
    @property
    def household_size(self) -> IntArray: ...
    @property
    def household_type(self) -> np.ndarray: ...


NAME = "us2010"

PERSON_ATTRIBUTES = (schema.SEX, schema.AGE, schema.RACE, schema.HISPANIC, schema.RELATIONSHIP)
HOUSEHOLD_ATTRIBUTES = (
    schema.UNIT_TYPE,
    schema.OCCUPIED,
    schema.TENURE,
    schema.HOUSEHOLD_SIZE,
    schema.HOUSEHOLD_TYPE,
)


def _attribute(attribute: DomainAttribute, records: str) -> Attribute:
    codes = tuple(str(c) for c in attribute.codes.tolist())
    return Attribute(attribute.name, records, codes, attribute.labels)


def _age_breakdown(recode: schema.AgeRecode) -> Breakdown:
    labels = tuple(recode.labels)
    return Breakdown(recode.name, labels, labels, recode.membership())


def _race_tally() -> Breakdown:
    names = tuple(schema.RACE_NAMES)
    return Breakdown("tally", names, RACE_TALLY.labels, RACE_TALLY.membership)


def household_changes() -> tuple[HouseholdChange, ...]:
    """What one person added changes in a unit: a vacant housing unit becomes occupied (a
    household of one, of any tenure), or a household grows by one (sizes top-coded at 7 or
    more). A person entering group quarters changes no unit attribute."""
    vacant = {"unit_type": 0, "occupied": 0, "tenure": 0, "household_size": 0}
    entering = tuple(
        HouseholdChange(
            "a person entering a vacant unit",
            vacant,
            {"occupied": 1, "tenure": tenure, "household_size": 1},
        )
        for tenure in schema.TENURE_LABELS
    )
    top = schema.HOUSEHOLD_SIZE_TOP
    joining = tuple(
        HouseholdChange(
            "a person joining a household",
            {"unit_type": 0, "occupied": 1, "tenure": 1, "household_size": size},
            {"household_size": min(size + 1, top)},
        )
        for size in range(1, top + 1)
    )
    return entering + joining


@cache
def census() -> Census:
    """The US 2010 census value (one object: it is immutable)."""
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
        reconstruction=Reconstruction(
            schema.PERSON.names, "block", "tract", {"age": "agebin38"}, schema.PERSON
        ),
        household_changes=household_changes(),
        description=(
            "Blocks are 15-digit FIPS geocodes (state 2, county 3, tract 6, block 4 digits); "
            "the block group is the first digit of the block number."
        ),
    )


def record_columns(population: UsRecords, records: str) -> dict[str, IntArray]:
    """The code of every attribute for each person or each unit of a US population.

    Persons carry their unit's type (the tables of persons in group quarters cross it) and the
    voting-age flag of the redistricting histogram; a unit's household size is capped at
    :data:`~.schema.HOUSEHOLD_SIZE_TOP` and is 0 for a unit that is no household.
    """
    units = population.units
    unit_type = units.get_column("unit_type").to_numpy()
    if records == "persons":
        persons = population.persons
        age = persons.get_column("age").to_numpy()
        return {
            **{a: persons.get_column(a).to_numpy() for a in ("sex", "race", "hispanic")},
            "age": age,
            "relationship": persons.get_column("relationship").to_numpy(),
            "unit_type": unit_type[population.person_unit_row],
            "votingage": (age >= schema.VOTING_AGE).astype(np.int64),
        }
    occupied = units.get_column("occupied").to_numpy().astype(np.int64)
    is_household = (unit_type == 0) & (occupied == 1)
    size = np.minimum(population.household_size, schema.HOUSEHOLD_SIZE_TOP)
    return {
        "unit_type": unit_type,
        "occupied": occupied,
        "tenure": units.get_column("tenure").fill_null(0).to_numpy(),
        "household_size": np.where(is_household, size, 0),
        "household_type": population.household_type,
    }
