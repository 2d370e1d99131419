"""Read, validate and write a population: the persons and units tables of docs/data.md.

A population directory holds ``persons.parquet`` or ``persons.csv`` and ``units.parquet`` or
``units.csv`` (one format per table). Loading checks everything the contract
(:mod:`sdclab.population.contract`) states and turns any bad input into one :class:`InputError`
naming the file, the row (1-based, not counting a CSV header), the column, the value and what was
expected, e.g. ``persons.csv row 7, column age: 130 is out of range (expected 0–115)``. Up to
:data:`MAX_SHOWN` problems are reported (the first in the message, the rest in ``details``) with a
count of the others.

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
* A block geocode starts with a state FIPS code (:data:`~sdclab.population.contract.STATE_CODES`:
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

Everything is vectorised with polars expressions (loops run over columns and rules, never rows),
except the diagnosis of a CSV file that polars cannot parse or that contains quote characters, which
is streamed through :mod:`csv` to find the offending row, and a CSV header, which :mod:`csv` reads
to find repeated names.
"""

from __future__ import annotations

import csv
import math
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path
from typing import IO, Any

import numpy as np
import numpy.typing as npt
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from polars.exceptions import PanicException, PolarsError

from sdclab import schema
from sdclab.errors import InputError
from sdclab.fileio import (
    Modes,
    check_replaceable,
    output_directory,
    polars_can_take,
    write_json,
    write_parquet,
)
from sdclab.geography import BLOCK_DIGITS
from sdclab.population.contract import (
    BLOCKS,
    DATA_DEFINED,
    DETAILED_RACE_ETHNICITY_COLUMNS,
    PERSONS,
    PUERTO_RICO,
    RACE_CODE_COLUMNS,
    RECORD_KEY,
    STATE_CODES,
    UNITS,
    ColumnSpec,
    Population,
    with_optional,
)

__all__ = ["MAX_SHOWN", "read_population", "validate", "write_population"]

MAX_SHOWN = 5
"""How many problems one error reports; the others are only counted."""

TABLES = ("persons", "units")
OPTIONAL_TABLES = ("blocks",)
"""Tables a population directory may hold besides :data:`TABLES`."""
FORMATS = ("parquet", "csv")
TABLE_SPECS = {"persons": PERSONS, "units": UNITS}

ROW = "__sdclab_row__"
"""Internal column: the 1-based row number a user would see in the file."""

HOUSEHOLDER = 0
HOUSING_UNIT = 0
TRUE_TEXT = ("true", "True", "TRUE", "1")
FALSE_TEXT = ("false", "False", "FALSE", "0")
EXACT_FLOAT_LIMIT = 2**53
"""Floats beyond this magnitude do not hold every integer exactly, so they are not accepted."""
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
"""The range of a column without a stated range (its values are held as Int64)."""

WHOLE_DECIMAL = r"^(-?[0-9]+)\.0*$"
"""A whole number written with a decimal point (``12.0``, ``12.``); group 1 is its integer."""
WHOLE_TEXT = r"-?[0-9]+(\.0*)?"
PLUS_SIGN_TEXT = r"\+[0-9]+(\.0*)?"
EXPONENT_TEXT = r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)[eE][+-]?[0-9]+"

BLOCK_PATTERN = f"^[0-9]{{{BLOCK_DIGITS}}}$"
STATE_DIGITS = 2
STATE_PREFIXES = [f"{code:0{STATE_DIGITS}d}" for code in STATE_CODES]
_STATES = [code for code in STATE_CODES if code != PUERTO_RICO]
STATE_CODES_TEXT = (
    f"{STATE_PREFIXES[0]}–{max(_STATES)} except "
    + ", ".join(
        f"{code:02d}" for code in range(min(_STATES), max(_STATES)) if code not in STATE_CODES
    )
    + f" (the states and DC), or {PUERTO_RICO} (Puerto Rico)"
)
"""The state codes a block geocode may start with, for messages."""
EXAMPLE_BLOCK = "010010201001001"
SHOWN_VALUE_LENGTH = 40


# ---------------------------------------------------------------------------------------------
# Problems and how they are reported
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, order=True)
class Problem:
    """One defect, ordered by where it is: table (persons first), row, then contract column."""

    table: int
    row: int
    column: int
    text: str


@dataclass(frozen=True)
class Findings:
    """Up to :data:`MAX_SHOWN` problems per rule and the total number of defects found."""

    problems: tuple[Problem, ...] = ()
    total: int = 0

    def __add__(self, other: Findings) -> Findings:
        """Both sets of findings, keeping only the first MAX_SHOWN problems (so adding is O(1))."""
        kept = tuple(sorted(self.problems + other.problems)[:MAX_SHOWN])
        return Findings(kept, self.total + other.total)

    def raise_if_any(self) -> None:
        """Raise one :class:`InputError` for the first problems in file order, counting the rest."""
        if self.total == 0:
            return
        shown = sorted(self.problems)[:MAX_SHOWN]
        details = [p.text for p in shown[1:]]
        more = self.total - len(shown)
        if more > 0:
            details.append(f"and {more} more problem{'s' if more > 1 else ''}")
        raise input_error(shown[0].text, details)


def input_error(text: str, details: Sequence[str] = ()) -> InputError:
    """An :class:`InputError` whose texts are kept on one line (control characters escaped)."""
    return InputError(printable(text), [printable(d) for d in details])


def printable(text: str) -> str:
    """``text`` with every non-printable character (line breaks too) written as an escape."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


def column_name(name: str) -> str:
    """A column name as messages show it: bare if plain, quoted if it has odd characters."""
    return name if name.isprintable() and name.strip() == name and name else repr(name)


def single(table: int, text: str, row: int = 0, column: int = -1) -> Findings:
    """Findings holding one problem."""
    return Findings((Problem(table, row, column, text),), 1)


def where(source: str, row: int | None = None, column: str | None = None) -> str:
    """The location prefix of a message: ``persons.csv row 7, column age``."""
    text = source if row is None else f"{source} row {row}"
    return text if column is None else f"{text}, column {column}"


def show(value: Any, *, quote: bool | None = None) -> str:
    """A value as a message shows it: numbers bare, other text quoted and shortened."""
    if not isinstance(value, str):
        return str(value)
    text = value.strip()
    if quote is None:
        quote = not _looks_numeric(text)
    if len(text) > SHOWN_VALUE_LENGTH:
        text = text[:SHOWN_VALUE_LENGTH] + "…"
    return repr(text) if quote else text


def _looks_numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def expected_text(spec: ColumnSpec) -> str:
    """What a column accepts, for the ``(expected …)`` part of a message."""
    dtype = _dtype(spec)
    if dtype == pl.Boolean:
        text = "true or false"
    elif spec.name == "block":
        text = f"a {BLOCK_DIGITS}-digit block geocode"
    elif spec.name in RACE_CODE_COLUMNS:
        text = f"a detailed race code, {spec.low}–{spec.high}"
    elif spec.low is not None and spec.high is not None:
        text = f"{spec.low}–{spec.high}"
    else:
        text = "a whole number"
    return f"{text} or empty" if spec.nullable else text


def _dtype(spec: ColumnSpec) -> pl.DataType:
    return spec.dtype if isinstance(spec.dtype, pl.DataType) else spec.dtype()


@dataclass(frozen=True)
class Rule:
    """A vectorised check: ``bad`` marks offending rows; ``render`` words one of them."""

    bad: pl.Expr
    render: Callable[[dict[str, Any]], str]
    table: int
    column: int = -1
    row_column: str = ROW


def apply_rules(frame: pl.DataFrame, rules: Sequence[Rule]) -> Findings:
    """Count each rule's offending rows in one pass and word the first few of each."""
    if not rules:
        return Findings()
    counts = frame.select(
        [rule.bad.fill_null(False).sum().alias(str(i)) for i, rule in enumerate(rules)]
    ).row(0)
    found = Findings()
    for rule, count in zip(rules, counts, strict=True):
        if not count:
            continue
        rows = (
            frame.filter(rule.bad.fill_null(False))
            .bottom_k(MAX_SHOWN, by=rule.row_column)
            .sort(rule.row_column)
        )
        problems = tuple(
            Problem(rule.table, int(row[rule.row_column]), rule.column, rule.render(row))
            for row in rows.to_dicts()
        )
        found = found + Findings(problems, int(count))
    return found


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
# Validation
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Table:
    """A frame to validate, with the name its messages use and its place in the sort order."""

    frame: pl.DataFrame
    specs: tuple[ColumnSpec, ...]
    source: str
    index: int


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
    dropped. Raises
    :class:`InputError` listing up to :data:`MAX_SHOWN` problems. (``Population(persons, units)``
    runs the same checks, naming the tables persons and units.)
    """
    frames = checked_frames(
        persons, units, persons_source=persons_source, units_source=units_source
    )
    return Population._trusted(*frames, sources=sources)


def checked_frames(
    persons: pl.DataFrame,
    units: pl.DataFrame,
    *,
    persons_source: str = "persons",
    units_source: str = "units",
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The persons and units frames checked and typed as :func:`validate` returns them."""
    if not isinstance(persons, pl.DataFrame) or not isinstance(units, pl.DataFrame):
        kinds = ", ".join(type(f).__name__ for f in (persons, units))
        raise input_error(
            f"a population is made of two polars DataFrames (persons, units); got {kinds}"
        )
    tables = (
        Table(persons, with_optional(PERSONS, persons.columns), persons_source, 0),
        Table(units, with_optional(UNITS, units.columns), units_source, 1),
    )
    sum((missing_columns(t) for t in tables), record_keys_in_both(*tables)).raise_if_any()
    converted = [convert(t) for t in tables]
    sum((found for _, found in converted), Findings()).raise_if_any()
    typed_persons, typed_units = (frame for frame, _ in converted)
    (
        duplicates(typed_persons, "person_id", tables[0])
        + duplicates(typed_units, "unit_id", tables[1])
        + detailed_race_ethnicity(typed_persons, tables[0])
    ).raise_if_any()
    links(typed_persons, typed_units, persons_source, units_source).raise_if_any()
    return typed_persons.drop(ROW), typed_units.drop(ROW)


def checked_blocks(blocks: pl.DataFrame, *, source: str = "blocks") -> pl.DataFrame:
    """The optional blocks table checked and typed: one ``block`` column of 15-digit geocodes
    (other columns dropped), each listed once, sorted."""
    if not isinstance(blocks, pl.DataFrame):
        raise input_error(f"{source}: a blocks table is a polars DataFrame; got {type(blocks)}")
    table = Table(blocks, BLOCKS, source, 2)
    missing_columns(table).raise_if_any()
    typed, found = convert(table)
    found.raise_if_any()
    duplicates(typed, "block", table).raise_if_any()
    return typed.drop(ROW).select(s.name for s in BLOCKS).sort("block")


def record_keys_in_both(persons: Table, units: Table) -> Findings:
    """``record_key`` is in both tables or in neither: the cell key method needs the key of every
    person and every unit, and keys for one table alone would be drawn afresh for both."""
    keyed = [t for t in (persons, units) if RECORD_KEY.name in t.frame.columns]
    if len(keyed) != 1:
        return Findings()
    has, lacks = (persons, units) if keyed[0] is persons else (units, persons)
    return single(
        has.index,
        f"{has.source}: has a record_key column but {lacks.source} has none (expected "
        "record_key in both tables or in neither: the cell key method needs the key of every "
        "person and every unit)",
    )


def missing_columns(table: Table) -> Findings:
    """Every contract column must be present; the message lists what the table has instead."""
    present = table.frame.columns
    missing = [spec.name for spec in table.specs if spec.name not in present]
    if not missing:
        return Findings()
    label = "column" if len(missing) == 1 else "columns"
    text = f"{table.source}: missing {label} {', '.join(missing)}"
    together = [name for name in DETAILED_RACE_ETHNICITY_COLUMNS if name in present]
    if together and set(missing) <= set(DETAILED_RACE_ETHNICITY_COLUMNS):
        return single(
            table.index,
            f"{text} (it has {', '.join(together)}: the detailed race and Hispanic origin "
            "columns race_code1–race_code8 and hispanic_origin are optional, but all or none "
            "must be present)",
        )
    hints = [
        f"{name!r} for {spec}"
        for spec in missing
        for name in present
        if name != spec and name.strip().lower() == spec
    ]
    if hints:
        text += f" (found {', '.join(hints)}: check spaces and capitals)"
    else:
        shown = ", ".join(column_name(c) for c in present[:12]) + (
            ", …" if len(present) > 12 else ""
        )
        text += f" (the table has: {shown or 'no columns'})"
    return single(table.index, text)


def value_column(name: str) -> str:
    return f"__value_{name}"


def clean_column(name: str) -> str:
    return f"__clean_{name}"


@dataclass(frozen=True)
class Conversion:
    """How one column becomes its contract dtype, and the rules checked on the way.

    ``value`` is null where the input is missing or cannot be converted; ``missing`` marks missing
    input. Two costly steps run only for columns where some row needs them: ``retry`` marks text
    rows that might convert once surrounding spaces are stripped, and ``fallback`` converts what
    ``value`` could not (whole numbers written as floats in text).
    """

    value: pl.Expr
    missing: pl.Expr
    rules: tuple[Rule, ...]
    retry: pl.Expr | None = None
    fallback: pl.Expr | None = None


def convert(table: Table) -> tuple[pl.DataFrame, Findings]:
    """Convert every contract column, checking types, missing values, codes and ranges.

    Returns the frame in contract order and dtypes (plus the row number) and the problems found.
    Work is staged so that costly string operations run only on columns that need them: parse
    the input as it is, strip spaces and parse again, then parse the leftovers as floats.
    """
    frame = table.frame.select(
        pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias(ROW), *[s.name for s in table.specs]
    )
    if typed_and_in_range(frame, table.specs):
        return frame, Findings()
    kinds = {spec.name: dtype_kind(frame.schema[spec.name]) for spec in table.specs}
    found = Findings()
    conversions: list[tuple[ColumnSpec, Conversion]] = []
    for position, spec in enumerate(table.specs):
        result = column_conversion(spec, frame.schema[spec.name], kinds[spec.name], table, position)
        if isinstance(result, Findings):
            found = found + result
        else:
            conversions.append((spec, result))
    cleaning = [cleaned(spec.name, kinds[spec.name]) for spec, _ in conversions]
    checked = frame.with_columns([expr for expr in cleaning if expr is not None]).with_columns(
        [conversion.value.alias(value_column(spec.name)) for spec, conversion in conversions]
    )
    checked = with_stripped_text(checked, conversions)
    checked = with_fallbacks(checked, conversions)
    found = found + apply_rules(checked, [r for _, c in conversions for r in c.rules])
    if found.total:
        return frame, found
    typed = checked.select(
        ROW,
        *[pl.col(value_column(s.name)).cast(_dtype(s)).alias(s.name) for s in table.specs],
    )
    return typed, found


def typed_and_in_range(frame: pl.DataFrame, specs: Sequence[ColumnSpec]) -> bool:
    """Whether every contract column already has its dtype and every value passes the checks of
    :func:`convert` (present where required, in range, a block geocode of a state), found in one
    pass of aggregates: a frame the library made (or a typed Parquet file) then needs no
    conversion. Otherwise the conversion runs and words every problem."""
    if any(frame.schema[s.name] != _dtype(s) for s in specs):
        return False
    checks = []
    for spec in specs:
        column = pl.col(spec.name)
        if not spec.nullable:
            checks.append(column.null_count() == 0)
        if spec.name == "block":
            checks.append(column.str.contains(BLOCK_PATTERN).all())
            checks.append(column.str.head(STATE_DIGITS).is_in(STATE_PREFIXES).all())
        elif spec.low is not None and spec.high is not None:
            checks.append((column.min() >= spec.low).fill_null(True))
            checks.append((column.max() <= spec.high).fill_null(True))
    return not checks or bool(frame.select(pl.all_horizontal(checks)).item())


def cleaned(name: str, kind: str) -> pl.Expr | None:
    """Stage one: any text type as String, floats as Float64 with NaN as null."""
    if kind == "text":
        return pl.col(name).cast(pl.String).alias(clean_column(name))
    if kind == "float":
        return pl.col(name).cast(pl.Float64).fill_nan(None).alias(clean_column(name))
    return None


def needing(
    checked: pl.DataFrame, candidates: Sequence[tuple[ColumnSpec, Conversion, pl.Expr]]
) -> list[tuple[ColumnSpec, Conversion]]:
    """The candidate columns where some row of ``checked`` needs a costly step (each candidate's
    expression is true on those rows), found in one pass over the frame."""
    if not candidates:
        return []
    needed = checked.select([rows.any() for _, _, rows in candidates]).row(0)
    return [(spec, c) for (spec, c, _), need in zip(candidates, needed, strict=True) if need]


def with_stripped_text(
    checked: pl.DataFrame, conversions: Sequence[tuple[ColumnSpec, Conversion]]
) -> pl.DataFrame:
    """Strip surrounding spaces and convert again, in the text columns where some row needs it."""
    redo = needing(checked, [(s, c, c.retry) for s, c in conversions if c.retry is not None])
    if not redo:
        return checked
    stripped = checked.with_columns(
        pl.col(clean_column(s.name)).str.strip_chars().alias(clean_column(s.name)) for s, _ in redo
    )
    return stripped.with_columns(c.value.alias(value_column(s.name)) for s, c in redo)


def with_fallbacks(
    checked: pl.DataFrame, conversions: Sequence[tuple[ColumnSpec, Conversion]]
) -> pl.DataFrame:
    """Apply each column's fallback conversion, but only to columns where some row needs it."""
    unconverted = [
        (s, c, pl.col(value_column(s.name)).is_null() & ~c.missing)
        for s, c in conversions
        if c.fallback is not None
    ]
    return checked.with_columns(
        pl.coalesce(pl.col(value_column(s.name)), c.fallback).alias(value_column(s.name))
        for s, c in needing(checked, unconverted)
        if c.fallback is not None
    )


def column_conversion(
    spec: ColumnSpec, dtype: pl.DataType, kind: str, table: Table, position: int
) -> Conversion | Findings:
    """The conversion for one column, or a column-level problem if its type cannot hold it."""
    if spec.name == "block":
        conversion = block_conversion(spec, kind, table, position)
    elif _dtype(spec) == pl.Boolean:
        conversion = bool_conversion(spec, kind, table, position)
    else:
        conversion = int_conversion(spec, kind, table, position)
    if conversion is not None:
        return conversion
    text = wrong_type_text(spec, str(dtype), kind, table.source)
    return single(table.index, text, column=position)


def wrong_type_text(spec: ColumnSpec, dtype: str, kind: str, source: str) -> str:
    """Message for a column whose type cannot hold the contract's values."""
    if spec.name == "block" and kind in ("int", "float"):
        return (
            f"{where(source, column=spec.name)}: has type {dtype}, but block must be a "
            f"{BLOCK_DIGITS}-character string of digits (e.g. '{EXAMPLE_BLOCK}'; leading zeros "
            "matter)"
        )
    return (
        f"{where(source, column=spec.name)}: has type {dtype}, which cannot hold "
        f"{kind_words(spec)} (expected {expected_text(spec)})"
    )


def kind_words(spec: ColumnSpec) -> str:
    """What a column holds, in words: whole numbers, booleans or text."""
    if _dtype(spec) == pl.Boolean:
        return "booleans"
    return "text" if _dtype(spec) == pl.String else "whole numbers"


def dtype_kind(dtype: pl.DataType) -> str:
    """Group a polars dtype by how it converts: int, float, bool, text or other."""
    if dtype.is_integer():
        return "int"
    if dtype.is_float() or dtype.is_decimal():
        return "float"
    if dtype == pl.Boolean:
        return "bool"
    if dtype in (pl.String, pl.Categorical, pl.Null) or isinstance(dtype, pl.Enum):
        return "text"
    return "other"


def _missing(name: str, kind: str) -> pl.Expr:
    """Missing input: null, NaN (floats) or empty text once spaces are stripped."""
    if kind == "text":
        clean = pl.col(clean_column(name))
        return clean.is_null() | (clean == "")
    if kind == "float":
        return pl.col(clean_column(name)).is_null()
    return pl.col(name).is_null()


def int_conversion(spec: ColumnSpec, kind: str, table: Table, position: int) -> Conversion | None:
    """Whole numbers from integers, whole floats or text; rules: missing, not whole, range."""
    name, clean = spec.name, pl.col(clean_column(spec.name))
    got = pl.col(value_column(name))
    retry = fallback = None
    if kind == "int":
        value = pl.col(name).cast(pl.Int64, strict=False)
    elif kind == "float":
        value = _whole(clean)
    elif kind == "text":
        # polars' cast takes digits with an optional sign; the contract has no plus sign
        value = pl.when(~clean.str.starts_with("+")).then(clean.cast(pl.Int64, strict=False))
        retry = got.is_null() & (clean != "")
        fallback = clean.str.extract(WHOLE_DECIMAL, 1).cast(pl.Int64, strict=False)
    else:
        return None
    missing = _missing(name, kind)
    expected = expected_text(spec)
    rules = [
        Rule(
            ~missing & got.is_null(),
            lambda row: (
                f"{where(table.source, row[ROW], name)}: {show(row[name])} "
                f"{unconverted_text(row[name], spec)}"
            ),
            table.index,
            position,
        ),
    ]
    if not spec.nullable:
        rules.append(missing_rule(spec, missing, table, position))
    if spec.low is not None and spec.high is not None:
        rules.append(
            Rule(
                (got < spec.low) | (got > spec.high),
                lambda row: (
                    f"{where(table.source, row[ROW], name)}: {row[value_column(name)]} is out of "
                    f"range (expected {expected})"
                ),
                table.index,
                position,
            )
        )
    return Conversion(value, missing, tuple(rules), retry, fallback)


def unconverted_text(raw: Any, spec: ColumnSpec) -> str:
    """Why a value that is present did not convert to a whole number, and what was expected."""
    expected = expected_text(spec)
    out_of_range = f"is out of range (expected {range_text(spec)})"
    if isinstance(raw, str):
        text = raw.strip()
        if re.fullmatch(PLUS_SIGN_TEXT, text):
            return f"has a plus sign (expected {expected}, written without +)"
        if re.fullmatch(WHOLE_TEXT, text):  # digits that an Int64 cannot hold
            return out_of_range
        if re.fullmatch(EXPONENT_TEXT, text):
            return f"is in exponent notation (expected {expected}, written in plain digits)"
        return f"is not a whole number (expected {expected})"
    if isinstance(raw, int):  # an unsigned integer beyond Int64
        return out_of_range
    try:
        number = float(raw)
    except (TypeError, ValueError):
        return f"is not a whole number (expected {expected})"
    if not (math.isfinite(number) and number.is_integer()):
        return f"is not a whole number (expected {expected})"
    low, high = value_range(spec)
    if not low <= number <= high:
        return out_of_range
    return (
        f"is too large to be held exactly as a float (expected {expected}, written as an integer)"
    )


def value_range(spec: ColumnSpec) -> tuple[int, int]:
    """The lowest and highest value of an integer column (Int64's range if it states none)."""
    low = INT64_MIN if spec.low is None else spec.low
    return low, INT64_MAX if spec.high is None else spec.high


def range_text(spec: ColumnSpec) -> str:
    """The ``(expected …)`` part of an out-of-range message."""
    if spec.low is not None and spec.high is not None:
        return expected_text(spec)
    low, high = value_range(spec)
    text = f"a whole number from {low} to {high}"
    return f"{text} or empty" if spec.nullable else text


def missing_rule(spec: ColumnSpec, missing: pl.Expr, table: Table, position: int) -> Rule:
    """A value is required (the caller skips this rule for nullable columns)."""
    expected = expected_text(spec)
    return Rule(
        missing,
        lambda row: (
            f"{where(table.source, row[ROW], spec.name)}: value is missing (expected {expected})"
        ),
        table.index,
        position,
    )


def _whole(number: pl.Expr) -> pl.Expr:
    """A float expression as Int64 where it holds a whole number exactly, else null."""
    exact = number.is_finite() & (number == number.floor()) & (number.abs() <= EXACT_FLOAT_LIMIT)
    return pl.when(exact).then(number).cast(pl.Int64)


def bool_conversion(spec: ColumnSpec, kind: str, table: Table, position: int) -> Conversion | None:
    """Booleans from booleans, 0/1 numbers or the words listed in the module docstring."""
    name, clean = spec.name, pl.col(clean_column(spec.name))
    got = pl.col(value_column(name))
    if kind == "bool":
        value = pl.col(name)
    elif kind == "int":
        value = pl.col(name).replace_strict(
            {1: True, 0: False}, default=None, return_dtype=pl.Boolean
        )
    elif kind == "float":
        value = pl.when(clean == 1).then(True).when(clean == 0).then(False)
    elif kind == "text":
        value = pl.when(clean.is_in(TRUE_TEXT)).then(True).when(clean.is_in(FALSE_TEXT)).then(False)
    else:
        return None
    missing = _missing(name, kind)
    rules = (
        missing_rule(spec, missing, table, position),
        Rule(
            ~missing & got.is_null(),
            lambda row: (
                f"{where(table.source, row[ROW], name)}: {show(row[name], quote=True)} is not true "
                "or false (expected true/false, True/False or 1/0)"
            ),
            table.index,
            position,
        ),
    )
    retry = got.is_null() & (clean != "") if kind == "text" else None
    return Conversion(value.cast(pl.Boolean), missing, rules, retry)


def block_conversion(spec: ColumnSpec, kind: str, table: Table, position: int) -> Conversion | None:
    """Block geocodes: text of exactly 15 ASCII digits (an integer column has lost its zeros)."""
    if kind != "text":
        return None
    name, clean = spec.name, pl.col(clean_column(spec.name))
    missing = _missing(name, kind)
    digits = clean.str.contains(BLOCK_PATTERN)
    rules = (
        missing_rule(spec, missing, table, position),
        Rule(
            ~missing & ~digits,
            lambda row: (
                f"{where(table.source, row[ROW], name)}: {show(row[name], quote=True)} is not a "
                f"{BLOCK_DIGITS}-digit block geocode (expected exactly {BLOCK_DIGITS} digits 0–9, "
                f"leading zeros included, e.g. {EXAMPLE_BLOCK})"
            ),
            table.index,
            position,
        ),
        Rule(
            ~missing & digits & ~clean.str.head(STATE_DIGITS).is_in(STATE_PREFIXES),
            lambda row: (
                f"{where(table.source, row[ROW], name)}: {show(row[name], quote=True)} starts with "
                f"{row[name].strip()[:STATE_DIGITS]}, which is not a state FIPS code (expected a "
                f"state code as the first two digits: {STATE_CODES_TEXT})"
            ),
            table.index,
            position,
        ),
    )
    retry = (clean.str.len_bytes() != BLOCK_DIGITS) & (clean != "")
    return Conversion(clean, missing, rules, retry)


def duplicates(frame: pl.DataFrame, key: str, table: Table) -> Findings:
    """Identifiers must be unique; each repeat is reported with the row of its first use."""
    if frame.get_column(key).n_unique() == frame.height:  # the usual case, and much faster
        return Findings()
    repeat = ~pl.col(key).is_first_distinct()
    found = apply_rules(
        frame,
        [Rule(repeat, lambda row: "", table.index, [s.name for s in table.specs].index(key))],
    )
    if not found.total:
        return found
    keys = [frame.item(p.row - 1, key) for p in found.problems]
    first = dict(
        frame.filter(pl.col(key).is_in(keys) & pl.col(key).is_first_distinct())
        .select(key, ROW)
        .iter_rows()
    )
    problems = tuple(
        Problem(
            p.table,
            p.row,
            p.column,
            f"{where(table.source, p.row, key)}: {k} is a duplicate (first in row {first[k]}; "
            f"expected each {key} once)",
        )
        for p, k in zip(found.problems, keys, strict=True)
    )
    return Findings(problems, found.total)


FIRST_UNKNOWN = "__first_unknown_code"
FIRST_GAP = "__first_gap"
FIRST_REPEAT = "__first_repeat"
FIRST_FOREIGN = "__first_foreign_code"
CODES_RACE = "__race_of_codes"


def detailed_race_ethnicity(frame: pl.DataFrame, table: Table) -> Findings:
    """Rules on the optional detailed race and Hispanic origin columns of a typed persons frame.

    Every code must be known; codes fill race_code1 onwards with no gap and no repeat (race_code1
    is required by the conversion stage); the major races of the codes must be exactly the
    ``race`` bitmask (checked only on rows whose codes are all known, so that an unknown code is
    reported once; a race without a code only when no code is of another race, so that a wrong
    code is reported once); ``hispanic_origin`` must be 0 exactly when ``hispanic`` is 0. Each
    kind of defect is reported once per row, at its first column.
    """
    if RACE_CODE_COLUMNS[0] not in frame.columns:
        return Findings()
    codes = [pl.col(name) for name in RACE_CODE_COLUMNS]
    known = list(schema.DETAILED_RACE_LABELS)
    bit = {code: int(b) for code, b in zip(known, schema.detailed_race_bit(known), strict=True)}
    bits = [c.replace_strict(bit, default=0, return_dtype=pl.Int64).fill_null(0) for c in codes]
    race = pl.col("race").cast(pl.Int64)

    def first(conditions: Sequence[pl.Expr], offset: int = 0) -> pl.Expr:
        """The 1-based column number of the first true condition (null if none)."""
        return pl.coalesce(
            [pl.when(c).then(pl.lit(k + 1 + offset)) for k, c in enumerate(conditions)]
        )

    helpers = frame.with_columns(
        first([c.is_not_null() & ~c.is_in(known) for c in codes]).alias(FIRST_UNKNOWN),
        first(
            [
                now.is_not_null() & before.is_null()
                for before, now in zip(codes[:-1], codes[1:], strict=True)
            ],
            offset=1,
        ).alias(FIRST_GAP),
        first(
            [
                pl.any_horizontal([now == before for before in codes[:k]])
                for k, now in enumerate(codes)
                if k
            ],
            offset=1,
        ).alias(FIRST_REPEAT),
        first([(b != 0) & ((b & race) == 0) for b in bits]).alias(FIRST_FOREIGN),
        pl.reduce(lambda a, b: a | b, bits).alias(CODES_RACE),
    )
    all_known = pl.col(FIRST_UNKNOWN).is_null()
    position = {spec.name: i for i, spec in enumerate(table.specs)}
    first_code = position[RACE_CODE_COLUMNS[0]]
    source = table.source

    def code_at(row: dict[str, Any], helper: str) -> tuple[str, int]:
        name = RACE_CODE_COLUMNS[row[helper] - 1]
        return name, row[name]

    def unknown_text(row: dict[str, Any]) -> str:
        name, code = code_at(row, FIRST_UNKNOWN)
        return (
            f"{where(source, row[ROW], name)}: {code} is not a known detailed race code "
            "(expected a code of the list in docs/data.md, e.g. 1001 German, 2001 African "
            "American, 4001 Chinese)"
        )

    def gap_text(row: dict[str, Any]) -> str:
        name, code = code_at(row, FIRST_GAP)
        return (
            f"{where(source, row[ROW], name)}: {code} follows an empty "
            f"{RACE_CODE_COLUMNS[row[FIRST_GAP] - 2]} (expected the codes filled from race_code1 "
            "on, with no empty column between them)"
        )

    def repeat_text(row: dict[str, Any]) -> str:
        name, code = code_at(row, FIRST_REPEAT)
        earlier = next(n for n in RACE_CODE_COLUMNS if row[n] == code)
        return (
            f"{where(source, row[ROW], name)}: {code} repeats {earlier} (expected each detailed "
            "race code at most once per person)"
        )

    def foreign_text(row: dict[str, Any]) -> str:
        name, code = code_at(row, FIRST_FOREIGN)
        major = schema.race_label(int(schema.detailed_race_bit(code)))
        return (
            f"{where(source, row[ROW], name)}: {code} ({schema.DETAILED_RACE_LABELS[code]}) is of "
            f"race {major} but race is {row['race']} ({schema.race_label(row['race'])}) (expected "
            "only codes of the races in race)"
        )

    def uncovered_text(row: dict[str, Any]) -> str:
        lacking = schema.race_label(row["race"] & ~row[CODES_RACE])
        return (
            f"{where(source, row[ROW], 'race')}: {row['race']} ({schema.race_label(row['race'])}) "
            f"but no detailed race code is {lacking.replace('+', ' or ')} (expected at least one "
            "code of each race in race)"
        )

    def origin_text(row: dict[str, Any]) -> str:
        at = where(source, row[ROW], "hispanic_origin")
        origin = row["hispanic_origin"]
        if origin == schema.NOT_HISPANIC_ORIGIN:
            top = max(schema.HISPANIC_ORIGIN_LABELS)
            return f"{at}: 0 (not Hispanic) but hispanic is 1 (expected a Hispanic origin 1–{top})"
        label = schema.HISPANIC_ORIGIN_LABELS[origin]
        return f"{at}: {origin} ({label}) but hispanic is 0 (expected 0, not Hispanic)"

    rules = [
        Rule(~all_known, unknown_text, table.index, first_code),
        Rule(pl.col(FIRST_GAP).is_not_null(), gap_text, table.index, first_code),
        Rule(pl.col(FIRST_REPEAT).is_not_null(), repeat_text, table.index, first_code),
        Rule(
            all_known & pl.col(FIRST_FOREIGN).is_not_null(), foreign_text, table.index, first_code
        ),
        Rule(
            all_known & pl.col(FIRST_FOREIGN).is_null() & ((race & ~pl.col(CODES_RACE)) != 0),
            uncovered_text,
            table.index,
            position["race"],
        ),
        Rule(
            (pl.col("hispanic_origin") == schema.NOT_HISPANIC_ORIGIN) != (pl.col("hispanic") == 0),
            origin_text,
            table.index,
            position["hispanic_origin"],
        ),
    ]
    return apply_rules(helpers, rules)


def links(persons: pl.DataFrame, units: pl.DataFrame, p_source: str, u_source: str) -> Findings:
    """Rules joining the tables: units exist, blocks agree, households and GQ are coherent."""
    unit_side = units.select(
        "unit_id",
        pl.col(ROW).alias("unit_row"),
        pl.col("block").alias("unit_block"),
        "unit_type",
        "occupied",
    )
    joined = persons.select(ROW, "person_id", "unit_id", "block", "relationship").join(
        unit_side, on="unit_id", how="left"
    )
    counts = householder_counts(joined, units.height)
    shared = bool(counts.max() > 1) if len(counts) else False
    if shared:
        joined = joined.with_columns(first_householder_row())
    counted = units.with_columns(pl.Series("householders", counts))
    return apply_rules(joined, person_rules(p_source, u_source, shared)) + apply_rules(
        counted, unit_rules(u_source, p_source)
    )


def householder_counts(joined: pl.DataFrame, n_units: int) -> npt.NDArray[np.int64]:
    """Number of persons with relationship 0 in each unit, in the units' row order."""
    unit_rows = (
        joined.filter(pl.col("relationship") == HOUSEHOLDER)
        .get_column("unit_row")
        .drop_nulls()
        .to_numpy()
    )
    return np.bincount(unit_rows - 1, minlength=n_units).astype(np.int64)


def first_householder_row() -> pl.Expr:
    """The row of the first householder of each person's unit (null if it has none)."""
    householder = pl.col("relationship") == HOUSEHOLDER
    return pl.when(householder).then(pl.col(ROW)).min().over("unit_id").alias("first_householder")


def person_rules(p_source: str, u_source: str, shared: bool) -> list[Rule]:
    """Rules on each person joined with their unit.

    ``shared`` says whether some unit has several householders; the rule that finds them is
    costly, so it runs only then.
    """
    position = {spec.name: i for i, spec in enumerate(PERSONS)}
    known = pl.col("unit_row").is_not_null()
    housing = known & (pl.col("unit_type") == HOUSING_UNIT)
    gq = known & (pl.col("unit_type") != HOUSING_UNIT)
    relationship = pl.col("relationship")
    householder = housing & pl.col("occupied") & (relationship == HOUSEHOLDER)
    later_householder = (
        householder & (pl.col(ROW) > pl.col("first_householder")) if shared else pl.lit(False)
    )

    def at(row: dict[str, Any], column: str) -> str:
        return where(p_source, row[ROW], column)

    return [
        Rule(
            ~known,
            lambda r: (
                f"{at(r, 'unit_id')}: {r['unit_id']} is not a unit_id in {u_source} "
                "(expected the unit the person lives in)"
            ),
            0,
            position["unit_id"],
        ),
        Rule(
            known & (pl.col("block") != pl.col("unit_block")),
            lambda r: (
                f"{at(r, 'block')}: {r['block']} differs from the block of unit "
                f"{r['unit_id']} ({r['unit_block']}, {u_source} row {r['unit_row']})"
            ),
            0,
            position["block"],
        ),
        Rule(
            housing & ~pl.col("occupied"),
            lambda r: (
                f"{at(r, 'unit_id')}: person {r['person_id']} lives in unit {r['unit_id']}, "
                f"which is a vacant housing unit ({u_source} row {r['unit_row']}; expected no "
                "persons in vacant units)"
            ),
            0,
            position["unit_id"],
        ),
        Rule(
            housing & (relationship == schema.GQ_RESIDENT),
            lambda r: (
                f"{at(r, 'relationship')}: 5 (group-quarters resident) but unit "
                f"{r['unit_id']} is a housing unit (expected 0–4)"
            ),
            0,
            position["relationship"],
        ),
        Rule(
            gq & (relationship != schema.GQ_RESIDENT),
            lambda r: (
                f"{at(r, 'relationship')}: {r['relationship']} but unit {r['unit_id']} is a "
                "group-quarters facility (expected 5, group-quarters resident)"
            ),
            0,
            position["relationship"],
        ),
        Rule(
            later_householder,
            lambda r: (
                f"{at(r, 'relationship')}: 0 but unit {r['unit_id']} already has a "
                f"householder in row {r['first_householder']} (expected exactly one person with "
                "relationship 0 per occupied housing unit)"
            ),
            0,
            position["relationship"],
        ),
    ]


def unit_rules(u_source: str, p_source: str) -> list[Rule]:
    """Rules on each unit with its number of householders."""
    position = {spec.name: i for i, spec in enumerate(UNITS)}
    housing = pl.col("unit_type") == HOUSING_UNIT
    occupied_housing = housing & pl.col("occupied")
    tenure = pl.col("tenure")

    def at(row: dict[str, Any], column: str | None) -> str:
        return where(u_source, row[ROW], column)

    return [
        Rule(
            occupied_housing & (pl.col("householders") == 0),
            lambda r: (
                f"{at(r, None)}: occupied housing unit {r['unit_id']} has no householder in "
                f"{p_source} (expected exactly one person with relationship 0)"
            ),
            1,
            position["occupied"],
        ),
        Rule(
            occupied_housing & tenure.is_null(),
            lambda r: (
                f"{at(r, 'tenure')}: value is missing but unit {r['unit_id']} is an occupied "
                "housing unit (expected 1–3)"
            ),
            1,
            position["tenure"],
        ),
        Rule(
            housing & ~pl.col("occupied") & tenure.is_not_null(),
            lambda r: (
                f"{at(r, 'tenure')}: {r['tenure']} but unit {r['unit_id']} is a vacant "
                "housing unit (expected empty)"
            ),
            1,
            position["tenure"],
        ),
        Rule(
            ~housing & ~pl.col("occupied"),
            lambda r: (
                f"{at(r, 'occupied')}: false but unit {r['unit_id']} is a group-quarters "
                "facility (expected true)"
            ),
            1,
            position["occupied"],
        ),
        Rule(
            ~housing & tenure.is_not_null(),
            lambda r: (
                f"{at(r, 'tenure')}: {r['tenure']} but unit {r['unit_id']} is a "
                "group-quarters facility (expected empty)"
            ),
            1,
            position["tenure"],
        ),
    ]


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
        [pl.col(s.name).cast(_dtype(s)) for s in with_optional(specs, frame.columns)]
    )
