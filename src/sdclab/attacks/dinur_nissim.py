"""The Dinur–Nissim reconstruction experiment: a binary database, noisy subset-sum queries, a
least-squares decoder, and the noise at which it stops recovering the records.

Dinur and Nissim (2003) show that n Boolean records answered with t = n·ln²n random subset sums
whose noise is bounded by E = o(√n) can be reconstructed in polynomial time; Bach (*Differential
privacy and noisy confidentiality concepts for European population statistics*, §3.1, Eq. 8) turns
this into a threshold on per-query Laplace noise: all t draws of Lap(1/ε) stay within E = √n with
confidence α when ε > −ln(1 − α^{1/t})/E. This module measures where a real attack fails.

Queries (:class:`QueryDesign`):

* ``hadamard`` (the default): k blocks of N = 2^m ≥ n + 1 queries. In block b the records are put
  in N slots by a fresh random injection into slots 1..N−1 (the N − n − 1 other slots hold no
  record: the padding is honest, every query is a subset of the n real records); query r asks
  how many records with value 1 sit in the slots where row r of the Sylvester–Hadamard matrix
  is +1. These are balanced pseudo-random subsets (each about half the records, any two queries
  of a block overlapping in about a quarter), not independent uniform subsets; in exchange each
  block is answered and inverted by one fast Walsh–Hadamard transform (N log N), so n = 10⁵ with
  t ≥ n·ln²n runs in seconds. t = k·N, with k the fewest blocks reaching the target.
* ``random``: t independent uniform subsets (each record in each with probability 1/2), solved
  directly from the normal equations; for cross-checks at small n.

Reconstruction is the least-squares estimate rounded to {0, 1} (the theorem's linear program is
another decoder with the same scaling). For the Hadamard design the normal matrix is
(t/4)(I + 11ᵀ) exactly, so the estimate is closed form. A record is recovered when its rounded
estimate equals its value; the score is the share recovered.

Noise (:class:`Noise`): ``uniform`` integers on {−E..E} (the theorem's bounded noise) or
``laplace``, the discrete Laplace of scale 1/ε from :func:`sdclab.core.noise.discrete_laplace` (Eq.
8's setting, on the integers), or ``none``. The sweep lives in
:mod:`sdclab.attacks.dinur_nissim_sweep`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

import numpy as np
import numpy.typing as npt
import scipy.linalg
import scipy.stats

from sdclab.core.arrays import IntArray
from sdclab.core.errors import InputError
from sdclab.core.noise import SCALE_RANGE, as_fraction, discrete_laplace
from sdclab.core.randomness import check_seed

NoiseKind = Literal["none", "uniform", "laplace"]
DesignKind = Literal["hadamard", "random"]
NOISE_KINDS: tuple[NoiseKind, ...] = ("none", "uniform", "laplace")
DESIGN_KINDS: tuple[DesignKind, ...] = ("hadamard", "random")
MAX_RECORDS = 2**22
"""The largest database: one block then holds 2²³ slots (64 MiB of answers)."""
RANDOM_DESIGN_WORK = 2 * 10**11
"""The most t·n² multiply-adds the ``random`` design may cost (about a minute on one core)."""
CHUNK_ENTRIES = 2**18
"""Answers held at once (whole blocks or random query rows per chunk; at least one block)."""


def dinur_nissim_queries(n: int) -> int:
    """t = ⌈n·ln²n⌉, the theorem's number of queries as Bach's Eq. 8 reads it (natural log)."""
    return math.ceil(n * math.log(n) ** 2)


@dataclass(frozen=True)
class Noise:
    """Per-query noise: none, uniform integers on {−E..E} (``magnitude`` = E) or the discrete
    Laplace of scale 1/ε (``magnitude`` = ε)."""

    kind: NoiseKind
    magnitude: Fraction = Fraction(0)

    def __post_init__(self) -> None:
        if self.kind not in NOISE_KINDS:
            raise InputError(f"noise {self.kind!r}: expected one of {', '.join(NOISE_KINDS)}")
        try:  # an int, float or Decimal is taken at its exact value
            object.__setattr__(self, "magnitude", as_fraction(self.magnitude, "noise magnitude"))
        except (TypeError, ValueError) as exc:
            raise InputError(str(exc)) from None
        if self.kind == "uniform" and (
            self.magnitude.denominator != 1 or not 0 <= self.magnitude <= 10**9
        ):
            raise InputError(
                f"uniform noise bound E = {self.magnitude}: expected a whole number from 0 to 10^9"
            )
        if self.kind == "laplace":
            low, high = 1 / SCALE_RANGE[1], 1 / SCALE_RANGE[0]
            if not low <= self.magnitude <= high:
                raise InputError(
                    f"laplace epsilon {float(self.magnitude):g}: expected {float(low):g} to "
                    f"{float(high):g} (the sampler's scales 1/epsilon)"
                )

    def draw(self, size: int, rng: np.random.Generator) -> IntArray:
        """``size`` independent noise terms."""
        if self.kind == "uniform":
            bound = int(self.magnitude)
            return rng.integers(-bound, bound + 1, size=size, dtype=np.int64)
        if self.kind == "laplace":
            return discrete_laplace(1 / self.magnitude, size, rng)
        return np.zeros(size, dtype=np.int64)

    def variance(self) -> float:
        """The variance of one term: E(E+1)/3, or 2q/(1 − q)² with q = e^−ε."""
        if self.kind == "uniform":
            bound = float(self.magnitude)
            return bound * (bound + 1) / 3
        if self.kind == "laplace":
            q = math.exp(-float(self.magnitude))
            return 2 * q / (1 - q) ** 2
        return 0.0

    def label(self) -> str:
        """How a table names it: ``E = 31``, ``ε = 0.05``, ``none``."""
        if self.kind == "uniform":
            return f"E = {int(self.magnitude)}"
        if self.kind == "laplace":
            return f"ε = {float(self.magnitude):.4g}"
        return "none"


@dataclass(frozen=True)
class QueryDesign:
    """How many records, which kind of subsets and how many: ``blocks`` blocks of ``slots``
    Hadamard queries, or ``queries`` random subsets."""

    kind: DesignKind
    records: int
    slots: int
    blocks: int
    queries: int

    @staticmethod
    def make(
        records: int, kind: DesignKind = "hadamard", queries: int | None = None
    ) -> QueryDesign:
        """The design of at least ``queries`` queries (default n·ln²n) over ``records`` records."""
        if isinstance(records, bool) or not isinstance(records, int) or records < 4:
            raise InputError(f"records {records}: expected a whole number of at least 4")
        if records > MAX_RECORDS:
            raise InputError(f"records {records}: at most {MAX_RECORDS:,} are supported")
        if kind not in DESIGN_KINDS:
            raise InputError(f"queries {kind!r}: expected one of {', '.join(DESIGN_KINDS)}")
        target = dinur_nissim_queries(records) if queries is None else queries
        if isinstance(target, bool) or not isinstance(target, int) or target < records:
            raise InputError(f"query count {target}: expected at least the records ({records})")
        if kind == "random":
            if target * records**2 > RANDOM_DESIGN_WORK:
                raise InputError(
                    f"random queries: {target:,} queries over {records:,} records cost "
                    f"{target * records**2:.2g} operations (at most {RANDOM_DESIGN_WORK:.0e}); "
                    "use the hadamard design or fewer records"
                )
            return QueryDesign(kind, records, 0, 0, target)
        slots = 1 << records.bit_length()  # the least power of two ≥ records + 1
        blocks = -(-target // slots)
        return QueryDesign(kind, records, slots, blocks, blocks * slots)

    def describe(self) -> str:
        """One line a table or a report prints above its figures."""
        if self.kind == "random":
            return f"{self.queries:,} independent uniform random subsets"
        return (
            f"{self.queries:,} structured subsets: {self.blocks} blocks of the {self.slots:,} rows "
            f"of a Sylvester–Hadamard matrix, records in random slots (balanced subsets, not "
            f"independent uniform ones; {self.slots - self.records:,} empty slots per block)"
        )


@dataclass(frozen=True)
class Trial:
    """One attack: the noise, the share of records recovered, and the largest noise term drawn
    (to set beside a bound such as √n)."""

    noise: Noise
    recovered: float
    wrong: int
    largest_noise: int


class Experiment:
    """A seeded random binary database and the query design aimed at it. The attack reads the
    design (its seeds stand for the published query descriptions) and the noisy answers, and
    the database only to score."""

    def __init__(self, design: QueryDesign, seed: int) -> None:
        check_seed(seed, "seed")
        self.design = design
        self._seed = seed
        self.values: npt.NDArray[np.int64] = self._stream(0).integers(
            0, 2, size=design.records, dtype=np.int64
        )

    def _stream(self, *key: int) -> np.random.Generator:
        """The random stream of one part: (0,) the database, (1, b) block b's slots or (1,) the
        random subsets, (2, s) the noise of noise seed s."""
        sequence = np.random.SeedSequence(self._seed, spawn_key=key)
        return np.random.Generator(np.random.PCG64(sequence))

    def attack(self, noise: Noise, noise_seed: int = 0) -> Trial:
        """Answer every query with ``noise``, reconstruct, and score."""
        estimate, largest = self.estimate(noise, noise_seed)
        wrong = int(np.count_nonzero((estimate >= 0.5) != (self.values == 1)))
        return Trial(noise, 1 - wrong / self.design.records, wrong, largest)

    def estimate(self, noise: Noise, noise_seed: int = 0) -> tuple[npt.NDArray[np.float64], int]:
        """The least-squares estimate of the records from the answers with ``noise`` (drawn from
        the stream of ``noise_seed``), and the largest noise term drawn."""
        check_seed(noise_seed, "noise seed")
        rng = self._stream(2, noise_seed)
        if self.design.kind == "hadamard":
            return self._hadamard(noise, rng)
        return self._random(noise, rng)

    def _block_slots(self, first: int, count: int) -> IntArray:
        """The slots (1..N−1) of every record in blocks first..first+count−1, regenerated from
        each block's own seed (a fresh permutation per block)."""
        design = self.design
        out = np.empty((count, design.records), dtype=np.int64)
        for i in range(count):  # one permutation per block, each vectorised
            perm = self._stream(1, first + i).permutation(design.slots - 1)
            out[i] = perm[: design.records] + 1
        return out

    def _hadamard(
        self, noise: Noise, rng: np.random.Generator
    ) -> tuple[npt.NDArray[np.float64], int]:
        """The least-squares estimate from every block's noisy answers."""
        design = self.design
        per_chunk = max(1, CHUNK_ENTRIES // design.slots)
        gradient = np.zeros(design.records)
        largest = 0
        for first in range(0, design.blocks, per_chunk):
            count = min(per_chunk, design.blocks - first)
            slots = self._block_slots(first, count)
            answers = hadamard_answers(self.values, slots, design.slots)
            terms = noise.draw(answers.size, rng).reshape(answers.shape)
            largest = max(largest, int(np.abs(terms).max()))
            gradient += hadamard_gradient(answers + terms, slots).sum(axis=0)
        return least_squares_from_gradient(gradient, design.queries), largest

    def _random(
        self, noise: Noise, rng: np.random.Generator
    ) -> tuple[npt.NDArray[np.float64], int]:
        """The least-squares estimate from the normal equations of independent random subsets."""
        design = self.design
        query_rng = self._stream(1)
        rows = max(1, 16 * CHUNK_ENTRIES // design.records)  # dense rows: larger products
        normal = np.zeros((design.records, design.records))
        right = np.zeros(design.records)
        largest = 0
        for first in range(0, design.queries, rows):
            count = min(rows, design.queries - first)
            subsets = query_rng.integers(0, 2, size=(count, design.records), dtype=np.int8)
            matrix = subsets.astype(np.float64)
            terms = noise.draw(count, rng)
            largest = max(largest, int(np.abs(terms).max()))
            answers = subsets.astype(np.int64) @ self.values + terms
            normal += matrix.T @ matrix
            right += matrix.T @ answers.astype(np.float64)
        factor = scipy.linalg.cho_factor(normal)
        return scipy.linalg.cho_solve(factor, right), largest


def fwht(values: IntArray) -> IntArray:
    """The Walsh–Hadamard transform (Sylvester order) along the last axis, exact in integers:
    H·v for each row v, with H the ±1 matrix of that length (a power of two)."""
    length = values.shape[-1]
    out = np.array(values, dtype=np.int64).reshape(-1, length)
    half = 1
    while half < length:  # log2(length) butterfly passes, each in place over the whole array
        pairs = out.reshape(out.shape[0], length // (2 * half), 2, half)
        first = pairs[:, :, 0].copy()
        pairs[:, :, 0] += pairs[:, :, 1]
        np.subtract(first, pairs[:, :, 1], out=pairs[:, :, 1])
        half *= 2
    return out.reshape(values.shape)


def hadamard_answers(values: IntArray, slots: IntArray, length: int) -> IntArray:
    """The exact answers of blocks of Hadamard subset queries: per block (a row of ``slots``) and
    row r, the number of records of value 1 in the slots where row r is +1, (T + (H·y)_r)/2 with
    y the records' values in their slots and T their total."""
    filled = np.zeros((slots.shape[0], length), dtype=np.int64)
    np.put_along_axis(filled, slots, values[np.newaxis, :], axis=1)
    return (int(values.sum()) + fwht(filled)) // 2


def hadamard_gradient(answers: IntArray, slots: IntArray) -> npt.NDArray[np.float64]:
    """Qᵀa per block: for each record, (the sum of the block's answers + (H·a) at its slot)/2."""
    transformed = fwht(answers)
    at_records = np.take_along_axis(transformed, slots, axis=1)
    return (answers.sum(axis=1, keepdims=True) + at_records) / 2


def least_squares_from_gradient(
    gradient: npt.NDArray[np.float64], queries: int
) -> npt.NDArray[np.float64]:
    """Solve (t/4)(I + 11ᵀ)·x = Σ Qᵀa: the normal matrix of Hadamard blocks whose records avoid
    slot 0 (every column then sums to zero, so the cross terms vanish), inverted by
    Sherman–Morrison."""
    n = gradient.size
    return (4 / queries) * (gradient - gradient.sum() / (n + 1))


def predicted_share(design: QueryDesign, noise: Noise) -> float:
    """The share recovered if each record's least-squares error were normal with variance
    4σ²/t (the Hadamard design's exact variance, up to the factor n/(n+1)): a record is lost
    only when its error points away from {0, 1} by more than 1/2, so the share is Φ(√t/(4σ)).
    A derived reference for tests and tables, never a measured figure."""
    variance = noise.variance()
    if variance == 0:
        return 1.0
    return float(scipy.stats.norm.cdf(math.sqrt(design.queries / variance) / 4))


def predicted_sigma(design: QueryDesign, share: float) -> float:
    """The noise standard deviation at which :func:`predicted_share` equals ``share``."""
    return math.sqrt(design.queries) / (4 * float(scipy.stats.norm.ppf(share)))


def eq8_epsilon(records: int, queries: int | None = None, alpha: float = 0.99) -> float:
    """Bach's Eq. 8: the per-query ε above which all t draws of Lap(1/ε) stay within E = √n with
    probability α, −ln(1 − α^{1/t})/E (continuous Laplace: P(|x| > E) = e^{−εE})."""
    t = dinur_nissim_queries(records) if queries is None else queries
    _check_alpha(alpha)
    return -math.log(-math.expm1(math.log(alpha) / t)) / math.sqrt(records)


def eq8_epsilon_discrete(records: int, queries: int | None = None, alpha: float = 0.99) -> float:
    """Eq. 8 for sdclab's discrete Laplace: the least ε with all t terms within ⌊√n⌋ with
    probability α, where P(|y| > E) = 2e^{−ε(E+1)}/(1 + e^{−ε}) (found by bisection)."""
    t = dinur_nissim_queries(records) if queries is None else queries
    _check_alpha(alpha)
    bound = math.isqrt(records)
    allowed = -math.expm1(math.log(alpha) / t)  # the largest tail each term may have

    def tail(eps: float) -> float:
        return 2 * math.exp(-eps * (bound + 1)) / (1 + math.exp(-eps))

    low, high = 0.0, 1.0
    while tail(high) > allowed:
        high *= 2
    for _ in range(200):  # the tail falls with ε: bisect to float precision
        mid = (low + high) / 2
        low, high = (mid, high) if tail(mid) > allowed else (low, mid)
    return high


def _check_alpha(alpha: float) -> None:
    if not 0 < alpha < 1:
        raise InputError(f"alpha {alpha}: expected a confidence strictly between 0 and 1")
