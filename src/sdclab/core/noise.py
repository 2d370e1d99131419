"""Exact discrete Gaussian and discrete Laplace samplers (Canonne, Kamath & Steinke 2020).

Every accept/reject decision compares uniformly random integers with exact integer or rational
thresholds; no floating-point number takes part in sampling, so the output distribution is exactly
the one the privacy accounting assumes. Parameters may be ints, floats (taken at their exact binary
value) or :class:`fractions.Fraction`.

The algorithms are those of CKS (Algorithms 1–3), run on whole arrays of candidates at once:

* ``BernExp(γ)`` for γ ≤ 1 draws A_k ~ Bernoulli(γ/k) for k = 1, 2, … until the first failure and
  returns 1 iff that k is odd; for γ > 1 it needs ⌊γ⌋ successes of BernExp(1) first.
* ``DLap(t/s)``: U ~ Uniform{0..t−1} accepted with BernExp(U/t), V = number of BernExp(1)
  successes, X = U + tV, Y = ⌊X/s⌋, a random sign, rejecting (−, 0).
* ``DGauss(σ²)``: Y ~ DLap(t) with t = ⌊σ⌋ + 1, accepted with BernExp((|Y| − σ²/t)²/(2σ²)).

Each loop runs over rejection rounds or over k, never over draws, and its active set shrinks
geometrically. Bernoulli(n/m) with m < 2⁶³ is ``integers(0, m) < n``. The Gaussian acceptance has
one exact rational γ per distinct |Y| (computed once per value with Python integers); its Bernoulli
draws compare 64-bit uniforms with the exact threshold ⌊p·2⁶⁴⌋ and settle the rare tie
(probability 2⁻⁶⁴) with a further exact draw.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache
from numbers import Rational

import numpy as np
import numpy.typing as npt

from sdclab.core.arrays import BoolArray, IntArray

Scalar = int | float | Fraction | Decimal

SIGMA2_RANGE = (Fraction(1, 10**9), Fraction(10**8))
"""Variances the discrete Gaussian sampler supports (the tests cover both ends). Tiny variances
arise when a run is given a huge budget to check that TopDown then returns the truth."""
SCALE_RANGE = (Fraction(1, 100), Fraction(10**8))
"""Scales the discrete Laplace sampler supports."""
INT64_LIMIT = 2**63
TWO64 = 2**64


def as_fraction(value: Scalar, name: str) -> Fraction:
    """The exact rational value of ``value`` (a float is taken at its exact binary value)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Rational, Decimal)):
        raise TypeError(
            f"{name} must be an int, float, Fraction or Decimal, not {type(value).__name__}"
        )
    finite = value.is_finite() if isinstance(value, Decimal) else math.isfinite(value)
    if not finite:
        raise ValueError(f"{name} must be finite, got {value}")
    return Fraction(value)


def _check_range(value: Fraction, bounds: tuple[Fraction, Fraction], name: str) -> None:
    low, high = bounds
    if not low <= value <= high:
        raise ValueError(
            f"{name} = {float(value):g} is outside the supported range "
            f"[{float(low):g}, {float(high):g}]"
        )


def _count(size: int | tuple[int, ...]) -> tuple[int, tuple[int, ...]]:
    shape = (size,) if isinstance(size, (int, np.integer)) else tuple(size)
    if any(int(d) < 0 for d in shape):
        raise ValueError(f"size must be non-negative, got {size}")
    return int(np.prod(shape, dtype=np.int64)), shape


# ---------------------------------------------------------------------------------------------
# Exact Bernoulli primitives
# ---------------------------------------------------------------------------------------------


def _uniform_below(n: int, rng: np.random.Generator) -> int:
    """A uniform integer in [0, n) for any Python int n ≥ 1 (rejection on whole 64-bit words)."""
    bits = n.bit_length()
    words = (bits + 63) // 64
    while True:
        raw = rng.integers(0, TWO64, size=words, dtype=np.uint64)
        value = 0
        for word in raw.tolist():
            value = (value << 64) | word
        value >>= words * 64 - bits
        if value < n:
            return value


def _bernoulli_ratio(n: IntArray, m: int, rng: np.random.Generator) -> BoolArray:
    """Bernoulli(n_i / m) for integer arrays 0 ≤ n_i ≤ m, exact for any m ≥ 1."""
    if m < INT64_LIMIT:
        return rng.integers(0, m, size=len(n)) < n
    return np.array([_uniform_below(m, rng) < int(v) for v in n.tolist()], dtype=bool)


JOINT_TERMS_MAX = 3
"""Leading Bernoulli(γ/k) draws of a k-loop taken jointly from one uniform integer (arithmetic)."""
TABLE_SIZE_MAX = 2**21
"""Largest outcome table (one byte per entry) used instead of arithmetic thresholds."""
UNDECIDED = 2
"""Outcome-table entry: every jointly drawn step succeeded; the k-loop goes on draw by draw."""


@lru_cache(maxsize=256)
def _joint_plan(m: int, k_max: int) -> tuple[int, int, tuple[int, ...]]:
    """(K, L, c): draw A_1..A_K of the k-loop for γ = n/m from one uniform W in [0, L).

    P(A_1 = … = A_k = 1) = n^k / (m^k k!) = n^k · c_k / L with L = m^K K! and
    c_k = m^(K−k) K!/k!, so "the first k draws succeed" is exactly the event W < n^k·c_k. These
    events are nested, hence the number of thresholds above W is the number of leading successes.
    K is the largest value ≤ k_max with L < 2⁶³, so every product fits in int64.
    """
    k = 1
    while k < k_max and m ** (k + 1) * math.factorial(k + 1) < INT64_LIMIT:
        k += 1
    total = m**k * math.factorial(k)
    factors = tuple(m ** (k - j) * math.factorial(k) // math.factorial(j) for j in range(1, k + 1))
    return k, total, factors


def _leading_successes(n: IntArray, w: IntArray, factors: tuple[int, ...]) -> npt.NDArray[np.int8]:
    """Number of thresholds n^k·c_k above w: how many k-loop steps succeeded, per element."""
    power = n
    successes = (w < n * factors[0]).view(np.int8)
    for factor in factors[1:]:
        power = power * n
        successes += (w < power * factor).view(np.int8)
    return successes


def _outcome(successes: npt.NDArray[np.int8], k_joint: int) -> npt.NDArray[np.uint8]:
    """0/1 = BernExp outcome (1 iff the first failure is at an odd k), UNDECIDED if none failed."""
    outcome = ((successes & 1) ^ 1).view(np.uint8)
    outcome[successes == k_joint] = UNDECIDED
    return outcome


def _k_loop_tail(n: IntArray, m: int, first_k: int, rng: np.random.Generator) -> BoolArray:
    """Finish the k-loop of BernExp(n_i/m) from k = first_k on (all earlier draws succeeded)."""
    result = np.zeros(len(n), dtype=bool)
    active = np.arange(len(n))
    k = first_k
    while active.size:
        success = _bernoulli_ratio(n[active], m * k, rng)
        result[active[~success]] = k % 2 == 1
        active = active[success]
        k += 1
    return result


def _settle(
    outcome: npt.NDArray[np.uint8],
    n: IntArray | None,
    m: int,
    k_joint: int,
    rng: np.random.Generator,
) -> BoolArray:
    """Boolean results, running the k-loop on for the UNDECIDED entries (n None means n = 1)."""
    result = outcome == 1
    rest = np.flatnonzero(outcome == UNDECIDED)
    if rest.size:
        n_rest = np.ones(rest.size, dtype=np.int64) if n is None else n[rest]
        result[rest] = _k_loop_tail(n_rest, m, k_joint + 1, rng)
    return result


def _bern_exp_ratio(n: IntArray, m: int, rng: np.random.Generator) -> BoolArray:
    """Bernoulli(exp(−n_i/m)) for integers 0 ≤ n_i ≤ m (γ ≤ 1), CKS Algorithm 1.

    The k-loop draws A_k ~ Bernoulli(γ/k) until the first failure and returns 1 iff that k is
    odd. Its first K draws come jointly from one uniform integer (:func:`_joint_plan`).
    """
    k_joint, total, factors = _joint_plan(m, JOINT_TERMS_MAX)
    w = rng.integers(0, total, size=len(n))
    return _settle(_outcome(_leading_successes(n, w, factors), k_joint), n, m, k_joint, rng)


@lru_cache(maxsize=1)
def _exp_one_table() -> tuple[int, npt.NDArray[np.uint8]]:
    """(K, outcomes for every W in [0, K!)) of BernExp(1) with K = 8: one draw and one lookup."""
    k_joint, total, factors = _joint_plan(1, 8)
    w = np.arange(total, dtype=np.int64)
    return k_joint, _outcome(_leading_successes(np.ones(total, np.int64), w, factors), k_joint)


def _bern_exp_one(count: int, rng: np.random.Generator) -> BoolArray:
    """``count`` independent draws of Bernoulli(exp(−1)) (BernExp with γ = 1)."""
    k_joint, table = _exp_one_table()
    outcome = table[rng.integers(0, len(table), size=count)]
    return _settle(outcome, None, 1, k_joint, rng)


OUTCOME_TABLES_CACHED = 24
"""Outcome tables kept (each at most TABLE_SIZE_MAX bytes, so at most 48 MiB). A TopDown run
draws at every scale of its strategy level after level (the pl94 production strategy needs 20
tables, dhc's 7): a cache smaller than that evicts each table before its next use."""


@lru_cache(maxsize=OUTCOME_TABLES_CACHED)
def _uniform_exp_table(t: int) -> tuple[int, int, npt.NDArray[np.uint8]] | None:
    """Outcome table of (U ~ Uniform{0..t−1}, BernExp(U/t)) drawn as one integer Z = U·L + W.

    None when no table with at least two joint steps fits in TABLE_SIZE_MAX entries.
    """
    best = None
    for k_max in range(2, 9):
        k_joint, total, factors = _joint_plan(t, k_max)
        if k_joint < k_max or t * total > TABLE_SIZE_MAX:
            break
        best = (k_joint, total, factors)
    if best is None:
        return None
    k_joint, total, factors = best
    z = np.arange(t * total, dtype=np.int64)
    outcome = _outcome(_leading_successes(z // total, z % total, factors), k_joint)
    return k_joint, total, outcome


def _truncated_geometric(count: int, t: int, rng: np.random.Generator) -> IntArray:
    """``count`` draws of U on {0..t−1}, P(U = u) ∝ exp(−u/t): Uniform U kept w.p. BernExp(U/t)."""
    table = _uniform_exp_table(t)

    def propose(size: int) -> IntArray:
        if table is None:
            u = rng.integers(0, t, size=size)
            return u[_bern_exp_ratio(u, t, rng)]
        k_joint, total, outcome = table
        z = rng.integers(0, len(outcome), size=size)
        u = z // total
        return u[_settle(outcome[z], u, t, k_joint, rng)]

    return _rejection(count, propose, percent_kept=60)


def _rejection(count: int, propose: Callable[[int], IntArray], percent_kept: int) -> IntArray:
    """The first ``count`` accepted candidates; ``propose(n)`` returns those accepted among n.

    Batch sizes follow the observed acceptance rate so that one or two rounds usually suffice;
    the rate only sizes batches and never decides acceptance.
    """
    kept: list[IntArray] = []
    have, rate = 0, percent_kept / 100
    while have < count:
        size = int((count - have) / rate * 1.05) + 32
        accepted = propose(size)
        rate = max(accepted.size / size, 0.01)
        kept.append(accepted)
        have += accepted.size
    return np.concatenate(kept)[:count] if kept else np.zeros(0, dtype=np.int64)


class ExpAcceptance:
    """Bernoulli(exp(−γ(v))) for integer keys v ≥ 0 with γ(v) = numerator(v) / denominator.

    CKS Algorithm 1 in full: ⌊γ⌋ successes of BernExp(1) first (survivors shrink by a factor e
    each round), then the k-loop on the fractional part r/D with Bernoulli(r / (D·k)). Each
    Bernoulli compares a 64-bit uniform u with the exact threshold T = ⌊r·2⁶⁴ / (D·k)⌋: 1 if u < T,
    0 if u > T; u = T (probability 2⁻⁶⁴) is settled by an exact draw of the fractional part.

    Thresholds are computed with Python integers once per key and k and kept in arrays indexed by
    the key, so a long run of draws reuses them: the per-draw work is numpy only.
    """

    def __init__(self, numerator: Callable[[int], int], denominator: int) -> None:
        self.numerator = numerator
        self.denominator = denominator
        self.whole = np.zeros(0, dtype=np.int64)
        self.remainders: list[int] = []
        self.thresholds: dict[int, npt.NDArray[np.uint64]] = {}
        self._growing = threading.Lock()  # one instance may serve several threads (a Dask worker)

    def _extend(self, top: int) -> None:
        """Know every key up to ``top``."""
        with self._growing:
            known = len(self.remainders)
            if top < known:
                return
            split = [divmod(self.numerator(v), self.denominator) for v in range(known, top + 1)]
            self.whole = np.concatenate([self.whole, np.array([w for w, _ in split], np.int64)])
            self.remainders += [r for _, r in split]

    def _threshold(self, k: int) -> npt.NDArray[np.uint64]:
        """⌊r_v · 2⁶⁴ / (D·k)⌋ for every known key v."""
        have = self.thresholds.get(k, np.zeros(0, dtype=np.uint64))
        if len(have) < len(self.remainders):
            with self._growing:
                have = self.thresholds.get(k, np.zeros(0, dtype=np.uint64))
                m = self.denominator * k
                more = [(r << 64) // m for r in self.remainders[len(have) :]]
                have = np.concatenate([have, np.array(more, dtype=np.uint64)])
                self.thresholds[k] = have
        return have

    def sample(self, keys: IntArray, rng: np.random.Generator) -> BoolArray:
        """One Bernoulli(exp(−γ(key))) per key."""
        self._extend(int(keys.max(initial=-1)))
        needed = self.whole[keys]
        alive = np.ones(len(keys), dtype=bool)
        round_ = 0
        while True:
            active = np.flatnonzero(alive & (needed > round_))
            if not active.size:
                break
            alive[active[~_bern_exp_one(active.size, rng)]] = False
            round_ += 1
        result = np.zeros(len(keys), dtype=bool)
        active = np.flatnonzero(alive)
        k = 1
        while active.size:
            success = self._bernoulli(keys[active], k, rng)
            result[active[~success]] = k % 2 == 1
            active = active[success]
            k += 1
        return result

    def _bernoulli(self, keys: IntArray, k: int, rng: np.random.Generator) -> BoolArray:
        """Bernoulli(r_key / (D·k)) by exact 64-bit thresholds."""
        threshold = self._threshold(k)[keys]
        u = rng.integers(0, TWO64, size=len(keys), dtype=np.uint64)
        result = u < threshold
        m = self.denominator * k
        for i in np.flatnonzero(u == threshold).tolist():
            result[i] = _uniform_below(m, rng) < (self.remainders[int(keys[i])] << 64) % m
        return result


# ---------------------------------------------------------------------------------------------
# Discrete Laplace and discrete Gaussian
# ---------------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _run_length_table() -> tuple[int, npt.NDArray[np.uint8]]:
    """Two BernExp(1) outcomes from one integer Z in [0, B²), B = 5!, read off one table entry.

    Entry = leading successes (0, 1 or 2) + 4 × (0 if a failure ended the run, 1 if both
    succeeded and the run goes on). Entries whose run meets an UNDECIDED digit are 255; those
    draws are settled one digit at a time.
    """
    k_joint, base, factors = _joint_plan(1, 5)
    digit = _outcome(_leading_successes(np.ones(base, np.int64), np.arange(base), factors), k_joint)
    first, second = digit[np.arange(base * base) % base], digit[np.arange(base * base) // base]
    table = np.where(first == 0, 0, np.where(second == 0, 1, 2 + 4))
    undecided = (first == UNDECIDED) | ((first == 1) & (second == UNDECIDED))
    return base, np.where(undecided, 255, table).astype(np.uint8)


def _exp_one_run_lengths(count: int, rng: np.random.Generator) -> IntArray:
    """``count`` draws of V = number of BernExp(1) successes before the first failure.

    P(V ≥ v) = e^{−v}: V is the geometric part of CKS's discrete Laplace. Two BernExp(1) steps
    are read from each table lookup; runs still going after two go round again.
    """
    base, table = _run_length_table()
    z = rng.integers(0, len(table), size=count)
    entry = table[z]
    slow = np.flatnonzero(entry == 255)
    if slow.size:
        entry[slow] = _two_steps_slowly(z[slow], base, rng)
    v = (entry & 3).astype(np.int64)
    going = np.flatnonzero(entry >= 4)  # both steps succeeded: the run goes on (probability e⁻²)
    if going.size:
        v[going] += _exp_one_run_lengths(going.size, rng)
    return v


def _two_steps_slowly(z: IntArray, base: int, rng: np.random.Generator) -> npt.NDArray[np.uint8]:
    """Table entries for draws whose two BernExp(1) digits include an UNDECIDED one."""
    k_joint, _, factors = _joint_plan(1, 5)
    ones = np.ones(len(z), dtype=np.int64)
    steps = []
    for w in (z % base, z // base):
        outcome = _outcome(_leading_successes(ones, w, factors), k_joint)
        steps.append(_settle(outcome, None, 1, k_joint, rng))
    first, second = steps
    return np.where(~first, 0, np.where(~second, 1, 6)).astype(np.uint8)


def _dlap_candidates(count: int, t: int, s: int, rng: np.random.Generator) -> IntArray:
    """``count`` draws of CKS Algorithm 2 for Lap_Z(t/s), rejected (−, 0) pairs removed."""
    u = _truncated_geometric(count, t, rng)
    v = _exp_one_run_lengths(count, rng)
    if int(v.max(initial=0)) >= (INT64_LIMIT - t) // t:
        raise OverflowError("a discrete Laplace draw exceeds the int64 range")
    y = u + t * v
    if s != 1:
        y //= s
    negative = rng.integers(0, 2, size=count, dtype=np.int8) == 1
    keep = ~(negative & (y == 0))
    return np.where(negative, -y, y)[keep]


def _dlap(count: int, t: int, s: int, rng: np.random.Generator) -> IntArray:
    """Exactly ``count`` draws of Lap_Z(t/s)."""
    return _rejection(count, lambda size: _dlap_candidates(size, t, s, rng), percent_kept=75)


def bernoulli(p: Scalar, size: int, rng: np.random.Generator) -> BoolArray:
    """``size`` exact Bernoulli(p) draws for a rational 0 ≤ p ≤ 1 (a float at its binary value)."""
    value = as_fraction(p, "p")
    if not 0 <= value <= 1:
        raise ValueError(f"p = {value} is not a probability")
    count, _ = _count(size)
    if value.denominator < INT64_LIMIT:
        return rng.integers(0, value.denominator, size=count) < value.numerator
    return np.array(
        [_uniform_below(value.denominator, rng) < value.numerator for _ in range(count)], dtype=bool
    )


CHUNK = 2**15
"""Draws are made in chunks of this size so that the working arrays stay in the CPU cache."""


def _in_chunks(count: int, draw: Callable[[int], IntArray]) -> IntArray:
    """``draw`` called on consecutive chunks of at most CHUNK draws, concatenated."""
    out = np.empty(count, dtype=np.int64)
    for start in range(0, count, CHUNK):
        stop = min(start + CHUNK, count)
        out[start:stop] = draw(stop - start)
    return out


SCALE_NUMERATOR_LIMIT = 2**62
"""The discrete Laplace sampler's scales are t/s with t below this (its integer arithmetic)."""


def laplace_scale(scale: Scalar) -> tuple[int, int]:
    """A discrete Laplace ``scale`` as (t, s) with scale = t/s, checked against what the exact
    samplers support."""
    value = as_fraction(scale, "scale")
    _check_range(value, SCALE_RANGE, "scale")
    if value.numerator >= SCALE_NUMERATOR_LIMIT:
        raise ValueError(f"scale = {value}: numerator too large (at most 2**62); simplify it")
    return value.numerator, value.denominator


def discrete_laplace(
    scale: Scalar, size: int | tuple[int, ...], rng: np.random.Generator
) -> IntArray:
    """Draws from the discrete Laplace (two-tailed geometric): P(y) ∝ exp(−|y| / scale).

    ``scale`` is taken exactly as a rational t/s; supported range :data:`SCALE_RANGE`.
    """
    t, s = laplace_scale(scale)
    count, shape = _count(size)
    return _in_chunks(count, lambda n: _dlap(n, t, s, rng)).reshape(shape)


@lru_cache(maxsize=64)
def _gaussian_acceptance(a: int, b: int) -> tuple[int, ExpAcceptance]:
    """(t, the acceptance test) of the discrete Gaussian with σ² = a/b, kept across calls so that
    its exact thresholds are computed once per σ² rather than once per call (they hold no state
    that depends on the draws)."""
    t = math.isqrt(a * b) // b + 1
    # γ(y) = (|y| − σ²/t)² / (2σ²) = (|y|·b·t − a)² / (2·a·b·t²), exact per value of |y|
    return t, ExpAcceptance(lambda v: (v * b * t - a) ** 2, 2 * a * b * t * t)


def discrete_gaussian(
    sigma2: Scalar, size: int | tuple[int, ...], rng: np.random.Generator
) -> IntArray:
    """Draws from the discrete Gaussian N_Z(0, σ²): P(y) ∝ exp(−y² / (2σ²)).

    ``sigma2`` is the exact rational σ² (not the variance of the output, which is slightly less for
    small σ); supported range :data:`SIGMA2_RANGE`.
    """
    var = as_fraction(sigma2, "sigma2")
    _check_range(var, SIGMA2_RANGE, "sigma2")
    count, shape = _count(size)
    t, acceptance = _gaussian_acceptance(var.numerator, var.denominator)

    def propose(size: int) -> IntArray:
        y = _dlap(size, t, 1, rng)
        return y[acceptance.sample(np.abs(y), rng)]

    return _in_chunks(count, lambda n: _rejection(n, propose, percent_kept=50)).reshape(shape)


@lru_cache(maxsize=64)
def _uniform_proposal_acceptance(t: int, s: int) -> ExpAcceptance:
    """Bernoulli(exp(−|y|·s/t)) by |y|: a uniform proposal on {−E..E} kept with it is the discrete
    Laplace of scale t/s truncated at E."""
    return ExpAcceptance(lambda v: v * s, t)


def truncated_discrete_laplace(
    scale: Scalar, bound: int, size: int | tuple[int, ...], rng: np.random.Generator
) -> IntArray:
    """Draws from the discrete Laplace of ``scale`` conditioned on |y| ≤ ``bound``: P(y) ∝
    exp(−|y| / scale) on {−bound..bound}.

    Exact by rejection: untruncated draws outside the bound are drawn again when the bound is at
    least twice the scale less one (they then fall within it with probability above 0.7); below
    that, uniform proposals on {−bound..bound} are kept with probability exp(−|y| / scale), above
    e⁻² each. Either proposal gives the same distribution, and the choice is made in integers: it
    only keeps the rejection rate low."""
    t, s = laplace_scale(scale)
    if isinstance(bound, bool) or not isinstance(bound, int) or bound < 0:
        raise ValueError(f"bound = {bound!r}: expected a whole number of at least 0")
    count, shape = _count(size)

    if (bound + 1) * s >= 2 * t:  # (bound + 1) / scale ≥ 2

        def propose(n: int) -> IntArray:
            y = _dlap(n, t, s, rng)
            return y[np.abs(y) <= bound]

    else:
        acceptance = _uniform_proposal_acceptance(t, s)

        def propose(n: int) -> IntArray:
            y = rng.integers(-bound, bound + 1, size=n)
            return y[acceptance.sample(np.abs(y), rng)]

    return _in_chunks(count, lambda n: _rejection(n, propose, percent_kept=50)).reshape(shape)
