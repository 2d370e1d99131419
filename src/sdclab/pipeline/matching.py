"""Matching mechanisms on the common axis: the settings at which a mechanism's guarantee is a
given ε at δ = 10⁻¹⁰ for one person's record changed (docs/experiments.md, *Matching*).

Every budget setting of the mechanism is scaled by one factor (its ``rescale`` role). The
settings are rounded to 6 significant digits; what is reported is the card's ε at the rounded
settings, which is checked to lie within 10⁻⁴ (relative) of the target.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from scipy import optimize

from sdclab import protection
from sdclab.core.errors import InputError
from sdclab.core.figures import NotMeasured

if TYPE_CHECKING:
    from sdclab.core.census.model import Census

MATCH_AXIS = "epsilon@1e-10"
"""The one axis mechanisms are matched on: ε at δ = 10⁻¹⁰, one person's record changed."""
ROUNDING = 1e-4
"""How far the card's ε at the rounded settings may be from the target (relative)."""
COMMON_DELTA = 1e-10


@dataclass(frozen=True)
class Matched:
    """A mechanism's settings at a target of the common axis."""

    target: float
    settings: dict[str, str]
    """The budget settings that reach it (the others as the entry gives them)."""
    epsilon: float
    """The card's common-axis ε at these settings (the target within the rounding)."""


def common_epsilon(
    name: str, settings: Mapping[str, Any], census: Census | None = None
) -> float | NotMeasured:
    """The common-axis ε of a mechanism's card at ``settings`` (for ``census``, default the US
    2010 census), or why it has none."""
    entry = protection.get(name)
    params = entry.parse(settings, census)
    try:
        common = entry.card(params).common
    except InputError as exc:  # the PSA's ε(p, b): b is fixed by its invariants, read from data
        return NotMeasured(f"its ε needs a figure its invariants fix, read from the data ({exc})")
    return common if isinstance(common, NotMeasured) else float(common.epsilon)


def unmatchable(
    name: str, settings: Mapping[str, Any], census: Census | None = None
) -> NotMeasured | None:
    """Why the mechanism cannot be matched on the common axis (None: it can)."""
    common = common_epsilon(name, settings, census)
    if isinstance(common, NotMeasured):
        return common
    if protection.get(name).rescale is None:
        return NotMeasured(f"the {name} mechanism defines no way to scale its budget (no rescale)")
    return None


@functools.lru_cache(maxsize=256)
def _match(
    name: str, settings: tuple[tuple[str, Any], ...], target: float, census: Census | None
) -> Matched:
    return match(name, dict(settings), target, census)


def matched(
    name: str, settings: Mapping[str, Any], target: float, census: Census | None = None
) -> Matched:
    """:func:`match`, each (mechanism, settings, target, census) solved once per process."""
    return _match(name, tuple(sorted(settings.items())), target, census)


def match(
    name: str, settings: Mapping[str, Any], target: float, census: Census | None = None
) -> Matched:
    """The settings of mechanism ``name`` (from ``settings``, its budgets scaled alike) whose
    common-axis ε is ``target``; ValueError if it cannot be matched (:func:`unmatchable`).

    Scaling every budget by one factor scales the loss of one person's change by it (pure ε and
    zCDP ρ compose linearly), so the factor is the target's loss over the entry's: for pure DP
    ε itself, for zCDP the ρ whose tight conversion gives ε = ``target`` at δ = 10⁻¹⁰. The card
    at the settings found is checked to be on target."""
    why = unmatchable(name, settings, census)
    if why is not None:
        raise ValueError(f"{name} cannot be matched on {MATCH_AXIS}: {why.reason}")
    entry = protection.get(name)
    assert entry.rescale is not None
    start = entry.parse(settings, census)
    loss = entry.card(start).guarantee.person_replace
    assert not isinstance(loss, NotMeasured)
    if loss.measure == "pure":
        assert loss.epsilon is not None
        factor = Fraction(target) / Fraction(loss.epsilon)
    elif loss.measure == "zcdp":
        assert loss.rho is not None
        factor = Fraction(rho_for_epsilon(target)) / Fraction(loss.rho)
    else:
        raise ValueError(f"{name}: an (ε, δ) guarantee does not scale with one budget factor")
    chosen = entry.rescale(start, factor.limit_denominator(10**15))
    epsilon = common_epsilon(name, {**settings, **chosen}, census)
    assert not isinstance(epsilon, NotMeasured)
    if not math.isclose(epsilon, target, rel_tol=ROUNDING):
        raise ValueError(
            f"{name}: its budgets scaled to ε = {target:g} give ε = {epsilon:.6g} on the card"
        )
    return Matched(target, chosen, epsilon)


def rho_for_epsilon(epsilon: float) -> float:
    """The zCDP ρ whose tight conversion is ``epsilon`` at δ = 10⁻¹⁰."""
    from sdclab.core import accounting

    def gap(log_rho: float) -> float:
        return math.log(accounting.epsilon_for_delta(math.exp(log_rho), COMMON_DELTA)) - math.log(
            epsilon
        )

    low, high = LOG_RHO_RANGE
    if not gap(low) < 0 < gap(high):
        lowest, highest = (
            accounting.epsilon_for_delta(math.exp(r), COMMON_DELTA) for r in (low, high)
        )
        raise ValueError(
            f"ε = {epsilon:g}: a zCDP budget is matched for ε from {lowest:.3g} to {highest:.3g} "
            f"at δ = {COMMON_DELTA:g} (ρ from e^{low:g} to e^{high:g})"
        )
    return math.exp(optimize.brentq(gap, low, high, xtol=1e-13))


LOG_RHO_RANGE = (-40.0, 15.0)
"""ln ρ of the budgets :func:`rho_for_epsilon` solves among (ε ≈ 5·10⁻⁹ to 3.3·10⁶); the tight
conversion overflows not far above."""
