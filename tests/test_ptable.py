"""P-tables of the cell key method: reference rows, lookup, ONS format, files, δ(ε).

Reference rows: ptable's and cellKey's examples and tests; the worked example D = 2, V = 0.9 and
the symmetry row D = 5, V = 3 we computed from the closed form (docs/cellkey.md, *Where the test
vectors come from*).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy.optimize import brentq, nnls, root

from sdclab.core.errors import InputError
from sdclab.core.optimize import ptable_solver
from sdclab.core.optimize.ptable_solver import FLOOR, build_row
from sdclab.protection.ptable import (
    OnsPTable,
    PTable,
    create_ptable,
    ons_10_5_ptable,
    pcv,
    read_ptable,
    symmetry_row,
    to_ons,
    write_ptable,
)
from sdclab.protection.ptable_analysis import delta_for_epsilon, delta_pairs

PT_EX_CNTS = [
    [1.0],
    [0.50833333, 0.475, 0.01666667],
    [0.16155827, 0.55565037, 0.24246618, 0.04032518],
    [0.41231301, 0.28806097, 0.18693903, 0.11268699],
    [0.07012498, 0.24450007, 0.37074990, 0.24450007, 0.07012498],
]
"""ptable's ``pt_ex_cnts()``: D=2, V=1.05, js=1, mono=(T, T, F, T), p by row."""
SYMMETRY_D5_V3_HALF = [0.00379186, 0.01659093, 0.05229263, 0.11873037, 0.19419346, 0.22880150]
SYMMETRY_D5_V3 = SYMMETRY_D5_V3_HALF + SYMMETRY_D5_V3_HALF[-2::-1]
ROW2_D2_V09 = [0.05154609, 0.24381564, 0.40927654, 0.24381564, 0.05154609]
ROW2_D2_V09_UB = [0.05154609, 0.29536173, 0.70463827, 0.94845391, 1.0]
TOL = 1e-6
"""Per-probability agreement required with the reference construction (ptable's SLSQP)."""


@pytest.fixture(scope="module")
def ex_cnts() -> PTable:
    return create_ptable(2, 1.05, js=1, mono=(True, True, False, True))


@pytest.fixture(scope="module")
def d2_v09() -> PTable:
    return create_ptable(2, 0.9)


@pytest.fixture(scope="module")
def d5_v3() -> PTable:
    return create_ptable(5, 3)


@pytest.fixture(scope="module")
def d5_v3_js2() -> PTable:
    return create_ptable(5, 3, js=2, pstay=0.5)


def variance(table: PTable, n: int) -> float:
    v, p = table.row(n)
    return float(p @ v.astype(float) ** 2)


def lookup_reference(table: PTable, n: np.ndarray, u: np.ndarray, strict: bool) -> np.ndarray:
    """cellKey's lookup cell by cell: the first entry of the row (ascending j), u < ub (or ≤)."""
    out = np.zeros(n.size, dtype=np.int64)
    for k, (count, key) in enumerate(zip(n, u, strict=True)):
        if count == 0:
            continue
        rows = table.i == min(count, table.i_max)
        hits = key < table.ub[rows] if strict else key <= table.ub[rows]
        out[k] = table.v[rows][np.argmax(hits)]
    return out


# ---------------------------------------------------------------------------------------------
# Construction (docs/cellkey.md: the row program, the worked example and the reference rows)
# ---------------------------------------------------------------------------------------------


def test_pt_ex_cnts(ex_cnts):
    assert ex_cnts.i_max == 4
    assert (ex_cnts.D, ex_cnts.V, ex_cnts.js, ex_cnts.flagged) == (2, 1.05, 1, ())
    np.testing.assert_array_equal(ex_cnts.i, np.repeat([0, 1, 2, 3, 4], [1, 3, 4, 4, 5]))
    # target counts 1..js = {1} are blocked, |v| ≤ D, rows ascend in j
    np.testing.assert_array_equal(ex_cnts.j, [0, 0, 2, 3, 0, 2, 3, 4, 2, 3, 4, 5, 2, 3, 4, 5, 6])
    np.testing.assert_array_equal(ex_cnts.v, ex_cnts.j - ex_cnts.i)
    np.testing.assert_allclose(ex_cnts.p, np.concatenate(PT_EX_CNTS), rtol=0, atol=TOL)


def test_pt_ex_cnts_rows_are_unbiased_with_variance_v(ex_cnts):
    for n in range(1, ex_cnts.i_max + 1):
        v, p = ex_cnts.row(n)
        assert p.sum() == pytest.approx(1, abs=1e-12)
        assert p @ v == pytest.approx(0, abs=1e-7)
        assert variance(ex_cnts, n) == pytest.approx(1.05, abs=1e-6)


def test_bounds_are_rounded_contiguous_and_p_is_their_difference(d5_v3_js2):
    t = d5_v3_js2
    np.testing.assert_array_equal(t.p, t.ub - t.lb)
    np.testing.assert_array_equal(t.ub, np.round(t.ub, 8))
    first = np.r_[True, np.diff(t.i) > 0]
    np.testing.assert_array_equal(t.lb[first], 0.0)
    np.testing.assert_array_equal(t.lb[~first], t.ub[np.flatnonzero(~first) - 1])
    np.testing.assert_array_equal(t.ub[np.r_[first[1:], True]], 1.0)


def test_cellkey_table_d5_v3_js2_pstay(d5_v3_js2):
    t = d5_v3_js2
    assert len(t.p) == 66
    assert t.i_max == 8
    assert round(float(t.p.mean()), 3) == 0.136
    assert round(float(t.lb.mean()), 3) == 0.562
    assert round(float(t.ub.mean()), 3) == 0.698
    assert round(float(t.v.mean()), 3) == 1.045
    assert not np.any((t.j >= 1) & (t.j <= 2))


def test_pstay_is_a_lower_bound_on_staying(d5_v3_js2):
    # rows 3..8 can keep p(i → i) ≥ 0.5 and still reach V = 3; rows 1, 2 have no v = 0
    for n in range(3, 9):
        v, p = d5_v3_js2.row(n)
        assert p[v == 0][0] >= 0.5 - 1e-8
        assert variance(d5_v3_js2, n) == pytest.approx(3, abs=1e-6)
    assert d5_v3_js2.flagged == ()


def test_pstay_is_relaxed_in_steps_of_0_05_until_v_is_reached():
    table = create_ptable(2, 0.9, pstay=0.9)
    # Row 2: while p(0) ≥ 0.65 the entropy optimum spreads the rest evenly over v = ±1, ±2, with
    # variance at most 0.35 · 10/4 = 0.875 < 0.9; at the fifth relaxation, p(0) ≥ 0.6, V is met.
    v, p = table.row(2)
    assert p[v == 0][0] == pytest.approx(0.6, abs=TOL)
    np.testing.assert_allclose(p, [1 / 12, 7 / 60, 0.6, 7 / 60, 1 / 12], rtol=0, atol=TOL)
    assert variance(table, 2) == pytest.approx(0.9, abs=1e-7)
    # Row 1: relaxed until the bound no longer binds, giving the unconstrained row of 2.5
    np.testing.assert_allclose(table.row(1)[1], [0.3625, 0.3625, 0.1875, 0.0875], atol=TOL)
    assert table.flagged == ()


def exact_floored_symmetry_row(D: int, V: float) -> np.ndarray:
    """The symmetric optimum with the 1e-8 floor active: p = max(1e-8, c·r^{v²}), by bisection."""
    w = np.arange(-D, D + 1, dtype=float) ** 2

    def row(lam: float) -> np.ndarray:
        log_c = brentq(lambda c: np.maximum(1e-8, np.exp(c - lam * w)).sum() - 1, -800, 1)
        return np.maximum(1e-8, np.exp(log_c - lam * w))

    lam = brentq(lambda lam: row(lam) @ w - V, 1e-6, 50, xtol=1e-14)
    return row(lam)


@pytest.mark.parametrize(("D", "V"), [(7, 1.0), (6, 1.0)])
def test_rows_are_the_exact_optimum_not_just_close(D, V):
    # rows with several probabilities on the 1e-8 floor, where a plain SLSQP run is off by ~1e-7;
    # the table may differ from the exact optimum only by the 8-decimal rounding of its bounds
    v, p = create_ptable(D, V).row(D)
    np.testing.assert_allclose(p, exact_floored_symmetry_row(D, V), rtol=0, atol=1.1e-8)


def kkt_residual(v: np.ndarray, p: np.ndarray, lb: np.ndarray, V: float) -> float:
    """Largest stationarity residual at ``p`` of the entropy problem (variance ≤ V, mono).

    ln p + 1 + y0 + y1·v + y2·v² − ν + Mᵀμ = 0 with y2, ν, μ ≥ 0 and only on tight constraints
    (floors, mono pairs, the variance), fitted by non-negative least squares (y0 and y1 free,
    as differences of two non-negative columns).
    """
    vf = v.astype(float)
    w = vf**2
    z = int(np.flatnonzero(v == 0)[0]) if np.any(v == 0) else 0
    mono = np.zeros((z, v.size))  # p_k − p_{k+1} ≤ 0 for the entries up to v = 0
    mono[np.arange(z), np.arange(z)] = 1.0
    mono[np.arange(z), np.arange(1, z + 1)] = -1.0
    floors = np.flatnonzero(p <= lb * (1 + 1e-12))
    ties = np.flatnonzero(mono @ p >= -1e-12)
    columns = [np.ones(v.size), -np.ones(v.size), vf, -vf]
    if V - w @ p <= 1e-9 * V:
        columns.append(w)
    columns += [-np.eye(v.size)[k] for k in floors] + [mono[k] for k in ties]
    matrix = np.array(columns).T
    multipliers, _ = nnls(matrix, -(np.log(p) + 1), maxiter=10_000)
    return float(np.max(np.abs(matrix @ multipliers + np.log(p) + 1)))


def floored_closed_form(v: np.ndarray, V: float) -> np.ndarray:
    """p = max(1e-8, exp(λ0 + λ1 v + λ2 v²)) with sum 1, mean 0, variance V, by a root finder."""
    vf = v.astype(float)

    def row(lam: np.ndarray) -> np.ndarray:
        return np.maximum(FLOOR, np.exp(lam[0] + lam[1] * vf + lam[2] * vf**2))

    def moments(lam: np.ndarray) -> list[float]:
        p = row(lam)
        return [p.sum() - 1, p @ vf, p @ vf**2 - V]

    found = root(moments, [-np.log(v.size), 0.0, -1 / (2 * V)], method="hybr", tol=1e-15)
    assert np.max(np.abs(moments(found.x))) < 1e-13
    return row(found.x)


@pytest.fixture(scope="module")
def d100_v50() -> PTable:
    return create_ptable(100, 50)


def test_d100_v50_builds(d100_v50):
    t = d100_v50
    assert t.i_max == 100
    # rows 1..7 have too little room on the left (p(v) ≤ p(0) for v < 0 and mean 0) to reach V
    assert t.flagged == (1, 2, 3, 4, 5, 6, 7)
    v, p = t.row(100)
    np.testing.assert_array_equal(v, np.arange(-100, 101))
    np.testing.assert_allclose(p, exact_floored_symmetry_row(100, 50.0), rtol=0, atol=1.1e-8)


@pytest.mark.parametrize("i", [1, 2, 7, 8, 9, 20, 50, 99, 100])
def test_d100_v50_rows_are_exact_and_optimal(d100_v50, i):
    v, p, low = build_row(i, 100, 50.0, 0, 0.0, True, False)
    lb = np.full(v.size, FLOOR)
    assert abs(p.sum() - 1) <= 1e-12
    assert abs(p @ v) <= 1e-12
    var = p @ v.astype(float) ** 2
    assert var <= 50 * (1 + 1e-13)
    assert low == (i <= 7) and (low or var == pytest.approx(50, abs=1e-10))
    assert np.all(p >= lb) and np.all(np.diff(p[v <= 0]) >= 0)
    assert kkt_residual(v, p, lb, 50.0) <= 1e-10
    # the check has teeth: moving 1e-6 of mass (keeping sum and mean) breaks stationarity
    shifted = p.copy()
    k = int(np.flatnonzero(v == 0)[0])
    shifted[k - 1 : k + 2] += np.array([1e-6, -2e-6, 1e-6])
    assert kkt_residual(v, shifted, lb, 50.0) > 1e-7
    # the table holds the row to the 8-decimal rounding of its bounds
    np.testing.assert_allclose(d100_v50.row(i)[1], p, rtol=0, atol=1.1e-8)


@pytest.mark.parametrize("i", [20, 30, 100])
def test_d100_v50_rows_without_ties_are_the_closed_form(i):
    # no mono pair tight: p = max(floor, exp(λ0 + λ1 v + λ2 v²)) exactly, floors included
    v, p, _ = build_row(i, 100, 50.0, 0, 0.0, True, False)
    left = p[v <= 0]
    assert np.all((np.diff(left) > 0) | (left[1:] == FLOOR))
    np.testing.assert_allclose(p, floored_closed_form(v, 50.0), rtol=0, atol=1e-14)


def test_tied_row_matches_an_independent_one_dimensional_solve():
    # D=2, V=1, row 1: v = −1, 0, 1, 2 with p(−1) = p(0) = a tied by mono, and the variance not
    # binding, so sum and mean leave one degree of freedom: p = (a, a, 2 − 5a, 3a − 1)
    def slope(a: float) -> float:  # d(entropy)/da
        return float(-2 * np.log(a) + 5 * np.log(2 - 5 * a) - 3 * np.log(3 * a - 1))

    a = brentq(slope, 1 / 3 + 1e-12, 2 / 5 - 1e-12, xtol=1e-16, rtol=4 * np.finfo(float).eps)
    v, p, low = build_row(1, 2, 1.0, 0, 0.0, True, False)
    np.testing.assert_array_equal(v, [-1, 0, 1, 2])
    np.testing.assert_allclose(p, [a, a, 2 - 5 * a, 3 * a - 1], rtol=0, atol=1e-14)
    assert low and 8 * a - 2 < 1


@pytest.mark.parametrize(
    "args",
    [
        (4, 2, 1.05, 1, 0.0, True, False),  # i, D, V, js, pstay, mono, optim 4
        (4, 2, 1.05, 1, 0.0, True, True),
        (6, 5, 3.0, 2, 0.5, True, False),
        (7, 7, 1.0, 0, 0.0, True, False),
        (12, 20, 10.0, 0, 0.7, True, False),
        (1, 1, 2e-8, 0, 0.0, True, False),  # a single feasible row: no interior, degenerate KKT
        (30, 40, 20.0, 3, 0.4, False, True),
    ],
)
def test_rows_are_certified_from_a_feasible_start_alone(monkeypatch, args):
    # without the conic point and the warm start of the pstay loop, the polish runs as the primal
    # active-set method from the LP's feasible row and must reach the same certified optimum
    i, D, V, js, pstay, mono, optim4 = args
    v, p, low = build_row(i, D, V, js, pstay, mono, optim4)
    polish = ptable_solver._polish

    def feasible_only(guess, *rest, feasible=False):
        return polish(guess, *rest, feasible=True) if feasible else None

    monkeypatch.setattr(ptable_solver, "_polish", feasible_only)
    v_alone, p_alone, low_alone = build_row(i, D, V, js, pstay, mono, optim4)
    np.testing.assert_array_equal(v_alone, v)
    np.testing.assert_allclose(p_alone, p, rtol=0, atol=1e-13)
    assert abs(p_alone.sum() - 1) <= 1e-12 and low_alone == low


def test_infeasible_parameters_raise():
    with pytest.raises(InputError, match="infeasible parameters"):
        create_ptable(5, 3, js=3)


def test_d2_v1_row_1_is_flagged_below_v():
    table = create_ptable(2, 1)
    assert table.flagged == (1,)
    assert round(variance(table, 1), 4) == 0.9319
    assert variance(table, 2) == pytest.approx(1, abs=1e-6)


def test_d2_v09_worked_example(d2_v09):
    assert d2_v09.flagged == ()
    v1, p1 = d2_v09.row(1)
    np.testing.assert_array_equal(v1, [-1, 0, 1, 2])
    np.testing.assert_allclose(p1, [0.3625, 0.3625, 0.1875, 0.0875], rtol=0, atol=TOL)
    np.testing.assert_allclose(d2_v09.ub[d2_v09.i == 1], [0.3625, 0.725, 0.9125, 1], atol=TOL)
    v2, p2 = d2_v09.row(2)
    np.testing.assert_array_equal(v2, [-2, -1, 0, 1, 2])
    np.testing.assert_allclose(p2, ROW2_D2_V09, rtol=0, atol=TOL)
    np.testing.assert_allclose(d2_v09.ub[d2_v09.i == 2], ROW2_D2_V09_UB, rtol=0, atol=TOL)
    for n in (1, 2):
        assert variance(d2_v09, n) == pytest.approx(0.9, abs=1e-6)


def test_symmetry_row_d5_v3_from_table_and_closed_form(d5_v3):
    v, p = d5_v3.row(5)
    np.testing.assert_array_equal(v, np.arange(-5, 6))
    np.testing.assert_allclose(p, SYMMETRY_D5_V3, rtol=0, atol=TOL)
    # the closed form is exact: the 8-decimal reference values to their rounding
    np.testing.assert_allclose(symmetry_row(5, 3), SYMMETRY_D5_V3, rtol=0, atol=5e-9)
    assert symmetry_row(5, 3) @ np.arange(-5, 6) ** 2 == pytest.approx(3, abs=1e-12)


def test_symmetry_row_d2_v09_matches_section_2_5():  # the worked example of docs/cellkey.md
    q = symmetry_row(2, 0.9)
    np.testing.assert_allclose(q, ROW2_D2_V09, rtol=0, atol=5e-9)
    # λ = 0.517979 as docs/cellkey.md gives it; r = e^{-λ} = 0.595723, which rounds to 0.59572
    # (not 0.59573) at 5 decimals
    assert -np.log(q[3] / q[2]) == pytest.approx(0.517979, abs=5e-7)
    assert q[3] / q[2] == pytest.approx(0.595723, abs=5e-7)


def test_symmetry_row_floor_and_renormalisation():
    q = symmetry_row(10, 0.3)
    assert q.min() == pytest.approx(1e-8 / (1 + 1e-8 * 10), rel=1e-3)
    assert q.sum() == pytest.approx(1, abs=1e-15)


@pytest.mark.parametrize(("D", "V"), [(2, 2.0), (3, 4.0), (3, 10.0), (1, 0.7)])
def test_uniform_limit(D, V):
    np.testing.assert_allclose(symmetry_row(D, V), np.full(2 * D + 1, 1 / (2 * D + 1)), atol=1e-15)


def test_uniform_limit_in_the_table():
    exact = create_ptable(2, 2)  # V = D(D+1)/3: uniform and just reached
    np.testing.assert_allclose(exact.row(2)[1], np.full(5, 0.2), rtol=0, atol=TOL)
    assert 2 not in exact.flagged
    slack = create_ptable(2, 3)  # V above the maximum variance: uniform, variance stays below V
    np.testing.assert_allclose(slack.row(2)[1], np.full(5, 0.2), rtol=0, atol=TOL)
    assert 2 in slack.flagged
    for epsilon in (0.0, 0.5, 3.0):  # a neighbour's uniform row misses one output of mass 1/5
        assert delta_pairs(exact, epsilon)[-1] == pytest.approx(0.2, abs=TOL)


def test_optim_4_requires_the_variance():
    table = create_ptable(2, 1.05, js=1, mono=(True, True, False, True), optim=4)
    for n in range(1, table.i_max + 1):
        assert variance(table, n) == pytest.approx(1.05, abs=1e-7)
    # where optim 1 already reaches V the two agree
    np.testing.assert_allclose(table.p, np.concatenate(PT_EX_CNTS), rtol=0, atol=TOL)


def test_mono_only_constrains_the_left_side(d5_v3_js2):
    for n in range(3, 9):
        v, p = d5_v3_js2.row(n)
        left = p[v <= 0]
        assert np.all(np.diff(left) >= -1e-8)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"D": 0, "V": 1}, "D must be at least 1"),
        ({"D": 2.5, "V": 1}, "D must be an integer"),
        ({"D": True, "V": 1}, "D must be an integer"),
        ({"D": 2, "V": 0}, "V must be a positive number"),
        ({"D": 2, "V": -1}, "V must be a positive number"),
        ({"D": 2, "V": float("nan")}, "V must be a positive number"),
        ({"D": 2, "V": 1, "js": -1}, "js must be at least 0"),
        ({"D": 2, "V": 1, "pstay": 0.0}, "pstay must lie strictly between 0 and 1"),
        ({"D": 2, "V": 1, "pstay": 1.0}, "pstay must lie strictly between 0 and 1"),
        ({"D": 2, "V": 1, "pstay": [0.5, 0.5, 0.5]}, "pstay has 3 values but .* i_max = 2"),
        ({"D": 2, "V": 1, "js": 1, "mono": [True] * 3}, "mono has 3 values but .* i_max = 4"),
        ({"D": 2, "V": 1, "mono": "yes"}, "mono must be True or False"),
        ({"D": 2, "V": 1, "optim": 0}, "optim must be 1, 2, 3 or 4"),
        ({"D": 2, "V": 1, "optim": 5}, "optim must be 1, 2, 3 or 4"),
    ],
)
def test_parameter_validation(kwargs, message):
    with pytest.raises(InputError, match=message):
        create_ptable(**kwargs)


def test_per_row_parameters_are_accepted():
    table = create_ptable(2, 0.9, pstay=[0.3, 0.4], mono=[True, False])
    assert table.i_max == 2


def test_ptable_is_immutable(d2_v09):
    with pytest.raises(ValueError):
        d2_v09.p[0] = 0.5
    with pytest.raises(AttributeError):
        d2_v09.D = 3  # type: ignore[misc]


# ---------------------------------------------------------------------------------------------
# Lookup (cellKey's rule and the worked example of docs/cellkey.md)
# ---------------------------------------------------------------------------------------------


def test_lookups_of_section_2_5(d2_v09):
    n = np.array([37, 37, 1, 1])
    noise = d2_v09.noise(n, np.array([0.30, 0.96, 0.05, 0.70]))
    np.testing.assert_array_equal(noise, [0, 2, -1, 0])
    np.testing.assert_array_equal(n + noise, [37, 39, 0, 1])


def test_zero_is_never_perturbed(d2_v09):
    u = np.linspace(0, 0.999, 50)
    np.testing.assert_array_equal(d2_v09.noise(np.zeros(50, dtype=np.int64), u), 0)


def test_interval_convention_at_the_bounds(d2_v09):
    # u = 0.3625 is the upper bound of row 1's first interval: "<" moves on, "≤" stays
    assert d2_v09.noise(np.array([1]), np.array([0.3625]))[0] == 0
    assert d2_v09.noise(np.array([1]), np.array([0.3625]), strict=False)[0] == -1
    assert d2_v09.noise(np.array([1]), np.array([0.0]), strict=True)[0] == -1
    assert d2_v09.noise(np.array([5]), np.array([1.0]), strict=False)[0] == 2
    with pytest.raises(InputError, match=r"cell keys must lie in \[0, 1\)"):
        d2_v09.noise(np.array([5]), np.array([1.0]))


@pytest.mark.parametrize("strict", [True, False])
def test_vectorised_lookup_matches_cell_by_cell(d5_v3_js2, strict):
    rng = np.random.default_rng(7)
    ub = d5_v3_js2.ub[d5_v3_js2.ub < 1]
    # random keys plus keys exactly on and one ulp either side of every bound
    u = np.concatenate([rng.random(1500), ub, np.nextafter(ub, 0), np.nextafter(ub, 1)])
    n = rng.integers(0, 40, u.size)
    expected = lookup_reference(d5_v3_js2, n, u, strict)
    np.testing.assert_array_equal(d5_v3_js2.noise(n, u, strict=strict), expected)


def test_lookup_is_vectorised_over_many_cells(d5_v3_js2):
    rng = np.random.default_rng(3)
    n = rng.integers(0, 10_000, 2_000_000)
    u = rng.random(n.size)
    noise = d5_v3_js2.noise(n.reshape(1000, 2000), u.reshape(1000, 2000))
    assert noise.shape == (1000, 2000)
    # empirical noise distribution of the symmetry row matches its probabilities
    big = (n >= d5_v3_js2.i_max).reshape(1000, 2000)
    v, p = d5_v3_js2.row(8)
    shares = np.bincount(noise[big] + 5, minlength=11) / big.sum()
    np.testing.assert_allclose(shares, p, atol=2e-3)


def test_lookup_input_validation(d2_v09):
    with pytest.raises(InputError, match="non-negative"):
        d2_v09.noise(np.array([-1]), np.array([0.5]))
    with pytest.raises(InputError, match="integers"):
        d2_v09.noise(np.array([1.5]), np.array([0.5]))
    with pytest.raises(InputError, match="cell keys"):
        d2_v09.noise(np.array([1]), np.array([np.nan]))


def test_row_of_large_counts_is_the_symmetry_row(d2_v09):
    for n in (2, 3, 1000):
        np.testing.assert_array_equal(d2_v09.row(n)[1], d2_v09.row(2)[1])
    v0, p0 = d2_v09.row(0)
    np.testing.assert_array_equal(v0, [0])
    np.testing.assert_array_equal(p0, [1.0])


# ---------------------------------------------------------------------------------------------
# ONS format (cell-key-perturbation 3.1.0)
# ---------------------------------------------------------------------------------------------


def test_pcv():
    n = np.array([0, 1, 750, 751, 1000, 1001, 1003, 100001])
    np.testing.assert_array_equal(pcv(n), [0, 1, 750, 501, 750, 501, 503, 501])


def test_pcv_preserves_residues_above_750():
    n = np.arange(751, 5000)
    folded = pcv(n)
    assert folded.min() == 501 and folded.max() == 750
    for m in (2, 5, 10, 25, 50, 125, 250):
        np.testing.assert_array_equal(folded % m, n % m)


def test_ons_10_5_table():
    table = ons_10_5_ptable()
    frame = table.to_frame()
    assert frame.shape == (192_000, 3)
    assert frame.columns == ["pcv", "ckey", "pvalue"]
    assert all(dtype == pl.Int64 for dtype in frame.dtypes)
    assert frame["pcv"].is_sorted() and frame["pcv"].min() == 1 and frame["pcv"].max() == 750
    assert frame.filter(pl.col("pcv") == 1)["ckey"].to_list() == list(range(256))
    assert table.key_space == 256
    pvalue = dict(frame.filter(pl.col("ckey") == 17).select("pcv", "pvalue").iter_rows())
    assert [pvalue[k] for k in (9, 11, 12, 13, 14, 15)] == [-9, -1, -2, 2, 1, 0]
    assert frame.filter(pl.col("pcv") == 9)["pvalue"].unique().to_list() == [-9]
    counts = np.array([9, 11, 12, 13, 14, 15, 0, 12, 1003])
    noise = table.noise(counts, np.arange(counts.size) * 30)
    np.testing.assert_array_equal(noise, [-9, -1, -2, 2, 1, 0, 0, -2, 2])  # pcv(1003) = 503
    assert np.all((counts + noise) % 5 == 0)


def test_ons_table_validation():
    with pytest.raises(InputError, match="shape"):
        OnsPTable(np.zeros((750, 4), dtype=np.int64))
    bad = np.zeros((751, 4), dtype=np.int64)
    bad[0, 1] = 1
    with pytest.raises(InputError, match="row 0"):
        OnsPTable(bad)
    with pytest.raises(InputError, match=r"cell keys must lie in 0\.\.255"):
        ons_10_5_ptable().noise(np.array([3]), np.array([256]))


def test_to_ons_looks_up_ckey_over_k(d2_v09):
    ons = to_ons(d2_v09, key_space=256)
    assert ons.key_space == 256
    keys = np.arange(256)
    np.testing.assert_array_equal(ons.pvalue[37], d2_v09.noise(np.full(256, 37), keys / 256))
    np.testing.assert_array_equal(ons.pvalue[0], 0)
    # u = 5/256 < 0.3625 in row 1; 1001 folds onto pcv 501 (symmetry row), u = 250/256 > 0.9485
    np.testing.assert_array_equal(ons.noise(np.array([1, 1001]), np.array([5, 250])), [-1, 2])
    values, shares = ons.row(37)
    np.testing.assert_array_equal(values, [-2, -1, 0, 1, 2])
    np.testing.assert_allclose(shares, ROW2_D2_V09, atol=1 / 256)
    assert shares.sum() == pytest.approx(1)


# ---------------------------------------------------------------------------------------------
# (ε, δ) of neighbouring counts (docs/cellkey.md, *The card*)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("epsilon", "delta"),
    [(0.5, 0.217669), (1.0, 0.155245), (1.5, 0.064348), (1.554, 0.051546), (3.0, 0.051546)],
)
def test_delta_d2_v09_symmetry_row(d2_v09, epsilon, delta):
    pairs = delta_pairs(d2_v09, epsilon)
    assert pairs.shape == (d2_v09.i_max + 1,)
    assert pairs[-1] == pytest.approx(delta, abs=5e-7)


def test_delta_of_the_symmetry_row_settles_at_q_of_d(d2_v09):
    q = d2_v09.row(2)[1]
    threshold = np.max(np.abs(np.diff(np.log(q))))
    assert threshold == pytest.approx(1.554, abs=5e-4)
    for epsilon in (threshold + 1e-9, 5.0, 50.0, 1000.0):
        assert delta_pairs(d2_v09, epsilon)[-1] == pytest.approx(q[-1], abs=1e-12)
    assert delta_pairs(d2_v09, threshold - 0.01)[-1] > q[-1] + 1e-4


@pytest.mark.parametrize(
    ("epsilon", "delta", "tol"),
    [(0.5, 0.07158, 5e-6), (1.0, 0.01727, 5e-6), (2.0, 0.003792, 5e-7), (4.0, 0.003792, 5e-7)],
)
def test_delta_d5_v3_symmetry_row(d5_v3, epsilon, delta, tol):
    assert delta_pairs(d5_v3, epsilon)[-1] == pytest.approx(delta, abs=tol)


@pytest.mark.parametrize("epsilon", [0.0, 0.1, 1.0, 5.0, 30.0])
def test_delta_pair_0_1_with_blocking(epsilon):
    table = create_ptable(5, 3, js=2)
    pairs = delta_pairs(table, epsilon)
    assert pairs[0] == pytest.approx(0.2655, abs=5e-5)
    v, p = table.row(1)
    assert pairs[0] == pytest.approx(1 - p[v == -1][0], abs=1e-12)  # Pr(1 → nonzero)
    assert delta_for_epsilon(table, epsilon) == pytest.approx(pairs.max())
    assert delta_for_epsilon(table, epsilon) >= pairs[0]


def test_delta_is_total_variation_at_epsilon_zero_and_decreases(d5_v3):
    previous = delta_pairs(d5_v3, 0.0)
    for epsilon in (0.25, 0.5, 1.0, 2.0):
        current = delta_pairs(d5_v3, epsilon)
        assert np.all(current <= previous + 1e-15)
        previous = current


def test_delta_of_ons_tables():
    table = ons_10_5_ptable()
    pairs = delta_pairs(table, 1.0)
    assert pairs.shape == (1001,)
    # 0 → 0 and 1 → 0; 10 → 10 and 11 → 10; 12 → 10 but 13 → 15
    assert (pairs[0], pairs[10], pairs[12]) == (0.0, 0.0, 1.0)
    assert pairs[750] == pairs[1000]  # (750, 751) and (1000, 1001) both meet pcv 750 and 501
    assert delta_for_epsilon(table, 1.0) == 1.0


def test_delta_of_to_ons_is_close_to_its_source(d5_v3):
    ons = to_ons(d5_v3, key_space=4096)
    assert delta_for_epsilon(ons, 1.0) == pytest.approx(delta_for_epsilon(d5_v3, 1.0), abs=5e-3)


def test_delta_rejects_negative_epsilon(d5_v3):
    with pytest.raises(InputError, match="epsilon"):
        delta_pairs(d5_v3, -0.1)


# ---------------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------------


def test_long_format_round_trip(tmp_path, d5_v3_js2):
    path = tmp_path / "ptable.csv"
    write_ptable(d5_v3_js2, path)
    assert [f.name for f in tmp_path.iterdir()] == ["ptable.csv"]  # no temporary left behind
    assert path.read_text().splitlines()[0] == "i,j,p,v,p_int_lb,p_int_ub,type"
    back = read_ptable(path)
    assert isinstance(back, PTable)
    for name in ("i", "j", "v", "p", "lb", "ub"):
        np.testing.assert_array_equal(getattr(back, name), getattr(d5_v3_js2, name))
    assert (back.D, back.V, back.js, back.flagged) == (5, 3.0, 2, ())
    np.testing.assert_array_equal(
        back.noise(np.arange(30), np.linspace(0, 0.99, 30)),
        d5_v3_js2.noise(np.arange(30), np.linspace(0, 0.99, 30)),
    )


def test_long_format_recovers_parameters(tmp_path, ex_cnts):
    for table in (ex_cnts, create_ptable(2, 1)):
        path = tmp_path / "t.csv"
        write_ptable(table, path)  # overwrites the previous file
        back = read_ptable(path)
        assert isinstance(back, PTable)
        assert (back.D, back.V, back.js, back.flagged) == (
            table.D,
            table.V,
            table.js,
            table.flagged,
        )


def test_ons_round_trip(tmp_path, d2_v09):
    for table in (ons_10_5_ptable(), to_ons(d2_v09, key_space=16)):
        path = tmp_path / "ons.csv"
        write_ptable(table, path)
        back = read_ptable(path)
        assert isinstance(back, OnsPTable)
        assert back.key_space == table.key_space
        np.testing.assert_array_equal(back.pvalue, table.pvalue)


def test_ons_file_in_any_row_order(tmp_path):
    frame = ons_10_5_ptable(4).to_frame().sample(fraction=1.0, shuffle=True, seed=1)
    path = tmp_path / "shuffled.csv"
    frame.write_csv(path)
    back = read_ptable(path)
    assert isinstance(back, OnsPTable)
    np.testing.assert_array_equal(back.pvalue, ons_10_5_ptable(4).pvalue)


def written(tmp_path, d2_v09) -> list[str]:
    path = tmp_path / "good.csv"
    write_ptable(d2_v09, path)
    return path.read_text().splitlines()


def read_error(tmp_path, name: str, content: str | bytes) -> str:
    path = tmp_path / name
    if isinstance(content, str):
        path.write_text(content)
    else:
        path.write_bytes(content)
    with pytest.raises(InputError) as info:
        read_ptable(path)
    message = str(info.value)
    assert str(path) in message
    assert "\n" not in message
    return message


def test_bad_header(tmp_path):
    message = read_error(tmp_path, "bad.csv", "a,b,c\n1,2,3\n")
    assert "unknown p-table header a,b,c" in message


def test_non_numeric_value_names_row_and_column(tmp_path, d2_v09):
    lines = written(tmp_path, d2_v09)
    fields = lines[3].split(",")  # data row 3: i=1, j=1
    fields[3] = "x"
    lines[3] = ",".join(fields)
    message = read_error(tmp_path, "bad.csv", "\n".join(lines) + "\n")
    assert "row 3 (line 4), column v: 'x' is not an integer" in message


def test_probabilities_not_summing_to_one(tmp_path, d2_v09):
    lines = written(tmp_path, d2_v09)
    lines[2] = lines[2].replace("0.3625,-1", "0.3725,-1", 1)
    message = read_error(tmp_path, "bad.csv", "\n".join(lines) + "\n")
    assert "probabilities p of row i=1 sum to 1.01, not 1" in message


def test_bounds_not_contiguous(tmp_path, d2_v09):
    lines = written(tmp_path, d2_v09)
    # shift the second interval of row 1, keeping its p = ub − lb and the row sum
    assert lines[3] == "1,1,0.3625,0,0.3625,0.725,destatis"
    lines[3] = "1,1,0.3625,0,0.3725,0.735,destatis"
    message = read_error(tmp_path, "bad.csv", "\n".join(lines) + "\n")
    assert "row 3 (i=1, j=1)" in message and "not contiguous" in message


def test_duplicate_and_missing_rows(tmp_path, d2_v09):
    lines = written(tmp_path, d2_v09)
    message = read_error(tmp_path, "dup.csv", "\n".join(lines + [lines[-1]]) + "\n")
    assert "rows 10 and 11 are both the transition i=2 -> j=4" in message
    message = read_error(tmp_path, "gap.csv", "\n".join(lines[:2] + lines[6:]) + "\n")
    assert "no rows for i=1" in message


def test_ons_file_errors(tmp_path):
    message = read_error(tmp_path, "short.csv", "pcv,ckey,pvalue\n1,0,0\n2,0,0\n")
    assert "no row for pcv=3, ckey=0" in message
    message = read_error(tmp_path, "dup.csv", "pcv,ckey,pvalue\n1,0,0\n2,0,1\n1,0,0\n")
    assert "rows 1 and 3 both give pcv=1, ckey=0" in message
    message = read_error(tmp_path, "val.csv", "pcv,ckey,pvalue\n1,0,0\n1,1,1.5\n")
    assert "row 2 (line 3), column pvalue: '1.5' is not an integer" in message
    message = read_error(tmp_path, "range.csv", "pcv,ckey,pvalue\n751,0,0\n")
    assert "row 1 (line 2), column pcv: 751 must lie in 1..750" in message
    message = read_error(tmp_path, "empty.csv", "pcv,ckey,pvalue\n1,,0\n")
    assert "column ckey: an empty value is not an integer" in message


def ons_lines(pvalue_of_pcv: dict[int, int]) -> str:
    """An ONS file with one cell key: the 10/5 table with some pcvs' pvalues replaced."""
    table = ons_10_5_ptable(1).pvalue[:, 0].copy()
    for n, value in pvalue_of_pcv.items():
        table[n] = value
    return "pcv,ckey,pvalue\n" + "".join(f"{n},0,{table[n]}\n" for n in range(1, 751))


def test_ons_pvalue_publishing_a_negative_count(tmp_path):
    message = read_error(tmp_path, "neg.csv", ons_lines({1: -5}))
    assert (
        "row 1 (line 2), column pvalue: -5 at pcv 1 would publish a negative count (-4); "
        "expected pvalue >= -pcv" in message
    )
    # pcv 501..750 also serve counts pcv + 250k, all larger: pcv itself is the smallest count
    message = read_error(tmp_path, "fold.csv", ons_lines({600: -601}))
    assert "row 600 (line 601), column pvalue: -601 at pcv 600" in message


def test_ons_pvalue_down_to_zero_is_accepted(tmp_path):
    path = tmp_path / "zero.csv"
    path.write_text(ons_lines({1: -1, 9: -9, 600: -600, 750: -750}))
    table = read_ptable(path)
    assert isinstance(table, OnsPTable)
    counts = np.array([1, 9, 600, 850, 1100, 750, 1000])
    np.testing.assert_array_equal(
        counts + table.noise(counts, np.zeros(counts.size, dtype=np.int64)),
        [0, 0, 0, 250, 500, 0, 250],
    )


def test_unreadable_files(tmp_path):
    assert "not UTF-8" in read_error(
        tmp_path, "latin1.csv", "pcv,ckey,pvalue\n1,0,\xe9\n".encode("latin-1")
    )
    assert "empty p-table file" in read_error(tmp_path, "nothing.csv", "")
    assert "not a readable CSV" in read_error(tmp_path, "ragged.csv", "pcv,ckey,pvalue\n1,0,0,5\n")
    with pytest.raises(InputError, match="missing.csv: cannot read the p-table file"):
        read_ptable(tmp_path / "missing.csv")
    with pytest.raises(InputError, match="null: the p-table file is not a regular file"):
        read_ptable(Path("/dev/null"))


def test_a_long_format_header_without_rows_is_refused(tmp_path):
    message = read_error(tmp_path, "header.csv", "i,j,p,v,p_int_lb,p_int_ub\n")
    assert "the p-table has no rows" in message


def test_ons_ckeys_are_bounded_by_the_rows_before_any_array_is_made(tmp_path):
    # one cell key needs 750 rows: ckey 2³² − 1 in a 751-row file would have made 751 × 2³²
    message = read_error(tmp_path, "key.csv", ons_lines({}) + "1,4294967295,0\n")
    assert "row 751 (line 752), column ckey: 4294967295 must lie in 0..0" in message
    assert "751 rows make K at most 1" in message


def test_noise_and_rows_of_a_file_are_bounded(tmp_path):
    message = read_error(tmp_path, "ons.csv", ons_lines({5: 10**9}))
    assert "row 5 (line 6), column pvalue: 1000000000 must be at most 750" in message
    head = "i,j,p,v,p_int_lb,p_int_ub\n0,0,1,0,0,1\n"
    message = read_error(tmp_path, "v.csv", head + "1,0,0.5,-1,0,0.5\n1,1001,0.5,1000,0.5,1\n")
    assert "row 3 (line 4), column v: 1000 must lie in -750..750" in message
    rows = "".join(f"{i},{i},1,0,0,1\n" for i in range(1, 752))
    message = read_error(tmp_path, "i.csv", head + rows)
    assert "row 752 (line 753), column i: 751 must lie in 0..750" in message
