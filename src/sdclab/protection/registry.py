"""The registry of mechanisms the command line and experiments use: every mechanism by name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sdclab.censuses.us2010.population import Population
from sdclab.core.errors import InputError
from sdclab.protection import (
    cellkey,
    cellkey_risk,  # noqa: F401 (defines the cell key method's risk analysis)
    gaussian,
    geometric,
    none,
    safetab_h,
    suppression,
    swapping,
    topdown,
    truncated,
)
from sdclab.protection.base import Mechanism, did_you_mean
from sdclab.release import Release

MECHANISMS: dict[str, Mechanism[Any]] = {
    entry.name: entry
    for entry in (
        none.MECHANISM,
        swapping.PSA,
        swapping.SWAP,
        swapping.SWAP_LOW,
        swapping.SWAP_HIGH,
        gaussian.MECHANISM,
        topdown.MECHANISM,
        cellkey.MECHANISM,
        geometric.MECHANISM,
        truncated.MECHANISM,
        safetab_h.MECHANISM,
        suppression.MECHANISM,
    )
}


def _check_defined(mechanisms: dict[str, Mechanism[Any]]) -> None:
    """Every registered mechanism states its guarantee and checks a release read from files
    (refused at import, not at use)."""
    for role in ("guarantee", "check"):
        missing = [m.name for m in mechanisms.values() if not m.defines(role)]
        if missing:
            raise TypeError(f"mechanisms without a {role}: {', '.join(missing)}")


_check_defined(MECHANISMS)


def get(name: str) -> Mechanism[Any]:
    """The registered mechanism called ``name``; an unknown name is an input error."""
    if name not in MECHANISMS:
        raise InputError(
            f"unknown mechanism {name!r}{did_you_mean(name, list(MECHANISMS))} "
            f"(known: {', '.join(MECHANISMS)})"
        )
    return MECHANISMS[name]


def run(
    name: str, population: Population, settings: Mapping[str, Any], seed: int | None
) -> Release:
    """Protect ``population`` with mechanism ``name`` (see :meth:`Mechanism.run`)."""
    return get(name).run(population, settings, seed)
