"""Scale benchmark, EU 2021 census: a country's persons through synthesis, reading, the ESS
protection (targeted record swapping, then the cell key method) and the reconstruction attack.

A synthetic population of PERSONS persons (``sdclab.censuses.eu2021.synth.synthesize``, one LAU
per 150 persons: 300,000 persons in 2,000 LAUs) is drawn, written as Parquet and read back as the
census's records. Timed, each on its own:

* synthesis; reading (the Parquet file through ``read_records``, checks included) and encoding the
  frame in memory (``encode_records``);
* protection of every table of the census (its hypercubes of Regulation (EU) 2017/712, the
  total and the 1 km grid): TRS then CKM (mechanism ``cellkey`` with ``ptable=ess-d2`` and the
  ESS swap chained, target ≤ 60 s on 2 cores), and beside it TRS alone (``swap``) and CKM alone
  (``cellkey``);
  no peer runs for TRS (sdcMicro's ``recordSwap`` is an R package this machine cannot install);
* the reconstruction of the LAU hypercubes (one integer program per NUTS 3 region, the census's
  ``reconstruction.within``) from the exact release (``none``) and from the TRS + CKM release
  (noise-aware, the API's default knowledge ``published``), on WORKERS local processes (target
  ≤ 10 min each): wall time, solver statuses, the largest program and the share of true persons a
  one-to-one matching pairs with a reconstructed record on every attribute the tables resolve.

Prints one JSON line; ``--parts`` leaves out the slow parts for the sizes where they do not run
(``synth,reconstruct`` protects only as the attack needs: TRS + CKM and the exact release).

    python benchmarks/eu_scale.py [--persons 300000] [--seed 2021] [--laus N] [--one-region]
        [--workers 2] [--executor dask-local:2] [--parts synth,protect,reconstruct]
        [--time-limit 300] [--node-limit N] [--programs DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import polars as pl

from sdclab.censuses.eu2021 import census
from sdclab.censuses.eu2021.synth import synthesize
from sdclab.core.census.records import CensusRecords, encode_records, read_records
from sdclab.core.figures import NotMeasured, Value
from sdclab.pipeline.api import protect, reconstruct
from sdclab.pipeline.evaluation import census_agreement
from sdclab.pipeline.experiment.demo import TRS, TRS_CHAINED  # the European demo's swap
from sdclab.release import Release

CKM = {"ptable": "ess-d2"}
TRS_CKM = {**CKM, "swap": "swap", "swap_settings": TRS_CHAINED}
TARGET_PROTECT_SECONDS = 60
TARGET_RECONSTRUCT_SECONDS = 600
TRS_PEER = (
    "n/a: the reference implementation of targeted record swapping, sdcMicro's recordSwap, is an "
    "R package, which this machine cannot install"
)
T = TypeVar("T")


def timed(run: Callable[[], T]) -> tuple[float, T]:
    """(seconds, result) of ``run()``."""
    start = time.perf_counter()
    out = run()
    return time.perf_counter() - start, out


def load() -> str:
    """The machine's load averages over 1, 5 and 15 minutes."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def one_region(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with every person in the first NUTS 1, 2 and 3 region: the LAUs of one
    program of the reconstruction."""
    return frame.with_columns(pl.col(c).first().alias(c) for c in ("nuts1", "nuts2", "nuts3"))


def reading(frame: pl.DataFrame) -> tuple[float, float, CensusRecords]:
    """(seconds to read the Parquet file, seconds to encode the frame in memory, records)."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "persons.parquet"
        frame.write_parquet(path)
        read_s, _ = timed(lambda: read_records(census(), path))
    encode_s, records = timed(lambda: encode_records(census(), frame, "persons"))
    return read_s, encode_s, records


def protection(
    records: CensusRecords, seed: int, alone: bool = True
) -> tuple[dict[str, Any], dict[str, Release]]:
    """Seconds of TRS + CKM, TRS alone and CKM alone (unless not ``alone``) and the exact
    release, and the releases."""
    runs = {
        "trs_ckm": ("cellkey", TRS_CKM),
        **({"trs": ("swap", TRS), "ckm": ("cellkey", CKM)} if alone else {}),
        "none": ("none", {}),
    }
    figures: dict[str, Any] = {}
    releases: dict[str, Release] = {}
    for label, (mechanism, settings) in runs.items():
        seconds, release = timed(
            lambda m=mechanism, s=settings: protect(records, m, seed=seed, **s)
        )
        figures[f"{label}_seconds"] = round(seconds, 3)
        releases[label] = release
    figures["tables"] = len(releases["trs_ckm"].tables)
    figures["load"] = load()
    return figures, releases


def share(value: Value) -> float | str:
    """A measured share, rounded, or why it is not measured."""
    return str(value) if isinstance(value, NotMeasured) else round(float(value), 4)


def attack(
    release: Release,
    records: CensusRecords,
    workers: int,
    executor: str | None,
    time_limit: float,
    node_limit: int | None,
    programs: Path | None = None,
) -> dict[str, Any]:
    """The reconstruction of ``release`` on ``workers`` processes, and how it went; with
    ``programs``, each program's row (persons, seconds, size, status) written there as CSV."""
    seconds, result = timed(
        lambda: reconstruct(
            release,
            workers=workers,
            executor=executor,
            time_limit=time_limit,
            node_limit=node_limit,
        )
    )
    metrics = result.metrics
    if programs is not None:
        result.tracts.write_csv(programs)
    largest = result.tracts.sort("persons", descending=True).row(0, named=True)
    agreement = census_agreement(result.persons, records)
    return {
        "seconds": round(seconds, 2),
        "load": load(),
        "programs": metrics["tracts"],
        "statuses": metrics["statuses"],
        "modes": metrics["modes"],
        "time_limited_programs": metrics["time_limited_tracts"],
        "solve_seconds_total": metrics["solve_seconds_total"],
        "slowest_program_seconds": round(float(result.tracts["seconds"].max()), 2),  # type: ignore[arg-type]
        "largest_program": {
            "persons": largest["persons"],
            "seconds": round(largest["seconds"], 2),
            "variables": largest["variables"],
            "constraints": largest["constraints"],
        },
        "reconstructed_persons": metrics["persons"],
        "share_exact": share(agreement.all.agree_agebin),
        "share_exact_single_year": share(agreement.all.agree_exact_age),
        "draws": metrics["draws"],
        "knowledge": metrics["knowledge"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--persons", type=int, default=300_000)
    parser.add_argument("--seed", type=int, default=2021)
    parser.add_argument("--laus", type=int, default=None, help="default: one per 150 persons")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--one-region",
        action="store_true",
        help="put every LAU in one NUTS 3 region (one program: a region of many LAUs)",
    )
    parser.add_argument("--executor", default=None, help="local, dask-local[:N], dask://HOST:PORT")
    parser.add_argument("--parts", default="synth,protect,reconstruct")
    parser.add_argument("--time-limit", type=float, default=300.0)
    parser.add_argument("--node-limit", type=int, default=None)
    parser.add_argument(
        "--programs", type=Path, default=None, help="directory for each program's row (CSV)"
    )
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    out: dict[str, Any] = {"benchmark": "eu_scale", "census": "eu2021", "load_start": load()}

    synth_s, frame = timed(lambda: synthesize(args.persons, args.seed, laus=args.laus))
    if args.one_region:
        frame = one_region(frame)
    read_s, encode_s, records = reading(frame)
    out |= {
        "persons": records.n_persons,
        "households": records.n_households,
        "laus": frame["lau"].n_unique(),
        "nuts3": frame["nuts3"].n_unique(),
        "largest_lau": int(frame["lau"].value_counts()["count"].max()),  # type: ignore[arg-type]
        "largest_nuts3": int(frame["nuts3"].value_counts()["count"].max()),  # type: ignore[arg-type]
        "synthesis_seconds": round(synth_s, 3),
        "read_parquet_seconds": round(read_s, 3),
        "encode_seconds": round(encode_s, 3),
    }
    if parts & {"protect", "reconstruct"}:
        figures, releases = protection(records, args.seed, "protect" in parts)
        out["protection"] = {
            **figures,
            "target_trs_ckm_seconds": TARGET_PROTECT_SECONDS,
            "trs_peer": TRS_PEER,
        }
    if "reconstruct" in parts:
        out["reconstruction"] = {
            "workers": args.workers,
            "executor": args.executor or "local",
            "time_limit_per_program": args.time_limit,
            "node_limit": args.node_limit,
            "target_seconds": TARGET_RECONSTRUCT_SECONDS,
            **{
                label: attack(
                    releases[label],
                    records,
                    args.workers,
                    args.executor,
                    args.time_limit,
                    args.node_limit,
                    None
                    if args.programs is None
                    else args.programs / f"programs-{records.n_persons}-{label}.csv",
                )
                for label in ("none", "trs_ckm")
            },
        }
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    out["load_end"] = load()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
