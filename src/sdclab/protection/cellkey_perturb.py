"""Record keys, cell keys and the perturbation of every table by the p-table.

Cell keys are the sums of the contributors' record keys mod K, tabulated on the same sparsity
pattern as the counts (docs/cellkey.md, *Cell keys*); the p-table's noise is looked up for every
cell at once, and the mechanism's invariants are checked on what is published."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt
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
    noise = cell_noise(table, rows, keys, key_space).astype(np.int64)
    return noise.reshape(table.i_max + 1, key_space)


def noise_bound(table: AnyPTable) -> int:
    """The largest |noise| the table can add (D)."""
    if isinstance(table, OnsPTable):
        return int(np.abs(table.pvalue).max())
    return int(table.D)


def blocked(table: AnyPTable) -> int:
    """js: published counts 1..js never occur (0 for ONS tables, whose threshold does that)."""
    return 0 if isinstance(table, OnsPTable) else int(table.js)


@dataclass(frozen=True)
class KeyedCells:
    """Every table at every level, tabulated, with the cell key of each stored cell: the true
    counts as tables and, end to end in the order of ``places`` (table, level), the stored
    cells' counts and keys, the arrays the p-table's noise is looked up for at once. The
    tables' matrices hold their cells in ascending order (geounit, then cell) and their data are
    views of ``counts``; both arrays are read-only, so that counts and keys stay aligned."""

    tables: dict[str, TableCounts]
    places: list[tuple[str, str]]
    counts: IntArray
    keys: IntArray

    @property
    def sizes(self) -> list[int]:
        """The number of stored cells of each place."""
        return [self.tables[name].counts[level][1].nnz for name, level in self.places]

    def with_keys(self, keys: IntArray) -> KeyedCells:
        """The same cells with other keys (one per stored cell)."""
        if len(keys) != len(self.counts):
            raise ValueError(f"{len(keys)} keys for {len(self.counts)} cells")
        return replace(self, keys=read_only(keys))

    def key_tables(self) -> dict[str, TableCounts]:
        """The cell keys as tables, on the counts' sparsity pattern (their data are views of
        ``keys``)."""
        return with_stored(self.tables, self.places, self.keys, drop_zeros=False)


def keyed_tables(population: Population, names: list[str] | None, key_space: int) -> KeyedCells:
    """Every table at every level with the count and the cell key of each stored cell
    (:class:`KeyedCells`: the tables of true counts, and the cells' counts and keys end to end).

    One tabulation gives counts and key sums at once when every sum stays exact in float64: the
    weight 1 + rk·2^s packs the count in the low s bits and the key sum above them; else the
    complex weight 1 + i·rk holds them in its two parts; otherwise the counts and the sums of
    rk + 1 are tabulated separately (both positive over the same contributors, so their patterns
    agree). Every matrix holds its cells in ascending order (geounit, then cell), so what is
    drawn cell by cell (fresh keys without SPSN) does not depend on how the tables were counted.
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
        tables = tabulate(population, names, packed)
        places, data = stored_data(tables)
        whole = np.concatenate(data, dtype=np.int64, casting="unsafe")  # (exact integers)
        counts = whole & ((1 << shift) - 1)
        whole >>= shift
        if key_space & (key_space - 1):
            np.remainder(whole, key_space, out=whole)
        else:  # (a power of two: the low bits, without a division per cell)
            np.bitwise_and(whole, key_space - 1, out=whole)
        return _keyed(tables, places, counts, whole)
    if largest + records < EXACT_FLOAT:
        mixed = {kind: np.ones(len(k)) + 1j * k for kind, k in keys.items()}
        tables = tabulate(population, names, mixed)
        places, data = stored_data(tables)
        whole = np.concatenate(data)
        counts = np.rint(whole.real).astype(np.int64)
        return _keyed(tables, places, counts, np.rint(whole.imag).astype(np.int64) % key_space)
    tables = tabulate(population, names)
    summed = tabulate(population, names, {kind: k + 1 for kind, k in keys.items()})
    places, data = stored_data(tables)
    sums = []
    for name, level in places:
        matrix, key_matrix = tables[name].counts[level][1], summed[name].counts[level][1]
        key_matrix.sort_indices()
        same = np.array_equal(matrix.indptr, key_matrix.indptr)
        if not same or not np.array_equal(matrix.indices, key_matrix.indices):
            raise AssertionError(f"{name} at {level}: key and count patterns differ")
        sums.append(key_matrix.data)
    counts = np.concatenate(data).astype(np.int64)
    return _keyed(tables, places, counts, (np.concatenate(sums) - counts) % key_space)


def stored_data(
    tables: dict[str, TableCounts],
) -> tuple[list[tuple[str, str]], list[npt.NDArray[np.generic]]]:
    """Every (table, level) of ``tables`` and its matrix's stored values, cells in ascending
    order (whichever way they were counted); one empty array when there are none."""
    places = [(name, level) for name, tc in tables.items() for level in tc.counts]
    data = []
    for name, level in places:
        matrix = tables[name].counts[level][1]
        matrix.sort_indices()
        data.append(matrix.data)
    return places, data or [np.zeros(0, dtype=np.int64)]


def _keyed(
    tables: dict[str, TableCounts], places: list[tuple[str, str]], counts: IntArray, keys: IntArray
) -> KeyedCells:
    """The keyed cells, each matrix of ``tables`` now holding its part of ``counts``."""
    counts = read_only(counts)
    start = 0
    for name, level in places:
        matrix = tables[name].counts[level][1]
        matrix.data = counts[start : start + matrix.nnz]
        start += matrix.nnz
    return KeyedCells(tables, places, counts, read_only(keys))


def read_only(values: IntArray) -> IntArray:
    """``values``, no longer writable."""
    values.flags.writeable = False
    return values


def independent_keys(cells: KeyedCells, key_space: int, rng: np.random.Generator) -> KeyedCells:
    """Fresh uniform cell keys for every stored cell (no SPSN), drawn place by place."""
    fresh = [rng.integers(0, key_space, size) for size in cells.sizes]
    return cells.with_keys(np.concatenate(fresh) if fresh else cells.keys.copy())


def perturb(
    cells: KeyedCells, table: AnyPTable, key_space: int, threshold: int
) -> dict[str, TableCounts]:
    """Published tables: every cell perturbed by the p-table, counts below ``threshold`` removed
    (the cells of every table and level looked up at once)."""
    true = cells.counts
    grid = noise_grid(table, key_space)
    if grid is None:  # (int64: the published counts are summed into it)
        noise = cell_noise(table, true, cells.keys, key_space).astype(np.int64)
    else:  # (counts ≥ 0, keys in 0 … K−1 and an int64 grid: one flat lookup, in place)
        noise = np.minimum(true, len(grid) - 1)
        noise *= key_space
        noise += cells.keys
        np.take(grid.ravel(), noise, out=noise)
    published = np.add(true, noise, out=noise)
    check_published(cells.places, cells.sizes, true, published, noise_bound(table), blocked(table))
    if threshold > 0:  # (published counts are never negative)
        published[published < threshold] = 0
    return with_stored(cells.tables, cells.places, published)


def with_stored(
    tables: dict[str, TableCounts],
    places: list[tuple[str, str]],
    values: IntArray,
    drop_zeros: bool = True,
) -> dict[str, TableCounts]:
    """``tables`` whose stored cells of ``places`` (end to end) hold ``values`` instead, each
    matrix its own copy of the pattern; cells whose value is 0 removed when ``drop_zeros``."""
    out: dict[str, dict[str, tuple[IntArray, sp.csr_matrix]]] = {name: {} for name in tables}
    start = 0
    for name, level in places:
        codes, matrix = tables[name].counts[level]
        data = values[start : start + matrix.nnz]
        start += matrix.nnz
        pattern = (matrix.indices.copy(), matrix.indptr.copy())
        result = sp.csr_matrix((data, *pattern), shape=matrix.shape)
        if drop_zeros:
            result.eliminate_zeros()
        out[name][level] = (codes, result)
    return {name: TableCounts(tc.table, out[name], tc.geoids) for name, tc in tables.items()}


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
