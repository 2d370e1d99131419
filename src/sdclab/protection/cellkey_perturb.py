"""Record keys, cell keys and the perturbation of every table by the p-table.

Cell keys are the sums of the contributors' record keys mod K, tabulated on the same sparsity
pattern as the counts (docs/cellkey.md, *Cell keys*); the p-table's noise is looked up for every
cell at once, and the mechanism's invariants are checked on what is published."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from sdclab.censuses.us2010.population import Population
from sdclab.censuses.us2010.population.columns import RECORD_KEY
from sdclab.core.arrays import IntArray
from sdclab.core.errors import InputError
from sdclab.core.tables.tabulate import TableCounts, tabulate
from sdclab.protection.cellkey_params import EXACT_FLOAT, AnyPTable
from sdclab.protection.ptable import (
    OnsPTable,
)


def assign_record_keys(
    population: Population, key_space: int, rng: np.random.Generator
) -> Population:
    """The population with a uniform ``record_key`` in 0..K−1 on every person and unit."""
    persons = rng.integers(0, key_space, population.n_records("persons"))
    households = rng.integers(0, key_space, population.n_records("households"))
    return population.with_record_keys(persons, households)


def keys_from_ids(population: Population, key_space: int) -> Population:
    """Record keys as id mod K (ONS derives them from ``ons_id`` mod 4096)."""
    return population.with_record_keys(
        population.record_ids("persons") % key_space,
        population.record_ids("households") % key_space,
    )


def has_keys(population: Population) -> bool:
    """Whether the population stores record keys: in both tables, never in one alone (keys of
    one table would otherwise be silently replaced by drawn ones)."""
    persons = population.record_keys("persons") is not None
    units = population.record_keys("households") is not None
    if persons != units:
        holder, other = ("persons", "units") if persons else ("units", "persons")
        raise InputError(
            f"cellkey: the {holder} have a {RECORD_KEY.name} column but the {other} have none; "
            "give record keys in both tables or in neither"
        )
    return persons


def cell_noise(table: AnyPTable, counts: IntArray, cell_keys: IntArray, key_space: int) -> IntArray:
    """The p-table's noise for true ``counts`` with ``cell_keys`` in 0..K−1 (0 where count 0)."""
    if isinstance(table, OnsPTable):
        return table.noise(counts, cell_keys)
    return table.noise(counts, cell_keys / key_space)


NOISE_GRID = 1 << 20
"""Most (count row, cell key) pairs whose noise :func:`noise_grid` tabulates."""


def noise_grid(table: AnyPTable, key_space: int) -> IntArray | None:
    """The noise of every p-table row (count 0 … i_max, the last serving every larger count)
    and every cell key 0 … K−1, as :func:`cell_noise` gives it: a cell's noise is then one
    lookup instead of a search of its row. None for an ONS table or when the grid would be
    large."""
    if isinstance(table, OnsPTable) or (table.i_max + 1) * key_space > NOISE_GRID:
        return None
    rows = np.repeat(np.arange(table.i_max + 1, dtype=np.int64), key_space)
    keys = np.tile(np.arange(key_space, dtype=np.int64), table.i_max + 1)
    return cell_noise(table, rows, keys, key_space).reshape(table.i_max + 1, key_space)


def noise_bound(table: AnyPTable) -> int:
    """The largest |noise| the table can add (D)."""
    if isinstance(table, OnsPTable):
        return int(np.abs(table.pvalue).max())
    return int(table.D)


def blocked(table: AnyPTable) -> int:
    """js: published counts 1..js never occur (0 for ONS tables, whose threshold does that)."""
    return 0 if isinstance(table, OnsPTable) else int(table.js)


def keyed_tables(
    population: Population, names: list[str] | None, key_space: int
) -> tuple[dict[str, TableCounts], dict[str, TableCounts]]:
    """Counts and cell keys of every table at every level, on the same sparsity pattern.

    One tabulation gives both at once when every sum stays exact in float64: the weight
    1 + rk·2^s packs the count in the low s bits and the key sum above them (:func:`_packed`),
    else the complex weight 1 + i·rk holds them in its two parts; otherwise the counts and the
    sums of rk + 1 are tabulated separately (both positive over the same contributors, so their
    patterns agree). Every matrix holds its cells in ascending order (geounit, then cell), so
    what is drawn cell by cell (fresh keys without SPSN) does not depend on how the tables were
    counted.
    """
    kinds = {t.records for t in population.census.select(names)}
    keys = {}
    for kind in kinds:
        stored = population.record_keys(kind)
        assert stored is not None  # (assigned before)
        keys[kind] = stored.astype(np.int64)
    largest = max((int(k.sum()) for k in keys.values()), default=0)
    records = sum(population.n_records(kind) for kind in ("persons", "households"))
    shift = records.bit_length()  # every count is below 2^shift
    if (largest + 1) << shift < EXACT_FLOAT:
        packed = {kind: (k << shift).astype(np.float64) + 1 for kind, k in keys.items()}
        return _packed(tabulate(population, names, packed), shift, key_space)
    if largest + records < EXACT_FLOAT:
        mixed = {kind: np.ones(len(k)) + 1j * k for kind, k in keys.items()}
        return _split(tabulate(population, names, mixed), key_space)
    plain = tabulate(population, names)
    summed = tabulate(population, names, {kind: k + 1 for kind, k in keys.items()})
    cell_keys = {}
    for name, tc in plain.items():
        levels = {}
        for level, (codes, matrix) in tc.counts.items():
            key_matrix = summed[name].counts[level][1]
            matrix.sort_indices()
            key_matrix.sort_indices()
            if not np.array_equal(matrix.indices, key_matrix.indices):
                raise AssertionError(f"{name} at {level}: key and count patterns differ")
            keyed = matrix.copy()
            keyed.data = (key_matrix.data - matrix.data) % key_space
            levels[level] = (codes, keyed)
        cell_keys[name] = TableCounts(tc.table, levels, tc.geoids)
    return plain, cell_keys


def _packed(
    tables: dict[str, TableCounts], shift: int, key_space: int
) -> tuple[dict[str, TableCounts], dict[str, TableCounts]]:
    """(counts, cell keys) from tables holding count + 2^shift·(key sum), exact integers."""
    plain, cell_keys = {}, {}
    low = (1 << shift) - 1
    for name, tc in tables.items():
        counts, keys = {}, {}
        for level, (codes, matrix) in tc.counts.items():
            matrix.sort_indices()  # (cells in one order whichever way they were counted)
            packed = matrix.data.astype(np.int64)
            pattern = (matrix.indices.copy(), matrix.indptr.copy())  # each matrix its own
            k = sp.csr_matrix(((packed >> shift) % key_space, *pattern), shape=matrix.shape)
            matrix.data = packed & low  # (the tabulation's own matrix becomes the counts)
            counts[level], keys[level] = (codes, matrix), (codes, k)
        plain[name] = TableCounts(tc.table, counts, tc.geoids)
        cell_keys[name] = TableCounts(tc.table, keys, tc.geoids)
    return plain, cell_keys


def _split(
    tables: dict[str, TableCounts], key_space: int
) -> tuple[dict[str, TableCounts], dict[str, TableCounts]]:
    """(counts, cell keys) from complex tables holding count + i·(key sum)."""
    plain, cell_keys = {}, {}
    for name, tc in tables.items():
        counts, keys = {}, {}
        for level, (codes, matrix) in tc.counts.items():
            matrix.sort_indices()
            n = matrix.copy()
            n.data = np.rint(matrix.data.real).astype(np.int64)
            k = matrix.copy()
            k.data = np.rint(matrix.data.imag).astype(np.int64) % key_space
            counts[level], keys[level] = (codes, n), (codes, k)
        plain[name] = TableCounts(tc.table, counts, tc.geoids)
        cell_keys[name] = TableCounts(tc.table, keys, tc.geoids)
    return plain, cell_keys


def independent_keys(
    cell_keys: dict[str, TableCounts], key_space: int, rng: np.random.Generator
) -> dict[str, TableCounts]:
    """Fresh uniform cell keys for every published cell (no SPSN)."""
    out = {}
    for name, tc in cell_keys.items():
        levels = {}
        for level, (codes, matrix) in tc.counts.items():
            fresh = matrix.copy()
            fresh.data = rng.integers(0, key_space, len(fresh.data))
            levels[level] = (codes, fresh)
        out[name] = TableCounts(tc.table, levels, tc.geoids)
    return out


def perturb(
    plain: dict[str, TableCounts],
    cell_keys: dict[str, TableCounts],
    table: AnyPTable,
    key_space: int,
    threshold: int,
) -> dict[str, TableCounts]:
    """Published tables: every cell perturbed by the p-table, counts below ``threshold`` removed
    (the cells of every table and level looked up at once)."""
    places = [(name, level) for name, tc in plain.items() for level in tc.counts]
    true = all_cells(plain, places)
    keys = all_cells(cell_keys, places)
    grid = noise_grid(table, key_space)
    if grid is None:
        noise = cell_noise(table, true, keys, key_space)
    else:  # (true counts are never negative and keys lie in 0 … K−1)
        noise = grid[np.minimum(true, len(grid) - 1), keys]
    published = true + noise
    sizes = [plain[name].counts[level][1].nnz for name, level in places]
    check_published(places, sizes, true, published, noise_bound(table), blocked(table))
    published[published < threshold] = 0
    out: dict[str, TableCounts] = {}
    start = 0
    for name, tc in plain.items():
        levels = {}
        for level, (codes, matrix) in tc.counts.items():
            data = published[start : start + matrix.nnz]
            start += matrix.nnz
            pattern = (matrix.indices.copy(), matrix.indptr.copy())
            result = sp.csr_matrix((data, *pattern), shape=matrix.shape)
            result.eliminate_zeros()
            levels[level] = (codes, result)
        out[name] = TableCounts(tc.table, levels, tc.geoids)
    return out


def all_cells(tables: dict[str, TableCounts], places: list[tuple[str, str]]) -> IntArray:
    """The stored cells of every table at every level in ``places`` (name, level), end to end."""
    parts = [tables[name].counts[level][1].data for name, level in places]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def check_published(
    places: list[tuple[str, str]],
    sizes: list[int],
    true: IntArray,
    published: IntArray,
    bound: int,
    js: int,
) -> None:
    """The mechanism's invariants on the cells of the tables and levels ``places`` (``sizes``
    cells each, end to end): non-negative, |noise| ≤ D, never in 1..js."""
    for broken, what in (
        (published < 0, "a negative published count"),
        (np.abs(published - true) > bound, f"noise beyond the bound {bound}"),
        ((published >= 1) & (published <= js), f"a published count in 1..{js}"),
    ):
        if broken.any():
            at = int(np.searchsorted(np.cumsum(sizes), np.argmax(broken), side="right"))
            name, level = places[at]
            raise AssertionError(f"{name} at {level}: {what}")
