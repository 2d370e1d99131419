"""Killed at any moment, a command leaves the old complete output or none; a re-run completes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import numpy as np

from sdclab.censuses.us2010.population.io import read_population, write_population
from sdclab.censuses.us2010.population.synth import synthesize
from sdclab.pipeline.api import read_release

SDCLAB = [sys.executable, "-m", "sdclab"]


def _start(args: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        SDCLAB + args,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONHASHSEED": "0"},
        start_new_session=True,
    )


def _kill_after(process: subprocess.Popen[bytes], seconds: float) -> None:
    """Kill the command's process group ``seconds`` after its start unless it has finished by
    then (waiting on it rather than sleeping: a command that finishes early is not waited for)."""
    try:
        process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def test_killed_protect_leaves_the_old_release_or_none(tmp_path):
    population = synthesize(6_000, seed=3)
    pop = tmp_path / "pop"
    write_population(population, pop)
    out = tmp_path / "rel"
    delays = np.random.default_rng(11).uniform(0.3, 6.0, 6)
    complete_before = False
    for delay in delays:
        process = _start(
            ["protect", str(pop), "--mechanism", "swap", "--seed", "1", "--out", str(out)]
        )
        _kill_after(process, float(delay))
        if out.exists():
            read_release(out)  # complete, or this raises
            complete_before = True
        elif complete_before:
            raise AssertionError("a complete release disappeared")
    done = subprocess.run(
        SDCLAB + ["protect", str(pop), "--mechanism", "swap", "--seed", "1", "--out", str(out)],
        capture_output=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert read_release(out).mechanism == "swap"


def test_killed_synth_leaves_a_valid_population_or_none(tmp_path):
    out = tmp_path / "pop"
    for delay in np.random.default_rng(5).uniform(0.2, 4.0, 5):
        process = _start(["synth", "--persons", "30000", "--seed", "2", "--out", str(out)])
        _kill_after(process, float(delay))
        if out.exists():
            read_population(out)
    done = subprocess.run(
        SDCLAB + ["synth", "--persons", "30000", "--seed", "2", "--out", str(out)],
        capture_output=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert read_population(out).n_persons == 30_000


def test_killed_reconstruct_leaves_a_complete_reconstruction_or_none(tmp_path):
    from sdclab.attacks.reconstruction_files import read_reconstruction

    population = synthesize(6_000, seed=4)
    pop, rel, out = tmp_path / "pop", tmp_path / "rel", tmp_path / "recon"
    write_population(population, pop)
    made = subprocess.run(
        SDCLAB + ["protect", str(pop), "-m", "none", "--seed", "1", "--out", str(rel)],
        capture_output=True,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    args = ["reconstruct", str(rel), "--workers", "1", "--out", str(out)]
    complete_before = False
    for delay in np.random.default_rng(12).uniform(0.5, 8.0, 5):
        _kill_after(_start(args), float(delay))
        if out.exists():
            read_reconstruction(out)  # complete, or this raises
            complete_before = True
        elif complete_before:
            raise AssertionError("a complete reconstruction disappeared")
    done = subprocess.run(SDCLAB + args, capture_output=True, check=False)
    assert done.returncode == 0, done.stderr
    assert read_reconstruction(out).persons.height == 6_000


def test_killed_run_leaves_complete_results_and_report_or_none(tmp_path):
    import json

    experiment = tmp_path / "exp.toml"
    experiment.write_text(
        "[population]\npersons = 3000\nseed = 5\n\n"
        '[[mechanisms]]\nname = "none"\n\n[[mechanisms]]\nname = "swap"\nseed = 2\n\n'
        "[attacks]\nreconstruct = true\nattackers = []\n"
    )
    out = tmp_path / "out"
    args = ["run", str(experiment), "--out", str(out)]
    for delay in np.random.default_rng(13).uniform(0.5, 12.0, 6):
        _kill_after(_start(args), float(delay))
        if (out / "results.json").exists():
            json.loads((out / "results.json").read_text())  # whole JSON, or this raises
        if (out / "report.html").exists():
            assert (out / "report.html").read_text().rstrip().endswith("</html>")
    done = subprocess.run(SDCLAB + args, capture_output=True, check=False)
    assert done.returncode == 0, done.stderr
    results = json.loads((out / "results.json").read_text())
    assert set(results["mechanisms"]) == {"none", "swap"}
