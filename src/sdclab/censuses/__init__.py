"""The censuses sdclab knows by name, a census by its name or its file (:func:`census_named`),
and how a census travels to worker processes."""

from __future__ import annotations

import copyreg
import importlib
import json
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from sdclab.core.census.document import from_document
from sdclab.core.census.model import Census, to_document
from sdclab.core.errors import InputError

if TYPE_CHECKING:
    import polars as pl

BUILT_IN: dict[str, Callable[[], Census]] = {}
"""Each built-in census's name and the function that builds it."""

GENERATORS = {"eu2021": "sdclab.censuses.eu2021.synth"}
"""The module of each built-in census's synthetic population, other than the US census's (whose
population is a :class:`~sdclab.censuses.us2010.population.Population` of its own)."""


class PersonsGenerator(Protocol):
    """A census's synthetic persons: one row per person in the census's microdata columns."""

    GENERATOR_VERSION: str

    def synthesize(self, persons: int, seed: int) -> pl.DataFrame: ...

    def describe(self, frame: pl.DataFrame) -> dict[str, Any]: ...


def _register() -> None:
    from sdclab.censuses import eu2021, us2010

    BUILT_IN[us2010.NAME] = us2010.census
    BUILT_IN[eu2021.NAME] = eu2021.census


_register()


def census_named(name_or_file: str | Path) -> Census:
    """A built-in census by name, or the census a TOML file declares."""
    if str(name_or_file) in BUILT_IN:
        return BUILT_IN[str(name_or_file)]()
    path = Path(name_or_file)
    if path.suffix.lower() != ".toml":
        known = ", ".join(BUILT_IN)
        raise InputError(
            f"unknown census {str(name_or_file)!r}: expected a built-in one ({known}) or a census "
            "file (.toml)"
        )
    from sdclab.core.census.declare import load_census  # reads files: only when a file is named

    return load_census(path, reserved=BUILT_IN)


def is_built_in(census: Census) -> bool:
    """Whether ``census`` is a built-in census (what names it suffices to find it)."""
    return census.name in BUILT_IN and BUILT_IN[census.name]() is census


def generator_of(name: str) -> PersonsGenerator | None:
    """The synthetic persons of the built-in census ``name`` (None: it has none)."""
    module = GENERATORS.get(name)
    return None if module is None else importlib.import_module(module)


def is_us2010(census: Census) -> bool:
    """Whether ``census`` is the US 2010 census: its FIPS geography, SF1 catalogue and the
    products, files and analyses made for them; every other census, built in or declared in
    files, is read and protected through its declaration."""
    from sdclab.censuses import us2010

    return census is us2010.census()


def _reduce(census: Census) -> tuple[Any, ...]:
    """A census pickles by name (a built-in one) or as its document, and unpickles once per
    process, so that caches keyed by the census hold across the tasks of a worker."""
    if is_built_in(census):
        return (_built_in, (census.name,))
    return (_from_text, (json.dumps(to_document(census), sort_keys=True),))


def _built_in(name: str) -> Census:
    return BUILT_IN[name]()


@cache
def _from_text(text: str) -> Census:
    return from_document(json.loads(text))


copyreg.pickle(Census, _reduce)
