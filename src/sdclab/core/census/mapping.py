"""A mapping file: how a persons' file in an office's own layout names a declared census's
columns and writes its codes.

The file is TOML with two tables, both optional::

    [columns]               # census name = the data file's column
    sex = "sex_code"
    village = "gemeinde"

    [recode.sex]            # the data file's code = the census's code
    m = "1"
    f = "2"

``columns`` names the column of the data file that holds an attribute, a level of a geography or
the household key (a name not listed keeps the census's own); ``recode`` turns an attribute's codes
as the file writes them into the census's. A code not listed passes through unchanged and is then
checked like every other value (a code the census does not list is refused with its row, and the
column as the data file names it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from sdclab.core.census.model import Census
from sdclab.core.errors import InputError
from sdclab.core.fileio import read_toml

KEYS = ("columns", "recode")


@dataclass(frozen=True)
class ColumnMapping:
    """A checked mapping file (:func:`read_mapping`)."""

    file: Path
    columns: dict[str, str] = field(default_factory=dict)
    """The data file's column of each census name it renames."""
    recode: dict[str, dict[str, str]] = field(default_factory=dict)
    """Each recoded attribute's codes: the data file's code → the census's code."""

    def file_columns(self, names: tuple[str, ...]) -> tuple[str, ...]:
        """The data file's names of the census's columns ``names``."""
        return tuple(self.columns.get(name, name) for name in names)

    def apply(self, frame: pl.DataFrame, name: str) -> pl.DataFrame:
        """The data file's text columns (``name``: the data file) under the census's names, with
        its codes recoded; a column the mapping names that the file lacks is refused."""
        for key, column in self.columns.items():
            if column not in frame.columns:
                raise InputError(
                    f"{self.file.name}: columns.{key}: {name} has no column {column!r}"
                )
        renamed = {column: key for key, column in self.columns.items()}
        # a column of the file named like a census column that the mapping takes from elsewhere
        # is left out (the mapping's column replaces it)
        kept = [c for c in frame.columns if c not in renamed and c not in self.columns]
        frame = frame.select(
            *(pl.col(c) for c in kept), *(pl.col(c).alias(k) for c, k in renamed.items())
        )
        recoded = [
            pl.col(attribute).str.strip_chars().replace(list(codes), list(codes.values()))
            for attribute, codes in self.recode.items()
            if codes and attribute in frame.columns
        ]
        return frame.with_columns(recoded) if recoded else frame

    def in_file_terms(self, error: InputError) -> InputError:
        """``error``, raised reading the renamed columns, naming the column as the data file
        does (and the census's name for it)."""
        text = str(error)
        for key, column in self.columns.items():
            said = f"column {key!r}"
            if said in text:
                renamed = text.replace(said, f"column {column!r} ({key})", 1)
                return InputError(renamed, error.details)
        return error


def read_mapping(census: Census, file: Path) -> ColumnMapping:
    """The mapping file ``file`` for ``census``'s persons, every key checked: each mistake is
    refused in one line naming the file and the key."""
    file = Path(file)
    data = read_toml(file, "mapping file")
    unknown = sorted(set(data) - set(KEYS))
    if unknown:
        raise InputError(
            f"{file.name}: unknown key {unknown[0]!r} (a mapping file has {', '.join(KEYS)})"
        )
    return ColumnMapping(
        file,
        _columns(census, file.name, data.get("columns", {})),
        _recode(census, file.name, data.get("recode", {})),
    )


def census_columns(census: Census) -> tuple[str, ...]:
    """The names a mapping's ``columns`` may give: every attribute, every level of every
    geography, the household key."""
    levels = (level for h in census.geographies.values() for level in h.levels)
    key = () if census.household_key is None else (census.household_key,)
    return tuple(dict.fromkeys((*census.attributes, *levels, *key)))


def _table(value: Any, name: str, key: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InputError(f"{name}: {key}: expected a table")
    return value


def _text(value: Any, name: str, key: str, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{name}: {key}: expected {what} as text, got {value!r}")
    return value


def _columns(census: Census, name: str, given: Any) -> dict[str, str]:
    known = census_columns(census)
    columns: dict[str, str] = {}
    for key, value in _table(given, name, "columns").items():
        if key not in known:
            raise InputError(
                f"{name}: columns.{key}: not an attribute, level or household key of census "
                f"{census.name} (known: {', '.join(known)})"
            )
        column = _text(value, name, f"columns.{key}", "the data file's column name")
        taken = next((k for k, c in columns.items() if c == column), None)
        if taken is not None:
            raise InputError(
                f"{name}: columns.{key}: column {column!r} is already given for {taken}"
            )
        columns[key] = column
    return columns


def _recode(census: Census, name: str, given: Any) -> dict[str, dict[str, str]]:
    recode: dict[str, dict[str, str]] = {}
    for key, codes in _table(given, name, "recode").items():
        attribute = census.attributes.get(key)
        if attribute is None:
            raise InputError(
                f"{name}: recode.{key}: not an attribute of census {census.name} "
                f"(known: {', '.join(census.attributes)})"
            )
        recode[key] = {}
        for code, value in _table(codes, name, f"recode.{key}").items():
            target = _text(value, name, f"recode.{key}.{code}", "a code of the census").strip()
            if target not in attribute.position:
                listed = list(attribute.position)
                expected = ", ".join(listed[:8]) + (", …" if len(listed) > 8 else "")
                raise InputError(
                    f"{name}: recode.{key}.{code}: {target!r} is not a code of {key} "
                    f"(expected one of {expected})"
                )
            recode[key][code.strip()] = target
    return recode
