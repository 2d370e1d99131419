"""SafeTab-H benchmark: the households of a 1,000,000-person population, beside Tumult Analytics.

sdclab runs SafeTab-H with the production budgets (T03 and T04 of every population group at the
nation, state, county and tract, both iteration levels, adaptive variants). The peer, measured in
the same run, is the equivalent count workload in Tumult Analytics (the library the Bureau's
SafeTab is built on): the same household-by-iteration records, the same public keys (every group
present in T01001 × its finest cells: the five household types for T03, the three tenures for
T04), the same ρ per query and discrete Gaussian noise, with a household adding at most s = 9
records. Tumult runs on Spark in its own environment (``.bench-envs/tumult``, created with
``pip install tmlt.analytics`` when missing; it needs Java). Prints one JSON line.

    python benchmarks/safetab_h.py [PERSONS]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import polars as pl

from sdclab import protection
from sdclab.censuses.us2010.geography import geoid_strings
from sdclab.censuses.us2010.population.synth import synthesize
from sdclab.censuses.us2010.safetab_groups import (
    PRODUCTION_THRESHOLDS,
    REGION_TYPES,
    iterations,
    person_codes,
    stability,
)
from sdclab.protection.safetab_h import SafeTabHParameters
from sdclab.protection.safetab_tables import group_histograms

TARGET_RATIO = 50
ENV = Path(__file__).resolve().parent.parent / ".bench-envs" / "tumult"

TUMULT_SCRIPT = r"""
import json, sys, time
import pandas as pd
from pyspark.sql import SparkSession
from tmlt.analytics import AddMaxRows, KeySet, QueryBuilder, RhoZCDPBudget, Session

folder, s = sys.argv[1], int(sys.argv[2])
spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false") \
    .config("spark.driver.memory", "8g").config("spark.sql.warehouse.dir", folder + "/warehouse") \
    .getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
plan = json.load(open(f"{folder}/plan.json"))
seconds, cells = {}, 0
start_all = time.perf_counter()
for task in plan:
    rows = spark.read.parquet(f"{folder}/{task['rows']}")
    keys = spark.read.parquet(f"{folder}/{task['keys']}")
    t0 = time.perf_counter()
    session = Session.from_dataframe(
        privacy_budget=RhoZCDPBudget(task["rho"]), source_id="records", dataframe=rows,
        protected_change=AddMaxRows(s),
    )
    query = QueryBuilder("records").groupby(KeySet.from_dataframe(keys)).count()
    answer = session.evaluate(query, RhoZCDPBudget(task["rho"]))
    cells += answer.count()
    seconds[task["name"]] = time.perf_counter() - t0
print(json.dumps({"seconds": sum(seconds.values()), "wall": time.perf_counter() - start_all,
                  "cells": cells, "queries": len(plan), "by_query": seconds}))
"""


def tumult_python() -> Path:
    """The Tumult environment's interpreter, created on first use."""
    python = ENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(ENV)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", "tmlt.analytics"], check=True
        )
    return python


def workload(population, params: SafeTabHParameters, folder: Path) -> int:
    """Write the peer's records and keys (one file pair per query) and its plan; return cells."""
    groups = params.groups()
    households = np.flatnonzero(population.household_type > 0)
    values = {
        "T03": population.household_type[households].astype(np.int64),
        "T04": population.units.get_column("tenure").to_numpy()[households].astype(np.int64),
    }
    blocks = population.unit_block_index[households]
    race, origin = person_codes(population)
    head = population.householder_row[households]
    members = {lv: iterations(groups, lv, race[head], origin[head]) for lv in (1, 2)}
    plan, total = [], 0
    for lc in group_histograms(population, groups):
        member = members[lc.level].membership.tocoo()
        geo = population.geography.units(lc.geo_level)[1][blocks[member.row]]
        geoids = geoid_strings(population.geography.codes(lc.geo_level), lc.geo_level)
        present = np.argwhere(lc.t01001 > 0)
        for table, cells in (("T03", (1, 2, 3, 4, 5)), ("T04", (1, 2, 3))):
            name = f"{lc.region}-{lc.level}-{table}"
            rows = pl.DataFrame(
                {
                    "geoid": geoids.gather(geo),
                    "iteration": pl.Series(lc.codes).gather(member.col),
                    "cell": values[table][member.row],
                }
            )
            keys = pl.DataFrame(
                {
                    "geoid": geoids.gather(np.repeat(present[:, 0], len(cells))),
                    "iteration": pl.Series(lc.codes).gather(np.repeat(present[:, 1], len(cells))),
                    "cell": np.tile(np.array(cells, dtype=np.int64), len(present)),
                }
            )
            rows.write_parquet(folder / f"{name}-rows.parquet")
            keys.write_parquet(folder / f"{name}-keys.parquet")
            rho = float(params.rho(lc.region, lc.level))
            plan.append(
                {
                    "name": name,
                    "rows": f"{name}-rows.parquet",
                    "keys": f"{name}-keys.parquet",
                    "rho": rho,
                }
            )
            total += keys.height
    (folder / "plan.json").write_text(json.dumps(plan))
    assert {stability(groups, lv) for lv in (1, 2)} == {9}
    assert set(PRODUCTION_THRESHOLDS) == {(r, lv) for r in REGION_TYPES for lv in (1, 2)}
    return total


def main() -> None:
    persons = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    population = synthesize(persons, seed=1)
    params = SafeTabHParameters()
    start = time.perf_counter()
    release = protection.run("safetab_h", population, {}, 1)
    ours = time.perf_counter() - start
    group_tables = release.artifacts["group_tables"]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        keys = workload(population, params, folder)
        env = {**os.environ, "PYSPARK_PYTHON": str(tumult_python())}
        done = subprocess.run(
            [str(tumult_python()), "-c", TUMULT_SCRIPT, str(folder), "9"],
            check=True,
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp,
        )
    peer = json.loads(done.stdout.strip().splitlines()[-1])
    print(
        json.dumps(
            {
                "benchmark": "safetab_h",
                "persons": persons,
                "households": int((population.household_type > 0).sum()),
                "rho_households": float(params.total_rho()),
                "sdclab_seconds": round(ours, 2),
                "sdclab_published_cells": group_tables.height,
                "tumult_seconds": round(peer["seconds"], 1),
                "tumult_wall_seconds": round(peer["wall"], 1),
                "tumult_queries": peer["queries"],
                "tumult_keys": keys,
                "tumult_cells": peer["cells"],
                "speedup": round(peer["seconds"] / ours, 1),
                "target_speedup": TARGET_RATIO,
                "rho_check": str(Fraction(params.rho_regional)),
            }
        )
    )


if __name__ == "__main__":
    main()
