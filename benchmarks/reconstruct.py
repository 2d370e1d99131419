"""Reconstruction benchmark on a 1,000,000-person synthetic population (exact release, 34 tables).

Measures, in one run: the full reconstruction on 2 worker processes (problem building included),
solution variability for every block, and — on a sample of the smallest tracts — the per-person
binary formulation of the 2010 study (one binary per P12 person slot × single age × race ×
ethnicity, a dummy objective) solved by the same HiGHS, against our count formulation on the same
tracts. Prints one JSON line.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
import scipy.sparse as sp

from sdclab.attacks.reconstruction import reconstruct, solve_tract, stacked_query, tract_problems
from sdclab.attacks.variability import solution_variability, variability_summary
from sdclab.censuses.us2010 import schema
from sdclab.censuses.us2010.catalog import CATALOG
from sdclab.censuses.us2010.population.synth import synthesize
from sdclab.core.optimize.highs import solve_mip
from sdclab.pipeline.evaluation import block_agebin_agreement
from sdclab.release import exact_release

N = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
WORKERS = 2
SAMPLE_TRACTS = 3
BINARY_TIME_LIMIT = 600.0
BUREAU_VCPU_SECONDS_PER_PERSON = 2.4


def binary_formulation_seconds(problem) -> tuple[float, str, int]:
    """Build and solve the per-person binary program of one tract: (seconds, status, columns)."""
    start = time.perf_counter()
    p12 = CATALOG["P12"]
    offset = problem.block_tables.index("P12")
    p12_offset = sum(CATALOG[n].n_cells for n in problem.block_tables[:offset])
    bins = schema.P12_AGES.membership()
    slot_cells, slot_of_var, block_of_var = [], [], []
    slot = 0
    for b in range(len(problem.blocks)):
        counts = problem.block_counts[b, p12_offset : p12_offset + p12.n_cells].astype(int)
        for c in np.flatnonzero(counts):
            sex, agebin = divmod(c, len(schema.P12_AGES))
            ages = np.flatnonzero(bins[agebin])
            race, hisp = np.meshgrid(np.arange(1, 64), (0, 1), indexing="ij")
            grid = np.array(np.meshgrid(ages, race.ravel(), indexing="ij"))
            combos = schema.PERSON.cell_index(
                {
                    "sex": np.full(grid[0].size, sex + 1),
                    "age": grid[0].ravel(),
                    "race": grid[1].ravel(),
                    "hispanic": np.tile(hisp.ravel(), len(ages)),
                }
            )
            for _ in range(counts[c]):
                slot_cells.append(combos)
                slot_of_var.append(np.full(len(combos), slot))
                block_of_var.append(np.full(len(combos), b))
                slot += 1
    cells = np.concatenate(slot_cells)
    slots = np.concatenate(slot_of_var)
    blocks = np.concatenate(block_of_var)
    n = len(cells)
    qb = stacked_query(problem.block_tables).tocsc()[:, cells].tocoo()
    rows_b = blocks[qb.col] * qb.shape[0] + qb.row
    a_b = sp.csr_matrix(
        (np.ones(len(rows_b)), (rows_b, qb.col)), shape=(len(problem.blocks) * qb.shape[0], n)
    )
    a_t = stacked_query(problem.tract_tables).tocsc()[:, cells]
    a_s = sp.csr_matrix((np.ones(n), (slots, np.arange(n))), shape=(slot, n))
    matrix = sp.vstack([a_s, a_b, a_t], format="csc")
    target = np.r_[np.ones(slot), problem.block_counts.reshape(-1), problem.tract_counts]
    status, _, _ = solve_mip(
        matrix,
        target,
        target,
        np.zeros(n),
        np.ones(n),
        np.ones(n, bool),
        threads=1,
        time_limit=BINARY_TIME_LIMIT,
    )
    return time.perf_counter() - start, status, n


def main() -> None:
    population = synthesize(N, seed=1)
    start = time.perf_counter()
    release = exact_release(population)
    tabulate_s = time.perf_counter() - start

    start = time.perf_counter()
    recon = reconstruct(release, workers=WORKERS)
    recon_s = time.perf_counter() - start
    start = time.perf_counter()
    solvar = solution_variability(release, recon, workers=WORKERS)
    solvar_s = time.perf_counter() - start

    problems = sorted(tract_problems(release), key=lambda p: np.nansum(p.block_counts[:, 0]))
    sample = problems[:SAMPLE_TRACTS]
    ours, theirs, statuses, columns = 0.0, 0.0, [], []
    for problem in sample:
        begin = time.perf_counter()
        solve_tract(problem)
        ours += time.perf_counter() - begin
        seconds, status, n = binary_formulation_seconds(problem)
        theirs += seconds
        statuses.append(status)
        columns.append(n)

    persons = population.n_persons
    print(
        json.dumps(
            {
                "benchmark": "reconstruct",
                "persons": persons,
                "tracts": recon.tracts.height,
                "workers": WORKERS,
                "tabulate_seconds": round(tabulate_s, 2),
                "reconstruct_seconds": round(recon_s, 2),
                "persons_per_second": round(persons / recon_s),
                "vcpu_seconds_per_person": round(WORKERS * recon_s / persons, 6),
                "bureau_vcpu_seconds_per_person": BUREAU_VCPU_SECONDS_PER_PERSON,
                "statuses": recon.metrics()["statuses"],
                "agreement_block_sex_agebin": block_agebin_agreement(recon.persons, population),
                "variability_seconds": round(solvar_s, 2),
                "variability_over_reconstruction": round(solvar_s / recon_s, 2),
                "variability": variability_summary(solvar),
                "binary_formulation": {
                    "tracts": len(sample),
                    "persons": int(sum(np.nansum(p.block_counts[:, 0]) for p in sample)),
                    "binary_columns": columns,
                    "statuses": statuses,
                    "seconds": round(theirs, 2),
                    "ours_seconds": round(ours, 3),
                    "speedup": round(theirs / ours, 1),
                    "time_limit_per_tract": BINARY_TIME_LIMIT,
                },
                "target": {
                    "reconstruct_seconds_max": 180,
                    "variability_ratio_max": 2,
                    "speedup_min": 30,
                },
                "ok": recon_s <= 180 and solvar_s <= 2 * recon_s and theirs / ours >= 30,
            }
        )
    )


if __name__ == "__main__":
    main()
