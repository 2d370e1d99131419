"""Fingerprint of every seeded output: the check that a refactor changes none of them.

A fixed set of small seeded runs of the command line (``python -m sdclab``, 2,000 persons) covers
every registered mechanism and every attack: a synthetic population and its exact tables; the
list of mechanisms, the specification card of each, a release of each that protects data and
the privacy audit of each with an audit plan; reconstructions (noise-aware, naive, from the
block tables alone, with solution variability), reidentification against both attackers with the
vulnerable group, evaluation, the cell key method's risk, budgets; and two experiments
(``sdclab run``): every mechanism attacked every way, with a sweep and replicates, and a second
matched on the common ε with population replicates and no attacks. Solvers stop at a node
limit, never a time limit, so the outputs are the same on any machine.

Then every file the runs wrote gets a SHA-256 of its content: Parquet of its column names, types
and values in row order (floats by ``repr``, which round-trips exactly), never of its bytes, which
carry the writer's metadata; JSON of its figures, keys sorted, without the fields in
:data:`VOLATILE`; CSV, HTML and anything else of its text, HTML without :data:`VOLATILE_HTML`.
The work directory's path is written ``$WORK`` and a step's digest is left out of its directory
name, wherever they appear: files are compared by their relative paths. A mechanism in the
registry without runs here is an error.

Take the map before a refactor and check it after (exit 1 lists every file that changed,
appeared or vanished; ``--work DIR`` keeps the outputs to look at):

    python benchmarks/fingerprint.py --write before.json
    python benchmarks/fingerprint.py --check before.json

``benchmarks/fingerprints/us2010.json`` is the map of the code before the census's attributes,
geography and tables became a value. Prints one JSON line (files, runs, overall digest, seconds).
About 3 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

import sdclab
from sdclab.protection import MECHANISMS

PERSONS = 2000
SEED = 2010
NODE_LIMIT = 2000
WORKERS = 2
AUDIT_TRIALS = 200
DIGEST_KEY = "sdclab-fingerprint-benchmark-digest-key-0123456789"
"""A fixed key for the releases' input digests (``SDCLAB_DIGEST_KEY``): they are reproducible, and
the agency's key file is neither read nor made."""

SETTINGS: dict[str, list[str]] = {
    "none": [],
    "psa": [],
    "swap": [],
    "swap-low": [],
    "swap-high": [],
    "gaussian": ["rho=0.5"],  # protects no data: its card and audit only
    "topdown": [],
    "cellkey": [],
    "geometric": [],
    "safetab_h": [],
    "suppress": [],
    "truncated": [],  # (after the others: a mechanism's seed is its place here)
}
"""Every registered mechanism and the settings of its release, audit and card (defaults where
they exist: the refactor must keep them too); other settings are in :data:`STUDY`."""
CARD_SETTINGS = {"psa": ["largest_group=4"]}
"""What a card without data needs besides."""
NOISE_AWARE = ("topdown", "cellkey", "suppress")
"""Releases reconstructed both noise-aware and naive from the command line (the experiment
attacks every release both ways and from the block tables alone)."""
BUDGETS = [
    ["topdown", "--level", "block", "--budget", "4"],
    ["topdown", "--level", "county", "--query", "P12", "--moe", "5"],
    ["geometric", "--level", "tract", "--query", "P12", "--budget", "2"],
    ["cellkey", "--count", "3"],
]

STUDY = f"""
[population]
persons = 1500
seed = 7
tracts = 3
counties = 2

[[mechanisms]]
name = "none"

[[mechanisms]]
name = "psa"
settings = {{ rate = "0.1" }}
seed = 1

[[mechanisms]]
name = "swap"
seed = 2

[[mechanisms]]
name = "swap-low"
seed = 3

[[mechanisms]]
name = "swap-high"
seed = 4

[[mechanisms]]
name = "topdown"
label = "topdown-dhc"
seed = 5

[[mechanisms]]
name = "topdown"
label = "topdown-pl94"
settings = {{ product = "pl94", measurements = false }}
seed = 6

[[mechanisms]]
name = "cellkey"
settings = {{ ptable = "maxent", bound = 3, variance = 2 }}
seed = 7

[[mechanisms]]
name = "geometric"
settings = {{ epsilon = [4, 16] }}
replicates = 2
seed = 8

[[mechanisms]]
name = "safetab_h"
seed = 9

[[mechanisms]]
name = "suppress"
settings = {{ complementary = "true" }}

[[mechanisms]]
name = "truncated"
settings = {{ epsilon = "0.5", bound = 7 }}
seed = 10

[attacks]
reconstruct = true
variability = true
attackers = ["census", "commercial"]
block_only = true
workers = {WORKERS}
seed = 0
node_limit = {NODE_LIMIT}
"""
"""Every mechanism that protects data, attacked every way (results.json's figures)."""

MATCHED = """
[population]
path = "pop"
replicates = 2
seed = 11

[[mechanisms]]
name = "topdown"
settings = { product = "pl94", measurements = false }
seed = 1

[[mechanisms]]
name = "geometric"
settings = { split = "even" }
seed = 2

[[mechanisms]]
name = "safetab_h"
seed = 3

[[mechanisms]]
name = "suppress"

[match]
values = [2, 8]

[attacks]
reconstruct = false

[report]
accuracy = "accuracy.mae"
level = "county"
table = "P1"
"""
"""Rescaling to a common ε and bootstrapped population replicates of the population above."""

VOLATILE = {
    "seconds": "wall time (a JSON field, and a column of a reconstruction's tracts.parquet)",
    "solve_seconds_total": "wall time",
    "run_at": "wall-clock date",
    "sdclab_version": "the library's version",
    "sdclab": "the library's version (an experiment's provenance)",
    "digests": "the Parquet files' bytes, which carry the writer's metadata (its version); each "
    "file's content is fingerprinted on its own",
    "census": "the census a release names (its name and digest): a key release.json gained when "
    "the census became a value, after the baseline was taken",
}
"""Keys of a JSON file and columns of a Parquet file left out wherever they are, and why."""
VOLATILE_HTML = {
    r"sdclab \d+\.\d+\.\d+ · ": "the library's version (the report's provenance)",
    r" · run \d{4}-\d\d-\d\d \d\d:\d\d UTC": "wall-clock date",
}
"""Text of an experiment's report left out, and why."""
STEP_DIGEST = re.compile(r"(?<=/steps/)([^/\"]+)-[0-9a-f]{16}(?=/|\"|$)")
"""A step directory's digest: a cache key, not content (it covers the sdclab version and, for a
population directory, its absolute path)."""


@dataclass(frozen=True)
class Run:
    """One command line run: ``sdclab ARGS``, its standard output kept in ``stdout`` if given."""

    args: list[str]
    mechanisms: tuple[str, ...] = ()
    stdout: str | None = None


def plan() -> list[Run]:
    """The runs, in order; exits if a registered mechanism is not covered."""
    protecting = {name for name, m in MECHANISMS.items() if m.defines("protect")}
    studied = {entry["name"] for entry in tomllib.loads(STUDY)["mechanisms"]}
    problems = {
        "registered but not in SETTINGS": set(MECHANISMS) - set(SETTINGS),
        "protecting but not in STUDY": protecting - studied,
        "in SETTINGS but not registered": set(SETTINGS) - set(MECHANISMS),
    }
    if any(problems.values()):
        found = "; ".join(f"{k}: {', '.join(sorted(v))}" for k, v in problems.items() if v)
        sys.exit(f"fingerprint: mechanisms not covered ({found})")
    limits = ["--node-limit", str(NODE_LIMIT), "--workers", str(WORKERS)]
    runs = [
        Run(["mechanisms"], tuple(MECHANISMS), "mechanisms.txt"),
        Run(["synth", "-n", str(PERSONS), "--seed", str(SEED), "--tracts", "4", "--counties", "2",
             "--out", "pop"]),
        Run(["tabulate", "pop", "--out", "exact"], ("none",)),
        Run(["reconstruct", "exact", "--variability", *limits, "--out", "recon/exact"]),
    ]  # fmt: skip
    for seed, (name, settings) in enumerate(SETTINGS.items(), start=1):
        sets = [arg for setting in settings for arg in ("--set", setting)]
        mechanism = MECHANISMS[name]
        card = [arg for setting in CARD_SETTINGS.get(name, []) for arg in ("--set", setting)]
        runs.append(Run(["spec", "-m", name, *sets, *card, "--json"], (name,), f"spec/{name}.json"))
        if mechanism.defines("protect"):
            args = ["protect", "pop", "-m", name, *sets, "--seed", str(seed)]
            runs.append(Run([*args, "--out", f"release/{name}"], (name,)))
        if mechanism.defines("audit_plan"):
            args = ["audit", "-m", name, *sets, "--trials", str(AUDIT_TRIALS), "--seed", str(seed)]
            runs.append(Run([*args, "--out", f"audit/{name}.json"], (name,)))
    for name in NOISE_AWARE:
        for knowledge in ("published", "naive"):
            args = ["reconstruct", f"release/{name}", "--knowledge", knowledge, *limits]
            runs.append(Run([*args, "--out", f"recon/{name}-{knowledge}"], (name,)))
    runs.append(
        Run(["reconstruct", "release/swap-low", "--block-only", *limits,
             "--out", "recon/swap-low-block"], ("swap-low",))
    )  # fmt: skip
    for attacker in ("census", "commercial"):
        args = ["reidentify", "recon/topdown-published", "--truth", "pop", "--attacker", attacker]
        args += ["--seed", "3", "--vulnerable", "recon/exact", "--out", f"reid/topdown-{attacker}"]
        runs.append(Run(args, ("topdown",)))
    runs += [
        Run(["evaluate", "release/topdown", "--truth", "pop", "--recon", "recon/topdown-published",
             "--reid", "reid/topdown-census", "--out", "eval/topdown"], ("topdown",)),
        Run(["evaluate", "release/cellkey", "--truth", "pop", "--out", "eval/cellkey"],
            ("cellkey",)),
        Run(["ckm-risk", "release/cellkey", "--truth", "pop", "--out", "ckm-risk"], ("cellkey",)),
    ]  # fmt: skip
    for i, args in enumerate(BUDGETS):
        runs.append(Run(["budget", *args, "--json"], (args[0],), f"budget/{i}-{args[0]}.json"))
    runs.append(Run(["run", "study.toml", "--out", "study"], tuple(sorted(studied))))
    runs.append(Run(["run", "matched.toml", "--out", "matched"]))
    return runs


def execute(runs: list[Run], work: Path) -> None:
    """Run every command in ``work``; a failure ends the script with its output."""
    (work / "study.toml").write_text(STUDY)
    (work / "matched.toml").write_text(MATCHED)
    source = str(Path(sdclab.__file__).parents[1])  # the sdclab imported here, from any cwd
    path = os.pathsep.join(filter(None, [source, os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "SDCLAB_DIGEST_KEY": DIGEST_KEY}
    for run in runs:
        command = [sys.executable, "-m", "sdclab", *run.args]
        done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"fingerprint: sdclab {' '.join(run.args)} failed:\n{done.stderr}")
        if run.stdout:
            (work / run.stdout).parent.mkdir(parents=True, exist_ok=True)
            (work / run.stdout).write_text(done.stdout)
        print(f"sdclab {' '.join(run.args[:2])}", file=sys.stderr, flush=True)


def frame_digest(frame: pl.DataFrame) -> str:
    """SHA-256 of a frame's height, column names, types and values in row order."""
    digest = hashlib.sha256(f"{frame.height}\n".encode())
    for column in frame.get_columns():
        digest.update(f"{column.name}\t{column.dtype}\t{column.to_list()!r}\n".encode())
    return digest.hexdigest()


def without_volatile(value: Any) -> Any:
    """``value`` without the keys of :data:`VOLATILE`, at any depth."""
    if isinstance(value, dict):
        return {k: without_volatile(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [without_volatile(v) for v in value]
    return value


def text_of(path: Path, work: Path) -> str:
    """A text file with the work directory written ``$WORK`` and step digests left out."""
    return STEP_DIGEST.sub(r"\1", path.read_text().replace(str(work), "$WORK"))


def file_digest(path: Path, work: Path) -> str:
    """SHA-256 of the content of one output file."""
    if path.suffix == ".parquet":
        frame = pl.read_parquet(path)
        return frame_digest(frame.drop(VOLATILE.keys() & set(frame.columns)))
    if path.suffix == ".json":
        figures = without_volatile(json.loads(text_of(path, work)))
        text = json.dumps(figures, sort_keys=True, ensure_ascii=False)
    elif path.suffix == ".html":
        text = text_of(path, work)
        for pattern in VOLATILE_HTML:
            text = re.sub(pattern, "", text)
    else:
        text = text_of(path, work)
    return hashlib.sha256(text.encode()).hexdigest()


def fingerprints(work: Path) -> dict[str, str]:
    """Every file under ``work`` by its relative path (step digests left out)."""
    found: dict[str, str] = {}
    for path in sorted(p for p in work.rglob("*") if p.is_file()):
        name = STEP_DIGEST.sub(r"\1", "/" + str(path.relative_to(work)))[1:]
        if name in found:
            sys.exit(f"fingerprint: two files are {name} once step digests are left out")
        found[name] = file_digest(path, work)
    return found


def overall(files: dict[str, str]) -> str:
    """One digest of the whole map."""
    return hashlib.sha256(
        "".join(f"{k}\t{v}\n" for k, v in sorted(files.items())).encode()
    ).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, help="write the map of fingerprints here")
    parser.add_argument("--check", type=Path, help="compare with this map; exit 1 if it differs")
    parser.add_argument(
        "--work", type=Path, help="keep the outputs here (default: a temporary directory)"
    )
    args = parser.parse_args()
    runs = plan()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="sdclab-fingerprint-") as temporary:
        work = (args.work or Path(temporary)).resolve()
        work.mkdir(parents=True, exist_ok=True)
        if any(work.iterdir()):
            sys.exit(f"fingerprint: {work} is not empty")
        execute(runs, work)
        files = fingerprints(work)
    result: dict[str, Any] = {
        "benchmark": "fingerprint",
        "runs": len(runs),
        "mechanisms": sorted({m for run in runs for m in run.mechanisms}),
        "files": len(files),
        "digest": overall(files),
        "seconds": round(time.perf_counter() - start, 1),
    }
    if args.write:
        args.write.parent.mkdir(parents=True, exist_ok=True)
        args.write.write_text(
            json.dumps({"digest": result["digest"], "files": files}, indent=1) + "\n"
        )
    ok = True
    if args.check:
        stored: dict[str, str] = json.loads(args.check.read_text())["files"]
        differences = {
            "changed": sorted(k for k in files.keys() & stored.keys() if files[k] != stored[k]),
            "appeared": sorted(files.keys() - stored.keys()),
            "vanished": sorted(stored.keys() - files.keys()),
        }
        for kind, names in differences.items():
            for name in names:
                print(f"{kind}: {name}", file=sys.stderr)
        result.update({kind: len(names) for kind, names in differences.items()})
        ok = not any(differences.values())
    result["ok"] = ok
    print(json.dumps(result))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
