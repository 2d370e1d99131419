"""The mechanisms, one module each, and the registry the command line and experiments use."""

from __future__ import annotations

from typing import Any

from sdclab.errors import InputError
from sdclab.mechanisms import gaussian, none, swapping
from sdclab.mechanisms.base import MechanismEntry, parse_settings

MECHANISMS: dict[str, MechanismEntry[Any]] = {
    entry.name: entry for entry in (none.ENTRY, swapping.PSA, gaussian.ENTRY)
}


def get(name: str) -> MechanismEntry[Any]:
    """The registered mechanism called ``name``; an unknown name is an input error."""
    if name not in MECHANISMS:
        raise InputError(f"unknown mechanism {name!r}; known: {', '.join(MECHANISMS)}")
    return MECHANISMS[name]


__all__ = ["MECHANISMS", "MechanismEntry", "get", "parse_settings"]
