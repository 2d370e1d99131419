"""Synthetic population benchmark: generate 1,000,000 persons, time it and measure peak memory.

There is no external generator to run side by side, so beside the wall time against the 30-second
target the script reports throughput (persons per second) and the process's peak resident memory
(ru_maxrss), with the resident memory before generation for reference. Prints one JSON line.

Usage: python benchmarks/synth.py [N_PERSONS] [SEED]
"""

from __future__ import annotations

import json
import resource
import sys
import time

from sdclab.censuses.us2010.population.synth import build_report, synthesize

N = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
SEED = int(sys.argv[2]) if len(sys.argv) > 2 else 1
TARGET_SECONDS = 30


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    synthesize(1_000, seed=0)  # warm-up: lazy imports and first-call overheads
    baseline = peak_rss_mb()

    start = time.perf_counter()
    population = synthesize(N, seed=SEED)
    seconds = time.perf_counter() - start
    report = build_report(population, SEED)

    counts = report["counts"]
    misses = [name for name, m in report["marginals"].items() if not m["within_tolerance"]]
    print(
        json.dumps(
            {
                "benchmark": "synth",
                "persons": population.n_persons,
                "units": counts["units"],
                "populated_blocks": counts["populated_blocks"],
                "seconds": round(seconds, 3),
                "persons_per_second": round(population.n_persons / seconds),
                "peak_rss_mb": round(peak_rss_mb(), 1),
                "rss_before_mb": round(baseline, 1),
                "peer": "none (no external generator); throughput reported instead",
                "target_seconds": TARGET_SECONDS,
                "marginals_outside_tolerance": misses,
                "ok": population.n_persons == N and seconds <= TARGET_SECONDS,
            }
        )
    )


if __name__ == "__main__":
    main()
