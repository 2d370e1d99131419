"""A straightforward pandas tabulation of the 34 person tables: one filter + group-by per table.

This is the peer the tabulation benchmark is measured against, and an independent reference for the
tests: it restates every table's cells with pandas expressions instead of the catalogue's matrices.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd

LEVEL_DIGITS = {"nation": 0, "state": 2, "county": 5, "tract": 11, "block_group": 12, "block": 15}
BLOCK_LEVELS = list(LEVEL_DIGITS)
TRACT_LEVELS = ["nation", "state", "county", "tract"]

P12_EDGES = [
    0,
    5,
    10,
    15,
    18,
    20,
    21,
    22,
    25,
    30,
    35,
    40,
    45,
    50,
    55,
    60,
    62,
    65,
    67,
    70,
    75,
    80,
    85,
]
RACE_ORDER = [sum(1 << b for b in c) for k in range(1, 7) for c in combinations(range(6), k)]
RACE_POSITION = np.zeros(64, dtype=np.int64)
RACE_POSITION[RACE_ORDER] = np.arange(63)

ITERATIONS = {
    "A": "race == 1",
    "B": "race == 2",
    "C": "race == 4",
    "D": "race == 8",
    "E": "race == 16",
    "F": "race == 32",
    "G": "nbits >= 2",
    "H": "hispanic == 1",
    "I": "race == 1 and hispanic == 0",
    "J": "race == 2 and hispanic == 0",
    "K": "race == 4 and hispanic == 0",
    "L": "race == 8 and hispanic == 0",
    "M": "race == 16 and hispanic == 0",
    "N": "race == 32 and hispanic == 0",
    "O": "nbits >= 2 and hispanic == 0",
}


def prepare(persons: pd.DataFrame) -> pd.DataFrame:
    """Add the recodes the tables need."""
    df = persons[["block", "sex", "age", "race", "hispanic"]].copy()
    race = df["race"].to_numpy().astype(np.int64)
    for b in range(6):
        df[f"bit{b}"] = (race >> b) & 1
    df["nbits"] = df[[f"bit{b}" for b in range(6)]].sum(axis=1)
    df["p12"] = pd.cut(df["age"], bins=[*P12_EDGES, 999], right=False, labels=False)
    df["pct12"] = np.select(
        [df["age"] < 100, df["age"] < 105, df["age"] < 110], [df["age"], 100, 101], 102
    )
    df["race_pos"] = RACE_POSITION[df["race"].to_numpy()]
    return df


def cells(df: pd.DataFrame, name: str) -> pd.DataFrame:
    """Rows (block, cell) — one per person and cell they count in — for one table."""
    sex0 = df["sex"] - 1
    if name == "P1":
        return df[["block"]].assign(cell=0)
    if name in ("P6", "P7"):
        parts = []
        for b in range(6):
            sub = df[df[f"bit{b}"] == 1]
            cell = b if name == "P6" else sub["hispanic"] * 6 + b
            parts.append(sub[["block"]].assign(cell=cell))
        return pd.concat(parts)
    if name in ("P8", "P10"):
        sub = df if name == "P8" else df[df["age"] >= 18]
        return sub[["block"]].assign(cell=sub["race_pos"])
    if name in ("P9", "P11"):
        sub = df if name == "P9" else df[df["age"] >= 18]
        return sub[["block"]].assign(cell=np.where(sub["hispanic"] == 1, 0, 1 + sub["race_pos"]))
    if name == "P12":
        return df[["block"]].assign(cell=sex0 * 23 + df["p12"])
    if name.startswith("P12"):
        sub = df.query(ITERATIONS[name[3:]])
        return sub[["block"]].assign(cell=(sub["sex"] - 1) * 23 + sub["p12"])
    if name == "P14":
        sub = df[df["age"] < 20]
        return sub[["block"]].assign(cell=(sub["sex"] - 1) * 20 + sub["age"])
    if name == "PCT12":
        return df[["block"]].assign(cell=sex0 * 103 + df["pct12"])
    if name.startswith("PCT12"):
        sub = df.query(ITERATIONS[name[5:]])
        return sub[["block"]].assign(cell=(sub["sex"] - 1) * 103 + sub["pct12"])
    raise KeyError(name)


TABLES = ["P1", "P6", "P7", "P8", "P9", "P10", "P11", "P12"] + [f"P12{c}" for c in "ABCDEFGHI"]
TABLES += ["P14", "PCT12"] + [f"PCT12{c}" for c in "ABCDEFGHIJKLMNO"]


def tabulate(persons: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Long tables (level, geoid, cell, count) of non-zero cells for every person table."""
    df = prepare(persons)
    out = {}
    for name in TABLES:
        rows = cells(df, name)
        levels = TRACT_LEVELS if name.startswith("PCT") else BLOCK_LEVELS
        frames = []
        for level in levels:
            digits = LEVEL_DIGITS[level]
            geoid = rows["block"].str[:digits] if digits else "US"
            counts = rows.assign(geoid=geoid).groupby(["geoid", "cell"]).size()
            frames.append(counts.rename("count").reset_index().assign(level=level))
        out[name] = pd.concat(frames)[["level", "geoid", "cell", "count"]]
    return out
