"""The command line: synth → tabulate → release, demo, and clear failures with exit code 2."""

from __future__ import annotations

import subprocess
import sys

import polars as pl
from typer.testing import CliRunner

from sdclab.cli import app
from sdclab.core.fileio import OUTPUT_MARKER
from sdclab.pipeline.api import read_release

runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, list(args))


def test_synth_then_tabulate(tmp_path):
    pop, rel = tmp_path / "pop", tmp_path / "rel"
    result = run("synth", "--persons", "3000", "--seed", "4", "--out", str(pop))
    assert result.exit_code == 0, result.output
    files = {p.name for p in pop.iterdir()}
    assert files == {
        "persons.parquet",
        "units.parquet",
        "blocks.parquet",  # generator 2.0's blocks without any unit
        "synth.json",
        OUTPUT_MARKER,
    }
    assert pl.read_parquet(pop / "persons.parquet").height == 3000

    result = run("tabulate", str(pop), "--out", str(rel), "--tables", "P1,P12,H1")
    assert result.exit_code == 0, result.output
    release = read_release(rel)
    assert set(release.tables) == {"P1", "P12", "H1"}
    assert release.table("P1").frame("nation")["count"].to_list() == [3000]


def test_synth_is_reproducible_per_seed(tmp_path):
    for name in ("a", "b"):
        assert (
            run("synth", "-n", "2000", "--seed", "9", "--out", str(tmp_path / name)).exit_code == 0
        )
    for table in ("persons.parquet", "units.parquet"):
        assert pl.read_parquet(tmp_path / "a" / table).equals(
            pl.read_parquet(tmp_path / "b" / table)
        )


def test_unknown_table_is_a_usage_error_and_writes_nothing(tmp_path):
    pop = tmp_path / "pop"
    run("synth", "-n", "1000", "--seed", "1", "--out", str(pop))
    result = run("tabulate", str(pop), "--out", str(tmp_path / "rel"), "--tables", "P1,P99")
    assert result.exit_code == 2
    assert "unknown table(s) P99" in result.output
    assert not (tmp_path / "rel").exists()


def test_bad_option_values_exit_2(tmp_path):
    assert run("synth", "--persons", "0", "--out", str(tmp_path / "x")).exit_code == 2
    assert run("tabulate", str(tmp_path / "missing"), "--out", str(tmp_path / "r")).exit_code == 2
    assert not (tmp_path / "x").exists() and not (tmp_path / "r").exists()


def test_module_entry_point_reports_one_line_without_traceback(tmp_path):
    (tmp_path / "pop").mkdir()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "sdclab",
            "tabulate",
            str(tmp_path / "pop"),
            "--out",
            str(tmp_path / "r"),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("error: ")
    assert not (tmp_path / "r").exists()


def test_out_never_replaces_foreign_or_input_directories(tmp_path):
    pop = tmp_path / "pop"
    assert run("synth", "-n", "1000", "--seed", "1", "--out", str(pop)).exit_code == 0
    before = sorted(p.name for p in pop.iterdir())
    result = run("tabulate", str(pop), "--out", str(pop))
    assert result.exit_code == 2 and f"overlaps {pop}" in result.output
    result = run("tabulate", str(pop), "--out", str(tmp_path))
    assert result.exit_code == 2 and f"overlaps {pop}" in result.output
    assert sorted(p.name for p in pop.iterdir()) == before

    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("data")
    for args in (("synth", "-n", "1000"), ("tabulate", str(pop))):
        result = run(*args, "--out", str(precious))
        assert result.exit_code == 2 and "not an sdclab output" in result.output
    assert [p.name for p in precious.iterdir()] == ["thesis.tex"]

    rel = tmp_path / "rel"
    assert run("tabulate", str(pop), "--out", str(rel), "--tables", "P1").exit_code == 0
    assert run("tabulate", str(pop), "--out", str(rel), "--tables", "P8").exit_code == 0
    assert sorted(p.name for p in (rel / "tables").iterdir()) == ["P8.parquet"]


def test_a_reader_that_closes_the_pipe_early_is_not_an_error():
    """`sdclab spec … | head -1`: the output was written; its reader wanted no more."""
    command = [sys.executable, "-m", "sdclab", "spec", "-m", "geometric", "--set", "epsilon=8"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()  # the reader goes away before the card is printed
        error = process.stderr.read().decode()
        process.wait()
    assert process.returncode == 0, error
    assert error == ""


def test_a_closed_pipe_stops_the_progress_lines_not_the_work(tmp_path):
    """`sdclab run … 2>&1 | head -c1`: the run still finishes, and only then exits 0."""
    experiment = tmp_path / "exp.toml"
    experiment.write_text(
        '[population]\npersons = 300\nseed = 1\n\n[[mechanisms]]\nname = "none"\n\n'
        "[attacks]\nreconstruct = false\n"
    )
    out = tmp_path / "out"
    command = [sys.executable, "-m", "sdclab", "run", str(experiment), "--out", str(out)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as process:
        assert process.stdout is not None
        process.stdout.close()
        process.wait()
    assert process.returncode == 0
    assert (out / "results.json").is_file() and (out / "report.html").is_file()
