"""Privacy accounting and the DP specification card.

Every mechanism states its guarantee in the five building blocks of Bailie, Gong & Meng, "Can
swapping be differentially private?" (docs/privacy.md): domain, multiverse (invariants), input
premetric (protection unit and neighbouring relation), output premetric, and budget — plus what
the guarantee covers and its caveats. A mechanism without a formal guarantee says so with the
reason; no bare ε is ever printed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from scipy import optimize

from sdclab.core.figures import NotMeasured
from sdclab.core.privacy import (
    COMMON_AXIS,
    MEASURE_TEXT,
    RELATION_TEXT,
    UNIT_TEXT,
    CommonFigure,
    Guarantee,
    Invariant,
    Relation,
    common_axis,
    no_guarantee,
)
from sdclab.core.zcdp import delta_for_epsilon as delta_for_epsilon
from sdclab.core.zcdp import epsilon_for_delta as epsilon_for_delta
from sdclab.core.zcdp import epsilon_standard as epsilon_standard


@dataclass(frozen=True)
class SpecCard:
    """A DP specification in the five building blocks, with coverage and caveats. The input
    premetric (unit, relation), output premetric, invariants and budget are the
    :class:`~sdclab.core.privacy.Guarantee`'s values; the card's text is rendered from them."""

    mechanism: str
    domain: str
    multiverse: str
    guarantee: Guarantee
    covers: str
    caveats: tuple[str, ...] = field(default_factory=tuple)
    allocation: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    """How the budget is split (one row per part, e.g. level, query, share, ρ, σ), if it is; or
    another table of the card's figures, named by ``allocation_title``."""
    allocation_title: str = "Budget allocation"
    per_attribute: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    """Budgets per attribute (only that attribute varies within a universe), one row each, if the
    mechanism states them; they are not parts of a total."""

    @cached_property
    def common(self) -> CommonFigure | NotMeasured:
        """The release's figure on the common axis (ε at δ = 10⁻¹⁰, one person replaced)."""
        return common_axis(self.guarantee)

    def common_text(self) -> str:
        """The common-axis figure in one line, or "not comparable" with the reason."""
        common = self.common
        if isinstance(common, NotMeasured):
            return f"not comparable: {common.reason}"
        return common.text()

    def to_dict(self) -> dict[str, Any]:
        return (
            {
                "mechanism": self.mechanism,
                "domain": self.domain,
                "multiverse": self.multiverse,
                "guarantee": self.guarantee.to_dict(),
                "common_axis": self.common.to_dict(),
                "covers": self.covers,
                "caveats": list(self.caveats),
                "allocation": [dict(row) for row in self.allocation],
            }
            | (
                {"allocation_title": self.allocation_title}
                if self.allocation_title != SpecCard.allocation_title
                else {}
            )
            | (
                {"per_attribute": [dict(r) for r in self.per_attribute]}
                if self.per_attribute
                else {}
            )
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SpecCard:
        return cls(
            mechanism=data["mechanism"],
            domain=data["domain"],
            multiverse=data["multiverse"],
            guarantee=Guarantee.from_dict(data["guarantee"]),
            covers=data["covers"],
            caveats=tuple(data.get("caveats", ())),
            allocation=tuple(data.get("allocation", ())),
            allocation_title=data.get("allocation_title", SpecCard.allocation_title),
            per_attribute=tuple(data.get("per_attribute", ())),
        )

    def render(self) -> str:
        """The card as plain text, one block per line group."""
        g = self.guarantee
        invariants = "; ".join(i.text() for i in g.invariants) if g.invariants else "none"
        relation = "not defined" if g.relation is None else RELATION_TEXT[g.relation]
        budget = g.text() + (f" (asked: {g.asked.text()})" if g.asked is not None else "")
        scope = "" if g.scope == "release" else " — per published cell, not per release"
        common = self.common
        lines = [
            f"DP specification card — mechanism: {self.mechanism}",
            f"  1. Domain (who is protected):       {self.domain}",
            f"  2. Multiverse (invariants):         {self.multiverse}",
            f"       invariants: {invariants}",
            f"  3. Input premetric (what changes):  unit = {UNIT_TEXT[g.unit]}; neighbours: "
            f"{relation}",
            f"  4. Output premetric (how measured): {MEASURE_TEXT[g.measure]}{scope}",
            f"  5. Budget (how much):               {budget}",
            f"  Common axis ({COMMON_AXIS}): {self.common_text()}",
        ]
        if not isinstance(common, NotMeasured):
            lines += [f"       via: {step}" for step in common.derivation]
        lines.append(f"  Covers: {self.covers}")
        lines += [f"  Caveat: {c}" for c in self.caveats]
        if self.allocation:
            lines += [f"  {self.allocation_title}:", *_rows_text(self.allocation)]
        if self.per_attribute:
            lines += ["  Budgets per attribute (not parts of a total):"]
            lines += _rows_text(self.per_attribute)
        return "\n".join(lines)


def _rows_text(rows: tuple[dict[str, Any], ...]) -> list[str]:
    """Rows of one table as aligned lines, the header first."""
    columns = list(rows[0])
    cells = [[_cell(row[c]) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    return [
        "    " + "  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True))
        for row in [columns, *cells]
    ]


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def no_protection_card() -> SpecCard:
    """The card of the exact release: nothing is protected."""
    return SpecCard(
        mechanism="none",
        domain="the confidential input files as given",
        multiverse="a single universe per dataset: every published statistic is exact",
        guarantee=no_guarantee(
            "no protection: the tables are the exact confidential counts",
            invariants=(Invariant("every published table cell", "every geounit"),),
        ),
        covers="all tables of the release",
        caveats=("Not for publication: this release is the confidential tabulation itself.",),
    )


# ---------------------------------------------------------------------------------------------
# Neighbouring relations and sensitivities
# ---------------------------------------------------------------------------------------------

Neighbours = Literal["bounded", "unbounded"]
"""How the mechanisms' parameters name the relations: bounded is replace, unbounded add/remove."""


def relation_of(neighbours: Neighbours) -> Relation:
    """The neighbouring relation a ``neighbours`` parameter names."""
    return "replace" if neighbours == "bounded" else "add_remove"


def histogram_sensitivity_l2_squared(neighbours: Neighbours) -> int:
    """Δ₂² of one histogram (a partition of records into cells): 1 add/remove, 2 replace."""
    return {"unbounded": 1, "bounded": 2}[neighbours]


def histogram_sensitivity_l1(neighbours: Neighbours) -> int:
    """Δ₁ of one histogram: 1 for add/remove, 2 for replacing a record (two cells change)."""
    return {"unbounded": 1, "bounded": 2}[neighbours]


# ---------------------------------------------------------------------------------------------
# zCDP and its conversions
# ---------------------------------------------------------------------------------------------


def gaussian_rho(
    sigma2: float | Fraction, sensitivity_l2_squared: float | Fraction = 1
) -> Fraction:
    """ρ of the (discrete) Gaussian mechanism: Δ₂² / (2σ²), exact for rational inputs."""
    return Fraction(sensitivity_l2_squared) / (2 * Fraction(sigma2))


def compose_rho(*rhos: float | Fraction) -> Fraction:
    """Sequential composition under zCDP: budgets add."""
    return sum((Fraction(r) for r in rhos), Fraction(0))


# ---------------------------------------------------------------------------------------------
# Pure ε and swapping
# ---------------------------------------------------------------------------------------------


def laplace_epsilon(scale: float | Fraction, sensitivity_l1: float | Fraction = 1) -> float:
    """Pure ε of discrete Laplace noise with P(y) ∝ exp(−|y|/scale): Δ₁ / scale."""
    return float(Fraction(sensitivity_l1) / Fraction(scale))


def psa_epsilon(rate: float, largest_group: int) -> float:
    """ε(p, b) of the Permutation Swapping Algorithm (Bailie, Gong & Meng, Theorem II.1).

    ε = max{ln o, ln(b + 1) − ln o} with o = p / (1 − p), for swap rate 0 < p < 1 and b the size
    of the largest matching group.
    """
    if not 0 < rate < 1:
        raise ValueError(f"swap rate must lie in (0, 1), got {rate}")
    if largest_group < 1:
        raise ValueError(f"largest matching group must be at least 1, got {largest_group}")
    log_odds = math.log(rate / (1 - rate))
    return max(log_odds, math.log(largest_group + 1) - log_odds)


# ---------------------------------------------------------------------------------------------
# Error of discrete noise: exact distributions
# ---------------------------------------------------------------------------------------------


def _gaussian_pmf(sigma2: float) -> tuple[np.ndarray, np.ndarray]:
    """Support |y| ≤ 40σ + 40 (the rest has mass below 1e-300) and the normalised pmf on it."""
    reach = int(40 * math.sqrt(sigma2)) + 40
    y = np.arange(-reach, reach + 1)
    log_w = -(y.astype(float) ** 2) / (2 * sigma2)
    w = np.exp(log_w - log_w.max())
    return y, w / w.sum()


SUM_AS_ONE = 16.0
"""From this σ² up, a sum of n independent N_Z(0, σ²) is N_Z(0, nσ²) to within 8n·e^{−π²σ²/2}
(below 10⁻³³·n) in every probability: by Poisson summation, on [−π, π] both characteristic
functions are e^{−nσ²t²/2} but for terms of that size."""
CHUNK = 1 << 20
"""Terms summed at a time where a sum runs over a wide support."""


def _gaussian_sum_pmf(sigma2: float, terms: int) -> tuple[np.ndarray, np.ndarray]:
    """Support and pmf of the sum of ``terms`` independent N_Z(0, σ²) (σ² below
    :data:`SUM_AS_ONE`): the pmf raised to the power ``terms`` by FFT on the support
    |y| ≤ 40√(terms·σ²) + 40 (the mass beyond it, which wraps around, is below 1e-300)."""
    if terms == 1:
        return _gaussian_pmf(sigma2)
    y, p = _gaussian_pmf(sigma2)
    reach = int(40 * math.sqrt(terms * sigma2)) + 40
    size = 2 * reach + 1
    grid = np.zeros(size)
    np.add.at(grid, y % size, p)
    summed = np.fft.irfft(np.fft.rfft(grid) ** terms, size)
    out = np.maximum(np.roll(summed, reach), 0.0)  # index k holds y = k − reach
    return np.arange(-reach, reach + 1), out / out.sum()


def _is_wide(sigma2: float, terms: int) -> bool:
    """Whether a sum of ``terms`` N_Z(0, σ²) is taken as N_Z(0, terms·σ²) (:data:`SUM_AS_ONE`),
    whose coverage :func:`_wide_inside` sums without building its pmf (a cell that sums 15,624
    measured cells of σ² = 10⁸ would need 10⁸ points)."""
    if terms < 1:
        raise ValueError(f"a sum has at least one term, got {terms}")
    return terms > 1 and sigma2 >= SUM_AS_ONE


def _wide_inside(variance: float, bound: int) -> float:
    """P(|X| ≤ bound) for X ~ N_Z(0, V), V ≥ SUM_AS_ONE: (1 + 2Σ_{y=1}^{bound} e^{−y²/2V}) / √(2πV),
    the normaliser by Poisson summation (its other terms are below e^{−2π²V})."""
    total = 0.0
    for start in range(1, max(bound, 0) + 1, CHUNK):
        y = np.arange(start, min(start + CHUNK, bound + 1), dtype=float)
        total += float(np.exp(-(y**2) / (2 * variance)).sum())
    return (1 + 2 * total) / math.sqrt(2 * math.pi * variance)


def _wide_margin(variance: float, level: float) -> int:
    """The smallest E with :func:`_wide_inside` ≥ level, in one pass over y = 1, 2, …"""
    norm = math.sqrt(2 * math.pi * variance)
    need = ((level - 1e-15) * norm - 1) / 2  # Σ_{y=1}^{E} e^{−y²/2V} must reach this
    running, start = 0.0, 1
    while need > 0:
        y = np.arange(start, start + CHUNK, dtype=float)
        summed = running + np.cumsum(np.exp(-(y**2) / (2 * variance)))
        found = int(np.searchsorted(summed, need))
        if found < CHUNK:
            return start + found
        running, start = float(summed[-1]), start + CHUNK
    return 0


def discrete_gaussian_variance(sigma2: float | Fraction) -> float:
    """Exact variance Σy²e^{−y²/2σ²} / Σe^{−y²/2σ²} of N_Z(0, σ²) (below σ² when σ is small)."""
    y, p = _gaussian_pmf(float(sigma2))
    return float((p * y.astype(float) ** 2).sum())


def gaussian_tail(sigma2: float | Fraction, bound: int, terms: int = 1) -> float:
    """P(|X| > bound) for X ~ N_Z(0, σ²), or X the sum of ``terms`` independent such draws."""
    if _is_wide(float(sigma2), terms):
        return 1 - _wide_inside(terms * float(sigma2), bound)
    y, p = _gaussian_sum_pmf(float(sigma2), terms)
    return float(p[np.abs(y) > bound].sum())


def laplace_tail(scale: float | Fraction, bound: int) -> float:
    """P(|X| > bound) for the discrete Laplace with P(y) ∝ exp(−|y|/scale): 2q^{E+1}/(1+q)."""
    q = math.exp(-1 / float(scale))
    return 2 * q ** (bound + 1) / (1 + q) if bound >= 0 else 1.0


def gaussian_margin_of_error(sigma2: float | Fraction, level: float = 0.95, terms: int = 1) -> int:
    """Smallest integer E with P(|X| ≤ E) ≥ level for X ~ N_Z(0, σ²), or X the sum of ``terms``
    independent such draws."""
    _check_level(level)
    if _is_wide(float(sigma2), terms):
        return _wide_margin(terms * float(sigma2), level)
    y, p = _gaussian_sum_pmf(float(sigma2), terms)
    half = p[y >= 0]
    inside = np.cumsum(np.r_[half[0], 2 * half[1:]])
    return int(np.searchsorted(inside, level - 1e-15))


def gaussian_variance_for_margin(margin: int, level: float = 0.95, terms: int = 1) -> float:
    """The largest σ² whose margin of error is at most ``margin``: P(|X| ≤ margin) ≥ level for
    X ~ N_Z(0, σ²), or X the sum of ``terms`` such draws, the coverage falling as σ² grows (the
    inverse of gaussian_margin_of_error)."""
    _check_level(level)
    if margin < 0:
        raise ValueError(f"a margin of error is at least 0, got {margin}")

    def excess(sigma2: float) -> float:
        return 1 - gaussian_tail(sigma2, margin, terms) - level

    low, high = 1e-9, 1.0
    if excess(low) < 0:
        raise ValueError(f"no variance gives coverage {level} within ±{margin}")
    while excess(high) >= 0:
        low, high = high, 2 * high
    return float(optimize.brentq(excess, low, high, xtol=1e-13, rtol=1e-13))


def laplace_margin_of_error(scale: float | Fraction, level: float = 0.95) -> int:
    """Smallest integer E with P(|X| ≤ E) ≥ level for the discrete Laplace of ``scale``."""
    _check_level(level)
    q = math.exp(-1 / float(scale))
    # P(|X| > E) = 2 q^{E+1} / (1+q) ≤ 1 − level  ⇔  E ≥ ln((1−level)(1+q)/2) / ln q − 1,
    # with ln q = −1/scale exactly (log(q) loses digits where q is near 1)
    bound = math.ceil(-math.log((1 - level) * (1 + q) / 2) * float(scale) - 1 - 1e-12)
    return max(0, bound)


def margin_of_error(
    values: npt.ArrayLike, probabilities: npt.ArrayLike, level: float = 0.95
) -> int:
    """Smallest integer E ≥ 0 with P(|X| ≤ E) ≥ level for noise X taking ``values`` with
    ``probabilities`` (any finite pmf: a p-table row)."""
    _check_level(level)
    size = np.abs(np.asarray(values, dtype=np.int64))
    weights = np.asarray(probabilities, dtype=float)
    order = np.argsort(size, kind="stable")
    inside = np.cumsum(weights[order])
    reached = min(int(np.searchsorted(inside, level - 1e-12)), len(order) - 1)
    return int(size[order][reached])


def _check_level(level: float) -> None:
    if not 0 < level < 1:
        raise ValueError(f"confidence level must lie in (0, 1), got {level}")
