"""The release as a value: its tables, card, randomness and artifacts, whether it protects, the
content of its ``release.json``, and what reading one needs of the mechanism it names."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import polars as pl

from sdclab.censuses.us2010.population import Population
from sdclab.core.accounting import SpecCard
from sdclab.core.errors import InputError
from sdclab.core.geography import Geography
from sdclab.core.tables.definition import TableDef
from sdclab.core.tables.published import PublishedTable
from sdclab.core.version import __version__
from sdclab.release.artifacts import Artifact

if TYPE_CHECKING:
    from sdclab.core.census.model import Census


class ReleaseMechanism(Protocol):
    """What reading a release needs of the mechanism it names (a registered
    :class:`~sdclab.protection.base.Mechanism`): its parameters, the noise it states, the
    artifacts it declares and the check of its values. The reader is given the mechanisms;
    sdclab.release never imports their registry."""

    @property
    def parameters(self) -> Any: ...

    @property
    def noise(self) -> Callable[[Any], Any] | None: ...

    @property
    def artifacts(self) -> tuple[Artifact, ...]: ...

    @property
    def check(self) -> Callable[[Release, Any], str | None] | None: ...

    def parse(self, settings: Mapping[str, Any], census: Census | None = None) -> Any: ...


Mechanisms = Mapping[str, ReleaseMechanism]
"""The mechanisms a release may name, by name."""

FORMAT_VERSION = 3
"""2: mechanism payloads (the MDF, measurements, group tables) are artifacts/<name>.parquet;
3: the specification card holds its guarantee as values, with the common-axis figure."""
RELEASE_FILE = "release.json"
RELEASE_KIND = "release"
GEOGRAPHY_FILE = "geography.parquet"


def other_geography_file(name: str) -> str:
    """The file of a census's further geography ``name`` (a grid) in a release."""
    return f"geography-{name}.parquet"


CENSUS_FILE = "census.json"
MDF_ARTIFACT = "mdf"
"""The artifact of a histogram mechanism's person records (TopDown's Microdata Detail File)."""


EXACT_TABLES = "every published table equals the exact tabulation, no cell withheld"
"""Why a release that publishes the exact tables protects nothing (its verdict's reason)."""


@dataclass(frozen=True)
class Protection:
    """Whether a release protects the population it was made from, and if not, why.

    A fact of the release, not of its randomness: a seeded release of experiments protects or
    not just as its unseeded twin would. The rule (:meth:`~sdclab.protection.base.Mechanism.
    protection`): a release does not protect when every table it publishes equals the exact
    tabulation at every level, with no cell withheld, or when its mechanism states why its noise
    protects nothing (a p-table whose noise is a fixed, invertible function of the count; a
    constant record key).
    """

    protects: bool
    reason: str | None = None
    """Why the release does not protect (None when it does)."""

    def __post_init__(self) -> None:
        if self.protects != (self.reason is None):
            raise ValueError("a release that does not protect says why, and only such a release")

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (``release.json``'s ``protection``)."""
        return {"protects": self.protects, **({"reason": self.reason} if self.reason else {})}

    @classmethod
    def from_dict(cls, data: object, where: str) -> Protection:
        """The verdict ``release.json`` records; a malformed one is an :class:`InputError`."""
        if (
            not isinstance(data, dict)
            or set(data) - {"protects", "reason"}
            or not isinstance(data.get("protects"), bool)
            or not isinstance(data.get("reason", ""), str)
            or data["protects"] == bool(data.get("reason"))
        ):
            raise InputError(
                f'{where}: protection must be {{"protects": true}} or '
                '{"protects": false, "reason": TEXT}'
            )
        return cls(data["protects"], data.get("reason"))


EXACT_TABULATION = "an exact tabulation protects nothing"
"""Why the exact release (``none``, ``sdclab tabulate``) does not protect."""


@dataclass(frozen=True)
class Release:
    """Published tables (by table name) with the metadata that explains them."""

    mechanism: str
    parameters: dict[str, Any]
    card: SpecCard = field(repr=False)
    tables: Mapping[str, PublishedTable] = field(repr=False)
    randomness: dict[str, Any] = field(repr=False)
    input_digest: str = field(repr=False)
    geography: Geography = field(repr=False)
    microdata: Population | None = field(default=None, repr=False)
    notes: dict[str, Any] = field(default_factory=dict, repr=False)
    artifacts: dict[str, pl.DataFrame] = field(default_factory=dict, repr=False)
    """What else the mechanism publishes, by name (``artifacts/<name>.parquet``), each declared
    in its :attr:`~sdclab.protection.base.Mechanism.artifacts`: TopDown's ``mdf`` and
    ``measurements``, SafeTab-H's ``group_tables`` and ``group_totals``, the cell key method's
    ``ptable`` when it came from a file."""
    noise: dict[str, Any] = field(default_factory=dict, repr=False)
    """What the release publishes about its own noise — the distribution, where it is stated and
    the figures that fix it, from the recorded parameters alone: what an attacker may assume."""
    protection: Protection | None = field(default=None, repr=False)
    """Whether the release protects the population it was made from (None: not judged, as for a
    release a mechanism returned before :meth:`~sdclab.protection.base.Mechanism.run` judged it
    or one written before releases recorded it)."""
    sources: tuple[Path, ...] = field(default=(), compare=False, repr=False)
    """The directories it was read or made from (its own when read, its population's when made;
    kept in memory, never written): it may not be written there, nor keep checkpoints there."""
    census: Census = field(default_factory=lambda: us2010_census(), compare=False, repr=False)
    """The census the release is of: its tables are that census's."""
    origin: Census | None = field(default=None, compare=False, repr=False)
    """The census the mechanism ran on, when the release is seen as an attack target sees it
    (:meth:`aimed_at`); None: :attr:`census`."""

    @property
    def mechanism_census(self) -> Census:
        """The census the mechanism's parameters are stated against (its swap's levels, its
        tables), whatever census the release is seen through."""
        return self.origin if self.origin is not None else self.census

    def __post_init__(self) -> None:
        for name, table in self.tables.items():
            if not isinstance(table, PublishedTable) or table.name != name:
                raise TypeError(f"release table {name!r} must be the PublishedTable {name}")
            for level in table.levels:
                if len(table.geoids(level)) != self.geography.n_units(level):
                    raise ValueError(
                        f"table {name} at {level}: {len(table.geoids(level))} geounits, the "
                        f"release's geography has {self.geography.n_units(level)}"
                    )

    @property
    def person_microdata(self) -> pl.DataFrame | None:
        """The released person records (protected microdata or the MDF artifact), if any."""
        if self.microdata is not None:
            return self.microdata.persons
        return self.artifacts.get(MDF_ARTIFACT)

    def aimed_at(self, target: str) -> Release:
        """The release as the census's attack ``target`` sees it
        (:meth:`~sdclab.core.census.model.Census.aimed_at`): the tables published on the
        target's geography, over that geography; the rest of the release as it is."""
        census = self.census.aimed_at(target)
        name = census.geography.name
        others = getattr(self.geography, "others", {})
        if name not in others:
            raise InputError(f"the release carries no {name} geography: target {target!r}")
        tables = {n: t for n, t in self.tables.items() if n in census.tables}
        origin = self.mechanism_census
        return replace(self, census=census, geography=others[name], tables=tables, origin=origin)

    def table(self, name: str) -> PublishedTable:
        """The published table ``name``."""
        if name not in self.tables:
            raise KeyError(f"release has no table {name!r}; it has {', '.join(self.tables)}")
        return self.tables[name]

    def __repr__(self) -> str:
        parts = [f"{len(self.tables)} table{'s' if len(self.tables) != 1 else ''}"]
        if self.microdata is not None:
            parts.append(f"microdata of {self.microdata.persons.height:,} persons")
        if self.artifacts:
            parts.append(f"artifacts {', '.join(sorted(self.artifacts))}")
        g = self.card.guarantee
        guarantee = g.text() if g.is_formal else ("unknown" if g.open else "no formal guarantee")
        return f"<Release {self.mechanism}: {', '.join(parts)}; {guarantee}>"

    def metadata(self) -> dict[str, Any]:
        """The content of ``release.json``."""
        return {
            "format_version": FORMAT_VERSION,
            "sdclab_version": __version__,
            "mechanism": self.mechanism,
            "parameters": self.parameters,
            "specification": self.card.to_dict(),
            "randomness": self.randomness,
            "input_digest": self.input_digest,
            "zeros": "omitted",
            "census": {"name": self.census.name, "digest": self.census.digest},
            "tables": {name: table_metadata(self.census.table(name)) for name in self.tables},
            "microdata": self.microdata is not None,
            "artifacts": sorted(self.artifacts),
            "notes": self.notes,
            "noise": self.noise,
            **({"protection": self.protection.to_dict()} if self.protection else {}),
        }


def table_metadata(table: TableDef) -> dict[str, Any]:
    """What a reader needs to understand a stored table without the code."""
    return {
        "title": table.title,
        "universe": table.universe,
        "schema": table.schema.name,
        "levels": list(table.levels),
        "cells": table.cell_labels,
    }


def us2010_census() -> Census:
    """The US 2010 census (the census of a release that names none)."""
    from sdclab.censuses import us2010

    return us2010.census()
