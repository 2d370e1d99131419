"""Population → exact tables, as sparse matrix products.

Each record is encoded as a flat domain cell of its table's schema, a sparse ``blocks × domain``
histogram is built once per schema, every table is ``histogram @ query.T`` at block level, and the
levels above are sums over children (``aggregation @ block_counts``). Nothing here loops over
records or cells.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import polars as pl
import scipy.sparse as sp

from sdclab import schema
from sdclab.geography import Geography
from sdclab.population import Population
from sdclab.tables.catalog import TableDef, select


def record_cells(population: Population, domain: schema.Schema) -> npt.NDArray[np.int64]:
    """Flat domain cell of every record of the population for ``domain``."""
    if domain is schema.PERSON:
        return domain.cell_index(_columns(population.persons, domain.names))
    if domain is schema.PERSON_HHGQ:
        unit_type = population.units.get_column("unit_type").to_numpy()
        return domain.cell_index(
            {
                "relationship": population.persons.get_column("relationship").to_numpy(),
                "unit_type": unit_type[population.person_unit_row],
            }
        )
    if domain is schema.PL94 or domain is schema.DHC:
        persons = population.persons
        unit_type = population.units.get_column("unit_type").to_numpy()
        age = persons["age"].to_numpy()
        return domain.cell_index(
            {
                "unit_type": unit_type[population.person_unit_row],
                "sex": persons["sex"].to_numpy(),
                "age": age,
                "votingage": (age >= schema.VOTING_AGE).astype(np.int64),
                "hispanic": persons["hispanic"].to_numpy(),
                "race": persons["race"].to_numpy(),
            }
        )
    if domain is schema.UNIT:
        units = population.units
        occupied = units.get_column("occupied").to_numpy().astype(np.int64)
        is_household = (units.get_column("unit_type").to_numpy() == 0) & (occupied == 1)
        size = np.minimum(population.household_size, schema.HOUSEHOLD_SIZE_TOP)
        return domain.cell_index(
            {
                "unit_type": units.get_column("unit_type").to_numpy(),
                "occupied": occupied,
                "tenure": units.get_column("tenure").fill_null(0).to_numpy(),
                "household_size": np.where(is_household, size, 0),
            }
        )
    if domain is schema.HOUSEHOLD:
        return domain.cell_index(
            {
                "household_type": population.household_type,
                "tenure": population.units.get_column("tenure").fill_null(0).to_numpy(),
            }
        )
    raise ValueError(f"no record encoding for schema {domain.name!r}")


def _columns(frame: pl.DataFrame, names: Sequence[str]) -> dict[str, npt.NDArray[np.int64]]:
    return {name: frame.get_column(name).to_numpy() for name in names}


def record_kind(domain: schema.Schema) -> str:
    """What the records of ``domain`` are: ``"units"`` (the unit and household schemas) or
    ``"persons"`` (every other schema). Schemas of one kind count the same records."""
    return "units" if domain is schema.UNIT or domain is schema.HOUSEHOLD else "persons"


def record_blocks(population: Population, domain: schema.Schema) -> npt.NDArray[np.int64]:
    """Block index of every record of ``domain`` (units for the unit and household schemas, else
    persons)."""
    if record_kind(domain) == "units":
        return population.unit_block_index
    return population.person_block_index


def block_histogram(
    population: Population,
    domain: schema.Schema,
    weights: npt.NDArray[np.int64] | npt.NDArray[np.complex128] | None = None,
) -> sp.csr_matrix:
    """Sparse ``blocks × domain`` matrix of record counts (or of sums of per-record ``weights``,
    aligned with the domain's records: units for the unit and household schemas, else
    persons)."""
    cells = record_cells(population, domain)
    blocks = record_blocks(population, domain)
    shape = (population.geography.n_blocks, domain.size)
    data = np.ones(len(cells), dtype=np.int64) if weights is None else weights
    return sp.csr_matrix((data, (blocks, cells)), shape=shape)


@dataclass(frozen=True)
class TableCounts:
    """One table at every level it is published: geounit codes and a geounits × cells matrix."""

    table: TableDef
    counts: dict[str, tuple[npt.NDArray[np.int64], sp.csr_matrix]]
    geoids: dict[str, pl.Series]
    """Geoid strings of each level's geounits (shared by all tables of one tabulation)."""

    def at(self, level: str) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(geounit codes, dense counts) at ``level``."""
        codes, matrix = self.counts[level]
        return codes, matrix.toarray()


def tabulate_histograms(
    geography: Geography,
    histograms: dict[str, sp.csr_matrix],
    tables: Sequence[TableDef],
) -> dict[str, TableCounts]:
    """Every table at each of its levels from per-schema block histograms."""
    levels = geography.levels
    steps = {level: level_step(geography, level) for level in levels[:-1]}
    geoids = {level: geography.geoids(level) for level in levels}
    out: dict[str, TableCounts] = {}
    for table in tables:
        current = (histograms[table.schema.name] @ table.query.T).tocsr()
        counts: dict[str, tuple[npt.NDArray[np.int64], sp.csr_matrix]] = {
            levels[-1]: (geography.blocks, current)
        }
        for level in reversed(levels[:-1]):  # each level from the one below: fewer non-zeros
            if levels.index(level) < levels.index(table.top):
                break
            current = (steps[level] @ current).tocsr()
            counts[level] = (geography.codes(level), current)
        out[table.name] = TableCounts(
            table, {level: counts[level] for level in table.levels}, geoids
        )
    return out


def level_step(geography: Geography, level: str) -> sp.csr_matrix:
    """0/1 matrix geounits(level) × geounits(the level below): sums children into parents."""
    return geography.containment(level, geography.below(level))


def tabulate(population: Population, names: Sequence[str] | None = None) -> dict[str, TableCounts]:
    """Exact tables of a population (all catalogue tables when ``names`` is None)."""
    tables = select(names)
    histograms = {
        s.name: block_histogram(population, s)
        for s in {t.schema.name: t.schema for t in tables}.values()
    }
    return tabulate_histograms(population.geography, histograms, tables)
