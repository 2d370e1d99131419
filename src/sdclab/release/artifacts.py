"""What a mechanism publishes beside its tables: the declaration of an artifact, where it is
kept in a release directory, and the problems its check looks for (columns, types, geounits)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import polars as pl

from sdclab.core.geography import Geography

ArtifactCheck = Callable[[pl.DataFrame, Geography], "str | None"]
"""A problem of an artifact's frame read from a release (its columns, types, geounits), or
None."""


@dataclass(frozen=True)
class Artifact:
    """A payload a mechanism publishes beside its tables, kept as ``artifacts/<name>.parquet``
    (an MDF, noisy measurements, population-group tables, a p-table)."""

    name: str
    meaning: str
    check: ArtifactCheck | None = None


def artifact_file(name: str) -> str:
    """Where an artifact is kept in a release directory."""
    return f"artifacts/{name}.parquet"


def frame_problem(frame: pl.DataFrame, columns: Mapping[str, str]) -> str | None:
    """Whether ``frame`` has exactly ``columns``, in order, each of its kind — ``string``,
    ``integer``, ``number`` (integer or float) or ``boolean`` — and no missing value; the first
    problem as text, or None. For the checks of artifacts."""
    if frame.columns != list(columns):
        return f"columns {frame.columns}, expected {list(columns)}"
    kinds = {
        "string": lambda t: t == pl.String,
        "integer": lambda t: t.is_integer(),
        "number": lambda t: t.is_integer() or t.is_float(),
        "boolean": lambda t: t == pl.Boolean,
    }
    for name, kind in columns.items():
        if not kinds[kind](frame.schema[name]):
            return f"column {name} is {frame.schema[name]}, expected {kind}"
    missing = [c for c in columns if frame[c].null_count()]
    if missing:
        return f"column {missing[0]} has missing values"
    return None


def geoid_problem(
    frame: pl.DataFrame, geography: Geography, *, level: str | None = None, column: str = "geoid"
) -> str | None:
    """Whether every geoid of ``frame`` (``column``, string) is a geounit of ``geography`` — at
    ``level``, or at the level its row's ``level`` column names; the first that is not as text,
    or None. For the checks of artifacts."""
    if level is not None:
        valid = geography.geoids(level)
        unknown = frame.filter(~pl.col(column).is_in(valid.implode()))
        if unknown.height:
            return f"{column} {unknown[column][0]!r} is not a {level} of this release's geography"
        return None
    bad = frame.filter(~pl.col("level").is_in(list(geography.levels)))
    if bad.height:
        return f"level {bad['level'][0]!r} is not one of {list(geography.levels)}"
    keys = frame.select("level", geoid=pl.col(column))
    unknown = keys.join(valid_geoids(geography), on=["level", "geoid"], how="anti")
    if unknown.height:
        row = unknown.row(0, named=True)
        return f"geoid {row['geoid']!r} is not a {row['level']} of this release's geography"
    return None


def valid_geoids(geography: Geography) -> pl.DataFrame:
    """(level, geoid) of every geounit of the release."""
    frames = [
        pl.DataFrame({"geoid": geography.geoids(level)}).with_columns(level=pl.lit(level))
        for level in geography.all_levels
    ]
    return pl.concat(frames).select("level", "geoid").unique()
