"""The Dinur–Nissim sweep: for each database size, the noise at which the reconstruction of
:mod:`sdclab.attacks.dinur_nissim` stops recovering a given share of the records, beside Bach's
Eq. 8 for the same n and t.

A threshold is found by measurement alone: from a start at the theorem's scale (E = √n/4, or a
Laplace scale of √n/4) the noise is doubled (or halved) until the share recovered crosses the
level, then the bracket is bisected until its ends are within ``precision`` of each other. The
same database, queries and noise seed serve every evaluation, so the share falls with the noise
almost monotonically. The threshold reported is the bracket's *passing* end: the most noise
(largest E, least ε) found at which at least ``level`` of the records were recovered; the
*failing* end is beside it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import scipy.stats

from sdclab.attacks.dinur_nissim import (
    DesignKind,
    Experiment,
    Noise,
    NoiseKind,
    QueryDesign,
    Trial,
    dinur_nissim_queries,
    eq8_epsilon,
    eq8_epsilon_discrete,
)
from sdclab.core.errors import InputError
from sdclab.core.noise import SCALE_RANGE

LEVELS = (0.99, 0.90)
"""Shares recovered whose thresholds the sweep reports by default."""
PAPER_RECORDS = 10**6
"""The database size of Bach's example (Eq. 8: "ε₉₉ > 0.024 … n = 10⁶")."""
MAX_UNIFORM_BOUND = 10**9


def noise_of(kind: NoiseKind, amount: Fraction) -> Noise:
    """The noise of ``amount``, more noise for more: the bound E, or the Laplace scale 1/ε."""
    if kind == "uniform":
        return Noise("uniform", Fraction(math.floor(amount)))
    return Noise("laplace", 1 / amount)


@dataclass(frozen=True)
class Threshold:
    """Where the share recovered crosses ``level``: the most noise found that passes and the
    least found that fails, with their shares."""

    kind: NoiseKind
    level: float
    passing: Noise
    passing_share: float
    failing: Noise
    failing_share: float

    @property
    def sigma(self) -> float:
        """The standard deviation of one noise term at the passing end."""
        return math.sqrt(self.passing.variance())

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: magnitudes as numbers (E, or ε) with their shares."""
        return {
            "noise": self.kind,
            "level": self.level,
            "passing": float(self.passing.magnitude),
            "passing_share": self.passing_share,
            "failing": float(self.failing.magnitude),
            "failing_share": self.failing_share,
            "passing_sigma": self.sigma,
        }


class _Shares:
    """The share recovered at each noise amount tried, each measured once."""

    def __init__(self, experiment: Experiment, kind: NoiseKind, noise_seed: int) -> None:
        self.experiment, self.kind, self.noise_seed = experiment, kind, noise_seed
        self.seen: dict[Fraction, float] = {}

    def __call__(self, amount: Fraction) -> float:
        if amount not in self.seen:
            trial = self.experiment.attack(noise_of(self.kind, amount), self.noise_seed)
            self.seen[amount] = trial.recovered
        return self.seen[amount]


def _bracket(shares: _Shares, start: Fraction, level: float) -> tuple[Fraction, Fraction]:
    """Amounts (passing, failing) found by doubling or halving from ``start``."""
    uniform = shares.kind == "uniform"
    least = Fraction(0) if uniform else SCALE_RANGE[0]
    most = Fraction(MAX_UNIFORM_BOUND) if uniform else SCALE_RANGE[1]
    amount = start
    if shares(amount) >= level:
        while shares(amount) >= level:
            if amount >= most:
                raise InputError(f"{shares.kind} noise: the reconstruction still passes at {most}")
            passing, amount = amount, min(most, amount * 2)
        return passing, amount
    while shares(amount) < level:
        if amount <= least:
            raise InputError(
                f"{shares.kind} noise: fewer than {level:.0%} of the records are recovered even "
                "at the least noise tried; use more records or more queries"
            )
        failing = amount
        amount = Fraction(math.floor(amount / 2)) if uniform else max(least, amount / 2)
    return amount, failing


def _bisect(
    shares: _Shares, passing: Fraction, failing: Fraction, level: float, precision: Fraction
) -> tuple[Fraction, Fraction]:
    """Narrow (passing, failing) until they are within ``precision`` (relative) or one step."""
    while failing - passing > precision * passing:
        middle = (passing + failing) / 2
        middle = (
            Fraction(math.floor(middle))
            if shares.kind == "uniform"
            else (middle.limit_denominator(4096))
        )
        if middle in (passing, failing):
            break
        if shares(middle) >= level:
            passing = middle
        else:
            failing = middle
    return passing, failing


def find_thresholds(
    experiment: Experiment,
    kind: NoiseKind,
    levels: Sequence[float] = LEVELS,
    *,
    noise_seed: int = 0,
    precision: Fraction = Fraction(1, 50),
) -> tuple[tuple[Threshold, ...], int]:
    """The threshold of each level for noise ``kind``, and the number of attacks run."""
    _check_sweep((kind,), levels)
    root = math.isqrt(experiment.design.records)
    start = Fraction(max(1, root // 4)) if kind == "uniform" else Fraction(root, 4)
    shares = _Shares(experiment, kind, noise_seed)
    found = []
    for level in levels:
        passing, failing = _bisect(shares, *_bracket(shares, start, level), level, precision)
        found.append(
            Threshold(
                kind,
                level,
                noise_of(kind, passing),
                shares(passing),
                noise_of(kind, failing),
                shares(failing),
            )
        )
    return tuple(found), len(shares.seen)


def _check_sweep(kinds: Sequence[str], levels: Sequence[float]) -> None:
    """A sweep varies uniform or Laplace noise, for levels between 1/2 and 1."""
    if not kinds:
        raise InputError("noise: give at least one kind (uniform, laplace)")
    for kind in kinds:
        if kind not in ("uniform", "laplace"):
            raise InputError(f"noise {kind!r}: a sweep varies uniform or laplace noise")
    if not levels:
        raise InputError("level: give at least one share recovered")
    for level in levels:
        if not 0.5 < level < 1:
            raise InputError(f"level {level}: expected a share recovered between 0.5 and 1")


@dataclass(frozen=True)
class SizeResult:
    """One database size: its design, thresholds, Eq. 8's ε for the same n and t (the paper's
    continuous form and the exact one of sdclab's discrete Laplace) and the attack at Eq. 8's ε."""

    design: QueryDesign
    thresholds: tuple[Threshold, ...]
    eq8: float
    eq8_discrete: float
    at_eq8: Trial
    attacks: int
    seconds: float

    def threshold(self, kind: NoiseKind, level: float) -> Threshold | None:
        """The threshold of ``kind`` at ``level``, if swept."""
        return next((t for t in self.thresholds if t.kind == kind and t.level == level), None)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""
        n, t = self.design.records, self.design.queries
        return {
            "records": n,
            "queries": t,
            "queries_over_n_ln2n": t / (n * math.log(n) ** 2),
            "design": self.design.kind,
            "design_description": self.design.describe(),
            "slots": self.design.slots or None,
            "blocks": self.design.blocks or None,
            "sqrt_n": math.sqrt(n),
            "thresholds": [
                {**x.to_dict(), "over_sqrt_n": _scaled(x, n), "sigma_over_sqrt_t": x.sigma / t**0.5}
                for x in self.thresholds
            ],
            "eq8_epsilon": self.eq8,
            "eq8_epsilon_discrete": self.eq8_discrete,
            "at_eq8": {
                "epsilon": float(self.at_eq8.noise.magnitude),
                "recovered": self.at_eq8.recovered,
                "largest_noise": self.at_eq8.largest_noise,
            },
            "attacks": self.attacks,
            "seconds": self.seconds,
        }


def _scaled(threshold: Threshold, n: int) -> float:
    """E/√n for bounded noise, ε·√n for Laplace noise (both constant if the threshold moves
    with √n)."""
    value = float(threshold.passing.magnitude)
    return value / math.sqrt(n) if threshold.kind == "uniform" else value * math.sqrt(n)


def run_size(
    records: int,
    *,
    kinds: Sequence[NoiseKind] = ("uniform", "laplace"),
    levels: Sequence[float] = LEVELS,
    design: DesignKind = "hadamard",
    queries_per_record: float | None = None,
    seed: int = 0,
    alpha: float = 0.99,
) -> SizeResult:
    """Sweep one database size: every kind's thresholds, Eq. 8, and the attack at Eq. 8's ε."""
    start = time.perf_counter()
    queries = None if queries_per_record is None else math.ceil(queries_per_record * records)
    experiment = Experiment(QueryDesign.make(records, design, queries), seed)
    t = experiment.design.queries
    thresholds: list[Threshold] = []
    attacks = 0
    for kind in kinds:
        found, count = find_thresholds(experiment, kind, levels, noise_seed=seed)
        thresholds += found
        attacks += count
    discrete = eq8_epsilon_discrete(records, t, alpha)
    at_eq8 = experiment.attack(Noise("laplace", _round_up(discrete)), seed)
    return SizeResult(
        experiment.design,
        tuple(thresholds),
        eq8_epsilon(records, t, alpha),
        discrete,
        at_eq8,
        attacks + 1,
        time.perf_counter() - start,
    )


def _round_up(value: float) -> Fraction:
    """``value`` rounded up to 4 significant digits, exactly (the sampler takes a rational)."""
    digits = 3 - math.floor(math.log10(value))
    return Fraction(math.ceil(value * 10**digits), 10**digits)


@dataclass(frozen=True)
class Sweep:
    """Every size's result, and the fit of each threshold to √t extrapolated to n = 10⁶."""

    sizes: tuple[SizeResult, ...]
    alpha: float
    levels: tuple[float, ...]
    extrapolation: tuple[dict[str, Any], ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return {
            "alpha": self.alpha,
            "levels": list(self.levels),
            "design": self.sizes[0].design.describe() if self.sizes else None,
            "sizes": [s.to_dict() for s in self.sizes],
            "extrapolation": list(self.extrapolation),
        }


def sweep(
    records: Sequence[int],
    *,
    kinds: Sequence[NoiseKind] = ("uniform", "laplace"),
    levels: Sequence[float] = LEVELS,
    design: DesignKind = "hadamard",
    queries_per_record: float | None = None,
    seed: int = 0,
    alpha: float = 0.99,
    progress: Callable[[str], None] | None = None,
) -> Sweep:
    """Sweep every size in ``records`` (t = the design's queries reaching n·ln²n, or
    ``queries_per_record``·n) and fit each threshold's noise σ to c·√t, extrapolated to the
    paper's n = 10⁶ with t = n·ln²n."""
    if queries_per_record is not None and not 1 <= queries_per_record <= 10**4:
        raise InputError(f"queries per record {queries_per_record}: expected 1 to 10000")
    if not records:
        raise InputError("records: give at least one database size")
    for n in records:  # every bad setting refused before the first attack runs
        per = None if queries_per_record is None else math.ceil(queries_per_record * n)
        QueryDesign.make(n, design, per)
    _check_sweep(kinds, levels)
    sizes = []
    for n in records:
        if progress is not None:
            progress(f"dinur-nissim: n = {n:,} ...")
        sizes.append(
            run_size(
                n,
                kinds=kinds,
                levels=levels,
                design=design,
                queries_per_record=queries_per_record,
                seed=seed,
                alpha=alpha,
            )
        )
    result = tuple(sizes)
    return Sweep(result, alpha, tuple(levels), _extrapolate(result, alpha))


def _extrapolate(sizes: tuple[SizeResult, ...], alpha: float) -> tuple[dict[str, Any], ...]:
    """Per (kind, level): c = the mean of σ*/√t over the sizes, and the threshold at n = 10⁶ with
    t of the Hadamard design there, beside Eq. 8 at n = 10⁶ with t = n·ln²n (the paper's)."""
    t_paper = QueryDesign.make(PAPER_RECORDS).queries
    eq8_paper = eq8_epsilon(PAPER_RECORDS, dinur_nissim_queries(PAPER_RECORDS), alpha)
    out = []
    for threshold in sizes[0].thresholds if sizes else ():
        kind, level = threshold.kind, threshold.level
        ratios = [
            x.sigma / math.sqrt(s.design.queries)
            for s in sizes
            if (x := s.threshold(kind, level)) is not None
        ]
        c = sum(ratios) / len(ratios)
        sigma = c * math.sqrt(t_paper)
        row: dict[str, Any] = {
            "noise": kind,
            "level": level,
            "sigma_over_sqrt_t": ratios,
            "fitted_c": c,
            "predicted_c": 1 / (4 * float(scipy.stats.norm.ppf(level))),
            "records": PAPER_RECORDS,
            "queries": t_paper,
        }
        if kind == "uniform":
            row["bound"] = math.sqrt(3 * sigma**2 + 0.25) - 0.5
            row["bound_over_sqrt_n"] = row["bound"] / math.sqrt(PAPER_RECORDS)
        else:
            row["epsilon"] = laplace_epsilon_of_sigma(sigma)
            row["eq8_epsilon"] = eq8_paper
            row["eq8_over_threshold"] = eq8_paper / row["epsilon"]
        out.append(row)
    return tuple(out)


def laplace_epsilon_of_sigma(sigma: float) -> float:
    """The ε whose discrete Laplace (scale 1/ε) has standard deviation ``sigma``: with q = e^−ε,
    2q/(1 − q)² = σ², so q = (σ² + 1 − √(2σ² + 1))/σ²."""
    s2 = sigma**2
    return -math.log((s2 + 1 - math.sqrt(2 * s2 + 1)) / s2)
