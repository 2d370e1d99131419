"""A release: what an agency would publish, read and written as one directory.

```
release.json            mechanism, parameters, specification card, tables (with cell labels),
                        randomness, format version, input digest
geography.parquet       the published blocks (every block with a housing unit or facility); for
                        a declared census, every bottom unit with its geocode at each level
census.json             the census's document (not for the US 2010 census, which
                        release.json names with its digest)
tables/<TABLE>.parquet  long form: level, geoid, cell, count (rows absent = 0; null = suppressed)
microdata/persons.parquet, units.parquet   only for mechanisms that output microdata
artifacts/<NAME>.parquet   what else the mechanism publishes, each declared by it (TopDown's mdf
                        and measurements, SafeTab-H's group_tables and group_totals, a p-table)
```
A release never holds confidential values unless its mechanism is ``none``, whose card says so.

In memory a table is a :class:`~sdclab.core.tables.published.PublishedTable`: count matrices and
suppressed-cell masks by level. The long form above is written by :func:`write_release` and read
by :func:`read_release` only.

``release.json`` also records ``digests``: the SHA-256 of every other file of the release and of
its own content (every key but ``digests``). Reading checks them, so a release edited after it was
written (a count changed, a row removed, a file truncated or replaced, a field of release.json
changed) is refused with a message naming the file; so is a release.json without digests.

The digests prove integrity, not authenticity: anyone can edit a release and digest it again. So
reading also checks the content against what the mechanism could have produced with the
parameters the release records: its noise record is the one the mechanism states for them, and
every value an attack reads passes the mechanism's own check
(:attr:`~sdclab.protection.base.Mechanism.check`, :mod:`sdclab.protection.checks`).

The package: :mod:`~sdclab.release.model` the ``Release`` value and its ``release.json`` content,
:mod:`~sdclab.release.artifacts` the artifacts a mechanism declares and their checks,
:mod:`~sdclab.release.tabulated` releases tabulated from a population,
:mod:`~sdclab.release.writing` the atomic write, :mod:`~sdclab.release.digests` the digests,
:mod:`~sdclab.release.metadata` and :mod:`~sdclab.release.reading` reading and checking a release
from disk. None of them imports the mechanism registry: the reader is given the mechanisms.
"""

from __future__ import annotations

from sdclab.release.artifacts import (
    Artifact,
    ArtifactCheck,
    artifact_file,
    frame_problem,
    geoid_problem,
)
from sdclab.release.digests import DIGEST_ALGORITHM, DIGESTS_KEY, file_digest, metadata_digest
from sdclab.release.model import (
    CENSUS_FILE,
    EXACT_TABULATION,
    FORMAT_VERSION,
    GEOGRAPHY_FILE,
    MDF_ARTIFACT,
    RELEASE_FILE,
    RELEASE_KIND,
    Mechanisms,
    Protection,
    Release,
    ReleaseMechanism,
    table_metadata,
)
from sdclab.release.reading import read_release
from sdclab.release.tabulated import (
    exact_release,
    publishable_microdata,
    publishes_exact_tables,
    tabulated_release,
)
from sdclab.release.writing import write_release

__all__ = [
    "CENSUS_FILE",
    "DIGESTS_KEY",
    "DIGEST_ALGORITHM",
    "EXACT_TABULATION",
    "FORMAT_VERSION",
    "GEOGRAPHY_FILE",
    "MDF_ARTIFACT",
    "RELEASE_FILE",
    "RELEASE_KIND",
    "Artifact",
    "ArtifactCheck",
    "Mechanisms",
    "Protection",
    "Release",
    "ReleaseMechanism",
    "artifact_file",
    "exact_release",
    "file_digest",
    "frame_problem",
    "geoid_problem",
    "metadata_digest",
    "publishable_microdata",
    "publishes_exact_tables",
    "read_release",
    "table_metadata",
    "tabulated_release",
    "write_release",
]
