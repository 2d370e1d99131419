"""The charts of a US census's report: precision by block size, the link rates, the MAE by
level and solution variability (a declared census's are
:mod:`sdclab.pipeline.report.declared`'s)."""

from __future__ import annotations

from sdclab.censuses.us2010.geography import LEVELS
from sdclab.core.markup import EVALUATION, RELEASE
from sdclab.pipeline.report import declared
from sdclab.pipeline.report.charts import PRG_LABEL, line_chart
from sdclab.pipeline.report.html import figure
from sdclab.pipeline.report.reading import (
    CLASSES,
    by_setting,
    class_persons,
    compared_mae,
    rate,
    rates,
    variability_of,
)
from sdclab.pipeline.results import (
    ExperimentResult,
    NotMeasured,
    Reidentification,
    ReleaseResult,
    Value,
)


def all_charts(results: ExperimentResult) -> list[str]:
    """The figures, each labelled with its source."""
    if results.census is not None:
        return declared.charts(results, results.census)
    return [
        *_precision_charts(results),
        declared.rates_chart(results),
        _mae_chart(results, "P12", "MAE of P12 (non-empty cells, withheld ones counted)"),
        _mae_chart(results, "P1", "MAE of totals (P1, populated geounits, withheld ones counted)"),
        _solvar_chart(results),
    ]


def _precision_charts(results: ExperimentResult) -> list[str]:
    """Precision by block size, of all and of nonmodal persons, for each attacker some release
    was reidentified against."""
    charts = []
    for attacker in ("census", "commercial"):
        if any(
            isinstance(r.evaluation.reidentification.get(attacker), Reidentification)
            for r in results.releases.values()
        ):
            for prefix, who in (("", "all persons"), ("nonmodal_", "nonmodal persons")):
                charts.append(
                    figure(
                        EVALUATION,
                        line_chart(
                            f"Precision by block size, {who} ({attacker})",
                            CLASSES,
                            _precision_series(results, attacker, prefix),
                            source=EVALUATION,
                            notes=class_persons(results),
                        ),
                    )
                )
    return charts


def _precision_series(results: ExperimentResult, attacker: str, prefix: str) -> dict:
    groups = [f"block_size_{c}" for c in CLASSES]
    series = by_setting(
        results,
        lambda release: [
            rate(rates(release, attacker, "reconstruction", f"{prefix}{c}"), "precision")
            for c in groups
        ],
    )
    # the guess from the published tract totals of the first release that has one
    for title, release in results.releases.items():
        guess = [rate(rates(release, attacker, "prg", f"{prefix}{c}"), "precision") for c in groups]
        if not all(isinstance(g, NotMeasured) for g in guess):
            series[f"{PRG_LABEL} of {title})"] = guess
            break
    return series


def _mae_chart(results: ExperimentResult, table: str, what: str) -> str:
    """The MAE of a compared ``table`` (``what``: its title) by geography level."""
    return figure(
        EVALUATION,
        line_chart(
            f"{what} by geography level",
            list(LEVELS),
            by_setting(results, lambda r: [compared_mae(r, lv, table) for lv in LEVELS]),
            percent=False,
            source=EVALUATION,
        ),
    )


def _solvar_chart(results: ExperimentResult) -> str:
    """The cumulative share of blocks by solution variability."""
    cdf_points = ["0", "0.01", "0.02", "0.05", "0.1", "0.2", "0.5", "1"]
    return figure(
        RELEASE,
        line_chart(
            "Solution variability: share of blocks with solvar ≤ x",
            cdf_points,
            by_setting(results, lambda r: _solvar_curve(r, cdf_points)),
            source=RELEASE,
        ),
    )


def _solvar_curve(release: ReleaseResult, points: list[str]) -> list[Value]:
    variability = variability_of(release)
    if isinstance(variability, NotMeasured):
        return [variability] * len(points)
    shares = variability.cumulative_share_of_blocks
    return [shares.get(p, NotMeasured(f"solvar ≤ {p} is not in the results")) for p in points]
