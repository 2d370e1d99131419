"""Tabulation benchmark: all 34 person tables at every level for 1,000,000 synthetic persons.

Measures sdclab's sparse tabulation (histogram @ query.T, then aggregation up the hierarchy, then
long form) against a straightforward pandas group-by per table in the same run, and checks that both
give identical counts. Prints one JSON line.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).parent))
import pandas_peer  # noqa: E402

from sdclab.censuses.us2010.catalog import PERSON_TABLES
from sdclab.censuses.us2010.population.synth import synthesize  # noqa: E402
from sdclab.core.tables.published import PublishedTable  # noqa: E402
from sdclab.core.tables.tabulate import tabulate  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000


def main() -> None:
    population = synthesize(N, seed=1)

    start = time.perf_counter()
    ours = {
        name: PublishedTable.from_counts(t).frame(labels=False)
        for name, t in tabulate(population, PERSON_TABLES).items()
    }
    ours_seconds = time.perf_counter() - start

    persons = population.persons.to_pandas()
    start = time.perf_counter()
    peer = pandas_peer.tabulate(persons)
    peer_seconds = time.perf_counter() - start

    key = ["level", "geoid", "cell"]
    identical = all(
        ours[name]
        .sort(key)
        .equals(
            pl.from_pandas(peer[name])
            .with_columns(pl.col("cell").cast(pl.Int32), pl.col("count").cast(pl.Int64))
            .sort(key)
        )
        for name in PERSON_TABLES
    )
    rows = sum(frame.height for frame in ours.values())
    print(
        json.dumps(
            {
                "benchmark": "tabulate",
                "persons": population.n_persons,
                "blocks": population.geography.n_blocks,
                "tables": len(PERSON_TABLES),
                "nonzero_rows": rows,
                "sdclab_seconds": round(ours_seconds, 3),
                "peer": "pandas group-by per table",
                "peer_seconds": round(peer_seconds, 3),
                "speedup": round(peer_seconds / ours_seconds, 2),
                "identical_counts": identical,
                "target": {"sdclab_seconds_max": 30, "speedup_min": 5},
                "ok": identical and ours_seconds <= 30 and peer_seconds / ours_seconds >= 5,
            }
        )
    )


if __name__ == "__main__":
    main()
