"""Dinur–Nissim benchmark: for n = 10³, 10⁴, 10⁵ records (seed 0, Hadamard-block queries,
t ≥ n·ln²n), the uniform and discrete Laplace noise at which the least-squares reconstruction
falls below 99% and 90% of the records recovered, beside Bach's Eq. 8 (α = 0.99), the seconds
each size took, and the thresholds' fit to c·√t extrapolated to n = 10⁶. Prints one JSON line.

    PYTHONPATH=src python benchmarks/dinur_nissim.py [n ...]
"""

from __future__ import annotations

import json
import sys
import time

from sdclab.attacks.dinur_nissim_sweep import sweep

SIZES = [int(a) for a in sys.argv[1:]] or [10**3, 10**4, 10**5]


def main() -> None:
    start = time.perf_counter()
    result = sweep(SIZES, seed=0, alpha=0.99)
    sizes = []
    for size in result.sizes:
        row = {
            "records": size.design.records,
            "queries": size.design.queries,
            "seconds": round(size.seconds, 1),
            "eq8_epsilon": round(size.eq8, 5),
            "eq8_epsilon_discrete": round(size.eq8_discrete, 5),
            "recovered_at_eq8": size.at_eq8.recovered,
            "largest_noise_at_eq8": size.at_eq8.largest_noise,
        }
        for t in size.thresholds:
            name = f"{'E' if t.kind == 'uniform' else 'epsilon'}_{round(t.level * 100)}"
            row[name] = round(float(t.passing.magnitude), 6)
            row[f"{name}_failing"] = round(float(t.failing.magnitude), 6)
            row[f"sigma_over_sqrt_t_{t.kind}_{round(t.level * 100)}"] = round(
                t.sigma / size.design.queries**0.5, 4
            )
        sizes.append(row)
    extrapolated = {
        f"{x['noise']}_{round(x['level'] * 100)}": (
            {"E": round(x["bound"]), "E_over_sqrt_n": round(x["bound_over_sqrt_n"], 2)}
            if x["noise"] == "uniform"
            else {
                "epsilon": round(x["epsilon"], 6),
                "eq8_epsilon": round(x["eq8_epsilon"], 5),
                "eq8_over_threshold": round(x["eq8_over_threshold"], 1),
            }
        )
        for x in result.extrapolation
    }
    print(
        json.dumps(
            {
                "benchmark": "dinur_nissim",
                "design": "hadamard blocks (balanced pseudo-random subsets)",
                "seed": 0,
                "sizes": sizes,
                "at_1e6": extrapolated,
                "seconds": round(time.perf_counter() - start, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
