"""The European Union's 2021 census round as a :class:`~sdclab.core.census.Census`.

Declared in this package's files (``census.toml`` and its code lists in ``codes/``) in the format
any office uses for its own census (docs/census.md); docs/europe.md says what follows which
regulation. Its units are read from the microdata: each office brings its own NUTS regions,
LAUs and grid squares.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from sdclab.core.census.declare import load_census
from sdclab.core.census.model import Census

NAME = "eu2021"
DECLARATION = Path(__file__).with_name("census.toml")
"""The census file this package ships."""


@cache
def census() -> Census:
    """The EU 2021 census (one object per process, like every built-in census)."""
    return load_census(DECLARATION)
