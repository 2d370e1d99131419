"""Scale benchmark: a multi-state synthetic population through TopDown and reconstruction on Dask.

TopDown (pl94, production strategy at ρ = 2.63) and the reconstruction of its release run on a
``dask-local`` cluster, first with 1 worker process and then with 2 (goal: speed-up ≥ 1.8×, memory
per worker below 8 GB, identical outputs). Reported: wall time per step and executor, persons per
second per core, and the peak memory of the workers (sampled from the cluster while it runs).
Prints one JSON line.

    python benchmarks/scale.py [PERSONS]        # default 10,000,000
"""

from __future__ import annotations

import json
import sys
import threading
import time

from sdclab import protection
from sdclab.attacks.reconstruction import reconstruct
from sdclab.censuses.us2010.population.synth import synthesize
from sdclab.core.execution import Executor
from sdclab.protection import topdown as topdown_module

GOAL_SPEEDUP = 1.8
MEMORY_LIMIT_GB = 8


class WorkerMemory:
    """Resident memory of the Dask workers, sampled every second: the overall peak and, with
    :meth:`phase`, the peak within each named phase (a TopDown level, the reconstruction)."""

    def __init__(self) -> None:
        self.peak = 0
        self.by_phase: dict[str, int] = {}
        self._phase = "start"
        self.started: dict[str, float] = {"start": time.perf_counter()}
        self._stop = threading.Event()

    def phase(self, name: str) -> None:
        self._phase = name
        self.started[name] = time.perf_counter()

    def seconds_by_phase(self, end: float) -> dict[str, float]:
        """Wall time of each phase (until the next one starts, the last one until ``end``)."""
        names, times = list(self.started), [*self.started.values(), end]
        return {name: round(times[i + 1] - times[i], 1) for i, name in enumerate(names)}

    def watch(self) -> None:
        import psutil

        while not self._stop.wait(1.0):
            largest = 0
            for proc in psutil.process_iter(["cmdline", "memory_info"]):
                cmd = " ".join(proc.info.get("cmdline") or [])
                if "distributed" in cmd or "spawn_main" in cmd:
                    largest = max(largest, proc.info["memory_info"].rss)
            self.peak = max(self.peak, largest)
            self.by_phase[self._phase] = max(self.by_phase.get(self._phase, 0), largest)

    def __enter__(self) -> WorkerMemory:
        self._thread = threading.Thread(target=self.watch, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def follow_levels(memory: WorkerMemory) -> None:
    """Name each TopDown level's phase when its tasks start (wraps TopDown's ``run_tasks``)."""
    original = topdown_module.run_tasks

    def traced(fn, payloads, workers=None, label="working", *args, **kwargs):  # type: ignore[no-untyped-def]
        memory.phase(label)
        return original(fn, payloads, workers, label, *args, **kwargs)

    topdown_module.run_tasks = traced


def run(population, workers: int) -> dict[str, object]:
    executor = Executor.parse(f"dask-local:{workers}")
    settings = {"product": "pl94", "rho": "2.63", "executor": f"dask-local:{workers}"}
    with WorkerMemory() as memory:
        follow_levels(memory)
        start = time.perf_counter()
        release = protection.run("topdown", population, settings, 1)
        topdown_seconds = time.perf_counter() - start
        memory.phase("reconstruction")
        start = time.perf_counter()
        recon = reconstruct(release, workers=executor, seed=0)
        recon_seconds = time.perf_counter() - start
        phase_seconds = memory.seconds_by_phase(time.perf_counter())
    return {
        "topdown_seconds": round(topdown_seconds, 1),
        "reconstruction_seconds": round(recon_seconds, 1),
        "peak_worker_gb": round(memory.peak / 2**30, 2),
        "peak_worker_gb_by_phase": {k: round(v / 2**30, 2) for k, v in memory.by_phase.items()},
        "seconds_by_phase": phase_seconds,
        "problems_per_level": release.notes["problems_per_level"],
        "persons_per_second_per_core": round(
            population.n_persons / (topdown_seconds + recon_seconds) / workers, 1
        ),
        "_tables": release.tables,
        "_recon": recon.persons,
    }


def main() -> None:
    persons = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000_000
    population = synthesize(persons, seed=1)
    one, two = run(population, 1), run(population, 2)
    identical = all(
        one["_tables"][name].equals(two["_tables"][name]) for name in one["_tables"]
    ) and one["_recon"].equals(two["_recon"])
    total = lambda r: r["topdown_seconds"] + r["reconstruction_seconds"]  # noqa: E731
    speedup = total(one) / total(two)
    print(
        json.dumps(
            {
                "benchmark": "scale",
                "persons": persons,
                "geounits": population.geography.summary,
                "one_worker": {k: v for k, v in one.items() if not k.startswith("_")},
                "two_workers": {k: v for k, v in two.items() if not k.startswith("_")},
                "speedup": round(speedup, 2),
                "goal_speedup": GOAL_SPEEDUP,
                "memory_limit_gb": MEMORY_LIMIT_GB,
                "identical": identical,
            }
        )
    )


if __name__ == "__main__":
    main()
