"""SafeTab-H's tables: every variant of T03 and T04 a linear query over the household schema,
the true histograms of every population group that the mechanism measures, and the frames its
noisy cells are published in, with what a published cell may be."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt
import polars as pl
import scipy.sparse as sp

from sdclab.censuses.us2010 import schema
from sdclab.censuses.us2010.geography import LEVELS, geoid_strings
from sdclab.censuses.us2010.population import Population
from sdclab.censuses.us2010.safetab_groups import REGION_TYPES, Group, iterations, person_codes
from sdclab.core.arrays import IntArray
from sdclab.core.geography import Geography
from sdclab.core.tables.definition import Dimension, Part, TableDef
from sdclab.core.tables.tabulate import level_step, record_cells

# The measured cells of every variant (cell code → HOUSEHOLD_TYPE or tenure codes) and the
# derived cells (cell code → measured or derived cells summed); docs/safetab_h.md, *Variants*.
T3_VARIANTS: tuple[dict[int, tuple[int, ...]], ...] = (
    {0: (1, 2, 3, 4, 5)},
    {1: (1, 2, 3), 6: (4, 5)},
    {2: (1,), 3: (2, 3), 7: (4,), 8: (5,)},
    {2: (1,), 4: (2,), 5: (3,), 7: (4,), 8: (5,)},
)


T3_DERIVED: tuple[dict[int, tuple[int, ...]], ...] = (
    {},
    {0: (1, 6)},
    {1: (2, 3), 6: (7, 8), 0: (1, 6)},
    {3: (4, 5), 1: (2, 3), 6: (7, 8), 0: (1, 6)},
)


T4_VARIANTS: tuple[dict[int, tuple[int, ...]], ...] = ({0: (1, 2, 3)}, {1: (1,), 2: (2,), 3: (3,)})


T4_DERIVED: tuple[dict[int, tuple[int, ...]], ...] = ({}, {0: (1, 2, 3)})
"""Tenure here has no code 4 (occupied without payment of rent), so T04002's renter cell is {3}."""
CELL_LABELS = {
    "T03": {
        0: "all households",
        1: "family households",
        2: "married-couple family",
        3: "other family",
        4: "other family, male householder, no spouse present",
        5: "other family, female householder, no spouse present",
        6: "non-family households",
        7: "householder living alone",
        8: "householder not living alone",
    },
    "T04": {0: "all households", **{c: schema.TENURE_LABELS[c] for c in (1, 2, 3)}},
}
"""The label of every cell code of T03 and T04 (docs/safetab_h.md, *Variants*)."""


@dataclass(frozen=True)
class Variant:
    """One variant of T03 or T04 (T03001 … T04002) as a linear query over
    :data:`~sdclab.censuses.us2010.schema.HOUSEHOLD`: one 0/1 query row per published cell,
    measured and derived, in cell-code order. Each row is a Kronecker product — the cell's
    HOUSEHOLD_TYPE codes × every tenure (T03), or every household type × the cell's tenure codes
    (T04) — within households.
    A group's cells are ``histogram @ table.query.T``."""

    table: TableDef
    """The variant as a table: name (T03001 …), cells and query matrix."""
    cells: tuple[int, ...]
    """The published cell code of every query row."""
    measured: tuple[bool, ...]
    """Whether each cell is measured (noisy) or derived (a sum of measured cells)."""

    @property
    def name(self) -> str:
        return self.table.name

    @cached_property
    def measured_query(self) -> sp.csr_matrix:
        """The query rows of the measured cells, in cell-code order (the order of the draws)."""
        return self.table.query[np.flatnonzero(self.measured)]

    @cached_property
    def derivation(self) -> sp.csr_matrix:
        """Cells × measured cells, 0/1: the measured cells every cell sums (itself for a measured
        cell), read from the query rows. The measured cells partition the households, so a cell
        is exactly the sum of the measured cells inside it."""
        q, m = self.table.query, self.measured_query
        size = np.asarray(m.sum(axis=1)).ravel()
        inside = sp.csr_matrix((q @ m.T).toarray() == size[None, :], dtype=np.int64)
        if (inside @ m != q).nnz:
            raise AssertionError(f"{self.name}: a cell is not a sum of measured cells")
        return inside


def _variant(
    table: str, k: int, measured: dict[int, tuple[int, ...]], derived: dict[int, tuple[int, ...]]
) -> Variant:
    """Variant ``k`` of ``table`` from its cell definitions: the measured cells' codes, each
    derived cell the sum of the cells it lists."""
    if list(measured) != sorted(measured):
        raise AssertionError(f"{table} variant {k + 1}: measured cells out of order (the draws')")
    attribute = schema.HOUSEHOLD_TYPE if table == "T03" else schema.TENURE
    members = {
        cell: np.isin(attribute.codes, codes).astype(np.int8) for cell, codes in measured.items()
    }
    for cell, parts in derived.items():  # parts precede the cells they are summed into
        members[cell] = np.sum([members[c] for c in parts], axis=0).astype(np.int8)
    cells = tuple(sorted(members))
    membership = np.array([members[c] for c in cells], dtype=np.int8)
    if membership.max() > 1:
        raise AssertionError(f"{table} variant {k + 1}: a derived cell sums overlapping cells")
    labels = tuple(CELL_LABELS[table][c] for c in cells)
    households = {"household_type": schema.HOUSEHOLD_TYPE.codes > 0}
    title = "Household type" if table == "T03" else "Tenure"
    definition = TableDef(
        f"{table}00{k + 1}",
        f"{title} (variant {k + 1})",
        "households",
        schema.HOUSEHOLD,
        (Part((Dimension(attribute.name, labels, membership),), households),),
        top="nation",
        bottom="tract",
        hierarchy=LEVELS,
    )
    return Variant(definition, cells, tuple(c in measured for c in cells))


VARIANTS: dict[str, tuple[Variant, ...]] = {
    table: tuple(
        _variant(table, k, m, d) for k, (m, d) in enumerate(zip(measured, derived, strict=True))
    )
    for table, (measured, derived) in {
        "T03": (T3_VARIANTS, T3_DERIVED),
        "T04": (T4_VARIANTS, T4_DERIVED),
    }.items()
}
"""The variants of T03 (4) and T04 (2), in order: a group whose size reaches k thresholds gets
variant k."""


VARIANT_TABLES: dict[str, Variant] = {v.name: v for vs in VARIANTS.values() for v in vs}
"""Every variant by its published table name (T03001 … T04002)."""


def variant(counts: npt.NDArray[np.float64], thresholds: tuple[int, ...]) -> IntArray:
    """The variant index each group size selects: the number of thresholds it reaches."""
    return (counts[..., None] >= np.asarray(thresholds)).sum(axis=-1).astype(np.int64)


@dataclass(frozen=True)
class GroupHistograms:
    """The population groups of one iteration level at one region type: T01001 and the groups'
    household histograms, from which every variant's true cells are ``households @ query.T``."""

    level: int
    region: str
    geo_level: str
    codes: list[str]
    """The level's iteration codes."""
    t01001: IntArray
    """Persons of every group: geounits × iterations."""
    households: sp.csr_matrix
    """Households of every group over :data:`~sdclab.censuses.us2010.schema.HOUSEHOLD`: one
    row per group, geounit-major (row ``geounit · len(codes) + iteration``)."""

    def cells(self, v: Variant, rows: npt.NDArray[np.intp]) -> IntArray:
        """The true cells of ``v`` for the groups at ``rows``: groups × cells."""
        return np.asarray((self.households[rows] @ v.table.query.T).toarray(), dtype=np.int64)


CODE_BITS = 13
"""Detailed race codes are below 2¹³ (and Hispanic origins below 2⁸): four codes and an origin
pack into one int64, the other four into a second."""


def combinations(
    race: npt.NDArray[np.int16], origin: IntArray
) -> tuple[IntArray, npt.NDArray[np.int16], IntArray]:
    """The distinct (race codes, origin) combinations of the records: each record's combination,
    and the combinations' codes and origins. Few thousand combinations stand for a million
    records, so iterations are worked out per combination."""
    codes = race.astype(np.int64)
    low = origin.astype(np.int64)
    high = np.zeros(len(codes), dtype=np.int64)
    for slot in range(4):
        low = (low << CODE_BITS) | codes[:, slot]
        high = (high << CODE_BITS) | codes[:, slot + 4]
    frame = pl.DataFrame({"low": low, "high": high})
    unique = frame.unique(maintain_order=True).with_row_index("id")
    ids = frame.join(unique, on=["low", "high"], how="left", maintain_order="left")["id"]
    packed = unique.select("low", "high").to_numpy()
    mask = (1 << CODE_BITS) - 1
    shifts = CODE_BITS * np.arange(3, -1, -1)
    race_unique = np.concatenate(
        [(packed[:, [0]] >> shifts) & mask, (packed[:, [1]] >> shifts) & mask], axis=1
    ).astype(np.int16)
    origin_unique = (packed[:, 0] >> (4 * CODE_BITS)).astype(np.int64)
    return ids.to_numpy().astype(np.int64), race_unique, origin_unique


@dataclass(frozen=True)
class _Records:
    """Records (persons, or households by their householder's codes) counted once by tract ×
    combination of codes × domain cell: a tracts × (combinations · cells) matrix."""

    by_tract: sp.csr_matrix
    race: npt.NDArray[np.int16]
    origin: IntArray
    n_cells: int

    @classmethod
    def count(
        cls,
        tract: IntArray,
        race: npt.NDArray[np.int16],
        origin: IntArray,
        cell: IntArray,
        n_tracts: int,
        n_cells: int,
    ) -> _Records:
        ids, race_unique, origin_unique = combinations(race, origin)
        by_tract = sp.csr_matrix(
            (np.ones(len(ids), dtype=np.int64), (tract, ids * n_cells + cell)),
            shape=(n_tracts, len(race_unique) * n_cells),
        )
        return cls(by_tract, race_unique, origin_unique, n_cells)

    def by_group(self, membership: sp.csr_matrix, geography: Geography) -> dict[str, sp.csr_matrix]:
        """Counts by population group and cell at every region's level, geounits × (iterations ·
        cells): combinations map to their iterations (``membership ⊗ I``), tracts are summed up
        the geography."""
        identity = sp.identity(self.n_cells, dtype=np.int64, format="csr")
        out = {"tract": (self.by_tract @ sp.kron(membership, identity, format="csr")).tocsr()}
        for lv, below in (("county", "tract"), ("state", "county"), ("nation", "state")):
            out[lv] = (level_step(geography, lv) @ out[below]).tocsr()
        return out


def group_histograms(population: Population, groups: tuple[Group, ...]) -> list[GroupHistograms]:
    """The true counts behind every table SafeTab-H measures, for both iteration levels and every
    region type: persons (T01001) and households (over
    :data:`~sdclab.censuses.us2010.schema.HOUSEHOLD`) counted once by tract, combination of codes
    and cell, combinations mapped to iterations, tracts summed up to the nation (sparse products,
    no loops over records)."""
    race, origin = person_codes(population)
    households = np.flatnonzero(population.household_type > 0)
    heads = population.householder_row[households]
    geography = population.geography
    tract = geography.units("tract")[1]
    n_tracts = geography.n_units("tract")
    persons = _Records.count(
        tract[population.person_block_index],
        race,
        origin,
        np.zeros(len(race), dtype=np.int64),
        n_tracts,
        1,
    )
    homes = _Records.count(
        tract[population.unit_block_index[households]],
        race[heads],
        origin[heads],
        record_cells(population, schema.HOUSEHOLD)[households],
        n_tracts,
        schema.HOUSEHOLD.size,
    )
    out = []
    for level in (1, 2):
        p_its = iterations(groups, level, persons.race, persons.origin)
        h_its = iterations(groups, level, homes.race, homes.origin)
        t01001 = persons.by_group(p_its.membership, geography)
        by_group = homes.by_group(h_its.membership, geography)
        n_its = len(p_its.codes)
        for region, geo_level in REGION_TYPES.items():
            n_geo = geography.n_units(geo_level)
            out.append(
                GroupHistograms(
                    level,
                    region,
                    geo_level,
                    p_its.codes,
                    t01001[geo_level].toarray(),
                    by_group[geo_level].reshape((n_geo * n_its, schema.HOUSEHOLD.size)).tocsr(),
                )
            )
    return out


# ---------------------------------------------------------------------------------------------
# The published frames, and what a cell of one may be
# ---------------------------------------------------------------------------------------------

GROUP_SCHEMA = {
    "level": pl.String,
    "geoid": pl.String,
    "iteration_level": pl.Int8,
    "iteration": pl.String,
    "table": pl.String,
    "cell": pl.Int8,
    "count": pl.Int64,
    "derived": pl.Boolean,
}
"""Columns of the published population-group tables."""
GROUP_TOTALS_SCHEMA = {
    "level": pl.String,
    "geoid": pl.String,
    "iteration_level": pl.Int8,
    "iteration": pl.String,
    "count": pl.Int64,
}
"""Columns of the published population-group totals (a noisy T01001)."""


def cells_problem(part: pl.DataFrame, reach: float, clamp: bool) -> str | None:
    """The first group cell that is no cell of its variant, is derived where the variant
    measures it (or the reverse), or lies beyond the reach of its noise."""
    for name, rows in part.group_by("table", maintain_order=True):
        variant = VARIANT_TABLES.get(str(name[0]))
        if variant is None:
            return f"table {name[0]!r} is not a variant of T03 or T04 ({', '.join(VARIANT_TABLES)})"
        unknown = rows.filter(~pl.col("cell").is_in(list(variant.cells)))
        if unknown.height:
            return f"cell {unknown['cell'][0]} is not one of {variant.name}'s {list(variant.cells)}"
        summed = np.asarray(variant.derivation.sum(axis=1)).ravel()
        index = np.searchsorted(np.array(variant.cells), rows["cell"].to_numpy())  # in order
        derived = ~np.array(variant.measured)[index]
        wrong = np.flatnonzero(rows["derived"].to_numpy() != derived)
        if wrong.size:
            cell = rows["cell"][int(wrong[0])]
            return (
                f"cell {cell} of {variant.name} is {'derived' if derived[wrong[0]] else 'measured'}"
            )
        for terms in np.unique(summed[index]):
            problem = count_problem(
                rows.filter(pl.Series(summed[index] == terms)), int(terms), reach, clamp
            )
            if problem is not None:
                return problem
    return None


def count_problem(rows: pl.DataFrame, terms: int, reach: float, clamp: bool) -> str | None:
    """The first count (a sum of ``terms`` noisy cells of ``reach`` each) below what any count
    of 0 or more gives."""
    lowest = 0.0 if clamp else -terms * reach
    below = rows.filter(pl.col("count") < lowest)
    if below.height:
        r = below.row(0, named=True)
        return (
            f"count {r['count']} at {r['level']} {r['geoid']}, iteration {r['iteration']} lies "
            f"below {lowest:.4g}, beyond the noise's reach of any count of 0 or more"
        )
    return None


def variant_frame(
    values: IntArray,
    v: Variant,
    where: npt.NDArray[np.intp],
    gh: GroupHistograms,
    population: Population,
) -> pl.DataFrame:
    """The cells (``values``: groups × cells) of the groups at ``where`` (rows of
    ``gh.households``) in one variant, cell by cell."""
    n_its, n_cells = len(gh.codes), len(v.cells)
    geoids = geoid_strings(population.geography.codes(gh.geo_level), gh.geo_level)
    return pl.DataFrame(
        {
            "geoid": geoids.gather(np.tile(where // n_its, n_cells)),
            "iteration": pl.Series(gh.codes, dtype=pl.String).gather(
                np.tile(where % n_its, n_cells)
            ),
            "cell": pl.Series(np.repeat(v.cells, len(where)), dtype=pl.Int8),
            "count": pl.Series(values.T.ravel(), dtype=pl.Int64),
            "derived": pl.Series(np.repeat(~np.array(v.measured), len(where)), dtype=pl.Boolean),
        }
    ).select(
        pl.lit(gh.geo_level, dtype=pl.String).alias("level"),
        "geoid",
        pl.lit(gh.level, dtype=pl.Int8).alias("iteration_level"),
        "iteration",
        pl.lit(v.name, dtype=pl.String).alias("table"),
        "cell",
        "count",
        "derived",
    )


def group_frame(counts: IntArray, lc: GroupHistograms, geography: Geography) -> pl.DataFrame:
    """The group totals ``counts`` (geounits × iterations) as rows of the published frame."""
    geo, it = np.indices(counts.shape).reshape(2, -1)
    return pl.DataFrame(
        {
            "geoid": geoid_strings(geography.codes(lc.geo_level), lc.geo_level).gather(geo),
            "iteration": pl.Series(lc.codes).gather(it),
            "count": pl.Series(counts[geo, it], dtype=pl.Int64),
        }
    ).select(
        pl.lit(lc.geo_level, dtype=pl.String).alias("level"),
        "geoid",
        pl.lit(lc.level, dtype=pl.Int8).alias("iteration_level"),
        "iteration",
        "count",
    )
