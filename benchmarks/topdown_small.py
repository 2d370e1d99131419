"""TopDown's fixed cost: `dhc` runs of 3,000 and 50,000 synthetic persons on 2 workers.

A budget sweep runs TopDown many times on small populations, so what a run costs whatever its
size matters (goals: 3,000 persons under 5 s, 50,000 under 20 s). Each size is run twice in this
process, on the same population and noise seed: as sdclab runs it, and with the root's L2 pass
sent to the general sparse solvers (OSQP, then Clarabel) instead of the structured interior point
method of ``sdclab.core.optimize.root_qp`` — the peer, measured side by side. Both runs draw the
same noisy measurements of the root; the roots' post-processed outputs differ within the solvers'
tolerances (the script prints the L2 objective each reached), and each level below is measured on
the support of its parent's output, so those measurements may differ. Prints one JSON line.

    python benchmarks/topdown_small.py [PERSONS ...]
"""

from __future__ import annotations

import json
import resource
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import polars as pl

from sdclab.censuses.us2010.population.synth import synthesize
from sdclab.core.optimize import least_squares
from sdclab.core.optimize.sibling_qp import NotConverged
from sdclab.protection.topdown_engine import topdown
from sdclab.protection.topdown_strategy import PRODUCTS

WORKERS = 2
TARGET_SECONDS = {3_000: 5.0, 50_000: 20.0}
SEED = 1


def _general_solvers(qp: object) -> np.ndarray:
    raise NotConverged("benchmark peer: the root goes to the general solvers")


@contextmanager
def root_in_general_solvers() -> Iterator[None]:
    """The peer: inside the block TopDown's root L2 pass goes to the general sparse solvers
    (OSQP, then Clarabel) instead of the structured interior point method."""
    structured = least_squares.solve_root_qp
    least_squares.solve_root_qp = _general_solvers  # type: ignore[assignment]
    try:
        yield
    finally:
        least_squares.solve_root_qp = structured  # type: ignore[assignment]


def _run(population, root_objectives: list[float]) -> tuple[float, dict[str, float], object]:
    product = PRODUCTS["dhc"]
    real = least_squares.solve_l2

    def recording(problem):
        x = real(problem)
        if problem.parent is None:
            qp = least_squares.sibling_pass(
                problem, problem.l2_passes[0], {}, least_squares.TOLERANCE
            )
            root_objectives.append(qp.objective(x))
        return x

    topdown_module = sys.modules["sdclab.protection.topdown"]
    topdown_module.solve_l2 = recording  # type: ignore[attr-defined]
    try:
        start = time.perf_counter()
        run = topdown(
            population, product, product.default, np.random.default_rng(SEED), workers=WORKERS
        )
        wall = time.perf_counter() - start
    finally:
        topdown_module.solve_l2 = real  # type: ignore[attr-defined]
    return wall, {k: round(v, 1) for k, v in run.seconds.items()}, run


def measure(persons: int) -> dict[str, object]:
    population = synthesize(persons, seed=1)
    ours: list[float] = []
    wall, levels, run = _run(population, ours)
    peer: list[float] = []
    with root_in_general_solvers():
        peer_wall, peer_levels, peer_run = _run(population, peer)
    nation = [r.measurements.filter(pl.col("level") == "nation") for r in (run, peer_run)]
    same_noise = nation[0].equals(nation[1])
    target = TARGET_SECONDS.get(persons)
    return {
        "geounits": population.geography.summary,
        "wall_seconds": round(wall, 1),
        "target_seconds": target,
        "within_target": None if target is None else wall <= target,
        "seconds_per_level": levels,
        "peer_general_solvers_root": {"wall_seconds": round(peer_wall, 1), "levels": peer_levels},
        "speedup": round(peer_wall / wall, 1),
        "root_l2_objective": {"structured": round(ours[0], 3), "general": round(peer[0], 3)},
        "same_root_measurements": same_noise,
    }


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or list(TARGET_SECONDS)
    results = {str(n): measure(n) for n in sizes}
    print(
        json.dumps(
            {
                "benchmark": "topdown_small",
                "product": "dhc",
                "workers": WORKERS,
                "noise_seed": SEED,
                "runs": results,
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            }
        )
    )


if __name__ == "__main__":
    main()
