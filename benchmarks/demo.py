"""The demo sweep's cost: `sdclab demo` end to end on 2 cores (goal: at most 15 minutes).

Runs the built-in demo (``experiment.DEMO``: 4,000 persons, 48 releases: 24 on each of two
populations, every one attacked) into a fresh directory and reports its wall time and the seconds
of each kind of step. Then the peer,
measured in the same run: each of the demo's TopDown releases protected again twice on the same
population and seed, as sdclab runs it and with the root's L2 pass sent to the general sparse
solvers (OSQP, then Clarabel) instead of the structured interior point method — the TopDown cost
the sweep would have without it. Prints one JSON line.

    python benchmarks/demo.py
"""

from __future__ import annotations

import json
import re
import resource
import sys
import tempfile
import time
from collections import defaultdict
from contextlib import nullcontext
from pathlib import Path

from topdown_small import root_in_general_solvers  # this directory: the same peer

from sdclab import protection
from sdclab.censuses.us2010.population.synth import synthesize
from sdclab.pipeline.experiment import DEMO, run_spec

TARGET_SECONDS = 15 * 60
STEP = re.compile(r"^(?P<kind>[a-z_]+)(:\S+)?: (?P<seconds>[\d.]+) s$")


def run_demo(out: Path) -> tuple[float, dict[str, float], int]:
    """The demo's wall time, the seconds of its steps by kind, and its number of releases."""
    by_kind: dict[str, float] = defaultdict(float)

    def say(line: str) -> None:
        found = STEP.match(line)
        if found:
            by_kind[found["kind"]] += float(found["seconds"])

    start = time.perf_counter()
    results = run_spec(DEMO, out, say, source="benchmarks/demo.py")
    return time.perf_counter() - start, dict(by_kind), len(results.releases)


def topdown_releases() -> dict[str, dict[str, float]]:
    """Each TopDown release of the demo timed as sdclab runs it and with the peer's root."""
    spec = DEMO.population
    population = synthesize(spec.persons or 0, spec.seed, spec.geography())
    entry = protection.get("topdown")
    out: dict[str, dict[str, float]] = {}
    for point in (p for p in DEMO.points() if p.name == "topdown"):
        seconds = {}
        for who, solvers in (("sdclab", nullcontext()), ("peer", root_in_general_solvers())):
            with solvers:
                start = time.perf_counter()
                entry.run(population, point.settings, point.seed)
                seconds[who] = round(time.perf_counter() - start, 1)
        out[point.title] = seconds
    return out


def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        wall, by_kind, releases = run_demo(Path(directory) / "demo-out")
    topdown = topdown_releases()
    ours = sum(t["sdclab"] for t in topdown.values())
    peer = sum(t["peer"] for t in topdown.values())
    print(
        json.dumps(
            {
                "benchmark": "demo",
                "persons": DEMO.population.persons,
                "releases": releases,
                "wall_seconds": round(wall, 1),
                "target_seconds": TARGET_SECONDS,
                "within_target": wall <= TARGET_SECONDS,
                "step_seconds_by_kind": {k: round(v, 1) for k, v in sorted(by_kind.items())},
                "topdown_releases": topdown,
                "topdown_seconds": {
                    "sdclab": round(ours, 1),
                    "peer_general_solvers_root": round(peer, 1),
                },
                "demo_wall_with_peer_topdown_estimated": round(wall - ours + peer, 1),
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
                "python": sys.version.split()[0],
            }
        )
    )


if __name__ == "__main__":
    main()
