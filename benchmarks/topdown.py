"""TopDown benchmark: the pl94 and dhc products on a 1,000,000-person synthetic population.

``pl94`` runs the production strategy at ρ = 2.63 (production level and query shares), ``dhc`` its
default strategy (ρ = 15.3). Each is one full run on 2 worker processes, measured as wall time
(goal ≤ 10 minutes), wall time per level, vCPU-milliseconds per person (this process and its
workers, user + system) beside the ≈ 0.6 reported for the Bureau's 2018 end-to-end test (the
peer: a published figure, since the Bureau's Spark + Gurobi system cannot run here), and peak
memory (this process; the largest worker). Prints one JSON line.

    python benchmarks/topdown.py [PERSONS] [PRODUCT ...] [--seed=N]

The noise seed (default 1) matters: the solvers' work depends on the draw, most of all on the
largest county's tract problem, so a second seed shows how far one figure can be trusted.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from fractions import Fraction

import numpy as np

from sdclab.censuses.us2010.population.synth import synthesize
from sdclab.protection.topdown_engine import topdown
from sdclab.protection.topdown_strategy import PRODUCTS

PEER_VCPU_MS_PER_PERSON = 0.6
"""The Census Bureau's 2018 end-to-end test's cost (docs/topdown.md, *Performance*)."""
TARGET_SECONDS = 600
WORKERS = 2
RHO = {"pl94": Fraction(263, 100), "dhc": None}


def cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    workers = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + workers.ru_utime + workers.ru_stime


def run_product(name: str, population, seed: int = 1) -> dict[str, object]:
    product = PRODUCTS[name]
    strategy = product.default if RHO[name] is None else product.default.with_rho(RHO[name])
    cpu, start = cpu_seconds(), time.perf_counter()
    run = topdown(population, product, strategy, np.random.default_rng(seed), workers=WORKERS)
    wall, cpu = time.perf_counter() - start, cpu_seconds() - cpu
    return {
        "rho": float(strategy.total_rho()),
        "wall_seconds": round(wall, 1),
        "within_target": wall <= TARGET_SECONDS,
        "seconds_per_level": {k: round(v, 1) for k, v in run.seconds.items()},
        "problems_per_level": run.problems,
        "vcpu_ms_per_person": round(1000 * cpu / population.n_persons, 3),
        "below_peer": 1000 * cpu / population.n_persons < PEER_VCPU_MS_PER_PERSON,
    }


def main() -> None:
    seeds = [a for a in sys.argv[1:] if a.startswith("--seed=")]
    positional = [a for a in sys.argv[1:] if a not in seeds]
    seed = int(seeds[-1].removeprefix("--seed=")) if seeds else 1
    persons = int(positional[0]) if positional else 1_000_000
    products = positional[1:] or ["pl94", "dhc"]
    population = synthesize(persons, seed=1)
    results = {name: run_product(name, population, seed) for name in products}
    print(
        json.dumps(
            {
                "benchmark": "topdown",
                "persons": persons,
                "geounits": population.geography.summary,
                "workers": WORKERS,
                "noise_seed": seed,
                "target_seconds": TARGET_SECONDS,
                "peer_vcpu_ms_per_person": PEER_VCPU_MS_PER_PERSON,
                "products": results,
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
                "peak_worker_rss_mb": round(
                    resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
                ),
            }
        )
    )


if __name__ == "__main__":
    main()
