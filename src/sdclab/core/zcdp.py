"""zCDP's conversions to (ε, δ)-DP: the standard bound and the tight one.

A ρ-zCDP guarantee holds (ε, δ)-DP for every δ; these give ε at a δ (and δ at an ε) for the
cards' second line and the common axis.
"""

from __future__ import annotations

import math

from scipy import optimize


def epsilon_standard(rho: float, delta: float) -> float:
    """(ε, δ) from ρ-zCDP with the standard bound ε = ρ + 2√(ρ ln(1/δ)) (Bun & Steinke 2016)."""
    _check_rho_delta(rho, delta)
    return rho + 2 * math.sqrt(rho * math.log(1 / delta))


def _log_delta_at(alpha: float, rho: float, epsilon: float) -> float:
    """log of (exp((α−1)(αρ−ε)) / (α−1)) · (1 − 1/α)^α."""
    return (
        (alpha - 1) * (alpha * rho - epsilon) - math.log(alpha - 1) + alpha * math.log1p(-1 / alpha)
    )


def delta_for_epsilon(rho: float, epsilon: float) -> float:
    """Tight δ(ε) of a ρ-zCDP mechanism (Canonne, Kamath & Steinke 2020, Corollary 13):

    δ = inf_{α>1} exp((α−1)(αρ−ε)) / (α−1) · (1 − 1/α)^α   (capped at 1).
    """
    if rho <= 0:
        raise ValueError(f"rho must be positive, got {rho}")
    if epsilon < 0:
        raise ValueError(f"epsilon must be non-negative, got {epsilon}")
    # the quadratic part is minimised at α* = (ε + ρ) / (2ρ); search x = ln(α − 1) around it
    upper = math.log(4 * (epsilon + rho) / (2 * rho) + 10)
    result = optimize.minimize_scalar(
        lambda x: _log_delta_at(1 + math.exp(x), rho, epsilon),
        bounds=(math.log(1e-9), upper),
        method="bounded",
        options={"xatol": 1e-12, "maxiter": 2000},
    )
    return min(1.0, math.exp(result.fun))


def epsilon_for_delta(rho: float, delta: float) -> float:
    """Smallest ε with δ(ε) ≤ ``delta`` under the tight conversion (inverts delta_for_epsilon)."""
    _check_rho_delta(rho, delta)
    high = epsilon_standard(rho, delta)  # the standard bound is never tighter
    if delta_for_epsilon(rho, 0.0) <= delta:
        return 0.0
    return float(
        optimize.brentq(
            lambda e: math.log(delta_for_epsilon(rho, e)) - math.log(delta), 0.0, high, xtol=1e-12
        )
    )


def _check_rho_delta(rho: float, delta: float) -> None:
    if rho <= 0:
        raise ValueError(f"rho must be positive, got {rho}")
    if not 0 < delta < 1:
        raise ValueError(f"delta must lie in (0, 1), got {delta}")
