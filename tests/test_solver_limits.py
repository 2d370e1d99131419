"""The solvers stop where they are told to: at the time limit, and on Ctrl-C.

A program that would take long is a market split problem (Cornuéjols and Dawande): a few dense
equality rows over binary variables, which branch and bound explores for minutes.
"""

from __future__ import annotations

import json
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
from sdclab.censuses.us2010.population.synth import synthesize
from sdclab.core.errors import InputError
from sdclab.core.optimize.highs import Limits, solve_mip
from sdclab.pipeline import api


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
def slow_release():
    """A suppression release whose noise-aware pricing takes about half a minute (1,000
    persons: small counts shown as 0 rule out the classes that fill them, so pricing must bring
    most pairs in)."""
    return api.protect(synthesize(1_000, seed=21), "suppress", seed=11)


def test_every_solve_of_a_noise_aware_tract_keeps_its_time_limit(slow_release) -> None:
    (problem,) = tract_problems(slow_release, 0, 0.5, "published", draws=3)
    began = time.perf_counter()
    result = solve_tract(problem)
    # the pricing round stops at its share, the integer program and the draws at their floors
    assert time.perf_counter() - began < 10
    assert result.time_limited


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_a_measurement_of_variance_0_is_refused_before_solving() -> None:
    """In memory no reader checks a release: a stated variance of 0 makes the distance weights
    infinite or NaN, and the program would mean nothing (it once ran past every time limit)."""
    release = protection.run(
        "topdown", synthesize(600, seed=17), {"product": "pl94", "workers": "1"}, 3
    )
    measurements = release.artifacts["measurements"].with_columns(variance=pl.lit(0.0))
    stuck = replace(release, artifacts={**release.artifacts, "measurements": measurements})
    (problem,) = tract_problems(stuck, 0, 0.5, "published")
    with pytest.raises(ValueError, match="not a finite number"):
        solve_tract(problem)


WORKERS_SCRIPT = """
from functools import partial
import numpy as np, scipy.sparse as sp
from sdclab.core.execution import run_tasks
from sdclab.core.optimize.highs import solve_mip
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


# ---------------------------------------------------------------------------------------------
# Reproducible attacks: a limit of work, and a tract stopped by wall time told apart
# ---------------------------------------------------------------------------------------------


def test_a_node_limit_stops_a_solve_at_the_same_point_every_time() -> None:
    """Wall time stops a solve wherever the machine's speed and load leave it; a node limit at
    the same node, so the same seed gives the same solution."""
    outcomes = [
        solve_mip(**market_split(), threads=1, random_seed=7, **Limits.start(60, 300).options())
        for _ in range(2)
    ]
    (status, x, objective), (status_again, x_again, objective_again) = outcomes
    assert status == status_again == "Node limit reached"
    assert x is not None and x_again is not None
    assert np.array_equal(x, x_again) and objective == objective_again


@pytest.fixture(scope="module")
def noisy_release():
    return api.protect(
        synthesize(600, seed=17), "cellkey", seed=3, ptable="maxent", bound=3, variance=2
    )


def test_a_tract_stopped_by_wall_time_says_so(noisy_release) -> None:
    stopped = api.reconstruct(noisy_release, workers=1, time_limit=1e-4, draws=2)
    assert stopped.metrics["time_limited_tracts"] == stopped.tracts.height > 0
    assert stopped.tracts["time_limited"].all()
    assert stopped.time_limited_tracts == stopped.tracts.height
    unhurried = api.reconstruct(noisy_release, workers=1, time_limit=60, draws=2)
    assert unhurried.metrics["time_limited_tracts"] == 0
    assert not unhurried.tracts["time_limited"].any()


def test_the_same_seed_and_node_limit_give_the_same_reconstruction(noisy_release) -> None:
    runs = [
        api.reconstruct(noisy_release, workers=1, seed=5, node_limit=50, draws=2) for _ in range(2)
    ]
    assert runs[0].persons.equals(runs[1].persons)
    assert runs[0].tracts.drop("seconds").equals(runs[1].tracts.drop("seconds"))
    assert runs[0].metrics["node_limit"] == 50 and runs[0].metrics["time_limited_tracts"] == 0


@pytest.mark.parametrize("limit", [0, -3, 2.5, True, "many"])
def test_a_node_limit_is_a_whole_number_of_nodes(noisy_release, limit) -> None:
    with pytest.raises(InputError, match="node_limit .*expected a whole number of nodes"):
        api.reconstruct(noisy_release, node_limit=limit)


def test_the_command_line_takes_a_node_limit_and_records_it(noisy_release, tmp_path) -> None:
    from typer.testing import CliRunner

    from sdclab.cli import app

    api.write_release(noisy_release, tmp_path / "rel")
    args = ["reconstruct", str(tmp_path / "rel"), "--workers", "1", "--out", str(tmp_path / "r")]
    result = CliRunner().invoke(app, [*args, "--node-limit", "50"])
    assert result.exit_code == 0, result.output
    metrics = json.loads((tmp_path / "r" / "metrics.json").read_text())
    assert metrics["node_limit"] == 50 and metrics["time_limited_tracts"] == 0
    refused = CliRunner().invoke(app, [*args, "--node-limit", "0"])
    assert refused.exit_code == 2 and "--node-limit" in refused.output


def test_a_reused_instance_gets_its_seconds_for_each_run():
    """HiGHS compares time_limit with the instance's run time summed over its runs: a reused
    instance (pricing rounds, ranking draws) gets the run time so far plus its seconds."""
    import highspy
    import numpy as np

    from sdclab.core.optimize.highs import quiet_highs, run

    highs = quiet_highs()
    highs.addVar(0.0, 5.0)
    highs.addRow(-highspy.kHighsInf, 3.0, 1, np.array([0], dtype=np.int32), np.array([1.0]))
    highs.changeColCost(0, -1.0)
    for _ in range(3):
        before = highs.getRunTime()
        run(highs, 7.0)
        assert highs.getOptionValue("time_limit")[1] == pytest.approx(before + 7.0)
        assert highs.getModelStatus() == highspy.HighsModelStatus.kOptimal
