"""Reconstructed records and their files: what a reconstruction is, written and read back.

A reconstruction directory holds persons.parquet (one row per reconstructed person: its geounit
in column ``block`` and its attributes), tracts.parquet (one row per program), metrics.json,
optionally solvar.parquet and, for a declared census, census.json. Every file is user input when
read: checked before use, a problem is one :class:`~sdclab.core.errors.InputError` naming the file.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import polars as pl

from sdclab.censuses import is_us2010
from sdclab.censuses.us2010 import schema
from sdclab.core.arrays import IntArray
from sdclab.core.census.document import from_document, to_document
from sdclab.core.census.model import Census
from sdclab.core.errors import InputError
from sdclab.core.fileio import (
    output_directory,
    read_input_parquet,
    read_json_object,
    write_json,
    write_parquet,
)


@dataclass(frozen=True)
class Reconstruction:
    """Reconstructed persons (block, sex, age, age_min, age_max, race, hispanic; null where the
    tables do not determine it) and one row of figures per tract."""

    persons: pl.DataFrame
    tracts: pl.DataFrame
    attributes: dict[str, Any] = field(default_factory=dict)
    """What the release's tables determine (:meth:`Resolution.summary`); empty when read back."""
    cells: IntArray | None = field(default=None, compare=False, repr=False)
    """Person-domain cell of every record, the first of its class (in memory only)."""
    census: Census | None = field(default=None, compare=False, repr=False)
    """The declared census the records are of (None: the US 2010 census)."""

    def domain_cells(self) -> IntArray:
        """Person-domain cell of every record (from the columns when not kept in memory)."""
        if self.cells is not None:
            return self.cells
        domain = schema.PERSON if self.census is None else self.census.reconstruction_domain
        columns = self.persons.select(domain.names)
        if sum(columns.null_count().row(0)):
            raise InputError(
                "the reconstruction has records with unknown attributes; their cells are known "
                "only to the run that made it"
            )
        if self.census is None:
            return domain.cell_index({c: columns[c].to_numpy() for c in domain.names})
        positions = {  # a declared census's text codes
            c: columns[c].replace_strict(self.census.attribute(c).position).to_numpy()
            for c in domain.names
        }
        return domain.cell_index(positions)

    def metrics(self) -> dict[str, Any]:
        statuses = self.tracts.group_by("status").len().sort("status")
        modes = self.tracts.group_by("mode").len().sort("mode")
        return {
            "tracts": self.tracts.height,
            "time_limited_tracts": int(self.tracts[TIME_LIMITED].sum()),
            "blocks": self.persons["block"].n_unique(),
            "persons": self.persons.height,
            "solve_seconds_total": round(float(self.tracts["seconds"].sum()), 3),
            "statuses": dict(statuses.iter_rows()),
            "modes": dict(modes.iter_rows()),
            "total_absolute_deviation": float(self.tracts["deviation"].sum()),
            "variables": int(self.tracts["variables"].sum()),
            "constraints": int(self.tracts["constraints"].sum()),
            **self.attributes,
            **({} if self.census is None else {"census": census_named_by(self.census)}),
        }


def census_named_by(census: Census | None) -> dict[str, str] | None:
    """How metadata name a declared census (None: the US 2010 census, which needs no naming)."""
    if census is None or is_us2010(census):
        return None
    return {"name": census.name, "digest": census.digest}


METRICS_FILE = "metrics.json"
CENSUS_FILE = "census.json"
RECONSTRUCTION_KIND = "reconstruction"
AGE_BOUNDS = ("age_min", "age_max")
"""The youngest and oldest age the tables allow for each reconstructed person: optional columns
of persons.parquet (both or neither) when it is read."""
CONFIDENCE = "confidence"
"""Optional column of persons.parquet: each record's share of the further draws that hold it."""


class Records(Protocol):
    """Reconstructed persons with their tracts' solve records (a :class:`Reconstruction` or the
    API's ``ReconstructionResult``)."""

    @property
    def persons(self) -> pl.DataFrame: ...

    @property
    def tracts(self) -> pl.DataFrame: ...


def write_reconstruction(
    out: Path,
    reconstruction: Records,
    metrics: dict[str, Any],
    solvar: pl.DataFrame | None = None,
    protect: tuple[Path, ...] = (),
    census: Census | None = None,
) -> None:
    """RECON/persons.parquet, tracts.parquet, [solvar.parquet], metrics.json — atomically; a
    reconstruction of a declared census also carries the census (census.json, as a release
    does) and names it in metrics.json, so that it can be read without its release."""
    declared = census is not None and not is_us2010(census)
    with output_directory(out, RECONSTRUCTION_KIND, protect) as tmp:
        write_parquet(reconstruction.persons, tmp / "persons.parquet")
        write_parquet(reconstruction.tracts, tmp / "tracts.parquet")
        if solvar is not None:
            write_parquet(solvar, tmp / "solvar.parquet")
        if declared:
            assert census is not None
            write_json(to_document(census), tmp / CENSUS_FILE)
            metrics = {**metrics, "census": census_named_by(census)}
        write_json(metrics, tmp / METRICS_FILE)


# ---------------------------------------------------------------------------------------------
# Reading a reconstruction directory: every file is user input, checked before use
# ---------------------------------------------------------------------------------------------

PERSONS_FILE = "persons.parquet"
TRACTS_FILE = "tracts.parquet"
SOLVAR_FILE = "solvar.parquet"
TRACT_COLUMNS = {
    "tract": "string",
    "status": "string",
    "mode": "string",
    "persons": "integer",
    "deviation": "number",
    "seconds": "number",
    "variables": "integer",
    "constraints": "integer",
}
TIME_LIMITED = "time_limited"
"""A boolean column of tracts.parquet: whether wall time stopped one of the tract's solves, so
that a rerun may differ (optional when read: reconstructions written before it lack it)."""
SOLVAR_COLUMNS = {
    "block": "string",
    "persons": "integer",
    "solvar": "number",
    "status": "string",
    "unique": "boolean",
}
_INTEGER, _NULLABLE_NUMBER = (int,), (int, float, type(None))
METRICS_KEYS: dict[str, tuple[type, ...]] = {
    "mechanism": (str,),
    "tracts": _INTEGER,
    "blocks": _INTEGER,
    "persons": _INTEGER,
    "statuses": (dict,),
    "modes": (dict,),
    "solve_seconds_total": _NULLABLE_NUMBER,  # NaN is written as null
    "total_absolute_deviation": _NULLABLE_NUMBER,
    "variables": _INTEGER,
    "constraints": _INTEGER,
}
"""The keys every reconstruction's metrics.json holds (:meth:`Reconstruction.metrics`), by type."""
OPTIONAL_METRICS_KEYS: dict[str, tuple[type, ...]] = {
    "release": (str,),
    "block_only": (bool,),
    "knowledge": (str,),
    "draws": _INTEGER,
    "seconds": _NULLABLE_NUMBER,
    "variability": (dict,),
    "time_limited_tracts": _INTEGER,
    "time_limit": (int, float),
    "node_limit": (int, type(None)),
    "census": (dict,),
}
"""Keys that only some writers record (``release``: sdclab reconstruct, not an experiment;
``block_only``: whether the tract tables were left out, recorded since it could be)."""
_JSON_TYPES = {
    bool: "true or false",
    str: "a string",
    int: "an integer",
    float: "a number",
    dict: "a JSON object",
    type(None): "null",
}
WRITTEN_AS: dict[str, type[pl.DataType]] = {
    "string": pl.String,
    "integer": pl.Int64,
    "number": pl.Float64,
    "boolean": pl.Boolean,
}
"""The type a column of each kind has in the files sdclab writes (reading accepts any integer
type as integer, and integers as numbers)."""
_COLUMN_KINDS: dict[str, Callable[[pl.DataType], bool]] = {
    "string": lambda t: t == pl.String,
    "integer": lambda t: t.is_integer(),
    "number": lambda t: t.is_integer() or t.is_float(),
    "boolean": lambda t: t == pl.Boolean,
}
_CODE_RANGES = {a.name: (a.low, a.high) for a in schema.PERSON.attributes} | {
    bound: (schema.AGE.low, schema.AGE.high) for bound in AGE_BOUNDS
}
"""The codes each column of the reconstructed persons may hold (null aside)."""
_BLOCK_PATTERN = r"^[0-9]{15}$"
_TRACT_PATTERN = r"^[0-9]{11}$"


def _not_a_reconstruction(path: Path) -> str:
    return f"{path} is not a reconstruction directory (sdclab reconstruct writes one)"


def read_reconstruction_metrics(path: Path) -> dict[str, Any]:
    """RECON/metrics.json, checked: a JSON object with the keys a reconstruction records."""
    path = Path(path)
    file = path / METRICS_FILE
    if not file.is_file():
        raise InputError(f"{file}: missing; {_not_a_reconstruction(path)}")
    metrics = read_json_object(file)
    missing = [k for k in METRICS_KEYS if k not in metrics]
    if missing:
        raise InputError(
            f"{file}: missing key(s) {', '.join(missing)}; {_not_a_reconstruction(path)}"
        )
    for key, kinds in {**METRICS_KEYS, **OPTIONAL_METRICS_KEYS}.items():
        value = metrics.get(key)
        boolean = isinstance(value, bool)
        if key in metrics and (not isinstance(value, kinds) or boolean != (bool in kinds)):
            names = " or ".join(_JSON_TYPES[k] for k in kinds)
            raise InputError(f"{file}: {key} must be {names}, not {json.dumps(value)[:40]}")
    if metrics.get("release") == "":
        raise InputError(f"{file}: release must name the release directory, not be empty")
    return metrics


GIVE_THE_RELEASE = "give the attacked release with --release"
"""What to do when a reconstruction to be reidentified records no release."""


def attacked_release(path: Path, remedy: str = GIVE_THE_RELEASE) -> Path:
    """The release directory a reconstruction was made from, as its metrics.json records it;
    ``remedy`` says what to do when it records none (how the caller's user gives it)."""
    metrics = read_reconstruction_metrics(path)
    if "release" not in metrics:
        raise InputError(f"{Path(path) / METRICS_FILE}: records no release (key release); {remedy}")
    return Path(metrics["release"])


def read_reconstruction(path: Path) -> Reconstruction:
    """Read and check a reconstruction directory (persons and per-tract figures, which must
    agree with its metrics.json); anything malformed is an :class:`InputError` naming the file."""
    path = Path(path)
    if not path.is_dir():
        raise InputError(_not_a_reconstruction(path))
    for name in (PERSONS_FILE, TRACTS_FILE, METRICS_FILE):
        if not (path / name).is_file():
            raise InputError(f"{path / name}: missing; {_not_a_reconstruction(path)}")
    metrics = read_reconstruction_metrics(path)
    census = _recorded_census(path, metrics)
    owner = f"the reconstruction {path}"
    persons = read_input_parquet(path / PERSONS_FILE, owner)
    if census is None:
        persons = _check_persons(path / PERSONS_FILE, persons)
    else:
        persons = _check_declared_persons(path / PERSONS_FILE, persons, census)
    tracts = read_input_parquet(path / TRACTS_FILE, owner)
    flag = {TIME_LIMITED: "boolean"} if TIME_LIMITED in tracts.columns else {}
    _check_columns(path / TRACTS_FILE, tracts, TRACT_COLUMNS | flag)
    if census is None:
        tract_geoid = "an 11-digit tract geocode"
        _check_geoids(path / TRACTS_FILE, tracts["tract"], _TRACT_PATTERN, tract_geoid)
    for frame, file, key in ((persons, PERSONS_FILE, "persons"), (tracts, TRACTS_FILE, "tracts")):
        if frame.height != metrics[key]:
            raise InputError(
                f"{path / file}: {frame.height} rows, but {path / METRICS_FILE} records "
                f"{metrics[key]} {key}; the files are not of one reconstruction"
            )
    return Reconstruction(persons, tracts, census=census)


def _recorded_census(path: Path, metrics: dict[str, Any]) -> Census | None:
    """The declared census a reconstruction carries (None: the US 2010 census)."""
    if "census" not in metrics:
        return None
    named = metrics["census"]
    file = path / CENSUS_FILE
    try:
        census = from_document(read_json_object(file))
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise InputError(f"{file}: not a census document ({exc})") from None
    if named != {"name": census.name, "digest": census.digest}:
        raise InputError(
            f"{path / METRICS_FILE}: census {named} is not the one {CENSUS_FILE} holds "
            f"({census.name}, {census.digest})"
        )
    return census


def _check_declared_persons(file: Path, persons: pl.DataFrame, census: Census) -> pl.DataFrame:
    """The reconstructed persons of a declared census: its geounit and the reconstruction's
    attributes as text codes of the census's code lists (null where not determined)."""
    settings = census.reconstruction
    bounds = [f"{a}_{end}" for a in settings.resolved for end in ("min", "max")]
    expected = ["block", *settings.attributes, *bounds]
    if set(persons.columns) - {CONFIDENCE} != set(expected):
        raise InputError(f"{file}: columns {persons.columns}, expected {expected}")
    wrong = [c for c in expected if persons.schema[c] != pl.String]
    if wrong:
        raise InputError(f"{file}: column {wrong[0]} is {persons.schema[wrong[0]]}, expected text")
    _check_confidence(file, persons)
    units = census.geography.units.get(settings.level)
    if units is not None:
        stray = persons.filter(~pl.col("block").is_in(list(units)))
        if stray.height:
            raise InputError(
                f"{file}: block {stray['block'][0]!r} is not a {settings.level} of the census"
            )
    for column in expected[1:]:
        codes = census.attribute(column.rsplit("_", 1)[0] if column in bounds else column).codes
        unknown = persons.filter(~pl.col(column).is_in(list(codes)) & pl.col(column).is_not_null())
        if unknown.height:
            raise InputError(f"{file}: {column} {unknown[column][0]!r} is not a code of the census")
    return persons


def read_solvar(path: Path) -> pl.DataFrame | None:
    """RECON/solvar.parquet (solution variability per block), checked; None when absent."""
    file = Path(path) / SOLVAR_FILE
    if not file.exists():
        return None
    solvar = read_input_parquet(file, f"the reconstruction {path}")
    _check_columns(file, solvar, SOLVAR_COLUMNS)
    _check_geoids(file, solvar["block"], _BLOCK_PATTERN, "a 15-digit block geocode")
    return solvar


def _check_persons(file: Path, persons: pl.DataFrame) -> pl.DataFrame:
    """The reconstructed persons: block, the person attributes (null where the tables do not
    determine them) and both age bounds or neither, integer codes within their domains."""
    expected = ["block", *schema.PERSON.names]
    columns = set(persons.columns) - {CONFIDENCE}
    if not (columns == set(expected) or columns == {*expected, *AGE_BOUNDS}):
        raise InputError(
            f"{file}: columns {persons.columns}, expected {expected} (and "
            f"{', '.join(AGE_BOUNDS)}; {CONFIDENCE})"
        )
    _check_confidence(file, persons)
    codes = [c for c in persons.columns if c not in ("block", CONFIDENCE)]
    not_integer = [c for c in codes if not persons.schema[c].is_integer()]
    if persons.schema["block"] != pl.String or not_integer:
        raise InputError(
            f"{file}: column types {dict(persons.schema)}; expected block a string and the "
            "attributes integer codes"
        )
    _check_geoids(file, persons["block"], _BLOCK_PATTERN, "a 15-digit block geocode")
    missing = [b for b in AGE_BOUNDS if b in columns and persons[b].null_count()]
    if missing:
        raise InputError(f"{file}: column {missing[0]} has missing values")
    outside = persons.select((~pl.col(c).is_between(*_CODE_RANGES[c])).any() for c in codes)
    bad = [c for c, out in outside.row(0, named=True).items() if out]
    if bad:
        low, high = _CODE_RANGES[bad[0]]
        value = persons.filter(~pl.col(bad[0]).is_between(low, high))[bad[0]][0]
        raise InputError(f"{file}: {bad[0]} {value} outside {low}..{high}")
    return persons


def _check_confidence(file: Path, persons: pl.DataFrame) -> None:
    """The optional confidence column holds shares from 0 to 1."""
    if CONFIDENCE in persons.columns:
        share = persons[CONFIDENCE]
        if not share.dtype.is_float() or share.null_count() or not share.is_between(0, 1).all():
            raise InputError(f"{file}: column {CONFIDENCE} must hold shares from 0 to 1")


def _check_columns(file: Path, frame: pl.DataFrame, expected: dict[str, str]) -> None:
    """``frame`` has exactly the ``expected`` columns, each of its kind of type."""
    if set(frame.columns) != set(expected):
        raise InputError(f"{file}: columns {frame.columns}, expected {list(expected)}")
    wrong = [c for c, kind in expected.items() if not _COLUMN_KINDS[kind](frame.schema[c])]
    if wrong:
        column = wrong[0]
        raise InputError(
            f"{file}: column {column} is {frame.schema[column]}, expected {expected[column]}"
        )


def _check_geoids(file: Path, geoids: pl.Series, pattern: str, what: str) -> None:
    """Every value of ``geoids`` (a string column) matches ``pattern``."""
    bad = geoids.filter(~geoids.str.contains(pattern).fill_null(False))
    if bad.len():
        raise InputError(f"{file}: {geoids.name} {bad[0]!r} is not {what}")
