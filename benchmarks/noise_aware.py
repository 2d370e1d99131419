"""Naive and noise-aware reconstruction of three noisy releases, side by side.

On a synthetic population (default 50,000 persons, seed 2010; the first argument overrides),
makes three releases — TopDown's dhc product with its noisy measurements (as ``protect``
publishes them by default), suppression with its default settings, and the cell key method
(maximum-entropy p-table, D = 5, V = 3) — and reconstructs each three ways on ``--workers``
worker processes (default 2): the naive attack (every count exact, every 0 a true 0), the
noise-aware attack alone, and the noise-aware attack with 10 further draws that rank the records.
Reports per release the seconds of each, the noise-aware time over the naive, agreement with the
confidential records, the tract statuses, the ranked precision and the machine's load average.
Prints one JSON line; a progress line per attack on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from sdclab.attacks.reconstruction import reconstruct
from sdclab.censuses.us2010.population import Population
from sdclab.core.figures import as_json
from sdclab.pipeline import api
from sdclab.pipeline.evaluation import agreement, ranked_precision
from sdclab.release import Release

PERSONS = 50_000
SEED = 2010
WORKERS = 2
DRAWS = 10
TIME_LIMIT = 300.0
RELEASES: dict[str, tuple[str, dict[str, Any]]] = {
    "topdown": ("topdown", {"product": "dhc"}),
    "suppress": ("suppress", {}),
    "cellkey": ("cellkey", {"ptable": "maxent", "bound": 5, "variance": 3}),
}
"""Each release: its mechanism and settings (everything else the mechanism's default)."""
RELEASE_SEED = 6
ATTACKS = (
    ("naive", "naive", 0),
    ("noise_aware", "published", 0),
    ("noise_aware_ranked", "published", DRAWS),
)
"""(label, attacker knowledge, ranking draws) of the three reconstructions of each release."""


def attack(
    release: Release, population: Population, workers: int, knowledge: str, draws: int
) -> dict[str, Any]:
    """One reconstruction of ``release``: its seconds, agreement and tract statuses."""
    start = time.perf_counter()
    recon = reconstruct(release, workers, 0, TIME_LIMIT, None, knowledge, draws)
    seconds = time.perf_counter() - start
    metrics = recon.metrics()
    figures: dict[str, Any] = {
        "seconds": round(seconds, 1),
        "agreement_agebin": round(agreement(recon.persons, population).all.agree_agebin, 4),
        "statuses": metrics["statuses"],
        "time_limited_tracts": metrics["time_limited_tracts"],
        "variables": metrics["variables"],
        "constraints": metrics["constraints"],
    }
    if draws:
        figures["precision"] = as_json(ranked_precision(recon.persons, population))
    return figures


def measure(name: str, population: Population, workers: int) -> dict[str, Any]:
    """Protect ``population`` as ``name`` and reconstruct it three ways."""
    mechanism, settings = RELEASES[name]
    start = time.perf_counter()
    release = api.protect(population, mechanism, seed=RELEASE_SEED, **settings)
    figures: dict[str, Any] = {"protect_seconds": round(time.perf_counter() - start, 1)}
    for label, knowledge, draws in ATTACKS:
        load = os.getloadavg()[0]
        figures[label] = attack(release, population, workers, knowledge, draws)
        figures[label]["load_before"] = round(load, 2)
        print(
            f"{name} {label}: {figures[label]['seconds']} s, agreement "
            f"{figures[label]['agreement_agebin']}, load {load:.2f}",
            file=sys.stderr,
            flush=True,
        )
    naive, aware = figures["naive"]["seconds"], figures["noise_aware"]["seconds"]
    figures["noise_aware_over_naive"] = round(aware / max(naive, 0.1), 2)
    figures["ranked_over_one_solve"] = round(
        figures["noise_aware_ranked"]["seconds"] / max(aware, 0.1), 2
    )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("persons", type=int, nargs="?", default=PERSONS)
    parser.add_argument("--workers", type=int, default=WORKERS)
    parser.add_argument("--releases", nargs="+", choices=list(RELEASES), default=list(RELEASES))
    args = parser.parse_args()
    population = api.synthesize(args.persons, seed=SEED)
    figures: dict[str, Any] = {
        "benchmark": "noise_aware",
        "persons": args.persons,
        "seed": SEED,
        "workers": args.workers,
        "cores": os.cpu_count(),
        "time_limit": TIME_LIMIT,
    }
    for name in args.releases:
        figures[name] = measure(name, population, args.workers)
    figures["load_after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
