"""What the cell key risk analyses read of a release's census (:mod:`.cellkey_risk`).

The US 2010 census keeps the paper's analysis: its 3-tuples, its attack targets P1, P8, P12 and
P14, and P12 asked again. Any other census gives them from its declaration: the tuples of every
size its main hierarchy has, every person table on that hierarchy, its finest tables. Cells of
tables declared on different schemas (hypercubes crossing different attributes) compare as sets
of records by fingerprints (:func:`contributor_ids`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from sdclab.core.tables.definition import TableDef, cell_products
from sdclab.release import Release

IntArray = npt.NDArray[np.int64]
ATTACK_TARGETS = ("P1", "P8", "P12", "P14")
"""The US tables whose cells the averaging attack estimates (representations come from every
table)."""


@dataclass(frozen=True)
class RiskScope:
    """The tables and tuples the analyses read of a release, from its census."""

    us: bool
    """The US 2010 census: its 3-tuples and its attack targets, as the paper's analysis."""
    tables: tuple[TableDef, ...]
    """Person tables on the main geography: every representation comes from them."""
    tuple_tables: tuple[str, ...]
    """Tables whose geography relations give the additive tuples (all on the main geography)."""
    children: tuple[int, ...]
    """The numbers of children of the tuples' parents (2: the 3-tuples)."""
    targets: tuple[str, ...]
    """Tables whose cells the averaging attack estimates."""
    repeated: tuple[str, ...]
    """Tables the repeated-query attack asks for."""
    left_out: dict[str, str]
    """Tables the analyses do not read, with the reason."""

    def summary(self) -> dict[str, Any]:
        """What the analyses read (written beside a declared census's figures)."""
        return {
            "tuple_children": list(self.children),
            "tuple_tables": list(self.tuple_tables),
            "representation_tables": [t.name for t in self.tables],
            "averaging_targets": list(self.targets),
            "repeated_query_tables": list(self.repeated),
            "left_out": self.left_out,
            "design_tuples": "the 3-tuples (parents of two children) only: the grid's p1 is "
            "that of 3-tuples",
        }


def child_counts(geography: Any, tables: list[TableDef]) -> tuple[int, ...]:
    """The numbers of children (two or more) parent geounits have at the next level a table is
    published at, over ``tables``: the sizes of the geography's additive tuples."""
    pairs = {(a, b) for t in tables for a, b in zip(t.levels[:-1], t.levels[1:], strict=True)}
    counts: set[int] = set()
    for parent, child in pairs:
        n = np.bincount(geography.parents(parent, child), minlength=geography.n_units(parent))
        counts |= set(np.unique(n[n >= 2]).tolist())
    return tuple(sorted(counts))


def risk_scope(release: Release) -> RiskScope:
    """What the analyses read of ``release``: the US census's tables as the paper's analysis
    (3-tuples; P1, P8, P12, P14; P12 asked again), any other census's from its declaration
    (tuples of every size its main hierarchy has; every person table; its finest tables)."""
    from sdclab.censuses import is_us2010

    defs = {n: t.table for n, t in release.tables.items()}
    if is_us2010(release.census):
        from sdclab.censuses.us2010 import schema

        people = tuple(t for t in defs.values() if t.schema is schema.PERSON)
        return RiskScope(True, people, tuple(defs), (2,), ATTACK_TARGETS, ("P12",), {})
    main = release.geography.levels
    on_main = [t for t in defs.values() if set(t.levels) <= set(main)]
    left_out = {
        n: f"published on another geography than the main hierarchy ({', '.join(main)})"
        for n, t in defs.items()
        if t not in on_main
    }
    people = tuple(t for t in on_main if t.records == "persons")
    finest = [t.name for t in people if t.levels[-1] == main[-1]]
    repeated = tuple(n for n in finest if defs[n].crossed) or tuple(finest)
    return RiskScope(
        False,
        people,
        tuple(t.name for t in on_main),
        child_counts(release.geography, on_main),
        tuple(t.name for t in people),
        repeated,
        left_out,
    )


FINGERPRINT_PRIMES = (2_147_483_629, 2_147_483_587)
"""Moduli of the two fingerprints of a cell's contributor set (collisions ~ cells² / 2⁶²)."""


def _fingerprint(
    table: TableDef, weights: dict[str, IntArray], prime: int, absent: int
) -> IntArray:
    """Σ over the cell's domain cells of Π_a w_a[code] (mod p): for a product set this is the
    product of each attribute's weight sums, so equal sets of records agree whatever schema
    (attributes) the table is declared on. ``absent``: the product over the other attributes.
    Each part's cells are product sets, so without edits (cells no record can occupy) each
    cell's sum is the product of its categories' weight sums, without the table's query."""
    if not table.schema.edits:
        return (
            np.concatenate([cell_products(table.schema, p, weights, prime) for p in table.parts])
            * absent
            % prime
        )
    if table.schema.size >= 1 << 31:
        raise ValueError(f"table {table.name}: its domain is too large to fingerprint its cells")
    w = np.ones(1, np.int64)
    for a in table.schema.attributes:
        w = (w[:, None] * weights[a.name][None, :]).ravel() % prime
    w = np.where(table.schema.possible_cells(), w, 0)
    return (np.asarray(table.query @ w).ravel() % prime) * absent % prime


def contributor_ids(tables: Sequence[TableDef]) -> dict[str, IntArray]:
    """One id per distinct set of contributors across tables declared on different schemas
    (hypercubes crossing different attributes): two random fingerprints per cell
    (:func:`_fingerprint`) over the union of their attributes."""
    attributes = {a.name: a.size for t in tables for a in t.schema.attributes}
    rng = np.random.default_rng(0)
    prints = []
    for prime in FINGERPRINT_PRIMES:
        weights = {n: rng.integers(1, prime, size) for n, size in sorted(attributes.items())}
        sums = {n: int(w.sum() % prime) for n, w in weights.items()}
        prints.append(
            np.concatenate(
                [_fingerprint(t, weights, prime, _absent(t, sums, prime)) for t in tables]
            )
        )
    _, ids = np.unique(np.column_stack(prints), axis=0, return_inverse=True)
    bounds = np.cumsum([0] + [t.n_cells for t in tables])
    return {
        t.name: ids.ravel()[bounds[i] : bounds[i + 1]].astype(np.int64)
        for i, t in enumerate(tables)
    }


def _absent(table: TableDef, sums: dict[str, int], prime: int) -> int:
    """Π of the weight sums of the attributes the table's schema does not hold (mod p)."""
    out = 1
    for name, total in sums.items():
        if name not in table.schema.names:
            out = out * total % prime
    return out
