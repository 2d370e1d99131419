"""HiGHS (highspy) helpers: a quiet solver instance and sparse models passed in one call."""

from __future__ import annotations

import os
import sys

import highspy
import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

_BANNER_SHOWN = False


def quiet_highs(**options: bool | float | str) -> highspy.Highs:
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


def _passed(
    matrix: sp.spmatrix,
    row_lower: npt.ArrayLike,
    row_upper: npt.ArrayLike,
    cost: npt.ArrayLike,
    col_upper: npt.ArrayLike,
    integer: npt.ArrayLike | None,
    col_lower: npt.ArrayLike | None,
    options: dict[str, bool | float | str],
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
    **options: bool | float | str,
) -> tuple[str, npt.NDArray[np.float64] | None, float]:
    """min cost·x s.t. row_lower ≤ A x ≤ row_upper, col_lower (default 0) ≤ x ≤ col_upper, x_j
    integer where flagged; ``start``: a feasible point to begin from (HiGHS's MIP start).

    Returns (model status text, x or None if no feasible point was found, objective).
    """
    highs = _passed(matrix, row_lower, row_upper, cost, col_upper, integer, col_lower, options)
    if start is not None:
        solution = highspy.HighsSolution()
        solution.col_value = np.asarray(start, dtype=np.float64).tolist()
        solution.value_valid = True
        highs.setSolution(solution)
    highs.run()
    status = highs.modelStatusToString(highs.getModelStatus())
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
    **options: bool | float | str,
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
