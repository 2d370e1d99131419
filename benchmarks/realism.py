"""Realism of the synthetic census against the 2010 attack paper: ours beside the paper's figures.

For each size (default 50,000 and 1,000,000 persons, seed 2010) the script synthesizes the
population and measures every figure of :mod:`sdclab.pipeline.realism` — the proportional guesser's
expected precision on nonmodal persons, populated blocks, uniques on {block, sex, age},
multiracial persons, the solvar-0 blocks and their persons from the exact release of the 34 tables
and the drop when P8 and P10 are left out, and the diagnostics that explain them — each beside the
paper's value and its target range, whether it is inside and how far outside, and the seconds each
part took. The solvar figures reconstruct the exact release twice (34 and 32 tables) with solution
variability; above ``--solvar-tracts`` tracts they are measured on a seeded sample of that many
tracts (each tract's programs read only that tract's tables, so a tract's blocks come out as in
the whole population), and the JSON says so. There is no peer: the paper's figures are the
reference. Prints one JSON line.

    python benchmarks/realism.py [--persons N ...] [--seed S] [--solvar-tracts T] [--workers W]
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from collections.abc import Callable
from typing import Any

from sdclab.censuses.us2010.population import Population
from sdclab.censuses.us2010.population.synth import GENERATOR_VERSION, synthesize
from sdclab.pipeline import realism

SIZES = (50_000, 1_000_000)
SEED = 2010
SOLVAR_TRACTS = 25
"""Tracts whose solution variability is measured when a population has more (0: all)."""
WORKERS = 2

POPULATION_FIGURES: dict[str, Callable[[Population], float]] = {
    "prg_nonmodal_precision": realism.prg_nonmodal_precision,
    "populated_blocks": realism.populated_blocks,
    "unique_on_block_sex_age": realism.unique_on_block_sex_age,
    "multiracial": realism.multiracial,
}
DIAGNOSTICS: dict[str, Callable[[Population], float]] = {
    "one_race_ethnicity_households": realism.one_race_ethnicity_households,
    "alone_in_race_ethnicity_cell": realism.alone_in_race_ethnicity_cell,
    "multiracial_unique_on_race": realism.multiracial_unique_on_race,
}
"""Figures that explain the others (race mixing within households and blocks); the paper states
none of them."""


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    value = fn()
    return value, round(time.perf_counter() - start, 3)


def beside(value: float, reference: realism.Reference, seconds: float | None) -> dict[str, Any]:
    """A figure beside the paper's, its target range, whether it is inside and by how much not."""
    off = max(reference.low - value, value - reference.high, 0.0)
    return {
        "value": round(value, 4),
        "paper": reference.paper,
        "target": [reference.low, reference.high],
        "inside": reference.holds(value),
        "points_outside": round(100 * off, 2),
        "seconds": seconds,
    }


def solvar_figures(population: Population, tracts: int, seed: int, workers: int) -> dict[str, Any]:
    """solvar-0 shares from the exact release of the 34 tables, the same without P8 and P10."""
    all_tracts = int(population.geography.n_units("tract"))
    sample = realism.tract_sample(population, tracts, seed) if tracts else population
    measured = sample.geography.n_units("tract")
    runs = {}
    for name, tables in (("34", realism.ATTACK_TABLES), ("32", realism.WITHOUT_P8_P10)):
        frame, seconds = timed(lambda t=tables: realism.exact_solvar(sample, t, workers=workers))
        runs[name] = (realism.solvar_zero(frame), seconds)
    full, full_seconds = runs["34"]
    drop = full.blocks - runs["32"][0].blocks
    return {
        "tracts": "all"
        if measured == all_tracts
        else f"a sample of {measured} of {all_tracts} tracts (seed {seed})",
        "persons": sample.n_persons,
        "blocks_measured": full.measured,
        "blocks_not_proven": {name: run[0].unproven for name, run in runs.items()},
        "solvar0_blocks": beside(full.blocks, realism.REFERENCES["solvar0_blocks"], full_seconds),
        "solvar0_persons": beside(full.persons, realism.REFERENCES["solvar0_persons"], None),
        "solvar0_blocks_without_p8_p10": round(runs["32"][0].blocks, 4),
        "solvar0_persons_without_p8_p10": round(runs["32"][0].persons, 4),
        "p8_p10_drop": beside(drop, realism.P8_P10_DROP, runs["32"][1]),
    }


def measure(persons: int, seed: int, tracts: int, workers: int) -> dict[str, Any]:
    population, synth_seconds = timed(lambda: synthesize(persons, seed=seed))
    figures = {}
    for name, fn in POPULATION_FIGURES.items():
        value, seconds = timed(lambda f=fn: f(population))
        figures[name] = beside(value, realism.REFERENCES[name], seconds)
    solvar = solvar_figures(population, tracts, seed, workers)
    figures |= {k: solvar.pop(k) for k in ("solvar0_blocks", "solvar0_persons", "p8_p10_drop")}
    diagnostics = {}
    for name, fn in DIAGNOSTICS.items():
        value, seconds = timed(lambda f=fn: f(population))
        diagnostics[name] = {"value": round(value, 4), "seconds": seconds}
    outside = [name for name, figure in figures.items() if not figure["inside"]]
    return {
        "synthesize_seconds": synth_seconds,
        "geounits": population.geography.summary,
        "figures": figures,
        "solvar": solvar,
        "diagnostics": diagnostics,
        "outside": outside,
        "all_inside": not outside,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--persons", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--solvar-tracts", type=int, default=SOLVAR_TRACTS)
    parser.add_argument("--workers", type=int, default=WORKERS)
    args = parser.parse_args()
    runs = {str(n): measure(n, args.seed, args.solvar_tracts, args.workers) for n in args.persons}
    print(
        json.dumps(
            {
                "benchmark": "realism",
                "generator_version": GENERATOR_VERSION,
                "seed": args.seed,
                "workers": args.workers,
                "peer": "none: the paper's figures (Abowd et al., 2010 census) are the reference",
                "runs": runs,
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            }
        )
    )


if __name__ == "__main__":
    main()
