"""TopDown's error of geounit totals beside the Census Bureau's published detailed summary metrics.

On a synthetic population (default 1,000,000 persons; the first argument overrides), protects it
with TopDown's dhc product at its production settings on 2 workers and measures the mean absolute
error of the total population (P1) of counties, tracts and blocks, and of blocks by size class
(the generator has no urban or rural blocks). Beside them, the Bureau's figures for the 2020 DHC
production settings run on 2010 data (MAE of total population: counties 1.86, tracts 1.94, urban
blocks 4.23, rural blocks 1.61). Prints one JSON line.
"""

from __future__ import annotations

import json
import sys
import time

from sdclab.core.figures import NotMeasured
from sdclab.pipeline import api
from sdclab.pipeline.evaluation import geounit_totals

N = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
BUREAU_MAE = {"county": 1.86, "tract": 1.94, "urban_block": 4.23, "rural_block": 1.61}
"""The Bureau's detailed summary metrics, 2020 DHC production settings on 2010 data."""


def main() -> None:
    population = api.synthesize(N, seed=2010)
    start = time.perf_counter()
    release = api.protect(population, "topdown", seed=4, workers=2)
    seconds = time.perf_counter() - start
    totals = geounit_totals(release, population)
    figures: dict[str, object] = {
        "benchmark": "topdown_detailed_metrics",
        "persons": N,
        "geounits": {level: totals[level]["all"]["geounits"] for level in totals},
        "topdown_seconds": round(seconds, 1),
        "bureau_mae_2010_data": BUREAU_MAE,
    }
    for level in ("county", "tract", "block"):
        figures[f"{level}_mae"] = round(totals[level]["all"]["mae"], 3)
        figures[f"{level}_rmse"] = round(totals[level]["all"]["rmse"], 3)
    figures["block_mae_by_size"] = {
        size: (None if isinstance(m["mae"], NotMeasured) else round(m["mae"], 3), m["geounits"])
        for size, m in totals["block"].items()
        if size != "all"
    }
    figures["tract_mape"] = round(totals["tract"]["all"]["mape"], 3)
    figures["block_share_off_10pct"] = round(totals["block"]["all"]["share_off_10pct"], 4)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
