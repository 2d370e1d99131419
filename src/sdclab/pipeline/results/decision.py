"""The decision statistics of an experiment: the accuracy–risk frontier (its axes and one point
per setting, from the replicate means) and the choose table (for each accuracy target, the
protecting setting of least risk). They read :class:`ExperimentResult`; no result type imports
them at module level (:meth:`ExperimentResult.frontier` imports :func:`frontier` when called)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sdclab.core.figures import NotMeasured, Value
from sdclab.pipeline.results.accuracy import COMPARED_TABLES
from sdclab.pipeline.results.experiment import (
    CensusView,
    ExperimentResult,
    ReleaseResult,
    replicate_interval,
)
from sdclab.pipeline.results.reidentification import HEADLINE_GROUPS

if TYPE_CHECKING:
    import polars as pl

RISK_CEILING = 0.0
"""The choose table's default risk ceiling: the headline risk (confirmed reidentifications beyond
the best baseline, percentage points) at most 0 — no better than what the statistics alone give."""


@dataclass(frozen=True)
class FrontierAxes:
    """What the accuracy–risk frontier plots: an accuracy figure of the tidy results (lower is
    better) at a level, against a risk figure (by default the census attacker's headline risk
    for the population's fixed vulnerable group, :class:`VulnerableGroup`)."""

    accuracy: str = "compared.mae_nonempty"
    level: str = "tract"
    table: str | None = None
    """For a figure given per table (``accuracy.*``, ``compared.*``): which table's (for
    ``compared.*``, P12 unless named: :func:`default_table`)."""
    risk: str = "reidentification.census.headline.vulnerable.points"
    risk_ceiling: float = RISK_CEILING
    """The choose table offers no setting whose mean risk exceeds it."""

    def __post_init__(self) -> None:
        if self.table is None:
            object.__setattr__(self, "table", default_table(self.accuracy))
        per_table = FRONTIER_ACCURACY.get(self.accuracy)
        if per_table is None:
            raise ValueError(
                f"{self.accuracy!r} is not an error the frontier can plot (lower must be better "
                f"and it must be a size, not a signed bias): one of {', '.join(FRONTIER_ACCURACY)}"
            )
        if per_table != (self.table is not None):
            raise ValueError(
                f"{self.accuracy} is given per table: name the table"
                if per_table
                else f"{self.accuracy} is not given per table: give no table"
            )
        if self.accuracy.startswith("compared.") and self.table not in COMPARED_TABLES:
            raise ValueError(
                f"{self.accuracy} is given for {' and '.join(COMPARED_TABLES)}, each apart: "
                f"not {self.table}"
            )
        if self.accuracy.startswith("indicators.") and self.level != "tract":
            raise ValueError(f"{self.accuracy} is measured per tract: give level tract")

    @property
    def headline(self) -> bool:
        """Whether the risk is a headline risk (points beyond the best baseline), rather than a
        rate as measured (a census without baselines: the confirmed rate)."""
        parts = self.risk.split(".")
        return len(parts) == 5 and parts[2] == "headline"

    def describe(self) -> tuple[str, str]:
        """The axes' labels, in words."""
        accuracy = ACCURACY_WORDS.get(self.accuracy, self.accuracy)
        table = f" of {self.table}" if self.table else ""
        risk = self.risk
        parts = self.risk.split(".")
        who = {"nonmodal": "nonmodal persons ", "vulnerable": "vulnerable group "}
        if self.headline:  # reidentification.census.headline.all.points
            group = who.get(parts[3], "")
            risk = f"{group}confirmed beyond the best baseline, {parts[1]} attacker (pp)"
        elif len(parts) == 5 and parts[4] == "confirmed_rate":  # …reconstruction.all.rate
            group = who.get(parts[3], "")
            risk = f"{group}confirmed rate, {parts[1]} attacker (no baseline)"
        return f"{accuracy}{table}, {self.level.replace('_', ' ')}", risk


def with_axes(
    axes: FrontierAxes,
    *,
    accuracy: str | None = None,
    level: str | None = None,
    table: str | None = None,
    attacker: str | None = None,
    persons: str | None = None,
) -> FrontierAxes:
    """``axes`` with the keywords given in place of its own (a ValueError for an axis the
    frontier cannot plot, as :class:`FrontierAxes` says)."""
    from dataclasses import replace

    _, head, *rest = axes.risk.split(".")
    if attacker is not None and attacker not in ("census", "commercial"):
        raise ValueError(f"attacker {attacker!r}: expected census or commercial")
    if persons is not None and persons not in HEADLINE_GROUPS:
        raise ValueError(f"persons {persons!r}: expected one of {', '.join(HEADLINE_GROUPS)}")
    if rest and rest[0] == "headline":
        rest = ["headline", persons or rest[1], *rest[2:]]
    risk = ".".join(["reidentification", attacker or head, *rest])
    changes: dict[str, Any] = {"risk": risk}
    if accuracy is not None:
        changes["accuracy"] = accuracy
        changes["table"] = table  # a figure given per table names its own table
    elif table is not None:
        changes["table"] = table
    if level is not None:
        changes["level"] = level
    return replace(axes, **changes)


US_ONLY_ACCURACY = ("compared.", "indicators.")
"""The frontier's accuracy figures measured on the US tables alone (P1 and P12, the tract
indicators)."""


def declared_axes(
    census: CensusView,
    accuracy: str | None = None,
    level: str | None = None,
    table: str | None = None,
    risk: str = "census.all",
    ceiling: float = RISK_CEILING,
) -> FrontierAxes:
    """The frontier over a declared census: by default the MAE of the non-empty cells of its
    compared table at the level of the reconstruction's programs, against the headline risk of
    ``risk`` (``attacker.persons``): points beyond the best baseline (the census's own guessers,
    :mod:`sdclab.attacks.census_baselines`). A figure or group of the US tables alone is a
    ValueError."""
    accuracy = accuracy or "accuracy.mae_nonempty"
    if accuracy.startswith(US_ONLY_ACCURACY):
        raise ValueError(
            f"{accuracy} is measured on the US 2010 census's tables (P1, P12, the tract "
            f"indicators); for census {census.name} plot an accuracy.* figure of one of its "
            "tables, or totals.*"
        )
    attacker, persons = risk.split(".")
    if persons == "vulnerable":
        raise ValueError(
            "persons: the vulnerable group needs solution variability, measured on the US 2010 "
            f"census only, not census {census.name}: give all or nonmodal"
        )
    per_table = FRONTIER_ACCURACY.get(accuracy, False)
    return FrontierAxes(
        accuracy=accuracy,
        level=level or census.program,
        table=table if table is not None or not per_table else census.compared,
        risk=f"reidentification.{attacker}.headline.{persons}.points",
        risk_ceiling=ceiling,
    )


def default_table(accuracy: str) -> str | None:
    """The table a frontier figure is read from when none is named: P12 (sex by age) for the
    ``compared.*`` figures, none for the others (a per-table ``accuracy.*`` figure names its
    table)."""
    return "P12" if accuracy.startswith("compared.") else None


FRONTIER_ACCURACY: dict[str, bool] = {
    **{
        f"compared.{m}": True
        for m in ("mae_nonempty", "mae", "rmse_nonempty", "mae_shown", "mae_nonempty_shown")
    },
    **{
        f"accuracy.{m}": True
        for m in (
            "mae_nonempty",
            "mae",
            "rmse_nonempty",
            "rmse",
            "max_abs_error",
            "tv_mean",
            "hellinger_mean",
            "share_rel_error_above_10pct",
            "share_rel_error_above_50pct",
            "share_rel_error_above_100pct",
        )
    },
    **{f"totals.{m}": False for m in ("mae", "rmse", "mape", "share_off_5pct", "share_off_10pct")},
    **{
        f"indicators.{name}.mae": False for name in ("sex_ratio", "share_65_plus", "share_under_18")
    },
}
"""The accuracy figures the frontier may plot — errors whose size is all that counts, lower
better — and whether each is given per table (then the axes name the table)."""

ACCURACY_WORDS = {
    "compared.mae_nonempty": "MAE, non-empty cells",
    "compared.mae": "MAE, all cells",
    "compared.rmse_nonempty": "RMSE, non-empty cells",
    "compared.mae_shown": "MAE, shown cells only",
    "compared.mae_nonempty_shown": "MAE, non-empty shown cells only",
    "accuracy.mae_nonempty": "MAE, non-empty cells",
    "accuracy.tv_mean": "mean total variation distance",
    "accuracy.hellinger_mean": "mean Hellinger distance",
}


@dataclass(frozen=True)
class ReplicateMean:
    """A figure's mean over the replicates that measured it, with its 95% t-interval."""

    mean: float
    n: int
    low: float | None
    high: float | None


@dataclass(frozen=True)
class FrontierPoint:
    """One setting of an experiment on the accuracy–risk plane."""

    setting: str
    entry: str
    mechanism: str
    epsilon: Value
    releases: tuple[str, ...]
    """Its independent replicates."""
    accuracy: ReplicateMean | NotMeasured
    risk: ReplicateMean | NotMeasured
    varied: Mapping[str, str] = field(default_factory=dict)
    """The swept settings' values at this point of the entry's grid."""
    protects: bool = True
    """Whether every replicate protects (:attr:`ReleaseResult.protects`): a setting that does
    not is a reference line, never a choice."""
    why_not: str | None = None
    """Why it does not protect (a replicate's reason)."""
    qualifier: str = ""
    """What its ε says beside another mechanism's ("within the PSA's invariants (…)"; the
    card's common figure's :attr:`~sdclab.core.privacy.CommonFigure.qualifier`)."""

    @property
    def placed(self) -> bool:
        """Whether both coordinates were measured."""
        return isinstance(self.accuracy, ReplicateMean) and isinstance(self.risk, ReplicateMean)


def _replicate_mean(
    figures: pl.DataFrame, releases: list[str], missing: str
) -> ReplicateMean | NotMeasured:
    """The mean of one figure over ``releases`` (the rows of ``figures`` that are theirs)."""
    import polars as pl

    rows = figures.filter(pl.col("release").is_in(releases))
    values = rows["value"].drop_nulls().to_list()
    if not values:
        reasons = rows["reason"].drop_nulls().unique().to_list()
        return NotMeasured("; ".join(sorted(reasons)) or missing)
    mean = sum(values) / len(values)
    sd = statistics.stdev(values) if len(values) > 1 else None
    interval = replicate_interval(mean, sd, len(values))
    return ReplicateMean(mean, len(values), interval["low"], interval["high"])


def _why_not(release: ReleaseResult) -> str:
    """Why a release is no candidate: its protection verdict's reason, or why it has none."""
    if isinstance(release.protection, NotMeasured):
        return release.protection.reason
    return str(release.protection.get("reason", "it does not protect"))


@dataclass(frozen=True)
class Choice:
    """The answer of the choose table for one accuracy target."""

    target: float
    best: FrontierPoint | None
    """The candidate of least risk meeting the target (None: no candidate meets it)."""
    runner_up: FrontierPoint | None
    meeting: int
    """How many candidates meet the target."""
    flags: tuple[str, ...] = ()
    """Where the replicates do not settle the choice: the best's accuracy interval crosses the
    target, or its risk interval the ceiling."""


def candidates(
    points: Sequence[FrontierPoint], ceiling: float = RISK_CEILING
) -> list[FrontierPoint]:
    """The settings the choose table may offer: measured on both axes, protecting (every
    replicate: the exact release and a release that protects nothing are reference lines, never
    a choice) and at most ``ceiling`` in mean risk."""
    return [
        p
        for p in points
        if p.placed and p.protects and p.risk.mean <= ceiling  # type: ignore[union-attr]
    ]


def choose(
    points: Sequence[FrontierPoint], targets: Sequence[float], ceiling: float = RISK_CEILING
) -> list[Choice]:
    """For each accuracy target, the candidate (:func:`candidates`) of least risk whose mean
    accuracy meets it (lower is better; of settings at the same risk, the most accurate), the
    runner-up, how many meet it and the flags where an interval crosses the target or the
    ceiling; no best where no candidate meets it."""
    offered = candidates(points, ceiling)
    out = []
    for target in targets:
        meeting = sorted(
            (p for p in offered if p.accuracy.mean <= target),  # type: ignore[union-attr]
            key=lambda p: (p.risk.mean, p.accuracy.mean),  # type: ignore[union-attr]
        )
        best = meeting[0] if meeting else None
        flags: list[str] = []
        if best is not None:
            accuracy, risk = best.accuracy, best.risk
            assert isinstance(accuracy, ReplicateMean) and isinstance(risk, ReplicateMean)
            if accuracy.high is not None and accuracy.high > target:
                flags.append("its accuracy interval crosses the target")
            if risk.high is not None and risk.high > ceiling:
                flags.append("its risk interval crosses the ceiling")
        out.append(
            Choice(
                target, best, meeting[1] if len(meeting) > 1 else None, len(meeting), tuple(flags)
            )
        )
    return out


def accuracy_targets(points: Sequence[FrontierPoint]) -> list[float]:
    """Round targets (1, 2, 5 × a power of ten) across the measured mean accuracies: from the
    last below the smallest positive one (which only a setting as accurate meets) to the first
    at or above the largest."""
    values = [p.accuracy.mean for p in points if p.placed and p.accuracy.mean > 0]  # type: ignore[union-attr]
    if not values:
        return []
    low, high = math.floor(math.log10(min(values))) - 1, math.ceil(math.log10(max(values)))
    steps = [m * 10.0**e for e in range(low, high + 1) for m in (1, 2, 5)]
    first = max(i for i, t in enumerate(steps) if t < min(values))
    last = min(i for i, t in enumerate(steps) if t >= max(values))
    return steps[first : last + 1]


def frontier(
    results: ExperimentResult,
    axes: FrontierAxes | None = None,
    *,
    accuracy: str | None = None,
    level: str | None = None,
    table: str | None = None,
    attacker: str | None = None,
    persons: str | None = None,
) -> list[FrontierPoint]:
    """One point per setting (the entry at one point of its sweep): the replicate means of
    an accuracy figure and of the headline risk, with their 95% intervals, and the
    common-axis ε. A replicate identical to an earlier one is not a draw and is left out.

    The axes are ``axes`` (default :class:`FrontierAxes`, or :func:`declared_axes` for a
    census other than the US 2010 one) with any keyword given in place of
    its own: ``accuracy``, ``level`` and ``table`` of the accuracy figure; ``attacker``
    (census, commercial) and ``persons`` (vulnerable, all, nonmodal) of the headline risk."""
    import polars as pl

    default = FrontierAxes() if results.census is None else declared_axes(results.census)
    axes = with_axes(
        axes or default,
        accuracy=accuracy,
        level=level,
        table=table,
        attacker=attacker,
        persons=persons,
    )
    repeats = [t for t, r in results.releases.items() if r.sweep.same_as is not None]
    tidy = results.tidy().filter(~pl.col("release").is_in(repeats))
    errors = tidy.filter(
        (pl.col("metric") == axes.accuracy)
        & (pl.col("level") == axes.level)
        & pl.col("size_class").is_null()
        & (pl.col("table") == axes.table if axes.table else pl.lit(True))
    )
    if errors.group_by("release").len()["len"].max() not in (None, 1):
        raise ValueError(f"{axes.accuracy} has one figure per table: name the table")
    # a figure not measured as a whole (``reidentification.census``) says why for its parts
    risk = tidy.filter(
        (pl.col("metric") == axes.risk) | pl.lit(axes.risk).str.starts_with(pl.col("metric") + ".")
    )
    points = []
    for setting, rows in results.settings().items():
        first = results.releases[rows[0]]
        points.append(
            FrontierPoint(
                setting=setting,
                entry=first.sweep.entry,
                mechanism=first.mechanism,
                epsilon=first.epsilon,
                releases=tuple(rows),
                accuracy=_replicate_mean(errors, rows, f"no {axes.accuracy} at {axes.level}"),
                risk=_replicate_mean(risk, rows, f"no {axes.risk}"),
                varied=dict(first.sweep.varied),
                protects=all(results.releases[t].protects for t in rows),
                why_not=next(
                    (
                        _why_not(results.releases[t])
                        for t in rows
                        if not results.releases[t].protects
                    ),
                    None,
                ),
                qualifier=getattr(first.evaluation.card.common, "qualifier", ""),
            )
        )
    return points
