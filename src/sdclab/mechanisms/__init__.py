"""The mechanisms, one module each, and the registry the command line and experiments use."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from sdclab.errors import InputError
from sdclab.mechanisms import (
    cellkey,
    gaussian,
    geometric,
    none,
    safetab_h,
    suppression,
    swapping,
    topdown,
)
from sdclab.mechanisms.base import MechanismEntry, parse_settings
from sdclab.population import Population
from sdclab.randomness import make_rng, randomness_record
from sdclab.release import Release

MECHANISMS: dict[str, MechanismEntry[Any]] = {
    entry.name: entry
    for entry in (
        none.ENTRY,
        swapping.PSA,
        swapping.SWAP,
        swapping.SWAP_LOW,
        swapping.SWAP_HIGH,
        gaussian.ENTRY,
        topdown.ENTRY,
        cellkey.ENTRY,
        geometric.ENTRY,
        safetab_h.ENTRY,
        suppression.ENTRY,
    )
}


def get(name: str) -> MechanismEntry[Any]:
    """The registered mechanism called ``name``; an unknown name is an input error."""
    if name not in MECHANISMS:
        raise InputError(f"unknown mechanism {name!r}; known: {', '.join(MECHANISMS)}")
    return MECHANISMS[name]


def run(
    name: str, population: Population, settings: Mapping[str, Any], seed: int | None
) -> Release:
    """Protect ``population`` with mechanism ``name``; the release records its randomness.

    Without a seed the random stream comes from OS entropy; with one the release is reproducible
    and marked not fit for publication.
    """
    entry = get(name)
    params = entry.parse(settings)
    if entry.protect is None:
        raise InputError(f"mechanism {name!r} has a specification card but cannot protect data yet")
    release = entry.protect(population, params, make_rng(seed))
    return replace(release, randomness=randomness_record(seed))


__all__ = ["MECHANISMS", "MechanismEntry", "get", "parse_settings", "run"]
