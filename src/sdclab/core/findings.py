"""How sdclab's input checks report what is wrong: problems with their file, row, column and
value, collected as findings and raised as one :class:`~sdclab.core.errors.InputError`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from sdclab.core.errors import InputError, escape_control

MAX_SHOWN = 5
"""How many problems one error reports; the others are only counted."""
ROW = "__sdclab_row__"
"""Internal column: the 1-based row number a user would see in the file."""
SHOWN_VALUE_LENGTH = 40


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
    return InputError(escape_control(text), [escape_control(d) for d in details])


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
