"""Noise benchmark: draws per second of sdclab's exact samplers against opendp's, same scales.

For each scale both libraries draw the same number of values (opendp through its vector
measurement on a list of zeros, sdclab through numpy), the throughputs are compared, and the two
samples are checked to come from the same distribution (chi-square two-sample test). Prints one
JSON line.
"""

from __future__ import annotations

import json
import sys
import time
from functools import partial

import numpy as np
import opendp.prelude as dp
from scipy import stats

from sdclab.core import noise

N = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
TARGET_RATIO = 40


def best_of(repeats: int, run) -> tuple[float, np.ndarray]:
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = run()
        best = min(best, time.perf_counter() - start)
    return best, np.asarray(out)


def same_distribution_p(a: np.ndarray, b: np.ndarray) -> float:
    values = np.union1d(a, b)
    counts = np.array(
        [np.bincount(np.searchsorted(values, x), minlength=values.size) for x in (a, b)]
    )
    keep = counts.sum(axis=0) >= 40
    table = np.hstack([counts[:, keep], counts[:, ~keep].sum(axis=1, keepdims=True)])
    return float(stats.chi2_contingency(table[:, table.sum(axis=0) > 0]).pvalue)


def main() -> None:
    dp.enable_features("contrib")
    rng = np.random.default_rng(2026)
    zeros = [0] * N
    rows = []
    cases = [("gaussian", s) for s in (1.0, 10.0, 100.0)] + [
        ("laplace", s) for s in (1.0, 10.0, 100.0)
    ]
    for kind, scale in cases:
        if kind == "gaussian":
            space = (dp.vector_domain(dp.atom_domain(T=int)), dp.l2_distance(T=int))
            peer = dp.m.make_gaussian(*space, scale=scale)
            ours = partial(noise.discrete_gaussian, scale**2, N, rng)
        else:
            space = (dp.vector_domain(dp.atom_domain(T=int)), dp.l1_distance(T=int))
            peer = dp.m.make_laplace(*space, scale=scale)
            ours = partial(noise.discrete_laplace, scale, N, rng)
        peer_s, peer_draws = best_of(1, partial(peer, zeros))
        ours_s, our_draws = best_of(3, ours)
        rows.append(
            {
                "sampler": kind,
                "scale": scale,
                "sdclab_draws_per_s": round(N / ours_s),
                "opendp_draws_per_s": round(N / peer_s),
                "ratio": round(peer_s / ours_s, 1),
                "same_distribution_p": round(same_distribution_p(our_draws, peer_draws), 4),
            }
        )
    print(
        json.dumps(
            {
                "benchmark": "noise",
                "draws": N,
                "peer": "opendp vector make_gaussian / make_laplace (integer domain)",
                "results": rows,
                "min_ratio": min(r["ratio"] for r in rows),
                "target_ratio": TARGET_RATIO,
                "ok": all(
                    r["ratio"] >= TARGET_RATIO and r["same_distribution_p"] > 1e-4 for r in rows
                ),
            }
        )
    )


if __name__ == "__main__":
    main()
