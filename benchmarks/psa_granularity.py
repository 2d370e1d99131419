"""How the granularity of the PSA's invariants sets its epsilon, on a synthetic population.

For matching at state, county and tract, on the area alone, × household size and × size × number
of adults, measures b (the largest matching group) on the population and prints ε(p, b) of
Theorem II.1 (Bailie, Gong & Meng) at the swap rates 2%, 4% and 5%, beside the spread of ε over the
granularities and over the swap rates (the paper: the granularity has a large numerical impact,
the swap rate comparatively little). Prints one JSON line.

    python benchmarks/psa_granularity.py [PERSONS] [SEED]
"""

from __future__ import annotations

import json
import sys

from sdclab.censuses.us2010.population.synth import synthesize
from sdclab.core.accounting import psa_epsilon
from sdclab.protection.households import Households
from sdclab.protection.psa_variants import largest_groups

N = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
SEED = int(sys.argv[2]) if len(sys.argv) > 2 else 1
RATES = (0.02, 0.04, 0.05)


def main() -> None:
    population = synthesize(N, seed=SEED)
    households = Households(population)
    rows = largest_groups(households)
    for row in rows:
        row["epsilon"] = {f"{p:g}": round(psa_epsilon(p, row["b"]), 3) for p in RATES}
    at_5 = [row["epsilon"]["0.05"] for row in rows]
    b_2010 = rows[1]["b"]  # state x size, the matching of 2010
    by_rate = [psa_epsilon(p, b_2010) for p in RATES[:2]]
    print(
        json.dumps(
            {
                "benchmark": "psa_granularity",
                "persons": N,
                "seed": SEED,
                "households": households.count,
                "granularities": rows,
                "epsilon_span_over_granularities_at_5pct": round(max(at_5) - min(at_5), 3),
                "epsilon_span_over_rates_2_to_4pct_state_x_size": round(
                    max(by_rate) - min(by_rate), 3
                ),
            }
        )
    )


if __name__ == "__main__":
    main()
