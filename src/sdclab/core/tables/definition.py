"""A table declared as data and compiled to a linear query over its census's domain.

A table is one or more *parts*. A part is the cross product of *dimensions* (each a 0/1 membership
matrix from the dimension's categories to an attribute's codes) restricted to a *universe* (a 0/1
mask per attribute). Because the domain is a product of attributes, a part's query matrix is the
Kronecker product of one small matrix per attribute — the same construction TopDown and HDMM use
for marginal workloads. Tabulation is then ``histogram @ query.T``; no group-by code is written
per table.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import product

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from sdclab.core.domain import Attribute, Schema

Mask = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class Dimension:
    """Categories of a table along one attribute: ``membership[k, j]`` = 1 if code j counts in k.

    A record may count in several categories (race tallies), in one (a recode), or in none (a code
    outside the table's cells).
    """

    attribute: str
    labels: tuple[str, ...]
    membership: npt.NDArray[np.int8]

    def __post_init__(self) -> None:
        if self.membership.shape[0] != len(self.labels):
            raise ValueError(f"dimension on {self.attribute}: labels and membership rows differ")


@dataclass(frozen=True)
class Part:
    """A block of cells: the cross product of ``dimensions`` within ``universe``."""

    dimensions: tuple[Dimension, ...] = ()
    universe: Mapping[str, Mask] = field(default_factory=dict)
    label: str = ""


def cell_products(
    schema: Schema, part: Part, values: Mapping[str, npt.NDArray[np.int64]], modulus: int = 0
) -> npt.NDArray[np.int64]:
    """Per cell of ``part`` (a product set), the product over ``schema``'s attributes of the sum
    of ``values[a]`` (one per code) over the codes the cell holds: its category's within the
    part's universe, or the universe's (all codes) for an attribute the part does not cross;
    mod ``modulus`` after each step when given. With values of one per code, each cell's number
    of domain cells; with random weights, a fingerprint of its contributors."""
    crossed = {d.attribute for d in part.dimensions}
    within = {a.name: values[a.name] * part.universe.get(a.name, True) for a in schema.attributes}
    rest = 1  # (the attributes the part does not cross, in Python's unbounded integers)
    for name, held in within.items():
        if name not in crossed:
            rest = rest * int(held.sum()) % modulus if modulus else rest * int(held.sum())
    cells = np.array([rest], dtype=np.int64)
    for d in part.dimensions:
        sums = d.membership.astype(np.int64) @ within[d.attribute]
        cells = np.multiply.outer(cells, sums % modulus if modulus else sums).ravel()
        if modulus:
            cells %= modulus
    return cells


@dataclass(frozen=True)
class PartCoding:
    """A part's cells read off a record's codes: the record's cell in the part is the mixed-radix
    number of its categories along ``steps`` (attribute, category of each code, number of
    categories; a universe is a step of one category), the first step slowest, as the part's
    cells are ordered. A code in no category has category ``-width``, which makes the number
    negative whatever the other steps give: the record counts nowhere in the part."""

    offset: int
    """The part's first cell in the table."""
    width: int
    """The part's number of cells."""
    steps: tuple[tuple[str, npt.NDArray[np.signedinteger], int], ...]

    @cached_property
    def digits(self) -> tuple[str, ...]:
        """Each step as a string (its attribute, number of categories and categories): parts
        whose digits start alike number their records alike that far."""
        return tuple(
            f"{name}:{size}:{category.tobytes().hex()}" for name, category, size in self.steps
        )

    @property
    def reach(self) -> int:
        """The largest magnitude a record's number takes in the part: below the width, or, for a
        code in no category at every step, −width · Σᵢ Πⱼ₍ⱼ﹥ᵢ₎ sⱼ (its integer type must hold
        it)."""
        sizes = [size for *_, size in self.steps]
        return self.width * (1 + sum(math.prod(sizes[i + 1 :]) for i in range(len(sizes))))

    @property
    def drops(self) -> bool:
        """Whether some code counts nowhere in the part."""
        return any(bool((category < 0).any()) for _, category, _ in self.steps)


def code_categories(
    low: int, membership: npt.NDArray[np.integer], outside: int
) -> npt.NDArray[np.signedinteger]:
    """The category of each code of an attribute whose codes start at ``low`` (0/1
    ``membership`` categories × codes, a code in at most one category), indexed by the code
    itself (the entries below ``low`` unused, 0); ``outside`` for a code in none. In the
    smallest signed type that holds them: a record's category is read for every table."""
    if not len(membership):  # (no category: the part has no cells and is never counted)
        return np.zeros(low + membership.shape[1], dtype=np.int8)
    category = np.where(membership.any(axis=0), np.argmax(membership, axis=0), outside)
    lowest = int(category.min(initial=0))  # (``outside`` only if some code is in no category)
    small = np.promote_types(
        np.min_scalar_type(-max(-lowest, 1)), np.min_scalar_type(len(membership))
    )
    return np.concatenate([np.zeros(low, np.int64), category]).astype(small)


@dataclass(frozen=True)
class TableDef:
    """A published table: universe, cells, publication levels and its query matrix."""

    name: str
    title: str
    universe: str
    schema: Schema
    parts: tuple[Part, ...]
    top: str
    """The highest level the table is published at."""
    bottom: str
    """The lowest level the table is published at."""
    hierarchy: tuple[str, ...]
    """The levels of the geography the table is published on, from the top down."""
    records: str = "persons"
    """What the table counts: ``"persons"`` or ``"households"`` (households or housing units)."""

    def __post_init__(self) -> None:
        for end in (self.top, self.bottom):
            if end not in self.hierarchy:
                levels = ", ".join(self.hierarchy)
                raise ValueError(f"table {self.name}: unknown level {end!r}; levels: {levels}")
        if self.hierarchy.index(self.top) > self.hierarchy.index(self.bottom):
            raise ValueError(f"table {self.name}: level {self.top!r} is below {self.bottom!r}")

    @property
    def levels(self) -> tuple[str, ...]:
        """The levels the table is published at, from ``top`` down to ``bottom``."""
        i, j = self.hierarchy.index(self.top), self.hierarchy.index(self.bottom)
        return self.hierarchy[i : j + 1]

    @cached_property
    def cell_labels(self) -> list[str]:
        """One label per cell: the part's label and each dimension's category, first slowest."""
        labels: list[str] = []
        for part in self.parts:
            for names in product(*(d.labels for d in part.dimensions)):
                labels.append(" / ".join(filter(None, (part.label, *names))) or "total")
        return labels

    @property
    def n_cells(self) -> int:
        return len(self.cell_labels)

    @cached_property
    def crossed(self) -> tuple[str, ...]:
        """The attributes the table's cells depend on (crossed or restricted), in schema order."""
        used = {d.attribute for p in self.parts for d in p.dimensions}
        used |= {name for p in self.parts for name in p.universe}
        return tuple(name for name in self.schema.names if name in used)

    @cached_property
    def marginal(self) -> Schema:
        """The domain of the attributes the table crosses: all it needs to be counted."""
        return self.schema.restricted(
            f"{self.schema.name}:{'×'.join(self.crossed) or 'total'}", self.crossed
        )

    @cached_property
    def coding(self) -> tuple[PartCoding, ...] | None:
        """How a record's codes give its cell in each part (:class:`PartCoding`), when no code
        counts in two categories of a dimension: the table then counts its records straight into
        its cells, without the marginal query. None for other tables (a race tally's, or one over
        an attribute whose codes start below 0)."""
        if any(a.low < 0 for a in self.schema.attributes):
            return None
        if any((d.membership.sum(axis=0) > 1).any() for p in self.parts for d in p.dimensions):
            return None
        low = {a.name: a.low for a in self.schema.attributes}
        codings, offset = [], 0
        for part in self.parts:
            width = math.prod(len(d.labels) for d in part.dimensions)
            steps = [
                (
                    d.attribute,
                    code_categories(low[d.attribute], d.membership, -width),
                    len(d.labels),
                )
                for d in part.dimensions
            ]
            steps += [
                (name, code_categories(low[name], mask[None, :].astype(np.int8), -width), 1)
                for name, mask in part.universe.items()
            ]
            codings.append(PartCoding(offset, width, tuple(steps)))
            offset += width
        return tuple(codings)

    @cached_property
    def most_cells_per_record(self) -> int:
        """The most cells one record counts in (a record's weight in the table's Δ₁): for a
        table of one coded part, one if any record counts at all, without its query."""
        if self.coding is not None and len(self.parts) == 1:
            ones = {a.name: np.ones(a.size, np.int64) for a in self.schema.attributes}
            return int((cell_products(self.schema, self.parts[0], ones) > 0).any())
        return int(np.asarray(self.marginal_query.sum(axis=0)).max(initial=0))

    @cached_property
    def marginal_query(self) -> sp.csr_matrix:
        """Sparse 0/1 matrix cells × cells of :attr:`marginal` (int64 entries)."""
        blocks = [part_query(self.marginal, part) for part in self.parts]
        return sp.vstack(blocks, format="csr").astype(np.int64)

    def query_on(self, domain: Schema) -> sp.csr_matrix:
        """The table's query over another domain that holds every attribute it crosses."""
        if domain == self.schema:
            return self.query
        return sp.vstack([part_query(domain, p) for p in self.parts], format="csr").astype(np.int64)

    @cached_property
    def query(self) -> sp.csr_matrix:
        """Sparse 0/1 matrix cells × domain cells of :attr:`schema` (int64 entries)."""
        blocks = [part_query(self.schema, part) for part in self.parts]
        return sp.vstack(blocks, format="csr").astype(np.int64)


def part_query(domain: Schema, part: Part) -> sp.csr_matrix:
    """Kronecker product over the schema's attributes, rows put back in declared dimension order."""
    dims = {d.attribute: d for d in part.dimensions}
    unknown = set(dims) | set(part.universe)
    unknown -= set(domain.names)
    if unknown:
        raise ValueError(f"schema {domain.name!r} has no attribute(s) {sorted(unknown)}")
    factors = []
    for attr in domain.attributes:
        mask = part.universe.get(attr.name, np.ones(attr.size, dtype=bool))
        base = dims[attr.name].membership if attr.name in dims else np.ones((1, attr.size), np.int8)
        factors.append(sp.csr_matrix(base * mask[None, :].astype(np.int8)))
    if not factors:  # a domain of no attribute has one cell: the total
        return sp.csr_matrix(np.ones((1, 1), dtype=np.int8))
    query = kronecker(factors)
    if not part.dimensions:
        return query
    # Kronecker rows run over the dimensions in schema order; the table lists them as declared.
    declared = [d.attribute for d in part.dimensions]
    sizes = {d.attribute: len(d.labels) for d in part.dimensions}
    grid = np.indices([sizes[n] for n in declared]).reshape(len(declared), -1)
    position = dict(zip(declared, grid, strict=True))
    in_schema_order = [n for n in domain.names if n in sizes]
    rows = np.ravel_multi_index(
        [position[n] for n in in_schema_order], [sizes[n] for n in in_schema_order]
    )
    return query[rows]


def kronecker(factors: Sequence[sp.csr_matrix]) -> sp.csr_matrix:
    """``reduce(sp.kron, factors)`` in canonical CSR, from the factors' entries at once: each
    entry of the product is one entry of every factor (row and column in mixed radix, the
    first factor slowest; the value their product), where scipy builds every partial product
    as a matrix."""
    dtype = np.result_type(*(f.dtype for f in factors))
    rows, cols, data = np.zeros(1, np.int64), np.zeros(1, np.int64), np.ones(1, dtype)
    for factor in factors:
        entries = factor.tocoo()
        rows = np.add.outer(rows * factor.shape[0], entries.row).ravel()
        cols = np.add.outer(cols * factor.shape[1], entries.col).ravel()
        data = np.multiply.outer(data, entries.data).ravel()
    n_rows = int(np.prod([f.shape[0] for f in factors]))
    n_cols = int(np.prod([f.shape[1] for f in factors]))
    return sp.csr_matrix((data, (rows, cols)), shape=(n_rows, n_cols))


def codes_mask(attr: Attribute, keep: Callable[[npt.NDArray[np.int64]], Mask]) -> Mask:
    """Boolean mask over an attribute's codes."""
    return np.asarray(keep(attr.codes), dtype=bool)


def categories(attr: Attribute, codes: Sequence[int], labels: Sequence[str]) -> Dimension:
    """A dimension with one category per listed code."""
    m = np.zeros((len(codes), attr.size), dtype=np.int8)
    m[np.arange(len(codes)), attr.position(codes)] = 1
    return Dimension(attr.name, tuple(labels), m)


def all_codes(attr: Attribute) -> Dimension:
    """One category per code of the attribute, labelled as in the schema."""
    return categories(attr, attr.codes.tolist(), attr.labels)
