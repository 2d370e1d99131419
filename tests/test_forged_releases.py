"""Forged releases are refused, not run: edited and digested again as sdclab.release digests them.

The digests are plain SHA-256, so a forger can edit any file and record its new digest. Each case
below does so, then runs a command as a user would; the command must refuse the release in one
line (exit code 2, no output), naming the file and what its mechanism could not have produced
with the release's own recorded parameters — before any attack sizes its work by a forged value.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from sdclab import protection
from sdclab.attacks.knowledge import cell_bounds
from sdclab.censuses.us2010.population.synth import synthesize
from sdclab.cli import app
from sdclab.pipeline import api
from sdclab.protection.cellkey import CellKeyParameters
from sdclab.protection.ptable import create_ptable, write_ptable
from sdclab.protection.ptable_analysis import preimage_bounds
from sdclab.release import DIGESTS_KEY, RELEASE_FILE, file_digest, metadata_digest

SETTINGS = {
    "topdown": {"product": "pl94", "workers": "1"},
    "cellkey": {"ptable": "maxent", "bound": "3", "variance": "2"},
    "cellkey_file": {},  # a p-table from a file: set in the fixture
    "geometric": {"epsilon": "8"},
    "suppress": {},
    "safetab_h": {},
    "swap": {},
    "none": {},
}


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small population and a genuine release of each mechanism an attack reads."""
    root = tmp_path_factory.mktemp("genuine")
    population = synthesize(600, seed=17)
    api.write_population(population, root / "pop")
    write_ptable(create_ptable(3, 2.0, 0, None), root / "ptable.csv")
    for name, settings in SETTINGS.items():
        mechanism = name.removesuffix("_file")
        if name == "cellkey_file":
            settings = {"ptable": str(root / "ptable.csv")}
        api.write_release(protection.run(mechanism, population, settings, 3), root / name)
    return root


def redigest(path: Path) -> None:
    """Record every file's digest and release.json's own, as sdclab.release computes them."""
    meta = json.loads((path / RELEASE_FILE).read_text())
    files = sorted(p for p in path.rglob("*") if p.is_file() and p.name != RELEASE_FILE)
    meta[DIGESTS_KEY]["files"] = {
        p.relative_to(path).as_posix(): file_digest(p)
        for p in files
        if not p.name.startswith(".")  # the output marker is not part of the release
    }
    meta[DIGESTS_KEY][RELEASE_FILE] = metadata_digest(meta)
    (path / RELEASE_FILE).write_text(json.dumps(meta))


def metadata(edit: Callable[[dict[str, Any]], Any]) -> Callable[[Path], None]:
    def forge(path: Path) -> None:
        meta = json.loads((path / RELEASE_FILE).read_text())
        edit(meta)
        (path / RELEASE_FILE).write_text(json.dumps(meta))

    return forge


def frame(name: str, edit: Callable[[pl.DataFrame], pl.DataFrame]) -> Callable[[Path], None]:
    def forge(path: Path) -> None:
        edit(pl.read_parquet(path / name)).write_parquet(path / name)

    return forge


def column(name: str, value: Any) -> Callable[[pl.DataFrame], pl.DataFrame]:
    return lambda f: f.with_columns(pl.lit(value, dtype=f.schema[name]).alias(name))


def first_row(name: str, value: Any) -> Callable[[pl.DataFrame], pl.DataFrame]:
    """Set ``name`` of the first row only (the others stay genuine)."""
    first = pl.int_range(pl.len()) == 0
    return lambda f: f.with_columns(
        pl.when(first).then(pl.lit(value, dtype=f.schema[name])).otherwise(pl.col(name)).alias(name)
    )


def scale(value: float) -> Callable[[Path], None]:
    def edit(meta: dict[str, Any]) -> None:
        scales = meta["noise"]["parameters"]["scale"]
        scales.update(dict.fromkeys(scales, value))

    return metadata(edit)


MEASUREMENTS = "artifacts/measurements.parquet"
ARTIFACT = "artifacts/ptable.parquet"
GROUPS = "artifacts/group_tables.parquet"
HUGE = 100_000_000
GEOMETRIC_NOISE = "noise.parameters.scale.H1 block is not what mechanism geometric states"

CASES = {
    # TopDown's noisy measurements: what the noise-aware attack weighs by 1/σ
    "variance 0": ("topdown", frame(MEASUREMENTS, column("variance", 0.0)), "variance 0.0"),
    "negative variance": ("topdown", frame(MEASUREMENTS, column("variance", -1.0)), "variance"),
    "NaN variance": ("topdown", frame(MEASUREMENTS, column("variance", float("nan"))), "variance"),
    "variance 1e14": ("topdown", frame(MEASUREMENTS, column("variance", 1e14)), "the recorded rho"),
    "measurement 1e8": ("topdown", frame(MEASUREMENTS, column("noisy", HUGE)), "noise's reach"),
    "measurement of half a person": (
        "topdown",
        frame(MEASUREMENTS, lambda f: f.with_columns(pl.col("noisy") + 0.5)),
        "is not a whole number",
    ),
    "measured cell beyond the query": (
        "topdown",
        frame(MEASUREMENTS, column("cell", 99_999)),
        "is not one of its",
    ),
    "unknown query": (
        "topdown",
        frame(MEASUREMENTS, column("query", "nonesuch")),
        "is not one the recorded strategy measures",
    ),
    "measurement twice": (
        "topdown",
        frame(MEASUREMENTS, lambda f: pl.concat([f, f.head(3)])),
        "appears more than once",
    ),
    "MDF code 99": (
        "topdown",
        frame("artifacts/mdf.parquet", lambda f: f.with_columns(pl.col(f.columns[-1]) * 0 + 99)),
        "outside its codes",
    ),
    "MDF short of P1": (
        "topdown",
        frame("artifacts/mdf.parquet", lambda f: f.head(f.height // 2)),
        "but table P1 for the nation publishes",
    ),
    # the cell key method: counts the p-table could publish, no more than the totals allow
    "cell key P12 count 1e8": (
        "cellkey",
        frame("tables/P12.parquet", column("count", HUGE)),
        "more than P1 there",
    ),
    "cell key P1 count 1e8": (
        "cellkey",
        frame("tables/P1.parquet", column("count", HUGE)),
        "its cells add up to at most",
    ),
    "cell key negative count": (
        "cellkey",
        frame("tables/P12.parquet", column("count", -5)),
        "is not one mechanism cellkey publishes",
    ),
    "cell key p-table beside a preset": (
        "cellkey",
        lambda p: (
            (p / "artifacts").mkdir(),
            create_ptable(3, 2.0, 0, None).to_frame().write_parquet(p / ARTIFACT),
            metadata(lambda m: m.update(artifacts=["ptable"]))(p),
        ),
        "is published only with a p-table from a file",
    ),
    "cell key p-table that always adds 700": (
        "cellkey_file",
        frame(
            ARTIFACT,
            lambda f: f.filter((pl.col("i") == 0) | (pl.col("v") == 0)).with_columns(
                j=pl.when(pl.col("i") > 0).then(pl.col("i") + 700).otherwise(0),
                v=pl.when(pl.col("i") > 0).then(700).otherwise(0),
                p=pl.lit(1.0),
                p_int_lb=pl.lit(0.0),
                p_int_ub=pl.lit(1.0),
            ),
        ),
        "is not one mechanism cellkey publishes",
    ),
    # geometric noise: the scales the attack reads, the counts it fits
    "geometric scale NaN": ("geometric", scale(float("nan")), GEOMETRIC_NOISE),
    "geometric scale infinite": ("geometric", scale(float("inf")), GEOMETRIC_NOISE),
    "geometric scale 1e300": ("geometric", scale(1e300), GEOMETRIC_NOISE),
    "geometric scale 0": ("geometric", scale(0), GEOMETRIC_NOISE),
    "geometric count 1e8": (
        "geometric",
        frame("tables/P12.parquet", column("count", HUGE)),
        "more than P1 there",
    ),
    "geometric count -1e18": (
        "geometric",
        frame("tables/P12.parquet", column("count", -(10**18))),
        "within the reach of its table's noise",
    ),
    # suppression: shown counts are exact
    "suppression rule edited in the noise record": (
        "suppress",
        metadata(lambda m: m["noise"]["parameters"].update(small_cells=10**9)),
        "noise.parameters.small_cells",
    ),
    "suppressed count shown as 1": (
        "suppress",
        frame("tables/P12.parquet", column("count", 1)),
        "is not one mechanism suppress publishes",
    ),
    # exact tabulations: whole counts that add up
    "swap P12 count 1e8": (
        "swap",
        frame("tables/P12.parquet", column("count", HUGE)),
        "more than P1 there",
    ),
    "one more person in an exact P12 cell": (
        "none",
        frame(
            "tables/P12.parquet",
            lambda f: f.with_columns(
                count=pl.when(pl.int_range(pl.len()) == 0)
                .then(pl.col("count") + 1)
                .otherwise(pl.col("count"))
            ),
        ),
        "its cells add up to at least",
    ),
    "a release of a mechanism that protects no data": (
        "none",
        metadata(lambda m: m.update(mechanism="gaussian", parameters={"rho": 0.5}, noise={})),
        "mechanism gaussian protects no data",
    ),
    # SafeTab-H's population-group tables
    "unknown variant": (
        "safetab_h",
        frame(GROUPS, first_row("table", "T99001")),
        "table 'T99001' is not a variant",
    ),
    "unknown iteration": (
        "safetab_h",
        frame(GROUPS, first_row("iteration", "ZZZ")),
        "iteration 'ZZZ' is not one of level",
    ),
    "cell of no variant": ("safetab_h", frame(GROUPS, first_row("cell", 99)), "cell 99 is not"),
    "iteration level 7": (
        "safetab_h",
        frame(GROUPS, first_row("iteration_level", 7)),
        "iteration level 7 is not one SafeTab-H publishes",
    ),
    "measured cell marked derived": (
        "safetab_h",
        frame(GROUPS, lambda f: f.with_columns(derived=pl.lit(True))),
        "is measured",
    ),
    "group count -1e9": ("safetab_h", frame(GROUPS, first_row("count", -(10**9))), "noise's reach"),
    "group cell twice": (
        "safetab_h",
        frame(GROUPS, lambda f: pl.concat([f, f.head(2)])),
        "appears more than once",
    ),
}
COMMANDS = {
    "topdown": ["reconstruct", "{R}", "--workers", "1"],
    "cellkey": ["ckm-risk", "{R}"],
    "cellkey_file": ["reconstruct", "{R}", "--workers", "1"],
    "geometric": ["reconstruct", "{R}", "--workers", "1"],
    "suppress": ["evaluate", "{R}", "--truth", "{POP}"],
    "safetab_h": ["evaluate", "{R}", "--truth", "{POP}"],
    "swap": ["reconstruct", "{R}", "--workers", "1"],
    "none": ["evaluate", "{R}", "--truth", "{POP}"],
}
"""The command each forgery is run through (every one reads the release the same way)."""


def forged(made: Path, tmp_path: Path, base: str, edit: Callable[[Path], Any]) -> Path:
    target = tmp_path / "forged" / base
    shutil.copytree(made / base, target)
    (target / ".sdclab-output.json").unlink()
    edit(target)
    redigest(target)
    return target


@pytest.mark.parametrize("case", CASES)
def test_a_forged_release_is_refused_in_one_line(made: Path, tmp_path: Path, case: str) -> None:
    base, edit, expected = CASES[case]
    release = forged(made, tmp_path, base, edit)
    out = tmp_path / "out"
    args = [
        a.replace("{R}", str(release)).replace("{POP}", str(made / "pop")) for a in COMMANDS[base]
    ]
    result = CliRunner().invoke(app, [*args, "--out", str(out)])
    message = result.output.strip()
    assert result.exit_code == 2, message
    assert message.count("\n") == 0 and "Traceback" not in message, message
    assert expected in message, message
    assert "does not match" not in message and "was edited" not in message  # digests agreed
    assert not out.exists()


def test_the_genuine_releases_are_read(made: Path) -> None:
    for name in SETTINGS:
        assert api.read_release(made / name).mechanism == name.removesuffix("_file")


def test_reidentify_refuses_a_forged_release_too(made: Path, tmp_path: Path) -> None:
    recon = tmp_path / "recon"
    assert (
        CliRunner()
        .invoke(app, ["reconstruct", str(made / "swap"), "--workers", "1", "--out", str(recon)])
        .exit_code
        == 0
    )
    release = forged(made, tmp_path, "swap", frame("tables/P12.parquet", column("count", HUGE)))
    result = CliRunner().invoke(
        app,
        [
            "reidentify",
            str(recon),
            "--release",
            str(release),
            "--truth",
            str(made / "pop"),
            "--out",
            str(tmp_path / "links"),
        ],
    )
    assert result.exit_code == 2 and "more than P1 there" in result.output.strip()


def test_a_large_published_count_costs_no_more_than_a_small_one(made: Path) -> None:
    """The attacker's range behind a cell key count is found per distinct count, not by walking
    every count up to the largest (a count of 10⁸ took 5 GB)."""
    release = api.read_release(made / "cellkey")
    began = time.perf_counter()
    bounds = cell_bounds(release, ["P1"], "nation", np.array([[1e12], [3.0]]))
    assert time.perf_counter() - began < 2
    assert bounds.low[0, 0] <= 1e12 <= bounds.high[0, 0] and bounds.high[0, 0] - 1e12 <= 3
    table = CellKeyParameters.model_validate(release.parameters).table()
    low, high = preimage_bounds(table, 0, [2.0**70, float("nan"), -1.0, 0.5])
    assert np.all(low > high)  # none is a count a p-table publishes
