"""Per-cell truncated noise, (ε, δ)-DP: discrete Laplace noise conditioned on |noise| ≤ E.

The bounded counterpart of :mod:`sdclab.protection.geometric` that F. Bach, *Differential privacy
and noisy confidentiality concepts for European population statistics* (§2.3, §4), sets against
the cell key method: DP noise truncated at a bound E gives up strict ε-DP (the neighbour cannot
reach the outermost output) for an (ε, δ) guarantee, and in exchange never errs by more than E —
the property the cell key method is chosen for. Every cell of every table at every level, zeros
included, gets independent noise P(x) ∝ exp(−ε|x|) on {−E..E} from the exact sampler.

Per count, a change of one record moves the count by at most 1, and the noise gives (ε, δ(ε))
with δ the hockey-stick divergence of the noise and its shift by one (:func:`delta_at`): the mass
q(E) of the output the neighbour cannot reach, once ε is at least the noise's rate. E is given
(``bound``) or is the smallest bound meeting a per-count ``delta``. The noise is independent across
cells, so a person's guarantee over the release composes the t cells the person moves: (tε,
1 − (1 − δ)^t) (as for the cell key method without SPSN).
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache
from typing import Annotated, Any

import numpy as np
from pydantic import Field, model_validator

from sdclab.censuses.us2010.population import Population
from sdclab.core import accounting, noise
from sdclab.core.accounting import SpecCard
from sdclab.core.arrays import FloatArray, IntArray
from sdclab.core.cell_model import CellBounds, bounds, table_columns
from sdclab.core.census.model import cells_per_person
from sdclab.core.diagnostics import Diagnostics
from sdclab.core.errors import InputError
from sdclab.core.privacy import Guarantee, Loss, composed_over_cells
from sdclab.core.tables.definition import TableDef
from sdclab.protection import geometric
from sdclab.protection.base import (
    Mechanism,
    NoisePublication,
    Unit,
    WorkloadParameters,
)
from sdclab.protection.budgets import decimal_text
from sdclab.protection.checks import additive_range, counts_problem
from sdclab.release import Release

LARGEST_BOUND = 10_000
"""The largest noise bound E accepted (its pmf is computed densely)."""


class TruncatedParameters(WorkloadParameters):
    """The noise's rate ε per count and its bound E (given, or derived from a per-count δ)."""

    epsilon: Annotated[Decimal, Unit("epsilon per count")] = Field(
        Decimal("0.5"), gt=0, le=100, allow_inf_nan=False
    )
    """the noise's rate: P(x) ∝ exp(−epsilon·|x|), the ε of each count's guarantee"""
    bound: Annotated[int | None, Unit("persons")] = Field(None, ge=1, le=LARGEST_BOUND)
    """E, the largest noise: |x| ≤ E in every cell (give it or delta, not both)"""
    delta: Annotated[Decimal | None, Unit("delta per count")] = Field(
        Decimal("0.008"), gt=0, lt=1, allow_inf_nan=False
    )
    """when bound is not given: E is the smallest bound whose δ per count at epsilon is at most
    this"""
    nonnegative: bool = False
    """true: post-process negative noisy counts to 0; false: keep them"""

    @model_validator(mode="after")
    def _bound_or_delta(self) -> TruncatedParameters:
        if self.bound is not None and "delta" in self.model_fields_set and self.delta is not None:
            raise ValueError("give bound or delta, not both (the bound fixes delta)")
        if self.bound is None and self.delta is None:
            raise ValueError("give bound (E) or delta (E is then derived from it)")
        if Fraction(1) / Fraction(self.epsilon) > noise.SCALE_RANGE[1]:
            raise ValueError(
                f"epsilon = {self.epsilon} is below the exact sampler's range (at least "
                f"{float(1 / noise.SCALE_RANGE[1]):g})"
            )
        if Fraction(self.epsilon).denominator >= noise.SCALE_NUMERATOR_LIMIT:
            raise ValueError(
                f"epsilon = {self.epsilon} has too many significant digits for the exact sampler "
                "(its noise scale 1/epsilon must be a fraction whose numerator is below 2^62): "
                "round it"
            )
        if self.bound is None and smallest_bound(self.rate, float(self.delta or 0)) is None:
            raise ValueError(
                f"delta = {self.delta}: no bound up to {LARGEST_BOUND} reaches it at epsilon = "
                f"{self.epsilon}"
            )
        return self

    @property
    def rate(self) -> Fraction:
        return Fraction(self.epsilon)

    @property
    def noise_bound(self) -> int:
        """E: as given, or the smallest bound meeting ``delta`` per count."""
        if self.bound is not None:
            return self.bound
        found = smallest_bound(self.rate, float(self.delta or 0))
        assert found is not None  # (checked by the validator)
        return found

    def recorded(self) -> dict[str, Any]:
        data = super().recorded() | {"bound": self.noise_bound}
        data.pop("delta", None)  # (the bound it gave is recorded; the bound fixes δ)
        return data


MECHANISM = Mechanism(
    "truncated",
    "per-cell discrete Laplace noise truncated at a bound E ((epsilon, delta)-DP)",
    TruncatedParameters,
    any_census=True,
    example={"epsilon": "0.5", "bound": "7"},
)


@lru_cache(maxsize=256)
def noise_pmf(rate: Fraction, bound: int) -> FloatArray:
    """P(x) for x = −E..E: exp(−ε|x|) normalised."""
    x = np.arange(-bound, bound + 1)
    weights = np.exp(-float(rate) * np.abs(x))
    pmf = weights / weights.sum()
    pmf.flags.writeable = False
    return pmf


def delta_at(rate: Fraction, bound: int, epsilon: float) -> float:
    """δ(ε) of one count: max over the two directions of Σ_y [P(y) − e^ε P(y − 1)]₊ for the
    noise P and its shift by one (the neighbouring count); symmetric noise makes both equal."""
    pmf = noise_pmf(rate, bound)
    here, shifted = np.pad(pmf, (0, 1)), np.pad(pmf, (1, 0))
    factor = math.exp(min(epsilon, 700.0))
    return float(np.maximum(here - factor * shifted, 0.0).sum())


def smallest_bound(rate: Fraction, delta: float) -> int | None:
    """The smallest E whose δ(ε) per count, at ε = the noise's rate, is at most ``delta``: the
    mass q(E) at the bound (None when no E up to :data:`LARGEST_BOUND` reaches it)."""
    r = math.exp(-float(rate))
    for bound in range(1, LARGEST_BOUND + 1):  # q(E) falls like r^E: found within a few hundred
        norm = (1 + r - 2 * r ** (bound + 1)) / (1 - r) if r < 1 else 2 * bound + 1
        if r**bound / norm <= delta * (1 - 1e-9):  # (a margin for the rounding of floats)
            return bound
    return None


def variance(rate: Fraction, bound: int) -> float:
    pmf = noise_pmf(rate, bound)
    x = np.arange(-bound, bound + 1)
    return float((pmf * x * x).sum())


def margin_of_error(rate: Fraction, bound: int, level: float = 0.95) -> int:
    """The smallest m with P(|x| ≤ m) ≥ ``level``."""
    values = np.arange(-bound, bound + 1)
    return accounting.margin_of_error(values, noise_pmf(rate, bound), level)


def summed_noise(rate: Fraction, bound: int, terms: int) -> tuple[IntArray, FloatArray]:
    """(values, pmf) of the sum of ``terms`` independent cell noises: the noise's pmf convolved
    ``terms`` times (exact up to rounding; its support is −terms·E..terms·E)."""
    pmf = noise_pmf(rate, bound)
    summed = pmf
    for _ in range(terms - 1):
        summed = np.convolve(summed, pmf)
    return np.arange(-bound * terms, bound * terms + 1), summed


@MECHANISM.define("protect")
def protect(population: Population, p: TruncatedParameters, rng: np.random.Generator) -> Release:
    """Every cell of every table at every level (zeros included) plus truncated noise."""
    bound = p.noise_bound

    def draw(table: TableDef, level: str, shape: tuple[int, int]) -> IntArray:
        drawn = noise.truncated_discrete_laplace(1 / p.rate, bound, shape, rng)
        if np.abs(drawn).max(initial=0) > bound:  # the invariant of the mechanism
            raise AssertionError(f"{table.name} at {level}: noise beyond the bound {bound}")
        return drawn

    return geometric.per_cell_release(population, p, card(p), draw, p.nonnegative)


@MECHANISM.define("diagnostics")
def diagnostics(truth: Population, release: Release) -> tuple[Diagnostics, ...]:
    """Evaluation only: the tails of the bounded noise on small areas, expected and sampled, as
    for geometric noise (on the US census's P1 and P12; none for another census)."""
    if not {"P1", "P12"} <= set(release.tables) or truth.census.name != "us2010":
        return ()
    p = MECHANISM.parse(release.parameters, truth.census)
    rate, bound = p.rate, p.noise_bound
    return (
        geometric.tails(
            release,
            truth,
            lambda _name, _level, terms: summed_noise(rate, bound, terms),
            lambda _level: float(1 / rate),
        ),
    )


@MECHANISM.define("rescale")
def rescale(p: TruncatedParameters, factor: Fraction) -> dict[str, str]:
    """ε per count times ``factor``; the bound, or the per-count δ, as the settings give it."""
    return {"epsilon": decimal_text(p.rate * factor)}


def release_guarantee(p: TruncatedParameters) -> tuple[Guarantee, int, Loss]:
    """(The person's guarantee over the release, t the cells a person moves, the per-count
    loss): the per-count (ε, δ) composed over t independent cells."""
    delta = delta_at(p.rate, p.noise_bound, float(p.rate))
    per_count = Loss("approximate", epsilon=p.rate, delta=delta)
    t = cells_per_person(p.census, None if p.tables is None else tuple(p.workload_names()))
    guarantee = composed_over_cells(per_count, t)
    return guarantee, t, per_count


def unit_caveat(p: TruncatedParameters, per_count: Loss) -> str:
    """A housing-unit record's guarantee: the per-count loss composed over the unit tables'
    cells it is counted in, every level (none when the workload has no unit table)."""
    tables = p.workload()
    cells = sum(t.most_cells_per_record * len(t.levels) for t in tables if t.records != "persons")
    if not cells:
        return "Housing-unit records: the workload has no unit table."
    loss = composed_over_cells(per_count, cells).loss
    assert loss is not None  # (a composed loss)
    return f"Housing-unit records: {loss.text()} over the {cells:,} unit-table cells one is in."


REPORTED_EPSILONS = (0.1, 0.25, 0.5, 1.0, 1.5, 2.0)
"""ε values at which the card lists δ(ε) per count."""


@MECHANISM.define("guarantee")
def card(p: TruncatedParameters) -> SpecCard:
    """(ε, δ) per count from the truncated noise, composed over the cells a person moves."""
    bound = p.noise_bound
    guarantee, t, per_count = release_guarantee(p)
    spread, margin = variance(p.rate, bound), margin_of_error(p.rate, bound)
    rows = [
        {
            "epsilon per count": eps,
            "delta per count": delta_at(p.rate, bound, eps),
            "bound E": bound,
            "variance": spread,
            "95% MOE": margin,
        }
        for eps in sorted({float(p.rate), *REPORTED_EPSILONS})
    ]
    return SpecCard(
        mechanism="truncated",
        domain="person and housing-unit records of the tabulated population",
        multiverse="a single universe: no statistic is published exactly",
        guarantee=guarantee,
        covers=p.workload_text()
        + f" at every level, each cell with independent noise bounded by E = {bound} (composed "
        f"over the t = {t:,} cells a person moves)",
        caveats=(
            f"Per count: {per_count.text()} — delta is the mass at the bound, which the "
            "neighbouring count cannot reach: bounded noise is never strictly epsilon-DP.",
            f"No noise exceeds E = {bound} (the tail beyond the bound is 0); variance "
            f"{spread:.4g}, 95% of cells within ±{margin}.",
            "Noisy counts may be negative"
            + (" (clamped to 0 here: post-processing)" if p.nonnegative else "")
            + "; tables are not consistent with one another.",
            "The bound E is public: with additive margins it allows the noise-bound attack of "
            "the cell key method (`sdclab ckm-risk` on a cell key release).",
            unit_caveat(p, per_count),
        ),
        allocation=tuple(rows),
        allocation_title="Delta per count at each epsilon (no budget is split)",
    )


@MECHANISM.define("noise")
def published_noise(p: TruncatedParameters) -> NoisePublication:
    return NoisePublication(
        distribution="discrete Laplace truncated at E (P(x) ∝ exp(−epsilon·|x|) on −E..E), "
        "independent per cell" + ("; negative counts then set to 0" if p.nonnegative else ""),
        published=("parameters: epsilon and bound fix every cell's noise",),
        parameters={"epsilon": float(p.rate), "bound": p.noise_bound},
    )


@MECHANISM.define("check")
def check_release(release: Release, p: TruncatedParameters) -> str | None:
    """Every count is a whole number within E of a count of 0 or more (and at least 0 where
    negatives are set to 0), and none means more records than its geounit's total allows."""
    bound = p.noise_bound
    rule = (
        f"a whole number{' of at least 0' if p.nonnegative else ''} within E = {bound} of a "
        "count of 0 or more"
    )
    return counts_problem(release, additive_range(lambda _t, _l: bound, p.nonnegative), rule)


@MECHANISM.define("cell_model")
def cell_model(release: Release, names: list[str], level: str, published: FloatArray) -> CellBounds:
    """The attacker's model: the true count lies within E of the published one and is ≥ 0; the
    cost of a distance is epsilon per person (the noise's log-likelihood slope)."""
    parameters = release.noise.get("parameters", {})
    bound, rate = parameters.get("bound"), parameters.get("epsilon")
    if not isinstance(bound, int) or not isinstance(rate, (int, float)) or rate <= 0:
        raise InputError(
            "release (truncated): its noise publication states no bound and epsilon "
            "(release.json noise.parameters)"
        )
    table_columns(release, names)  # (every table named is published)
    return bounds(
        published,
        np.maximum(published - bound, 0.0),
        published + bound,
        np.full_like(published, float(rate)),
    )
