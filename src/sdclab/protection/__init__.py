"""The mechanisms, one module each, and the registry the command line and experiments use."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from sdclab.errors import InputError
from sdclab.population import Population
from sdclab.protection import (
    cellkey,
    gaussian,
    geometric,
    none,
    safetab_h,
    suppression,
    swapping,
    topdown,
)
from sdclab.protection.base import Mechanism, parse_settings
from sdclab.randomness import MAX_SEED, make_rng, release_randomness, stream_position
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
        safetab_h.MECHANISM,
        suppression.MECHANISM,
    )
}


def get(name: str) -> Mechanism[Any]:
    """The registered mechanism called ``name``; an unknown name is an input error."""
    if name not in MECHANISMS:
        raise InputError(f"unknown mechanism {name!r}; known: {', '.join(MECHANISMS)}")
    return MECHANISMS[name]


def run(
    name: str, population: Population, settings: Mapping[str, Any], seed: int | None
) -> Release:
    """Protect ``population`` with mechanism ``name``; the release records its randomness.

    Without a seed the random stream comes from OS entropy; with one the release is reproducible
    and marked not fit for publication. A run that keeps checkpoints needs a seed: its checkpoints
    must not hold what regenerates the noise of a publishable release, and an unseeded run could
    not resume from them anyway (it draws new entropy each time).
    """
    entry = get(name)
    params = entry.parse(settings)
    if entry.protect is None:
        raise InputError(f"mechanism {name!r} has a specification card but cannot protect data yet")
    check_seed(seed)
    if getattr(params, "checkpoint", None) is not None and seed is None:
        raise InputError(
            f"mechanism {name}: checkpoint needs a seed (--seed): an unseeded run draws new "
            "entropy each time, so it cannot resume, and its checkpoints must not hold that entropy"
        )
    rng = make_rng(seed)
    before = stream_position(rng)
    release = entry.protect(population, params, rng)
    drew = stream_position(rng) != before
    return replace(release, randomness=release_randomness(release.randomness, seed, drew))


def check_seed(seed: int | None, what: str = "--seed") -> None:
    """A seed is a whole number in 0..2¹²⁸ − 1 (or None for OS entropy)."""
    if seed is None:
        return
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise InputError(f"{what} {seed}: expected a whole number from 0 to 2^128 - 1")


__all__ = ["MECHANISMS", "Mechanism", "check_seed", "get", "parse_settings", "run"]
