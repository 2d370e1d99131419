"""Writing a release directory atomically: its tables, geography, census document, microdata and
artifacts, then ``release.json`` with the digests of them all."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from sdclab.censuses import is_us2010
from sdclab.core.census.document import to_document
from sdclab.core.census.records import DeclaredGeography, geography_frame
from sdclab.core.fileio import json_safe, output_directory, write_json, write_parquet
from sdclab.core.geography import Geography
from sdclab.release.artifacts import artifact_file
from sdclab.release.digests import DIGEST_ALGORITHM, DIGESTS_KEY, file_digest, metadata_digest
from sdclab.release.model import (
    CENSUS_FILE,
    GEOGRAPHY_FILE,
    RELEASE_FILE,
    RELEASE_KIND,
    Release,
    other_geography_file,
)


def write_release(
    release: Release, out: Path, *, protect: tuple[Path, ...] = (), option: str = "--out"
) -> None:
    """Write the release directory atomically (it appears complete or not at all).

    Only an absent or empty directory or an earlier release may be replaced, apart from
    ``protect`` and the release's :attr:`~Release.sources` (``option`` names ``out`` in messages).
    Which artifacts a mechanism may publish is its own to check (:meth:`Mechanism.run`) and the
    reader's (:func:`read_release`).
    """
    protect = (*protect, *release.sources)
    with output_directory(Path(out), RELEASE_KIND, protect, option) as tmp:
        (tmp / "tables").mkdir()
        for name, table in release.tables.items():
            write_parquet(table.frame(labels=False), tmp / "tables" / f"{name}.parquet")
        write_parquet(_geography_frame(release.geography), tmp / GEOGRAPHY_FILE)
        if isinstance(release.geography, DeclaredGeography):
            for name, other in release.geography.others.items():
                write_parquet(geography_frame(other), tmp / other_geography_file(name))
        if not is_us2010(release.census):
            write_json(to_document(release.census), tmp / CENSUS_FILE)
        if release.microdata is not None:
            (tmp / "microdata").mkdir()
            write_parquet(release.microdata.persons, tmp / "microdata" / "persons.parquet")
            write_parquet(release.microdata.units, tmp / "microdata" / "units.parquet")
        for name, frame in release.artifacts.items():
            write_parquet(frame, tmp / artifact_file(name))
        # the metadata as a reader will see it (JSON types, NaN as null), then its digests
        meta = json.loads(json.dumps(json_safe(release.metadata()), allow_nan=False))
        files = sorted(p for p in tmp.rglob("*") if p.is_file())
        meta[DIGESTS_KEY] = {
            "algorithm": DIGEST_ALGORITHM,
            "files": {p.relative_to(tmp).as_posix(): file_digest(p) for p in files},
            RELEASE_FILE: metadata_digest(meta),
        }
        write_json(meta, tmp / RELEASE_FILE)


def _geography_frame(geography: Geography) -> pl.DataFrame:
    """The geography as ``geography.parquet`` holds it."""
    if isinstance(geography, DeclaredGeography):
        return geography_frame(geography)
    blocks = geography.geoid_strings(geography.blocks, geography.levels[-1])
    return blocks.alias("block").to_frame()
