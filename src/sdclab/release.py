"""A release: what an agency would publish, read and written as one directory.

```
release.json            mechanism, parameters, specification card, tables (with cell labels),
                        randomness, format version, input digest
tables/<TABLE>.parquet  long form: level, geoid, cell, count (rows absent = 0; null = suppressed)
microdata/persons.parquet, units.parquet   only for mechanisms that output microdata
```
A release never holds confidential values unless its mechanism is ``none``, whose card says so.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from sdclab import __version__
from sdclab.accounting import SpecCard, no_protection_card
from sdclab.digest import frames_digest
from sdclab.errors import InputError
from sdclab.fileio import atomic_directory, write_json, write_parquet
from sdclab.geography import GEOID_LENGTH
from sdclab.population import Population
from sdclab.randomness import randomness_record
from sdclab.tables.catalog import CATALOG, TableDef
from sdclab.tables.tabulate import LONG_SCHEMA, tabulate

FORMAT_VERSION = 1
RELEASE_FILE = "release.json"


@dataclass(frozen=True)
class Release:
    """Published tables (long form, by table name) with the metadata that explains them."""

    mechanism: str
    parameters: dict[str, Any]
    card: SpecCard
    tables: dict[str, pl.DataFrame]
    randomness: dict[str, Any]
    input_digest: str
    microdata: Population | None = None
    notes: dict[str, Any] = field(default_factory=dict)

    def table(self, name: str, level: str | None = None) -> pl.DataFrame:
        """A table in long form, optionally only one level."""
        if name not in self.tables:
            raise KeyError(f"release has no table {name!r}; it has {', '.join(self.tables)}")
        frame = self.tables[name]
        return frame if level is None else frame.filter(pl.col("level") == level)

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
            "tables": {name: table_metadata(CATALOG[name]) for name in self.tables},
            "microdata": self.microdata is not None,
            "notes": self.notes,
        }


def table_metadata(table: TableDef) -> dict[str, Any]:
    """What a reader needs to understand a stored table without the code."""
    return {
        "title": table.title,
        "universe": table.universe,
        "schema": table.schema.name,
        "levels": list(table.levels),
        "cells": table.cell_labels,
        "zeros": "omitted",
    }


def exact_release(population: Population, names: Sequence[str] | None = None) -> Release:
    """The unprotected tabulation (mechanism ``none``): every table exactly as in the data."""
    counts = tabulate(population, names)
    return Release(
        mechanism="none",
        parameters={"tables": list(counts)},
        card=no_protection_card(),
        tables={name: tc.to_long() for name, tc in counts.items()},
        randomness=randomness_record(None, uses_randomness=False),
        input_digest=frames_digest(population.persons, population.units),
    )


def write_release(release: Release, out: Path) -> None:
    """Write the release directory atomically (it appears complete or not at all)."""
    with atomic_directory(Path(out)) as tmp:
        (tmp / "tables").mkdir()
        for name, frame in release.tables.items():
            write_parquet(frame, tmp / "tables" / f"{name}.parquet")
        if release.microdata is not None:
            (tmp / "microdata").mkdir()
            write_parquet(release.microdata.persons, tmp / "microdata" / "persons.parquet")
            write_parquet(release.microdata.units, tmp / "microdata" / "units.parquet")
        write_json(release.metadata(), tmp / RELEASE_FILE)


def read_release(path: Path) -> Release:
    """Read and check a release directory; anything malformed is an :class:`InputError`."""
    path = Path(path)
    meta = _read_metadata(path)
    tables = {
        name: _read_table(path / "tables" / f"{name}.parquet", name, info)
        for name, info in meta["tables"].items()
    }
    microdata = None
    if meta.get("microdata"):
        microdata = Population(
            persons=_read_parquet(path / "microdata" / "persons.parquet"),
            units=_read_parquet(path / "microdata" / "units.parquet"),
        )
    return Release(
        mechanism=meta["mechanism"],
        parameters=meta["parameters"],
        card=SpecCard.from_dict(meta["specification"]),
        tables=tables,
        randomness=meta["randomness"],
        input_digest=meta["input_digest"],
        microdata=microdata,
        notes=meta.get("notes", {}),
    )


_REQUIRED_KEYS = (
    "format_version",
    "mechanism",
    "parameters",
    "specification",
    "randomness",
    "input_digest",
    "tables",
)


def _read_metadata(path: Path) -> dict[str, Any]:
    file = path / RELEASE_FILE
    if not path.is_dir():
        raise InputError(f"{path}: not a release directory")
    if not file.is_file():
        raise InputError(f"{file}: missing; {path} is not a release directory")
    try:
        meta = json.loads(file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{file}: not valid JSON ({exc})") from None
    if not isinstance(meta, dict):
        raise InputError(f"{file}: expected a JSON object")
    missing = [k for k in _REQUIRED_KEYS if k not in meta]
    if missing:
        raise InputError(f"{file}: missing key(s) {', '.join(missing)}")
    if meta["format_version"] != FORMAT_VERSION:
        raise InputError(
            f"{file}: format_version {meta['format_version']!r} is not supported "
            f"(expected {FORMAT_VERSION})"
        )
    unknown = [name for name in meta["tables"] if name not in CATALOG]
    if unknown:
        raise InputError(f"{file}: unknown table(s) {', '.join(unknown)}")
    try:
        SpecCard.from_dict(meta["specification"])
    except (TypeError, KeyError) as exc:
        raise InputError(f"{file}: malformed specification card ({exc})") from None
    return meta


def _read_parquet(file: Path) -> pl.DataFrame:
    if not file.is_file():
        raise InputError(f"{file}: missing from the release")
    try:
        return pl.read_parquet(file)
    except Exception as exc:  # polars/arrow raise several types for corrupt files
        raise InputError(f"{file}: not a readable Parquet file ({type(exc).__name__})") from None


def _read_table(file: Path, name: str, info: dict[str, Any]) -> pl.DataFrame:
    frame = _read_parquet(file)
    expected = set(LONG_SCHEMA)
    if set(frame.columns) != expected:
        raise InputError(f"{file}: columns {frame.columns}, expected {list(LONG_SCHEMA)}")
    try:
        frame = frame.select(pl.col(c).cast(t, strict=True) for c, t in LONG_SCHEMA.items())
    except pl.exceptions.PolarsError:
        raise InputError(f"{file}: column types do not match {LONG_SCHEMA}") from None
    n_cells = CATALOG[name].n_cells
    bad_cell = frame.filter((pl.col("cell") < 0) | (pl.col("cell") >= n_cells))
    if bad_cell.height:
        raise InputError(f"{file}: cell {bad_cell['cell'][0]} outside 0..{n_cells - 1}")
    bad_level = frame.filter(~pl.col("level").is_in(info["levels"]))
    if bad_level.height:
        raise InputError(f"{file}: level {bad_level['level'][0]!r} is not one of {info['levels']}")
    width = pl.col("level").replace_strict(GEOID_LENGTH, return_dtype=pl.Int64)
    bad_geoid = frame.filter(
        (pl.col("level") != "nation") & (pl.col("geoid").str.len_chars() != width)
    )
    if bad_geoid.height:
        raise InputError(
            f"{file}: geoid {bad_geoid['geoid'][0]!r} has the wrong length for its level"
        )
    return frame
