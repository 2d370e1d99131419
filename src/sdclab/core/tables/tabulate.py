"""Records → exact tables, as histograms and sparse matrix products.

A table whose dimensions put each code in at most one category counts each record straight into
its cell, read off its codes' categories (a mixed-radix number per part). Otherwise each record
is encoded as a flat cell of its table's marginal domain (the attributes the table crosses) and
the table is ``histogram @ query.T``, or the histogram over the classes of cells that count in
the same outputs when the query has few. Either histogram is over the geounits of the lowest
level the table is published at (the blocks for a block-level table); the levels above are sums
over children (``containment @ counts``). Nothing here loops over records or cells.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
import polars as pl
import scipy.sparse as sp

from sdclab.core.domain import Schema
from sdclab.core.geography import Geography
from sdclab.core.tables.definition import PartCoding, TableDef


class RecordKind(Protocol):
    """An attribute of a census as tabulation sees it: the records it describes."""

    @property
    def records(self) -> str: ...


class TabulatedCensus(Protocol):
    """What tabulation reads of a census (:class:`sdclab.core.census.model.Census`): its attributes'
    kinds of records and its tables by name."""

    @property
    def attributes(self) -> Mapping[str, RecordKind]: ...
    def select(self, names: Sequence[str] | None = None) -> list[TableDef]: ...


class Records(Protocol):
    """What tabulation reads of a census's records (a US population or a declared census's
    records): each attribute's codes and each record's block, for persons or households."""

    @property
    def census(self) -> TabulatedCensus: ...
    @property
    def geography(self) -> Geography: ...
    def geography_of(self, table: TableDef) -> Geography: ...
    def columns(self, records: str) -> Mapping[str, npt.NDArray[np.int64]]: ...
    def block_index(
        self, records: str, geography: Geography | None = None
    ) -> npt.NDArray[np.int64]: ...


Weights = npt.NDArray[np.int64] | npt.NDArray[np.float64] | npt.NDArray[np.complex128]
"""Per-record weights a tabulation sums instead of counts."""


def record_cells(population: Records, domain: Schema) -> npt.NDArray[np.int64]:
    """Flat domain cell of every record of the population for ``domain``."""
    return domain.cell_index(population.columns(record_kind(population.census, domain)))


def record_kind(census: TabulatedCensus, domain: Schema) -> str:
    """What the records of ``domain`` are: ``"households"`` when every attribute of the domain is
    a household attribute of ``census``, else ``"persons"`` (a person domain may cross the
    household a person lives in)."""
    attributes = census.attributes
    households = all(
        name in attributes and attributes[name].records == "households" for name in domain.names
    )
    return "households" if households and domain.names else "persons"


def record_blocks(population: Records, domain: Schema) -> npt.NDArray[np.int64]:
    """Block index of every record of ``domain`` (households for a domain of household
    attributes, else persons)."""
    return population.block_index(record_kind(population.census, domain))


def block_histogram(
    population: Records,
    domain: Schema,
    weights: Weights | None = None,
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
    geoids = {level: geography.geoids(level) for level in geography.levels}
    return {
        table.name: up_the_levels(
            geography, table, (histograms[table.schema.name] @ table.query.T).tocsr(), geoids
        )
        for table in tables
    }


def up_the_levels(
    geography: Geography,
    table: TableDef,
    block_counts: sp.csr_matrix,
    geoids: dict[str, pl.Series],
    start: str | None = None,
) -> TableCounts:
    """A table at each of its levels from its ``geounits × cells`` counts at level ``start`` (by
    default the blocks), each level summed from the one below (fewer non-zeros than from the
    blocks)."""
    levels = geography.levels
    start = levels[-1] if start is None else start
    current = block_counts
    codes = geography.blocks if start == levels[-1] else geography.codes(start)
    counts: dict[str, tuple[npt.NDArray[np.int64], sp.csr_matrix]] = {start: (codes, current)}
    for level in reversed(levels[levels.index(table.top) : levels.index(start)]):
        current = (level_step(geography, level) @ current).tocsr()
        counts[level] = (geography.codes(level), current)
    return TableCounts(table, {level: counts[level] for level in table.levels}, geoids)


def level_step(geography: Geography, level: str) -> sp.csr_matrix:
    """0/1 matrix geounits(level) × geounits(the level below): sums children into parents."""
    return geography.containment(level, geography.below(level))


DENSE_HISTOGRAM = 1 << 24
"""Largest blocks × cells grid a histogram is summed on densely (np.bincount, linear time)
rather than by sorting the records' entries (scipy's COO → CSR)."""
DENSE_PER_RECORD = 16
"""…and only when the grid has at most this many entries per record: a few records on a large
grid sort faster than a pass over the whole grid."""


def summed_densely(shape: tuple[int, int], records: int, weights: Weights | None) -> bool:
    """Whether records on a ``shape`` grid are summed by np.bincount: a grid small beside the
    records, and counts or real or complex weights (bincount sums in float64, so integer
    weights other than counts, exact only below 2⁵³ there, take scipy's path)."""
    rows, width = shape
    integer = weights is not None and np.issubdtype(weights.dtype, np.integer)
    small = rows * width <= min(DENSE_HISTOGRAM, DENSE_PER_RECORD * records)
    return small and records > 0 and not integer


def record_histogram(
    blocks: npt.NDArray[np.integer],
    cells: npt.NDArray[np.integer],
    weights: Weights | None,
    shape: tuple[int, int],
) -> sp.csr_matrix:
    """Sparse ``blocks × cells`` counts of the records (or sums of their ``weights``), an entry
    wherever a record falls: the matrix ``csr_matrix((weights, (blocks, cells)))`` builds, summed
    by np.bincount when :func:`summed_densely`."""
    if not summed_densely(shape, len(blocks), weights):
        data = np.ones(len(blocks), np.int64) if weights is None else weights
        return sp.csr_matrix((data, (blocks, cells)), shape=shape)
    flat = np.asarray(blocks, dtype=np.int64) * shape[1]
    flat += cells
    return flat_histogram(flat, weights, shape)


def positive(weights: Weights | None) -> bool:
    """Whether ``weights`` are counts or real and positive: their sums are then non-zero exactly
    where records fall."""
    return weights is None or (not np.iscomplexobj(weights) and bool((weights > 0).all()))


def flat_histogram(
    flat: npt.NDArray[np.signedinteger],
    weights: Weights | None,
    shape: tuple[int, int],
    weights_positive: bool | None = None,
) -> sp.csr_matrix:
    """:func:`record_histogram` of records given by their flat grid index ``row · width +
    cell``, summed by np.bincount: one pass for :func:`positive` weights (``weights_positive``,
    or checked here when None), else counts first for the pattern."""
    rows, width = shape
    size = rows * width
    values: npt.NDArray[np.generic]
    if weights is None or (positive(weights) if weights_positive is None else weights_positive):
        summed = np.bincount(flat, weights, size)
        where = np.flatnonzero(summed != 0)  # (a boolean's non-zeros are found far faster)
        values = summed[where]
    else:
        present = np.bincount(flat, minlength=size)
        where = np.flatnonzero(present != 0)
        values = dense_sums(flat, weights, present, where)
    return grid_csr(where, values, shape)


def grid_csr(
    where: npt.NDArray[np.int64], values: npt.NDArray[np.generic], shape: tuple[int, int]
) -> sp.csr_matrix:
    """The CSR matrix of ``shape`` holding ``values`` at the flat grid indices ``where``
    (ascending)."""
    rows, width = shape
    index = np.int32 if rows * width < 2**31 else np.int64
    indptr = np.zeros(rows + 1, dtype=index)
    row = np.searchsorted(where, np.arange(1, rows + 1, dtype=np.int64) * width)
    indptr[1:] = row  # (entries before each row's end: a search per row, not a pass per entry)
    return sp.csr_matrix((values, (where % width).astype(index), indptr), shape=shape)


def dense_sums(
    flat: npt.NDArray[np.int64],
    weights: Weights,
    present: npt.NDArray[np.int64],
    where: npt.NDArray[np.int64],
) -> npt.NDArray[np.generic]:
    """Sums of real or complex ``weights`` in the grid cells ``where`` records fall (``flat``:
    each record's grid cell, ``present``: records per grid cell)."""
    size = len(present)
    if not np.iscomplexobj(weights):
        return np.bincount(flat, weights, size)[where]
    # real parts of 1 (a count plus i·a key sum, as the cell key method's) are the counts
    ones = bool((weights.real == 1).all())
    real = present[where] if ones else np.bincount(flat, weights.real, size)[where]
    return real + 1j * np.bincount(flat, weights.imag, size)[where]


QUERY_CLASSES = 62
"""Most outputs a query may have for its cells to be grouped by the outputs they count in (one
bit per output in an int64)."""


def query_classes(query: sp.csr_matrix) -> tuple[npt.NDArray[np.int64], sp.csr_matrix] | None:
    """The cells of a 0/1 ``query`` grouped by the set of outputs each counts in: (class of each
    cell, the query on the classes). Cells of one class are interchangeable for the query, so
    records can be counted by class on a far narrower grid. None when the query has too many
    outputs or classes for this to pay."""
    outputs, width = query.shape
    if outputs > QUERY_CLASSES or not (query.data == 1).all():
        return None
    pattern = query.T @ (np.int64(1) << np.arange(outputs, dtype=np.int64))
    patterns, classes = np.unique(pattern, return_inverse=True)
    if 2 * len(patterns) > width:
        return None
    first = np.empty(len(patterns), dtype=np.int64)
    first[classes] = np.arange(width)  # a cell of each class (all share its column)
    return classes.astype(np.int64), query[:, first].tocsr()


def query_histogram(
    units: npt.NDArray[np.integer],
    n_units: int,
    table: TableDef,
    columns: Mapping[str, npt.NDArray[np.integer]],
    weights: Weights | None,
    weights_positive: bool | None = None,
) -> sp.csr_matrix:
    """``geounits × outputs`` counts (or weight sums) of ``table`` for records in ``units``:
    ``record_histogram(units, cells) @ query.T`` over the marginal's cells, or over the classes
    of :func:`query_classes` when they narrow the histogram (``weights_positive``: as
    :func:`flat_histogram` takes it)."""
    query, marginal = table.marginal_query, table.marginal
    grouped = query_classes(query)
    width = marginal.size if grouped is None else grouped[1].shape[1]
    shape = (n_units, width)
    small = np.int32 if max(marginal.size, n_units * width) < 2**31 else np.int64
    if not summed_densely(shape, len(units), weights):
        cells = marginal.cell_index(columns, dtype=small)
        if grouped is not None:
            cells, query = grouped[0][cells], grouped[1]
        return (record_histogram(units, cells, weights, shape) @ query.T).tocsr()
    if grouped is None:  # (a single geounit adds nothing to the cells' index)
        flat = marginal.cell_index(columns, units if n_units > 1 else None, dtype=small)
        return (flat_histogram(flat, weights, shape, weights_positive) @ query.T).tocsr()
    flat = np.multiply(units, width, dtype=np.int64)
    flat += grouped[0][marginal.cell_index(columns, dtype=small)]
    histogram = flat_histogram(flat, weights, shape, weights_positive)
    return (histogram @ grouped[1].T).tocsr()


@dataclass
class Numbering:
    """Each record's mixed-radix number over a sequence of digits (its geounit, then its
    category along each step of a part), kept for every prefix of the last sequence numbered:
    tables taken in the order of their digits (:func:`digits`) number their common prefix once.
    Each record's category is kept by attribute and categories for the whole tabulation."""

    categories: dict[tuple[str, bytes], npt.NDArray[np.integer]] = field(default_factory=dict)
    prefixes: list[tuple[str, npt.NDArray[np.signedinteger]]] = field(default_factory=list)
    buffers: list[npt.NDArray[np.signedinteger]] = field(default_factory=list)
    """The arrays the prefixes were numbered in, by length of prefix: written over when a
    sequence leaves a prefix (allocating them anew costs as much as the arithmetic)."""

    def category(
        self, attribute: str, category: npt.NDArray[np.signedinteger], column: npt.NDArray[Any]
    ) -> npt.NDArray[np.integer]:
        """Each record's category of ``attribute`` (``category`` indexed by its code)."""
        key = (attribute, category.tobytes())
        if key not in self.categories:
            identity = np.array_equal(category, np.arange(len(category)))
            self.categories[key] = column if identity else lookup(category, column)
        return self.categories[key]

    def number(
        self,
        units: tuple[str, npt.NDArray[np.integer]],
        part: PartCoding,
        columns: Mapping[str, npt.NDArray[np.integer]],
        dtype: type[np.signedinteger],
    ) -> npt.NDArray[np.signedinteger]:
        """Each record's geounit × the part's width + its cell in the part (``units``: the
        geounits' digit and each record's geounit), in ``dtype`` (int32 computes far faster
        than int64, where the numbers fit)."""
        sequence = [f"{units[0]}:{np.dtype(dtype).name}", *part.digits]
        shared = 0
        while (
            shared < min(len(sequence), len(self.prefixes))
            and self.prefixes[shared][0] == sequence[shared]
        ):
            shared += 1
        del self.prefixes[shared:]
        if not self.prefixes:
            self.prefixes.append((sequence[0], self.buffer(0, len(units[1]), dtype)))
            np.copyto(self.prefixes[0][1], units[1])
        for depth in range(len(self.prefixes), len(sequence)):
            attribute, category, size = part.steps[depth - 1]
            number = self.buffer(depth, len(units[1]), dtype)
            np.multiply(self.prefixes[-1][1], size, out=number)
            number += self.category(attribute, category, columns[attribute])
            self.prefixes.append((sequence[depth], number))
        return self.prefixes[-1][1]

    def buffer(
        self, depth: int, records: int, dtype: type[np.signedinteger]
    ) -> npt.NDArray[np.signedinteger]:
        """The array the prefix of ``depth`` digits is numbered in, one number per record."""
        while len(self.buffers) <= depth:
            self.buffers.append(np.empty(records, dtype=dtype))
        if len(self.buffers[depth]) != records or self.buffers[depth].dtype != dtype:
            self.buffers[depth] = np.empty(records, dtype=dtype)
        return self.buffers[depth]


def digits(table: TableDef, units: str) -> tuple[str, ...]:
    """The digits a table's records are numbered by when counted (``units``: its geounits'
    digit): tables in this order share their common prefixes in a :class:`Numbering`."""
    if table.coding is None or len(table.coding) > 1:
        return ()
    return (units, *table.coding[0].digits)


def coded_histogram(
    units: npt.NDArray[np.integer],
    n_units: int,
    coding: tuple[PartCoding, ...],
    columns: Mapping[str, npt.NDArray[np.integer]],
    weights: Weights | None,
    weights_positive: bool | None = None,
    numbering: tuple[str, Numbering] | None = None,
) -> sp.csr_matrix:
    """:func:`query_histogram` of a table with a :attr:`TableDef.coding`: each record's cell in
    each part read off its codes' categories, every part's records counted at once straight into
    the table's cells. ``numbering``: the geounits' digit and the tabulation's
    :class:`Numbering`, shared by its tables."""
    digit, shared = ("", Numbering()) if numbering is None else numbering
    width = coding[-1].offset + coding[-1].width
    shape = (n_units, width)
    coding = tuple(part for part in coding if part.width)  # (a part of no cells counts nobody)
    if not coding:
        return sp.csr_matrix(shape, dtype=np.int64 if weights is None else weights.dtype)
    if len(coding) == 1 and not coding[0].drops and summed_densely(shape, len(units), weights):
        small = np.int32 if n_units * width < 2**31 else np.int64
        flat = shared.number((digit, units), coding[0], columns, small)  # (geounit slowest)
        return flat_histogram(flat, weights, shape, weights_positive)
    wide = n_units * (width + 1) >= 2**31 or any(p.reach >= 2**31 for p in coding)
    dtype = np.int64 if wide else np.int32
    if summed_densely((n_units, width + 1), len(units), weights) and (
        weights is None or weights.dtype == np.float64
    ):
        return parts_histogram(units, n_units, coding, columns, weights, dtype, shared)
    unit, cell, weight = [], [], []
    for part in coding:
        cells = part_cells(part, columns, shared, len(units), dtype)
        inside = cells >= 0 if part.drops else slice(None)
        cells = cells[inside]
        if part.offset:
            cells += part.offset
        cell.append(cells)
        unit.append(units[inside])
        if weights is not None:
            weight.append(weights[inside])
    cells, units = one_array(cell), one_array(unit)
    summed = None if weights is None else one_array(weight)
    if not summed_densely(shape, len(cells), summed):
        return record_histogram(units, cells, summed, shape)
    if n_units > 1:
        cells += np.multiply(units, width, dtype=cells.dtype)
    return flat_histogram(cells, summed, shape, weights_positive)


def part_cells(
    part: PartCoding,
    columns: Mapping[str, npt.NDArray[np.integer]],
    numbering: Numbering,
    records: int,
    dtype: type[np.signedinteger],
) -> npt.NDArray[np.signedinteger]:
    """Each record's cell in the part (negative for a record the part leaves out)."""
    if not part.steps:
        return np.zeros(records, dtype=dtype)
    attribute, category, _ = part.steps[0]
    cells = numbering.category(attribute, category, columns[attribute]).astype(dtype)
    for attribute, category, size in part.steps[1:]:
        if size > 1:
            cells *= size
        cells += numbering.category(attribute, category, columns[attribute])
    return cells


def parts_histogram(
    units: npt.NDArray[np.integer],
    n_units: int,
    coding: tuple[PartCoding, ...],
    columns: Mapping[str, npt.NDArray[np.integer]],
    weights: Weights | None,
    dtype: type[np.signedinteger],
    numbering: Numbering,
) -> sp.csr_matrix:
    """:func:`coded_histogram` summed part by part on one dense grid (counts or real weights):
    a record in several parts is never copied, and a record a part leaves out falls in a last
    column, dropped at the end."""
    width = coding[-1].offset + coding[-1].width
    stride = width + 1
    summed = np.zeros(n_units * stride, dtype=np.int64 if weights is None else np.float64)
    present = None if positive(weights) else np.zeros(n_units * stride, dtype=np.int64)
    rows = np.multiply(units, stride, dtype=dtype) if n_units > 1 else None
    for part in coding:
        if len(part.steps) == 1:  # (its cells in the table looked up in one pass)
            attribute, category, _ = part.steps[0]
            table_cells = np.where(category < 0, width, category + part.offset)
            looked_up = lookup(table_cells, columns[attribute])
            cells = looked_up.astype(dtype) if rows is None else np.add(rows, looked_up)
        else:
            cells = part_cells(part, columns, numbering, len(units), dtype)
            if part.drops:
                np.copyto(cells, width - part.offset, where=cells < 0)
            if part.offset:
                cells += part.offset
            if rows is not None:
                cells += rows
        summed += np.bincount(cells, weights, len(summed))
        if present is not None:
            present += np.bincount(cells, minlength=len(summed))
    found = summed if present is None else present
    where = np.flatnonzero(found.reshape(n_units, stride)[:, :width] != 0)
    values = summed.reshape(n_units, stride)[:, :width].ravel()[where]
    return grid_csr(where, values, (n_units, width))


def lookup(
    table: npt.NDArray[np.integer], codes: npt.NDArray[np.integer]
) -> npt.NDArray[np.integer]:
    """``table[codes]``: for byte codes and a table of values in −128..127, through
    ``bytes.translate`` (one pass at memory speed, where np.take first widens every code to a
    64-bit index), read-only int8; else np.take, in the table's type. Codes index the table
    (checked where records are read, as for :func:`narrow`)."""
    small = len(table) <= 256 and (not len(table) or -128 <= table.min() <= table.max() <= 127)
    if codes.dtype != np.uint8 or not small:
        return np.take(table, codes)
    translation = np.zeros(256, dtype=np.int8)
    translation[: len(table)] = table
    return np.frombuffer(codes.tobytes().translate(translation.tobytes()), dtype=np.int8)


def one_array(arrays: list[npt.NDArray[Any]]) -> npt.NDArray[Any]:
    """The arrays end to end (the one array itself, uncopied, when there is one)."""
    return arrays[0] if len(arrays) == 1 else np.concatenate(arrays)


Places = dict[tuple[int, str, str], tuple[Geography, npt.NDArray[np.integer], int]]
"""Cached geounit index of each record, by (geography's id, kind of record, level), with the
geography (kept alive so that its id stays its own) and the level's number of geounits."""


def record_units(
    population: Records, geography: Geography, records: str, level: str, cache: Places
) -> tuple[npt.NDArray[np.integer], int]:
    """(index at ``level`` of each record's geounit, number of geounits at ``level``), computed
    once per geography, kind of record and level, in the smallest integer type that holds it (an
    array read for every table)."""
    key = (id(geography), records, level)
    if key not in cache:
        bottom = (id(geography), records, geography.levels[-1])
        if bottom not in cache:
            blocks = population.block_index(records, geography)
            bounds = (0, geography.n_blocks - 1)  # (block indices)
            cache[bottom] = (geography, narrow(blocks, bounds), geography.n_blocks)
        if level != geography.levels[-1]:
            codes, unit = geography.units(level)
            cache[key] = (geography, narrow(unit)[cache[bottom][1]], len(codes))
    _, units, n_units = cache[key]
    return units, n_units


def narrow(
    codes: npt.NDArray[np.integer], bounds: tuple[int, int] | None = None
) -> npt.NDArray[np.integer]:
    """Integer ``codes`` in the smallest integer type that holds them (``bounds``: the lowest
    and highest they can be, when known; else read off them): a record's grid index reads
    every attribute of its table, and bytes read faster than int64s. A code outside ``bounds``
    would wrap around unseen: they are the declared codes, which the readers and generators of
    records check (the checks of every record belong there, not to every tabulation)."""
    if not len(codes):
        return codes
    low, high = (int(codes.min()), int(codes.max())) if bounds is None else bounds
    return codes.astype(np.result_type(np.min_scalar_type(low), np.min_scalar_type(high)))


Columns = dict[tuple[str, str], npt.NDArray[np.integer]]
"""Cached :func:`narrow` columns, by (kind of record, attribute)."""


def narrow_columns(
    population: Records, records: str, domain: Schema, cache: Columns
) -> Mapping[str, npt.NDArray[np.integer]]:
    """The columns of ``records`` that ``domain`` crosses, each :func:`narrow` to the codes its
    attribute declares (once per tabulation: the records' codes lie within them, as every table
    over them assumes); all the columns as they are when the domain crosses none (they then
    give only the records' number)."""
    columns = population.columns(records)
    if not domain.names:
        return columns
    for attribute in domain.attributes:
        if (records, attribute.name) not in cache:
            bounds = (attribute.low, attribute.high)
            cache[(records, attribute.name)] = narrow(np.asarray(columns[attribute.name]), bounds)
    return {name: cache[(records, name)] for name in domain.names}


def tabulate(
    population: Records,
    names: Sequence[str] | None = None,
    weights: Mapping[str, Weights] | None = None,
) -> dict[str, TableCounts]:
    """Exact tables of a population (every table of its census when ``names`` is None), each
    counted straight into its cells from its records' categories (:attr:`TableDef.coding`), or
    over the marginal domain of the attributes it crosses when a code counts in two categories
    (a race tally); with ``weights`` (one per
    record, by kind of record: persons, households), sums of the weights instead of counts.

    Each table is counted at the lowest level it is published at (records mapped to that
    level's geounits once per geography) and summed up from there: a table published down to
    regions never builds a histogram over blocks."""
    out = {}
    places: Places = {}
    columns: Columns = {}
    numberings: dict[str, Numbering] = {}  # (by kind of record)
    signs = {kind: positive(w) for kind, w in (weights or {}).items()}
    geoids: dict[int, tuple[Geography, dict[str, pl.Series]]] = {}
    tables = population.census.select(names)
    for table in sorted(tables, key=lambda t: digits(t, units_digit(population, t))):
        geography = population.geography_of(table)
        if id(geography) not in geoids:
            levels = {level: geography.geoids(level) for level in geography.levels}
            geoids[id(geography)] = (geography, levels)
        units, n_units = record_units(population, geography, table.records, table.bottom, places)
        data = None if weights is None else weights[table.records]
        chosen = narrow_columns(population, table.records, table.marginal, columns)
        sign = signs.get(table.records)
        if table.coding is None:
            counts = query_histogram(units, n_units, table, chosen, data, sign)
        else:
            numbering = (
                units_digit(population, table),
                numberings.setdefault(table.records, Numbering()),
            )
            counts = coded_histogram(units, n_units, table.coding, chosen, data, sign, numbering)
        out[table.name] = up_the_levels(
            geography, table, counts, geoids[id(geography)][1], table.bottom
        )
    return {table.name: out[table.name] for table in tables}


def units_digit(population: Records, table: TableDef) -> str:
    """The first digit of a :class:`Numbering` of the table's records: the geounits it is
    counted at (its geography, kind of record and lowest level)."""
    return f"{id(population.geography_of(table))}:{table.records}:{table.bottom}"
