"""Releases tabulated from a population: the exact one, a pre-tabular mechanism's (from its
protected microdata, renumbered so that no record links back to the confidential file), and
whether a release publishes nothing but exact tables."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from sdclab.censuses.us2010.population import Population
from sdclab.censuses.us2010.population.columns import DATA_DEFINED, RECORD_KEY
from sdclab.core.accounting import SpecCard, no_protection_card
from sdclab.core.randomness import exact_record
from sdclab.core.tables.published import PublishedTable
from sdclab.core.tables.tabulate import tabulate
from sdclab.release.model import EXACT_TABULATION, Protection, Release


def exact_release(population: Population, names: Sequence[str] | None = None) -> Release:
    """The unprotected tabulation (mechanism ``none``): every table exactly as in the data."""
    counts = tabulate(population, names)
    return Release(
        mechanism="none",
        parameters={},
        card=no_protection_card(),
        tables={name: PublishedTable.from_counts(tc) for name, tc in counts.items()},
        randomness=exact_record(),
        input_digest=population.digest,
        geography=population.geography,
        protection=Protection(False, EXACT_TABULATION),
        sources=population.sources,
        census=population.census,
    )


def publishes_exact_tables(release: Release, population: Population) -> bool:
    """Whether every table ``release`` publishes equals the exact tabulation of ``population``
    at every level, no cell withheld (a release without tables publishes no exact table).

    Tables are compared one at a time and the first that differs ends the search, so a release
    that protects costs about one table's tabulation.
    """
    if not release.tables or not np.array_equal(
        release.geography.blocks, population.geography.blocks
    ):
        return False
    for name, published in release.tables.items():
        exact = PublishedTable.from_counts(tabulate(population, [name])[name])
        for level in published.levels:
            if published.suppressed(level).nnz:
                return False
            if (published.matrix(level) != exact.matrix(level)).nnz:
                return False
    return True


def publishable_microdata(population: Population, rng: np.random.Generator) -> Population:
    """Protected microdata as a release may carry it: new ids, shuffled within blocks.

    The input's person and unit identifiers would link published records back to the confidential
    file (and reveal, for instance, which households were swapped), so they are replaced by
    sequential ids in block order, with a random order inside each block. Record keys of the cell
    key method are dropped: with them anyone could recompute the cell keys; so is whether a
    person is data-defined (a fact of the census's processing of their response).
    """
    population = population.with_records(  # a valid population without its optional columns
        persons=population.persons.drop(RECORD_KEY.name, DATA_DEFINED.name, strict=False),
        units=population.units.drop(RECORD_KEY.name, strict=False),
    )
    units = population.units
    unit_order = np.lexsort((rng.permutation(units.height), population.unit_block_index))
    new_unit_id = np.empty(units.height, dtype=np.int64)
    new_unit_id[unit_order] = np.arange(units.height)
    persons = population.persons
    person_order = np.lexsort((rng.permutation(persons.height), population.person_block_index))
    new_units = units[unit_order].with_columns(unit_id=pl.Series(np.arange(units.height)))
    new_persons = persons[person_order].with_columns(
        person_id=pl.Series(np.arange(persons.height)),
        unit_id=pl.Series(new_unit_id[population.person_unit_row[person_order]]),
    )
    return population.with_records(new_persons, new_units)  # renumbered, reordered


def tabulated_release(
    mechanism: str,
    parameters: dict[str, Any],
    card: SpecCard,
    protected: Population,
    original: Population,
    rng: np.random.Generator,
    notes: dict[str, Any] | None = None,
) -> Release:
    """A pre-tabular mechanism's release: every table tabulated from its protected microdata."""
    return Release(
        mechanism=mechanism,
        parameters=parameters,
        card=card,
        tables={name: PublishedTable.from_counts(tc) for name, tc in tabulate(protected).items()},
        randomness={},  # the stream alone: completed by protection.run
        input_digest=original.digest,
        geography=original.geography,
        microdata=publishable_microdata(protected, rng),
        notes=notes or {},
    )
