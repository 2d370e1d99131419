"""SafeTab-H post-processing: the error of the published cells with and without each step.

On a synthetic population (seed 1) with two real cases added — one group-quarters facility moved
with its residents into a tract of its own (a tract without housing units) and one tract moved
into a state of its own (a state of one county of one tract: the three coterminous) — SafeTab-H
runs with the production budgets and one seed, once plain and once with each post-processing
step, so every run draws the same noise. For each step it prints, over the same cells, the mean
absolute error and the share of cells within their 95% margin of error without and with it:

* marginal aggregation (always on: production's): the derived cells against their margin
  1.96·√(k·s/(2ρ)), beside the measured cells against their exact margin;
* ``clamp``: every published cell;
* ``drop_no_housing``: the cells it removes (their truth and error), the others unchanged;
* ``coterminous``: the cells of the geounits whose extent is their parent's, matched by table
  (T03/T04) and cell code, against their own level's margin.

    python benchmarks/safetab_h_post.py [PERSONS] [SEED]
"""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np
import polars as pl

from sdclab import protection
from sdclab.censuses.us2010.population import Population
from sdclab.censuses.us2010.population.synth import synthesize
from sdclab.censuses.us2010.safetab_groups import stability
from sdclab.protection.safetab_h import SafeTabHParameters, margin_of_error, true_cells
from sdclab.protection.safetab_post import (
    REGION_OF,
    coterminous_counts,
    coterminous_units,
    derived_margin,
    housing_geounits,
)
from sdclab.protection.safetab_tables import VARIANT_TABLES

NEW_STATE = "02"
"""The state the last tract moves to (absent from the synthetic population, which is in one)."""


def with_real_cases(population: Population) -> Population:
    """``population`` with its first group-quarters facility (and residents) in a new tract of
    the same county, and its last tract in a new state (:data:`NEW_STATE`) of one county."""
    persons, units, blocks = population.persons, population.units, population.blocks
    gq = units.filter(pl.col("unit_type") > 0)["unit_id"][0]
    home = units.filter(pl.col("unit_id") == gq)["block"][0]
    gq_block = home[:5] + "999900" + "1000"
    tract = units["block"].str.slice(0, 11).max()
    assert isinstance(tract, str)
    moved = NEW_STATE + "001" + tract[5:]

    def relocate(frame: pl.DataFrame, unit_column: bool) -> pl.DataFrame:
        block = pl.col("block")
        if unit_column:
            block = pl.when(pl.col("unit_id") == gq).then(pl.lit(gq_block)).otherwise(block)
        return frame.with_columns(
            block=pl.when(block.str.starts_with(tract))
            .then(pl.lit(moved) + block.str.slice(11))
            .otherwise(block)
        )

    return Population(
        relocate(persons, True),
        relocate(units, True),
        None if blocks is None else relocate(blocks, False),
    )


def scored(population: Population, settings: dict[str, Any], seed: int) -> pl.DataFrame:
    """The published cells of one run with their truth, absolute error and margin of error
    (a measured cell's exact margin, a derived cell's 1.96·√(k·s/(2ρ)), at its own level)."""
    release = protection.run("safetab_h", population, settings, seed)
    p = SafeTabHParameters.model_validate(release.parameters)
    cells = true_cells(population, release)
    terms = {
        (name, cell): int(k)
        for name, v in VARIANT_TABLES.items()
        for cell, k in zip(v.cells, np.asarray(v.derivation.sum(axis=1)).ravel(), strict=True)
    }
    stabilities = {it: stability(p.groups(), it) for it in (1, 2)}
    rows = []
    for (name, cell), k in terms.items():
        for level, region in REGION_OF.items():
            for it in (1, 2):
                rho = p.rho(region, it)
                if rho:
                    s = stabilities[it]
                    moe = margin_of_error(rho, s) if k == 1 else derived_margin(rho, s, k)
                    rows.append((name, cell, level, it, k, float(moe)))
    margins = pl.DataFrame(
        rows,
        schema={
            "table": pl.String,
            "cell": pl.Int8,
            "level": pl.String,
            "iteration_level": pl.Int8,
            "k": pl.Int64,
            "moe": pl.Float64,
        },
        orient="row",
    )
    return cells.join(margins, on=["table", "cell", "level", "iteration_level"]).with_columns(
        error=(pl.col("count") - pl.col("true")).abs(),
        kind=pl.col("table").str.slice(0, 3),
    )


def figures(cells: pl.DataFrame) -> dict[str, Any]:
    """Cells, their mean absolute error and their share within their margin."""
    if not cells.height:
        return {"cells": 0, "mae": "n/a (no cell)", "within_moe": "n/a (no cell)"}
    return {
        "cells": cells.height,
        "mae": round(float(cells["error"].mean()), 3),  # type: ignore[arg-type]
        "within_moe": round(float((cells["error"] <= cells["moe"]).mean()), 4),  # type: ignore[arg-type]
    }


def marginal(base: pl.DataFrame) -> dict[str, Any]:
    out = {"measured": figures(base.filter(pl.col("k") == 1))}
    for k in sorted(set(base["k"].to_list()) - {1}):
        out[f"derived_k{k}"] = figures(base.filter(pl.col("k") == k))
    return out


KEYS = ["level", "geoid", "iteration_level", "iteration", "kind", "cell"]


def compared(without: pl.DataFrame, with_: pl.DataFrame) -> dict[str, Any]:
    """The figures of the same cells (matched by :data:`KEYS`) without and with a step; with
    takes the margin of the same cell without (its own level's)."""
    both = without.join(with_.select(*KEYS, "error"), on=KEYS, suffix="_with")
    return {
        "without": figures(both),
        "with": figures(both.with_columns(error=pl.col("error_with"))),
        "unmatched_cells": without.height - both.height,
    }


def without_housing(population: Population) -> int:
    """How many geounits (state, county, tract) hold persons but no housing unit."""
    geography = population.geography
    persons = np.bincount(population.person_block_index, minlength=geography.n_blocks)
    count = 0
    for level in ("state", "county", "tract"):
        housing = housing_geounits(population, level)
        populated = geography.geoids(level).filter(
            pl.Series(geography.aggregation(level) @ persons > 0)
        )
        count += int((~populated.is_in(housing.implode())).sum())
    return count


def coterminous_effect(
    population: Population, without: pl.DataFrame, with_: pl.DataFrame
) -> dict[str, Any]:
    """:func:`compared` over the cells of the geounits whose extent is their parent's, by level
    and iteration level."""
    geography = population.geography
    parts = []
    for level in ("state", "county", "tract"):
        units, _ = coterminous_units(geography, level)
        geoids = geography.geoids(level).gather(units)
        parts.append(
            pl.DataFrame(
                {"level": pl.Series([level] * len(units), dtype=pl.String), "geoid": geoids}
            )
        )
    inside = without.join(pl.concat(parts), on=["level", "geoid"])
    return {
        f"{level} level {it}": compared(part, with_)
        for (level, it), part in inside.group_by("level", "iteration_level", maintain_order=True)
    }


def main() -> None:
    persons = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    synthetic = synthesize(persons, seed=1)
    population = with_real_cases(synthetic)
    base = scored(population, {}, seed)
    clamp = scored(population, {"clamp": True}, seed)
    dropped = scored(population, {"drop_no_housing": True}, seed)
    cot = scored(population, {"coterminous": True}, seed)
    gone = base.join(dropped, on=[*KEYS, "table"], how="anti")
    kept_same = base.join(dropped, on=[*KEYS, "table", "count"], how="semi").height
    by_level = coterminous_effect(population, base, cot)
    natural = coterminous_effect(
        synthetic, scored(synthetic, {}, seed), scored(synthetic, {"coterminous": True}, seed)
    )
    print(
        json.dumps(
            {
                "benchmark": "safetab_h_post",
                "persons": persons,
                "population_seed": 1,
                "seed": seed,
                "rho": "production",
                "published_cells": base.height,
                "marginal_aggregation": marginal(base),
                "clamp": compared(base, clamp),
                "clamp_true_zero_cells": compared(base.filter(pl.col("true") == 0), clamp),
                "drop_no_housing": {
                    "geounits_dropped": gone.select("level", "geoid").unique().height,
                    "removed": figures(gone),
                    "removed_true_total": int(gone["true"].abs().sum()),
                    "kept_cells_unchanged": kept_same == dropped.height,
                    "geounits_without_housing_synthetic": without_housing(synthetic),
                },
                "coterminous_geounits": coterminous_counts(population.geography),
                "coterminous": by_level or "n/a (no coterminous geounit)",
                "coterminous_geounits_synthetic": coterminous_counts(synthetic.geography),
                "coterminous_synthetic": natural or "n/a (no coterminous geounit)",
            }
        )
    )


if __name__ == "__main__":
    main()
