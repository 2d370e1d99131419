"""The households of a US population as the swapping mechanisms see them, and how a household
moves: whole, with its persons, to another housing unit (docs/swapping.md)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, NamedTuple

import numpy as np

from sdclab.censuses.us2010 import schema
from sdclab.censuses.us2010.geography import truncate
from sdclab.censuses.us2010.population import Population
from sdclab.core.arrays import IntArray


@dataclass(frozen=True)
class Households:
    """The occupied housing units of a population, with what swapping needs to know about them."""

    population: Population

    @cached_property
    def unit_rows(self) -> IntArray:
        """Row in ``units`` of every household (occupied housing unit)."""
        units = self.population.units
        is_household = (units["unit_type"].to_numpy() == 0) & units["occupied"].to_numpy()
        return np.flatnonzero(is_household)

    @property
    def count(self) -> int:
        return len(self.unit_rows)

    @cached_property
    def size(self) -> IntArray:
        return self.population.household_size[self.unit_rows]

    @cached_property
    def adults(self) -> IntArray:
        adult = self.population.persons["age"].to_numpy() >= schema.VOTING_AGE
        per_unit = np.bincount(
            self.population.person_unit_row, weights=adult, minlength=self.population.n_units
        )
        return per_unit[self.unit_rows].astype(np.int64)

    @cached_property
    def block_code(self) -> IntArray:
        geography = self.population.geography
        return geography.blocks[self.population.unit_block_index[self.unit_rows]]

    def area(self, level: str) -> IntArray:
        """Integer geocode of each household's area at ``level``."""
        return truncate(self.block_code, level)


def swap_units(population: Population, unit_rows: IntArray, destination: IntArray) -> Population:
    """Move the household living in unit ``unit_rows[i]`` to unit ``destination[i]``.

    ``destination`` must be a permutation of ``unit_rows``. Persons take the new unit's id and
    block; the household's tenure and its unit record key (cell key method) move with it, and
    the persons keep their own record keys.
    """
    if not np.array_equal(np.sort(unit_rows), np.sort(destination)):
        raise ValueError("swap_units: destination must be a permutation of unit_rows")
    n_units = population.n_units
    moved_to = np.arange(n_units)
    moved_to[unit_rows] = destination
    came_from = np.arange(n_units)
    came_from[destination] = unit_rows
    units = population.units
    moving = [c for c in ("tenure", "record_key") if c in units.columns]
    new_units = units.with_columns([units[c].gather(came_from) for c in moving])
    person_rows = moved_to[population.person_unit_row]
    persons = population.persons.with_columns(
        unit_id=units["unit_id"].gather(person_rows),
        block=units["block"].gather(person_rows),
    )
    return population.with_records(persons, new_units)  # households moved whole


class Swapped(NamedTuple):
    """What a swap returns: the swapped population and two kinds of figures about it."""

    population: Population
    notes: dict[str, Any]
    """What a swapping release may say: parameters and invariants of the swap (exact in the
    swapped microdata, by the card)."""
    diagnostics: dict[str, Any]
    """What it may not: how many households were selected and moved, by the draws and by their
    risk computed from the confidential records. For evaluation and tests, never published."""
