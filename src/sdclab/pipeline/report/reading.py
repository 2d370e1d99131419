"""What the report reads of a release's evaluation: link rates by attacker, method and group,
the accuracy of a table at a level, solution variability, and one series per setting for the
charts."""

from __future__ import annotations

from collections.abc import Callable

from sdclab.core.markup import decimal, esc, pct
from sdclab.core.size_classes import BLOCK_SIZE_CLASSES, size_class_label
from sdclab.pipeline.results import (
    COMPARED_TABLES,
    ExperimentResult,
    Linkage,
    LinkRates,
    NotMeasured,
    ReleaseResult,
    TableAccuracy,
    Value,
    Variability,
)

CLASSES = [size_class_label(lo, hi) for lo, hi in BLOCK_SIZE_CLASSES]


def rates(
    release: ReleaseResult, attacker: str, method: str, group: str
) -> LinkRates | NotMeasured:
    """One group's link rates by one method of one attacker, or why there are none."""
    reid = release.evaluation.reidentification.get(
        attacker, NotMeasured(f"the experiment has no {attacker} attacker")
    )
    if isinstance(reid, NotMeasured):
        return reid
    linkage: Linkage | NotMeasured = getattr(reid, method)
    if isinstance(linkage, NotMeasured):
        return linkage
    return linkage.groups.get(group) or NotMeasured(f"no group {group} in the results")


def rate(found: LinkRates | NotMeasured, metric: str) -> Value:
    """``metric`` of ``found`` rates (putative_rate, confirmed_rate, precision)."""
    return found if isinstance(found, NotMeasured) else getattr(found, metric)


def variability_of(release: ReleaseResult) -> Variability | NotMeasured:
    figures = release.evaluation.reconstruction
    return figures if isinstance(figures, NotMeasured) else figures.variability


def compared_mae(release: ReleaseResult, level: str, table: str = "P12") -> Value:
    """The MAE over the non-empty cells (withheld ones counted) of a compared table (or, for a
    declared census, of any of its tables) at ``level``, or why none."""
    return mae_of(accuracy_of(release, level, table))


def accuracy_of(release: ReleaseResult, level: str, table: str) -> TableAccuracy | NotMeasured:
    """The accuracy of ``table`` at ``level``: a compared US table's as the evaluation compares
    it, any other table's as measured, or why the release has none."""
    if table in COMPARED_TABLES:
        return release.evaluation.compared(level, table)
    found = release.evaluation.accuracy.get(table, {}).get(level)
    if found is None:
        return NotMeasured(f"the release publishes no {table} at {level} level")
    return found


def mae_of(compared: TableAccuracy | NotMeasured) -> Value:
    return compared if isinstance(compared, NotMeasured) else compared.mae_nonempty


def compared_cell(release: ReleaseResult, level: str, table: str) -> str:
    """The MAE of :func:`compared_mae`, with the share of the table's cells withheld beside it
    (their errors are in the MAE)."""
    compared = accuracy_of(release, level, table)
    shown = decimal(mae_of(compared))
    if isinstance(compared, NotMeasured) or compared.suppressed_share <= 0:
        return shown
    return f"{shown} <small>({pct(compared.suppressed_share)} withheld)</small>"


def by_setting(
    results: ExperimentResult, values: Callable[[ReleaseResult], list[Value]]
) -> dict[str, list[Value]]:
    """One series per setting: at each position the mean of its replicates' figures (the
    first one's reason where none measured it), so that a sweep's charts show settings, not
    every draw."""
    out: dict[str, list[Value]] = {}
    for setting, titles in results.settings().items():
        drawn = [values(results[t]) for t in titles]
        means: list[Value] = []
        for figures in zip(*drawn, strict=True):
            measured = [float(v) for v in figures if not isinstance(v, NotMeasured)]
            means.append(sum(measured) / len(measured) if measured else figures[0])
        out[setting] = means
    return out


def class_persons(results: ExperimentResult) -> list[str] | None:
    """Persons in each block-size class, as the charts' second line of x labels."""
    sizes = results.population.block_sizes
    if not sizes:
        return None
    return [f"n={sizes[c]['persons']:,}" if c in sizes else "" for c in CLASSES]


def guarantee_cell(release: ReleaseResult) -> str:
    """The budget as the card states it (its unit and relation on hover)."""
    g = release.evaluation.card.guarantee
    if not g.is_formal:
        return "unknown: no closed form" if g.open else "no formal guarantee"
    where = f"per {g.unit} record, {'replace' if g.relation == 'replace' else 'add/remove'}"
    asked = "" if g.asked is None else f" <small>(asked: {esc(g.asked.text())})</small>"
    return f'<span title="{esc(where)}">{esc(g.text())}</span>{asked}'


def common_cell(release: ReleaseResult) -> str:
    """The common-axis figure of a release's card, or "not comparable" with the reason."""
    common = release.evaluation.card.common
    if isinstance(common, NotMeasured):
        return f"not comparable: <small>{esc(common.reason)}</small>"
    standard = (
        ""
        if common.epsilon_standard is None
        else f" <small>(standard {common.epsilon_standard:.2f})</small>"
    )
    qualifier = f" <small>{esc(common.qualifier)}</small>" if common.qualifier else ""
    return f"{common.epsilon:.2f}{standard}{qualifier}"
