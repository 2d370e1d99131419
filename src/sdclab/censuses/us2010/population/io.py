"""Read, validate and write a population: the persons and units tables of docs/data.md.

A population directory holds ``persons.parquet`` or ``persons.csv`` and ``units.parquet`` or
``units.csv`` (one format per table). Loading checks everything the contract
(:mod:`sdclab.censuses.us2010.population.contract`) states and turns any bad input into one
:class:`InputError` naming the file, the row (1-based, not counting a CSV header), the column, the
value and what was expected, e.g. ``persons.csv row 7, column age: 130 is out of range (expected
0–115)``. Up to
:data:`~sdclab.censuses.us2010.population.problems.MAX_SHOWN` problems are reported (the first in
the message, the rest in ``details``) with a count of the others.

Decisions worth knowing:

* CSV files are untyped: every column is read as text and converted strictly here. Surrounding
  spaces are ignored; an empty field is a missing value; whole numbers are digits with an optional
  minus sign, and may end in a decimal point and zeros (``12``, ``12.0``: pandas writes integer
  columns that contain gaps so); a plus sign (``+12``) or exponent notation (``1e3``) is refused;
  booleans may be ``true``/``false``, ``True``/``False``, ``TRUE``/``FALSE`` or ``1``/``0``. Lines
  may end in LF, CRLF or CR alone (classic Mac OS: a file with CRs and no LF is read with each CR
  as a line break). Repeated column names are found in the header as written.
* Parquet columns may have any integer or float type for integer columns (floats must hold whole
  numbers; NaN counts as missing), or text, which is converted like CSV. ``block`` must be text:
  an integer block column has already lost its leading zeros and is rejected. A column of an
  Arrow type polars cannot take (decimal256, list views, a time zone it does not know) is refused
  by its type when the contract names it and dropped like any other extra column otherwise.
* A block geocode starts with a state FIPS code
(:data:`~sdclab.censuses.us2010.population.columns.STATE_CODES`:
  the states, DC and Puerto Rico).
* ``record_key`` is in both tables or in neither: the cell key method needs the key of every
  person and every unit, so keys of one table alone are refused rather than replaced.
* Columns that the contract does not name are allowed and left out of the :class:`Population`.
* A population with no persons is valid when it has no occupied housing units (every occupied
  housing unit needs exactly one householder), so a units-only population of vacant units and
  group-quarters facilities loads. An empty (0-byte) file is always an error: a CSV needs at
  least its header.
* Group-quarters facilities without residents are allowed.
* The optional detailed race and Hispanic origin columns of persons (``race_code1`` …
  ``race_code8``, ``hispanic_origin``) are all present or all absent. When present, each row needs
  at least one known code, filled from ``race_code1`` with no gap and no repeat, whose major races
  are exactly the row's ``race`` bitmask, and ``hispanic_origin`` is 0 exactly when ``hispanic``
  is 0.
* The optional ``data_defined`` column of persons is a boolean with no missing value (whether a
  record linkage can tie the person's record to a name); absent, every person is data-defined.
* Checks run in stages: files, columns, values, uniqueness, then links between the tables. A stage
  runs only when the one before it passed, so every message is about a real defect rather than an
  echo of an earlier one.

This module reads and writes; the checks of frames are
:mod:`sdclab.censuses.us2010.population.validation` (the stages and the rules between columns and
tables), :mod:`sdclab.censuses.us2010.population.conversion` (each column's values to the contract's
type and range) and :mod:`sdclab.censuses.us2010.population.problems` (how problems are collected
and reported).

Everything is vectorised with polars expressions (loops run over columns and rules, never rows),
except the diagnosis of a CSV file that polars cannot parse or that contains quote characters, which
is streamed through :mod:`csv` to find the offending row, and a CSV header, which :mod:`csv` reads
to find repeated names.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from polars.exceptions import PanicException

from sdclab.censuses.us2010.population.columns import (
    DATA_DEFINED,
    DETAILED_RACE_ETHNICITY_COLUMNS,
    PERSONS,
    RECORD_KEY,
    UNITS,
    ColumnSpec,
    with_optional,
)
from sdclab.censuses.us2010.population.contract import Population
from sdclab.censuses.us2010.population.conversion import wrong_type_text
from sdclab.censuses.us2010.population.problems import spec_dtype
from sdclab.censuses.us2010.population.validation import checked_blocks, checked_frames
from sdclab.core.csv_files import check_header, first_line, read_csv
from sdclab.core.errors import InputError
from sdclab.core.fileio import (
    Modes,
    check_replaceable,
    output_directory,
    polars_can_take,
    write_json,
    write_parquet,
)
from sdclab.core.findings import (
    Findings,
    input_error,
    single,
)

__all__ = ["read_population", "validate", "write_population"]


TABLES = ("persons", "units")
OPTIONAL_TABLES = ("blocks",)
"""Tables a population directory may hold besides :data:`TABLES`."""
FORMATS = ("parquet", "csv")
TABLE_SPECS = {"persons": PERSONS, "units": UNITS}


# ---------------------------------------------------------------------------------------------
# Reading files
# ---------------------------------------------------------------------------------------------


def read_population(path: Path) -> Population:
    """Load and validate the population in directory ``path`` (see the module docstring).

    Columns outside the contract are ignored. Raises :class:`InputError` on any bad input.
    """
    path = Path(path)
    if not path.exists():
        raise input_error(f"population directory {path} does not exist")
    if not path.is_dir():
        raise input_error(
            f"{path} is not a directory (expected a directory holding persons.parquet or "
            "persons.csv and units.parquet or units.csv)"
        )
    files = [required_file(path, table) for table in TABLES]
    persons, units = (read_table(file) for file in files)
    population = validate(
        persons,
        units,
        persons_source=files[0].name,
        units_source=files[1].name,
        sources=(path.absolute(),),
    )
    blocks_file = table_file(path, "blocks", required=False)
    if blocks_file is None:
        return population
    blocks = checked_blocks(read_table(blocks_file), source=blocks_file.name)
    return population.with_blocks(blocks)


def source_modes(path: Path) -> Modes:
    """The most a copy of the population in directory ``path`` may allow: what its directory
    and its table files grant (a copy of confidential microdata is never more readable)."""
    path = Path(path)
    files = [required_file(path, table) for table in TABLES]
    blocks = table_file(path, "blocks", required=False)
    return Modes.of(path, files if blocks is None else [*files, blocks])


def required_file(directory: Path, table: str) -> Path:
    """The one file holding the required ``table`` in ``directory``."""
    file = table_file(directory, table)
    assert file is not None  # required: its absence is an input error
    return file


def table_file(directory: Path, table: str, *, required: bool = True) -> Path | None:
    """The one file holding ``table`` in ``directory``, in either format (None: an optional
    table that is absent)."""
    present = [directory / f"{table}.{fmt}" for fmt in FORMATS]
    present = [file for file in present if file.exists()]
    if len(present) > 1:
        raise input_error(
            f"{directory}: both {table}.csv and {table}.parquet are present "
            f"(expected exactly one file for the {table} table; remove the other)"
        )
    if not present and not required:
        return None
    if not present:
        raise input_error(
            f"{directory}: no {table}.parquet or {table}.csv (expected the {table} table)"
        )
    return present[0]


def read_table(file: Path) -> pl.DataFrame:
    """Read one table file as polars found it (CSV: every column as text)."""
    try:
        size = file.stat().st_size
    except OSError as err:
        raise input_error(f"cannot read {file}: {err.strerror or err}") from None
    if size == 0:
        raise input_error(
            f"{file.name} is empty (expected a header line naming the columns, then one line "
            "per row)"
            if file.suffix == ".csv"
            else f"{file.name} is empty (expected a Parquet file)"
        )
    return read_csv(file, CONTRACT_NAMES) if file.suffix == ".csv" else read_parquet(file)


def read_parquet(file: Path) -> pl.DataFrame:
    """Read a Parquet file, turning a damaged or foreign file into an :class:`InputError`.

    The file is decoded and checked by pyarrow, as :func:`sdclab.core.fileio.read_parquet_checked`
    does (polars' own reader can abort the process on a damaged page header), and its columns are
    checked against the types polars can take before the table becomes a frame.
    """
    if file.is_dir():
        raise input_error(f"{file} is a directory (expected a Parquet file)")
    try:
        with file.open("rb"):
            pass
    except OSError as err:
        raise input_error(f"cannot read {file}: {err.strerror or err}") from None
    try:
        names = pq.read_schema(file).names  # pq.read_table refuses repeated names unclearly
    except (Exception, PanicException) as err:  # pyarrow raises many types here
        raise not_parquet(file, err) from None
    check_header(names, file.name).raise_if_any()
    try:
        table = pq.read_table(file)
        table.validate(full=True)  # text that is not UTF-8, which pl.from_arrow takes unchecked
    except (Exception, PanicException) as err:
        raise not_parquet(file, err) from None
    table = with_polars_types(table, file)
    try:
        frame = pl.from_arrow(table)
    except (Exception, PanicException) as err:
        raise not_parquet(file, err) from None
    if not isinstance(frame, pl.DataFrame):  # a table always converts to a frame
        raise not_parquet(file, TypeError("not a table"))
    return frame


def not_parquet(file: Path, err: BaseException) -> InputError:
    return input_error(
        f"{file.name} is not a readable Parquet file ({first_line(err)}); is it truncated or in "
        "another format?"
    )


def with_polars_types(table: pa.Table, file: Path) -> pa.Table:
    """The table without its columns of types polars cannot take (see :func:`polars_can_take`).

    Such a column is dropped, as every column outside the contract is, unless the contract names
    it: then the type is the problem, reported like a wrong polars type.
    """
    foreign = [i for i, field in enumerate(table.schema) if not polars_can_take(field.type)]
    if not foreign:
        return table
    index = TABLES.index(file.stem) if file.stem in TABLES else 0
    specs = with_optional(TABLE_SPECS.get(file.stem, ()), table.column_names)
    position = {spec.name: (i, spec) for i, spec in enumerate(specs)}
    found = Findings()
    for i in foreign:
        field = table.schema.field(i)
        if field.name in position:
            column, spec = position[field.name]
            text = wrong_type_text(spec, str(field.type), "other", file.name)
            found = found + single(index, text, column=column)
    found.raise_if_any()
    return table.select([i for i in range(table.num_columns) if i not in foreign])


CONTRACT_NAMES = frozenset(
    [spec.name for spec in (*PERSONS, *UNITS, RECORD_KEY, DATA_DEFINED)]
    + list(DETAILED_RACE_ETHNICITY_COLUMNS)
)
"""Every column name the contract knows, to tell a header split at the wrong delimiter."""


def validate(
    persons: pl.DataFrame,
    units: pl.DataFrame,
    *,
    persons_source: str = "persons",
    units_source: str = "units",
    sources: tuple[Path, ...] = (),
) -> Population:
    """Check two frames against the contract and return them as a :class:`Population`.

    ``*_source`` name the tables in messages (usually their file names); ``sources`` are the
    directories they were read from (:attr:`Population.sources`). The result has exactly
    the contract's columns, in its order and dtypes, plus the optional detailed race and
    Hispanic origin columns, ``data_defined`` and ``record_key`` when present; other columns are
    dropped. Raises :class:`InputError` listing up to
    :data:`~sdclab.censuses.us2010.population.problems.MAX_SHOWN` problems. (``Population(persons,
    units)`` runs the same checks, naming the tables persons and units.)
    """
    frames = checked_frames(
        persons, units, persons_source=persons_source, units_source=units_source
    )
    return Population._trusted(*frames, sources=sources)


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------


POPULATION_KIND = "population"
"""The output kind of a population directory (``synth``, an experiment's population step)."""


def write_population(
    population: Population,
    out_dir: Path,
    extra_json: dict[str, dict[str, Any]] | None = None,
    *,
    protect: tuple[Path, ...] = (),
    option: str = "--out",
) -> None:
    """Write ``persons.parquet``, ``units.parquet`` and each ``extra_json`` item as its NAME.

    ``out_dir`` is replaced as a whole, atomically: a reader sees the old content or the new,
    never a mixture, and a failure leaves the old content (or nothing) in place. It must lie
    apart from ``protect`` and from the directory the population was read from (``option``
    names it in messages).
    """
    extra = dict(extra_json or {})
    for name in extra:
        check_extra_name(name)
    protect = (*protect, *population.sources)
    check_replaceable(Path(out_dir), POPULATION_KIND, protect, option)
    persons = conform(population.persons, PERSONS)
    units = conform(population.units, UNITS)
    with output_directory(Path(out_dir), POPULATION_KIND, protect, option) as tmp:
        write_parquet(persons, tmp / "persons.parquet")
        write_parquet(units, tmp / "units.parquet")
        if population.blocks is not None:
            write_parquet(population.blocks, tmp / "blocks.parquet")
        for name, data in extra.items():
            write_json(data, tmp / name)


def check_extra_name(name: str) -> None:
    """An extra file must be a plain ``*.json`` name that does not shadow a table."""
    if Path(name).name != name or name.startswith(".") or not name.endswith(".json"):
        raise ValueError(f"extra file name {name!r} must be a plain file name ending in .json")


def conform(frame: pl.DataFrame, specs: tuple[ColumnSpec, ...]) -> pl.DataFrame:
    """The contract's columns of a frame, in contract order and dtypes."""
    return frame.select(
        [pl.col(s.name).cast(spec_dtype(s)) for s in with_optional(specs, frame.columns)]
    )
