"""Bootstrap replicates of a population: what another census of the same places could have found.

An experiment's intervals over noise replicates say how much a figure moves when the mechanism
draws again on one population; a decision made on one population also depends on that
population. For a synthetic population a further replicate is another seed of the generator; for
a user's population it is a bootstrap replicate: in every block, as many units as the block has,
drawn with replacement from its units, each with all its persons. The geography and the blocks'
numbers of units stay; who lives in each block varies as households do between places alike.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from sdclab.censuses.us2010.population.contract import Population


def _ranges(start: np.ndarray, count: np.ndarray) -> np.ndarray:
    """The concatenation of ``range(start[i], start[i] + count[i])`` over i (vectorised)."""
    total = int(count.sum())
    ends = np.cumsum(count)
    return np.repeat(start - (ends - count), count) + np.arange(total, dtype=np.int64)


def bootstrap(population: Population, seed: int) -> Population:
    """A bootstrap replicate of ``population``: units drawn with replacement within each block
    (as many as the block has), with their persons; units and persons get new ids (0, 1, …).

    Deterministic in ``seed``; the blocks table (blocks without units) is kept."""
    rng = np.random.default_rng(seed)
    units, persons = population.units, population.persons
    unit_block = units["block"].to_numpy()
    order = np.argsort(unit_block, kind="stable")
    _, start, count = np.unique(unit_block[order], return_index=True, return_counts=True)
    group = np.repeat(np.arange(len(start)), count)
    offset = np.floor(rng.random(len(order)) * count[group]).astype(np.int64)
    drawn = order[start[group] + offset]  # unit rows, block by block
    unit_row = population.person_unit_row
    person_order = np.argsort(unit_row, kind="stable")
    members = np.bincount(unit_row, minlength=population.n_units).astype(np.int64)
    first_member = np.concatenate([[0], np.cumsum(members)[:-1]])
    rows = person_order[_ranges(first_member[drawn], members[drawn])]
    new_units = units[drawn].with_columns(unit_id=pl.int_range(len(drawn), dtype=pl.Int64))
    new_persons = persons[rows].with_columns(
        person_id=pl.int_range(len(rows), dtype=pl.Int64),
        unit_id=pl.Series(np.repeat(np.arange(len(drawn), dtype=np.int64), members[drawn])),
    )
    return population.with_records(new_persons, new_units)
