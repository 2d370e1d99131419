"""Declared-census tabulation benchmark: a census of a dozen topics (10¹⁰ cells in their product)
at 1,000,000 persons, every table at every level.

Measures sdclab's tabulation of a declared census (each table over the marginal domain of the
attributes it crosses, summed up the parent arrays) against a polars group-by per table and level
in the same run (each person's cell computed from the codes; the units joined to their
parents), and checks that both give identical counts, cell by cell. Prints one JSON line.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

from sdclab.core.census.declare import load_census
from sdclab.core.census.records import encode_records
from sdclab.core.tables.tabulate import tabulate

N = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
TOPICS = {  # name: number of codes
    "sex": 2,
    "age": 100,
    "country": 12,
    "citizenship": 6,
    "education": 9,
    "activity": 6,
    "occupation": 10,
    "industry": 21,
    "marital": 5,
    "place_of_work": 4,
    "year_of_arrival": 8,
    "household_status": 7,
}
REGIONS, DISTRICTS, MUNICIPALITIES = 8, 80, 2_000
TABLES = {  # each table's cells: attributes or attribute.breakdown, first slowest
    "T1": [],
    "T2": ["sex", "age.band"],
    "T3": ["sex", "age"],
    "T4": ["country", "citizenship"],
    "T5": ["education", "activity", "sex"],
    "T6": ["occupation", "industry"],
    "T7": ["marital", "household_status", "age.band"],
    "T8": ["place_of_work", "year_of_arrival", "country"],
}


def declare(folder: Path) -> Path:
    """The census file: the topics, a ten-year age band, three levels and eight tables."""
    lines = ['name = "benchmark"']
    for name, size in TOPICS.items():
        lines += [f"[attributes.{name}]", f"codes = {[str(c) for c in range(size)]}"]
    bands = {f"b{b}": [str(a) for a in range(b * 10, b * 10 + 10)] for b in range(10)}
    lines += ["[attributes.age.breakdowns.band]"]
    lines += [f"{k} = {v}" for k, v in bands.items()]
    units = ["level,code,parent"]
    units += [f"region,R{r}," for r in range(REGIONS)]
    units += [f"district,D{d},R{d % REGIONS}" for d in range(DISTRICTS)]
    units += [f"municipality,M{m},D{m % DISTRICTS}" for m in range(MUNICIPALITIES)]
    (folder / "units.csv").write_text("\n".join(units) + "\n")
    lines += ["[geographies.admin]", 'levels = ["region", "district", "municipality"]']
    lines += ['units = "units.csv"']
    for name, cells in TABLES.items():
        lines += [f"[tables.{name}]", f"cells = {cells}"]
    lines += ["[reconstruction]", 'attributes = ["sex", "age"]', "[attack]"]
    lines += ['quasi_identifiers = ["sex", "age"]']
    (folder / "census.toml").write_text("\n".join(lines).replace("'", '"') + "\n")
    return folder / "census.toml"


def persons(rng: np.random.Generator) -> pl.DataFrame:
    columns = {n: rng.integers(0, s, N).astype(str) for n, s in TOPICS.items()}
    municipality = rng.integers(0, MUNICIPALITIES, N)
    return pl.DataFrame(columns).with_columns(
        municipality=pl.Series(np.char.add("M", municipality.astype(str)))
    )


def peer(frame: pl.DataFrame, units: pl.DataFrame) -> dict[tuple[str, str], pl.DataFrame]:
    """Every table at every level by a polars group-by: each person's cell (the categories of
    the crossed breakdowns, first slowest) counted per unit of the level."""
    parents = units.filter(pl.col("level") == "municipality").select(
        municipality="code", district="parent"
    )
    regions = units.filter(pl.col("level") == "district").select(district="code", region="parent")
    located = frame.join(parents, on="municipality").join(regions, on="district")
    out = {}
    for name, cells in TABLES.items():
        cell = pl.lit(0, dtype=pl.Int64)
        for spec in cells:
            attribute, _, breakdown = spec.partition(".")
            position = pl.col(attribute).cast(pl.Int64)
            size = TOPICS[attribute]
            if breakdown:  # the ten-year bands
                position, size = position // 10, 10
            cell = cell * size + position
        with_cell = located.with_columns(cell=cell)
        for level in ("region", "district", "municipality"):
            out[name, level] = with_cell.group_by(level, "cell").len()
    return out


def same_counts(ours: pl.DataFrame, theirs: pl.DataFrame) -> bool:
    key = ["geoid", "cell"]
    return ours.sort(key).equals(theirs.sort(key))


def main() -> None:
    rng = np.random.default_rng(2024)
    with tempfile.TemporaryDirectory() as tmp:
        census = load_census(declare(Path(tmp)))
        units = pl.read_csv(Path(tmp) / "units.csv", infer_schema=False)
    frame = persons(rng)
    records = encode_records(census, frame, "persons")
    start = time.perf_counter()
    counts = tabulate(records)
    ours_seconds = time.perf_counter() - start
    start = time.perf_counter()
    theirs = peer(frame, units)
    peer_seconds = time.perf_counter() - start
    identical = True
    for (name, level), grouped in theirs.items():
        geoids, matrix = counts[name].geoids[level], counts[name].counts[level][1].tocoo()
        ours = pl.DataFrame(
            {
                "geoid": geoids.gather(matrix.row),
                "cell": matrix.col.astype(np.int64),
                "len": matrix.data.astype(np.uint32),
            }
        ).filter(pl.col("len") > 0)
        theirs_frame = grouped.rename({level: "geoid"}).select("geoid", "cell", "len")
        identical &= same_counts(ours, theirs_frame)
    print(
        json.dumps(
            {
                "benchmark": "census_tabulate",
                "persons": N,
                "attributes": len(TOPICS),
                "cells_in_product": int(census.full_domain_size()),
                "tables": len(census.tables),
                "units": REGIONS + DISTRICTS + MUNICIPALITIES,
                "sdclab_seconds": round(ours_seconds, 3),
                "peer": "polars group-by per table and level (the cell computed from the codes)",
                "peer_seconds": round(peer_seconds, 3),
                "speedup": round(peer_seconds / ours_seconds, 2),
                "identical_counts": bool(identical),
            }
        )
    )


if __name__ == "__main__":
    main()
