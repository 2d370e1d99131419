"""Categorical draws the synthetic generators share, vectorised."""

from __future__ import annotations

import numpy as np

from sdclab.core.arrays import FloatArray, IntArray


def sample_rows(rng: np.random.Generator, probabilities: FloatArray, row: IntArray) -> IntArray:
    """For each entry of ``row``, a column index drawn from that row of ``probabilities``.

    Rows are laid end to end on one axis (row r occupies [r, r + 1)), so one binary search serves
    all rows without materialising a draws × columns array.
    """
    n_rows, n_cols = probabilities.shape
    cdf = np.cumsum(probabilities, axis=1)
    cdf /= cdf[:, -1:]
    cdf[:, -1] = 1.0
    flat = (cdf + np.arange(n_rows)[:, None]).ravel()
    position = np.searchsorted(flat, row + rng.random(len(row)), side="right")
    return np.clip(position - row * n_cols, 0, n_cols - 1).astype(np.int64)
