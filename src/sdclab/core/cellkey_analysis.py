"""Risk analyses of the cell key method and of unbounded ε-DP noise (paper §§3.2–4.2).

The paper is F. Bach, "Differential privacy and noisy confidentiality concepts for European
population statistics"; docs/cellkey.md (*Risk analyses*) describes the analyses. Every function
here is a pure analysis of a noise distribution or of published numbers: nothing reads a release,
so the same code serves the p-table grids of the paper (Figs. 1, 2 and 5) and the attacks on a
release in :mod:`sdclab.protection.cellkey_risk`.
A noise pmf is a pair ``(v, p)``: ascending integer noise values and their probabilities, e.g. a
p-table symmetry row over v = −E..E.

(a) Disclosing the noise bound E. A published 3-tuple F + M = T gives
    S = F̃ + M̃ − T̃ = x_F + x_M − x_T, a direct sample of the noise, and Ê = ⌈max|S| / 3⌉ is
    right once one tuple has |S| ≥ 3E − 2. p1 is that per-tuple chance: under the paper's
    independence model (a convolution), for uniform noise (closed form), or exactly over all
    integer cell-key pairs, where ck_T = ck_F + ck_M mod K ties the three noises together.
(b) Extreme noise patterns once E is known: a feasible-set enumerator that says which tuples have
    their true counts pinned down.
(c) Independent redundant representations (IRRs) of a statistic and the success of averaging them.
(e) Tails of unbounded Laplace and two-tailed geometric noise, the distortions they cause in small
    counts, the paper's 2020 U.S. census budget split (ε_table = ε_global / 10) and the utility
    constraint of Eq. (16).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from scipy import special

from sdclab.core import accounting

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
Pmf = tuple[IntArray, FloatArray]
"""A noise pmf: ascending integer values v and their probabilities p."""
NoiseLookup = Callable[[IntArray, IntArray], IntArray]
"""noise(n, ckey): the integer noise the mechanism adds to true counts n with cell keys ckey."""

RISK_CONSTRAINT = 0.68
"""The paper's heuristic ceiling on a disclosure or averaging success probability."""
EPSILON_TABLE_SHARE = 0.1
"""ε_table / ε_global: the per-table ε the paper assumes for the 2020 U.S. census (§4.1, Eq. 14).

The paper splits ε_global evenly over six geographic levels, gives 67.5% of a level to the person
tables, and states the result as ε_table ∈ {0.025, 0.05, 0.1, 0.2, 0.4, 0.8} for
ε_global ∈ {0.25, 0.5, 1, 2, 4, 8}: one tenth, the rounding of 0.675/6 = 0.1125 that every
figure and threshold of its §4.2 is stated in. One table per level gets it; a release of many
tables per level splits it further (docs/geometric.md, *The paper's ε_table and ours*)."""

_CHUNK = 1 << 22
"""Elements per intermediate array in the enumerations: bounds memory to some 32 MB per array."""


# (a) Disclosing E with additive 3-tuples ----------------------------------------------------------


def _dense(pmf: Pmf) -> tuple[int, FloatArray]:
    """The pmf on the contiguous integer range from its smallest value, and that smallest value.

    Supports may have gaps (a blocked p-table row); convolving dense arrays handles them.
    """
    v = np.asarray(pmf[0], dtype=np.int64)
    p = np.asarray(pmf[1], dtype=np.float64)
    if v.ndim != 1 or v.shape != p.shape or v.size == 0:
        raise ValueError("a pmf is two 1-D arrays of equal, non-zero length")
    if np.any(np.diff(v) <= 0):
        raise ValueError("pmf values must be strictly ascending")
    if np.any(p < 0):
        raise ValueError("pmf probabilities must be non-negative")
    dense = np.zeros(int(v[-1] - v[0]) + 1)
    dense[v - v[0]] = p
    return int(v[0]), dense


def tuple_sum_pmf(f: Pmf, m: Pmf, t: Pmf) -> Pmf:
    """Pmf of S = x_F + x_M − x_T for independent noises: the convolution q_F * q_M * q̌_T.

    q̌_T(v) = q_T(−v) is the pmf of −x_T. The values returned are contiguous; some may have mass 0.
    """
    lo_f, q_f = _dense(f)
    lo_m, q_m = _dense(m)
    lo_t, q_t = _dense(t)
    hi_t = lo_t + q_t.size - 1
    probs = np.convolve(np.convolve(q_f, q_m), q_t[::-1])
    lo = lo_f + lo_m - hi_t
    return np.arange(lo, lo + probs.size, dtype=np.int64), probs


def _threshold(bound: int) -> int:
    """|S| ≥ 3E − 2 reveals E = bound. A p-table without noise at large counts has E = 0: every
    tuple then sums to S = 0 and Ê = 0 = E, so every tuple reveals it (threshold 0)."""
    if bound < 0:
        raise ValueError(f"the noise bound must be non-negative, got {bound}")
    return max(3 * bound - 2, 0)


def p1_independent(f: Pmf, m: Pmf, t: Pmf, bound: int) -> float:
    """Per-tuple chance Pr[|S| ≥ 3E − 2] of revealing E with independent noises (paper's model).

    Both tails count: the paper's constant 20 for uniform noise needs them.
    """
    s, probs = tuple_sum_pmf(f, m, t)
    return float(probs[np.abs(s) >= _threshold(bound)].sum())


def child_sum_pmf(noise: Pmf, children: int) -> Pmf:
    """Pmf of S = Σ x_child − x_parent for ``children`` + 1 independent noises of pmf ``noise``
    (a parent geounit's cell and its ``children`` children's): :func:`tuple_sum_pmf` for any c."""
    lo, q = _dense(noise)
    hi = lo + q.size - 1
    probs = q[::-1]
    for _ in range(children):
        probs = np.convolve(probs, q)
    start = children * lo - hi
    return np.arange(start, start + probs.size, dtype=np.int64), probs


def reveal_threshold(bound: int, children: int) -> int:
    """|S| ≥ (c+1)E − c reveals E from a tuple of c children and their parent: Ê = ⌈|S|/(c+1)⌉
    equals E exactly then (c = 2 is the paper's 3E − 2); 0 when E = 0."""
    if bound < 0:
        raise ValueError(f"the noise bound must be non-negative, got {bound}")
    return max((children + 1) * bound - children, 0)


def p1_children(noise: Pmf, children: int, bound: int) -> float:
    """Per-tuple chance of revealing E from c children and their parent, independent noises."""
    s, probs = child_sum_pmf(noise, children)
    return float(probs[np.abs(s) >= reveal_threshold(bound, children)].sum())


def estimate_bound_children(s: IntArray, children: IntArray) -> int:
    """The attacker's estimate Ê = max ⌈|S| / (c+1)⌉ over tuples of c children each."""
    s, c = np.asarray(s, dtype=np.int64), np.asarray(children, dtype=np.int64)
    if s.size == 0:
        raise ValueError("no tuple sums to estimate the bound from")
    return int((-(-np.abs(s) // (c + 1))).max())


def p1_uniform(bound: int) -> float:
    """p1 for noise uniform on {−E..E}: 20 / (2E + 1)³.

    There are C(d+2, 2) triples falling short of ±3E by d, so 1 + 3 + 6 = 10 per sign for d ≤ 2.
    This holds for every E ≥ 1: a shortfall of 2 never pushes a component beyond −E, and the two
    tails stay apart since 3E − 2 ≥ 1 (E = 1 gives 20/27: only S = 0 fails). E = 0 has p1 = 1
    (:func:`p1_independent`), not this form.
    """
    if bound < 1:
        raise ValueError(f"the closed form needs a noise bound of at least 1, got {bound}")
    return 20.0 / (2 * bound + 1) ** 3


def p1_exact(noise: NoiseLookup, n_f: int, n_m: int, key_space: int, bound: int) -> float:
    """Exact p1 for integer cell keys: the share of all K² pairs (ck_F, ck_M) with |S| ≥ 3E − 2.

    The total's key is ck_T = (ck_F + ck_M) mod K and its count n_F + n_M, so the three noises are
    dependent; with sorted p-table intervals the extreme patterns vanish (docs/cellkey.md).
    Pairs are enumerated in chunks of whole ck_F rows.
    """
    if key_space < 1:
        raise ValueError(f"the key space must hold at least one key, got {key_space}")
    if n_f < 0 or n_m < 0:
        raise ValueError("counts must be non-negative")
    threshold = _threshold(bound)
    rows = max(1, _CHUNK // key_space)
    hits = 0
    for start in range(0, key_space, rows):
        ck_f = np.repeat(np.arange(start, min(start + rows, key_space), dtype=np.int64), key_space)
        ck_m = np.tile(np.arange(key_space, dtype=np.int64), ck_f.size // key_space)
        ck_t = (ck_f + ck_m) % key_space
        s = (
            noise(np.full(ck_f.size, n_f, dtype=np.int64), ck_f)
            + noise(np.full(ck_f.size, n_m, dtype=np.int64), ck_m)
            - noise(np.full(ck_f.size, n_f + n_m, dtype=np.int64), ck_t)
        )
        hits += int(np.count_nonzero(np.abs(s) >= threshold))
    return hits / key_space**2


def tuples_needed(p1: float, alpha: float) -> int | float:
    """Independent 3-tuples needed to reveal E with confidence α (Eq. 11): ⌈ln(1−α) / ln(1−p1)⌉.

    ``math.inf`` when p1 = 0: no number of tuples reveals E.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"confidence level must lie in (0, 1), got {alpha}")
    if not 0 <= p1 <= 1:
        raise ValueError(f"p1 must be a probability, got {p1}")
    if p1 == 0:
        return math.inf
    if p1 == 1:
        return 1
    return max(1, math.ceil(math.log1p(-alpha) / math.log1p(-p1)))


def disclosure_risk(p1: float, m_avail: float) -> float:
    """Chance 1 − (1−p1)^m that at least one of m independent tuples reveals E.

    Computed as −expm1(m·log1p(−p1)), which stays accurate for p1 ≪ 1/m.
    """
    if not 0 <= p1 <= 1:
        raise ValueError(f"p1 must be a probability, got {p1}")
    if m_avail < 0:
        raise ValueError(f"the number of tuples must be non-negative, got {m_avail}")
    if m_avail == 0:
        return 0.0
    if p1 == 1:
        return 1.0
    return -math.expm1(m_avail * math.log1p(-p1))


def estimate_bound(s: IntArray) -> int:
    """The attacker's estimate Ê = ⌈max|S| / 3⌉ from the tuple sums S (Eq. 10)."""
    s = np.asarray(s, dtype=np.int64)
    if s.size == 0:
        raise ValueError("no tuple sums to estimate the bound from")
    return int(-(-int(np.abs(s).max()) // 3))


def p1_grid(
    pmf_for: Callable[[int, float], Pmf],
    bounds: Sequence[int],
    variances: Sequence[float],
    m_avail: float,
    alpha: float = 0.95,
) -> list[dict[str, Any]]:
    """p1, tuples needed and disclosure risk over a grid of (E, V), as in the paper's Fig. 1.

    One record per pair with V ≤ E(E+1)/3, the variance of the uniform noise that no bounded
    noise exceeds. F, M and T all get the noise ``pmf_for(E, V)``. Keys: ``bound``, ``variance``,
    ``p1``, ``tuples_needed`` (at ``alpha``), ``risk`` (with ``m_avail`` tuples) and
    ``below_constraint`` (risk < 0.68, the heuristic constraint).
    """
    records = []
    for bound in bounds:
        for variance in variances:
            if variance > bound * (bound + 1) / 3 + 1e-12:
                continue
            pmf = pmf_for(bound, variance)
            p1 = p1_independent(pmf, pmf, pmf, bound)
            risk = disclosure_risk(p1, m_avail)
            records.append(
                {
                    "bound": bound,
                    "variance": variance,
                    "p1": p1,
                    "tuples_needed": tuples_needed(p1, alpha),
                    "risk": risk,
                    "below_constraint": risk < RISK_CONSTRAINT,
                }
            )
    return records


# (b) Extreme noise patterns when E is known -------------------------------------------------------


def pinned_tuples(published: IntArray, bound: int, js: int = 0) -> dict[str, npt.NDArray[Any]]:
    """Feasible true values of published constraint tuples when the noise bound E is known.

    ``published`` has shape (m, c+1): c components then their total. A noise assignment has
    x_1..x_c ∈ [−E, E] and x_T = Σx_j − S ∈ [−E, E], where S = Σñ_j − ñ_T; true values
    n = ñ − x then add up by construction. It is feasible when every true value is ≥ 1, or is 0
    with a published 0 (a true 0 is always published as 0; a published 0 may also hide a count
    perturbed down to it). Published values in 1..js cannot occur (a true n > 0 is never
    published there), so they are refused. Distinct assignments give distinct true vectors.

    The feasible assignments are counted, not enumerated: each x_j lies in an interval, so they
    are the points of a box whose sum lies in a window (the total's interval), counted from the
    product of the box's polynomials in O(c²E) per tuple; when exactly one is feasible it is the
    box's corner of that sum.

    Returns per tuple: ``s`` (S), ``feasible`` (number of feasible true vectors; 0 means the data
    contradict E), ``pinned`` (exactly one) and ``true_values`` (the pinned vector, −1 elsewhere).
    """
    published = np.asarray(published, dtype=np.int64)
    if published.ndim != 2 or published.shape[1] < 2:
        raise ValueError("published tuples must have shape (m, c+1) with at least one component")
    if bound < 0 or js < 0:
        raise ValueError("the noise bound and the blocking threshold must be non-negative")
    if np.any(published < 0):
        raise ValueError("published counts of a p-table are never negative")
    if np.any((published >= 1) & (published <= js)):
        raise ValueError(f"published counts never lie in 1..{js} (js = {js})")
    c = published.shape[1] - 1
    rows = max(1, _CHUNK // (2 * c * bound + 1))
    parts = [_pinned(published[i : i + rows], bound) for i in range(0, len(published), rows)]
    if not parts:
        parts = [_pinned(published, bound)]
    s, feasible, true_values = (np.concatenate(p) for p in zip(*parts, strict=True))
    return {"s": s, "feasible": feasible, "pinned": feasible == 1, "true_values": true_values}


def _pinned(published: IntArray, bound: int) -> tuple[IntArray, IntArray, IntArray]:
    """(S, feasible vectors, the pinned vector or −1) of a chunk of :func:`pinned_tuples`."""
    c = published.shape[1] - 1
    s = published[:, :c].sum(axis=1) - published[:, c]
    # each noise lies in [−E, top]: a true count is ≥ 1, or 0 where 0 was published
    top = np.where(published == 0, 0, np.minimum(bound, published - 1))
    widths = top[:, :c] + bound + 1  # y_j = x_j + E in 0 … widths − 1
    # x_T = Σx_j − S ∈ [−E, top_T]: Σy_j within [low, high]
    low = np.maximum(s - bound + c * bound, 0)
    high = np.minimum(top[:, c] + s + c * bound, (widths - 1).sum(axis=1))
    ways = _sum_counts(widths)  # (m, most + 1): vectors y of each sum
    running = np.concatenate([np.zeros((len(s), 1), np.int64), np.cumsum(ways, axis=1)], axis=1)
    rows = np.arange(len(s))
    above = running[rows, np.clip(high + 1, 0, ways.shape[1])]
    feasible = np.where(high >= low, above - running[rows, np.clip(low, 0, ways.shape[1])], 0)
    # one vector: its sum v is the only one in the window with a way, and is reached one way
    sums = np.arange(ways.shape[1])[None, :]
    reached = (ways > 0) & (sums >= low[:, None]) & (sums <= high[:, None])
    v = np.argmax(reached, axis=1)
    spare = (widths - 1).sum(axis=1, keepdims=True) - (widths - 1)  # the others' capacity
    y = np.clip(v[:, None] - spare, 0, widths - 1)
    x = np.concatenate([y - bound, (y - bound).sum(axis=1, keepdims=True) - s[:, None]], axis=1)
    true_values = np.where((feasible == 1)[:, None], published - x, -1)
    return s, feasible, true_values


def _sum_counts(widths: IntArray) -> IntArray:
    """For each row of ``widths`` (m, c): how many integer vectors y with 0 ≤ y_j < width_j
    have each sum 0 … Σ(width − 1) (the product of the c box polynomials, by prefix sums)."""
    m, c = widths.shape
    most = int((widths - 1).sum(axis=1).max(initial=0))
    ways = np.zeros((m, most + 1), dtype=np.int64)
    ways[:, 0] = 1
    rows = np.arange(m)[:, None]
    for j in range(c):
        running = np.concatenate([np.zeros((m, 1), np.int64), np.cumsum(ways, axis=1)], axis=1)
        sums = np.arange(most + 1)[None, :]
        below = np.maximum(sums + 1 - widths[:, j : j + 1], 0)
        ways = running[rows, sums + 1] - running[rows, below]
    return ways


def p_fully_pinned(q_bound: float, c: int) -> float:
    """Chance 2·q(E)^{c+1} that all c+1 noises of a tuple sit at +E or all at −E (|S| = (c+1)E).

    Assumes independent noises from one symmetric row with q(E) = q(−E) = ``q_bound``.
    """
    if not 0 <= q_bound <= 1:
        raise ValueError(f"q(E) must be a probability, got {q_bound}")
    if c < 1:
        raise ValueError(f"a constraint has at least one component, got {c}")
    return 2.0 * q_bound ** (c + 1)


# (c) Independent redundant representations and averaging ------------------------------------------


def _cells(variables: frozenset[str], categories: Mapping[str, int]) -> int:
    """Number of inner cells summed over ``variables`` (totals excluded)."""
    try:
        return math.prod(categories[w] for w in variables)
    except KeyError as err:
        raise ValueError(f"no category count for variable {err.args[0]!r}") from None


def irr_counts(
    tables: Sequence[frozenset[str]], categories: Mapping[str, int], statistic: frozenset[str]
) -> dict[str, int]:
    """Representations t and noise terms k of a statistic over the output's tables (paper §3.3).

    The counting rules below are our formulation of the paper's description; they reproduce the
    paper's example (t = 4, k = 9 for the total of SEX × AGE).

    A representation sums a cross-tab U ⊇ S over U∖S, with k_U = Π_{w∈U∖S} c_w noise terms.
    With SPSN the candidates are 𝒰 = ∪_m P(A_m) (a margin shared by tables is one cell key):
    t = |{U ∈ 𝒰 : U ⊇ S}|, k = Σ_U k_U. Without SPSN each table gives fresh noise to each of its
    margins: t = Σ_{A_m ⊇ S} 2^{|A_m∖S|}, k = Σ_{A_m ⊇ S} Π_{w∈A_m∖S}(1 + c_w). A hierarchical
    breakdown must be passed as its own variable name; representations through a finer breakdown
    of the same variable are then not counted.
    """
    containing = [frozenset(a) for a in tables if statistic <= a]
    spsn: set[frozenset[str]] = set()
    t_independent = k_independent = 0
    for table in containing:
        rest = sorted(table - statistic)
        for size in range(len(rest) + 1):
            spsn.update(frozenset(u) for u in itertools.combinations(rest, size))
        t_independent += 2 ** len(rest)
        k_independent += math.prod(1 + _cells(frozenset({w}), categories) for w in rest)
    return {
        "t_spsn": len(spsn),
        "k_spsn": sum(_cells(u, categories) for u in spsn),
        "t_independent": t_independent,
        "k_independent": k_independent,
    }


def _check_averaging(k: float, t: float, variance: float, xi: float) -> None:
    if k <= 0 or t <= 0:
        raise ValueError("k and t must be positive")
    if variance < 0 or xi <= 0:
        raise ValueError("the variance must be non-negative and ξ positive")


def averaging_success(k: float, t: float, variance: float, xi: float = 0.5) -> float:
    """Gaussian chance erf(ξ / √(2kV/t²)) that the mean of t IRRs lies within ξ of the truth.

    The paper's Eq. B.3. The mean's noise sums k terms of variance V divided by t; ξ = 0.5 is exact
    integer recovery.
    """
    _check_averaging(k, t, variance, xi)
    if variance == 0:
        return 1.0
    return float(special.erf(xi / math.sqrt(2 * k * variance / t**2)))


def averaging_success_chebyshev(k: float, t: float, variance: float, xi: float = 0.5) -> float:
    """Chebyshev lower bound 1 − (k/t²)·V/ξ² on the averaging success (Eq. 12), clipped at 0."""
    _check_averaging(k, t, variance, xi)
    return max(0.0, 1.0 - (k / t**2) * variance / xi**2)


def variance_for_success(
    k: float, t: float, target: float = RISK_CONSTRAINT, xi: float = 0.5
) -> float:
    """The V at which the Gaussian averaging success equals ``target``: ξ²t² / (2k·erfinv(target)²).

    Larger variances keep the success below the target. The paper's shortcut ξ²/(k/t²) is this
    value times 2·erfinv(0.68)² ≈ 0.989.
    """
    _check_averaging(k, t, 0.0, xi)
    if not 0 < target < 1:
        raise ValueError(f"the target success must lie in (0, 1), got {target}")
    return xi**2 * t**2 / (2 * k * float(special.erfinv(target)) ** 2)


# (e) Tails of unbounded ε-DP noise ----------------------------------------------------------------


def _check_epsilon(epsilon: float) -> None:
    if not epsilon > 0:
        raise ValueError(f"ε must be positive, got {epsilon}")


def laplace_tail(epsilon: float, bound: float) -> float:
    """Pr(|x| > E) = e^{−εE} for Laplace noise of scale 1/ε (Eq. 15)."""
    _check_epsilon(epsilon)
    if bound < 0:
        raise ValueError(f"the bound must be non-negative, got {bound}")
    return math.exp(-epsilon * bound)


def geometric_tail(epsilon: float, bound: int) -> float:
    """Pr(|x| > E) = 2r^{E+1} / (1 + r), r = e^{−ε}, for the two-tailed geometric noise (Eq. 5)."""
    _check_epsilon(epsilon)
    if bound < 0:
        raise ValueError(f"the bound must be non-negative, got {bound}")
    return accounting.laplace_tail(1 / epsilon, bound)


def geometric_pmf(epsilon: float, k: npt.ArrayLike) -> FloatArray:
    """Pr(x = k) = ((1 − r)/(1 + r))·r^{|k|} = tanh(ε/2)·e^{−ε|k|}, elementwise over ``k``."""
    _check_epsilon(epsilon)
    return math.tanh(epsilon / 2) * np.exp(-epsilon * np.abs(np.asarray(k, dtype=np.float64)))


def expected_distorted(
    true_counts: IntArray,
    epsilon: float,
    relative_error: float,
    kind: Literal["geometric", "laplace"] = "geometric",
) -> float:
    """Expected number of counts whose noise exceeds the relative error: Σ_i Pr(|x| > RE·n_i).

    For the geometric noise |x| > RE·n ⇔ |x| ≥ ⌊RE·n⌋ + 1; products within 1e-9 of an integer are
    taken as that integer, so float error in RE·n cannot shift the threshold. A true 0 counts as
    distorted by any non-zero noise. This is the exact expectation the paper's binned estimate
    (right bin edge) bounds from below.
    """
    _check_epsilon(epsilon)
    if relative_error < 0:
        raise ValueError(f"the relative error must be non-negative, got {relative_error}")
    n = np.asarray(true_counts, dtype=np.float64)
    if np.any(n < 0):
        raise ValueError("true counts must be non-negative")
    limit = relative_error * n
    if kind == "laplace":
        return float(np.exp(-epsilon * limit).sum())
    if kind == "geometric":
        at_least = np.floor(np.round(limit, 9)) + 1  # |x| ≥ at_least ⇔ |x| > at_least − 1
        return float((2 * np.exp(-epsilon * at_least) / (1 + math.exp(-epsilon))).sum())
    raise ValueError(f"unknown noise kind {kind!r}: use 'geometric' or 'laplace'")


def broadband_probability(
    f: float | FloatArray,
    m: float | FloatArray,
    t: float | FloatArray,
    epsilon: float,
    rho: float,
) -> float | FloatArray:
    """Chance that F, M and T are all distorted by at least ρ in the same direction (§4.2).

    For Laplace noise of scale 1/ε, Pr(x ≥ ρn) = ½e^{−ερn}, and the same below; with independent
    noises each direction has Π_{c∈{F,M,T}} ½e^{−ερn_c}, and the two directions are disjoint, so
    the result is their sum 2·⅛·e^{−ερ(F+M+T)}. Broadcasts over arrays of counts.
    """
    _check_epsilon(epsilon)
    if rho < 0:
        raise ValueError(f"ρ must be non-negative, got {rho}")
    counts = np.asarray(f, dtype=np.float64) + np.asarray(m) + np.asarray(t)
    result = 2 * 0.125 * np.exp(-epsilon * rho * counts)
    return float(result) if result.ndim == 0 else result


def epsilon_table(epsilon_global: float) -> float:
    """Per-table ε of the paper's 2020 U.S. census setup: ε_global / 10 (Eq. 14)."""
    return EPSILON_TABLE_SHARE * epsilon_global


def noise_sd(epsilon_table: float) -> float:
    """Standard deviation √2/ε of Laplace noise with scale 1/ε (√V_table in the paper)."""
    _check_epsilon(epsilon_table)
    return math.sqrt(2) / epsilon_table


def utility_epsilon(t: float, alpha: float, bound: float) -> float:
    """Smallest ε keeping all t Laplace noises within ±E with probability α (Eq. 16; also Eq. 8).

    ε = −ln(1 − α^{1/t}) / E, computed as −ln(−expm1(ln α / t)) / E; the paper's shortcut
    ln(t/(1−α)) / E replaces −ln α by 1 − α and overstates ε when α is far from 1.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"confidence level must lie in (0, 1), got {alpha}")
    if t < 1 or bound <= 0:
        raise ValueError("t must be at least 1 and the bound positive")
    return -math.log(-math.expm1(math.log(alpha) / t)) / bound


def sample_geometric(
    epsilon: float, size: int | tuple[int, ...], rng: np.random.Generator
) -> IntArray:
    """Two-tailed geometric noise: the difference of two iid geometric failure counts.

    Each count has success probability 1 − r = −expm1(−ε); numpy's ``geometric`` counts trials,
    and the extra 1 of each cancels in the difference. For analysis only, not for a DP release.
    """
    _check_epsilon(epsilon)
    p = -math.expm1(-epsilon)
    return (rng.geometric(p, size) - rng.geometric(p, size)).astype(np.int64)
