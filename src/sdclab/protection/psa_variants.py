"""The PSA's variants that weaken its invariants, and its budgets per attribute.

Bailie, Gong & Meng ("A Refreshment Stirred, Not Shaken (III): Can Swapping Be Differentially
Private?", 2025, §6.2) propose two ways to remove some of swapping's invariants and leave their
protection to future work; sdclab runs both as settings of ``psa`` (docs/swapping.md):

* **probabilistic unit matching** (``cross_match`` = α): a selected household is, with probability
  α, matched across the strata: it is permuted with the other cross-matched households of its
  matching area, whatever their size (and adults), instead of within its matching group;
* **pre-swap perturbation** (``perturb_rate`` = r, ``perturb``): before the swap every value of the
  listed attributes of the households' records is, with probability r, replaced by a uniform draw
  from the attribute's codes (k-ary randomized response); the PSA then swaps the perturbed file.

The paper gives no closed form for either, so their cards state no guarantee (with that reason)
and the audit measures a lower bound. The per-attribute rows of the card follow the paper's
definition (§4.2: only one attribute varies within each universe).
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import polars as pl

from sdclab.core import noise
from sdclab.core.arrays import BoolArray, IntArray
from sdclab.core.errors import InputError
from sdclab.core.privacy import Invariant
from sdclab.protection import audit_plans
from sdclab.protection.swap_pairs import group_ids

if TYPE_CHECKING:
    from sdclab.censuses.us2010.population import Population
    from sdclab.protection.households import Households


class PsaParameters(Protocol):
    """What the variants read of the PSA's parameters (``swapping.PsaParameters``, which
    imports this module)."""

    @property
    def rate(self) -> Decimal: ...
    @property
    def match_adults(self) -> bool: ...
    @property
    def cross_match(self) -> Decimal: ...
    @property
    def perturb_rate(self) -> Decimal: ...
    @property
    def perturb(self) -> tuple[str, ...]: ...
    @property
    def matching_at(self) -> str: ...


PERTURBABLE: dict[str, tuple[str, tuple[int, ...]]] = {
    "tenure": ("units", (1, 2, 3)),
    "sex": ("persons", (1, 2)),
    "race": ("persons", tuple(range(1, 64))),
    "hispanic": ("persons", (0, 1)),
}
"""Attributes the pre-swap perturbation may noise: their records and codes (age is left out: it
defines the number of adults, a matching variable)."""

SOURCE = "Bailie, Gong & Meng (2025, §6.2)"
NO_CLOSED_FORM = (
    "{what}: {source} propose it to remove invariants and leave its protection to future work; "
    "no closed form is known, so no epsilon is stated (`sdclab audit -m psa {setting}` measures "
    "a lower bound)"
)


def variants_on(params: PsaParameters) -> bool:
    """Whether a variant that weakens the PSA's invariants is switched on."""
    return params.cross_match > 0 or params.perturb_rate > 0


def rr_epsilon(categories: int, rate: Fraction | float) -> float:
    """ε of k-ary randomized response that replaces a value w.p. r by a uniform draw from its k
    codes (the old one among them): the likeliest ratio (1 − r + r/k) / (r/k) = 1 + k(1 − r)/r."""
    r = Fraction(rate)
    if not 0 < r <= 1 or categories < 2:
        raise ValueError(
            f"randomized response needs 0 < r ≤ 1 and k ≥ 2, got r = {r}, k = {categories}"
        )
    return math.log1p(categories * (1 - r) / r)


# ---------------------------------------------------------------------------------------------
# The draws
# ---------------------------------------------------------------------------------------------


def cross_matched(
    group: IntArray,
    area: IntArray,
    selected: BoolArray,
    alpha: Fraction,
    rng: np.random.Generator,
) -> IntArray:
    """The permutation's group of each household under probabilistic unit matching: a selected
    household is cross-matched with probability α (an exact Bernoulli draw), and then joins the
    pool of its matching area (households of any size), numbered after the matching groups."""
    crossed = selected & noise.bernoulli(alpha, len(group), rng)
    pools = int(group.max(initial=-1)) + 1 + group_ids(area) if len(group) else group
    return np.where(crossed, pools, group)


def randomized_response(
    values: IntArray, codes: tuple[int, ...], rate: Fraction, rng: np.random.Generator
) -> IntArray:
    """Each value kept, or with probability r (exact Bernoulli) replaced by a uniform code."""
    replaced = noise.bernoulli(rate, len(values), rng)
    out = values.copy()
    out[replaced] = np.asarray(codes)[rng.integers(0, len(codes), size=int(replaced.sum()))]
    return out


def perturbed(
    population: Population, households: Households, params: PsaParameters, rng: np.random.Generator
) -> Population:
    """The population with the households' values of ``perturb`` randomized (pre-swap
    perturbation); group-quarters facilities and residents, which are not swapped, are kept."""
    if population.has_detailed_race and {"race", "hispanic"} & set(params.perturb):
        raise InputError(
            "psa: perturb race or hispanic contradicts the population's detailed race codes "
            "(race_code1…8, hispanic_origin); perturb tenure or sex, or drop those columns"
        )
    rate = Fraction(params.perturb_rate)
    units, persons = population.units, population.persons
    in_household = np.isin(population.person_unit_row, households.unit_rows)
    changed: dict[str, list[pl.Series]] = {"units": [], "persons": []}
    for name in params.perturb:  # a handful of attributes, each vectorised
        records, codes = PERTURBABLE[name]
        frame = units if records == "units" else persons
        rows = households.unit_rows if records == "units" else np.flatnonzero(in_household)
        values = frame[name].gather(rows).to_numpy().astype(np.int64)  # households: no nulls
        noised = pl.Series(name, randomized_response(values, codes, rate, rng), frame.schema[name])
        changed[records].append(frame[name].clone().scatter(rows, noised))
    return population.with_records(
        persons.with_columns(changed["persons"]), units.with_columns(changed["units"])
    )


# ---------------------------------------------------------------------------------------------
# The card
# ---------------------------------------------------------------------------------------------


def variant_reason(params: PsaParameters) -> str:
    """Why a variant's card states no epsilon (the paper gives no closed form)."""
    parts = []
    if params.cross_match > 0:
        parts.append(
            NO_CLOSED_FORM.format(
                what=f"probabilistic unit matching (cross_match = {params.cross_match:g})",
                source=SOURCE,
                setting=f"--set cross_match={params.cross_match}",
            )
        )
    if params.perturb_rate > 0:
        parts.append(
            NO_CLOSED_FORM.format(
                what=f"pre-swap perturbation (perturb_rate = {params.perturb_rate:g} on "
                f"{', '.join(params.perturb)})",
                source=SOURCE,
                setting=f"--set perturb_rate={params.perturb_rate}",
            )
        )
    return "; ".join(parts)


def variant_invariants(params: PsaParameters, bottom: str, whole: str) -> tuple[Invariant, ...]:
    """What stays exact under the variants: the PSA's invariants less those they remove."""
    kept = [Invariant("household locations (the swapping variable's marginal)", whole)]
    if params.perturb_rate == 0:
        kept.append(
            Invariant("all other household attributes (the holding variables' marginal)", whole)
        )
    else:
        kept.append(Invariant("household size and number of adults (not perturbed)", whole))
    sizes = "households by size" + (" and adults" if params.match_adults else "")
    if params.cross_match == 0:
        kept.append(Invariant(sizes, f"every {bottom}"))
    else:
        kept.append(Invariant("the number of households", f"every {bottom}"))
    area = f"each {params.matching_at} and above"
    if params.perturb_rate == 0:
        kept.append(Invariant("every statistic", area))
    else:
        kept.append(Invariant(f"every statistic not involving {', '.join(params.perturb)}", area))
    return tuple(kept)


def variant_caveats(params: PsaParameters, b: int, epsilon: float) -> tuple[str, ...]:
    """What a variant changes, and the PSA's own figure beside it."""
    out = [
        f"Without the variants the PSA is epsilon(p = {params.rate:g}, b = {b:,}) = {epsilon:.4g} "
        "(Theorem II.1) within its invariants; the variants widen the universe (their "
        "invariants above), where the theorem does not apply."
    ]
    if params.cross_match > 0:
        out.append(
            f"Probabilistic unit matching: each selected household is, with probability "
            f"{params.cross_match:g}, permuted with the other cross-matched households of its "
            f"{params.matching_at} whatever their size"
            + (" and adults" if params.match_adults else "")
            + "; households by size in a block are no longer exact, the number of households "
            f"is, and so is every statistic of the {params.matching_at}."
        )
    if params.perturb_rate > 0:
        out.append(
            f"Pre-swap perturbation: before the swap each value of {', '.join(params.perturb)} "
            f"of the households' records is replaced, with probability {params.perturb_rate:g}, "
            "by a uniform draw from its codes; the release publishes the perturbed values."
        )
    return tuple(out)


def per_attribute_rows(params: PsaParameters, epsilon: float) -> tuple[dict[str, Any], ...]:
    """The card's budgets per attribute (only that attribute varies within a universe, as the
    paper defines them), each with why; they do not add up to a total."""
    theorem: float | str = "unknown" if variants_on(params) else epsilon
    why = (
        "unknown: no closed form under the variants (the theorem covers the PSA's invariants only)"
        if variants_on(params)
        else "at most this per household record: Theorem II.1 bounds a change of whole "
        "household records, hence of one attribute, by the same epsilon (no smaller figure is "
        "known); the nearest pair of one universe differs in two records, 2 epsilon; not "
        "composed (their sum is not the total)"
    )
    sizes = "household size" + (", number of adults" if params.match_adults else "")
    rows: list[dict[str, Any]] = [
        _row(f"location below the {params.matching_at}", "swapping variable", theorem, why),
        _row(sizes, "matching variable", theorem, why),
        _row(
            params.matching_at,
            "matching variable (area)",
            "unprotected",
            f"none: the {params.matching_at} of every household is an invariant (no household "
            "leaves it)",
        ),
    ]
    perturbed_names = tuple(params.perturb) if params.perturb_rate > 0 else ()
    for name in perturbed_names:
        records, codes = PERTURBABLE[name]
        rows.append(
            _row(
                name,
                "holding variable, perturbed before the swap",
                rr_epsilon(len(codes), Fraction(params.perturb_rate)),
                f"randomized response over its {len(codes)} codes, ln(1 + k(1 − r)/r) per value "
                "(a household's: one per member for a person attribute); the swap's draws never "
                "read it, so the swap adds nothing (derived in docs/swapping.md, not in the paper)",
                per="household" if records == "units" else "person",
            )
        )
    others = [a for a in ("tenure", "sex", "age", "race", "hispanic") if a not in perturbed_names]
    rows.append(_row(", ".join(others), "holding variables", theorem, why))
    return tuple(rows)


def _row(
    attribute: str, role: str, epsilon: float | str, why: str, per: str = "household"
) -> dict[str, Any]:
    return {"attribute": attribute, "role": role, "epsilon": epsilon, "per": per, "why": why}


# ---------------------------------------------------------------------------------------------
# The audit's neighbouring pair
# ---------------------------------------------------------------------------------------------

Records = tuple[list[dict[str, Any]], list[dict[str, Any]]]
"""A one-tract template: its persons and its units (:func:`audit_plans.replicate`)."""


def audit_pair(params: PsaParameters) -> tuple[tuple[Records, Records], audit_plans.Claim]:
    """Two datasets of one tract that the variant's universe holds and the PSA's does not, with
    what can be claimed for them.

    Probabilistic matching: a one-person and a two-person household exchange blocks (households
    by size in a block differ; the PSA alone tells them apart with certainty). The paper claims
    nothing; this pair's own loss is ln((1 − x)/x), x = p²α²/2 (both selected, both crossed, the
    permutation of two not the identity). Pre-swap perturbation: one household's value of the
    first perturbed attribute differs; its per-attribute budget is randomized response's."""
    if params.cross_match > 0 and params.perturb_rate > 0:
        raise InputError("audit psa: audit one variant at a time (cross_match or perturb_rate)")
    person, unit = audit_plans.person, audit_plans.unit
    if params.cross_match > 0:
        a, b, c = {"age": 25, "sex": 1}, {"age": 40, "sex": 2}, {"age": 70, "sex": 1}
        pair = (
            (
                [person(0, 0, 0, **a), person(1, 1, 1, **b), person(2, 1, 1, relationship=1, **c)],
                [unit(0, 0), unit(1, 1)],
            ),
            (
                [person(0, 0, 1, **a), person(1, 1, 0, **b), person(2, 1, 0, relationship=1, **c)],
                [unit(0, 1), unit(1, 0)],
            ),
        )
        x = Fraction(params.rate) ** 2 * Fraction(params.cross_match) ** 2 / 2
        claim = audit_plans.Claim(
            "pure",
            math.log((1 - x) / x),
            "every block-level table of both blocks; the paper states no closed form: the claim "
            "is this pair's own exact loss, ln((1 - x)/x), x = p²α²/2",
            "a one- and a two-person household exchange blocks (two household records differ)",
        )
        return pair, claim
    name = params.perturb[0]
    records, codes = PERTURBABLE[name]
    other = person(1, 1, 1, age=70, sex=2, race=2)

    def dataset(value: int) -> Records:
        if records == "units":
            return [person(0, 0, 0, age=25), other], [
                unit(0, 0, tenure=value),
                unit(1, 1, tenure=3),
            ]
        return [person(0, 0, 0, age=25, **{name: value}), other], [unit(0, 0), unit(1, 1, tenure=3)]

    pair = (dataset(codes[0]), dataset(codes[1]))
    claim = audit_plans.Claim(
        "pure",
        rr_epsilon(len(codes), Fraction(params.perturb_rate)),
        f"every block-level table of both blocks; the per-attribute budget of {name}",
        f"one {'household' if records == 'units' else 'person'}'s {name} differs",
    )
    return pair, claim


# ---------------------------------------------------------------------------------------------
# Granularity of the invariants
# ---------------------------------------------------------------------------------------------

MATCHING_KEYS = ("area", "area x size", "area x size x adults")
"""The matching keys whose largest group b the granularity figures measure, coarsest first."""


def largest_groups(
    households: Households, levels: tuple[str, ...] = ("state", "county", "tract")
) -> list[dict[str, Any]]:
    """b, the largest matching group, for every matching level × key (:data:`MATCHING_KEYS`): how
    the invariants' granularity sets the PSA's epsilon (the paper, §3.1: b from 11.7 thousand to
    13.7 million by the level and whether household size is crossed)."""
    rows = []
    for level in levels:
        area = households.area(level)
        keys = ((area,), (area, households.size), (area, households.size, households.adults))
        for name, columns in zip(MATCHING_KEYS, keys, strict=True):
            b = int(np.bincount(group_ids(*columns)).max(initial=0))
            rows.append({"level": level, "key": name.replace("area", level), "b": b})
    return rows
