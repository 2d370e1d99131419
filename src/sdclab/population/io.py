"""Read, validate and write a population: the persons and units tables of docs/data.md.

A population directory holds ``persons.parquet`` or ``persons.csv`` and ``units.parquet`` or
``units.csv`` (one format per table). Loading checks everything the contract
(:mod:`sdclab.population.contract`) states and turns any bad input into one :class:`InputError`
naming the file, the row (1-based, not counting a CSV header), the column, the value and what was
expected, e.g. ``persons.csv row 7, column age: 130 is out of range (expected 0–115)``. Up to
:data:`~sdclab.population.problems.MAX_SHOWN` problems are reported (the first in the message,
the rest in ``details``) with a count of the others.

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
* A block geocode starts with a state FIPS code (:data:`~sdclab.population.columns.STATE_CODES`:
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

This module reads and writes; the checks of frames are :mod:`sdclab.population.validation` (the
stages and the rules between columns and tables), :mod:`sdclab.population.conversion` (each
column's values to the contract's type and range) and :mod:`sdclab.population.problems` (how
problems are collected and reported).

Everything is vectorised with polars expressions (loops run over columns and rules, never rows),
except the diagnosis of a CSV file that polars cannot parse or that contains quote characters, which
is streamed through :mod:`csv` to find the offending row, and a CSV header, which :mod:`csv` reads
to find repeated names.
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Iterator, Sequence
from io import BytesIO
from pathlib import Path
from typing import IO, Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from polars.exceptions import PanicException, PolarsError

from sdclab.errors import InputError
from sdclab.fileio import (
    Modes,
    check_replaceable,
    output_directory,
    polars_can_take,
    write_json,
    write_parquet,
)
from sdclab.population.columns import (
    DATA_DEFINED,
    DETAILED_RACE_ETHNICITY_COLUMNS,
    PERSONS,
    RECORD_KEY,
    UNITS,
    ColumnSpec,
    with_optional,
)
from sdclab.population.contract import Population
from sdclab.population.conversion import wrong_type_text
from sdclab.population.problems import (
    ROW,
    Findings,
    Rule,
    apply_rules,
    column_name,
    input_error,
    show,
    single,
    spec_dtype,
    where,
)
from sdclab.population.validation import checked_blocks, checked_frames

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
    return read_csv(file) if file.suffix == ".csv" else read_parquet(file)


def read_parquet(file: Path) -> pl.DataFrame:
    """Read a Parquet file, turning a damaged or foreign file into an :class:`InputError`.

    The file is decoded and checked by pyarrow, as :func:`sdclab.fileio.read_parquet_checked`
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


def first_line(err: BaseException) -> str:
    """The first non-empty line of an exception's message."""
    for line in str(err).splitlines():
        if line.strip():
            return line.strip()
    return type(err).__name__


CsvSource = Path | bytes
"""A CSV file to parse: its path, or its bytes when their line endings were rewritten."""

CR_PROBE_BYTES = 1 << 16
"""How much of a CSV file is read to tell CR-only line endings from LF or CRLF ones."""


def read_csv(file: Path) -> pl.DataFrame:
    """Read a UTF-8 CSV file with every column as text; a malformed file names its first bad row."""
    try:
        source = csv_source(file)
        header = header_names(source)
    except IsADirectoryError:
        raise input_error(f"{file} is a directory (expected a CSV file)") from None
    except OSError as err:
        raise input_error(f"cannot read {file}: {err.strerror or err}") from None
    if header is not None:
        check_semicolons(header, file.name)
        check_header(header, f"{file.name} header").raise_if_any()
    try:
        frame = pl.read_csv(source, infer_schema=False, empty_string_is_null=False)
    except OSError as err:
        raise input_error(f"cannot read {file}: {err.strerror or err}") from None
    except (PolarsError, PanicException) as err:
        scan_csv(source, file.name, flag_quotes=True).raise_if_any()
        raise input_error(f"{file.name} is not a readable CSV file ({first_line(err)})") from None
    if may_have_short_rows(frame):
        field_counts(source, file.name, len(frame.columns), frame.height).raise_if_any()
    return frame


CONTRACT_NAMES = frozenset(
    [spec.name for spec in (*PERSONS, *UNITS, RECORD_KEY, DATA_DEFINED)]
    + list(DETAILED_RACE_ETHNICITY_COLUMNS)
)
"""Every column name the contract knows, to tell a header split at the wrong delimiter."""


def check_semicolons(header: Sequence[str], name: str) -> None:
    """Refuse a CSV file separated by semicolons (as spreadsheets write CSV where the decimal mark
    is a comma): its header, split at commas, names fewer contract columns than split at ';'."""
    by_comma = sum(field.strip() in CONTRACT_NAMES for field in header)
    by_semicolon = sum(
        part.strip() in CONTRACT_NAMES for field in header for part in field.split(";")
    )
    if by_semicolon <= by_comma:
        return
    shown = show(",".join(header), quote=True)
    columns = "1 column" if len(header) == 1 else f"{len(header)} columns"
    raise input_error(
        f"{name}: the header reads as {columns}, {shown} (expected comma-separated column "
        "names); the file seems to use ';' as its delimiter, and sdclab reads comma-separated "
        "files: save it with ',' as the delimiter"
    )


def csv_source(file: Path) -> CsvSource:
    """What to parse: the file, or, if its lines end in CR alone (carriage returns and no line
    feed: classic Mac OS), its bytes with every CR made LF (polars and :mod:`csv` split at LF)."""
    with file.open("rb") as raw:
        head = raw.read(CR_PROBE_BYTES)
        if b"\r" not in head or b"\n" in head:
            return file
        data = head + raw.read()
    return file if b"\n" in data else data.replace(b"\r", b"\n")


def open_binary(source: CsvSource) -> IO[bytes]:
    return BytesIO(source) if isinstance(source, bytes) else source.open("rb")


def header_names(source: CsvSource) -> list[str] | None:
    """The column names as the header line writes them, or None if it is not UTF-8 (the reader
    then reports that). Blank lines before the header are skipped, as polars does; stray quotes
    are read leniently (only repeated names are looked for here)."""
    try:
        with open_binary(source) as raw:
            for record in csv.reader(utf8_lines(raw), strict=False):
                if record:
                    return record
    except (BadUtf8, csv.Error):
        return None
    return None


def may_have_short_rows(frame: pl.DataFrame) -> bool:
    """Whether a row might have had too few fields: polars pads those with empty strings, so a
    file whose last column is never empty has none, and the costlier line check is skipped."""
    if frame.height == 0:
        return False
    # by position: the name is the user's, and pl.col would read "*" or "^…$" as a pattern
    return bool((frame.to_series(-1) == "").any())


def check_header(columns: Sequence[str], place: str) -> Findings:
    """Column names must be distinct. ``columns`` are the names as the file writes them: polars
    renames a repeat ``<name>_duplicated_<k>``, which is also a name a column may have."""
    repeated = [name for name, count in Counter(columns).items() if count > 1]
    if not repeated:
        return Findings()
    listed = ", ".join(column_name(name) for name in repeated)
    return single(0, f"{place}: column {listed} appears more than once")


def field_counts(source: CsvSource, name: str, n_fields: int, n_rows: int) -> Findings:
    """Every data row must have as many fields as the header (polars pads short rows silently).

    Fast path: when the file has no quote characters, a row's fields are its commas plus one, so
    the check is a vectorised count over the file's lines. Otherwise the file is streamed through
    :mod:`csv`.
    """
    lines = read_lines(source)
    if (
        lines is None
        or lines.height != n_rows + 1
        or lines.item(0, "line") == ""
        or lines.get_column("line").str.contains('"', literal=True).any()
    ):
        return scan_csv(source, name, flag_quotes=False)
    counted = lines.with_row_index(ROW).with_columns(
        (pl.col("line").str.count_matches(",", literal=True) + 1).alias("fields")
    )
    rule = Rule(
        bad=(pl.col(ROW) > 0) & (pl.col("fields") != n_fields),
        render=lambda row: field_count_text(
            name, row[ROW], row["fields"], row["line"] == "", n_fields
        ),
        table=0,
    )
    return apply_rules(counted, [rule])


def field_count_text(source: str, row: int, fields: int, blank: bool, n_fields: int) -> str:
    """Message for a row whose number of fields differs from the header's."""
    expected = f"(expected {n_fields} fields, as in the header)"
    if blank:
        return f"{where(source, row)} is blank {expected}"
    return f"{where(source, row)} has {fields} field{'s' if fields != 1 else ''} {expected}"


def read_lines(source: CsvSource) -> pl.DataFrame | None:
    """The file's lines as one text column, or None if they cannot be read that way."""
    try:
        return pl.read_csv(
            source,
            has_header=False,
            separator="\x1f",
            quote_char=None,
            infer_schema=False,
            new_columns=["line"],
            empty_string_is_null=False,
        )
    except (PolarsError, PanicException, OSError):
        return None


class BadUtf8(Exception):
    """A line of a CSV file that is not valid UTF-8."""

    def __init__(self, line: bytes, error: UnicodeDecodeError) -> None:
        super().__init__(str(error))
        self.line = line
        self.error = error


def utf8_lines(raw: IO[bytes]) -> Iterator[str]:
    """Decode a binary file line by line, so that a decoding error points at its line."""
    encoding = "utf-8-sig"
    for line in raw:
        try:
            text = line.decode(encoding)
        except UnicodeDecodeError as err:
            raise BadUtf8(line, err) from None
        encoding = "utf-8"
        yield text


def scan_csv(source: CsvSource, name: str, *, flag_quotes: bool) -> Findings:
    """Stream a CSV file through :mod:`csv` to find bad encoding, quoting and field counts.

    Rows are numbered as polars numbers them: blank lines before the header are skipped, later
    ones count as (blank) rows. ``flag_quotes`` also reports a quote character left inside a
    field, which polars rejects but :mod:`csv` keeps as text.
    """
    header: list[str] | None = None
    found = Findings()
    row = 0
    try:
        with open_binary(source) as raw:
            for record in csv.reader(utf8_lines(raw), strict=True):
                if header is None:
                    header = record or None
                    continue
                row += 1
                if len(record) != len(header):
                    found = found + _count_problem(name, row, len(record), len(header))
                elif flag_quotes:
                    found = found + _quote_problem(name, row, record, header)
    except BadUtf8 as bad:
        found = found + single(
            0, utf8_text(name, row + 1 if header else None, bad, header), row + 1
        )
    except csv.Error as err:
        found = found + single(0, f"{where(name, row + 1)}: {csv_error_text(err)}", row + 1)
    except OSError as err:
        raise input_error(f"cannot read {name}: {err.strerror or err}") from None
    if header is None and found.total == 0:
        found = single(0, f"{name} has no header line (expected the column names)")
    return found


def _count_problem(name: str, row: int, fields: int, n_fields: int) -> Findings:
    blank = fields == 0
    return single(0, field_count_text(name, row, fields, blank, n_fields), row)


def _quote_problem(name: str, row: int, record: list[str], header: list[str]) -> Findings:
    for column, value in zip(header, record, strict=True):
        if '"' in value:
            text = (
                f"{where(name, row, column_name(column))}: stray quote character in "
                f'{show(value, quote=True)} (expected a field wholly inside quotes, with "" '
                "for a quote)"
            )
            return single(0, text, row)
    return Findings()


def csv_error_text(err: csv.Error) -> str:
    """A plain-words version of a :mod:`csv` parsing error."""
    message = str(err)
    if "unexpected end of data" in message:
        return 'a quoted field is never closed (stray quote character ")'
    if "expected after" in message:
        return 'stray quote character ": text follows a closing quote'
    if "new-line character" in message:
        return "a line break (carriage return) inside an unquoted field"
    return f"malformed CSV ({message})"


def utf8_text(name: str, row: int | None, bad: BadUtf8, header: list[str] | None) -> str:
    """Message for a line that is not UTF-8, naming the column when it can be found."""
    byte = bad.line[bad.error.start : bad.error.start + 1].hex()
    place = f"{name} header" if row is None else where(name, row, _bad_column(bad.line, header))
    return f"{place}: not valid UTF-8 (byte 0x{byte}); save the file as UTF-8"


def _bad_column(line: bytes, header: list[str] | None) -> str | None:
    """The header name of the field holding the first undecodable byte, if it can be told."""
    if not header:
        return None
    try:
        fields = next(csv.reader([line.decode("utf-8", "replace")]))
    except (csv.Error, StopIteration):
        return None
    for column, value in zip(header, fields, strict=False):
        if "\ufffd" in value:
            return column_name(column)
    return None


# ---------------------------------------------------------------------------------------------
# Validation (the checks are sdclab.population.validation's)
# ---------------------------------------------------------------------------------------------


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
    :data:`~sdclab.population.problems.MAX_SHOWN` problems. (``Population(persons, units)`` runs
    the same checks, naming the tables persons and units.)
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
