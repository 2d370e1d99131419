"""What a privacy audit observes of a mechanism: neighbouring datasets copied into many tracts,
the outputs of each copy, and the guarantee's claim for them (see ``sdclab.attacks.audit``).

A mechanism's ``audit_plan`` builds a small neighbouring pair (D, D′), copies each into many
tracts of its own (so that one run of the mechanism draws many independent trials), runs itself,
and returns :class:`Trials`: the observed outputs of every copy under D and D′ and its claim.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import polars as pl

from sdclab.censuses.us2010.population import Population
from sdclab.censuses.us2010.population.io import validate
from sdclab.core.arrays import FloatArray
from sdclab.release import Release


@dataclass(frozen=True)
class Claim:
    """What the card claims for the outputs observed, under the neighbours used."""

    premetric: Literal["pure", "zcdp"]
    value: float
    observed: str
    neighbours: str


# ---------------------------------------------------------------------------------------------
# Neighbouring populations, copied into many tracts
# ---------------------------------------------------------------------------------------------

TRACTS_PER_COUNTY = 9000
MAX_TRIALS = 1_000_000
"""Copies per dataset: the geocodes of :func:`geocodes` have room for 4.5 million."""


def geocodes(copy: pl.Expr, block: pl.Expr) -> pl.Expr:
    """15-digit block geocode of block ``block`` (0–999) of copy ``copy``: state 01, one tract
    per copy (9,000 per county), block group 1."""
    county = 1 + 2 * (copy // TRACTS_PER_COUNTY)
    tract = (copy % TRACTS_PER_COUNTY + 1) * 100
    code = 10**13 + county * 10**10 + tract * 10**4 + 1000 + block
    return code.cast(pl.String).str.zfill(15)


def copy_of_geoid(geoid: pl.Expr) -> pl.Expr:
    """Inverse of :func:`geocodes` for a block or tract geoid: the copy it belongs to."""
    county = geoid.str.slice(2, 3).cast(pl.Int64)
    tract = geoid.str.slice(5, 6).cast(pl.Int64)
    return (county - 1) // 2 * TRACTS_PER_COUNTY + tract // 100 - 1


def replicate(persons: pl.DataFrame, units: pl.DataFrame, copies: int) -> Population:
    """``copies`` copies of a one-tract template, copy r in its own tract.

    The template's ``block`` column holds the block's number (0, 1, …) and its ids run from 0.
    """
    index = pl.DataFrame({"copy": np.arange(copies, dtype=np.int64)})
    width = max(persons.height, units.height)

    def spread(frame: pl.DataFrame, ids: list[str]) -> pl.DataFrame:
        out = index.join(frame, how="cross")
        return out.with_columns(
            *[(pl.col("copy") * width + pl.col(c)).alias(c) for c in ids],
            block=geocodes(pl.col("copy"), pl.col("block")),
        ).drop("copy")

    return validate(spread(persons, ["person_id", "unit_id"]), spread(units, ["unit_id"]))


def person(pid: int, unit: int, block: int, **values: Any) -> dict[str, Any]:
    base = {
        "person_id": pid,
        "unit_id": unit,
        "block": block,
        "relationship": 0,
        "sex": 1,
        "age": 40,
        "race": 1,
        "hispanic": 0,
    }
    return base | values


def unit(uid: int, block: int, unit_type: int = 0, tenure: int | None = 1) -> dict[str, Any]:
    return {
        "unit_id": uid,
        "block": block,
        "unit_type": unit_type,
        "occupied": True,
        "tenure": tenure,
    }


# ---------------------------------------------------------------------------------------------
# Reading the observed outputs of each copy
# ---------------------------------------------------------------------------------------------


def copy_matrix(frames: list[pl.DataFrame], copies: int) -> list[FloatArray]:
    """Frames of (copy, key, value), one per dataset, as copies × keys arrays on shared columns
    (a key missing from a copy counts 0: long tables leave zero cells out)."""
    keys = (
        pl.concat([f.select("key") for f in frames]).unique().sort("key").with_row_index("column")
    )
    out = []
    for f in frames:
        placed = f.join(keys, on="key", how="left")
        matrix = np.zeros((copies, keys.height))
        matrix[placed["copy"].to_numpy(), placed["column"].to_numpy()] = placed["value"].to_numpy()
        out.append(matrix)
    return out


def block_outputs(release: Release) -> pl.DataFrame:
    """(copy, key, value) of every published block-level cell of the release's tables (zeros
    left out; a suppressed cell's value NaN)."""
    frames = [
        table.frame("block", labels=False).select(
            copy=copy_of_geoid(pl.col("geoid")),
            key=pl.concat_str(
                pl.lit(name), pl.col("geoid").str.slice(12, 3), pl.col("cell"), separator="|"
            ),
            value=pl.col("count").cast(pl.Float64).fill_null(float("nan")),
        )
        for name, table in release.tables.items()
        if "block" in table.levels
    ]
    return pl.concat(frames)


@dataclass(frozen=True)
class Trials:
    """What a plan observed: trials × outputs under D and under D′, and for additive-noise
    mechanisms the exact difference of the expected outputs."""

    claim: Claim
    d: FloatArray
    d_prime: FloatArray
    shift: FloatArray | None = None
