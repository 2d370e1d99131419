"""Privacy audits: statistically valid lower bounds on a mechanism's privacy loss, measured by
running the mechanism on neighbouring datasets many times.

The method follows the auditing literature (Jagielski, Ullman & Oprea 2020; Nasr et al. 2021): a
small neighbouring pair of datasets (D, D′) is copied into many geounits whose outputs the
mechanism draws independently (blocks, tracts, or the children of a TopDown parent), so that one
run of the real mechanism gives many independent trials of its observed outputs. Half of the
trials choose a distinguishing event: a linear score of the outputs (weights from the difference
of the means over the variances) above or below a threshold. The other half measure the event's
probability under D and under D′ with Clopper–Pearson intervals (of each only the one side used,
at level α/2, so that both hold together with confidence 1 − α). Then, with confidence 1 − α:

* pure ε-DP: ε ≥ ln(P̲[E | D] / P̄[E | D′]);
* ρ-zCDP: ρ ≥ max over α > 1 of D_α(Bern(P̲) ‖ Bern(P̄)) / α — post-processing into the event E
  cannot increase a Rényi divergence, and ρ-zCDP bounds D_α by αρ.

The bound is set beside what the mechanism's card claims for the outputs observed and the
neighbours used (sequential composition over the observed tables or queries). A bound above the
claim is a violation: the mechanism leaks more than its card says.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import stats

from sdclab import protection
from sdclab.core.arrays import FloatArray, IntArray
from sdclab.core.errors import InputError
from sdclab.protection.audit_plans import MAX_TRIALS, Claim

ALPHA = 0.05
"""1 − the confidence of every reported bound."""

RENYI_ORDERS = 1.0 + np.geomspace(1e-3, 1e4, 400)
"""Orders α at which the Rényi divergence of the two event probabilities is evaluated."""


# ---------------------------------------------------------------------------------------------
# Statistics: Clopper–Pearson intervals and the bounds they give
# ---------------------------------------------------------------------------------------------


def clopper_pearson(successes: npt.ArrayLike, trials: int, alpha: float) -> tuple[Any, Any]:
    """Exact two-sided (1 − α) interval for a binomial probability (each side α/2)."""
    k = np.asarray(successes, dtype=np.float64)
    low = np.where(k > 0, stats.beta.ppf(alpha / 2, k, trials - k + 1), 0.0)
    high = np.where(k < trials, stats.beta.ppf(1 - alpha / 2, k + 1, trials - k), 1.0)
    return low, high


def epsilon_bound(p_low: npt.ArrayLike, q_high: npt.ArrayLike) -> FloatArray:
    """Pure ε implied by P[E | D] ≥ p_low and P[E | D′] ≤ q_high: ln(p_low / q_high), ≥ 0."""
    p, q = np.asarray(p_low, dtype=np.float64), np.asarray(q_high, dtype=np.float64)
    with np.errstate(divide="ignore"):
        ratio = np.log(np.maximum(p, 1e-300)) - np.log(np.maximum(q, 1e-300))
    return np.asarray(np.where((p > 0) & (p > q), ratio, 0.0), dtype=np.float64)


def rho_bound(p_low: npt.ArrayLike, q_high: npt.ArrayLike) -> FloatArray:
    """zCDP ρ implied by the two probabilities: max_α D_α(Bern(p) ‖ Bern(q)) / α, ≥ 0.

    For p > q the Bernoulli divergence grows with p and falls with q, so the interval ends
    (p̲, q̄) give a valid lower bound."""
    p = np.asarray(p_low, dtype=np.float64)[..., None]
    q = np.asarray(q_high, dtype=np.float64)[..., None]
    a = RENYI_ORDERS
    with np.errstate(divide="ignore", invalid="ignore"):
        first = np.where(p > 0, a * np.log(p) + (1 - a) * np.log(q), -np.inf)
        second = np.where(p < 1, a * np.log1p(-p) + (1 - a) * np.log1p(-q), -np.inf)
        divergence = np.logaddexp(first, second) / (a - 1)
    best = np.nanmax(np.where(np.isfinite(divergence), divergence / a, np.inf), axis=-1)
    ok = (p[..., 0] > q[..., 0]) & (q[..., 0] > 0)
    unbounded = (p[..., 0] > 0) & (q[..., 0] == 0)
    return np.asarray(np.where(ok, best, np.where(unbounded, np.inf, 0.0)), dtype=np.float64)


BOUNDS: dict[str, Callable[[npt.ArrayLike, npt.ArrayLike], FloatArray]] = {
    "pure": epsilon_bound,
    "zcdp": rho_bound,
}


# ---------------------------------------------------------------------------------------------
# The distinguisher: a linear score and a threshold, chosen on half of the trials
# ---------------------------------------------------------------------------------------------


SIGNIFICANT = 3.0
"""Outputs whose means under D and D′ differ by fewer standard errors get no weight."""


def score_weights(
    d: FloatArray, d_prime: FloatArray, shift: FloatArray | None = None
) -> FloatArray:
    """Weights of a linear score: difference of the means over the pooled variance, for the
    outputs whose means differ significantly (the others would only add noise to the score);
    outputs constant under each dataset but different between them get a dominant weight. With
    a known ``shift`` of the means, exactly the shifted outputs are weighted."""
    var = (d.var(axis=0) + d_prime.var(axis=0)) / 2
    if shift is not None:
        diff, keep = shift, shift != 0
    else:
        diff = d.mean(axis=0) - d_prime.mean(axis=0)
        keep = np.abs(diff) > SIGNIFICANT * np.sqrt(2 * var / len(d))
    weights = np.where(var > 0, diff / np.where(var > 0, var, 1), diff * 1e6)
    return np.asarray(np.where(keep, weights, 0.0))


@dataclass(frozen=True)
class Event:
    """E = {score ≥ threshold} (orientation +1, likelier under D) or {score < threshold}
    (orientation −1, likelier under D′)."""

    threshold: float
    orientation: int


def event_counts(
    score_d: FloatArray, score_dp: FloatArray, thresholds: FloatArray
) -> tuple[IntArray, IntArray]:
    """How many trials of D and of D′ score at or above each threshold."""
    above_d = len(score_d) - np.searchsorted(np.sort(score_d), thresholds, side="left")
    above_dp = len(score_dp) - np.searchsorted(np.sort(score_dp), thresholds, side="left")
    return above_d.astype(np.int64), above_dp.astype(np.int64)


def oriented_bounds(
    above_d: IntArray, above_dp: IntArray, n: int, premetric: str, alpha: float
) -> tuple[FloatArray, FloatArray]:
    """Lower bounds from the events {score ≥ t} (D likelier) and {score < t} (D′ likelier)."""
    bound = BOUNDS[premetric]
    low_d, _ = clopper_pearson(above_d, n, alpha)
    _, high_dp = clopper_pearson(above_dp, n, alpha)
    low_dp_below, _ = clopper_pearson(n - above_dp, n, alpha)
    _, high_d_below = clopper_pearson(n - above_d, n, alpha)
    return bound(low_d, high_dp), bound(low_dp_below, high_d_below)


def choose_event(score_d: FloatArray, score_dp: FloatArray, premetric: str, alpha: float) -> Event:
    """The threshold and orientation that give the largest bound on these (selection) trials."""
    pooled = np.concatenate([score_d, score_dp])
    thresholds = np.unique(np.quantile(pooled, np.linspace(0, 1, 401)))
    above_d, above_dp = event_counts(score_d, score_dp, thresholds)
    plus, minus = oriented_bounds(above_d, above_dp, len(score_d), premetric, alpha)
    if plus.max() >= minus.max():
        return Event(float(thresholds[int(plus.argmax())]), 1)
    return Event(float(thresholds[int(minus.argmax())]), -1)


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AuditResult:
    mechanism: str
    claim: Claim
    lower_bound: float
    """ε (pure) or ρ (zCDP), with confidence 1 − alpha."""
    trials: int
    """Trials of D and of D′ each (half choose the event, half measure it)."""
    alpha: float
    event: str
    p_d: float
    """P[E | D] measured on the evaluation half."""
    p_d_prime: float
    """P[E | D′] measured on the evaluation half."""

    @property
    def unit(self) -> str:
        return "epsilon" if self.claim.premetric == "pure" else "rho"

    @property
    def violated(self) -> bool:
        """The measured lower bound exceeds the claim: the card understates the privacy loss."""
        return self.lower_bound > self.claim.value

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (``sdclab audit --out`` writes it after the results' schema version)."""
        return asdict(self) | {"unit": self.unit, "violated": self.violated}


def measure(
    name: str,
    claim: Claim,
    d: FloatArray,
    d_prime: FloatArray,
    alpha: float = ALPHA,
    shift: FloatArray | None = None,
) -> AuditResult:
    """The lower bound from trials × outputs of D and D′ (rows independent, same columns).

    ``shift``: the known difference of the expected outputs (exact answers on D minus on D′) of
    an additive-noise mechanism; without it the difference is estimated on the selection half.
    """
    if d.shape != d_prime.shape or d.ndim != 2 or len(d) < 4:
        raise ValueError(
            f"audit {name}: need equal trials × outputs arrays, got {d.shape}, {d_prime.shape}"
        )
    half = len(d) // 2
    weights = score_weights(d[:half], d_prime[:half], shift)
    select_d, select_dp = d[:half] @ weights, d_prime[:half] @ weights
    event = choose_event(select_d, select_dp, claim.premetric, alpha)
    test_d, test_dp = d[half:] @ weights, d_prime[half:] @ weights
    n = len(test_d)
    above_d, above_dp = event_counts(test_d, test_dp, np.array([event.threshold]))
    plus, minus = oriented_bounds(above_d, above_dp, n, claim.premetric, alpha)
    below_d, below_dp = n - above_d[0], n - above_dp[0]
    where = "≥" if event.orientation > 0 else "<"
    return AuditResult(
        mechanism=name,
        claim=claim,
        lower_bound=float((plus if event.orientation > 0 else minus)[0]),
        trials=len(d),
        alpha=alpha,
        event=f"score {where} {event.threshold:.4g} over {d.shape[1]} outputs "
        f"(likelier under {'D' if event.orientation > 0 else 'D′'})",
        p_d=float((above_d[0] if event.orientation > 0 else below_d) / n),
        p_d_prime=float((above_dp[0] if event.orientation > 0 else below_dp) / n),
    )


def audit(
    mechanism: str,
    settings: Mapping[str, Any] | None = None,
    trials: int = 10_000,
    seed: int = 0,
    alpha: float = ALPHA,
) -> AuditResult:
    """Run ``mechanism`` ``trials`` times on each of two neighbouring datasets and bound its
    privacy loss from below (confidence 1 − ``alpha``), beside its card's claim."""
    plan = protection.get(mechanism).audit_plan
    if plan is None:
        auditable = [m.name for m in protection.MECHANISMS.values() if m.audit_plan is not None]
        raise InputError(
            f"audit: no audit for mechanism {mechanism!r}; auditable: {', '.join(auditable)}"
        )
    if not 100 <= trials <= MAX_TRIALS:
        raise InputError(f"audit: --trials must be between 100 and {MAX_TRIALS:,}, got {trials}")
    if not 0 < alpha < 1:
        raise InputError(f"audit: alpha must lie in (0, 1), got {alpha}")
    observed = plan(settings or {}, trials, seed)
    return measure(mechanism, observed.claim, observed.d, observed.d_prime, alpha, observed.shift)
