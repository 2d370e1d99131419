"""Cell key risk analyses: E disclosure, pinned tuples, IRR averaging and unbounded-noise tails.

Vectors: the numbers that F. Bach's "Differential privacy and noisy confidentiality concepts for
European population statistics" prints, and (marked ★) values we computed from the formulas of
docs/cellkey.md as regression values; docs/cellkey.md, *Where the test vectors come from*, lists
which is which.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq

from sdclab.core import cellkey_analysis as ck


def symmetry_row(bound: int, variance: float) -> ck.Pmf:
    """Max-entropy symmetry row p(v) ∝ r^{v²} on −E..E with variance V (docs/cellkey.md)."""
    if variance >= bound * (bound + 1) / 3:
        return uniform_row(bound)  # the uniform limit: the variance constraint is slack
    v = np.arange(-bound, bound + 1, dtype=np.int64)

    def pmf(log_r: float) -> np.ndarray:
        w = np.exp(log_r * v.astype(float) ** 2)
        return w / w.sum()

    log_r = brentq(lambda lr: float((pmf(lr) * v**2).sum()) - variance, -50.0, -1e-12)
    return v, np.maximum(pmf(log_r), 1e-8)


def uniform_row(bound: int) -> ck.Pmf:
    return np.arange(-bound, bound + 1, dtype=np.int64), np.full(2 * bound + 1, 1 / (2 * bound + 1))


def test_symmetry_row_matches_the_spec_row():
    # D=5, V=3 symmetry row ★ (the same values as tests/test_ptable.py)
    _, p = symmetry_row(5, 3)
    expected = [0.00379186, 0.01659093, 0.05229263, 0.11873037, 0.19419346, 0.22880150]
    assert p[:6] == pytest.approx(expected, abs=1e-8)


# (a) ---------------------------------------------------------------------------------------------


def test_uniform_p1_vectors():
    # ★ values of the paper's formula 20/(2E+1)³ (fn. 14 prints the formula only)
    assert ck.p1_uniform(1) == pytest.approx(20 / 27)
    assert ck.p1_uniform(2) == pytest.approx(0.16)
    assert ck.p1_uniform(5) == pytest.approx(0.015026, abs=5e-7)
    assert ck.tuples_needed(ck.p1_uniform(2), 0.95) == 18


@pytest.mark.parametrize("bound", range(1, 8))
def test_uniform_closed_form_equals_the_convolution(bound):
    row = uniform_row(bound)
    assert ck.p1_independent(row, row, row, bound) == pytest.approx(ck.p1_uniform(bound), rel=1e-12)


def test_p1_needs_a_positive_bound():
    with pytest.raises(ValueError):
        ck.p1_uniform(0)


def test_tuple_sum_pmf_handles_gaps_and_the_reversed_total():
    # F ∈ {0, 2}, M = 1, T ∈ {−1, 3}: S = F + M − T ∈ {−2, 0, 2, 4}
    f = (np.array([0, 2]), np.array([0.5, 0.5]))
    m = (np.array([1]), np.array([1.0]))
    t = (np.array([-1, 3]), np.array([0.25, 0.75]))
    s, probs = ck.tuple_sum_pmf(f, m, t)
    mass = dict(zip(s.tolist(), probs.tolist(), strict=True))
    assert probs.sum() == pytest.approx(1)
    assert {k: v for k, v in mass.items() if v > 0} == pytest.approx(
        {-2: 0.375, 0: 0.375, 2: 0.125, 4: 0.125}
    )


@pytest.mark.parametrize(
    ("bound", "variance", "p1", "half_unit"),
    [
        (2, 1, 3.879e-2, 5e-6),
        (3, 2, 5.658e-3, 5e-7),
        (5, 2, 1.522e-7, 5e-11),
        (5, 3, 1.231e-5, 5e-9),
        (10, 4, 5.34e-16, 5e-19),
    ],
)  # ★; the paper gives only O(10⁻⁷) for (5, 2) and "practically zero" for (10, 4)
def test_cell_key_p1_from_the_symmetry_row(bound, variance, p1, half_unit):
    row = symmetry_row(bound, variance)
    assert ck.p1_independent(row, row, row, bound) == pytest.approx(p1, rel=0, abs=half_unit)


def test_germany_disclosure_risk_and_the_grid():
    grid = ck.p1_grid(symmetry_row, bounds=[1, 2, 5, 10], variances=[1, 2, 4], m_avail=2.8e7)
    pairs = [(r["bound"], r["variance"]) for r in grid]
    # V ≤ E(E+1)/3: E=1 only allows V ≤ 2/3
    assert pairs == [(2, 1), (2, 2), (5, 1), (5, 2), (5, 4), (10, 1), (10, 2), (10, 4)]
    assert grid[1]["p1"] == pytest.approx(ck.p1_uniform(2))  # V = E(E+1)/3 is the uniform row
    # the paper's 2.8e7 sex 3-tuples of Germany; the risk 0.986 ★
    germany = next(r for r in grid if (r["bound"], r["variance"]) == (5, 2))
    assert germany["risk"] == pytest.approx(0.986, abs=5e-4)
    assert not germany["below_constraint"]
    assert germany["tuples_needed"] == math.ceil(math.log(0.05) / math.log1p(-germany["p1"]))
    practically_zero = next(r for r in grid if (r["bound"], r["variance"]) == (10, 4))
    assert practically_zero["risk"] < 1e-7
    assert practically_zero["below_constraint"]


def test_risk_and_tuples_needed_edge_cases():
    assert ck.tuples_needed(0.0, 0.95) == math.inf
    assert ck.tuples_needed(1.0, 0.95) == 1
    assert ck.disclosure_risk(1e-12, 1e3) == pytest.approx(1e-9, rel=1e-6)
    assert ck.disclosure_risk(0.0, 2.8e7) == 0.0
    assert ck.disclosure_risk(0.5, 0) == 0.0


def test_estimate_bound():
    assert ck.estimate_bound(np.array([1, -4, 3])) == 2
    assert ck.estimate_bound(np.array([0, 7, -9])) == 3
    with pytest.raises(ValueError):
        ck.estimate_bound(np.array([], dtype=np.int64))


def sorted_lookup(row: ck.Pmf, key_space: int) -> ck.NoiseLookup:
    """noise(n, ck): first v with u < ub in the row's sorted cumulative intervals, u = ck/K."""
    v, p = row
    upper = np.round(np.cumsum(p), 8)
    upper[-1] = 1.0

    def noise(n: np.ndarray, ckey: np.ndarray) -> np.ndarray:
        index = np.searchsorted(upper, ckey / key_space, side="right")
        return np.where(n == 0, 0, v[np.minimum(index, v.size - 1)])

    return noise


def test_exact_mode_with_sorted_intervals_has_no_extreme_patterns():
    row = symmetry_row(3, 2)
    assert ck.p1_independent(row, row, row, 3) == pytest.approx(5.658e-3, rel=1e-3)
    assert ck.p1_exact(sorted_lookup(row, 256), 100, 100, 256, 3) == 0.0  # ★


def test_exact_mode_counts_key_pairs():
    # noise ±2 by key parity: S = 6 exactly when both keys are odd (then ck_T is even), so p1 = 1/4
    def parity(n: np.ndarray, ckey: np.ndarray) -> np.ndarray:
        return 2 * (2 * (ckey % 2) - 1)

    assert ck.p1_exact(parity, 10, 20, 16, 2) == pytest.approx(0.25)
    assert ck.p1_exact(parity, 10, 20, 16, 1) == 1.0


# (b) ---------------------------------------------------------------------------------------------


def test_paper_example_is_pinned():
    # the paper's example: (3, 2, 11) with E = 2 has S = −3E, so the truth is (5, 4, 9)
    out = ck.pinned_tuples(np.array([[3, 2, 11]]), bound=2)
    assert out["s"].tolist() == [-6]
    assert out["feasible"].tolist() == [1]
    assert out["pinned"].tolist() == [True]
    assert out["true_values"].tolist() == [[5, 4, 9]]


def test_pinned_tuples_use_the_zero_facts():
    published = np.array(
        [
            [1, 1, 0],  # only F = M = T = 0 fits E = 1, but non-zero outputs are never true 0s
            [2, 0, 0],  # M = 0 must be a true 0, T = 0 a 1 perturbed down: (1, 0, 1)
            [0, 3, 5],  # F may be a true 0 or a 1 perturbed to 0: three vectors
            [4, 4, 8],  # S = 0: 7 assignments with |x_T| ≤ 1
        ]
    )
    out = ck.pinned_tuples(published, bound=1)
    assert out["feasible"].tolist() == [0, 1, 3, 7]
    assert out["pinned"].tolist() == [False, True, False, False]
    assert out["true_values"].tolist() == [[-1] * 3, [1, 0, 1], [-1] * 3, [-1] * 3]


def test_pinned_tuples_with_three_components_and_chunks(monkeypatch):
    monkeypatch.setattr(ck, "_CHUNK", 64)  # force many chunks
    rng = np.random.default_rng(7)
    true = rng.integers(5, 50, size=(40, 3))
    noise = np.where(rng.random((40, 4)) < 0.5, -2, 2)
    noise[:20, :3] = 2
    noise[:20, 3] = -2  # S = 4·2 = 8 = (c+1)E: all pinned
    published = np.column_stack([true, true.sum(axis=1)]) + noise
    out = ck.pinned_tuples(published, bound=2)
    assert out["pinned"][:20].all()
    assert (out["true_values"][:20] == np.column_stack([true, true.sum(axis=1)])[:20]).all()
    assert (out["feasible"] >= 1).all()


def test_pinned_tuples_refuse_blocked_outputs():
    with pytest.raises(ValueError, match="1..2"):
        ck.pinned_tuples(np.array([[3, 2, 5]]), bound=2, js=2)
    assert ck.pinned_tuples(np.array([[3, 0, 5]]), bound=2, js=2)["feasible"][0] > 0


def test_p_fully_pinned():
    assert ck.p_fully_pinned(0.1, 2) == pytest.approx(2e-3)


# (c) ---------------------------------------------------------------------------------------------

SEX, AGE, EDU = "SEX", "AGE", "EDU"
CATS = {SEX: 2, AGE: 2, EDU: 3}


def test_irr_counts_sex_by_age():
    tables = [frozenset({SEX, AGE})]
    total = ck.irr_counts(tables, CATS, frozenset())
    assert (total["t_spsn"], total["k_spsn"]) == (4, 9)
    assert total["k_spsn"] / total["t_spsn"] ** 2 == 9 / 16
    sex = ck.irr_counts(tables, CATS, frozenset({SEX}))
    assert (sex["t_spsn"], sex["k_spsn"]) == (2, 3)
    cells = ck.irr_counts(tables, CATS, frozenset({SEX, AGE}))
    assert (cells["t_spsn"], cells["k_spsn"], cells["t_independent"]) == (1, 1, 1)


def test_irr_counts_two_tables_with_and_without_spsn():
    # ★ (the single-table counts above are the paper's example)
    tables = [frozenset({SEX, AGE}), frozenset({SEX, EDU})]
    total = ck.irr_counts(tables, CATS, frozenset())
    assert total == {"t_spsn": 6, "k_spsn": 18, "t_independent": 8, "k_independent": 21}
    sex = ck.irr_counts(tables, CATS, frozenset({SEX}))
    assert sex == {"t_spsn": 3, "k_spsn": 6, "t_independent": 4, "k_independent": 7}


def test_averaging_vectors():
    ratio = 0.0867  # k/t² of Luxembourg AGE.M
    assert ck.averaging_success(ratio, 1, 3) == pytest.approx(0.673, abs=5e-4)
    assert ck.averaging_success(ratio, 1, 3) < ck.RISK_CONSTRAINT
    # ★ V* = 2.88 is the shortcut ξ²/(k/t²) and the exact Gaussian root 1.1% higher: both ours (the
    # paper prints no V*; it reads V ≃ 3 off its Fig. 2)
    assert 0.25 / ratio == pytest.approx(2.88, abs=5e-3)
    exact = ck.variance_for_success(ratio, 1)
    assert exact == pytest.approx(2.9157, abs=5e-4)
    assert ck.averaging_success(ratio, 1, exact) == pytest.approx(0.68, abs=1e-12)
    for v_star in (0.25 / ratio, exact):
        assert math.sqrt(2 / v_star) == pytest.approx(0.83, abs=5e-3)
    assert ck.averaging_success(ratio, 1, exact) ** 21 == pytest.approx(3.0e-4, abs=5e-6)


def test_chebyshev_bound_is_below_the_gaussian_and_clipped():
    assert ck.averaging_success_chebyshev(0.0867, 1, 3) == 0.0
    k, t = 9, 4
    assert ck.averaging_success_chebyshev(k, t, 0.1) == pytest.approx(1 - 9 / 16 * 0.1 / 0.25)
    assert ck.averaging_success_chebyshev(k, t, 0.1) <= ck.averaging_success(k, t, 0.1)


# (e) ---------------------------------------------------------------------------------------------


def test_laplace_and_geometric_tails():
    tail = ck.laplace_tail(0.1, 40)  # the paper: "~1.83%", "≃ 214" (fn. 29)
    assert tail == pytest.approx(0.01832, abs=5e-6)
    assert tail * 11_680 == pytest.approx(213.9, abs=0.05)
    assert ck.geometric_tail(0.1, 40) == pytest.approx(0.01740, abs=5e-6)  # ★
    k = np.arange(-2000, 2001)
    pmf = ck.geometric_pmf(0.1, k)
    assert pmf.sum() == pytest.approx(1, abs=1e-12)
    assert pmf[np.abs(k) > 40].sum() == pytest.approx(ck.geometric_tail(0.1, 40), rel=1e-9)


def test_expected_distorted_uses_the_integer_threshold():
    eps = 0.1
    counts = np.array([30, 80, 0])
    # RE = 0.1: |x| > 3 ⇔ |x| ≥ 4 at n = 30, |x| > 8 at 80, and any noise on a true 0
    expected = ck.geometric_tail(eps, 3) + ck.geometric_tail(eps, 8) + ck.geometric_tail(eps, 0)
    assert ck.expected_distorted(counts, eps, 0.1) == pytest.approx(expected, rel=1e-12)
    # 0.29·100 = 28.999999999999996 in floats, but |x| > 29 is still the event
    assert ck.expected_distorted(np.array([100]), eps, 0.29) == pytest.approx(
        ck.geometric_tail(eps, 29)
    )
    # RE = 0.5 at n = 81: |x| > 40.5 ⇔ |x| ≥ 41
    assert ck.expected_distorted(np.array([81]), eps, 0.5) == pytest.approx(
        ck.geometric_tail(eps, 40)
    )
    laplace = ck.expected_distorted(np.full(11_680, 80), eps, 0.5, kind="laplace")
    assert laplace == pytest.approx(213.9, abs=0.05)


def test_broadband_probability():
    p = ck.broadband_probability(10, 20, 30, 0.1, 1.0)
    assert p == pytest.approx(2 * 0.5**3 * math.exp(-0.1 * 60))
    arrays = ck.broadband_probability(np.array([10.0, 0]), np.array([20.0, 0]), 30.0, 0.1, 1.0)
    assert arrays == pytest.approx([p, 0.25 * math.exp(-3)])


@pytest.mark.parametrize(
    ("eps", "sd"),
    [(0.025, 56.6), (0.05, 28.3), (0.1, 14.1), (0.2, 7.07), (0.4, 3.54), (0.8, 1.77)],
)
def test_noise_sd_of_table_epsilons(eps, sd):
    assert ck.noise_sd(eps) == pytest.approx(sd, abs=0.05 if sd > 10 else 0.005)


def test_epsilon_table_is_the_papers_split():
    # Eq. 14: ε_global ∈ {0.25, …, 8} gives ε_table ∈ {0.025, …, 0.8}, one tenth (not 0.675/6)
    budgets = [0.25, 0.5, 1, 2, 4, 8]
    table_budgets = [0.025, 0.05, 0.1, 0.2, 0.4, 0.8]
    assert [ck.epsilon_table(eps) for eps in budgets] == pytest.approx(table_budgets)
    # "manageable from ε > 0.4" (§4.2) is ε_table: ε_global above 4
    assert ck.epsilon_table(4) == pytest.approx(0.4)


@pytest.mark.parametrize(
    ("t", "alpha", "epsilon"),
    [(35_000, 0.95, 0.67), (68, 0.68, 0.26), (68, 0.95, 0.36)],
)  # ★; the paper: ≳ 0.6 for t = 35,000 and ≳ 0.3 for Malta (t = 68)
def test_utility_epsilon_eq16(t, alpha, epsilon):
    assert ck.utility_epsilon(t, alpha, 20) == pytest.approx(epsilon, abs=0.005)


def test_utility_epsilon_eq16_large_country_at_68_percent():
    # 0.58 is the shortcut ln(t/(1−α))/E; Eq. 16 itself gives 0.571
    assert ck.utility_epsilon(35_000, 0.68, 20) == pytest.approx(0.5708, abs=5e-4)
    assert math.log(35_000 / 0.32) / 20 == pytest.approx(0.58, abs=0.005)


def test_utility_epsilon_eq8():
    n = 1e6
    assert ck.utility_epsilon(n * math.log(n) ** 2, 0.99, math.sqrt(n)) == pytest.approx(
        0.0237, abs=5e-5
    )
    assert ck.utility_epsilon(n * math.log2(n) ** 2, 0.99, math.sqrt(n)) == pytest.approx(
        0.0244, abs=5e-5
    )


def test_geometric_sampler_tail_frequency():
    eps, bound, size = 0.1, 40, 200_000
    x = ck.sample_geometric(eps, size, np.random.default_rng(2025))
    p = ck.geometric_tail(eps, bound)
    hits = np.count_nonzero(np.abs(x) > bound)
    assert abs(hits - size * p) <= 4 * math.sqrt(size * p * (1 - p))
    # symmetric and centred: the mean is within 4 standard errors of 0
    sd = math.sqrt(2 * math.exp(-eps)) / (1 - math.exp(-eps))
    assert abs(x.mean()) <= 4 * sd / math.sqrt(size)
    assert x.dtype == np.int64


def _pinned_by_enumeration(published: np.ndarray, bound: int) -> tuple[list[int], list[list[int]]]:
    """Every noise assignment tried, one by one: (feasible vectors, the pinned vector or −1s)."""
    import itertools

    counts, vectors = [], []
    for row in published.tolist():
        *parts, total = row
        found = []
        for x in itertools.product(range(-bound, bound + 1), repeat=len(parts)):
            x_total = sum(x) - (sum(parts) - total)
            if abs(x_total) > bound:
                continue
            true = [p - xi for p, xi in zip(row, [*x, x_total], strict=True)]
            if all(t >= 1 or (t == 0 and p == 0) for t, p in zip(true, row, strict=True)):
                found.append(true)
        counts.append(len(found))
        vectors.append(found[0] if len(found) == 1 else [-1] * len(row))
    return counts, vectors


@pytest.mark.parametrize(("bound", "c"), [(1, 2), (2, 2), (3, 3), (2, 4)])
def test_pinned_tuples_count_what_enumeration_finds(bound, c):
    rng = np.random.default_rng(bound * 10 + c)
    parts = rng.integers(0, 6, size=(300, c))
    totals = parts.sum(axis=1) + rng.integers(-c * bound - 2, c * bound + 3, size=300)
    published = np.column_stack([parts, np.maximum(totals, 0)])
    out = ck.pinned_tuples(published, bound=bound)
    counts, vectors = _pinned_by_enumeration(published, bound)
    assert out["feasible"].tolist() == counts
    assert out["true_values"].tolist() == vectors
    assert 0 < int(out["pinned"].sum()) < len(published)  # (the cases include both)
