"""Seeds of replicates: a mechanism entry's further runs of one setting, and the further
populations (synthetic seeds or bootstrap replicates) every release runs on again (a point on
one: :func:`sdclab.pipeline.experiment.spec.on_population`)."""

from __future__ import annotations

import numpy as np

from sdclab.core.randomness import MAX_SEED


def population_seed(seed: int, population: int) -> int:
    """The seed of population replicate ``population``: the given seed for the first, a derived
    one for the others (the generator's seed, or the bootstrap's)."""
    return seed if population == 1 else replicate_seed(seed, population, stream=1)


def replicate_seed(seed: int, replicate: int, stream: int = 0) -> int:
    """The seed of a replicate: the entry's own for the first, a derived one for the others (and
    for every replicate of another ``stream``: population seeds, and noise on later populations)."""
    if replicate == 1 and stream == 0:
        return seed
    entropy = [seed, replicate] if stream == 0 else [seed, replicate, stream]
    high, low = (int(w) for w in np.random.SeedSequence(entropy).generate_state(2, np.uint64))
    return (high << 64 | low) & MAX_SEED
