"""The Python API keeps the command line's promises: every refusal of a path or a setting is made
below the API, so that a command and the function it calls refuse alike, with the same message
(each naming the setting as its caller spells it: ``--time-limit`` and ``time_limit``), before
any work and with nothing written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import sdclab
from sdclab.cli import app


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny population, its exact release, a directory of someone else's and a link."""
    root = tmp_path_factory.mktemp("refusals")
    sdclab.write_population(sdclab.synthesize(200, seed=4), root / "pop")
    sdclab.write_release(sdclab.tabulate(sdclab.read_population(root / "pop")), root / "rel")
    (root / "foreign").mkdir()
    (root / "foreign" / "thesis.tex").write_text("mine")
    (root / "link").symlink_to(root / "elsewhere", target_is_directory=True)
    return root


def population(root: Path) -> Any:
    return sdclab.read_population(root / "pop")


def release(root: Path) -> Any:
    return sdclab.read_release(root / "rel")


TOPDOWN = ["-m", "topdown", "--seed", "1"]
Call = Callable[[Path], Any]
CASES: dict[str, tuple[list[str], Call, str, str]] = {
    # id: (command line, the same through the API, the setting as each spells it)
    "protect-checkpoint-is-the-population": (
        ["protect", "{pop}", *TOPDOWN, "--set", "checkpoint={pop}"],
        lambda r: sdclab.protect(population(r), "topdown", seed=1, checkpoint=r / "pop"),
        "mechanism topdown, parameter checkpoint",
        "mechanism topdown, parameter checkpoint",
    ),
    "protect-checkpoint-inside-the-population": (
        ["protect", "{pop}", *TOPDOWN, "--set", "checkpoint={pop}/ck"],
        lambda r: sdclab.protect(population(r), "topdown", seed=1, checkpoint=r / "pop" / "ck"),
        "mechanism topdown, parameter checkpoint",
        "mechanism topdown, parameter checkpoint",
    ),
    "protect-checkpoint-not-a-checkpoint": (
        ["protect", "{pop}", *TOPDOWN, "--set", "checkpoint={root}/foreign"],
        lambda r: sdclab.protect(population(r), "topdown", seed=1, checkpoint=r / "foreign"),
        "mechanism topdown, parameter checkpoint",
        "mechanism topdown, parameter checkpoint",
    ),
    "protect-checkpoint-without-a-seed": (
        ["protect", "{pop}", "-m", "topdown", "--set", "checkpoint={root}/ck"],
        lambda r: sdclab.protect(population(r), "topdown", checkpoint=r / "ck"),
        "mechanism topdown",
        "mechanism topdown",
    ),
    "protect-seed-negative": (
        ["protect", "{pop}", "-m", "geometric", "--seed", "-1"],
        lambda r: sdclab.protect(population(r), "geometric", seed=-1),
        "--seed",
        "seed",
    ),
    "reconstruct-checkpoint-is-the-release": (
        ["reconstruct", "{rel}", "--checkpoint", "{rel}"],
        lambda r: sdclab.reconstruct(release(r), checkpoint=r / "rel"),
        "--checkpoint",
        "checkpoint",
    ),
    "reconstruct-checkpoint-inside-the-release": (
        ["reconstruct", "{rel}", "--checkpoint", "{rel}/ck"],
        lambda r: sdclab.reconstruct(release(r), checkpoint=r / "rel" / "ck"),
        "--checkpoint",
        "checkpoint",
    ),
    "reconstruct-checkpoint-not-a-checkpoint": (
        ["reconstruct", "{rel}", "--checkpoint", "{root}/foreign"],
        lambda r: sdclab.reconstruct(release(r), checkpoint=r / "foreign"),
        "--checkpoint",
        "checkpoint",
    ),
    "reconstruct-time-limit-zero": (
        ["reconstruct", "{rel}", "--time-limit", "0"],
        lambda r: sdclab.reconstruct(release(r), time_limit=0.0),
        "--time-limit",
        "time_limit",
    ),
    "reconstruct-no-workers": (
        ["reconstruct", "{rel}", "--workers", "0"],
        lambda r: sdclab.reconstruct(release(r), workers=0),
        "--workers",
        "workers",
    ),
    "reconstruct-seed-negative": (
        ["reconstruct", "{rel}", "--seed", "-2"],
        lambda r: sdclab.reconstruct(release(r), seed=-2),
        "--seed",
        "seed",
    ),
    "reconstruct-bad-executor": (
        ["reconstruct", "{rel}", "--executor", "spark://x:1"],
        lambda r: sdclab.reconstruct(release(r), executor="spark://x:1"),
        "executor",
        "executor",
    ),
    "tabulate-out-is-the-population": (
        ["tabulate", "{pop}", "--out", "{pop}"],
        lambda r: sdclab.write_release(sdclab.tabulate(population(r)), r / "pop"),
        "--out",
        "path",
    ),
    "tabulate-out-inside-the-population": (
        ["tabulate", "{pop}", "--out", "{pop}/rel"],
        lambda r: sdclab.write_release(sdclab.tabulate(population(r)), r / "pop" / "rel"),
        "--out",
        "path",
    ),
    "protect-out-inside-the-population": (
        ["protect", "{pop}", "-m", "none", "--out", "{pop}/rel"],
        lambda r: sdclab.write_release(sdclab.protect(population(r), "none"), r / "pop" / "rel"),
        "--out",
        "path",
    ),
    "tabulate-out-is-a-link": (
        ["tabulate", "{pop}", "--out", "{root}/link"],
        lambda r: sdclab.write_release(sdclab.tabulate(population(r)), r / "link"),
        "--out",
        "path",
    ),
}


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` with a file's bytes (None for a directory or a link)."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        if p.is_file() and not p.is_symlink()
        else None
        for p in sorted(root.rglob("*"))
    }


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_the_command_line_and_the_api_refuse_alike(case: str, made: Path, tmp_path: Path) -> None:
    args, call, cli_name, api_name = CASES[case]
    out = tmp_path / "out"
    paths = {"pop": made / "pop", "rel": made / "rel", "root": made}
    argv = [a.format(**{k: str(v) for k, v in paths.items()}) for a in args]
    if "--out" not in argv:
        argv += ["--out", str(out)]
    before = snapshot(made)

    with pytest.raises(sdclab.InputError) as refused:
        call(made)
    message = str(refused.value)
    assert message.startswith(api_name) and "\n" not in message, message
    assert snapshot(made) == before, "the API wrote before refusing"

    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2, result.output
    assert result.output == f"error: {message.replace(api_name, cli_name, 1)}\n"
    assert snapshot(made) == before and not out.exists(), "the command wrote before refusing"


def test_what_is_made_from_a_population_stays_out_of_its_directory(made: Path) -> None:
    """Without a command line counterpart: a release made in memory keeps its checkpoints out
    of its population's directory, and a population is not written into its own."""
    before = snapshot(made)
    overlaps = r" overlaps .*pop, which this run reads or writes"
    with pytest.raises(sdclab.InputError, match=rf"^checkpoint .*{overlaps}"):
        sdclab.reconstruct(sdclab.tabulate(population(made)), checkpoint=made / "pop" / "ck")
    with pytest.raises(sdclab.InputError, match=rf"^path .*{overlaps}"):
        sdclab.write_population(population(made), made / "pop" / "copy")
    assert snapshot(made) == before
