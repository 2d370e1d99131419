"""Small distributions the European generator draws from: categorical samples (one vector or
one row per draw) and truncated-normal mixtures, all vectorised."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import special

from sdclab.core.arrays import FloatArray, IntArray

Component = tuple[float, float, float, float, float]
"""One part of an age mixture: (weight, mean, standard deviation, lowest, highest)."""


def sample_pmf(rng: np.random.Generator, pmf: Sequence[float] | FloatArray, size: int) -> IntArray:
    """Indices drawn from the probability vector ``pmf`` (inverse CDF; need not sum to 1)."""
    cdf = np.cumsum(np.asarray(pmf, dtype=np.float64))
    drawn = np.searchsorted(cdf, rng.random(size) * cdf[-1], side="right")
    return np.minimum(drawn, len(cdf) - 1).astype(np.int64)


def truncated_normal(
    rng: np.random.Generator,
    mean: float | FloatArray,
    sd: float | FloatArray,
    low: float | FloatArray,
    high: float | FloatArray,
) -> FloatArray:
    """Normal(mean, sd) draws truncated to [low, high], elementwise (inverse CDF)."""
    a = special.ndtr((low - mean) / sd)
    b = special.ndtr((high - mean) / sd)
    u = a + (b - a) * rng.random(np.broadcast(mean, sd, low, high).shape)
    x = mean + sd * special.ndtri(np.clip(u, 1e-12, 1 - 1e-12))
    return np.asarray(np.clip(x, low, high), dtype=np.float64)


def mixture_ages(rng: np.random.Generator, mixture: Sequence[Component], size: int) -> IntArray:
    """Whole ages in years from a mixture of truncated normals (one component per draw)."""
    table = np.asarray(mixture, dtype=np.float64)
    part = sample_pmf(rng, table[:, 0], size)
    mean, sd, low, high = (table[part, k] for k in range(1, 5))
    return np.floor(truncated_normal(rng, mean, sd, low, high + 0.999)).astype(np.int64)


def bernoulli(rng: np.random.Generator, p: float | FloatArray, size: int) -> np.ndarray:
    """True with probability ``p`` (a number, or one per draw)."""
    return rng.random(size) < p
