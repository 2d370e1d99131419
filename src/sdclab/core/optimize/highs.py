"""HiGHS (highspy) helpers: a quiet solver instance, sparse models passed in one call, and a
solve that Ctrl-C stops.

HiGHS runs in C: while it solves, Python's handler of SIGINT cannot run, so Ctrl-C would wait
for the solve to end (which, for a program without a time limit, may be never). :func:`run`
lets the solver's own interrupt checks (made at every simplex iteration and branch-and-bound
node) see the request: the handler then only notes it, HiGHS stops within a few iterations,
and the interruption is delivered as usual once the solve has returned.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import highspy
import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from highspy import cb

_BANNER_SHOWN = False

OPTIMAL_STATUS = "Optimal"
"""HiGHS's status text of a solve that proved its optimum."""
TIME_LIMIT_STATUS = "Time limit reached"
"""HiGHS's status text of a solve stopped by its time limit."""
NODE_LIMIT_STATUS = "Node limit reached"
"""The status text :func:`solve_mip` gives a solve stopped by its node limit (HiGHS calls it a
solution limit)."""


@dataclass(frozen=True)
class Limits:
    """What a program's solves may spend together: wall time until ``deadline`` (a
    :func:`time.perf_counter` reading) and, when given, branch-and-bound nodes per integer
    program — a limit of work, which unlike wall time stops a solve at the same point on every
    run."""

    deadline: float
    nodes: int | None = None

    @classmethod
    def start(cls, seconds: float, nodes: int | None = None) -> Limits:
        """Limits of ``seconds`` from now."""
        return cls(time.perf_counter() + seconds, nodes)

    def seconds_left(self, floor: float = 0.0) -> float:
        """Seconds to the deadline, at least ``floor``."""
        return max(self.deadline - time.perf_counter(), floor)

    def options(self, floor: float = 0.0) -> dict[str, float | int]:
        """HiGHS options of a solve within the limits (at least ``floor`` seconds)."""
        nodes = {} if self.nodes is None else {"mip_max_nodes": self.nodes}
        return {"time_limit": self.seconds_left(floor), **nodes}


def quiet_highs(**options: bool | float | str | int) -> highspy.Highs:
    """A HiGHS instance with logging off (its one-time banner on stdout is swallowed too)."""
    global _BANNER_SHOWN
    if _BANNER_SHOWN:
        highs = highspy.Highs()
    else:
        sys.stdout.flush()
        saved = os.dup(1)
        try:
            with open(os.devnull, "w") as devnull:
                os.dup2(devnull.fileno(), 1)
                highs = highspy.Highs()
        finally:
            os.dup2(saved, 1)
            os.close(saved)
        _BANNER_SHOWN = True
    highs.setOptionValue("output_flag", False)
    for name, value in options.items():
        highs.setOptionValue(name, value)
    return highs


_INTERRUPT_CHECKS = (
    cb.HighsCallbackType.kCallbackSimplexInterrupt,
    cb.HighsCallbackType.kCallbackIpmInterrupt,
    cb.HighsCallbackType.kCallbackMipInterrupt,
)
"""The points where HiGHS asks whether to stop (each iteration of its LP solvers, each node of
its branch and bound)."""


def run(highs: highspy.Highs, seconds: float | None = None) -> None:
    """``highs.run()``, stopped by Ctrl-C (SIGINT) as a Python loop would be, and after
    ``seconds`` of this run when given.

    HiGHS compares its ``time_limit`` with the instance's run time summed over every run, so a
    reused instance (pricing rounds, ranking draws) would stop early: the limit is set to the run
    time so far plus ``seconds``.

    In the main thread, with Python handling SIGINT, the handler is replaced during the solve by
    one that notes the signal; HiGHS's interrupt checks then stop the solve, and the previous
    handler is called once it has returned (the default raises KeyboardInterrupt). Elsewhere
    (another thread, SIGINT ignored or left to the system) the solve runs as it is.
    """
    if seconds is not None:
        highs.setOptionValue("time_limit", highs.getRunTime() + max(float(seconds), 0.0))
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or not callable(previous):
        highs.run()
        return
    received: list[int] = []

    def note(signum: int, _: Any) -> None:
        received.append(signum)

    def check(
        _kind: cb.HighsCallbackType,
        _message: str,
        _out: cb.HighsCallbackOutput,
        data_in: cb.HighsCallbackInput,
        _data: Any,
    ) -> None:
        if received:
            data_in.user_interrupt = True

    # the bare callback, not highspy's events (which build Python objects at every check)
    highs.setCallback(check, None)
    for kind in _INTERRUPT_CHECKS:
        highs.startCallback(kind)
    signal.signal(signal.SIGINT, note)
    try:
        highs.run()
    finally:
        signal.signal(signal.SIGINT, previous)
        for kind in _INTERRUPT_CHECKS:
            highs.stopCallback(kind)
        highs.enableCallbacks()  # highspy's own dispatch again, for any later user
    if received:
        handler: Callable[[int, Any], Any] = previous
        handler(signal.SIGINT, None)


def _passed(
    matrix: sp.spmatrix,
    row_lower: npt.ArrayLike,
    row_upper: npt.ArrayLike,
    cost: npt.ArrayLike,
    col_upper: npt.ArrayLike,
    integer: npt.ArrayLike | None,
    col_lower: npt.ArrayLike | None,
    options: dict[str, bool | float | str | int],
) -> highspy.Highs:
    """A quiet HiGHS instance holding the model (columns integer where flagged)."""
    a = sp.csc_matrix(matrix)
    highs = quiet_highs(**options)
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = a.shape[1], a.shape[0]
    lp.col_cost_ = np.asarray(cost, dtype=np.float64)
    lp.col_lower_ = (
        np.zeros(a.shape[1]) if col_lower is None else np.asarray(col_lower, dtype=np.float64)
    )
    lp.col_upper_ = np.asarray(col_upper, dtype=np.float64)
    lp.row_lower_ = np.asarray(row_lower, dtype=np.float64)
    lp.row_upper_ = np.asarray(row_upper, dtype=np.float64)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = a.indptr
    lp.a_matrix_.index_ = a.indices
    lp.a_matrix_.value_ = a.data.astype(np.float64)
    if integer is not None:
        kinds = (highspy.HighsVarType.kContinuous, highspy.HighsVarType.kInteger)
        lp.integrality_ = [kinds[int(flag)] for flag in np.asarray(integer, dtype=bool)]
    highs.passModel(lp)
    return highs


def solve_mip(
    matrix: sp.spmatrix,
    row_lower: npt.ArrayLike,
    row_upper: npt.ArrayLike,
    cost: npt.ArrayLike,
    col_upper: npt.ArrayLike,
    integer: npt.ArrayLike,
    col_lower: npt.ArrayLike | None = None,
    start: npt.ArrayLike | None = None,
    **options: bool | float | str | int,
) -> tuple[str, npt.NDArray[np.float64] | None, float]:
    """min cost·x s.t. row_lower ≤ A x ≤ row_upper, col_lower (default 0) ≤ x ≤ col_upper, x_j
    integer where flagged; ``start``: a feasible point to begin from (HiGHS's MIP start).

    Returns (model status text, x or None if no feasible point was found, objective); a solve
    stopped by ``mip_max_nodes`` has the status :data:`NODE_LIMIT_STATUS`.
    """
    highs = _passed(matrix, row_lower, row_upper, cost, col_upper, integer, col_lower, options)
    if start is not None:
        solution = highspy.HighsSolution()
        solution.col_value = np.asarray(start, dtype=np.float64).tolist()
        solution.value_valid = True
        highs.setSolution(solution)
    run(highs)
    status = highs.modelStatusToString(highs.getModelStatus())
    if (
        "mip_max_nodes" in options
        and highs.getModelStatus() == highspy.HighsModelStatus.kSolutionLimit
    ):
        status = NODE_LIMIT_STATUS  # no limit on the number of solutions is set here
    if highs.getInfo().primal_solution_status != 2:  # 2: a feasible solution is available
        return status, None, float("nan")
    x = np.asarray(highs.getSolution().col_value, dtype=np.float64)
    return status, x, float(highs.getInfo().objective_function_value)


def lp_instance(
    matrix: sp.spmatrix,
    row_lower: npt.ArrayLike,
    row_upper: npt.ArrayLike,
    cost: npt.ArrayLike,
    col_upper: npt.ArrayLike,
    col_lower: npt.ArrayLike | None = None,
    **options: bool | float | str | int,
) -> highspy.Highs:
    """A HiGHS instance holding the linear program, not yet run (to be re-run after changes)."""
    return _passed(matrix, row_lower, row_upper, cost, col_upper, None, col_lower, options)


INF = highspy.kHighsInf


def single_threaded_highs() -> int:
    """``threads=1`` for HiGHS, after dropping the process's thread scheduler.

    HiGHS keeps one scheduler per process and will not run (status "Not Set", no solution) with a
    ``threads`` option other than the one it was started with — as after a TopDown run in this
    process, whose solves start it with every core.
    """
    highspy.Highs.resetThreadScheduler(True)  # blocking: the old threads are gone on return
    return 1
