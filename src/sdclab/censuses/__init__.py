"""The censuses sdclab knows by name, and the way to any other: a census file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sdclab.census.model import Census
from sdclab.errors import InputError

BUILT_IN: dict[str, Callable[[], Census]] = {}
"""Each built-in census's name and the function that builds it."""


def _register() -> None:
    from sdclab.censuses import us2010

    BUILT_IN[us2010.NAME] = us2010.census


_register()


def is_built_in(census: Census) -> bool:
    """Whether ``census`` is a built-in census (what names it suffices to find it)."""
    return census.name in BUILT_IN and BUILT_IN[census.name]() is census


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
    from sdclab.census.declare import load_census

    return load_census(path)
