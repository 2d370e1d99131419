"""SafeTab-H: household tables by detailed race and ethnicity, with adaptive detail, under zCDP.

The 2020 Detailed DHC-B (the SafeTab-H paper, Sexton et al. 2025, arXiv 2505.03072;
docs/safetab_h.md). A *population group* is a geounit
(nation, state, county, tract) and a characteristic iteration — a race group "alone", "alone or in
any combination", or an ethnicity group — at an iteration level (1 regional, 2 detailed). A
household belongs to the iterations of its householder's detailed codes: the "alone" iterations
common to all its race codes, the "alone or in any combination" iterations of any of them, and its
Hispanic origin's ethnicity iterations.

For every group present in the T01001 person totals, the group's size selects how much detail its
household-type table T03 (4 variants) and tenure table T04 (2 variants) get; the measured cells of
the chosen variant get discrete Gaussian noise σ² = s/(2ρ) (a household is in at most s groups of
a level, its stability, computed from the iteration mapping), and the coarser cells of the
variant are derived by summation. T01001 is an input: exact (an assumption the card states) or
noisy from a simple SafeTab-P-like release whose budget the card adds.

The groups, thresholds and membership are :mod:`sdclab.censuses.us2010.safetab_groups`; the
variants, the true group histograms and the published frames
:mod:`sdclab.protection.safetab_tables`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import numpy as np
import polars as pl
from pydantic import Field, model_validator

from sdclab.censuses.us2010 import schema
from sdclab.censuses.us2010.geography import parse_geoids
from sdclab.censuses.us2010.population import Population
from sdclab.censuses.us2010.safetab_groups import (
    PRODUCTION_THRESHOLDS,
    REGION_OF,
    REGION_TYPES,
    Group,
    default_groups,
    groups_data,
    iteration_codes,
    load_groups,
    load_thresholds,
    parse_groups,
    parse_thresholds,
    stability,
    thresholds_data,
)
from sdclab.core import accounting, noise
from sdclab.core.accounting import SpecCard
from sdclab.core.diagnostics import Diagnostics, GroupAccuracy, GroupLevelAccuracy
from sdclab.core.errors import InputError
from sdclab.core.figures import NotMeasured
from sdclab.core.geography import Geography
from sdclab.core.privacy import Guarantee, Invariant, Loss, Number, Relation, group
from sdclab.core.query_noise import GaussianNoise
from sdclab.protection import audit_plans, safetab_post
from sdclab.protection.base import (
    Mechanism,
    NoisePublication,
    Parameters,
    Unit,
)
from sdclab.protection.budgets import check_budget_range, decimal_text
from sdclab.protection.checks import gaussian_reach
from sdclab.protection.safetab_tables import (
    GROUP_SCHEMA,
    GROUP_TOTALS_SCHEMA,
    VARIANT_TABLES,
    VARIANTS,
    cells_problem,
    count_problem,
    group_frame,
    group_histograms,
    variant,
    variant_frame,
)
from sdclab.release import Release, frame_problem, geoid_problem


def margin_of_error(rho: Fraction, s: int) -> int:
    """95% margin of error of a measured cell: the smallest integer E with P(|X| ≤ E) ≥ 95% for
    the exact discrete Gaussian X of variance s/(2ρ)."""
    return accounting.gaussian_margin_of_error(Fraction(s) / (2 * Fraction(rho)))


def margin_coverage(rho: Fraction, s: int) -> float:
    """P(|X| ≤ margin_of_error(ρ, s)): the exact coverage of the 95% margin of error."""
    sigma2 = Fraction(s) / (2 * Fraction(rho))
    return 1 - accounting.gaussian_tail(sigma2, accounting.gaussian_margin_of_error(sigma2))


def rho_for_margin(moe: int, s: int) -> float:
    """The smallest ρ whose measured cells have a 95% margin of error of at most ``moe`` (the
    exact inverse of :func:`margin_of_error`): ρ = s/(2σ²) for the largest σ² with
    P(|X| ≤ moe) ≥ 95%."""
    return s / (2 * accounting.gaussian_variance_for_margin(moe))


class SafeTabHParameters(Parameters):
    """Budgets per iteration level and region, the iteration file, stability, T01001 and the
    post-processing steps (clamp, geographies without housing units, coterminous geographies)."""

    rho_regional: Annotated[Decimal, Unit("zCDP rho")] = Field(Decimal("0.006915"), ge=0)
    """budget of each of T03 and T04 for level 1 (regional) iterations, at every region type
    (0: not measured)"""
    rho_detailed_national: Annotated[Decimal, Unit("zCDP rho")] = Field(Decimal("1.9208"), ge=0)
    """budget of each of T03 and T04 for level 2 (detailed) iterations at the nation and the
    states (0: not measured)"""
    rho_detailed_local: Annotated[Decimal, Unit("zCDP rho")] = Field(Decimal("0.142869"), ge=0)
    """budget of each of T03 and T04 for level 2 (detailed) iterations at counties and
    tracts (0: not measured)"""
    stability: Annotated[int, Unit("groups")] = Field(9, ge=1, le=1000)
    """s the budget is spent for: the most groups of a level one household may be in (a
    mapping with a larger s is refused)"""
    iterations: str | list[dict[str, Any]] = "default"
    """"default" (iterations from the code lists) or a TOML iteration file (in a release:
    its [[group]] entries)"""
    t01001: Literal["exact", "noisy"] = "exact"
    """exact: the true group person totals choose the tables (an assumption the card
    states); noisy: measured here with t01001_rho"""
    t01001_rho: Annotated[Decimal, Unit("zCDP rho")] = Field(Decimal("1"), gt=0)
    """t01001=noisy only: the total budget of the noisy T01001, added to the card"""
    clamp: bool = False
    """true: set negative measured cells to 0; false: keep them (as production did)"""
    drop_no_housing: bool = False
    """true: publish no table for a geounit holding no housing unit (post-processing that reads
    the housing units, public as in the 2020 Census); false: keep them (the default)"""
    coterminous: bool = False
    """true: a geounit whose blocks are exactly its parent's publishes its parent's tables (and
    noisy T01001), so one area has one set of counts; false: each measured apart"""
    thresholds: str | list[dict[str, Any]] = "production"
    """"production" (the production thresholds per region type and level) or a TOML file of
    [[threshold]] entries (in a release: them)"""

    FILE_SETTINGS: ClassVar[dict[str, tuple[str, ...]]] = {
        "iterations": ("default",),
        "thresholds": ("production",),
    }

    def threshold_table(self) -> dict[tuple[str, int], dict[str, tuple[int, ...]]]:
        if isinstance(self.thresholds, list):
            return parse_thresholds(self.thresholds, "parameter thresholds")
        if self.thresholds == "production":
            return PRODUCTION_THRESHOLDS
        return load_thresholds(Path(self.thresholds))

    def groups(self) -> tuple[Group, ...]:
        if isinstance(self.iterations, list):
            return parse_groups(self.iterations, "parameter iterations")
        return (
            default_groups() if self.iterations == "default" else load_groups(Path(self.iterations))
        )

    def recorded(self) -> dict[str, Any]:
        data = super().recorded()
        if self.iterations != "default":
            data["iterations"] = groups_data(self.groups())
        if self.thresholds != "production":
            data["thresholds"] = thresholds_data(self.threshold_table())
        return data

    def rho(self, region: str, level: int) -> Fraction:
        """ρ of each of T03 and T04 at a region type and iteration level."""
        if level == 1:
            return Fraction(self.rho_regional)
        national = region in ("USA", "STATE")
        return Fraction(self.rho_detailed_national if national else self.rho_detailed_local)

    def cells_rho(self, region: str, level: int) -> Fraction:
        """The smallest ρ a published cell of a region type may carry: its own, or with
        ``coterminous`` that of a measured region type above it whose tables it may copy."""
        if not self.coterminous:
            return self.rho(region, level)
        regions = list(REGION_TYPES)
        above = regions[: regions.index(region) + 1]
        return min((r for r in (self.rho(a, level) for a in above) if r), default=Fraction(0))

    def t01001_share(self) -> Fraction:
        """ρ of each of noisy T01001's measurements: the budget split evenly over the two
        iteration levels and the region types."""
        return Fraction(self.t01001_rho) / (2 * len(REGION_TYPES))

    def total_rho(self) -> Fraction:
        """ρ of the household tables under add/remove neighbours (T03 and T04 everywhere)."""
        return sum((2 * self.rho(r, lv) for r in REGION_TYPES for lv in (1, 2)), Fraction(0))

    @model_validator(mode="after")
    def _within_sampler_range(self) -> SafeTabHParameters:
        """A ρ of 0 leaves its region types and level unmeasured (the card lists no row for
        them); every other ρ must give noise the exact sampler supports."""
        if self.t01001 == "exact" and self.t01001_rho != 1:
            raise ValueError(
                f"t01001_rho={self.t01001_rho} applies only with t01001=noisy (with t01001=exact "
                "T01001 is exact input and no budget is spent on it)"
            )
        groups = self.groups()
        self.threshold_table()  # bad thresholds are an error here, before any data is read
        if not self.total_rho():
            raise ValueError("every rho is 0: no household table would be measured")
        for name, level, region in (
            ("rho_regional", 1, "USA"),
            ("rho_detailed_national", 2, "USA"),
            ("rho_detailed_local", 2, "TRACT"),
        ):
            rho = self.rho(region, level)
            if rho:
                variance = Fraction(stability(groups, level)) / (2 * rho)
                given = getattr(self, name)
                check_budget_range(name, given, [variance], noise.SIGMA2_RANGE, "variance")
        if self.t01001 == "noisy":
            share = self.t01001_share()
            variances = [Fraction(stability(groups, lv)) / (2 * share) for lv in (1, 2)]
            check_budget_range(
                "t01001_rho", self.t01001_rho, variances, noise.SIGMA2_RANGE, "variance"
            )
        return self


MECHANISM = Mechanism(
    "safetab_h",
    "SafeTab-H: household tables by detailed race and ethnicity (zCDP, adaptive detail)",
    SafeTabHParameters,
)


# ---------------------------------------------------------------------------------------------
# The histograms of the population groups
# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# The mechanism
# ---------------------------------------------------------------------------------------------


@MECHANISM.define("protect")
def protect(population: Population, p: SafeTabHParameters, rng: np.random.Generator) -> Release:
    """Measure T03 and T04 of every population group present in T01001, at every region type and
    iteration level, with the variant its size selects."""
    groups = p.groups()
    for level in (1, 2):
        s = stability(groups, level)
        if s > p.stability:
            raise InputError(
                f"safetab_h: the iteration mapping gives stability {s} at level {level}, above the "
                f"{p.stability} the budget is spent for (set stability={s} or fix the mapping)"
            )
    thresholds = p.threshold_table()
    frames, totals = [], []
    for gh in group_histograms(population, groups):
        s = stability(groups, gh.level)
        t01001 = gh.t01001
        if p.t01001 == "noisy":
            share = p.t01001_share()
            t01001 = t01001 + noise.discrete_gaussian(Fraction(s) / (2 * share), t01001.shape, rng)
            totals.append(group_frame(t01001, gh, population.geography))
        if not p.rho(gh.region, gh.level):
            continue  # a ρ of 0: this region type and level are not measured
        present = (t01001 > 0).ravel()
        sigma2 = Fraction(s) / (2 * p.rho(gh.region, gh.level))
        for table, variants in VARIANTS.items():
            cuts = thresholds[gh.region, gh.level][table]
            chosen = np.where(present, variant(t01001.astype(float).ravel(), cuts), -1)
            for k, v in enumerate(variants):
                where = np.flatnonzero(chosen == k)
                if not len(where):
                    continue
                measured = gh.households[where] @ v.measured_query.T
                noisy = measured.toarray().astype(np.int64) + np.column_stack(
                    [
                        noise.discrete_gaussian(sigma2, len(where), rng)
                        for _ in range(measured.shape[1])
                    ]
                )  # one draw per measured cell, in cell order
                if p.clamp:
                    noisy = np.maximum(noisy, 0)
                every = np.asarray(v.derivation @ noisy.T, dtype=np.int64).T
                frames.append(variant_frame(every, v, where, gh, population))
    group_tables = pl.concat(frames) if frames else pl.DataFrame(schema=GROUP_SCHEMA)
    group_tables, totals, post = safetab_post.post_process(group_tables, totals, population, p)
    notes: dict[str, Any] = {
        "stability": {str(lv): stability(groups, lv) for lv in (1, 2)},
        "t01001": p.t01001,
        "groups_with_tables": int(
            group_tables.select("level", "geoid", "iteration").unique().height
        ),
        **post,
    }
    return Release(
        mechanism="safetab_h",
        parameters=p.recorded(),
        card=card(p),
        tables={},
        randomness={},
        input_digest=population.digest,
        geography=population.geography,
        notes=notes,
        artifacts={
            GROUP_TABLES_ARTIFACT: group_tables,
            **({GROUP_TOTALS_ARTIFACT: pl.concat(totals)} if totals else {}),
        },
    )


@MECHANISM.define("unprotected")
def unprotected(population: Population, _: SafeTabHParameters, release: Release) -> str | None:
    """SafeTab-H publishes its tables as an artifact: one whose every cell is exact protects
    nothing (the rule on catalogue tables does not see it)."""
    group_tables = release.artifacts.get(GROUP_TABLES_ARTIFACT)
    if group_tables is None or not group_tables.height:
        return None
    cells = true_cells(population, release)
    if (cells["count"] == cells["true"]).all():
        return "every published population-group cell equals its exact count"
    return None


def true_cells(population: Population, release: Release) -> pl.DataFrame:
    """The release's group tables with a ``true`` column: what each cell counts in the truth
    (evaluation only)."""
    group_tables = release.artifacts[GROUP_TABLES_ARTIFACT]
    p = SafeTabHParameters.model_validate(release.parameters)
    parts = []
    for gh in group_histograms(population, p.groups()):
        rows = group_tables.filter(
            (pl.col("level") == gh.geo_level) & (pl.col("iteration_level") == gh.level)
        )
        if not rows.height:
            continue
        codes = population.geography.codes(gh.geo_level)
        geo = np.searchsorted(codes, parse_geoids(rows["geoid"], gh.geo_level))
        iteration_codes = np.array(gh.codes)
        order = np.argsort(iteration_codes)
        it = order[np.searchsorted(iteration_codes[order], rows["iteration"].to_numpy())]
        group = geo * len(gh.codes) + it
        truth = np.zeros(rows.height, dtype=np.int64)
        tables = rows["table"].to_numpy()
        cells = rows["cell"].to_numpy()
        for name in np.unique(tables):
            mine = np.flatnonzero(tables == name)
            v = VARIANT_TABLES[str(name)]
            column = np.searchsorted(v.cells, cells[mine])
            truth[mine] = gh.cells(v, group[mine])[np.arange(len(mine)), column]
        parts.append(rows.with_columns(true=pl.Series(truth)))
    return pl.concat(parts)


GROUP_TABLES_ARTIFACT = "group_tables"
GROUP_TOTALS_ARTIFACT = "group_totals"


def _frame_check(
    columns: dict[str, Any], what: str
) -> Callable[[pl.DataFrame, Geography], str | None]:
    """The check of an artifact frame: ``columns`` with the kinds
    :func:`sdclab.release.frame_problem` checks, its geounits this release's."""
    kinds = {
        name: "string" if t == pl.String else "boolean" if t == pl.Boolean else "integer"
        for name, t in columns.items()
    }

    def check(frame: pl.DataFrame, geography: Geography) -> str | None:
        return frame_problem(frame, kinds) or geoid_problem(frame, geography)

    check.__doc__ = f"The {what}' columns and kinds; their geounits this release's."
    return check


check_group_tables = MECHANISM.publishes(
    GROUP_TABLES_ARTIFACT,
    "T03 and T04 of every population group present in T01001: level, geoid, "
    "iteration_level, iteration, table (its variant), cell, noisy count, derived",
)(_frame_check(GROUP_SCHEMA, "group tables"))
check_group_totals = MECHANISM.publishes(
    GROUP_TOTALS_ARTIFACT,
    "the noisy population-group totals (T01001, with t01001=noisy): level, geoid, "
    "iteration_level, iteration, count",
)(_frame_check(GROUP_TOTALS_SCHEMA, "group totals"))


@MECHANISM.define("check")
def check_release(release: Release, p: SafeTabHParameters) -> str | None:
    """Every published group cell is one the recorded parameters measure: a region type and
    iteration level with a budget, an iteration of the mapping, a cell of a variant (derived as
    the variant derives it), a count within the noise's reach of a count of 0 or more (at least
    0 when clamped); T01001's noisy totals are published with t01001=noisy, and only then; with
    coterminous, a geounit of its parent's extent publishes its parent's rows."""
    totals = release.artifacts.get(GROUP_TOTALS_ARTIFACT)
    if (totals is not None) != (p.t01001 == "noisy"):
        return (
            f"artifacts/{GROUP_TOTALS_ARTIFACT}.parquet is published with t01001=noisy, and only "
            f"then; the recorded t01001 is {p.t01001}"
        )
    for name, frame in (
        (GROUP_TABLES_ARTIFACT, release.artifacts.get(GROUP_TABLES_ARTIFACT)),
        (GROUP_TOTALS_ARTIFACT, totals),
    ):
        problem = None if frame is None else _group_problem(frame, p, name == GROUP_TOTALS_ARTIFACT)
        if problem is None and frame is not None and p.coterminous:
            measured = safetab_post.measured_at(p, totals=name == GROUP_TOTALS_ARTIFACT)
            problem = safetab_post.coterminous_problem(frame, release.geography, measured)
        if problem is not None:
            return f"artifacts/{name}.parquet: {problem}"
    return None


def _group_problem(frame: pl.DataFrame, p: SafeTabHParameters, totals: bool) -> str | None:
    """The first row of a group tables (or, with ``totals``, group totals) frame that the
    parameters ``p`` do not measure, or None."""
    groups = p.groups()
    keys = ["level", "geoid", "iteration_level", "iteration"] + (
        [] if totals else ["table", "cell"]
    )
    if frame.select(pl.struct(keys).is_duplicated().any()).item():
        return f"a ({', '.join(keys)}) appears more than once"
    for row in frame.select("level", "iteration_level").unique().iter_rows(named=True):
        level, it_level = row["level"], row["iteration_level"]
        if level not in REGION_OF or it_level not in (1, 2):
            return f"level {level!r}, iteration level {it_level} is not one SafeTab-H publishes"
        if not totals and not p.rho(REGION_OF[level], it_level):
            return f"{level} at iteration level {it_level} has no budget (rho 0): nothing measured"
        part = frame.filter((pl.col("level") == level) & (pl.col("iteration_level") == it_level))
        unknown = part.filter(~pl.col("iteration").is_in(iteration_codes(groups, it_level)))
        if unknown.height:
            return f"iteration {unknown['iteration'][0]!r} is not one of level {it_level}"
        share = p.t01001_share() if totals else p.cells_rho(REGION_OF[level], it_level)
        reach = gaussian_reach(float(Fraction(stability(groups, it_level)) / (2 * share)))
        problem = (
            count_problem(part, 1, reach, p.clamp and not totals)
            if totals
            else cells_problem(part, reach, p.clamp)
        )
        if problem is not None:
            return problem
    return None


SAFETAB_BUDGETS = ("rho_regional", "rho_detailed_national", "rho_detailed_local", "t01001_rho")


@MECHANISM.define("rescale")
def rescale(p: SafeTabHParameters, factor: Fraction) -> dict[str, str]:
    """Every ρ times ``factor`` (T01001's only where it is noisy: else it spends none)."""
    names = SAFETAB_BUDGETS if p.t01001 == "noisy" else SAFETAB_BUDGETS[:-1]
    return {name: decimal_text(Fraction(getattr(p, name)) * factor) for name in names}


@MECHANISM.define("guarantee")
def card(p: SafeTabHParameters) -> SpecCard:
    """ρ-zCDP of the household tables (add/remove; twice that bounded), with T01001's caveat."""
    groups = p.groups()
    rows = []
    for level in (1, 2):
        s = stability(groups, level)
        for region in REGION_TYPES:
            rho = p.rho(region, level)
            if rho == 0:
                continue
            rows.append(
                {
                    "iteration level": level,
                    "region": region,
                    "rho (T03, T04 each)": float(rho),
                    "stability s": s,
                    "sigma2": float(Fraction(s) / (2 * rho)),
                    "95% MOE": margin_of_error(rho, s),
                    "coverage": margin_coverage(rho, s),
                }
            )
    guarantee, lines = safetab_guarantee(p)
    return SpecCard(
        mechanism="safetab_h",
        domain="occupied housing units (households) and, for T01001, persons",
        multiverse="a single universe" + (" given T01001" if p.t01001 == "exact" else ""),
        guarantee=guarantee,
        covers="T03 and T04 of every population group present in T01001 at the nation, state, "
        "county and tract, each variant's measured cells with discrete Gaussian noise"
        + ("; T01001 itself, with discrete Gaussian noise" if p.t01001 == "noisy" else ""),
        caveats=(
            *lines,
            "Margins of error are the smallest integer whose coverage under the exact discrete "
            "Gaussian is at least 95%; a derived cell sums k measured cells (variance "
            "k·s/(2 rho)).",
            *safetab_post.post_processing_lines(p),
        ),
        allocation=tuple(rows),
    )


HOUSEHOLD_CAP = 20
"""The household size up to which the household guarantee of a noisy T01001 is stated (the
synthetic generator's largest household): a household of k persons moves each of its groups'
T01001 counts by k, costing k²·ρ_T01001 by group privacy."""


def safetab_guarantee(p: SafeTabHParameters) -> tuple[Guarantee, list[str]]:
    """SafeTab-H's guarantee: for households and for persons, with T01001 exact or noisy.

    The household tables cost ρ_H under add/remove of one household (Δ₂² = s: a household is in
    at most s groups, one cell each) and 2ρ_H under a household replace (Δ₂² = 2s). A noisy
    T01001 costs ρ_T per person added or removed and 2ρ_T per person replaced.

    One person's record changed touches at most two household records: a person who moves
    leaves one household and joins another (in the same tract, T01001 unchanged). Each
    household's change moves the tables by ‖Δ‖² ≤ 2s over T03 and T04 together (its type changes,
    or it appears or disappears), so ‖Δ‖² ≤ (√(2s) + √(2s))² = 8s: 4ρ_H."""
    household = p.total_rho()
    replace_h = 2 * household
    person_h = 4 * household
    moves = (
        "one person's record changed touches at most two household records (a person moving "
        "between households); each moves the household tables by ‖Δ‖² ≤ 2s, together ≤ 8s: 4ρ_H"
    )
    if p.t01001 == "exact":
        relation: Relation = "replace"
        loss: Number = replace_h
        person: Number = person_h
        derivation: tuple[str, ...] = (
            "with T01001 exact, the universe holds every group's population fixed: its "
            "neighbours replace household records keeping T01001 (one: Δ₂² = 2s, 2ρ_H)",
            moves + ", within the invariants",
        )
        invariants: tuple[Invariant, ...] = (
            Invariant("T01001 population-group totals", "nation, state, county, tract"),
        )
        lines = [
            "T01001 is exact public input: adding or removing a household changes it, so those "
            "datasets are not neighbours here; a change that moves a group's T01001 across a "
            "detail threshold changes which cells are published, and its privacy loss is "
            "infinite — the guarantee covers only changes that keep T01001.",
            "An end-to-end guarantee must compose SafeTab-P's budget for T01001.",
        ]
    else:
        t01001 = Fraction(p.t01001_rho)
        cap_loss, cap_step = group(Loss("zcdp", rho=t01001), HOUSEHOLD_CAP)
        assert cap_loss.rho is not None
        relation = "add_remove"
        households = household + cap_loss.rho
        loss, person = households, person_h + 2 * t01001
        derivation = (moves, "and moves the person between T01001 groups (Δ₂² ≤ 2s: 2ρ_T)")
        invariants = ()
        lines = [
            f"Households (add or remove one of up to {HOUSEHOLD_CAP} persons): rho = "
            f"{float(household):.4g} (household tables) + {HOUSEHOLD_CAP}² × {float(t01001):g} "
            f"(T01001, {cap_step}) = {float(households):.4g}; a household of k persons costs "
            f"{float(household):.4g} + k² × {float(t01001):g}.",
            f"Persons (one person's record changed, up to two households): rho = 4 × "
            f"{float(household):.4g} + 2 × {float(t01001):g} = {float(person):.4g}; a person added "
            f"or removed costs {float(household + t01001):.4g}.",
        ]
    if p.drop_no_housing:  # which geounits publish tables reads it: public, as in 2020
        invariants = (*invariants, safetab_post.HOUSING_INVARIANT)
    guarantee = Guarantee(
        measure="zcdp",
        unit="household",
        relation=relation,
        loss=Loss("zcdp", rho=loss),
        person_replace=Loss("zcdp", rho=person),
        derivation=derivation,
        invariants=invariants,
    )
    return guarantee, lines


def group_accuracy(release: Release, truth: Population) -> GroupAccuracy:
    """Error of a SafeTab-H release's measured and derived cells, by geography and iteration
    level: mean absolute error, and the share of measured cells within their 95% margin."""
    params = SafeTabHParameters.model_validate(release.parameters)
    groups = params.groups()
    cells = true_cells(truth, release).with_columns(error=pl.col("count") - pl.col("true"))
    no_measured = NotMeasured("no measured cell at this level")
    no_derived = NotMeasured("no derived cell at this level")
    rows = []
    for (level, it_level), part in cells.group_by("level", "iteration_level", maintain_order=True):
        level, it_level = str(level), int(str(it_level))
        moe = margin_of_error(params.rho(REGION_OF[level], it_level), stability(groups, it_level))
        derived = part["derived"].to_numpy()
        error = np.abs(part["error"].to_numpy())
        rows.append(
            GroupLevelAccuracy(
                level=level,
                iteration_level=it_level,
                groups=part.select("geoid", "iteration").unique().height,
                measured_cells=int((~derived).sum()),
                mae_measured=float(error[~derived].mean()) if (~derived).any() else no_measured,
                mae_derived=float(error[derived].mean()) if derived.any() else no_derived,
                moe=moe,
                within_moe=float((error[~derived] <= moe).mean())
                if (~derived).any()
                else no_measured,
            )
        )
    return GroupAccuracy(tuple(rows))


@MECHANISM.define("diagnostics")
def diagnostics(truth: Population, release: Release) -> tuple[Diagnostics, ...]:
    """Evaluation only: the error of the measured and derived cells of every population group."""
    return (group_accuracy(release, truth),)


@MECHANISM.define("noise")
def published_noise(p: SafeTabHParameters) -> NoisePublication:
    groups = p.groups()
    variances = {
        f"{region} level {level}": float(Fraction(stability(groups, level)) / (2 * rho))
        for region in REGION_TYPES
        for level in (1, 2)
        if (rho := p.rho(region, level)) > 0
    }
    return NoisePublication(
        distribution="discrete Gaussian on every measured cell of T03 and T04, independent"
        + ("; negative cells then set to 0" if p.clamp else ""),
        published=(
            "parameters: the rho of each region type and iteration level and the stability "
            "fix every variance",
            f"artifact {GROUP_TABLES_ARTIFACT}: which cells are measured and which derived",
        ),
        parameters={"variance": variances},
    )


AUDIT_THETA = (1, 2, 3)
"""The level-2 T03 thresholds (T04: the last) of the noisy-T01001 audit: its group of three
persons sits at θ3, and the householder's race change takes it one below."""


def _audit_codes(code: int) -> dict[str, Any]:
    """A person of one detailed race code (its major race in ``race``), not Hispanic."""
    return {"race": code // schema.DETAILED_RACE_BASE, "race_code1": code, "hispanic_origin": 0} | {
        f"race_code{i}": None for i in range(2, 9)
    }


def _audit_observed(release: Release) -> pl.DataFrame:
    """What the audit observes of one release: every measured tract-level cell and, with a noisy
    T01001, the tract's group totals (copy, key, value)."""
    parts = [
        release.artifacts[GROUP_TABLES_ARTIFACT]
        .filter((pl.col("level") == "tract") & ~pl.col("derived"))
        .select(
            copy=audit_plans.copy_of_geoid(pl.col("geoid")),
            key=pl.concat_str("iteration", "table", "cell", separator="|"),
            value=pl.col("count").cast(pl.Float64),
        )
    ]
    if GROUP_TOTALS_ARTIFACT in release.artifacts:
        parts.append(
            release.artifacts[GROUP_TOTALS_ARTIFACT]
            .filter(pl.col("level") == "tract")
            .select(
                copy=audit_plans.copy_of_geoid(pl.col("geoid")),
                key=pl.concat_str(pl.lit("T01001"), "iteration", separator="|"),
                value=pl.col("count").cast(pl.Float64),
            )
        )
    return pl.concat(parts)


@MECHANISM.define("audit_plan")
def audit_plan(settings: Mapping[str, Any], trials: int, seed: int) -> audit_plans.Trials:
    """Neighbours inside the guarantee's universe, one tract each.

    T01001 exact: one couple of detailed races 1001 and 2001, headed by the first; in D′ by the
    second (a household replaced: it moves between groups, T01001 unchanged). T01001 noisy: one
    household of three persons of race 1001, a group at θ3 of the audit's thresholds
    (:data:`AUDIT_THETA`); D′ changes the householder's code to 1002, taking the group one below
    θ3, so the noisy T01001 may choose different variants. Observed: every measured tract-level
    cell, and with a noisy T01001 the tract's group totals."""
    p = MECHANISM.parse(dict(settings))
    run = dict(settings)
    overrides = {f"race_code{i}": pl.Int16 for i in range(1, 9)}
    if p.t01001 == "exact":
        if p.thresholds != "production":
            raise InputError(
                "audit safetab_h: with t01001=exact only the production thresholds are audited"
            )

        def couple(head: int) -> list[dict[str, Any]]:  # the same two persons, either heads
            spouse = 2001 if head == 1001 else 1001
            return [
                audit_plans.person(0, 0, 0, **_audit_codes(head)),
                audit_plans.person(1, 0, 0, relationship=1, sex=2, **_audit_codes(spouse)),
            ]

        units = [audit_plans.unit(0, 0)]
        datasets = [(couple(1001), units), (couple(2001), units)]
        neighbours = "replace one household (which person heads it), T01001 unchanged"
    else:
        table = dict(PRODUCTION_THRESHOLDS)
        for region in REGION_TYPES:
            table[region, 2] = {"T03": AUDIT_THETA, "T04": (AUDIT_THETA[-1],)}
        run["thresholds"] = thresholds_data(table)

        def household(head: int) -> list[dict[str, Any]]:
            return [
                audit_plans.person(0, 0, 0, **_audit_codes(head)),
                audit_plans.person(1, 0, 0, relationship=1, sex=2, **_audit_codes(1001)),
                audit_plans.person(2, 0, 0, relationship=2, age=10, **_audit_codes(1001)),
            ]

        units = [audit_plans.unit(0, 0)]
        datasets = [(household(1001), units), (household(1002), units)]
        neighbours = "replace one person's record (the householder's race), crossing θ3"
    releases = [
        MECHANISM.run(
            audit_plans.replicate(
                pl.DataFrame(people, schema_overrides=overrides), pl.DataFrame(units), trials
            ),
            run,
            seed + i,
        )
        for i, (people, units) in enumerate(datasets)
    ]
    d, d_prime = audit_plans.copy_matrix([_audit_observed(r) for r in releases], trials)
    # a replace costs twice the add/remove ρ of each tract-level measurement (Δ₂² = 2s)
    claimed = sum((2 * 2 * p.rho("TRACT", level) for level in (1, 2)), Fraction(0))
    observed = "T03 and T04 of every tract-level group"
    if p.t01001 == "noisy":
        claimed += 2 * 2 * p.t01001_share()
        observed += " and the tract's noisy T01001"
    claim = audit_plans.Claim("zcdp", float(claimed), observed, neighbours)
    return audit_plans.Trials(claim, d, d_prime)


BUDGET_LEVELS = {
    "regional": "rho_regional",
    "detailed-national": "rho_detailed_national",
    "detailed-local": "rho_detailed_local",
}
"""SafeTab-H's iteration levels and region groups, by the parameter that budgets them."""


@MECHANISM.define("query_noise")
def query_noise(p: SafeTabHParameters, _: str | None, level: str) -> GaussianNoise:
    """The noise of SafeTab-H's T03/T04 cells at an iteration level, for ``sdclab budget``:
    σ² = s / (2ρ)."""
    if level not in BUDGET_LEVELS:
        raise InputError(f"level {level!r}: SafeTab-H's levels are {', '.join(BUDGET_LEVELS)}")
    return GaussianNoise(
        "safetab_h",
        "T03/T04",
        level,
        f"rho (zCDP) of each of T03 and T04 ({BUDGET_LEVELS[level]})",
        "the error of a measured cell, before clamping",
        p.stability / 2,
    )
