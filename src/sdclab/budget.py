"""Choosing a budget: the error a budget gives one query at one level, and the budget a target
error needs (docs/privacy.md, *Choosing a budget*).

Both directions use the exact noise distributions the specification cards use: the discrete
Gaussian N_Z(0, σ²) of TopDown and SafeTab-H and the discrete Laplace of the geometric
mechanism. The 95% margin of error is the smallest integer E with P(|X| ≤ E) ≥ 95%; the RMSE is
the square root of the exact variance. For TopDown the figure is the error of the *noisy
measurement* of the query, before post-processing: the published tables' error differs (the
optimisation combines every measurement and levels, and rounds).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar, Literal, TypeVar

from scipy import optimize

from sdclab import accounting
from sdclab.errors import InputError
from sdclab.noise import SCALE_RANGE, SIGMA2_RANGE

Target = Literal["budget", "moe", "rmse"]
ERROR_INDEX = {"moe": 1, "rmse": 2}
"""Where each target's figure sits in :meth:`QueryNoise.error`'s (spread, margin, RMSE)."""

MEASUREMENT_CAVEAT = (
    "the error of the noisy measurement, before post-processing (the published tables' error "
    "differs)"
)
SAFETAB_LEVELS = {
    "regional": "rho_regional",
    "detailed-national": "rho_detailed_national",
    "detailed-local": "rho_detailed_local",
}
"""SafeTab-H's iteration levels and region groups, by the parameter that budgets them."""


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
class GaussianNoise(QueryNoise):
    """σ² = factor / budget (TopDown: 1/(ρ·share); SafeTab-H: s/(2ρ))."""

    SPREAD = "noise of variance σ²"
    SUPPORTED = SIGMA2_RANGE

    def error(self, budget: float) -> tuple[float, int, float]:
        """(σ², the 95% margin of error, the RMSE) at ``budget``."""
        sigma2 = self.factor / budget
        rmse = math.sqrt(accounting.discrete_gaussian_variance(sigma2))
        return sigma2, accounting.gaussian_margin_of_error(sigma2), rmse

    def budget_for(self, target: str, value: float) -> float:
        """The smallest budget whose margin of error (``moe``) or RMSE is at most ``value``."""
        self.check_not_met_below(target, value)  # then σ² stays inside the range
        if target == "moe":
            sigma2 = accounting.gaussian_variance_for_margin(int(value))
        else:
            sigma2 = _solve(lambda s: accounting.discrete_gaussian_variance(s) - value**2)
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


P = TypeVar("P")


def _parse(mechanism: str, settings: dict[str, Any], kind: type[P]) -> P:
    """The mechanism's parameters from ``settings``, through its own parser (a problem is one
    InputError in words)."""
    from sdclab import protection

    parameters = protection.get(mechanism).parse(settings)
    assert isinstance(parameters, kind)
    return parameters


def topdown_noise(query: str, level: str, settings: dict[str, Any]) -> GaussianNoise:
    """The noise of a TopDown query at a level: σ² = 1/(ρ_global · γ_level · α_query,level)."""
    from sdclab.protection.topdown import TopDownParameters

    product, strategy = _parse("topdown", settings, TopDownParameters).resolve()
    if query not in product.queries:
        raise InputError(
            f"query {query!r}: the {product.name} product has {', '.join(product.queries)}"
        )
    if level not in strategy.level_shares:
        raise InputError(f"level {level!r}: expected one of {', '.join(strategy.level_shares)}")
    share = strategy.rho_of(query, level) / strategy.rho
    if share == 0:
        raise InputError(
            f"query {query!r} is not measured at {level} level "
            f"(measured there: {', '.join(strategy.measured(level))})"
        )
    return GaussianNoise(
        "topdown", query, level, "rho (zCDP)", MEASUREMENT_CAVEAT, float(1 / Fraction(share))
    )


def geometric_noise(table: str, level: str, settings: dict[str, Any]) -> LaplaceNoise:
    """The noise of a table at a level: scale = Δ₁ / (ε · its share of ε)."""
    from sdclab.protection.geometric import GeometricParameters, allocation, scale_of
    from sdclab.tables.catalog import CATALOG

    if table not in CATALOG:
        raise InputError(f"table {table!r}: not in the catalogue (see sdclab tables)")
    p = _parse("geometric", {**settings, "epsilon": 1}, GeometricParameters)
    shares = allocation(p)
    if (table, level) not in shares:
        raise InputError(f"table {table} is not published at {level} level")
    scale = scale_of(CATALOG[table], shares[table, level], p.neighbours)
    what = "the error of every published cell"
    if p.nonnegative:
        what += ", before negative counts are set to 0 (which biases small cells upward)"
    return LaplaceNoise("geometric", table, level, "epsilon (pure DP)", what, float(scale))


def safetab_noise(level: str, settings: dict[str, Any]) -> GaussianNoise:
    """The noise of SafeTab-H's T03/T04 cells at an iteration level: σ² = s / (2ρ)."""
    from sdclab.protection.safetab_h import SafeTabHParameters

    if level not in SAFETAB_LEVELS:
        raise InputError(f"level {level!r}: SafeTab-H's levels are {', '.join(SAFETAB_LEVELS)}")
    p = _parse("safetab_h", settings, SafeTabHParameters)
    return GaussianNoise(
        "safetab_h",
        "T03/T04",
        level,
        f"rho (zCDP) of each of T03 and T04 ({SAFETAB_LEVELS[level]})",
        "the error of a measured cell, before clamping",
        p.stability / 2,
    )


def _geometric(query: str | None, level: str, settings: dict[str, Any]) -> Noise:
    if query is None:
        raise InputError("geometric: give the table (--query P12)")
    return geometric_noise(query, level, settings)


NOISES: dict[str, Any] = {
    "topdown": lambda query, level, settings: topdown_noise(query or "total", level, settings),
    "geometric": _geometric,
    "safetab_h": lambda query, level, settings: safetab_noise(level, settings),
}
"""How each mechanism with a budget to choose noises one query at one level."""


def noise_of(mechanism: str, query: str | None, level: str, settings: dict[str, Any]) -> Noise:
    """The noise of ``query`` at ``level`` under ``mechanism`` with ``settings``."""
    make = NOISES.get(mechanism)
    if make is None:
        raise InputError(f"mechanism {mechanism!r}: budgets are chosen for {', '.join(NOISES)}")
    return make(query, level, settings)


def answer(noise: Noise, target: Target, value: float) -> dict[str, Any]:
    """The budget and its error for one query: at budget ``value``, or the smallest budget whose
    margin of error or RMSE is at most ``value``."""
    if not value > 0 and not (target == "moe" and value == 0):
        raise InputError(f"{target} {value:g}: expected a number above 0")
    if target == "moe" and value != int(value):
        raise InputError(f"moe {value:g}: a margin of error is a whole number of persons")
    if target == "budget":
        noise.check(value, f"budget {value:g}")
    budget = value if target == "budget" else noise.budget_for(target, value)
    spread, margin, rmse = noise.error(budget)
    return {
        "mechanism": noise.mechanism,
        "query": noise.query,
        "level": noise.level,
        "asked": {target: value},
        "budget": budget,
        "unit": noise.unit,
        "sigma2" if isinstance(noise, GaussianNoise) else "scale": spread,
        "moe_95": margin,
        "rmse": rmse,
        "what": noise.caveat,
    }
