"""Per-cell ε-DP noise: independent two-tailed geometric (discrete Laplace) noise on every cell.

The plainest pure-DP table release, and the warning of F. Bach, *Differential privacy and noisy
confidentiality concepts for European population statistics* (§§4.1–4.2): with the
budget split over six levels and many tables, each cell's noise is wide, unbounded, and lands on
small areas as absurd relative errors — areas published with no inhabitants, or with men, women
and the total all distorted the same way. Every cell of every table at every level, zeros
included, gets noise of scale Δ₁/ε_cell from the exact sampler (Δ₁: the most cells one record
counts in, e.g. 6 in the race-tally tables; doubled for bounded neighbours).

Budget split: ``epsilon`` is spread evenly over the geography levels (of every geography the
census publishes on: a person is in one unit of each); within a level, the
``census2020`` preset gives 67.5% to the person tables and 32.5% to the unit tables (the 2020
U.S. shares the paper's Eq. 14 starts from), each part evenly over its tables; ``even`` gives every
table of the level the same share. The paper's ε_table (ε_global / 10, one person table per level)
is ``cellkey_analysis.EPSILON_TABLE_SHARE``; docs/geometric.md relates the two. A person's
guarantee composes the person tables; a housing unit's, the unit tables.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING, Annotated, Any, Literal

import numpy as np
import polars as pl
import scipy.sparse as sp
from pydantic import Field, model_validator

from sdclab.censuses.us2010.population import Population
from sdclab.core import accounting, noise
from sdclab.core.accounting import SpecCard
from sdclab.core.arrays import FloatArray, IntArray
from sdclab.core.cell_model import CellBounds, bounds, table_columns
from sdclab.core.census.model import cells_moved
from sdclab.core.diagnostics import Diagnostics, LevelTails, NoiseTails, TailClass, TailCount
from sdclab.core.errors import InputError
from sdclab.core.privacy import Loss, person_guarantee
from sdclab.core.query_noise import LaplaceNoise
from sdclab.core.size_classes import size_class_label
from sdclab.core.tables.definition import TableDef
from sdclab.core.tables.published import PublishedTable
from sdclab.core.tables.tabulate import TableCounts, tabulate
from sdclab.protection import audit_plans
from sdclab.protection.base import (
    Mechanism,
    NoisePublication,
    Unit,
    WorkloadParameters,
)
from sdclab.protection.budgets import check_budget_range, decimal_text
from sdclab.protection.checks import IMPOSSIBLE, additive_range, counts_problem, laplace_reach
from sdclab.release import Release, exact_release

if TYPE_CHECKING:
    from sdclab.core.census.model import Census

PERSON_SHARE = Fraction(675, 1000)
"""Share of each level's budget for person tables in the 2020-style split (the Census Bureau's
67.5%, which the paper's Eq. 14 takes up)."""


class GeometricParameters(WorkloadParameters):
    """Total ε, how it is split, the neighbouring relation and the optional clamp at zero."""

    epsilon: Annotated[Decimal, Unit("epsilon (pure DP)")] = Field(
        Decimal(1), gt=0, le=1000, allow_inf_nan=False
    )
    """total budget, split evenly over the geography levels, then over each level's tables by
    split"""
    split: Literal["census2020", "even"] = "census2020"
    """census2020: 67.5% of a level's budget to the person tables and 32.5% to the unit tables, each
    part evenly over its tables; even: every table of a level alike"""
    neighbours: Literal["bounded", "unbounded"] = "unbounded"
    """unbounded: neighbours differ by adding or removing one record; bounded: by replacing one
    (doubles every sensitivity, hence the noise)"""
    nonnegative: bool = False
    """true: post-process negative noisy counts to 0; false: keep them"""

    @model_validator(mode="after")
    def _within_sampler_range(self) -> GeometricParameters:
        tables = self.census.tables
        scales = [
            scale_of(tables[name], eps, self.neighbours)
            for (name, _), eps in allocation(self).items()
        ]
        check_budget_range("epsilon", self.epsilon, scales, noise.SCALE_RANGE, "scale")
        if any(scale.numerator >= noise.SCALE_NUMERATOR_LIMIT for scale in scales):
            raise ValueError(
                f"epsilon = {self.epsilon} has too many significant digits for the exact sampler "
                "(its noise scales must be fractions whose numerator is below 2^62): round it"
            )
        return self


MECHANISM = Mechanism(
    "geometric",
    "per-cell two-tailed geometric noise (pure epsilon-DP)",
    GeometricParameters,
    any_census=True,
    example={"epsilon": "8"},
)


def sensitivity(table: TableDef, neighbours: str) -> int:
    """Δ₁ of a table: the most cells one record counts in (×2 when a record is replaced)."""
    per_record = table.most_cells_per_record
    return per_record * (2 if neighbours == "bounded" else 1)


def is_person_table(table: TableDef) -> bool:
    return table.records == "persons"


def allocation(p: GeometricParameters) -> dict[tuple[str, str], Fraction]:
    """ε of every (table, level) published: every table of the parameters' census."""
    total = Fraction(p.epsilon)
    workload = p.workload()
    hierarchy = p.census.all_levels
    levels = [lv for lv in hierarchy if any(lv in t.levels for t in workload)]
    out: dict[tuple[str, str], Fraction] = {}
    for level in levels:
        tables = [t for t in workload if level in t.levels]
        budget = total / len(levels)
        if p.split == "even":
            shares = {t.name: budget / len(tables) for t in tables}
        else:
            people = [t for t in tables if is_person_table(t)]
            units = [t for t in tables if not is_person_table(t)]
            person_part = budget * (PERSON_SHARE if units else 1)
            shares = {t.name: person_part / len(people) for t in people}
            shares |= {t.name: (budget - person_part) / len(units) for t in units}
        out |= {(name, level): eps for name, eps in shares.items()}
    return out


def scale_of(table: TableDef, eps: Fraction, neighbours: str) -> Fraction:
    """The discrete Laplace scale Δ₁/ε of a table's cells."""
    return Fraction(sensitivity(table, neighbours)) / eps


@MECHANISM.define("protect")
def protect(population: Population, p: GeometricParameters, rng: np.random.Generator) -> Release:
    """Every cell of every table at every level (zeros included) plus discrete Laplace noise."""
    shares = allocation(p)

    def draw(table: TableDef, level: str, shape: tuple[int, int]) -> IntArray:
        return noise.discrete_laplace(
            scale_of(table, shares[table.name, level], p.neighbours), shape, rng
        )

    return per_cell_release(population, p, card(p), draw, p.nonnegative)


NoiseDraw = Callable[[TableDef, str, tuple[int, int]], IntArray]
"""(table, level, shape of its counts there) → the noise of each of those cells."""


def per_cell_release(
    population: Population,
    p: WorkloadParameters,
    spec: SpecCard,
    draw: NoiseDraw,
    nonnegative: bool,
) -> Release:
    """The release of independent per-cell noise: every cell of every table of the workload at
    every level (zeros included) plus ``draw``'s noise, negatives set to 0 if ``nonnegative``."""
    exact = tabulate(population, p.workload_names())
    published: dict[str, TableCounts] = {}
    for name, tc in exact.items():
        levels = {}
        for level, (codes, matrix) in tc.counts.items():
            dense = matrix.toarray()
            noisy = dense + draw(tc.table, level, dense.shape)
            if nonnegative:
                noisy = np.maximum(noisy, 0)
            levels[level] = (codes, sp.csr_matrix(noisy))
        published[name] = TableCounts(tc.table, levels, tc.geoids)
    return Release(
        mechanism=spec.mechanism,
        parameters=p.recorded(),
        card=spec,
        tables={name: PublishedTable.from_counts(tc) for name, tc in published.items()},
        randomness={},
        input_digest=population.digest,
        geography=population.geography,
        notes={"all_cells_noised": True, "nonnegative": nonnegative},
    )


def person_loss(p: GeometricParameters) -> tuple[Fraction, list[str]]:
    """ε of one person's record under the mechanism's own relation, over the whole release, and
    how it is made up: every person table, plus the unit tables a person moves."""
    shares = allocation(p)
    workload = p.census.tables
    moves = cells_moved(p.workload(), p.census.household_changes)
    total = Fraction(0)
    for level in {lv for _, lv in shares}:
        tables = {n: e for (n, lv), e in shares.items() if lv == level}
        total += sum((e for n, e in tables.items() if is_person_table(workload[n])), Fraction(0))
        total += max(
            (
                sum((c * tables.get(n, Fraction(0)) for n, c in move.cells.items()), Fraction(0))
                for move in moves
            ),
            default=Fraction(0),
        )
    step = "one person costs every person table it is counted in"
    if moves:
        terms = ", ".join(
            " + ".join(f"{c if c > 1 else ''}ε_{n}" for n, c in move.cells.items())
            for move in moves
        )
        ways = ", or ".join(move.label.removeprefix("a person ") for move in moves)
        step += f", and the unit tables it moves: max({terms}) per level (a person {ways})"
    return total, [step]


@MECHANISM.define("rescale")
def rescale(p: GeometricParameters, factor: Fraction) -> dict[str, str]:
    """ε times ``factor``."""
    return {"epsilon": decimal_text(Fraction(p.epsilon) * factor)}


@MECHANISM.define("guarantee")
def card(p: GeometricParameters) -> SpecCard:
    """Pure ε-DP by sequential composition over the tables and levels; one person's loss counts
    the unit tables that depend on persons."""
    shares = allocation(p)
    workload = p.census.tables
    unit = sum((e for (n, _), e in shares.items() if not is_person_table(workload[n])), Fraction(0))
    loss, steps = person_loss(p)
    relation = accounting.relation_of(p.neighbours)
    asked = Loss("pure", epsilon=Fraction(p.epsilon))
    guarantee = person_guarantee(
        Loss("pure", epsilon=loss), relation, asked=None if asked.epsilon == loss else asked
    )
    guarantee = replace(guarantee, derivation=(*steps, *guarantee.derivation))
    rows = []
    for (name, level), eps in shares.items():
        table = workload[name]
        scale = scale_of(table, eps, p.neighbours)
        rows.append(
            {
                "level": level,
                "table": name,
                "epsilon": float(eps),
                "sensitivity": sensitivity(table, p.neighbours),
                "scale": float(scale),
                "95% MOE": accounting.laplace_margin_of_error(scale),
            }
        )
    return SpecCard(
        mechanism="geometric",
        domain="person and housing-unit records of the tabulated population",
        multiverse="a single universe: no statistic is published exactly",
        guarantee=guarantee,
        covers=p.workload_text()
        + " at every level, each cell with discrete Laplace noise (composition over tables and "
        "levels)",
        caveats=(
            f"Asked epsilon = {float(p.epsilon):g}, split {p.split}: one person's record costs "
            f"{float(loss):.4g}, since the unit tables depend on persons (occupancy, tenure, "
            "household size).",
            f"Housing-unit records: epsilon = {float(unit):g} over the unit tables.",
            "Noisy counts may be negative"
            + (" (clamped to 0 here: post-processing)" if p.nonnegative else "")
            + "; tables are not consistent with one another.",
            "Unbounded noise: small areas get large relative errors (see the tail analysis).",
        ),
        allocation=tuple(rows),
    )


@MECHANISM.define("noise")
def published_noise(p: GeometricParameters) -> NoisePublication:
    scales = {
        f"{name} {level}": float(scale_of(p.census.tables[name], epsilon, p.neighbours))
        for (name, level), epsilon in allocation(p).items()
    }
    return NoisePublication(
        distribution="two-tailed geometric (discrete Laplace), independent per cell"
        + ("; negative counts then set to 0" if p.nonnegative else ""),
        published=(
            "parameters: epsilon, split and neighbours fix the scale of every table at every level",
        ),
        parameters={"scale": scales},
    )


@MECHANISM.define("check")
def check_release(release: Release, p: GeometricParameters) -> str | None:
    """Every count is a whole number within the noise's reach of a count of 0 or more (and at
    least 0 where negatives are set to 0), and none means more records than its geounit's total
    allows, each table at each level at its own scale."""
    shares = allocation(p)

    def reach(name: str, level: str) -> float:
        return laplace_reach(
            float(scale_of(p.census.tables[name], shares[name, level], p.neighbours))
        )

    rule = (
        f"a whole number{' of at least 0' if p.nonnegative else ''} within the reach of its "
        f"table's noise (ln(2/{IMPOSSIBLE:g}) times the scale) of a count of 0 or more"
    )
    return counts_problem(release, additive_range(reach, p.nonnegative), rule)


# ---------------------------------------------------------------------------------------------
# Evaluation only: the tails of the unbounded per-cell noise (Bach §§4.1–4.2)
# ---------------------------------------------------------------------------------------------

TAIL_SIZE_CLASSES = ((1, 9), (10, 49), (50, 99), (100, 499), (500, None))
"""Size classes of the true total of an area, for the tail analysis."""
RELATIVE_ERRORS = (0.5, 1.0)
TAIL_BOUND = 20
"""E of the paper's tail probability Pr(|x| > E) reported per level (its E_α = 20)."""


def summed_laplace_pmf(scale: float, terms: int) -> tuple[np.ndarray, np.ndarray]:
    """pmf of the sum of ``terms`` independent discrete Laplace noises of ``scale`` (by FFT, on
    a window holding all but a negligible mass)."""
    reach = int(40 * scale * np.sqrt(terms)) + 40
    size = 1 << int(np.ceil(np.log2(2 * reach + 1)))
    k = np.arange(size)
    k = np.where(k <= size // 2, k, k - size)  # circular layout: 0, 1, …, −1
    single = np.tanh(1 / (2 * scale)) * np.exp(-np.abs(k) / scale)
    summed = np.fft.irfft(np.fft.rfft(single) ** terms, n=size)
    order = np.argsort(k)
    values, probs = k[order], np.clip(summed[order], 0, None)
    keep = np.abs(values) <= reach
    return values[keep], probs[keep] / probs[keep].sum()


def _tails(values: np.ndarray, probs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(values, Pr(x ≥ value)) of a pmf."""
    return values, np.cumsum(probs[::-1])[::-1]


def _upper(values: np.ndarray, tail: np.ndarray, threshold: np.ndarray) -> np.ndarray:
    """Pr(x ≥ threshold), elementwise, from :func:`_tails`."""
    position = np.searchsorted(values, np.ceil(threshold - 1e-9))
    return np.where(position < len(values), tail[np.minimum(position, len(values) - 1)], 0.0)


def noise_tails(release: Release, truth: Population) -> NoiseTails:
    """Analytic and sampled tail figures of a geometric release, by level and size class
    (:func:`tails`)."""
    params = MECHANISM.parse(release.parameters, truth.census)
    shares = allocation(params)

    def scale(name: str, level: str) -> float:
        return float(scale_of(params.census.tables[name], shares[name, level], params.neighbours))

    return tails(
        release,
        truth,
        lambda name, level, terms: summed_laplace_pmf(scale(name, level), terms),
        lambda level: scale("P1", level),
    )


SummedNoise = Callable[[str, str, int], tuple[np.ndarray, np.ndarray]]
"""(table, level, terms) → (values, pmf) of the sum of ``terms`` cell noises of the table there."""


def tails(
    release: Release, truth: Population, summed: SummedNoise, scale_total: Callable[[str], float]
) -> NoiseTails:
    """Analytic and sampled tail figures of a release with independent per-cell noise (its
    pmf summed over cells: ``summed``), by level and size class.

    T is the P1 total of an area; F and M are its females and males, summed from the 23 P12 cells
    of each sex (so their noise is a sum of 23 cell noises). Per class: areas; expected and sampled
    areas whose T is off by at least 50% / 100% of the truth; "depopulated" areas (true T > 0,
    published ≤ 0); broadband distortions (F, M and T all off by at least 50% / 100% in the same
    direction).
    """
    exact = tabulate(truth, ["P1", "P12"])
    p1, p12 = release.table("P1").table, release.table("P12").table
    labels = p12.cell_labels
    male = np.array([lab.startswith("male") for lab in labels])
    female = np.array([lab.startswith("female") for lab in labels])
    out: dict[str, LevelTails] = {}
    for level in p1.levels:
        true_t = exact["P1"].counts[level][1].toarray()[:, 0]
        true_p12 = exact["P12"].counts[level][1].toarray()
        published_t = release.table("P1").dense(level, suppressed=0.0)[:, 0]
        published_p12 = release.table("P12").dense(level, suppressed=0.0)
        truth_fmt = np.stack([true_p12[:, female].sum(1), true_p12[:, male].sum(1), true_t])
        noisy_fmt = np.stack(
            [published_p12[:, female].sum(1), published_p12[:, male].sum(1), published_t]
        )
        by_terms = {
            k: _tails(*summed("P12", level, k)) for k in {int(female.sum()), int(male.sum())}
        }
        pmfs = [
            by_terms[int(female.sum())],
            by_terms[int(male.sum())],
            _tails(*summed("P1", level, 1)),
        ]
        values, tail = pmfs[2]
        rows = []
        for low, high in TAIL_SIZE_CLASSES:
            inside = (true_t >= low) & (true_t <= (high if high is not None else true_t.max()))
            if not inside.any():
                continue
            n = truth_fmt[:, inside].astype(float)
            x = (noisy_fmt[:, inside] - truth_fmt[:, inside]).astype(float)
            events: dict[str, TailCount] = {}
            for r in RELATIVE_ERRORS:
                up = _upper(values, tail, r * n[2])
                events[f"T_error_{r:g}"] = TailCount(
                    float(2 * up.sum()), int((np.abs(x[2]) >= r * n[2]).sum())
                )
                # all three up, or all three down: equally likely for symmetric noise
                expected = 2 * np.prod(
                    [_upper(v, p, r * n[c]) for c, (v, p) in enumerate(pmfs)], axis=0
                )
                same_up = (x >= r * n).all(axis=0)
                same_down = (x <= -r * n).all(axis=0)
                events[f"broadband_{r:g}"] = TailCount(
                    float(expected.sum()), int((same_up | same_down).sum())
                )
            events["depopulated"] = TailCount(
                float(_upper(values, tail, n[2]).sum()), int((noisy_fmt[2, inside] <= 0).sum())
            )
            rows.append(TailClass(size_class_label(low, high), int(inside.sum()), events))
        out[level] = LevelTails(
            scale_total=scale_total(level),
            tail_probability=float(2 * _upper(values, tail, np.array([TAIL_BOUND + 1]))[0]),
            tail_bound=TAIL_BOUND,
            classes=tuple(rows),
        )
    return NoiseTails(out)


@MECHANISM.define("diagnostics")
def diagnostics(truth: Population, release: Release) -> tuple[Diagnostics, ...]:
    """Evaluation only: the tails of the unbounded noise on small areas, expected and sampled
    (on the US census's total and sex-by-age tables, P1 and P12; none for another census)."""
    if not {"P1", "P12"} <= set(release.tables) or truth.census.name != "us2010":
        return ()
    return (noise_tails(release, truth),)


@MECHANISM.define("audit_plan")
def audit_plan(settings: Mapping[str, Any], trials: int, seed: int) -> audit_plans.Trials:
    """A block with one group-quarters facility and its resident; D′ has a second resident
    (unbounded) or the resident changed (bounded). The person tables change, the unit tables do
    not; every block-level cell is observed."""
    p = MECHANISM.parse(dict(settings))
    units = pl.DataFrame([audit_plans.unit(0, 0, unit_type=3, tenure=None)])
    resident = audit_plans.person(0, 0, 0, relationship=5, age=30)
    if p.neighbours == "unbounded":
        other = [resident, audit_plans.person(1, 0, 0, relationship=5, age=70, sex=2, race=2)]
    else:
        other = [audit_plans.person(0, 0, 0, relationship=5, age=70, sex=2, race=2)]
    datasets = [pl.DataFrame(people) for people in ([resident], other)]
    releases = [
        MECHANISM.run(audit_plans.replicate(people, units, trials), settings, seed + i)
        for i, people in enumerate(datasets)
    ]
    exact = [exact_release(audit_plans.replicate(people, units, 1)) for people in datasets]
    d, d_prime, exact_d, exact_dp = audit_plans.copy_matrix(
        [audit_plans.block_outputs(r) for r in releases + exact], trials
    )
    shares = allocation(p)
    claimed = sum(
        (
            e
            for (name, level), e in shares.items()
            if level == "block" and is_person_table(p.census.tables[name])
        ),
        Fraction(0),
    )
    claim = audit_plans.Claim(
        "pure", float(claimed), "every block-level table (person tables change)", p.neighbours
    )
    return audit_plans.Trials(claim, d, d_prime, shift=exact_d[0] - exact_dp[0])


@MECHANISM.define("cell_model")
def cell_model(
    release: Release, names: Sequence[str], level: str, published: FloatArray
) -> CellBounds:
    """The attacker's model: any count ≥ 0, weight 1/scale of its table and level (the
    log-likelihood of the two-sided geometric; where negatives were set to 0, the censored
    likelihood of a 0 has the same slope)."""
    scales = release.noise.get("parameters", {}).get("scale", {})
    weight = np.ones_like(published)
    for name, columns in zip(names, table_columns(release, names), strict=True):
        scale = scales.get(f"{name} {level}")
        if not isinstance(scale, (int, float)) or scale <= 0:
            raise InputError(
                f"release (geometric): its noise publication states no scale for {name} at "
                f"{level} (release.json noise.parameters.scale)"
            )
        weight[:, columns] = 1.0 / scale
    return bounds(published, np.zeros_like(published), np.full_like(published, np.inf), weight)


@MECHANISM.define("query_noise")
def query_noise(p: GeometricParameters, table: str | None, level: str) -> LaplaceNoise:
    """The noise of a table at a level (a US table's name in either case), for ``sdclab
    budget``: scale = Δ₁ / (ε · its share of ε), as a factor over ε."""
    if table is None:
        raise InputError("geometric: give the table (--query P12)")
    levels = p.census.all_levels
    if level not in levels:
        raise InputError(f"level {level!r}: expected one of {', '.join(levels)}")
    shares = allocation(p)
    tables = p.census.tables
    name = table.upper() if table.upper() in tables else table
    if (name, level) not in shares:
        there = ", ".join(t for t, lv in shares if lv == level)
        problem = (
            f"table {name} is not published at {level} level"
            if name in tables
            else f"table {table!r}: not a {_table_kind(p.census)}"
        )
        raise InputError(f"{problem}; the geometric release publishes at {level}: {there}")
    table = name
    factor = scale_of(tables[table], shares[table, level], p.neighbours) * Fraction(p.epsilon)
    what = "the error of every published cell"
    if p.nonnegative:
        what += ", before negative counts are set to 0 (which biases small cells upward)"
    return LaplaceNoise("geometric", table, level, "epsilon (pure DP)", what, float(factor))


def _table_kind(census: Census) -> str:
    """ "catalogue table" (the US census's) or "table of census NAME"."""
    from sdclab.censuses import is_us2010

    return "catalogue table" if is_us2010(census) else f"table of census {census.name}"
