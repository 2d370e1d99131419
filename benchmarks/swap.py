"""Swapping benchmark: the PSA and targeted swapping (swap-low, swap-high) on 1,000,000 persons.

Times each mechanism end to end (selection, swapping, tabulating every table, building the release
with re-keyed microdata) and the swap alone. The peer is a straightforward pandas PSA (group-by,
sample, permute each group with transform, merge persons onto their new units) timed in the same
run; the reference implementation of targeted swapping (sdcMicro's recordSwap) is an R package this
machine cannot install. Prints one JSON line.
"""

from __future__ import annotations

import json
import resource
import sys
import time

import numpy as np
import pandas as pd

from sdclab import protection
from sdclab.censuses.us2010.population.synth import synthesize
from sdclab.protection.households import Households
from sdclab.protection.swapping import (
    PsaParameters,
    psa_groups,
    psa_swap,
    swap_population,
)

N = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
TARGET_SECONDS = 10


def timed(run):
    start = time.perf_counter()
    out = run()
    return time.perf_counter() - start, out


def main() -> None:
    population = synthesize(N, seed=1)
    households = Households(population)
    _ = households.size, households.adults, population.person_unit_row  # shared set-up
    rng = np.random.default_rng(7)

    def swap_only(name):  # the swap alone, with its diagnostics (the release has none)
        params = protection.get(name).parse({})
        return (psa_swap if name == "psa" else swap_population)(population, params, rng)

    def pandas_psa():
        units = population.units.to_pandas()
        frame = pd.DataFrame(
            {"row": households.unit_rows, "group": psa_groups(households, PsaParameters())}
        )
        chosen = frame[rng.random(len(frame)) < 0.05].copy()
        chosen["to"] = chosen.groupby("group")["row"].transform(
            lambda s: rng.permutation(s.to_numpy())
        )
        moved = pd.Series(np.arange(len(units)))
        moved[chosen["row"].to_numpy()] = chosen["to"].to_numpy()
        persons = population.persons.to_pandas()
        persons["row"] = moved.to_numpy()[population.person_unit_row]
        persons = persons.drop(columns=["unit_id", "block"]).merge(
            units[["unit_id", "block"]].reset_index(names="row"), on="row"
        )
        return persons

    peer_s, _ = timed(pandas_psa)
    results = {}
    for name in ("psa", "swap-low", "swap-high"):
        swap_s, swapped = timed(lambda n=name: swap_only(n))
        total_s, _ = timed(lambda n=name: protection.run(n, population, {}, seed=3))
        results[name] = {
            "swap_seconds": round(swap_s, 3),
            "release_seconds": round(total_s, 3),
            "achieved_swap_rate": round(swapped.diagnostics["achieved_swap_rate"], 4),
        }
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        json.dumps(
            {
                "benchmark": "swap",
                "persons": population.n_persons,
                "households": households.count,
                "results": results,
                "peak_rss_mb": round(peak_mb),
                "peer": "pandas PSA (group-by + transform + merge); sdcMicro recordSwap is R",
                "peer_psa_swap_seconds": round(peer_s, 3),
                "psa_swap_speedup": round(peer_s / results["psa"]["swap_seconds"], 1),
                "target_seconds": TARGET_SECONDS,
                "ok": all(r["release_seconds"] <= TARGET_SECONDS for r in results.values()),
            }
        )
    )


if __name__ == "__main__":
    main()
