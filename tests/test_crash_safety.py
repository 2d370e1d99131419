"""Killed at any moment, a command leaves the old complete output or none; a re-run completes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np

from sdclab.population.io import read_population, write_population
from sdclab.population.synth import synthesize
from sdclab.release import read_release

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
    time.sleep(seconds)
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def test_killed_protect_leaves_the_old_release_or_none(tmp_path):
    population, _ = synthesize(6_000, seed=3)
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
