"""Independent discrete Gaussian noise on every cell of a set of histogram queries.

The plainest zCDP counts mechanism, and the building block of TopDown's measurements: each of
``queries`` histograms (each a partition of the records into cells) gets N_Z(0, σ²) noise per cell.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING, Annotated, Any, Literal

import numpy as np
import numpy.typing as npt
from pydantic import Field, model_validator

from sdclab.core import accounting, noise
from sdclab.core.accounting import SpecCard
from sdclab.core.privacy import Loss, person_guarantee
from sdclab.protection import audit_plans
from sdclab.protection.base import (
    Mechanism,
    NoisePublication,
    Parameters,
    Unit,
)
from sdclab.protection.budgets import check_budget_range

if TYPE_CHECKING:
    from sdclab.release import Release


class GaussianParameters(Parameters):
    """Give either ``sigma2`` (noise variance per cell) or ``rho`` (total zCDP budget).

    Both are decimals, so that "0.03" means exactly 3/100 in the budget arithmetic.
    """

    sigma2: Annotated[Decimal | None, Unit("variance of a cell's noise")] = Field(
        None, gt=0, allow_inf_nan=False
    )
    """σ², the noise variance of every cell (give exactly one of sigma2 and rho)"""
    rho: Annotated[Decimal | None, Unit("zCDP rho")] = Field(None, gt=0, allow_inf_nan=False)
    """total budget, spent evenly over the queries: it sets σ² (give exactly one of sigma2 and
    rho)"""
    queries: Annotated[int, Unit("queries")] = Field(1, ge=1)
    """number of histogram queries, composed sequentially"""
    neighbours: Literal["bounded", "unbounded"] = "bounded"
    """bounded: neighbours differ by replacing one record; unbounded: by adding or removing one (the
    sensitivity, hence the budget a σ² costs)"""
    delta: Annotated[float, Unit("delta (approximate DP)")] = Field(1e-10, gt=0, lt=1)
    """δ at which (ε, δ) is also reported"""

    @model_validator(mode="after")
    def _one_scale(self) -> GaussianParameters:
        if (self.sigma2 is None) == (self.rho is None):
            raise ValueError("give exactly one of sigma2 and rho")
        return self

    @model_validator(mode="after")
    def _within_sampler_range(self) -> GaussianParameters:
        """The variance must lie where the exact sampler works (ρ = 10⁻³⁰⁰ or 10³⁰⁰ crashed the
        card and the audit)."""
        low, high = noise.SIGMA2_RANGE
        if self.rho is not None:
            check_budget_range("rho", self.rho, [self.noise_variance()], (low, high), "variance")
        elif not low <= Fraction(self.noise_variance()) <= high:
            raise ValueError(
                f"sigma2 = {self.sigma2} is outside the {float(low):g}..{float(high):g} the exact "
                "sampler supports"
            )
        return self

    def noise_variance(self) -> Fraction:
        """σ² per cell: given, or the one that spends ``rho`` evenly over the queries."""
        if self.sigma2 is not None:
            return Fraction(self.sigma2)
        assert self.rho is not None
        sensitivity = accounting.histogram_sensitivity_l2_squared(self.neighbours)
        return Fraction(sensitivity) * self.queries / (2 * Fraction(self.rho))

    def total_rho(self) -> Fraction:
        sensitivity = accounting.histogram_sensitivity_l2_squared(self.neighbours)
        per_query = accounting.gaussian_rho(self.noise_variance(), sensitivity)
        return accounting.compose_rho(*[per_query] * self.queries)


MECHANISM = Mechanism(
    "gaussian",
    "discrete Gaussian noise on every cell (zCDP)",
    GaussianParameters,
    example={"rho": "1"},
)


@MECHANISM.define("check")
def check_release(_release: Release, _: GaussianParameters) -> str | None:
    """No release of this mechanism exists: it has a card and an audit, but protects no data."""
    return "mechanism gaussian protects no data (it has a card and an audit), so it made no release"


def noisy_histogram(
    counts: npt.NDArray[np.int64], p: GaussianParameters, rng: np.random.Generator
) -> npt.NDArray[np.int64]:
    """One histogram query answered: every cell plus exact discrete Gaussian noise of variance
    ``p.noise_variance()`` (any array shape; cells independent)."""
    counts = np.asarray(counts, dtype=np.int64)
    return counts + noise.discrete_gaussian(p.noise_variance(), counts.shape, rng)


@MECHANISM.define("guarantee")
def card(p: GaussianParameters) -> SpecCard:
    rho = float(p.total_rho())
    sigma2 = p.noise_variance()
    relation = accounting.relation_of(p.neighbours)
    # a histogram's Δ₂² is 1 under add/remove and 2 under replace: ρ doubles
    guarantee = person_guarantee(Loss("zcdp", rho=p.total_rho()), relation, zcdp_factor=2)
    return SpecCard(
        mechanism="gaussian",
        domain="datasets of person records over the histogram's domain",
        multiverse="a single universe: no statistic is published exactly",
        guarantee=guarantee,
        covers=f"{p.queries} histogram quer{'y' if p.queries == 1 else 'ies'} with discrete "
        f"Gaussian noise of variance {float(sigma2):g} per cell",
        caveats=(
            f"(epsilon, delta) at delta = {p.delta:g} for the stated neighbours ({p.neighbours}): "
            "epsilon = "
            f"{accounting.epsilon_for_delta(rho, p.delta):.4f} (tight conversion, Canonne, Kamath "
            f"& Steinke 2020), {accounting.epsilon_standard(rho, p.delta):.4f} (standard bound)",
            f"95% margin of error of a noisy cell: ±{accounting.gaussian_margin_of_error(sigma2)}"
            " (exact discrete Gaussian)",
            "Noisy counts may be negative and tables are not consistent with one another.",
        ),
    )


@MECHANISM.define("noise")
def published_noise(p: GaussianParameters) -> NoisePublication:
    return NoisePublication(
        distribution="discrete Gaussian, independent per cell",
        published=("parameters: sigma2, or rho and queries, fix the variance of every cell",),
        parameters={"variance": float(p.noise_variance())},
    )


@MECHANISM.define("audit_plan")
def audit_plan(settings: Mapping[str, Any], trials: int, seed: int) -> audit_plans.Trials:
    """A histogram of two cells; one person moves between them (bounded) or is added."""
    given = dict(settings)
    default = {} if "rho" in given or "sigma2" in given else {"rho": "0.5"}
    p = MECHANISM.parse(default | given)
    d = np.tile([1, 0], (trials, 1))
    d_prime = np.tile([0, 1] if p.neighbours == "bounded" else [0, 0], (trials, 1))
    rng = np.random.default_rng(seed)
    claim = audit_plans.Claim(
        "zcdp", float(p.total_rho()) / p.queries, "one histogram query of two cells", p.neighbours
    )
    noisy = [noisy_histogram(x, p, rng).astype(float) for x in (d, d_prime)]
    return audit_plans.Trials(claim, noisy[0], noisy[1], shift=(d[0] - d_prime[0]).astype(float))
