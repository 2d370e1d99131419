"""The solvers stop where they are told to: at the time limit, and on Ctrl-C.

A program that would take long is a market split problem (Cornuéjols and Dawande): a few dense
equality rows over binary variables, which branch and bound explores for minutes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace

import numpy as np
import polars as pl
import pytest
import scipy.sparse as sp

from sdclab import protection
from sdclab.attacks.reconstruction import solve_tract, tract_problems
from sdclab.optimize.highs import solve_mip
from sdclab.population.synth import synthesize


def market_split(rows: int = 5, columns: int = 50, seed: int = 0) -> dict:
    """min Σ|a x − d| over binary x, d half of each row's sum: no quick proof of optimality."""
    a = np.random.default_rng(seed).integers(0, 100, size=(rows, columns))
    d = a.sum(axis=1) // 2
    eye = np.eye(rows)
    return {
        "matrix": sp.csc_matrix(np.hstack([a, eye, -eye])),
        "row_lower": d,
        "row_upper": d,
        "cost": np.r_[np.zeros(columns), np.ones(2 * rows)],
        "col_upper": np.r_[np.ones(columns), np.full(2 * rows, np.inf)],
        "integer": np.r_[np.ones(columns, bool), np.zeros(2 * rows, bool)],
    }


def test_ctrl_c_stops_a_solve_inside_highs() -> None:
    """SIGINT arrives while HiGHS runs (in C, where Python's handler cannot run): the solve stops
    within a moment and the interruption is raised as usual, instead of waiting for the end."""
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    began = time.perf_counter()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            solve_mip(**market_split(), threads=1, time_limit=20.0)
    finally:
        timer.cancel()
    assert time.perf_counter() - began < 5
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored


def test_a_solve_outside_the_main_thread_runs_as_it_is() -> None:
    """Only the main thread may set a signal handler: elsewhere the solve is not wrapped."""
    out: list[str] = []
    worker = threading.Thread(
        target=lambda: out.append(solve_mip(**market_split(), threads=1, time_limit=0.2)[0])
    )
    worker.start()
    worker.join()
    assert out == ["Time limit reached"]


@pytest.fixture(scope="module")
def stuck_release():
    """A TopDown release whose measurements state variance 0 (made in memory, where no reader
    checks it): the weights of the noise-aware program are then NaN and its relaxation never
    reached an optimum, past any time limit (the release read from files is refused)."""
    release = protection.run(
        "topdown", synthesize(600, seed=17), {"product": "pl94", "workers": "1"}, 3
    )
    measurements = release.artifacts["measurements"].with_columns(variance=pl.lit(0.0))
    return replace(release, artifacts={**release.artifacts, "measurements": measurements})


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_every_solve_of_a_noise_aware_tract_keeps_its_time_limit(stuck_release) -> None:
    (problem,) = tract_problems(stuck_release, 0, 0.5, "published", draws=3)
    began = time.perf_counter()
    result = solve_tract(problem)
    # the pricing round stops at its share, the integer program and the draws at their floors
    assert time.perf_counter() - began < 10
    assert result.time_limited


WORKERS_SCRIPT = """
from functools import partial
import numpy as np, scipy.sparse as sp
from sdclab.execution import run_tasks
from sdclab.optimize.highs import solve_mip
rows, columns = 5, 50
a = np.random.default_rng(0).integers(0, 100, size=(rows, columns))
d = a.sum(axis=1) // 2
eye = np.eye(rows)
solve = partial(
    solve_mip,
    row_lower=d,
    row_upper=d,
    cost=np.r_[np.zeros(columns), np.ones(2 * rows)],
    col_upper=np.r_[np.ones(columns), np.full(2 * rows, np.inf)],
    integer=np.r_[np.ones(columns, bool), np.zeros(2 * rows, bool)],
    threads=1,
    time_limit=60.0,
)
matrix = sp.csc_matrix(np.hstack([a, eye, -eye]))
print("started", flush=True)
run_tasks(solve, [matrix] * 4, 2, "solving")
"""


def test_ctrl_c_stops_the_workers_of_a_command() -> None:
    """Ctrl-C reaches every process of a command's group: workers inside HiGHS stop, and no
    queued task is started after it (a pool shutting down would otherwise run them all)."""
    process = subprocess.Popen(
        [sys.executable, "-c", WORKERS_SCRIPT],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert process.stdout is not None
    process.stdout.readline()  # the workers start as the tasks are submitted
    time.sleep(2.5)
    os.killpg(process.pid, signal.SIGINT)
    began = time.perf_counter()
    try:
        process.wait(timeout=20)
    finally:
        process.kill()
    assert time.perf_counter() - began < 5
    assert process.returncode != 0
