"""Seeds of replicates: a mechanism entry's further runs of one setting, and the further
populations (synthetic seeds or bootstrap replicates) every release runs on again."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from sdclab.randomness import MAX_SEED

if TYPE_CHECKING:
    from sdclab.experiment.spec import Point


def population_seed(seed: int, population: int) -> int:
    """The seed of population replicate ``population``: the given seed for the first, a derived
    one for the others (the generator's seed, or the bootstrap's)."""
    return seed if population == 1 else replicate_seed(seed, population, stream=1)


def on_population(point: Point, population: int) -> Point:
    """``point`` run on population replicate ``population`` (the first: ``point`` itself):
    ``/p2`` ends its title, and its seed is derived from the point's and the population's, so
    that no two populations share a noise draw."""
    if population == 1:
        return point
    return replace(
        point,
        title=f"{point.title}/p{population}",
        seed=replicate_seed(point.seed, population, stream=2),
        population=population,
    )


def replicate_seed(seed: int, replicate: int, stream: int = 0) -> int:
    """The seed of a replicate: the entry's own for the first, a derived one for the others (and
    for every replicate of another ``stream``: population seeds, and noise on later populations)."""
    if replicate == 1 and stream == 0:
        return seed
    entropy = [seed, replicate] if stream == 0 else [seed, replicate, stream]
    high, low = (int(w) for w in np.random.SeedSequence(entropy).generate_state(2, np.uint64))
    return (high << 64 | low) & MAX_SEED
