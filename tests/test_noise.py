"""Exact samplers: goodness of fit against the exact pmf, agreement with opendp, exact paths."""

from __future__ import annotations

import ast
import inspect
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from sdclab.core import noise

P_MIN = 1e-4
"""Fixed seeds make every test deterministic; this is the significance level it was checked at."""


def gaussian_pmf(sigma2: float, support: np.ndarray) -> np.ndarray:
    """Exact (to float precision) pmf of N_Z(0, σ²) on ``support``."""
    sigma = np.sqrt(sigma2)
    grid = np.arange(-int(60 * sigma) - 60, int(60 * sigma) + 61)
    weights = np.exp(-(grid.astype(float) ** 2) / (2 * sigma2))
    return np.exp(-(support.astype(float) ** 2) / (2 * sigma2)) / weights.sum()


def laplace_pmf(scale: float, support: np.ndarray) -> np.ndarray:
    q = np.exp(-1 / scale)
    return (1 - q) / (1 + q) * q ** np.abs(support)


def chi_square_p(draws: np.ndarray, pmf) -> float:
    """p-value of a chi-square fit, single values where the expectation is ≥ 20, tails pooled."""
    n = draws.size
    lo, hi = int(draws.min()), int(draws.max())
    support = np.arange(lo - 1, hi + 2)
    probs = pmf(support)
    expected = n * probs
    keep = expected >= 20
    observed = np.bincount(draws - (lo - 1), minlength=support.size)
    obs = list(observed[keep])
    exp = list(expected[keep])
    first, last = np.flatnonzero(keep)[[0, -1]]
    # pooled tails: everything below / above the kept range, with the exact tail mass
    obs += [observed[:first].sum(), observed[last + 1 :].sum()]
    below = probs[:first].sum() + _outside_mass(pmf, lo - 1, -1)
    above = probs[last + 1 :].sum() + _outside_mass(pmf, hi + 1, 1)
    exp += [n * below, n * above]
    obs_arr, exp_arr = np.array(obs, float), np.array(exp, float)
    exp_arr *= obs_arr.sum() / exp_arr.sum()
    return float(stats.chisquare(obs_arr, exp_arr).pvalue)


def _outside_mass(pmf, edge: int, direction: int) -> float:
    far = edge + direction * np.arange(1, 200_000)
    return float(pmf(far).sum())


@pytest.mark.parametrize("sigma2", [0.01, 0.5, 1, 2.34, 31.5, 650.8])
def test_discrete_gaussian_fits_exact_pmf(sigma2):
    draws = noise.discrete_gaussian(sigma2, 1_000_000, np.random.default_rng(11))
    assert draws.dtype == np.int64
    assert chi_square_p(draws, lambda y: gaussian_pmf(sigma2, y)) > P_MIN


def test_discrete_gaussian_huge_scale_fits_in_bins():
    sigma2 = 10**8
    draws = noise.discrete_gaussian(sigma2, 200_000, np.random.default_rng(12))
    edges = np.arange(-50_000, 50_001, 2_500)
    centres = np.arange(-60_000, 60_000)
    cdf = np.cumsum(gaussian_pmf(sigma2, centres))
    cut = np.searchsorted(centres, edges)
    probs = np.diff(np.r_[0.0, cdf[cut - 1], 1.0])
    observed = np.bincount(np.searchsorted(edges, draws, side="right"), minlength=len(probs))
    expected = probs * draws.size
    assert stats.chisquare(observed, expected * observed.sum() / expected.sum()).pvalue > P_MIN


@pytest.mark.parametrize("scale", [0.3, 1, 3.7, 100])
def test_discrete_laplace_fits_exact_pmf(scale):
    draws = noise.discrete_laplace(scale, 1_000_000, np.random.default_rng(13))
    assert chi_square_p(draws, lambda y: laplace_pmf(scale, y)) > P_MIN


@pytest.mark.parametrize("sigma2", [0.5, 1, 2.34, 31.5, 650.8])
def test_gaussian_variance_matches_exact_formula(sigma2):
    n = 1_000_000
    draws = noise.discrete_gaussian(sigma2, n, np.random.default_rng(14)).astype(float)
    grid = np.arange(-int(60 * np.sqrt(sigma2)) - 60, int(60 * np.sqrt(sigma2)) + 61)
    p = gaussian_pmf(sigma2, grid)
    var = (p * grid**2).sum()
    fourth = (p * grid**4).sum()
    sd_of_estimate = np.sqrt((fourth - var**2) / n)
    assert abs(draws.var() - var) < 5 * sd_of_estimate
    assert abs(draws.mean()) < 5 * np.sqrt(var / n)


@pytest.mark.parametrize(
    "sigma2",
    [Fraction(10**40 + 1, 10**40), Fraction(1, 3), 0.1, Fraction(2**70 + 3, 2**69)],
)
def test_rationals_with_huge_denominators_are_exact(sigma2):
    draws = noise.discrete_gaussian(sigma2, 400_000, np.random.default_rng(15))
    assert chi_square_p(draws, lambda y: gaussian_pmf(float(sigma2), y)) > P_MIN


def test_two_sample_agreement_with_opendp():
    dp = pytest.importorskip("opendp.prelude")
    dp.enable_features("contrib")
    n = 200_000
    rng = np.random.default_rng(16)
    for scale in (1.0, 10.0):
        space = (dp.vector_domain(dp.atom_domain(T=int)), dp.l2_distance(T=int))
        theirs = np.array(dp.m.make_gaussian(*space, scale=scale)([0] * n))
        ours = noise.discrete_gaussian(scale**2, n, rng)
        assert _two_sample_p(ours, theirs) > P_MIN
        space = (dp.vector_domain(dp.atom_domain(T=int)), dp.l1_distance(T=int))
        theirs = np.array(dp.m.make_laplace(*space, scale=scale)([0] * n))
        ours = noise.discrete_laplace(scale, n, rng)
        assert _two_sample_p(ours, theirs) > P_MIN


def _two_sample_p(a: np.ndarray, b: np.ndarray) -> float:
    values = np.union1d(a, b)
    table = np.array([np.searchsorted(values, x) for x in (a, b)])
    counts = np.array([np.bincount(row, minlength=values.size) for row in table])
    keep = counts.sum(axis=0) >= 40
    table = np.hstack([counts[:, keep], counts[:, ~keep].sum(axis=1, keepdims=True)])
    return float(stats.chi2_contingency(table[:, table.sum(axis=0) > 0]).pvalue)


# ---------------------------------------------------------------------------------------------
# The exact primitives
# ---------------------------------------------------------------------------------------------


def _binomial_ok(successes: int, n: int, p: float) -> bool:
    """Within 5 standard deviations of n·p (probability of failing by chance < 1e-6)."""
    return abs(successes - n * p) <= 5 * np.sqrt(n * p * (1 - p)) + 1


@pytest.mark.parametrize(("n", "m"), [(0, 1), (1, 1), (1, 2), (7, 10), (3, 101), (2**61, 2**62)])
def test_bern_exp_ratio_probability(n, m):
    count = 400_000
    draws = noise._bern_exp_ratio(np.full(count, n, dtype=np.int64), m, np.random.default_rng(3))
    assert _binomial_ok(int(draws.sum()), count, np.exp(-n / m))


def test_bern_exp_one_and_run_lengths():
    rng = np.random.default_rng(4)
    count = 1_000_000
    assert _binomial_ok(int(noise._bern_exp_one(count, rng).sum()), count, np.exp(-1))
    v = noise._exp_one_run_lengths(count, rng)
    for k in range(1, 6):
        assert _binomial_ok(int((v >= k).sum()), count, np.exp(-k))


def test_exp_acceptance_with_large_gammas_and_denominators():
    denominator = 3**60
    gammas = [Fraction(0), Fraction(1, 3), Fraction(5, 2), Fraction(7 * 3**59 + 1, 3**60)]
    numerators = [int(g * denominator) for g in gammas]
    acceptance = noise.ExpAcceptance(lambda v: numerators[v], denominator)
    count = 300_000
    rng = np.random.default_rng(5)
    for j, g in enumerate(gammas):
        draws = acceptance.sample(np.full(count, j, dtype=np.int64), rng)
        assert _binomial_ok(int(draws.sum()), count, np.exp(-float(g)))


class TieRng:
    """Delegates to a real generator, but batches of 64-bit draws land exactly on a threshold.

    (Single-word draws, as the exact tie-break makes them, stay random.)
    """

    def __init__(self, threshold: int, seed: int) -> None:
        self.threshold = threshold
        self.real = np.random.default_rng(seed)

    def integers(self, low, high, size=None, dtype=np.int64):
        if high == noise.TWO64 and dtype == np.uint64 and size > 1:
            return np.full(size, self.threshold, dtype=np.uint64)
        return self.real.integers(low, high, size=size, dtype=dtype)


def test_threshold_tie_is_settled_with_the_exact_conditional_probability():
    # γ = r/D < 1 with one k-loop step: Bernoulli(r/D) is drawn against T = ⌊r·2⁶⁴/D⌋
    r, denominator = 1, 3  # r·2⁶⁴/D has fractional part 1/3
    acceptance = noise.ExpAcceptance(lambda v: r, denominator)
    threshold = (r << 64) // denominator
    acceptance._extend(0)
    rng = TieRng(threshold, 6)
    count = 30_000
    draws = acceptance._bernoulli(np.zeros(count, dtype=np.int64), 1, rng)
    frac = Fraction(r * 2**64, denominator) - threshold
    assert frac == Fraction(1, 3)
    assert _binomial_ok(int(draws.sum()), count, float(frac))


def test_uniform_below_large_bound():
    rng = np.random.default_rng(7)
    n = 3 * 2**100
    draws = [noise._uniform_below(n, rng) for _ in range(30_000)]
    assert all(0 <= d < n for d in draws)
    thirds = np.bincount([d // 2**100 for d in draws], minlength=3)
    assert stats.chisquare(thirds).pvalue > P_MIN


class IntegersOnly:
    """A generator that offers integer draws only: any float-valued draw fails the test."""

    def __init__(self, seed: int) -> None:
        self.real = np.random.default_rng(seed)
        self.calls = 0

    def integers(self, low, high, size=None, dtype=np.int64):
        assert np.issubdtype(np.dtype(dtype), np.integer)
        self.calls += 1
        return self.real.integers(low, high, size=size, dtype=dtype)


def test_samplers_consume_only_integer_randomness():
    rng = IntegersOnly(8)
    noise.discrete_gaussian(Fraction(7, 3), 10_000, rng)
    noise.discrete_laplace(2.5, 10_000, rng)
    assert rng.calls > 0


DECISION_FUNCTIONS = [
    name
    for name, obj in vars(noise).items()
    if (inspect.isfunction(obj) or inspect.isclass(obj))
    and obj.__module__ == noise.__name__
    and name not in ("_rejection", "_check_range", "as_fraction", "_count", "_in_chunks")
]


@pytest.mark.parametrize("name", DECISION_FUNCTIONS)
def test_no_floating_point_in_sampling_code(name):
    assert "ExpAcceptance" in DECISION_FUNCTIONS
    """By construction: no float literal, float() call or transcendental function in the code
    that decides a draw (batch sizing in _rejection and error messages are the only floats)."""
    tree = ast.parse(inspect.getsource(getattr(noise, name)).lstrip())
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant):
            assert not isinstance(node.value, float), f"{name}: float literal {node.value}"
        if isinstance(node, ast.Call):
            func = ast.unparse(node.func)
            assert func not in (
                "float",
                "math.exp",
                "np.exp",
                "math.log",
                "np.log",
                "math.sqrt",
                "np.sqrt",
                "rng.random",
                "rng.uniform",
                "rng.normal",
            ), (name, func)


def test_tiny_variances_give_zero_noise():
    """At σ² ≤ 10⁻³ a non-zero draw has probability below 2·e^{-499}: never in 10⁶ draws."""
    for sigma2 in (Fraction(1, 10**9), Fraction(1, 10**5), Fraction(1, 1000)):
        draws = noise.discrete_gaussian(sigma2, 1_000_000, np.random.default_rng(3))
        assert not draws.any()
    # and at 0.05 the ±1 draws appear at their exact rate 2e^{-10}/Z ≈ 9.1e-5 (Poisson bound)
    draws = noise.discrete_gaussian(Fraction(1, 20), 1_000_000, np.random.default_rng(4))
    expected = 1_000_000 * 2 * np.exp(-10) / (1 + 2 * np.exp(-10))
    assert abs(np.count_nonzero(draws) - expected) < 5 * np.sqrt(expected)


def test_reproducible_per_seed_and_shape():
    a = noise.discrete_gaussian(4, (3, 5), np.random.default_rng(9))
    b = noise.discrete_gaussian(4, (3, 5), np.random.default_rng(9))
    assert a.shape == (3, 5) and np.array_equal(a, b)
    assert not np.array_equal(a, noise.discrete_gaussian(4, (3, 5), np.random.default_rng(10)))
    assert noise.discrete_laplace(1, 0, np.random.default_rng(1)).shape == (0,)


def test_a_topdown_run_builds_each_outcome_table_once():
    """TopDown draws at every scale of its strategy, level after level, and again in the next
    run: the cached outcome tables must hold all of them, or each is evicted before its next use
    and built again (the pl94 production strategy draws at 20 table sizes)."""
    from sdclab.censuses.us2010.geography import LEVELS
    from sdclab.protection.topdown_strategy import PRODUCTION

    scales = {PRODUCTION.sigma2(q, level) for level in LEVELS for q in PRODUCTION.measured(level)}
    noise._uniform_exp_table.cache_clear()
    rng = np.random.default_rng(0)
    for _ in range(2):  # two runs
        for sigma2 in sorted(scales):
            noise.discrete_gaussian(sigma2, 100, rng)
    built = noise._uniform_exp_table.cache_info()
    assert built.currsize >= 20 and built.misses == built.currsize


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda r: noise.discrete_gaussian(1e-10, 5, r), "outside the supported range"),
        (lambda r: noise.discrete_gaussian(2e8, 5, r), "outside the supported range"),
        (lambda r: noise.discrete_gaussian(-1, 5, r), "outside the supported range"),
        (lambda r: noise.discrete_gaussian(float("nan"), 5, r), "must be finite"),
        (lambda r: noise.discrete_laplace(0, 5, r), "outside the supported range"),
        (lambda r: noise.discrete_laplace(Fraction(2**63 + 1, 2**60), 5, r), "numerator"),
        (lambda r: noise.discrete_gaussian(1, -3, r), "non-negative"),
    ],
)
def test_unsupported_parameters_fail_clearly(call, message):
    with pytest.raises(ValueError, match=message):
        call(np.random.default_rng(0))


def test_wrong_parameter_type():
    with pytest.raises(TypeError, match="sigma2 must be"):
        noise.discrete_gaussian("1", 5, np.random.default_rng(0))
    with pytest.raises(TypeError):
        noise.discrete_laplace(True, 5, np.random.default_rng(0))
