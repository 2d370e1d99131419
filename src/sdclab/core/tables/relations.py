"""Published cells and the linear relations among them.

A release (or an exact tabulation) publishes one number per (table, level, geounit, cell).
:class:`PublishedCells` numbers every such cell of some tables consecutively and holds its
published value and whether it is suppressed; :class:`Relations` are the linear equalities an
attacker (or a suppression method) knows among those cells, each ``whole = Σ parts``:

* **geography** — a parent geounit's cell is the sum of the same cell over its children at the
  table's next published level (:meth:`PublishedCells.geography_relations`);
* **partitions** — within one geounit, a cell of one table is the sum of the cells of another
  table that lie inside it, when those cells are disjoint and cover it
  (:meth:`PublishedCells.partition_relations`; which cells partition which is :func:`partition`,
  read from the query matrices).

Both are found from the tables' query matrices and the geography, never from table names, and
both hold exactly on an exact tabulation: ``relations.matrix @ cells.values == 0``.

The numbering. The cells of table ``tables[t]`` at ``level`` form one *block*, in the order of
``tables`` and, within a table, of its levels (nation first); a block holds
``n_units(level) × n_cells`` cells, row (geounit) major: the cell ``(t, level, row, cell)`` is
``offset[(name, level)] + row · n_cells + cell``. :meth:`PublishedCells.index` and
:meth:`PublishedCells.locate` go from one to the other. Geounits are also numbered across levels
(:func:`geounit_offsets`, :attr:`PublishedCells.geounit`), so per-geounit facts spread to cells by
indexing.

Used by complementary suppression (:mod:`sdclab.protection.suppression`: its cells, relations and
bounds) and by the cell key risk analysis (:mod:`sdclab.protection.cellkey_risk`: additive
tuples and independent redundant representations).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal, Protocol, TypeVar

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from sdclab.core.arrays import BoolArray, IntArray
from sdclab.core.domain import Schema
from sdclab.core.geography import Geography
from sdclab.core.tables.definition import TableDef, cell_products
from sdclab.core.tables.published import PublishedTable
from sdclab.core.tables.tabulate import TableCounts


class TablesOnAGeography(Protocol):
    """What :meth:`PublishedCells.from_release` reads of a release: its tables and geography."""

    @property
    def tables(self) -> Mapping[str, PublishedTable]: ...
    @property
    def geography(self) -> Geography: ...


# ---------------------------------------------------------------------------------------------
# What the query matrices say: possible cells, coverage, partitions
# ---------------------------------------------------------------------------------------------


def possible_cells(domain: Schema) -> BoolArray:
    """Domain cells a valid record can occupy (the domain's edits say which are empty by rule)."""
    return domain.possible_cells()


def coverage(table: TableDef) -> IntArray:
    """How many of the table's cells each domain cell counts in."""
    return np.asarray(table.query.sum(axis=0), dtype=np.int64).ravel()


@dataclass(frozen=True)
class QueryRows:
    """What the partition tests read of a table's query rows over the possible cells of its
    schema (or of ``domain``), computed once per table and reused across pairs. For a table of
    one part reading each record's cell off its codes (:attr:`TableDef.coding`) on its own
    schema without edits, the facts follow from its categories alone and the rows themselves are
    built only when a comparison needs them (a table crossing long code lists makes them large)."""

    table: TableDef
    size: IntArray
    """Possible domain cells in each of the table's cells."""
    disjoint: bool
    """No domain cell counts in two of the table's cells."""
    total: BoolArray
    """The cells that count every record (they cover every possible domain cell)."""
    partition: bool
    """The cells are disjoint and cover every possible domain cell."""
    domain: Schema | None = None
    """The domain of the rows when it is not the table's own schema (:func:`joint_domain`)."""

    @property
    def on(self) -> Schema:
        """The domain the rows are over."""
        return self.table.schema if self.domain is None else self.domain

    @cached_property
    def query(self) -> sp.csr_matrix:
        """Cells × possible domain cells, int64 0/1."""
        return query_rows(self.table, self.domain)[0]

    @classmethod
    def of(cls, table: TableDef, domain: Schema | None = None) -> QueryRows:
        """The table's rows over its own schema, or over ``domain`` (holding its attributes)."""
        if domain is None and (facts := coded_facts(table)) is not None:
            return cls(table, *facts)
        query, counted, possible = query_rows(table, domain)
        size = np.asarray(query.sum(axis=1), dtype=np.int64).ravel()
        disjoint = bool(counted.max(initial=0) <= 1)
        rows = cls(
            table,
            size,
            disjoint,
            np.asarray(size == possible.sum(), dtype=bool),
            disjoint and bool((counted[possible] == 1).all()),
            domain,
        )
        rows.__dict__["query"] = query  # (the cached property, already computed)
        return rows


def query_rows(table: TableDef, domain: Schema | None) -> tuple[sp.csr_matrix, IntArray, BoolArray]:
    """(the table's query over the possible cells of its schema or ``domain``, how many of its
    cells each domain cell counts in, which domain cells are possible)."""
    possible = possible_cells(table.schema if domain is None else domain)
    query = (table.query if domain is None else table.query_on(domain)).astype(np.int64)
    query = query.tocsr()
    counted = np.asarray(query.sum(axis=0), dtype=np.int64).ravel()
    if not possible.all():
        query = query[:, np.flatnonzero(possible)]
    return query, counted, possible


def coded_facts(table: TableDef) -> tuple[IntArray, bool, BoolArray, bool] | None:
    """(size, disjoint, total, partition) of :class:`QueryRows` from the categories of a table
    of one coded part on a schema without edits (every domain cell possible): a cell holds the
    product over the schema's attributes of the codes its categories (or the universe, or all)
    hold. None for other tables."""
    if table.coding is None or len(table.parts) != 1 or table.schema.edits:
        return None
    ones = {a.name: np.ones(a.size, np.int64) for a in table.schema.attributes}
    size = cell_products(table.schema, table.parts[0], ones)
    total = size == table.schema.size
    return size, True, total, not table.coding[0].drops


def is_partition(table: TableDef) -> bool:
    """Whether the table's cells partition all its records: its query rows are disjoint and cover
    every possible cell of its domain, so its cells sum to the number of records."""
    return QueryRows.of(table).partition


def total_cells(table: TableDef) -> BoolArray:
    """The table's cells that count every record (their query row covers every possible cell)."""
    return QueryRows.of(table).total


def partition(whole: TableDef | QueryRows, parts: TableDef | QueryRows) -> sp.csr_matrix | None:
    """Which cells of ``parts`` partition which cells of ``whole``: a 0/1 matrix (cells of
    ``parts`` × cells of ``whole``) whose column j lists the cells of ``parts`` that lie inside
    cell j and together cover it, for every cell j that ``parts`` partitions exactly (no cell of
    ``parts`` meets it only in part); other columns are empty. None when the cells of ``parts``
    overlap one another (race tallies): they partition nothing.

    On one schema this compares the query rows (over the possible domain cells). Across schemas
    that count the same records (persons, or units), the only cells known to agree are the totals:
    a cell of ``whole`` that counts every record is partitioned by ``parts`` when its cells
    partition all records (:func:`is_partition`). Relations the query rows do not show (a unit
    that is occupied has a tenure) are not found.
    """
    w = whole if isinstance(whole, QueryRows) else QueryRows.of(whole)
    p = parts if isinstance(parts, QueryRows) else QueryRows.of(parts)
    if not p.disjoint:
        return None  # overlapping cells: not a partition
    if w.table is p.table and w.on is p.on:  # each non-empty cell is its own one-part partition
        cells = np.flatnonzero(p.size > 0)
        shape = (p.table.n_cells, p.table.n_cells)
        return sp.csr_matrix((np.ones(len(cells), np.int64), (cells, cells)), shape=shape)
    if w.on is not p.on:
        if w.table.records != p.table.records or not p.partition:
            return sp.csr_matrix((p.table.n_cells, w.table.n_cells), dtype=np.int64)
        rows, columns = np.flatnonzero(p.size > 0), np.flatnonzero(w.total)
        entries = (np.repeat(rows, len(columns)), np.tile(columns, len(rows)))
        shape = (p.table.n_cells, w.table.n_cells)
        return sp.csr_matrix((np.ones(len(entries[0]), np.int64), entries), shape=shape)
    overlap = (p.query @ w.query.T).toarray()
    inside = (overlap == p.size[:, None]) & (p.size[:, None] > 0)
    partial = (overlap > 0) & ~inside
    covered = (inside * p.size[:, None]).sum(axis=0)
    ok = ~partial.any(axis=0) & (covered == w.size) & (w.size > 0)
    return sp.csr_matrix(inside & ok[None, :], dtype=np.int64)


def partitions(whole: TableDef, tables: Sequence[TableDef]) -> dict[str, sp.csr_matrix]:
    """:func:`partition` of ``whole`` by each of ``tables`` that partitions at least one of its
    cells (``whole`` itself included: each cell is its own one-part partition)."""
    w = QueryRows.of(whole)
    out = {}
    for table in tables:
        inside = partition(w, table)
        if inside is not None and inside.nnz:
            out[table.name] = inside
    return out


def _recode_cube(table: TableDef) -> bool:
    """Whether the table is one coded part without a universe that leaves no code out (each
    dimension a recode, every code in exactly one category) on a schema without edits: its cells
    relate attribute by attribute."""
    coding = table.coding
    if coding is None or len(coding) != 1 or table.parts[0].universe or table.schema.edits:
        return False
    return not coding[0].drops


def recode_partition(whole: TableDef, parts: TableDef) -> sp.csr_matrix | None:
    """:func:`partition` of two tables of recodes (:func:`_recode_cube`) of the same records,
    read attribute by attribute instead of over their joint domain; None for other tables.

    A cell of ``parts`` lies inside a cell of ``whole`` when, on every attribute ``whole``
    crosses, its category lies inside the whole's (``whole`` crossing into several categories an
    attribute ``parts`` does not cross: no cell does); a cell of ``whole`` is partitioned when no
    category of ``parts`` straddles any of its categories (recodes cover every code, so the
    categories inside then cover it)."""
    if whole.records != parts.records or not (_recode_cube(whole) and _recode_cube(parts)):
        return None
    mine, theirs = whole.parts[0].dimensions, parts.parts[0].dimensions
    axis = {d.attribute: k for k, d in enumerate(theirs)}
    shape = (parts.n_cells, whole.n_cells)
    category = np.indices([len(d.labels) for d in theirs]).reshape(len(theirs), parts.n_cells)
    # a cell of ``parts`` with an empty category (no code) holds no record: inside nothing
    inside = np.ones(parts.n_cells, dtype=bool)
    for k, t in enumerate(theirs):
        inside &= (t.membership.sum(axis=1) > 0)[category[k]]
    coordinates, clean = [], []
    for d in mine:
        nonempty = d.membership.sum(axis=1) > 0
        if d.attribute not in axis:
            if nonempty.sum() != 1:  # a split ``parts`` cannot follow (or no code at all)
                return sp.csr_matrix(shape, dtype=np.int64)
            coordinates.append(np.full(parts.n_cells, int(np.argmax(nonempty)), dtype=np.int64))
            clean.append(nonempty)
            continue
        k = axis[d.attribute]
        overlap = theirs[k].membership.astype(np.int64) @ d.membership.T.astype(np.int64) > 0
        meets = overlap.sum(axis=1)
        straddles = meets > 1
        clean.append(~overlap[straddles].any(axis=0) & nonempty)
        coordinates.append(overlap.argmax(axis=1)[category[k]])
        inside &= meets[category[k]] == 1
    sizes = [len(d.labels) for d in mine]
    cell = np.ravel_multi_index(coordinates, sizes) if mine else np.zeros(parts.n_cells, np.int64)
    ok = np.ones(1, dtype=bool)
    for mask in clean:
        ok = np.logical_and.outer(ok, mask).ravel()
    keep = inside & ok[cell]
    rows = np.flatnonzero(keep)
    data = np.ones(len(rows), dtype=np.int64)
    return sp.csr_matrix((data, (rows, cell[keep])), shape=shape)


JOINT_MAX = 2_000_000
"""Largest joint domain (cells) two tables' rows are compared over."""


def joint_domain(a: TableDef, b: TableDef) -> Schema | None:
    """The domain crossing the attributes of two tables of the same records on different
    schemas (``a``'s attributes, then ``b``'s others; the edits bearing on them), so that their
    cells compare as sets of records. None when they share a schema, count different records,
    name one attribute with different codes, or the product exceeds :data:`JOINT_MAX`."""
    if a.schema is b.schema or a.records != b.records:
        return None
    mine = {x.name: x for x in a.schema.attributes}
    if any(x.name in mine and x != mine[x.name] for x in b.schema.attributes):
        return None
    attributes = (*a.schema.attributes, *(x for x in b.schema.attributes if x.name not in mine))
    names = {x.name for x in attributes}
    edits = tuple(
        dict.fromkeys(e for e in (*a.schema.edits, *b.schema.edits) if {e.first, e.second} <= names)
    )
    domain = Schema(f"{a.schema.name}|{b.schema.name}", attributes, edits)
    return domain if 0 < domain.size <= JOINT_MAX else None


Result = TypeVar("Result")


def by_identity(compute: Callable[..., Result]) -> Callable[..., Result]:
    """``compute`` remembered by the identity of its arguments (tables, or sequences of tables:
    a census's tables are the same objects for as long as the census is), for the last
    :data:`MEMO_SIZE` calls: an analysis asks for the same relations at every level and SPSN
    setting, and for every pair of tables. The result is shared: callers must not change it."""
    memo: dict[tuple[int, ...], tuple[tuple[object, ...], Result]] = {}

    def remembered(*args: TableDef | Sequence[TableDef]) -> Result:
        given = tuple(a for arg in args for a in ((arg,) if isinstance(arg, TableDef) else arg))
        key = (len(args), *map(id, given))
        hit = memo.get(key)
        if hit is not None and all(a is b for a, b in zip(hit[0], given, strict=True)):
            return hit[1]
        result = compute(*args)
        if len(memo) >= MEMO_SIZE:
            memo.pop(next(iter(memo)))
        memo[key] = (given, result)  # the tables are kept alive, so their ids stay theirs
        return result

    return remembered


MEMO_SIZE = 256
"""Calls :func:`by_identity` remembers per function (a census has tens of tables)."""


@by_identity
def own_rows(table: TableDef) -> QueryRows:
    """``QueryRows.of(table)``, remembered: every table is compared with every other, each on
    its own schema."""
    return QueryRows.of(table)


@by_identity
def joint_partitions(whole: TableDef, tables: Sequence[TableDef]) -> dict[str, sp.csr_matrix]:
    """:func:`partitions`, comparing a table on another schema than ``whole``'s over the joint
    domain of both (:func:`joint_domain`): a cell of one hypercube and the finer cells of another
    that cross more attributes."""
    own = own_rows(whole)
    out = {}
    for table in tables:
        domain = joint_domain(whole, table)
        compared = domain is not None or whole.schema is table.schema
        inside = recode_partition(whole, table) if compared else None
        if inside is None:
            w = own if domain is None else QueryRows.of(whole, domain)
            inside = partition(
                w, own_rows(table) if domain is None else QueryRows.of(table, domain)
            )
        if inside is not None and inside.nnz:
            out[table.name] = inside
    return out


# ---------------------------------------------------------------------------------------------
# Relations
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Relations:
    """Linear relations among numbered cells: relation i says ``x[whole[i]] = Σ x[parts of i]``.

    ``parts`` is a 0/1 ``relations × cells`` matrix in canonical CSR form, so the parts of
    relation i are ``parts.indices[parts.indptr[i]:parts.indptr[i + 1]]``, ascending: index
    groups. :attr:`matrix` is the same as one sparse system ``A @ x = 0``.
    """

    whole: IntArray
    parts: sp.csr_matrix

    def __len__(self) -> int:
        return len(self.whole)

    @property
    def n_parts(self) -> IntArray:
        """How many parts each relation sums."""
        return np.diff(self.parts.indptr).astype(np.int64)

    @cached_property
    def matrix(self) -> sp.csr_matrix:
        """``A`` (relations × cells, float): +1 at the whole, −1 at every part, so a vector of
        cell values satisfies the relations iff ``A @ x == 0``."""
        rows = np.repeat(np.arange(len(self), dtype=np.int64), self.n_parts)
        return sp.csr_matrix(
            (
                np.concatenate([np.ones(len(self)), -np.ones(len(rows))]),
                (
                    np.concatenate([np.arange(len(self)), rows]),
                    np.concatenate([self.whole, self.parts.indices]),
                ),
            ),
            shape=self.parts.shape,
        )

    def members(self) -> IntArray:
        """``(relations, c + 1)``: the c parts of every relation, then its whole (all relations
        must have the same number of parts c)."""
        counts = np.unique(self.n_parts)
        if len(counts) > 1:
            raise ValueError(f"relations with {counts.tolist()} parts: members need one count")
        c = int(counts[0]) if len(counts) else 0
        parts = self.parts.indices.astype(np.int64).reshape(len(self), c)
        return np.column_stack([parts, self.whole]).astype(np.int64)

    def select(self, keep: npt.ArrayLike) -> Relations:
        """The relations at ``keep`` (a boolean mask or positions), in that order."""
        keep = np.asarray(keep)
        rows = np.flatnonzero(keep) if keep.dtype == bool else keep.astype(np.int64)
        return Relations(self.whole[rows], _canonical(self.parts[rows]))

    @classmethod
    def concat(cls, parts: Sequence[Relations], n_cells: int) -> Relations:
        """One set of relations: those of ``parts`` one after the other."""
        if not parts:
            return cls(np.zeros(0, dtype=np.int64), sp.csr_matrix((0, n_cells), dtype=np.int64))
        return cls(
            np.concatenate([r.whole for r in parts]).astype(np.int64),
            _canonical(sp.vstack([r.parts for r in parts], format="csr")),
        )

    def residual(self, values: npt.ArrayLike) -> npt.NDArray[Any]:
        """``whole − Σ parts`` of every relation for cell values ``values`` (0 where it holds)."""
        x = np.asarray(values)
        return x[self.whole] - self.parts @ x


def _relations(
    whole: IntArray, part_rows: IntArray, part_cols: IntArray, n_cells: int
) -> Relations:
    parts = sp.csr_matrix(
        (np.ones(len(part_rows), dtype=np.int64), (part_rows, part_cols)),
        shape=(len(whole), n_cells),
    )
    return Relations(np.asarray(whole, dtype=np.int64), _canonical(parts))


def _canonical(matrix: sp.csr_matrix) -> sp.csr_matrix:
    out = sp.csr_matrix(matrix, dtype=np.int64)
    out.sum_duplicates()
    out.sort_indices()
    return out


# ---------------------------------------------------------------------------------------------
# The cells
# ---------------------------------------------------------------------------------------------


def geounit_offsets(geography: Geography) -> dict[str, int]:
    """Where each level's geounits start in a numbering of all geounits of all levels (nation
    first, in the geography's order of levels)."""
    sizes = np.array([geography.n_units(level) for level in geography.levels])
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    return dict(zip(geography.levels, starts.tolist(), strict=True))


@dataclass(frozen=True)
class Block:
    """The cells of one table at one level: ``rows × table.n_cells`` from ``start``."""

    position: int
    """The table's position in :attr:`PublishedCells.tables`."""
    table: TableDef
    level: str
    start: int
    rows: int

    @property
    def size(self) -> int:
        return self.rows * self.table.n_cells

    @property
    def stop(self) -> int:
        return self.start + self.size


@dataclass(frozen=True)
class CellLocation:
    """Where numbered cells are: table position, level (position in the geography's levels),
    geounit row at that level and cell of the table, one entry per cell."""

    table: IntArray
    level: IntArray
    row: IntArray
    cell: IntArray


class PublishedCells:
    """Every cell of some tables at every level they are published, numbered consecutively, with
    its published value and suppressed flag, and the linear relations among the cells.

    Build it from a release (:meth:`from_release`), from published tables (:meth:`from_tables`)
    or from an exact tabulation (:meth:`from_tabulation`: nothing suppressed). The numbering
    (see the module notes) depends only on the tables, their order and the geography, so two
    objects over the same tables and geography — a release and the truth it was made from —
    number their cells alike; :meth:`index` maps cells of another numbering by name.

    The flat per-cell arrays (:attr:`values`, :attr:`suppressed`, :attr:`table`,
    :attr:`geounit`) are built on first use; :meth:`values_at` reads a few cells without them.
    """

    def __init__(
        self,
        geography: Geography,
        tables: Sequence[TableDef],
        counts: Mapping[str, Mapping[str, sp.spmatrix]],
        suppressed: Mapping[str, Mapping[str, sp.spmatrix]] | None = None,
    ) -> None:
        self.geography = geography
        self.tables: tuple[TableDef, ...] = tuple(tables)
        names = [t.name for t in self.tables]
        if len(set(names)) != len(names):
            raise ValueError(
                f"tables listed twice: {sorted(n for n in set(names) if names.count(n) > 1)}"
            )
        self.names: tuple[str, ...] = tuple(names)
        blocks, start = [], 0
        self._counts: list[sp.csr_matrix] = []
        self._suppressed: list[sp.csr_matrix | None] = []
        for position, table in enumerate(self.tables):
            for level in table.levels:
                rows = geography.n_units(level)
                matrix = sp.csr_matrix(counts[table.name][level])
                if matrix.shape != (rows, table.n_cells):
                    raise ValueError(
                        f"table {table.name} at {level}: {matrix.shape} cells, expected "
                        f"{(rows, table.n_cells)} (geounits × cells)"
                    )
                mask = (suppressed or {}).get(table.name, {}).get(level)
                blocks.append(Block(position, table, level, start, rows))
                self._counts.append(matrix)
                self._suppressed.append(None if mask is None else sp.csr_matrix(mask, dtype=bool))
                start += rows * table.n_cells
        self.blocks: tuple[Block, ...] = tuple(blocks)
        self.size = start
        self.offset: dict[tuple[str, str], int] = {(b.table.name, b.level): b.start for b in blocks}
        self._starts = np.array([b.start for b in blocks], dtype=np.int64)
        self._block_of = np.full((len(self.tables), len(geography.levels)), -1, dtype=np.int64)
        for k, b in enumerate(blocks):
            self._block_of[b.position, geography.levels.index(b.level)] = k

    # -----------------------------------------------------------------------------------------
    # Constructors
    # -----------------------------------------------------------------------------------------

    @classmethod
    def from_tables(
        cls,
        tables: Mapping[str, PublishedTable],
        geography: Geography,
        names: Sequence[str] | None = None,
    ) -> PublishedCells:
        """The cells of published tables (all of them, in their order, unless ``names``)."""
        chosen = list(tables) if names is None else list(names)
        return cls(
            geography,
            [tables[n].table for n in chosen],
            {n: {lv: tables[n].matrix(lv) for lv in tables[n].levels} for n in chosen},
            {n: {lv: tables[n].suppressed(lv) for lv in tables[n].levels} for n in chosen},
        )

    @classmethod
    def from_release(
        cls, release: TablesOnAGeography, names: Sequence[str] | None = None
    ) -> PublishedCells:
        """The cells of a release's tables."""
        return cls.from_tables(release.tables, release.geography, names)

    @classmethod
    def from_tabulation(
        cls,
        tables: Mapping[str, TableCounts],
        geography: Geography,
        names: Sequence[str] | None = None,
    ) -> PublishedCells:
        """The cells of an exact tabulation (:func:`sdclab.core.tables.tabulate.tabulate`), none
        suppressed."""
        chosen = list(tables) if names is None else list(names)
        return cls(
            geography,
            [tables[n].table for n in chosen],
            {n: {lv: m for lv, (_, m) in tables[n].counts.items()} for n in chosen},
        )

    # -----------------------------------------------------------------------------------------
    # The numbering
    # -----------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return self.size

    def block(self, name: str, level: str) -> Block:
        """The cells of table ``name`` at ``level``."""
        k = self._block_of[self.names.index(name), self.geography.levels.index(level)]
        if k < 0:
            raise KeyError(f"table {name} is not published at {level!r}")
        return self.blocks[k]

    def index(
        self, table: npt.ArrayLike, level: npt.ArrayLike, row: npt.ArrayLike, cell: npt.ArrayLike
    ) -> IntArray:
        """The numbers of cells (table, level, geounit row, cell), elementwise: tables by name
        or position in :attr:`tables`, levels by name or position in the geography's levels."""
        t = _positions(table, self.names)
        lv = _positions(level, self.geography.levels)
        row, cell = np.asarray(row, dtype=np.int64), np.asarray(cell, dtype=np.int64)
        k = self._block_of[t, lv]
        if (k < 0).any():
            raise KeyError("a cell of a table at a level it is not published at")
        rows = np.array([b.rows for b in self.blocks], dtype=np.int64)[k]
        n_cells = np.array([b.table.n_cells for b in self.blocks], dtype=np.int64)[k]
        if ((row < 0) | (row >= rows) | (cell < 0) | (cell >= n_cells)).any():
            raise IndexError("a geounit row or cell outside its table and level")
        return self._starts[k] + row * n_cells + cell

    def locate(self, index: npt.ArrayLike) -> CellLocation:
        """Where the numbered cells are (the inverse of :meth:`index`)."""
        i = np.asarray(index, dtype=np.int64)
        if ((i < 0) | (i >= self.size)).any():
            raise IndexError(f"cell numbers run from 0 to {self.size - 1}")
        k = np.searchsorted(self._starts, i, side="right") - 1
        n_cells = np.array([b.table.n_cells for b in self.blocks], dtype=np.int64)[k]
        local = i - self._starts[k]
        return CellLocation(
            np.array([b.position for b in self.blocks], dtype=np.int64)[k],
            np.array([self.geography.levels.index(b.level) for b in self.blocks], np.int64)[k],
            local // n_cells,
            local % n_cells,
        )

    def _per_block(self, make: Any) -> IntArray:
        return (
            np.concatenate([make(b) for b in self.blocks]) if self.blocks else np.zeros(0, np.int64)
        )

    @cached_property
    def table(self) -> IntArray:
        """Position in :attr:`tables` of every cell's table."""
        return self._per_block(lambda b: np.full(b.size, b.position, dtype=np.int64))

    @cached_property
    def geounit(self) -> IntArray:
        """Every cell's geounit in the numbering of all geounits (:func:`geounit_offsets`)."""
        starts = geounit_offsets(self.geography)
        return self._per_block(
            lambda b: np.repeat(
                starts[b.level] + np.arange(b.rows, dtype=np.int64), b.table.n_cells
            )
        )

    # -----------------------------------------------------------------------------------------
    # Values
    # -----------------------------------------------------------------------------------------

    @cached_property
    def values(self) -> npt.NDArray[Any]:
        """Every cell's published value (0 where suppressed; a tabulation's exact counts)."""
        if not self.blocks:
            return np.zeros(0, dtype=np.int64)
        return np.concatenate([m.toarray().ravel() for m in self._counts])

    @cached_property
    def suppressed(self) -> BoolArray:
        """Whether every cell is suppressed."""
        return np.concatenate(
            [
                np.zeros(b.size, dtype=bool) if m is None else m.toarray().ravel()
                for b, m in zip(self.blocks, self._suppressed, strict=True)
            ]
            or [np.zeros(0, dtype=bool)]
        )

    def values_at(self, index: npt.ArrayLike) -> npt.NDArray[Any]:
        """The published values of the numbered cells (any shape), read from the sparse tables."""
        i = np.asarray(index, dtype=np.int64)
        flat = i.ravel()
        dtype = np.result_type(*(m.dtype for m in self._counts)) if self._counts else np.int64
        out = np.zeros(len(flat), dtype=dtype)
        k = np.searchsorted(self._starts, flat, side="right") - 1
        for b in np.unique(k):
            mine = k == b
            local = flat[mine] - self._starts[b]
            n = self.blocks[b].table.n_cells
            out[mine] = np.asarray(self._counts[b][local // n, local % n]).ravel()
        return out.reshape(i.shape)

    # -----------------------------------------------------------------------------------------
    # Relations
    # -----------------------------------------------------------------------------------------

    def geography_relations(self, children: int | None = None) -> Relations:
        """parent = Σ children: for every table, every parent geounit and every cell, the cell
        at the parent equals the sum of the same cell over the parent's children at the table's
        next published level. Ordered by table, level, parent geounit, cell; the parts of each
        are its children in geounit order. With ``children``, only parents with exactly that many
        children (the additive tuples of the cell key analysis)."""
        out = []
        for table in self.tables:
            n = table.n_cells
            for parent, child in zip(table.levels[:-1], table.levels[1:], strict=True):
                up = self.geography.parents(parent, child)
                n_parent = self.geography.n_units(parent)
                if children is None:
                    chosen = np.arange(n_parent, dtype=np.int64)
                else:
                    count = np.bincount(up, minlength=n_parent)
                    chosen = np.flatnonzero(count == children).astype(np.int64)
                local = np.full(n_parent, -1, dtype=np.int64)
                local[chosen] = np.arange(len(chosen))
                kids = np.flatnonzero(local[up] >= 0)
                top = self.offset[(table.name, parent)]
                below = self.offset[(table.name, child)]
                cells = np.arange(n, dtype=np.int64)
                out.append(
                    _relations(
                        top + (chosen[:, None] * n + cells).ravel(),
                        (local[up[kids]][:, None] * n + cells).ravel(),
                        below + (kids[:, None] * n + cells).ravel(),
                        self.size,
                    )
                )
        return Relations.concat(out, self.size)

    def partition_relations(self, wholes: Literal["totals", "all"] = "all") -> Relations:
        """whole = Σ parts within every geounit: for every pair of tables (the parts' table in
        the outer loop, then the whole's) and every level both are published at, each cell of
        the whole's table that the other partitions (:func:`partition`) equals the sum of its
        parts; with ``wholes="totals"`` only the cells that count every record (the totals, so
        the margins of every table that partitions all records). Ordered by table pair, level,
        geounit, whole cell."""
        out = []
        rows = [QueryRows.of(t) for t in self.tables]
        for p in rows:
            for w in rows:
                if w is p or (wholes == "totals" and not w.total.any()):
                    continue
                inside = partition(w, p)
                if inside is None:
                    continue
                whole_cells = np.flatnonzero(w.total) if wholes == "totals" else None
                inside = inside.tocsc() if whole_cells is None else inside.tocsc()[:, whole_cells]
                if whole_cells is None:
                    whole_cells = np.arange(w.table.n_cells)
                used = np.flatnonzero(np.diff(inside.indptr) > 0)
                if not len(used):
                    continue
                whole_cells = whole_cells[used]
                inside = inside[:, used].tocsc()
                inside.sort_indices()
                part_cells = inside.indices.astype(np.int64)
                relation_of_part = np.repeat(np.arange(len(used)), np.diff(inside.indptr))
                for level in p.table.levels:
                    if (w.table.name, level) not in self.offset:
                        continue
                    g = np.arange(self.geography.n_units(level), dtype=np.int64)[:, None]
                    out.append(
                        _relations(
                            self.offset[(w.table.name, level)]
                            + (g * w.table.n_cells + whole_cells).ravel(),
                            (g * len(used) + relation_of_part).ravel(),
                            self.offset[(p.table.name, level)]
                            + (g * p.table.n_cells + part_cells).ravel(),
                            self.size,
                        )
                    )
        return Relations.concat(out, self.size)

    def relations(
        self, geography: bool = True, partitions: Literal["totals", "all"] | None = "all"
    ) -> Relations:
        """The geography relations (if ``geography``), then the partition relations (``None``:
        none; ``"totals"``: the totals only; ``"all"``)."""
        parts = [self.geography_relations()] if geography else []
        if partitions is not None:
            parts.append(self.partition_relations(partitions))
        return Relations.concat(parts, self.size)


def _positions(values: npt.ArrayLike, names: Sequence[str]) -> IntArray:
    """Positions of names (or positions already) in ``names``."""
    a = np.asarray(values)
    if a.dtype.kind in "iu":
        return a.astype(np.int64)
    lookup = {n: i for i, n in enumerate(names)}
    unique, inverse = np.unique(a.ravel(), return_inverse=True)
    try:
        mapped = np.array([lookup[str(u)] for u in unique], dtype=np.int64)
    except KeyError as exc:
        raise KeyError(f"unknown table or level {exc.args[0]!r}") from None
    return mapped[inverse].reshape(a.shape)
