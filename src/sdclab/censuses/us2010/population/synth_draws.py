"""Small distributions the synthetic generator's stages draw from: categorical samples,
truncated normals, apportionment, logit shifts and Dirichlet rows."""

from __future__ import annotations

import numpy as np
from scipy import special

from sdclab.core.arrays import FloatArray, IntArray


def sample_pmf(rng: np.random.Generator, pmf: FloatArray, size: int) -> IntArray:
    """Indices drawn from the probability vector ``pmf`` (inverse CDF)."""
    cdf = np.cumsum(pmf)
    return np.searchsorted(cdf, rng.random(size) * cdf[-1], side="right").astype(np.int64)


def truncated_normal(
    rng: np.random.Generator,
    mean: float | FloatArray,
    sd: float,
    low: float | FloatArray,
    high: float | FloatArray,
) -> FloatArray:
    """Normal(mean, sd) draws truncated to [low, high], elementwise (inverse CDF)."""
    a = special.ndtr((low - mean) / sd)
    b = special.ndtr((high - mean) / sd)
    u = a + (b - a) * rng.random(np.broadcast(mean, low, high).shape)
    x = mean + sd * special.ndtri(np.clip(u, 1e-12, 1 - 1e-12))
    return np.clip(x, low, high)


def logit_shift_to_mean(base: FloatArray, counts: FloatArray, target: float) -> FloatArray:
    """``base`` probabilities shifted on the logit scale to a count-weighted mean of ``target``."""
    logit = special.logit(base)
    low, high = -10.0, 10.0
    for _ in range(60):
        mid = (low + high) / 2
        mean = float(np.average(special.expit(logit + mid), weights=counts))
        low, high = (mid, high) if mean < target else (low, mid)
    return np.asarray(special.expit(logit + (low + high) / 2), dtype=np.float64)


def apportion(total: int, shares: FloatArray) -> IntArray:
    """Integers summing to ``total`` in proportion to ``shares`` (largest remainder)."""
    exact = total * shares / shares.sum()
    whole = np.floor(exact).astype(np.int64)
    remainder = total - int(whole.sum())
    whole[np.argsort(whole - exact, kind="stable")[:remainder]] += 1
    return whole


def dirichlet_rows(rng: np.random.Generator, concentration: FloatArray) -> FloatArray:
    """One Dirichlet draw per row of ``concentration`` (normalised gammas; robust to tiny α)."""
    g = rng.standard_gamma(concentration)
    total = g.sum(axis=1, keepdims=True)
    empty = total[:, 0] <= 0
    g[empty] = concentration[empty]
    return np.asarray(g / g.sum(axis=1, keepdims=True), dtype=np.float64)
