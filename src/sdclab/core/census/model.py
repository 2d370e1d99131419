"""A census as a value: its records, attributes, geographies, tables and attack settings.

Values of this module compare by identity (they hold arrays); two censuses are the same census
when their digests are equal.

A census says what its microdata hold and what is published from them, so that every stage can
take it from its input instead of assuming one census. Attributes are code lists with
*breakdowns* (recodes of the detailed codes, e.g. an age in single years, five-year bands and
three broad groups); geographies are hierarchies of levels given as data (any number of levels,
text geocodes, a parent for each unit); tables are linear queries over the marginal domain of the
attributes they cross (:class:`sdclab.core.tables.definition.TableDef`), never over the product of
every attribute, which for a census of a dozen topics has of the order of 10¹⁰ cells.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from sdclab.core.domain import Attribute as DomainAttribute
from sdclab.core.domain import Schema
from sdclab.core.tables.definition import Dimension, TableDef

RECORD_KINDS = ("persons", "households")
"""What a census's records can be: persons, and the households (or housing units) they live in."""

DETAILED = "detailed"
"""The name of every attribute's own breakdown: one category per code."""


@dataclass(frozen=True, eq=False)
class Breakdown:
    """Categories of an attribute: ``membership[k, j]`` is 1 if detailed code j counts in k.

    A code may count in one category (a recode), in several (a tally, such as "alone or in
    combination") or in none (a code outside the breakdown's universe).
    """

    name: str
    codes: tuple[str, ...]
    labels: tuple[str, ...]
    membership: npt.NDArray[np.int8]

    def __post_init__(self) -> None:
        if self.membership.shape[0] != len(self.codes) or len(self.labels) != len(self.codes):
            raise ValueError(f"breakdown {self.name!r}: codes, labels and membership rows differ")

    @property
    def size(self) -> int:
        return len(self.codes)

    @cached_property
    def is_partition(self) -> bool:
        """Whether every detailed code counts in exactly one category (a plain recode)."""
        return bool((self.membership.sum(axis=0) == 1).all())


@dataclass(frozen=True, eq=False)
class Attribute:
    """A categorical attribute of one kind of record, with its code list and breakdowns."""

    name: str
    records: str
    codes: tuple[str, ...]
    labels: tuple[str, ...]
    breakdowns: Mapping[str, Breakdown] = field(default_factory=dict)
    """Recodes by name; :data:`DETAILED` (one category per code) is always there."""

    def __post_init__(self) -> None:
        if self.records not in RECORD_KINDS:
            raise ValueError(f"attribute {self.name!r}: records must be one of {RECORD_KINDS}")
        if len(set(self.codes)) != len(self.codes) or len(self.labels) != len(self.codes):
            raise ValueError(f"attribute {self.name!r}: codes must be distinct, one label each")

    @property
    def size(self) -> int:
        return len(self.codes)

    @cached_property
    def position(self) -> dict[str, int]:
        """Position of each code in the code list."""
        return {code: i for i, code in enumerate(self.codes)}

    def breakdown(self, name: str = DETAILED) -> Breakdown:
        """The breakdown ``name`` (the detailed one by default)."""
        if name == DETAILED:
            eye = np.eye(self.size, dtype=np.int8)
            return self.breakdowns.get(name, Breakdown(name, self.codes, self.labels, eye))
        if name not in self.breakdowns:
            known = ", ".join([DETAILED, *self.breakdowns])
            raise KeyError(f"attribute {self.name!r} has no breakdown {name!r}; known: {known}")
        return self.breakdowns[name]

    def domain_attribute(self) -> DomainAttribute:
        """The attribute as a histogram axis: positions 0 … size − 1, labelled."""
        return DomainAttribute(self.name, 0, self.size - 1, self.labels)

    def dimension(self, breakdown: str = DETAILED) -> Dimension:
        """A table's cells along this attribute, one per category of ``breakdown``."""
        b = self.breakdown(breakdown)
        return Dimension(self.name, b.labels, b.membership)


@dataclass(frozen=True, eq=False)
class Hierarchy:
    """A geography: levels from the top down, each unit with its parent one level up.

    ``units[level]`` are the level's geocodes (text); ``parents[level][i]`` is the position, in
    the level above, of the parent of unit i (the top level has no parents). A geocode need not
    contain its parent's code. ``units`` may be empty: the units are then those the microdata
    name, and their parents are read from the microdata's columns.
    """

    name: str
    levels: tuple[str, ...]
    units: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    parents: Mapping[str, npt.NDArray[np.int64]] = field(default_factory=dict)
    labels: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.levels or len(set(self.levels)) != len(self.levels):
            raise ValueError(f"geography {self.name!r}: levels must be distinct and not empty")

    @property
    def bottom(self) -> str:
        return self.levels[-1]

    def levels_from(self, top: str, bottom: str) -> tuple[str, ...]:
        """The levels from ``top`` down to ``bottom`` inclusive."""
        i, j = self.level_index(top), self.level_index(bottom)
        if i > j:
            raise ValueError(f"geography {self.name!r}: {top!r} is below {bottom!r}")
        return self.levels[i : j + 1]

    def level_index(self, level: str) -> int:
        if level not in self.levels:
            known = ", ".join(self.levels)
            raise KeyError(f"geography {self.name!r} has no level {level!r}; levels: {known}")
        return self.levels.index(level)


@dataclass(frozen=True)
class Reconstruction:
    """What a reconstruction attack solves for: records of these attributes, in geounits of
    ``level`` of the census's first geography, one program per geounit of ``within`` (a coarser
    level; default: the one above ``level``). It reads the person tables over these attributes
    published down to ``level`` or down to ``within``."""

    attributes: tuple[str, ...]
    level: str
    within: str = ""
    resolved: Mapping[str, str] = field(default_factory=dict)
    """Attributes an attacker needs only to a breakdown (the US attack links on the 38 age bins):
    a record's attribute counts as known when the tables pin it to one category of it."""
    domain: Schema | None = None
    """The histogram domain, when a census fixes its codes (default: the attributes' positions)."""


@dataclass(frozen=True)
class AttackTarget:
    """A further reconstruction attack a census declares on one of its geographies (the 1 km
    grid beside the administrative units): its own programs and quasi-identifiers, from the
    tables published on that geography alone."""

    geography: str
    reconstruction: Reconstruction
    quasi_identifiers: tuple[str, ...]


@dataclass(frozen=True)
class HouseholdChange:
    """What adding one person can do to the attributes of the household it joins (removing one
    undoes it): a household table whose cells depend on persons (occupancy, household size) moves
    with persons, and its sensitivity to a person comes from such changes."""

    label: str
    """In words, e.g. "a person entering a vacant unit"."""
    before: Mapping[str, int]
    after: Mapping[str, int]
    """The household's attribute codes before and after (attributes not named are unchanged)."""


@dataclass(frozen=True)
class CellsMoved:
    """The household cells one person added or removed moves, by table, in one way it can
    happen (:class:`HouseholdChange`)."""

    label: str
    cells: Mapping[str, int]


ANY_CHANGE = (
    "a person changes their household's record in any way (the census declares no "
    "household_changes)"
)


def cells_moved(tables: Sequence[TableDef], changes: Sequence[HouseholdChange]) -> list[CellsMoved]:
    """For each distinct way a person moves household cells, how many of each household table:
    Σ |q(after) − q(before)| over the table's query columns of the two household cells. A census
    that declares no changes may have its household records changed in any way by one person:
    at most twice the most cells a household counts in, per table."""
    if not changes:
        worst = {t.name: 2 * t.most_cells_per_record for t in tables if t.records == "households"}
        return [CellsMoved(ANY_CHANGE, worst)] if worst else []
    out: list[CellsMoved] = []
    for change in changes:
        cells = {}
        for table in (t for t in tables if t.records == "households"):
            if not (set(change.before) | set(change.after)) & set(table.crossed):
                continue
            domain = table.marginal
            before = {n: change.before.get(n, change.after.get(n)) for n in domain.names}
            after = {n: change.after.get(n, change.before.get(n)) for n in domain.names}
            if any(v is None for v in (*before.values(), *after.values())):
                raise ValueError(f"{change.label}: table {table.name} needs {domain.names}")
            columns = domain.cell_index({n: np.array([before[n], after[n]]) for n in domain.names})
            query = table.marginal_query.tocsc()
            moved = int(abs(query[:, [columns[1]]] - query[:, [columns[0]]]).sum())
            if moved:
                cells[table.name] = moved
        if cells and all(c.cells != cells for c in out):
            out.append(CellsMoved(change.label, cells))
    return out


@dataclass(frozen=True, eq=False)
class Census:
    """Everything sdclab needs to know of one census (see the module docstring)."""

    name: str
    title: str
    attributes: Mapping[str, Attribute]
    geographies: Mapping[str, Hierarchy]
    tables: Mapping[str, TableDef]
    quasi_identifiers: tuple[str, ...]
    """Attributes an attacker links on (with the geounit of the reconstruction's level)."""
    reconstruction: Reconstruction
    household_key: str | None = None
    """Column of the persons' file that names each person's household, if the census has one."""
    table_geography: Mapping[str, str] = field(default_factory=dict)
    """The geography each table is published on (the first geography when a table is absent)."""
    description: str = ""
    household_changes: tuple[HouseholdChange, ...] = ()
    """What adding one person can do to its household's attributes; empty when no household
    attribute depends on the household's persons."""
    targets: Mapping[str, AttackTarget] = field(default_factory=dict)
    """Further reconstruction attacks by name, each on another geography's tables."""

    @cached_property
    def digest(self) -> str:
        """SHA-256 of the census's canonical document (:func:`to_document`)."""
        return census_digest(self)

    def attribute(self, name: str) -> Attribute:
        if name not in self.attributes:
            known = ", ".join(self.attributes)
            raise KeyError(f"census {self.name!r} has no attribute {name!r}; known: {known}")
        return self.attributes[name]

    def table(self, name: str) -> TableDef:
        if name not in self.tables:
            known = ", ".join(self.tables)
            raise KeyError(f"census {self.name!r} has no table {name!r}; known: {known}")
        return self.tables[name]

    def select(self, names: Sequence[str] | None = None) -> list[TableDef]:
        """Tables by name (all of them when ``names`` is None); an unknown name is an error."""
        if names is None:
            return list(self.tables.values())
        unknown = [n for n in names if n not in self.tables]
        if unknown:
            known = ", ".join(self.tables)
            raise KeyError(f"unknown table(s) {', '.join(unknown)}; known tables: {known}")
        return [self.tables[n] for n in dict.fromkeys(names)]

    @property
    def geography(self) -> Hierarchy:
        """The first (main) geography: the one the reconstruction and TopDown work on."""
        return next(iter(self.geographies.values()))

    def aimed_at(self, target: str) -> Census:
        """The census as the attack ``target`` sees it: the target's geography alone, the tables
        published on it, and the target's reconstruction and quasi-identifiers (named
        ``<census>:<target>``, so that its reconstructions are not taken for the main one's)."""
        if target not in self.targets:
            known = ", ".join(self.targets) or "none"
            raise KeyError(
                f"census {self.name!r} declares no attack target {target!r}; targets: {known}"
            )
        aim = self.targets[target]
        geography = self.geographies[aim.geography]
        return replace(
            self,
            name=f"{self.name}:{target}",
            title=f"{self.title}, attacked on its {aim.geography} geography",
            geographies={geography.name: geography},
            tables=self.tables_on(geography),
            quasi_identifiers=aim.quasi_identifiers,
            reconstruction=aim.reconstruction,
            table_geography={},
            targets={},
        )

    def tables_on(self, geography: Hierarchy) -> dict[str, TableDef]:
        """The tables published on ``geography``, in census order."""
        return {n: t for n, t in self.tables.items() if self.geography_of(n) is geography}

    @property
    def all_levels(self) -> tuple[str, ...]:
        """The levels of every geography, the main one's first: each counts a person once."""
        return tuple(level for h in self.geographies.values() for level in h.levels)

    def geography_of(self, table: str) -> Hierarchy:
        """The geography ``table`` is published on."""
        return self.geographies.get(self.table_geography.get(table, ""), self.geography)

    @property
    def total_table(self) -> TableDef | None:
        """The table of the total of persons (the US P1): the first person table that crosses
        no attribute, if the census has one."""
        return next(
            (t for t in self.tables.values() if t.records == "persons" and not t.crossed), None
        )

    @property
    def within(self) -> str:
        """The level of the reconstruction's programs (one per geounit)."""
        levels = self.geography.levels
        level = self.reconstruction.level
        return self.reconstruction.within or levels[max(levels.index(level) - 1, 0)]

    @cached_property
    def reconstruction_domain(self) -> Schema:
        """The domain the reconstruction decodes records from."""
        if self.reconstruction.domain is not None:
            return self.reconstruction.domain
        return self.domain(self.reconstruction.attributes, "reconstruction")

    def domain(self, names: tuple[str, ...], name: str = "") -> Schema:
        """The histogram domain crossing the attributes ``names`` (their detailed codes)."""
        attributes = tuple(self.attribute(n).domain_attribute() for n in names)
        return Schema(name or " × ".join(names), attributes)

    def full_domain_size(self, records: str = "persons") -> int:
        """Cells in the product of every attribute of ``records`` (a Python int: it can exceed
        what an int64 holds)."""
        size = 1
        for attribute in self.attributes.values():
            if attribute.records == records:
                size *= attribute.size
        return size


# ---------------------------------------------------------------------------------------------
# The census as a JSON document (sdclab.core.census.document reads it back)
# ---------------------------------------------------------------------------------------------

FORMAT = "sdclab-census-1"
"""The version of the document's layout."""


def _members(membership: np.ndarray) -> list[list[int]]:
    """A 0/1 categories × codes matrix as the code positions of each category."""
    return [np.flatnonzero(row).tolist() for row in membership]


def to_document(census: Census) -> dict[str, Any]:
    """The census as plain JSON values (lists, not arrays), in declaration order."""
    return {
        "format": FORMAT,
        "name": census.name,
        "title": census.title,
        "description": census.description,
        "household_key": census.household_key,
        "attributes": [
            {
                "name": a.name,
                "records": a.records,
                "codes": list(a.codes),
                "labels": list(a.labels),
                "breakdowns": [
                    {
                        "name": b.name,
                        "codes": list(b.codes),
                        "labels": list(b.labels),
                        "members": _members(b.membership),
                    }
                    for b in a.breakdowns.values()
                ],
            }
            for a in census.attributes.values()
        ],
        "geographies": [
            {
                "name": g.name,
                "levels": list(g.levels),
                "units": {level: list(codes) for level, codes in g.units.items()},
                "parents": {level: p.tolist() for level, p in g.parents.items()},
                "labels": {level: list(labels) for level, labels in g.labels.items()},
            }
            for g in census.geographies.values()
        ],
        "tables": [_table(t, census.table_geography.get(t.name)) for t in census.tables.values()],
        "quasi_identifiers": list(census.quasi_identifiers),
        "reconstruction": {
            "attributes": list(census.reconstruction.attributes),
            "level": census.reconstruction.level,
            "within": census.within,
            "resolved": dict(census.reconstruction.resolved),
        },
        **({"targets": _targets(census)} if census.targets else {}),
    }


def _targets(census: Census) -> dict[str, Any]:
    """The further attack targets (a census without them keeps the document it had)."""
    return {
        name: {
            "geography": t.geography,
            "quasi_identifiers": list(t.quasi_identifiers),
            "attributes": list(t.reconstruction.attributes),
            "level": t.reconstruction.level,
            "within": t.reconstruction.within,
            "resolved": dict(t.reconstruction.resolved),
        }
        for name, t in census.targets.items()
    }


def _table(table: TableDef, geography: str | None) -> dict[str, Any]:
    return {
        "name": table.name,
        "title": table.title,
        "universe": table.universe,
        "records": table.records,
        "geography": geography,
        "hierarchy": list(table.hierarchy),
        "top": table.top,
        "bottom": table.bottom,
        "domain": [a.name for a in table.schema.attributes],
        "parts": [
            {
                "label": part.label,
                "dimensions": [
                    {
                        "attribute": d.attribute,
                        "labels": list(d.labels),
                        "members": _members(d.membership),
                    }
                    for d in part.dimensions
                ],
                "universe": {
                    name: np.flatnonzero(mask).tolist() for name, mask in part.universe.items()
                },
            }
            for part in table.parts
        ],
    }


def census_digest(census: Census) -> str:
    """SHA-256 of the census's canonical JSON document, as ``sha256:<hex>``."""
    text = json.dumps(to_document(census), sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


@lru_cache(maxsize=16)
def cells_per_person(census: Census, names: tuple[str, ...] | None = None) -> int:
    """t: the published cells one person record moves, over every table of the workload
    (``names``; default every table of the census) at every level (Bach's release-level view):
    the person tables' cells it is counted in, and the household-table cells its presence
    moves."""
    tables = census.select(names)
    person = sum(t.most_cells_per_record * len(t.levels) for t in tables if t.records == "persons")
    unit = max(
        (
            sum(n * len(census.table(name).levels) for name, n in move.cells.items())
            for move in cells_moved(tables, census.household_changes)
        ),
        default=0,
    )
    return person + unit
