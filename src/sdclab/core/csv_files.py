"""Reading a CSV file of records with every column as text, and saying in one line what is
wrong with a malformed one (its first bad row, field or byte)."""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Collection, Iterator, Sequence
from io import BytesIO
from pathlib import Path
from typing import IO

import polars as pl
from polars.exceptions import PanicException, PolarsError

from sdclab.core.findings import (
    ROW,
    Findings,
    Rule,
    apply_rules,
    column_name,
    input_error,
    show,
    single,
    where,
)


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


def read_csv(
    file: Path, expected: Collection[str] = (), *, semicolons: bool = False
) -> pl.DataFrame:
    """Read a UTF-8 CSV file with every column as text; a malformed file names its first bad row.
    ``expected``: column names the file should hold, to tell a file separated by semicolons; such
    a file is refused in one line unless ``semicolons``, then read with ';' as its delimiter."""
    try:
        source = csv_source(file)
        header = header_names(source)
    except IsADirectoryError:
        raise input_error(f"{file} is a directory (expected a CSV file)") from None
    except OSError as err:
        raise input_error(f"cannot read {file}: {err.strerror or err}") from None
    delimiter = ","
    if header is not None and semicolon_separated(header, expected):
        if not semicolons:
            refuse_semicolons(header, file.name)
        delimiter = ";"
        header = header_names(source, delimiter)
    if header is not None:
        check_header(header, f"{file.name} header").raise_if_any()
    try:
        frame = pl.read_csv(
            source, infer_schema=False, empty_string_is_null=False, separator=delimiter
        )
    except OSError as err:
        raise input_error(f"cannot read {file}: {err.strerror or err}") from None
    except (PolarsError, PanicException) as err:
        scan_csv(source, file.name, flag_quotes=True, delimiter=delimiter).raise_if_any()
        raise input_error(f"{file.name} is not a readable CSV file ({first_line(err)})") from None
    if may_have_short_rows(frame):
        counted = field_counts(source, file.name, len(frame.columns), frame.height, delimiter)
        counted.raise_if_any()
    return frame


def semicolon_separated(header: Sequence[str], expected: Collection[str]) -> bool:
    """Whether a CSV file is separated by semicolons (as spreadsheets write CSV where the decimal
    mark is a comma): its header, split at commas, names fewer ``expected`` columns than split
    at ';'."""
    by_comma = sum(field.strip() in expected for field in header)
    by_semicolon = sum(part.strip() in expected for field in header for part in field.split(";"))
    return by_semicolon > by_comma


def check_semicolons(header: Sequence[str], name: str, expected: Collection[str]) -> None:
    """Refuse a CSV file separated by semicolons (:func:`semicolon_separated`)."""
    if semicolon_separated(header, expected):
        refuse_semicolons(header, name)


def refuse_semicolons(header: Sequence[str], name: str) -> None:
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


def header_names(source: CsvSource, delimiter: str = ",") -> list[str] | None:
    """The column names as the header line writes them, or None if it is not UTF-8 (the reader
    then reports that). Blank lines before the header are skipped, as polars does; stray quotes
    are read leniently (only repeated names are looked for here)."""
    try:
        with open_binary(source) as raw:
            for record in csv.reader(utf8_lines(raw), strict=False, delimiter=delimiter):
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


def field_counts(
    source: CsvSource, name: str, n_fields: int, n_rows: int, delimiter: str = ","
) -> Findings:
    """Every data row must have as many fields as the header (polars pads short rows silently).

    Fast path: when the file has no quote characters, a row's fields are its delimiters plus one, so
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
        return scan_csv(source, name, flag_quotes=False, delimiter=delimiter)
    counted = lines.with_row_index(ROW).with_columns(
        (pl.col("line").str.count_matches(delimiter, literal=True) + 1).alias("fields")
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


def scan_csv(source: CsvSource, name: str, *, flag_quotes: bool, delimiter: str = ",") -> Findings:
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
            reader = csv.reader(utf8_lines(raw), strict=True, delimiter=delimiter)
            for record in reader:
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
            0, utf8_text(name, row + 1 if header else None, bad, header, delimiter), row + 1
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


def utf8_text(
    name: str, row: int | None, bad: BadUtf8, header: list[str] | None, delimiter: str = ","
) -> str:
    """Message for a line that is not UTF-8, naming the column when it can be found."""
    byte = bad.line[bad.error.start : bad.error.start + 1].hex()
    column = _bad_column(bad.line, header, delimiter)
    place = f"{name} header" if row is None else where(name, row, column)
    return f"{place}: not valid UTF-8 (byte 0x{byte}); save the file as UTF-8"


def _bad_column(line: bytes, header: list[str] | None, delimiter: str = ",") -> str | None:
    """The header name of the field holding the first undecodable byte, if it can be told."""
    if not header:
        return None
    try:
        fields = next(csv.reader([line.decode("utf-8", "replace")], delimiter=delimiter))
    except (csv.Error, StopIteration):
        return None
    for column, value in zip(header, fields, strict=False):
        if "\ufffd" in value:
            return column_name(column)
    return None


# ---------------------------------------------------------------------------------------------
# Validation (the checks are sdclab.censuses.us2010.population.validation's)
# ---------------------------------------------------------------------------------------------
