"""The noise of one query or table at one level, as a function of the mechanism's budget: what
``sdclab budget`` answers from (:mod:`sdclab.pipeline.budget`), and what each mechanism with a
budget states through its ``query_noise`` role.

The exact noise distributions the specification cards use: the discrete Gaussian N_Z(0, σ²) of
TopDown and SafeTab-H and the discrete Laplace of the geometric mechanism. The 95% margin of
error is the smallest integer E with P(|X| ≤ E) ≥ 95%; the RMSE the square root of the exact
variance.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar, Literal

from scipy import optimize

from sdclab.core import accounting
from sdclab.core.errors import InputError
from sdclab.core.noise import SCALE_RANGE, SIGMA2_RANGE

Target = Literal["budget", "moe", "rmse"]
ERROR_INDEX = {"moe": 1, "rmse": 2}
"""Where each target's figure sits in :meth:`QueryNoise.error`'s (spread, margin, RMSE)."""

MEASUREMENT_CAVEAT = (
    "the error of the noisy measurement, before post-processing (the published tables' error "
    "differs)"
)
TABLE_CAVEAT = (
    "the error of the sum of noisy measured cells the table's cell is made of, before "
    "post-processing (the published tables' error differs)"
)


@dataclass(frozen=True)
class QueryNoise(ABC):
    """How one query's cells are noised, as a function of the mechanism's budget."""

    mechanism: str
    query: str
    level: str
    unit: str
    """The budget's unit: "rho (zCDP)" or "epsilon (pure DP)"."""
    caveat: str
    factor: float
    """σ² (or the Laplace scale) at a budget of 1: it falls as 1/budget."""

    SPREAD: ClassVar[str]
    SUPPORTED: ClassVar[tuple[Fraction, Fraction]]
    """The spreads the exact sampler draws from, as the mechanisms refuse any other."""

    def budgets(self) -> tuple[float, float]:
        """The lowest and highest budgets whose noise the exact sampler supports."""
        low, high = self.SUPPORTED
        return self.factor / float(high), self.factor / float(low)

    def check(self, budget: float, asked: str) -> None:
        """Refuse a budget (asked for, or found for ``asked``) outside :meth:`budgets`, in words."""
        lowest, highest = self.budgets()
        if not lowest <= budget <= highest:
            low, high = self.SUPPORTED
            raise InputError(
                f"{asked}: needs {self.SPREAD} {self.factor / budget:.6g}, outside the "
                f"{float(low):g}..{float(high):g} the exact sampler supports (the mechanism "
                f"refuses it too); budgets from {lowest:.6g} to {highest:.6g} can be asked"
            )

    @abstractmethod
    def error(self, budget: float) -> tuple[float, int, float]:
        """(the noise's spread, the 95% margin of error, the RMSE) at ``budget``."""

    def check_not_met_below(self, target: str, value: float) -> None:
        """Refuse a target that even the lowest supported budget meets: the smallest budget
        meeting it needs more noise than the exact sampler supports."""
        lowest, _ = self.budgets()
        error = self.error(lowest)[ERROR_INDEX[target]]
        if error <= value:
            raise InputError(
                f"{target} {value:g}: even the lowest budget the exact sampler supports, "
                f"{lowest:.6g}, meets it ({target} {error:.6g}); a smaller one would need "
                f"{self.SPREAD} above {float(self.SUPPORTED[1]):g}, which the mechanism refuses"
            )


@dataclass(frozen=True)
class Answering:
    """A measured query that answers every cell of a published table at a level: each cell is
    the sum of ``fewest`` to ``most`` of the query's cells there."""

    query: str
    fewest: int
    most: int

    def to_dict(self) -> dict[str, Any]:
        return {"query": self.query, "cells_summed": [self.fewest, self.most]}


@dataclass(frozen=True)
class GaussianNoise(QueryNoise):
    """σ² = factor / budget (TopDown: 1/(ρ·share); SafeTab-H: s/(2ρ)) for each measured cell; a
    figure's cell is the sum of ``terms`` of them (a published table's cell), so its noise is the
    sum of ``terms`` independent N_Z(0, σ²)."""

    terms: int = 1
    table: str | None = None
    """The published table whose cell the figure is for (None: the measured query itself)."""
    answering: tuple[Answering, ...] = ()
    """Every query measured at the level that answers the table's cells: ``query`` is the one
    whose cell summing the most measured cells has the least variance."""

    SPREAD = "noise of variance σ²"
    SUPPORTED = SIGMA2_RANGE

    def error(self, budget: float) -> tuple[float, int, float]:
        """(σ² of a measured cell, the 95% margin of error, the RMSE) at ``budget``."""
        sigma2 = self.factor / budget
        rmse = math.sqrt(self.terms * accounting.discrete_gaussian_variance(sigma2))
        return sigma2, accounting.gaussian_margin_of_error(sigma2, terms=self.terms), rmse

    def budget_for(self, target: str, value: float) -> float:
        """The smallest budget whose margin of error (``moe``) or RMSE is at most ``value``."""
        self.check_not_met_below(target, value)  # then σ² stays inside the range
        if target == "moe":
            sigma2 = accounting.gaussian_variance_for_margin(int(value), terms=self.terms)
        else:
            sigma2 = _solve(
                lambda s: self.terms * accounting.discrete_gaussian_variance(s) - value**2
            )
        return _meeting(self, target, value, self.factor / sigma2)


@dataclass(frozen=True)
class LaplaceNoise(QueryNoise):
    """Scale = factor / ε (the table's sensitivity over its share of ε)."""

    SPREAD = "noise of scale"
    SUPPORTED = SCALE_RANGE

    def error(self, budget: float) -> tuple[float, int, float]:
        """(the scale, the 95% margin of error, the RMSE) at ``budget``."""
        scale = self.factor / budget
        q = math.exp(-1 / scale)
        rmse = math.sqrt(2 * q) / -math.expm1(-1 / scale)  # 1 − q without cancellation
        return scale, accounting.laplace_margin_of_error(scale), rmse

    def budget_for(self, target: str, value: float) -> float:
        """The smallest ε whose margin of error (``moe``) or RMSE is at most ``value``.

        Solved for t = −ln q = ε / factor, where q = e^{−1/scale}: the RMSE in closed form,
        the margin's tail in t (both exact to the last digits, where q itself is too near 1)."""
        if target == "moe":  # P(|X| > E) = 2q^{E+1}/(1+q) ≤ 5%, rising with q, falling in t
            m = int(value)

            def log_excess(t: float) -> float:
                return math.log(2 / 0.05) - (m + 1) * t - math.log1p(math.exp(-t))

            t = optimize.brentq(log_excess, 1e-300, 1e3, xtol=1e-300, rtol=1e-15)
        else:  # variance 2q/(1−q)² = v: the root q < 1 is v / (v + 1 + √(2v + 1))
            v = value**2
            t = math.log1p((1 + math.sqrt(2 * v + 1)) / v)
        self.check_not_met_below(target, value)
        return _meeting(self, target, value, self.factor * t)


Noise = GaussianNoise | LaplaceNoise


def _meeting(noise: Noise, target: str, value: float, budget: float) -> float:
    """``budget`` raised by the root finder's last few ulps where they leave the target missed
    (the error at the root itself may land on the wrong side of it)."""
    noise.check(budget, f"{target} {value:g}")
    for _ in range(64):
        if noise.error(budget)[ERROR_INDEX[target]] <= value * (1 + 1e-12):
            return budget
        budget *= 1 + 1e-12
    raise AssertionError(f"no budget near {budget:g} meets {target} {value:g}")


def _solve(excess: Any) -> float:
    """The σ² where ``excess`` (rising in σ²) crosses 0."""
    low, high = 1e-9, 1.0
    while excess(high) < 0:  # the caller has checked that the range's top is enough
        low, high = high, 2 * high
    return float(optimize.brentq(excess, low, high, xtol=1e-13, rtol=1e-13))
