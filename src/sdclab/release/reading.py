"""Reading a release directory: every file checked (its digest, its columns and types, its
geounits and cells), then its values against what its mechanism could have produced."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
import scipy.sparse as sp

from sdclab.censuses import is_us2010
from sdclab.censuses.us2010.geography import GEOID_LENGTH, FipsGeography
from sdclab.core.accounting import SpecCard
from sdclab.core.census.records import geography_from_frame, with_others
from sdclab.core.errors import InputError
from sdclab.core.fileio import read_input_parquet
from sdclab.core.geography import Geography
from sdclab.core.tables.definition import TableDef
from sdclab.core.tables.published import LONG_SCHEMA, PublishedTable
from sdclab.release.artifacts import artifact_file, valid_geoids
from sdclab.release.digests import changed_files, unrecorded_files
from sdclab.release.metadata import check_metadata, load_metadata, read_census
from sdclab.release.model import (
    CENSUS_FILE,
    GEOGRAPHY_FILE,
    RELEASE_FILE,
    Mechanisms,
    Protection,
    Release,
    ReleaseMechanism,
    other_geography_file,
)

if TYPE_CHECKING:
    from sdclab.core.census.model import Census


def read_release(path: Path, mechanisms: Mechanisms) -> Release:
    """Read and check a release directory made by one of ``mechanisms`` (the registry,
    :data:`sdclab.protection.MECHANISMS`; :func:`sdclab.pipeline.api.read_release` passes it);
    anything malformed is an :class:`InputError`.

    The content is checked first, then the digests recorded in release.json: a file that does not
    match them was changed after the release was written. When the content is also malformed, its
    message says which files changed.
    """
    path = Path(path)
    meta = load_metadata(path)
    changed = changed_files(path, meta)
    try:
        release = _read_content(path, meta, mechanisms)
    except InputError as exc:
        if changed:
            raise InputError(f"{exc}; {'; '.join(changed)}", exc.details) from None
        raise
    if changed:
        raise InputError(f"release {path}: {'; '.join(changed)}")
    return release


def _read_content(path: Path, meta: dict[str, Any], mechanisms: Mechanisms) -> Release:
    """The release in ``path`` whose release.json holds ``meta``, every file checked, then its
    values against what its mechanism could have produced."""
    census = read_census(path, meta)
    mechanism, parameters = check_metadata(path / RELEASE_FILE, meta, census, mechanisms)
    geography = _read_geography(path / GEOGRAPHY_FILE, census)
    valid = valid_geoids(geography)
    geoids = {level: geography.geoids(level) for level in geography.all_levels}
    tables = {
        name: _read_table(path / "tables" / f"{name}.parquet", census.table(name), valid, geoids)
        for name in meta["tables"]
    }
    microdata = None
    if meta["microdata"]:
        from sdclab.censuses.us2010.population.io import validate

        microdata = validate(
            read_input_parquet(path / "microdata" / "persons.parquet"),
            read_input_parquet(path / "microdata" / "units.parquet"),
            persons_source=str(path / "microdata" / "persons.parquet"),
            units_source=str(path / "microdata" / "units.parquet"),
        )
    artifacts = _read_artifacts(path, meta, geography, mechanism)
    read = [path / GEOGRAPHY_FILE, *(path / "tables" / f"{name}.parquet" for name in tables)]
    others = [h.name for h in census.geographies.values() if h is not census.geography]
    read += [path / other_geography_file(name) for name in others]
    read += [] if is_us2010(census) else [path / CENSUS_FILE]
    read += [path / artifact_file(name) for name in artifacts]
    if microdata is not None:
        read += [path / "microdata" / "persons.parquet", path / "microdata" / "units.parquet"]
    unrecorded_files(path, meta, read)
    release = Release(
        mechanism=meta["mechanism"],
        parameters=meta["parameters"],
        card=SpecCard.from_dict(meta["specification"]),
        tables=tables,
        randomness=meta["randomness"],
        input_digest=meta["input_digest"],
        geography=geography,
        microdata=microdata,
        notes=meta.get("notes", {}),
        artifacts=artifacts,
        noise=meta.get("noise", {}),
        protection=(
            Protection.from_dict(meta["protection"], str(path / RELEASE_FILE))
            if "protection" in meta
            else None
        ),
        sources=(path.absolute(),),
        census=census,
    )
    check = mechanism.check
    problem = None if check is None else check(release, parameters)
    if problem is not None:
        raise InputError(f"release {path}: {problem}")
    return release


_ARTIFACT_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")


def _artifacts(meta: dict[str, Any]) -> list[str]:
    """The artifact names release.json lists (absent: none), each a plain lower-case name."""
    names = meta.get("artifacts", [])
    if not isinstance(names, list) or not all(
        isinstance(n, str) and _ARTIFACT_NAME.fullmatch(n) for n in names
    ):
        raise InputError(
            f"{RELEASE_FILE}: artifacts must be a list of lower-case names (letters, digits, _)"
        )
    return names


def _read_artifacts(
    path: Path, meta: dict[str, Any], geography: Geography, mechanism: ReleaseMechanism
) -> dict[str, pl.DataFrame]:
    """The artifacts release.json lists, each declared by the release's mechanism and checked
    by its declaration."""
    declared = {a.name: a for a in mechanism.artifacts}
    artifacts = {}
    for name in _artifacts(meta):
        artifact = declared.get(name)
        if artifact is None:
            raise InputError(
                f"{path / RELEASE_FILE}: artifact {name!r} is not one mechanism "
                f"{meta['mechanism']} publishes (it declares: {', '.join(declared) or 'none'})"
            )
        file = path / artifact_file(name)
        frame = read_input_parquet(file)
        problem = artifact.check(frame, geography) if artifact.check is not None else None
        if problem is not None:
            raise InputError(f"{file}: {problem}")
        artifacts[name] = frame
    return artifacts


def _read_geography(file: Path, census: Census) -> Geography:
    frame = read_input_parquet(file)
    if not is_us2010(census):
        geographies = {
            h.name: geography_from_frame(h, read_input_parquet(f), str(f))
            for h in census.geographies.values()
            if h is not census.geography
            for f in [file.with_name(other_geography_file(h.name))]
        }
        main = geography_from_frame(census.geography, frame, str(file))
        return with_others(main, {census.geography.name: main, **geographies})
    if frame.columns != ["block"] or frame.schema["block"] != pl.String:
        raise InputError(f"{file}: expected one string column 'block'")
    bad = frame.filter(~pl.col("block").str.contains(r"^[0-9]{15}$").fill_null(False))
    if bad.height:
        raise InputError(f"{file}: block {bad['block'][0]!r} is not a 15-digit geocode")
    return FipsGeography.from_block_codes(frame["block"].cast(pl.Int64).to_numpy())


def _read_table(
    file: Path, table: TableDef, valid: pl.DataFrame, geoids: Mapping[str, pl.Series]
) -> PublishedTable:
    """A table file, checked, as the published table it holds (rows: ``geoids`` by level)."""
    frame = read_input_parquet(file)
    if set(frame.columns) != set(LONG_SCHEMA):
        raise InputError(f"{file}: columns {frame.columns}, expected {list(LONG_SCHEMA)}")
    types = frame.schema
    if not (
        types["level"] == pl.String
        and types["geoid"] == pl.String
        and types["cell"].is_integer()
        and (types["count"].is_integer() or types["count"].is_float())
    ):
        raise InputError(
            f"{file}: column types {dict(types)}; expected level and geoid strings, cell an "
            "integer and count an integer or float"
        )
    nulls = [c for c in ("level", "geoid", "cell") if frame[c].null_count()]
    if nulls:
        raise InputError(f"{file}: column {nulls[0]} has missing values")
    n_cells = table.n_cells
    bad_cell = frame.filter((pl.col("cell") < 0) | (pl.col("cell") >= n_cells))
    if bad_cell.height:  # checked in the file's own type: a cast could fail first
        raise InputError(f"{file}: cell {bad_cell['cell'][0]} outside 0..{n_cells - 1}")
    count_type = pl.Int64 if types["count"].is_integer() else pl.Float64
    count = frame["count"].cast(count_type, strict=False)
    if count.null_count() != frame["count"].null_count():
        raise InputError(f"{file}: column count has values beyond the 64-bit integer range")
    frame = frame.select("level", "geoid", pl.col("cell").cast(pl.Int32)).with_columns(count)
    levels = table.levels
    bad_level = frame.filter(~pl.col("level").is_in(levels))
    if bad_level.height:
        raise InputError(f"{file}: level {bad_level['level'][0]!r} is not one of {list(levels)}")
    unknown = frame.join(valid, on=["level", "geoid"], how="anti")
    if unknown.height:
        row = unknown.row(0, named=True)
        width = GEOID_LENGTH[row["level"]]
        raise InputError(
            f"{file}: geoid {row['geoid']!r} is not a {row['level']} of this release's geography "
            f"(expected {width} digits of a published block, or 'US' for the nation)"
        )
    if frame.select(pl.struct("level", "geoid", "cell").is_duplicated().any()).item():
        raise InputError(f"{file}: a (level, geoid, cell) appears more than once")
    if count_type == pl.Float64 and not frame["count"].is_finite().fill_null(True).all():
        raise InputError(f"{file}: column count has NaN or infinite values (null = suppressed)")
    return _published(frame, table, geoids)


def _published(
    frame: pl.DataFrame, table: TableDef, geoids: Mapping[str, pl.Series]
) -> PublishedTable:
    """The long form of a checked table file as count matrices and suppressed-cell masks."""
    counts, suppressed = {}, {}
    for level in table.levels:
        index = geoids[level].to_frame("geoid").with_row_index("row")
        part = frame.filter(pl.col("level") == level).join(index, on="geoid", how="inner")
        shape = (len(geoids[level]), table.n_cells)
        shown = part.filter(pl.col("count").is_not_null())
        hidden = part.filter(pl.col("count").is_null())
        counts[level] = sp.csr_matrix(
            (shown["count"].to_numpy(), (shown["row"].to_numpy(), shown["cell"].to_numpy())),
            shape=shape,
        )
        suppressed[level] = sp.csr_matrix(
            (
                np.ones(hidden.height, dtype=bool),
                (hidden["row"].to_numpy(), hidden["cell"].to_numpy()),
            ),
            shape=shape,
        )
    return PublishedTable(table, geoids, counts, suppressed)
