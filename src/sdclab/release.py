"""A release: what an agency would publish, read and written as one directory.

```
release.json            mechanism, parameters, specification card, tables (with cell labels),
                        randomness, format version, input digest
geography.parquet       the published blocks (every block with a housing unit or facility); for
                        a declared census, every bottom unit with its geocode at each level
census.json             a declared census's document (not for a built-in census, which
                        release.json names with its digest)
tables/<TABLE>.parquet  long form: level, geoid, cell, count (rows absent = 0; null = suppressed)
microdata/persons.parquet, units.parquet   only for mechanisms that output microdata
artifacts/<NAME>.parquet   what else the mechanism publishes, each declared by it (TopDown's mdf
                        and measurements, SafeTab-H's group_tables and group_totals, a p-table)
```
A release never holds confidential values unless its mechanism is ``none``, whose card says so.

In memory a table is a :class:`~sdclab.tables.published.PublishedTable`: count matrices and
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
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import polars as pl
import scipy.sparse as sp

from sdclab import __version__
from sdclab.accounting import SpecCard, no_protection_card
from sdclab.census.document import from_document, to_document
from sdclab.census.records import DeclaredGeography, geography_frame, geography_from_frame
from sdclab.censuses import is_built_in
from sdclab.censuses.us2010.geography import GEOID_LENGTH, FipsGeography
from sdclab.errors import InputError
from sdclab.fileio import (
    json_safe,
    output_directory,
    read_input_parquet,
    read_json_object,
    write_json,
    write_parquet,
)
from sdclab.geography import Geography
from sdclab.population import Population
from sdclab.population.columns import DATA_DEFINED, RECORD_KEY
from sdclab.randomness import exact_record
from sdclab.tables.definition import TableDef
from sdclab.tables.published import LONG_SCHEMA, PublishedTable
from sdclab.tables.tabulate import tabulate

if TYPE_CHECKING:
    from sdclab.census.model import Census

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


class ReleaseMechanism(Protocol):
    """What reading a release needs of the mechanism it names (a registered
    :class:`~sdclab.protection.base.Mechanism`): its parameters, the noise it states, the
    artifacts it declares and the check of its values. The reader is given the mechanisms;
    this module never imports their registry."""

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
CENSUS_FILE = "census.json"
MDF_ARTIFACT = "mdf"
"""The artifact of a histogram mechanism's person records (TopDown's Microdata Detail File)."""
DIGESTS_KEY = "digests"
DIGEST_ALGORITHM = "sha256"


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
    census: Census = field(default_factory=lambda: _us2010(), compare=False, repr=False)
    """The census the release is of: its tables are that census's."""

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
        guarantee = g.text() if g.is_formal else "no formal guarantee"
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


def exact_release(population: Population, names: Sequence[str] | None = None) -> Release:
    """The unprotected tabulation (mechanism ``none``): every table exactly as in the data."""
    counts = tabulate(population, names)
    return Release(
        mechanism="none",
        parameters={},
        card=no_protection_card(),
        tables={name: PublishedTable.from_counts(tc) for name, tc in counts.items()},
        randomness=exact_record(),
        input_digest=population.digest,
        geography=population.geography,
        protection=Protection(False, EXACT_TABULATION),
        sources=population.sources,
        census=population.census,
    )


def publishes_exact_tables(release: Release, population: Population) -> bool:
    """Whether every table ``release`` publishes equals the exact tabulation of ``population``
    at every level, no cell withheld (a release without tables publishes no exact table).

    Tables are compared one at a time and the first that differs ends the search, so a release
    that protects costs about one table's tabulation.
    """
    if not release.tables or not np.array_equal(
        release.geography.blocks, population.geography.blocks
    ):
        return False
    for name, published in release.tables.items():
        exact = PublishedTable.from_counts(tabulate(population, [name])[name])
        for level in published.levels:
            if published.suppressed(level).nnz:
                return False
            if (published.matrix(level) != exact.matrix(level)).nnz:
                return False
    return True


def publishable_microdata(population: Population, rng: np.random.Generator) -> Population:
    """Protected microdata as a release may carry it: new ids, shuffled within blocks.

    The input's person and unit identifiers would link published records back to the confidential
    file (and reveal, for instance, which households were swapped), so they are replaced by
    sequential ids in block order, with a random order inside each block. Record keys of the cell
    key method are dropped: with them anyone could recompute the cell keys; so is whether a
    person is data-defined (a fact of the census's processing of their response).
    """
    population = population.with_records(  # a valid population without its optional columns
        persons=population.persons.drop(RECORD_KEY.name, DATA_DEFINED.name, strict=False),
        units=population.units.drop(RECORD_KEY.name, strict=False),
    )
    units = population.units
    unit_order = np.lexsort((rng.permutation(units.height), population.unit_block_index))
    new_unit_id = np.empty(units.height, dtype=np.int64)
    new_unit_id[unit_order] = np.arange(units.height)
    persons = population.persons
    person_order = np.lexsort((rng.permutation(persons.height), population.person_block_index))
    new_units = units[unit_order].with_columns(unit_id=pl.Series(np.arange(units.height)))
    new_persons = persons[person_order].with_columns(
        person_id=pl.Series(np.arange(persons.height)),
        unit_id=pl.Series(new_unit_id[population.person_unit_row[person_order]]),
    )
    return population.with_records(new_persons, new_units)  # renumbered, reordered


def tabulated_release(
    mechanism: str,
    parameters: dict[str, Any],
    card: SpecCard,
    protected: Population,
    original: Population,
    rng: np.random.Generator,
    notes: dict[str, Any] | None = None,
) -> Release:
    """A pre-tabular mechanism's release: every table tabulated from its protected microdata."""
    return Release(
        mechanism=mechanism,
        parameters=parameters,
        card=card,
        tables={name: PublishedTable.from_counts(tc) for name, tc in tabulate(protected).items()},
        randomness={},  # the stream alone: completed by protection.run
        input_digest=original.digest,
        geography=original.geography,
        microdata=publishable_microdata(protected, rng),
        notes=notes or {},
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
        if not is_built_in(release.census):
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


def file_digest(file: Path) -> str:
    """SHA-256 of a file's bytes (hex)."""
    digest = hashlib.sha256()
    with Path(file).open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def metadata_digest(meta: dict[str, Any]) -> str:
    """SHA-256 (hex) of release.json's content without its ``digests``, in a canonical form."""
    body = {k: v for k, v in meta.items() if k != DIGESTS_KEY}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def read_release(path: Path, mechanisms: Mechanisms) -> Release:
    """Read and check a release directory made by one of ``mechanisms`` (the registry,
    :data:`sdclab.protection.MECHANISMS`; :func:`sdclab.api.read_release` passes it); anything
    malformed is an :class:`InputError`.

    The content is checked first, then the digests recorded in release.json: a file that does not
    match them was changed after the release was written. When the content is also malformed, its
    message says which files changed.
    """
    path = Path(path)
    meta = _load_metadata(path)
    changed = _changed_files(path, meta)
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
    census = _read_census(path, meta)
    mechanism, parameters = _check_metadata(path / RELEASE_FILE, meta, census, mechanisms)
    geography = _read_geography(path / GEOGRAPHY_FILE, census)
    valid = _valid_geoids(geography)
    geoids = {level: geography.geoids(level) for level in geography.levels}
    tables = {
        name: _read_table(path / "tables" / f"{name}.parquet", census.table(name), valid, geoids)
        for name in meta["tables"]
    }
    microdata = None
    if meta["microdata"]:
        from sdclab.population.io import validate

        microdata = validate(
            read_input_parquet(path / "microdata" / "persons.parquet"),
            read_input_parquet(path / "microdata" / "units.parquet"),
            persons_source=str(path / "microdata" / "persons.parquet"),
            units_source=str(path / "microdata" / "units.parquet"),
        )
    artifacts = _read_artifacts(path, meta, geography, mechanism)
    read = [path / GEOGRAPHY_FILE, *(path / "tables" / f"{name}.parquet" for name in tables)]
    read += [] if is_built_in(census) else [path / CENSUS_FILE]
    read += [path / artifact_file(name) for name in artifacts]
    if microdata is not None:
        read += [path / "microdata" / "persons.parquet", path / "microdata" / "units.parquet"]
    _unrecorded(path, meta, read)
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


def artifact_file(name: str) -> str:
    """Where an artifact is kept in a release directory."""
    return f"artifacts/{name}.parquet"


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
    unknown = keys.join(_valid_geoids(geography), on=["level", "geoid"], how="anti")
    if unknown.height:
        row = unknown.row(0, named=True)
        return f"geoid {row['geoid']!r} is not a {row['level']} of this release's geography"
    return None


_REQUIRED_KEYS = {
    "format_version": int,
    "mechanism": str,
    "parameters": dict,
    "specification": dict,
    "randomness": dict,
    "input_digest": str,
    "tables": dict,
    "microdata": bool,
}


def _load_metadata(path: Path) -> dict[str, Any]:
    """release.json as a JSON object (not yet checked)."""
    file = path / RELEASE_FILE
    if not path.is_dir():
        raise InputError(f"{path}: not a release directory")
    if not file.is_file():
        raise InputError(f"{file}: missing; {path} is not a release directory")
    return read_json_object(file)


_HEX_DIGEST = re.compile(r"[0-9a-f]{64}")


def _changed_files(path: Path, meta: dict[str, Any]) -> list[str]:
    """What no longer matches the digests in release.json (every release records them)."""
    if DIGESTS_KEY not in meta:
        return [
            f"{RELEASE_FILE} records no {DIGESTS_KEY} (sdclab records them in every release): it "
            "was edited after the release was written, or is not an sdclab release"
        ]
    file = path / RELEASE_FILE
    digests = meta[DIGESTS_KEY]
    if (
        not isinstance(digests, dict)
        or digests.get("algorithm") != DIGEST_ALGORITHM
        or not isinstance(digests.get("files"), dict)
        or not isinstance(digests.get(RELEASE_FILE), str)
    ):
        raise InputError(
            f"{file}: {DIGESTS_KEY} must be a JSON object with algorithm {DIGEST_ALGORITHM!r}, "
            f"files (name: digest) and {RELEASE_FILE} (the digest of the other keys)"
        )
    changed = []
    for name, recorded in digests["files"].items():
        relative = PurePosixPath(name)
        if relative.is_absolute() or ".." in relative.parts or name in ("", RELEASE_FILE):
            raise InputError(f"{file}: {DIGESTS_KEY} names {name!r}, not a file of the release")
        target = path.joinpath(*relative.parts)
        if not isinstance(recorded, str) or not _HEX_DIGEST.fullmatch(recorded):
            raise InputError(f"{file}: the digest of {name} is not a SHA-256 hex digest")
        if not target.is_file():
            changed.append(f"{name} is missing (release.json records its digest)")
        elif file_digest(target) != recorded:
            changed.append(
                f"{name} does not match the digest recorded in {RELEASE_FILE}: it was changed "
                "after the release was written"
            )
    if metadata_digest(meta) != digests[RELEASE_FILE]:
        changed.append(
            f"{RELEASE_FILE} was edited after the release was written (its content does not match "
            "the digest it records)"
        )
    return changed


def _unrecorded(path: Path, meta: dict[str, Any], files: Sequence[Path]) -> None:
    """Every file the release is read from must have a digest (missing digests: reported by
    :func:`_changed_files`)."""
    if DIGESTS_KEY not in meta:
        return
    for file in files:
        name = file.relative_to(path).as_posix()
        if name not in meta[DIGESTS_KEY]["files"]:
            raise InputError(f"release {path}: {RELEASE_FILE} records no digest for {name}")


def _check_metadata(
    file: Path, meta: dict[str, Any], census: Census, mechanisms: Mechanisms
) -> tuple[ReleaseMechanism, Any]:
    """The keys of release.json and their types, its tables, its specification card and its
    noise record; the mechanism (one of ``mechanisms``) and its parameters, parsed."""
    missing = [k for k in _REQUIRED_KEYS if k not in meta]
    if missing:
        raise InputError(f"{file}: missing key(s) {', '.join(missing)}")
    for key, kind in _REQUIRED_KEYS.items():
        if not isinstance(meta[key], kind) or (kind is int and isinstance(meta[key], bool)):
            raise InputError(
                f"{file}: {key} must be a JSON {kind.__name__.replace('dict', 'object')}"
            )
    if meta["format_version"] != FORMAT_VERSION:
        raise InputError(
            f"{file}: format_version {meta['format_version']!r} is not supported "
            f"(expected {FORMAT_VERSION})"
        )
    if not isinstance(meta.get("noise", {}), dict):
        raise InputError(f"{file}: noise must be a JSON object")
    unknown = [name for name in meta["tables"] if name not in census.tables]
    if unknown:
        raise InputError(f"{file}: unknown table(s) {', '.join(unknown)} of census {census.name}")
    for name, info in meta["tables"].items():
        expected = table_metadata(census.table(name))
        if not isinstance(info, dict):
            raise InputError(f"{file}: the entry of table {name} must be a JSON object")
        differs = [k for k, v in expected.items() if info.get(k) != v]
        if differs:
            raise InputError(
                f"{file}: table {name} has {', '.join(differs)} that differ from the catalogue"
            )
    try:
        SpecCard.from_dict(meta["specification"])
    except (TypeError, KeyError, AttributeError, ValueError) as exc:
        raise InputError(f"{file}: malformed specification card ({exc})") from None
    mechanism = _mechanism(file, meta, mechanisms)
    parameters = _check_parameters(file, mechanism, meta["parameters"], census)
    _check_noise(file, meta["mechanism"], mechanism, parameters, meta.get("noise", {}))
    return mechanism, parameters


def _mechanism(file: Path, meta: dict[str, Any], mechanisms: Mechanisms) -> ReleaseMechanism:
    """The mechanism release.json names, one of ``mechanisms``."""
    name = meta.get("mechanism")
    if not isinstance(name, str) or name not in mechanisms:
        raise InputError(f"{file}: unknown mechanism {name!r} (known: {', '.join(mechanisms)})")
    return mechanisms[name]


def _check_parameters(
    file: Path, mechanism: ReleaseMechanism, parameters: dict[str, Any], census: Census
) -> Any:
    """The parameters are valid for the mechanism: parsed."""
    try:
        mechanism.parameters.check_recorded(parameters)
        return mechanism.parse(parameters, census)
    except InputError as exc:  # "mechanism NAME, parameter KEY: expected …, got …"
        raise InputError(f"{file}: parameters: {exc}") from None


def _check_noise(
    file: Path, name: str, entry: ReleaseMechanism, parameters: Any, noise: dict[str, Any]
) -> None:
    """The noise record is the one the mechanism states for the recorded parameters (an attack
    reads its figures: a geometric scale), or empty (a release that states none)."""
    if not noise:
        return
    if entry.noise is None:
        raise InputError(f"{file}: noise is recorded, but mechanism {name} states none")
    expected = json.loads(json.dumps(json_safe(entry.noise(parameters).to_dict())))
    where = _first_difference(noise, expected, "noise")
    if where is not None:
        raise InputError(
            f"{file}: {where} is not what mechanism {name} states for the recorded parameters "
            "(the noise record follows from them)"
        )


def _first_difference(given: Any, expected: Any, where: str) -> str | None:
    """The first key path at which ``given`` differs from ``expected`` (JSON values), or None."""
    if isinstance(given, dict) and isinstance(expected, dict):
        for key in sorted(set(given) | set(expected), key=str):
            if key not in given or key not in expected:
                return f"{where}.{key}"
            found = _first_difference(given[key], expected[key], f"{where}.{key}")
            if found is not None:
                return found
        return None
    same = given == expected and type(given) is type(expected)
    return None if same or (_number(given) and _number(expected) and given == expected) else where


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _geography_frame(geography: Geography) -> pl.DataFrame:
    """The geography as ``geography.parquet`` holds it."""
    if isinstance(geography, DeclaredGeography):
        return geography_frame(geography)
    blocks = geography.geoid_strings(geography.blocks, geography.levels[-1])
    return blocks.alias("block").to_frame()


def _read_geography(file: Path, census: Census) -> Geography:
    frame = read_input_parquet(file)
    if not is_built_in(census):
        return geography_from_frame(census.geography, frame, str(file))
    if frame.columns != ["block"] or frame.schema["block"] != pl.String:
        raise InputError(f"{file}: expected one string column 'block'")
    bad = frame.filter(~pl.col("block").str.contains(r"^[0-9]{15}$").fill_null(False))
    if bad.height:
        raise InputError(f"{file}: block {bad['block'][0]!r} is not a 15-digit geocode")
    return FipsGeography.from_block_codes(frame["block"].cast(pl.Int64).to_numpy())


def _us2010() -> Census:
    from sdclab.censuses import us2010

    return us2010.census()


def _read_census(path: Path, meta: dict[str, Any]) -> Census:
    """The census a release is of: a built-in one it names, or the document it carries; its
    digest must be the one release.json records (a release written before releases named their
    census is of the US 2010 census)."""
    from sdclab.censuses import BUILT_IN

    file = path / RELEASE_FILE
    named = meta.get("census", {"name": "us2010", "digest": _us2010().digest})
    if not (isinstance(named, dict) and set(named) == {"name", "digest"}) or not all(
        isinstance(v, str) for v in named.values()
    ):
        raise InputError(f'{file}: census must be {{"name": TEXT, "digest": TEXT}}')
    if (path / CENSUS_FILE).is_file():
        try:
            census = from_document(read_json_object(path / CENSUS_FILE))
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            raise InputError(f"{path / CENSUS_FILE}: not a census document ({exc})") from None
    elif named["name"] in BUILT_IN:
        census = BUILT_IN[named["name"]]()
    else:
        raise InputError(
            f"{file}: census {named['name']!r} is not built in and {CENSUS_FILE} is missing"
        )
    if census.digest != named["digest"] or census.name != named["name"]:
        raise InputError(
            f"{file}: the release is of census {named['name']!r} with digest {named['digest']}, "
            f"not the {census.name!r} it holds or names ({census.digest})"
        )
    return census


def _valid_geoids(geography: Geography) -> pl.DataFrame:
    """(level, geoid) of every geounit of the release."""
    frames = [
        pl.DataFrame({"geoid": geography.geoids(level)}).with_columns(level=pl.lit(level))
        for level in geography.levels
    ]
    return pl.concat(frames).select("level", "geoid").unique()


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
