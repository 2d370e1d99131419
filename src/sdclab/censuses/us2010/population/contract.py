"""The population data contract (docs/data.md): columns, types, code ranges.

One place states what a valid persons or units table is; the reader validates against it, the
synthetic generator casts its output to it, and the docs are generated from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import polars as pl

from sdclab.censuses.us2010 import schema
from sdclab.censuses.us2010.geography import FipsGeography
from sdclab.censuses.us2010.population.columns import (
    BLOCKS,
    DATA_DEFINED,
    DETAILED_RACE_ETHNICITY,
    DETAILED_RACE_ETHNICITY_COLUMNS,
    PERSONS,
    RACE_CODE_COLUMNS,
    RECORD_KEY,
    UNITS,
    block_codes,
)
from sdclab.core.digest import frames_digest
from sdclab.core.geography import Geography

if TYPE_CHECKING:
    from sdclab.core.census.model import Census
    from sdclab.core.tables.definition import TableDef


@dataclass(frozen=True, repr=False)
class Population:
    """A validated persons table and units table (polars frames in the contract's dtypes).

    Making one validates the frames: ``Population(persons, units)`` runs every check of
    :func:`sdclab.censuses.us2010.population.io.validate` (vectorised) and keeps the frames as it
    returns them, in the contract's columns, order and dtypes; bad data is one
    :class:`~sdclab.core.errors.InputError` naming the table, row, column and value (``persons row
    3, column age: 999 is out of range (expected 0–115)``).
    """

    persons: pl.DataFrame
    units: pl.DataFrame
    blocks: pl.DataFrame | None = None
    """Optional: blocks of the geography (column ``block``), so that a block without any unit
    is a geounit too; None when every block of the population has a unit."""
    sources: tuple[Path, ...] = field(default=(), compare=False)
    """The directory it was read from, if any (kept in memory, never written): what is made from
    it may not be written there, nor keep its checkpoints there."""

    def __post_init__(self) -> None:
        from sdclab.censuses.us2010.population.validation import (  # builds on this
            checked_blocks,
            checked_frames,
        )

        persons, units = checked_frames(self.persons, self.units)
        object.__setattr__(self, "persons", persons)
        object.__setattr__(self, "units", units)
        if self.blocks is not None:
            object.__setattr__(self, "blocks", checked_blocks(self.blocks))

    @classmethod
    def _trusted(
        cls,
        persons: pl.DataFrame,
        units: pl.DataFrame,
        blocks: pl.DataFrame | None = None,
        sources: tuple[Path, ...] = (),
    ) -> Population:
        """A population of frames the library made valid by construction, without checking them
        again: those :func:`sdclab.censuses.us2010.population.io.validate` returns, the synthetic
        generator's, and those derived from a valid population by steps that keep the contract (new
        ids and order, households moved between units, record keys added). Tests validate each such
        output; anything else (a user's frames) goes through ``Population(persons, units)``."""
        population = object.__new__(cls)
        object.__setattr__(population, "persons", persons)
        object.__setattr__(population, "units", units)
        object.__setattr__(population, "blocks", blocks)
        object.__setattr__(population, "sources", sources)
        return population

    def with_records(
        self, persons: pl.DataFrame | None = None, units: pl.DataFrame | None = None
    ) -> Population:
        """This population with its records replaced by ones a library step derived from them
        while keeping the contract (new ids, households moved, keys added or dropped): its blocks
        stay, so the geography is the same. Not checked again (see :meth:`_trusted`)."""
        return Population._trusted(
            self.persons if persons is None else persons,
            self.units if units is None else units,
            self.blocks,
            self.sources,
        )

    def with_blocks(self, blocks: pl.DataFrame | None) -> Population:
        """This population with ``blocks`` (checked) as its blocks table."""
        from sdclab.censuses.us2010.population.validation import checked_blocks

        checked = None if blocks is None else checked_blocks(blocks)
        return Population._trusted(self.persons, self.units, checked, self.sources)

    def __repr__(self) -> str:
        return (
            f"<Population: {self.n_persons:,} persons, {self.n_units:,} units in "
            f"{self.geography.n_blocks:,} blocks>"
        )

    @property
    def frames(self) -> tuple[pl.DataFrame, ...]:
        """The tables that make the population: persons, units and, when listed, blocks."""
        if self.blocks is None:
            return (self.persons, self.units)
        return (self.persons, self.units, self.blocks)

    @property
    def digest(self) -> str:
        """The keyed digest of :attr:`frames` that releases record as their input digest (a
        population without a blocks table digests as it did before blocks could be listed).
        Computed at each call, under the digest key in force."""
        return frames_digest(*self.frames)

    @cached_property
    def geography(self) -> Geography:
        """Every block that has a unit (populated or not) or is listed in :attr:`blocks`."""
        codes = block_codes(self.units)
        if self.blocks is not None:
            codes = np.concatenate([codes, block_codes(self.blocks)])
        return FipsGeography.from_block_codes(codes)

    @property
    def census(self) -> Census:
        """The census the population is of: the US 2010 census."""
        from sdclab.censuses import us2010

        return us2010.census()

    @cached_property
    def person_columns(self) -> dict[str, npt.NDArray[np.int64]]:
        """The code of every person attribute of :attr:`census`, one per person."""
        from sdclab.censuses import us2010

        return us2010.record_columns(self, "persons")

    @cached_property
    def unit_columns(self) -> dict[str, npt.NDArray[np.int64]]:
        """The code of every unit attribute of :attr:`census`, one per unit."""
        from sdclab.censuses import us2010

        return us2010.record_columns(self, "households")

    def columns(self, records: str) -> dict[str, npt.NDArray[np.int64]]:
        """The attributes of the persons or of the units (``records``: persons, households)."""
        return self.person_columns if records == "persons" else self.unit_columns

    def geography_of(self, table: TableDef) -> Geography:
        """The geography ``table`` is published on: the one geography of the US census."""
        return self.geography

    def block_index(
        self, records: str, geography: Geography | None = None
    ) -> npt.NDArray[np.int64]:
        """The block of each person or each unit (``records``: persons, households)."""
        return self.person_block_index if records == "persons" else self.unit_block_index

    @cached_property
    def person_block_index(self) -> npt.NDArray[np.int64]:
        return self.geography.block_index(block_codes(self.persons))

    @cached_property
    def unit_block_index(self) -> npt.NDArray[np.int64]:
        return self.geography.block_index(block_codes(self.units))

    @cached_property
    def person_unit_row(self) -> npt.NDArray[np.int64]:
        """Row of ``units`` that each person lives in."""
        unit_ids = self.units.get_column("unit_id").to_numpy()
        order = np.argsort(unit_ids, kind="stable")
        pos = np.searchsorted(unit_ids[order], self.persons.get_column("unit_id").to_numpy())
        return order[pos].astype(np.int64)

    @cached_property
    def household_size(self) -> npt.NDArray[np.int64]:
        """Number of persons in each unit, aligned with the rows of ``units``."""
        return np.bincount(self.person_unit_row, minlength=self.n_units).astype(np.int64)

    @cached_property
    def householder_row(self) -> npt.NDArray[np.int64]:
        """Row of ``persons`` of each unit's householder (relationship 0), or -1 if it has none
        (vacant housing units and group-quarters facilities)."""
        relationship = self.persons.get_column("relationship").to_numpy()
        rows = np.flatnonzero(relationship == 0)
        out = np.full(self.n_units, -1, dtype=np.int64)
        out[self.person_unit_row[rows]] = rows
        return out

    @cached_property
    def household_type(self) -> npt.NDArray[np.int8]:
        """SafeTab-H's HOUSEHOLD_TYPE of each unit (schema.HOUSEHOLD_TYPE_LABELS), aligned with
        the rows of ``units``; 0 for vacant housing units and group-quarters facilities.

        Derived from the relationships in the unit: 1 married-couple family if a spouse or
        partner is present (relationship 1: the contract does not tell unmarried partners from
        spouses, so partners count as spouses here); else 2 or 3 (family, by the householder's
        sex) if a child or other relative is present; else 4 if the householder lives alone; else
        5 (only non-relatives).
        """
        relationship = self.persons.get_column("relationship").to_numpy()
        unit_row = self.person_unit_row
        n = self.n_units
        spouse = np.bincount(unit_row[relationship == 1], minlength=n) > 0
        relative = np.bincount(unit_row[(relationship == 2) | (relationship == 3)], minlength=n) > 0
        head = self.householder_row
        sex = self.persons.get_column("sex").to_numpy()
        male_head = np.zeros(n, dtype=bool)
        male_head[head >= 0] = sex[head[head >= 0]] == 1
        alone = self.household_size == 1
        kind = np.select(
            [spouse, relative & male_head, relative, alone], [1, 2, 3, 4], default=5
        ).astype(np.int8)
        household = (
            (self.units.get_column("unit_type").to_numpy() == 0)
            & self.units.get_column("occupied").to_numpy()
            & (head >= 0)
        )
        kind[~household] = 0
        return kind

    @property
    def has_detailed_race(self) -> bool:
        """Whether ``persons`` has the optional detailed race and Hispanic origin columns."""
        return all(name in self.persons.columns for name in DETAILED_RACE_ETHNICITY_COLUMNS)

    @cached_property
    def race_codes(self) -> npt.NDArray[np.int16]:
        """The detailed race codes as a persons × DETAILED_RACE_MAX matrix, 0 for an empty slot."""
        if not self.has_detailed_race:
            raise ValueError(
                "the population has no detailed race codes (columns race_code1…race_code8 and "
                "hispanic_origin)"
            )
        return (
            self.persons.select(RACE_CODE_COLUMNS)
            .fill_null(0)
            .to_numpy()
            .astype(np.int16, copy=False)
            .reshape(self.n_persons, len(RACE_CODE_COLUMNS))
        )

    @property
    def data_defined(self) -> pl.Series:
        """Whether each person is data-defined (:data:`DATA_DEFINED`): the column, or true for
        every person of a population without it."""
        if DATA_DEFINED.name in self.persons.columns:
            return self.persons.get_column(DATA_DEFINED.name)
        return pl.Series(DATA_DEFINED.name, np.ones(self.n_persons, dtype=bool))

    def n_records(self, records: str) -> int:
        """How many persons or units (``records``: persons, households)."""
        return self.n_persons if records == "persons" else self.n_units

    def record_ids(self, records: str) -> npt.NDArray[np.int64]:
        """The persons' or the units' identifiers."""
        frame, column = (
            (self.persons, "person_id") if records == "persons" else (self.units, "unit_id")
        )
        return frame.get_column(column).to_numpy()

    def record_keys(self, records: str) -> npt.NDArray[np.int64] | None:
        """The cell key method's stored record keys of the persons or the units, if any."""
        frame = self.persons if records == "persons" else self.units
        if RECORD_KEY.name not in frame.columns:
            return None
        return frame.get_column(RECORD_KEY.name).to_numpy()

    def with_record_keys(
        self, persons: npt.NDArray[np.int64], households: npt.NDArray[np.int64]
    ) -> Population:
        """This population with ``record_key`` columns holding these keys."""
        return self.with_records(
            persons=self.persons.with_columns(pl.Series(RECORD_KEY.name, persons)),
            units=self.units.with_columns(pl.Series(RECORD_KEY.name, households)),
        )

    @property
    def n_persons(self) -> int:
        return self.persons.height

    @property
    def n_units(self) -> int:
        return self.units.height


def contract_markdown() -> str:
    """The column contract as Markdown tables (docs/data.md is generated from this)."""
    out = []
    tables = (("units", "", UNITS), ("persons", "", PERSONS), ("blocks", " (optional)", BLOCKS))
    for title, note, specs in tables:
        out += [
            f"### `{title}`{note}",
            "",
            "| column | type | values | meaning |",
            "|---|---|---|---|",
        ]
        optional = (*DETAILED_RACE_ETHNICITY, DATA_DEFINED) if specs == PERSONS else ()
        keyed = (RECORD_KEY,) if specs != BLOCKS else ()
        for s in (*specs, *optional, *keyed):
            values = f"{s.low}–{s.high}" if s.low is not None else ""
            if s.nullable:
                values += ", or null"
            out.append(f"| `{s.name}` | {s.dtype} | {values} | {s.meaning} |")
        out.append("")
    return "\n".join(out)


def detailed_codes_markdown() -> str:
    """The detailed race and Hispanic origin code lists and the household types as Markdown
    tables (docs/data.md is generated from this)."""
    out = [
        "#### Detailed race codes",
        "",
        "| code | major race | label | frequency |",
        "|---|---|---|---|",
    ]
    for name, codes in schema.DETAILED_RACE.items():
        for c in codes:
            mark = " †" if c.hispanic_write_in else ""
            out.append(f"| {c.code} | {name} | {c.label}{mark} | {c.frequency:.4g} |")
    out += [
        "",
        "#### Hispanic origin codes",
        "",
        "| code | label | frequency among Hispanic persons |",
        "|---|---|---|",
        f"| {schema.NOT_HISPANIC_ORIGIN} | "
        f"{schema.HISPANIC_ORIGIN_LABELS[schema.NOT_HISPANIC_ORIGIN]} |  |",
    ]
    out += [f"| {c.code} | {c.label} | {c.frequency:.4g} |" for c in schema.HISPANIC_ORIGINS]
    out += [
        "",
        "#### Household types",
        "",
        "| code | household type |",
        "|---|---|",
        "| 0 | none (vacant housing unit or group-quarters facility) |",
    ]
    out += [f"| {code} | {label} |" for code, label in schema.HOUSEHOLD_TYPE_LABELS.items()]
    out.append("")
    return "\n".join(out)
