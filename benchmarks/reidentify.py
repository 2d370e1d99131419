"""Reidentification benchmark: 1,000,000 reconstructed records against a census-quality attacker
file of 1,000,000 records — both linkage passes and confirmation — on one core.

The reconstruction itself is set-up (2 workers). The peer is the same two-pass one-to-one linkage
written with pandas (shuffle, groupby-cumcount ranks, merges), timed in the same run on the same
inputs, with identical link counts checked. Prints one JSON line.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
import pandas as pd
import polars as pl

from sdclab.attacks.linkage import ATTACKER_PRESETS, attacker_file, confirm, link
from sdclab.attacks.reconstruction import reconstruct
from sdclab.censuses.us2010 import schema
from sdclab.censuses.us2010.population.synth import synthesize
from sdclab.release import exact_release

N = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
TARGET_SECONDS = 20


def pandas_link(inferred: pd.DataFrame, attacker: pd.DataFrame, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    left = inferred.sample(frac=1.0, random_state=rng).reset_index(drop=True)
    right = attacker.sample(frac=1.0, random_state=rng).reset_index(drop=True)
    left["agebin"] = schema.agebin38(left["age"].to_numpy())
    right["agebin"] = schema.agebin38(right["age"].to_numpy())
    key = ["block", "sex", "age"]
    left["rank"] = left.groupby(key).cumcount()
    right["rank"] = right.groupby(key).cumcount()
    first = left.reset_index().merge(right.reset_index(), on=[*key, "rank"], suffixes=("", "_a"))
    rest_l = left.drop(index=first["index"]).copy()
    rest_r = right.drop(index=first["index_a"]).copy()
    key2 = ["block", "sex", "agebin"]
    rest_l["rank"] = rest_l.groupby(key2).cumcount()
    rest_r["rank"] = rest_r.groupby(key2).cumcount()
    second = rest_l.merge(rest_r, on=[*key2, "rank"], suffixes=("", "_a"))
    return pd.concat([first[["id", "race", "hispanic"]], second[["id", "race", "hispanic"]]])


def main() -> None:
    population = synthesize(N, seed=1)
    release = exact_release(population)
    recon = reconstruct(release, workers=2).persons.with_columns(pl.col("block").cast(pl.Int64))
    inferred = recon.select(pl.col(["block", "sex", "age", "race", "hispanic"]).cast(pl.Int64))
    attacker = attacker_file(population, ATTACKER_PRESETS["census"], np.random.default_rng(2))
    attacker = attacker.with_columns(pl.col("id", "block", "sex", "age").cast(pl.Int64))

    start = time.perf_counter()
    links = confirm(link(inferred, attacker, seed=3), population)
    ours = time.perf_counter() - start

    start = time.perf_counter()
    theirs_links = pandas_link(inferred.to_pandas(), attacker.to_pandas(), seed=3)
    theirs = time.perf_counter() - start

    print(
        json.dumps(
            {
                "benchmark": "reidentify",
                "reconstructed_records": inferred.height,
                "attacker_records": attacker.height,
                "links": links.height,
                "confirmed": int(links["confirmed"].sum()),
                "sdclab_seconds": round(ours, 2),
                "peer": "pandas two-pass linkage (cumcount ranks + merge), no confirmation",
                "peer_seconds": round(theirs, 2),
                "same_link_count": len(theirs_links) == links.height,
                "target_seconds": TARGET_SECONDS,
                "ok": ours <= TARGET_SECONDS,
            }
        )
    )


if __name__ == "__main__":
    main()
